"""Finishing a file does not hold the GIL: another Python thread runs while close(),
the destructor of an unclosed writer, and getvalue() do their work.

The checks are not about timing. A poller thread records what it sees of the work
in progress (the size of the file being finished; the memory a copy is filling). A
thread that held the GIL through that work would let the poller see at most one state
strictly inside it (the one a system call that was already running returned), so two
distinct intermediate states prove the poller ran Python code during the work. Each
check gets three tries, in case the poller is not scheduled at all on a busy machine.
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from arrayds import _native

# ~8 MiB left to encode at close (max_parallelism batches of 1 MiB in flight), zstd:9:
# several 1 MiB buffer flushes to the file while the encoders run.
OPTIONS = "group_size:1,zstd:9,max_parallelism:8"
RECORDS = [
    np.random.default_rng(i).integers(0, 16, size=64 << 10, dtype=np.uint8).tobytes()
    for i in range(16 * 9)
]
TRIES = 3


def intermediate_states(observe: Callable[[], int], work: Callable[[], None]) -> set[int]:
    """The values observe() returned in a poller thread while work() ran in this one,
    other than the ones before and after."""
    first = observe()
    seen: set[int] = set()
    stop = threading.Event()
    started = threading.Event()

    def poll() -> None:
        started.set()
        while not stop.is_set():
            seen.add(observe())

    poller = threading.Thread(target=poll)
    poller.start()
    started.wait()
    try:
        work()
    finally:
        stop.set()
        poller.join()
    return seen - {first, observe()}


def file_size(path: Path) -> Callable[[], int]:
    return lambda: os.stat(path).st_size


@pytest.mark.parametrize("finish", ["close", "destructor"])
def test_other_threads_run_while_a_file_is_finished(tmp_path: Path, finish: str) -> None:
    path = tmp_path / "big.array_record"
    for _ in range(TRIES):
        w = _native.Writer(str(path), OPTIONS)
        w.write_many(RECORDS)
        if finish == "close":
            middle = intermediate_states(file_size(path), w.close)
        else:
            holder = [w]
            del w

            def drop(holder: list = holder) -> None:
                holder.clear()  # the last reference: ~PyWriter finishes the file
                gc.collect()

            middle = intermediate_states(file_size(path), drop)
        assert _native.Reader(str(path)).read(len(RECORDS) - 1) == RECORDS[-1]
        if len(middle) >= 2:
            break
    assert len(middle) >= 2, middle


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def getvalue_states(record: bytes, n: int) -> set[int]:
    """Resident sizes a poller saw while getvalue() copied an n-record in-memory file
    (only those well inside the copy, not the poller's own small allocations)."""
    w = _native.Writer(None, "group_size:1,uncompressed")
    w.write_many([record] * n)
    w.close()
    got: list[bytes] = []
    base = resident_bytes()
    middle = intermediate_states(resident_bytes, lambda: got.append(w.getvalue()))
    value = got[0]
    assert w.getvalue() is value  # built once
    r = _native.Reader.from_bytes(value, "memory")
    assert r.num_records() == n and r.read(n - 1) == record
    return {m for m in middle if m > base + (16 << 20)}


def test_other_threads_run_while_getvalue_copies() -> None:
    """getvalue() of a 192 MiB in-memory file: the copy fills fresh pages, so the
    process's resident memory grows while it runs."""
    record = bytes(range(256)) * 4096  # 1 MiB
    for _ in range(TRIES):
        middle = getvalue_states(record, 192)
        if len(middle) >= 2:
            break
    assert len(middle) >= 2, middle


def test_getvalue_errors(tmp_path: Path) -> None:
    w = _native.Writer(None, "group_size:1")
    w.write(b"x")
    with pytest.raises(ValueError, match="after close"):
        w.getvalue()
    w.close()
    assert _native.Reader.from_bytes(w.getvalue(), "m").read(0) == b"x"
    f = _native.Writer(str(tmp_path / "f.ar"), "group_size:1")
    f.close()
    with pytest.raises(ValueError, match="only for in-memory writers"):
        f.getvalue()
