"""The commit task's memory when dask writes n one-row chunks (``shard_size=1``).

One threaded dask write of ``da.arange(n, chunks=1)`` to a local folder runs every
shard task and every segment task (docs/spec.md 14.4.1); its commit task is held back
and the inputs it received (the segments' references) are saved, with the entries the
shard tasks returned (what the commit received before segments). Each commit then
runs alone in a fresh process, as on a dask worker: it unpickles its input and
commits, under ``tracemalloc``; the table gives that process's traced peak and its
peak RSS above its RSS before the input was loaded, with the wall and CPU time of
the commit. ``entries``: the commit over every shard entry (``_commit_task``, the
commit of a write of at most ``SEGMENT_LIMIT`` shards, and of every write before
segments); ``segments``: the commit over the segment references
(``_commit_segments_task``). Each commits to its own hard-linked copy of the folder.

    /work/wt/py benchmarks/bench_write_commit.py 100000
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from typing import Any

import dask
import dask.array as da
from dask.callbacks import Callback

import arrayds
from arrayds.kinds.array import dask as ad


def status_kib(field: str) -> int:
    """``VmRSS``/``VmHWM`` of this process (``ru_maxrss`` would carry the parent's
    peak over the fork)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def measure(kind: str, job_file: str, input_file: str) -> dict[str, Any]:
    """Run one commit in this process; its memory and time."""
    with open(job_file, "rb") as f:
        job = pickle.load(f)
    before = status_kib("VmRSS")
    tracemalloc.start()
    t0, c0 = time.perf_counter(), time.process_time()
    with open(input_file, "rb") as f:
        received = pickle.load(f)
    task = ad._commit_task if kind == "entries" else ad._commit_segments_task
    a = task(job, received)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    maxrss = status_kib("VmHWM")
    return {"traced_peak": peak, "rss_above": (maxrss - before) * 1024, "wall": wall,
            "cpu": cpu, "received": len(received), "shape": list(a.shape)}  # fmt: skip


class _Entries(Callback):
    def __init__(self) -> None:
        super().__init__()
        self.got: dict[Any, Any] = {}

    def _posttask(self, key, result, dsk, state, id):  # noqa: A002 - dask's names
        if str(key).startswith("arrayds-shard-"):
            self.got[key] = result


def run(n: int, workdir: str) -> list[dict[str, Any]]:
    url = os.path.join(workdir, "a")
    held: dict[str, Any] = {}

    def hold(job: Any, refs: list[dict[str, Any]]) -> None:
        held["job"], held["refs"] = job, refs

    real, ad._commit_segments_task = ad._commit_segments_task, hold
    try:
        t0 = time.perf_counter()
        d = arrayds.to_arrayrecord(da.arange(n, chunks=1), url, shard_size=1, compute=False)
        graph_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        with _Entries() as seen, dask.config.set(scheduler="threads"):
            d.compute()
        write_s = time.perf_counter() - t0
    finally:
        ad._commit_segments_task = real
    entries = [seen.got[k] for k in sorted(seen.got, key=lambda k: int(str(k).rsplit("-", 1)[1]))]
    print(f"n={n}: graph {graph_s:.1f} s, shard and segment tasks {write_s:.1f} s", flush=True)
    rows = []
    for kind, received in (("entries", entries), ("segments", held["refs"])):
        copy = os.path.join(workdir, kind)
        subprocess.run(["cp", "-al", url, copy], check=True)
        job = held["job"]
        job = type(job)(**{k: getattr(job, k) for k in job.__slots__} | {"url": copy})
        jf, inf = os.path.join(workdir, "job.pkl"), os.path.join(workdir, "in.pkl")
        with open(jf, "wb") as f:
            pickle.dump(job, f)
        with open(inf, "wb") as f:
            pickle.dump(received, f)
        out = subprocess.run(
            [sys.executable, __file__, "--measure", kind, jf, inf],
            check=True,
            capture_output=True,
            text=True,
        )
        row = json.loads(out.stdout.splitlines()[-1])
        assert row["shape"] == [n], row
        rows.append({"n": n, "commit": kind, **row})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sizes", type=int, nargs="*", default=[100_000])
    p.add_argument("--workdir", default=None)
    p.add_argument("--measure", nargs=3, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return 0
    rows = []
    for n in args.sizes:
        workdir = tempfile.mkdtemp(dir=args.workdir)
        try:
            rows += run(n, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    mib = 1 << 20
    print("| chunks | commit receives | items received | traced peak | peak RSS above start "
          "| wall | CPU |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['commit']} | {r['received']:,} | {r['traced_peak'] / mib:.1f} MiB "
            f"| {r['rss_above'] / mib:.1f} MiB | {r['wall']:.2f} s | {r['cpu']:.2f} s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
