"""The engine's SIGBUS handler next to Python's faulthandler (run by test_mmap.py, one
scenario per subprocess: some of them are meant to die of SIGBUS).

    python sigbus_chain.py WORKDIR SCENARIO ORDER

ORDER: ``before`` enables faulthandler before the engine installs its handler (as
pytest and ``python -X faulthandler`` do); ``after`` enables it once the engine's handler
is in place and then maps another file, so that the engine re-installs its handler on
top of faulthandler, which itself chains back to the engine's first installation.

SCENARIO:
* ``threads``: eight threads, each with its own mapped file, fault at the same moment
  on the part a truncation removed (while a ninth thread keeps mapping files, so the
  handler is re-installed meanwhile); prints a JSON report and exits 0.
* ``foreign``: a SIGBUS the engine does not own (a read of a truncated file through
  Python's own ``mmap`` module) goes to faulthandler once, and the process dies of it.
* ``raise``: the same for ``signal.raise_signal(SIGBUS)``.
"""

from __future__ import annotations

import faulthandler
import json
import mmap
import os
import signal
import sys
import threading

import numpy as np

from arrayds import _native

RECORD = 4000
N = 600
THREADS = 8


def write(path: str) -> list[bytes]:
    rng = np.random.default_rng(len(path))
    records = [rng.bytes(RECORD) for _ in range(N)]
    w = _native.Writer(path, "group_size:1,uncompressed")
    w.write_many(records)
    w.close()
    return records


def install(workdir: str, order: str) -> list[_native.Reader]:
    """The handlers in the ORDER asked for; returns readers that keep mappings alive."""
    if order == "before":
        faulthandler.enable()
    first = os.path.join(workdir, "first.ar")
    write(first)
    readers = [_native.Reader(first)]  # installs the engine's handler
    if order == "after":
        faulthandler.enable()  # on top of the engine's handler, chained to it
        second = os.path.join(workdir, "second.ar")
        write(second)
        readers.append(_native.Reader(second))  # the engine's again, chained to faulthandler
    assert all(r.is_mapped() for r in readers)
    return readers


def threads(workdir: str) -> dict:
    paths = [os.path.join(workdir, f"t{i}.ar") for i in range(THREADS)]
    records = [write(p) for p in paths]
    readers = [_native.Reader(p) for p in paths]
    for r, rec in zip(readers, records, strict=True):
        assert r.is_mapped() and r.read(0) == rec[0]
    before = _native._mmap_repaired_faults()
    for p in paths:
        os.truncate(p, 256 << 10)
    start = threading.Barrier(THREADS + 1)
    results: list[str] = [""] * THREADS
    stop = threading.Event()

    def fault(i: int) -> None:
        start.wait()
        try:
            readers[i].read(N - 1 - i)
        except OSError as e:  # CorruptionError is an OSError
            results[i] = type(e).__name__
        else:
            results[i] = "no error"

    def churn() -> None:  # maps files while the others fault: the handler is re-checked
        extra = os.path.join(workdir, "churn.ar")
        write(extra)
        while not stop.is_set():
            _native.Reader(extra).read(0)

    workers = [threading.Thread(target=fault, args=(i,)) for i in range(THREADS)]
    churner = threading.Thread(target=churn)
    churner.start()
    for t in workers:
        t.start()
    start.wait()
    for t in workers:
        t.join()
    stop.set()
    churner.join()
    # the part that is left still reads right
    intact = all(r.read(1) == rec[1] for r, rec in zip(readers, records, strict=True))
    return {
        "errors": results,
        "repaired_faults": _native._mmap_repaired_faults() - before,
        "intact": intact,
    }


def foreign(workdir: str) -> None:
    path = os.path.join(workdir, "foreign.bin")
    with open(path, "wb") as f:
        f.write(bytes(1 << 20))
    with open(path, "rb") as f:
        m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    os.truncate(path, 0)
    print("faulting", flush=True)
    m[(1 << 20) - 1]  # SIGBUS in a mapping the engine does not know


def main() -> None:
    workdir, scenario, order = sys.argv[1:4]
    readers = install(workdir, order)
    if scenario == "threads":
        json.dump(threads(workdir), sys.stdout)
    elif scenario == "foreign":
        foreign(workdir)
    elif scenario == "raise":
        print("raising", flush=True)
        signal.raise_signal(signal.SIGBUS)
    else:
        raise SystemExit(f"unknown scenario {scenario!r}")
    del readers


if __name__ == "__main__":
    main()
