"""What one small local append costs with and without the background shard sync, and
what the per-open and per-append parsing of this release costs.

    python benchmarks/bench_commit_path.py            # 1,000 appends, 20,000 parses
    python benchmarks/bench_commit_path.py --quick    # 200 appends, 2,000 parses

* **appends**: one array, 1 KiB rows in chunks of one row, appended to with
  ``compact=False``; appends alternate between the shipped path (the shard linked into
  place and synced by the background thread while the commit is prepared, docs/spec.md
  7.2) and the fallback of that path (the shard synced, then renamed, before the
  commit starts), so that both see the same disk and the same load. Median wall-clock
  and CPU time (this process) of each.
* **parsing**: microseconds to build a grid axis (``AxisGrid``), to parse the shard
  entry of an appended array and that of a records dataset (best of 5 timings).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import timeit

import numpy as np

import arrayds
from arrayds.kinds.array.grid import AxisGrid, ChunkGrid
from arrayds.kinds.array.manifest import _parse_shards
from arrayds.kinds.records.manifest import ShardInfo
from arrayds.storage import local


def appends(n: int, workdir: str) -> dict[str, tuple[float, float]]:
    """-> {variant: (median wall ms, median CPU ms)}."""
    rows = np.random.default_rng(1).standard_normal((n + 1, 128))
    a = arrayds.open_array(
        os.path.join(workdir, "a"), mode="w", shape=(0, 128), dtype="f8", chunks=(1, 128)
    )
    shipped = local._link_in_background
    times: dict[str, tuple[list[float], list[float]]] = {
        "background sync": ([], []),
        "sync, then rename": ([], []),
    }
    try:
        for i in range(n):
            background = i % 2 == 0
            local._link_in_background = shipped if background else (lambda tmp, final: False)
            wall, cpu = times["background sync" if background else "sync, then rename"]
            c0, t0 = time.process_time(), time.perf_counter()
            a.append(rows[i : i + 1], compact=False)
            wall.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    finally:
        local._link_in_background = shipped
    return {
        k: (statistics.median(w) * 1e3, statistics.median(c) * 1e3) for k, (w, c) in times.items()
    }


def parsing(number: int) -> dict[str, float]:
    """-> {what: microseconds each}."""
    grid = ChunkGrid([AxisGrid([[1, 10_000]]), AxisGrid([[1, 1]])])
    entry = {
        "path": "c/0661a8fbb55831745e745f90-0.array_record",
        "start": [0, 0],
        "stop": [1, 1],
        "records": 1,
        "bytes": 131072,
    }
    info = {
        "path": "r-0661a8d4e473ff87b21cfbf7.array_record-00000-of-00001",
        "records": 20,
        "bytes": 131072,
        "data_bytes": 2000,
        "options": "group_size:1,transpose:false,pad_to_block_boundary:false,zstd:3",
    }
    cases = {
        "AxisGrid([[1, 10000]])": lambda: AxisGrid([[1, 10_000]]),
        "array shard entry": lambda: _parse_shards([entry], grid, "bench"),
        "records shard entry": lambda: ShardInfo.from_json(info, "bench"),
    }
    return {
        k: min(timeit.repeat(f, number=number, repeat=5)) / number * 1e6 for k, f in cases.items()
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--workdir", default=None, help="a folder on the disk to measure")
    args = p.parse_args(argv)
    n, number = (200, 2_000) if args.quick else (1_000, 20_000)
    workdir = tempfile.mkdtemp(prefix="bench-commit-", dir=args.workdir)
    try:
        got = appends(n, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"## One local append ({n} appends of a 1 KiB row, alternating)\n")
    print("| shard sync | wall (median) | CPU (median) |\n|---|---:|---:|")
    for k, (wall, cpu) in got.items():
        print(f"| {k} | {wall:.2f} ms | {cpu:.2f} ms |")
    print("\n## Parsing (best of 5)\n\n| what | each |\n|---|---:|")
    for k, us in parsing(number).items():
        print(f"| {k} | {us:.2f} us |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
