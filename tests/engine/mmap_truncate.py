"""Truncates ArrayRecord files while readers hold them open (run by test_mmap.py in a
subprocess: a SIGBUS the engine failed to handle kills this process, not pytest).

    python mmap_truncate.py WORKDIR

Prints one JSON object: for each scenario, what the reads did. Exit status 0 unless a
check failed (AssertionError) or the process died.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import threading

faulthandler.enable()  # as pytest does: its SIGBUS handler is installed before ours

import numpy as np  # noqa: E402

from arrayds import _native  # noqa: E402

RECORD = 4000
N = 2000


def write(path: str, options: str) -> list[bytes]:
    rng = np.random.default_rng(7)  # incompressible: the file is ~8 MB for any codec
    records = [rng.bytes(RECORD - i % 7) for i in range(N)]
    w = _native.Writer(path, options)
    w.write_many(records)
    w.close()
    return records


def expect_error(fn) -> str:
    try:
        fn()
    except OSError as e:  # CorruptionError is an OSError
        return type(e).__name__
    raise AssertionError("no error after truncation")


def truncated_reads(workdir: str, options: str, mmap: bool) -> dict:
    """Truncate to 1 MiB, then every read path on the lost part, then the kept part."""
    path = os.path.join(workdir, f"t_{options.replace(':', '').replace(',', '_')}_{mmap}.ar")
    records = write(path, options)
    r = _native.Reader(path, mmap=mmap)
    assert r.is_mapped() == mmap
    assert r.read(0) == records[0]  # (not a record of the lost part: chunks are cached)
    before = _native._mmap_repaired_faults()
    os.truncate(path, 1 << 20)
    errors = [expect_error(lambda: r.read(N - 1))]
    repaired = _native._mmap_repaired_faults() - before
    errors.append(expect_error(lambda: r.read_batch([0, N - 2, N - 3])))
    errors.append(expect_error(lambda: r.read_range(N - 10, N)))
    out = np.empty(len(records[N - 4]), dtype=np.uint8)
    errors.append(expect_error(lambda: r.read_into([N - 4], [out])))
    # the part that is still there reads as before (with pread once a fault was seen)
    assert r.read_range(0, 5) == records[:5]
    assert r.read_batch([3, 1]) == [records[3], records[1]]
    return {"errors": errors, "repaired_faults": repaired, "mapped_after": r.is_mapped()}


def concurrent(workdir: str) -> dict:
    """Four threads read random batches while the main thread shrinks the file."""
    path = os.path.join(workdir, "concurrent.ar")
    records = write(path, "group_size:1,uncompressed")
    r = _native.Reader(path)
    assert r.is_mapped()
    stop = threading.Event()
    results: list[str] = []
    lock = threading.Lock()

    def reader(seed: int) -> None:
        rng = np.random.default_rng(seed)
        while not stop.is_set():
            idx = rng.integers(0, N, size=64)
            try:
                got = r.read_batch(idx)
            except OSError as e:
                kind = type(e).__name__
            else:
                assert got == [records[i] for i in idx]
                kind = "ok"
            with lock:
                results.append(kind)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    size = os.path.getsize(path)
    while size > (1 << 20):
        size -= 512 << 10
        os.truncate(path, size)
        threading.Event().wait(0.01)
    stop.set()
    for t in threads:
        t.join()
    return {k: results.count(k) for k in sorted(set(results))}


def handler_replaced(workdir: str) -> dict:
    """faulthandler re-installed on top of ours: the next open puts ours back."""
    a = os.path.join(workdir, "replaced_a.ar")
    b = os.path.join(workdir, "replaced_b.ar")
    write(a, "group_size:1")
    write(b, "group_size:1")
    ra = _native.Reader(a)
    faulthandler.disable()
    faulthandler.enable()  # now first in line for SIGBUS
    rb = _native.Reader(b)  # re-installs ours, chained to faulthandler
    os.truncate(a, 1 << 20)
    err = expect_error(lambda: ra.read(N - 1))
    return {"error": err, "other_reader_ok": len(rb.read(N - 1)) > 0}


def main() -> None:
    workdir = sys.argv[1]
    report = {}
    for options in ("group_size:1", "group_size:1,uncompressed", "group_size:100,zstd:1"):
        for mmap in (True, False):
            report[f"{options} mmap={mmap}"] = truncated_reads(workdir, options, mmap)
    report["concurrent"] = concurrent(workdir)
    report["handler_replaced"] = handler_replaced(workdir)
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
