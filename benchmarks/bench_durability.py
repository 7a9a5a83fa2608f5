"""What durable local commits cost: the A1 and A4 dask array writes and a records
write, with the shard and folder syncs of docs/spec.md 7.2 and without them.

    python benchmarks/bench_durability.py              # A1 8192^2, A4 4096^2, records 8 x 50,000
    python benchmarks/bench_durability.py --quick      # 4x smaller, 2 repeats

"without" is the same code with :func:`arrayds.storage.local.sync_file` and
:func:`arrayds.storage.local.sync_folder` replaced by no-ops in this process: what a write
did before durable commits (only the temporary manifest was fsynced). The two variants run
interleaved, ``--repeat`` times each, on the data and settings of
benchmarks/bench_arrays.py (A1: float32 8192x8192, chunks 1024x1024, zstd:1, 16 MiB
shards, threaded scheduler; A4: 4096x4096, chunks 64x64) and of
benchmarks/bench_records.py (8 shards of 50,000 records of about 1 KiB, zstd:3, a dask
bag of 8 partitions, threaded scheduler here). Best wall-clock and least CPU seconds
(this process) of each; the write target is removed (untimed) before each run, and
the page cache is hot.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import dask
import dask.array as da
import dask.bag as db

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_arrays  # noqa: E402
import bench_records  # noqa: E402

import arrayds  # noqa: E402
from arrayds.storage import local as store_mod  # noqa: E402

REAL = (store_mod.sync_file, store_mod.sync_folder)


def syncs(on: bool) -> None:
    if on:
        store_mod.sync_file, store_mod.sync_folder = REAL
    else:
        store_mod.sync_file = store_mod.sync_folder = lambda path: None


def run(
    repeat: int, fn: Callable[[str], Any], root: str, counted: list[int]
) -> dict[bool, tuple[float, float]]:
    best: dict[bool, tuple[float, float]] = {}
    calls = [0]
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def count(real):
        def sync(fd):
            calls[0] += 1
            real(fd)

        return sync

    for _ in range(repeat):
        for on in (False, True):
            shutil.rmtree(root, ignore_errors=True)
            syncs(on)
            calls[0] = 0
            os.fsync, os.fdatasync = count(real_fsync), count(real_fdatasync)
            c0, t0 = time.process_time(), time.perf_counter()
            try:
                fn(root)
            finally:
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                os.fsync, os.fdatasync = real_fsync, real_fdatasync
                syncs(True)
            w, c = best.get(on, (float("inf"), float("inf")))
            best[on] = (min(w, wall), min(c, cpu))
            if on:
                counted[:] = [calls[0]]
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workdir", default=None)
    args = p.parse_args()
    n, n4, per_shard = (4096, 2048, 12_500) if args.quick else (8192, 4096, 50_000)
    repeat = 2 if args.quick else args.repeat
    work = tempfile.mkdtemp(prefix="bench-durability-", dir=args.workdir)
    rows = []
    try:
        a1 = da.from_array(bench_arrays.make_data(n), chunks=(1024, 1024))
        a4 = da.from_array(bench_arrays.make_data(n4), chunks=(64, 64))
        recs = [bench_records.make_records(per_shard, seed=k) for k in range(8)]
        bag = db.from_sequence(range(8), npartitions=8).map_partitions(
            lambda ks: [r for k in ks for r in recs[k]]
        )

        def array_write(x: da.Array) -> Callable[[str], Any]:
            return lambda r: arrayds.to_arrayrecord(x, r, compression="zstd:1")

        jobs = [
            ("A1 dask write", a1.nbytes, array_write(a1)),
            ("A4 dask write", a4.nbytes, array_write(a4)),
            (
                "records write",
                sum(len(x) for rs in recs for x in rs),
                lambda r: arrayds.to_arrayrecord(bag, r, serializer="raw"),
            ),
        ]
        with dask.config.set(scheduler="threads"):
            for name, nbytes, fn in jobs:
                counted: list[int] = []
                best = run(repeat, fn, os.path.join(work, "t"), counted)
                rows.append((name, nbytes, best, counted[0]))
                (w0, c0), (w1, c1) = best[False], best[True]
                print(
                    f"{name:14s} {nbytes / 1e6:7.0f} MB  without syncs {w0:6.2f} s "
                    f"(cpu {c0:6.2f})  with {w1:6.2f} s (cpu {c1:6.2f})  "
                    f"wall x{w1 / w0:.2f}  cpu x{c1 / c0:.2f}  {counted[0]} fsync calls",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
