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
(``_commit_segments_task``), which commits the array. Then a region write over the
whole array (mode ``r+``: every stored entry hidden, every segment parsed) and a
replacing write (mode ``w``: every stored file removed), each in shards of 128
chunks, have their commits measured the same way, each on its own hard-linked copy
of the committed array.

``--records``: the same for a records dataset written from a dask bag of n
one-record partitions (one shard each, ``kinds/records/write.py``): ``entries`` is
``commit_shards`` over every partition's result, ``segments`` is ``commit_segments``
over the references the segment tasks wrote.

``--tree``: the same for an xarray DataTree whose group ``a`` holds a variable of n
one-element chunks (``xarray/tree.py``): ``segments`` is the tree's commit over the
references its segment tasks wrote (a copy in ``a/v``, ``a`` and the root), which
commits the tree; ``entries`` the same commit over every shard entry (read back from
those segments: what the commit received before tree writes had segments), on a
hard-linked copy.

    python benchmarks/bench_write_commit.py 100000
    python benchmarks/bench_write_commit.py --records 100000
    python benchmarks/bench_write_commit.py --tree 100000
"""

from __future__ import annotations

import argparse
import dataclasses
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
import dask.bag as db
from dask.callbacks import Callback

import arrayds
from arrayds.kinds.array import dask as ad
from arrayds.kinds.records import write as rw
from arrayds.nodes import history as log
from arrayds.storage import get_store
from arrayds.xarray import tree as xtree


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
    if kind.startswith("tree-"):
        doc = xtree._commit_task(job, received)
        received = [r for plan in received for r in plan]
        member = doc["snapshot"]["members"]["a"]["snapshot"]["members"]["v"]
        shape = [len(member["shards"])]
    elif kind.startswith("records-"):
        commit = rw.commit_shards if kind == "records-entries" else rw.commit_segments
        man = commit(received, job, "w-", None, "raw")
        received = [r for seg in received for r in seg] if kind == "records-segments" else received
        shape = [len(rw.RecordsDataset.from_committed(job.store, job.node, man))]
    else:
        task = ad._commit_task if kind == "entries" else ad._commit_segments_task
        shape = list(task(job, received).shape)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    maxrss = status_kib("VmHWM")
    return {"traced_peak": peak, "rss_above": (maxrss - before) * 1024, "wall": wall,
            "cpu": cpu, "received": len(received), "shape": shape}  # fmt: skip


class _Entries(Callback):
    def __init__(self) -> None:
        super().__init__()
        self.got: dict[Any, Any] = {}

    def _posttask(self, key, result, dsk, state, id):  # noqa: A002 - dask's names
        if str(key).startswith("arrayds-shard-"):
            self.got[key] = result


def held_write(x: Any, url: str, **kw: Any) -> tuple[Any, list[Any], list[Any], float]:
    """Run a dask write of ``x`` to ``url`` with its commit task held back: the commit
    job, the segment references and the shard entries it would have received, and
    the time of the shard and segment tasks."""
    held: dict[str, Any] = {}

    def hold(job: Any, refs: list[dict[str, Any]]) -> None:
        held["job"], held["refs"] = job, refs

    def hold_entries(job: Any, entries: list[dict[str, Any]]) -> None:
        held["job"], held["refs"] = job, []  # at most SEGMENT_LIMIT shards: no segments

    real = ad._commit_segments_task, ad._commit_task
    ad._commit_segments_task, ad._commit_task = hold, hold_entries
    try:
        d = arrayds.to_arrayrecord(x, url, compute=False, **kw)
        t0 = time.perf_counter()
        with _Entries() as seen, dask.config.set(scheduler="threads"):
            d.compute()
        took = time.perf_counter() - t0
    finally:
        ad._commit_segments_task, ad._commit_task = real
    entries = [seen.got[k] for k in sorted(seen.got, key=lambda k: int(str(k).rsplit("-", 1)[1]))]
    return held["job"], held["refs"], entries, took


def commit_in_child(
    job: Any, kind: str, received: list[Any], url: str, workdir: str, copy: str | None
) -> dict[str, Any]:
    """Run the held commit ``job`` over ``received`` in a fresh process, on ``url``
    or on a hard-linked copy of it at ``copy``; its measurements."""
    if copy is not None:
        subprocess.run(["cp", "-al", url, copy], check=True)
        url = copy
    if hasattr(job, "__slots__"):  # an array's CommitJob (a records plan names its store)
        job = type(job)(**{k: getattr(job, k) for k in job.__slots__} | {"url": url})
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
    return json.loads(out.stdout.splitlines()[-1])


def run(n: int, workdir: str) -> list[dict[str, Any]]:
    """The commits of a write of ``n`` one-chunk shards (over every entry, then over
    the segment references, which leaves the array committed), then of a region
    write over the whole of it and of a replacing write (mode ``w``), both in shards
    of ``BOX`` chunks, on hard-linked copies of the committed array."""
    url = os.path.join(workdir, "a")
    t0 = time.perf_counter()
    job, refs, entries, took = held_write(da.arange(n, chunks=1), url, shard_size=1)
    print(f"n={n}: shard and segment tasks {took:.1f} s ({time.perf_counter() - t0:.1f} s "
          "with the graph)", flush=True)  # fmt: skip
    rows = []
    for kind, received, copy in (
        ("entries", entries, os.path.join(workdir, "entries")),
        ("segments", refs, None),  # commits the array the writes below change
    ):
        row = commit_in_child(job, kind, received, url, workdir, copy)
        assert row["shape"] == [n], row
        rows.append({"n": n, "write": "w-", "commit": kind, **row})
        print(json.dumps(rows[-1]), flush=True)
    shutil.rmtree(os.path.join(workdir, "entries"))
    x = -da.arange(n, chunks=1)
    for mode, kw in (("r+", {"region": slice(0, n)}), ("w", {})):
        copy = os.path.join(workdir, mode.replace("+", "p"))
        subprocess.run(["cp", "-al", url, copy], check=True)
        job, refs, entries, took = held_write(x, copy, mode=mode, shard_size=8 * BOX, **kw)
        print(f"n={n} mode {mode}: shard and segment tasks {took:.1f} s", flush=True)
        kind, received = ("segments", refs) if refs else ("entries", entries)
        row = commit_in_child(job, kind, received, copy, workdir, None)
        assert row["shape"] == [n], row
        rows.append({"n": n, "write": mode, "commit": kind, **row})
        print(json.dumps(rows[-1]), flush=True)
        shutil.rmtree(copy)
    return rows


def held_records_write(n: int, url: str) -> tuple[Any, list[Any], list[Any], float]:
    """A dask write of a bag of ``n`` one-record partitions to ``url`` with its
    commit held back: its plan, the segment references and the partition results the
    commit would have received, and the time of the other tasks."""
    held: dict[str, Any] = {}

    def hold(segments: list[Any], plan: Any, *args: Any) -> None:
        held["plan"], held["refs"] = plan, segments

    class Results(Callback):
        def __init__(self) -> None:
            super().__init__()
            self.got: dict[int, Any] = {}

        def _posttask(self, key, result, dsk, state, id):  # noqa: A002 - dask's names
            if isinstance(key, tuple) and str(key[0]).startswith("write-records-"):
                self.got[key[1]] = result

    bag = db.from_sequence(range(n), npartitions=n).map(lambda i: b"%d" % i)
    real, rw.commit_segments = rw.commit_segments, hold
    try:
        d = rw.write_records(bag, url, serializer="raw", compute=False)
        t0 = time.perf_counter()
        with Results() as seen, dask.config.set(scheduler="threads"):
            d.compute()
        took = time.perf_counter() - t0
    finally:
        rw.commit_segments = real
    return held["plan"], held["refs"], [seen.got[k] for k in range(n)], took


def run_records(n: int, workdir: str) -> list[dict[str, Any]]:
    """The commits of a records write of ``n`` one-record partitions: over every
    partition's result (on a hard-linked copy), then over the segment references."""
    url = os.path.join(workdir, "r")
    plan, refs, results, took = held_records_write(n, url)
    print(f"records n={n}: shard and segment tasks {took:.1f} s", flush=True)
    rows = []
    copy = os.path.join(workdir, "entries")
    subprocess.run(["cp", "-al", url, copy], check=True)
    for kind, received, at in (("records-entries", results, copy), ("records-segments", refs, url)):
        job = dataclasses.replace(plan, store=get_store(at))
        row = commit_in_child(job, kind, received, at, workdir, None)
        assert row["shape"] == [n], row
        rows.append({"n": n, "write": "records w-", "commit": kind.split("-")[1], **row})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def run_tree(n: int, workdir: str) -> list[dict[str, Any]]:
    """The commits of a DataTree write whose group ``a`` holds ``v`` of ``n``
    one-element shards: over every shard entry (on a hard-linked copy), then over the
    segment references, which commits the tree."""
    import xarray as xr

    url = os.path.join(workdir, "t")
    held: dict[str, Any] = {}

    def hold(job: Any, results: list[Any]) -> None:
        held["job"], held["results"] = job, results

    v = da.arange(n, chunks=1)
    dt = xr.DataTree.from_dict({"/": xr.Dataset(), "/a": xr.Dataset({"v": ("x", v)})})
    real, xtree._commit_task = xtree._commit_task, hold
    try:
        d = arrayds.to_arrayrecord(dt, url, shard_size=1, compute=False)
        t0 = time.perf_counter()
        with dask.config.set(scheduler="threads"):
            d.compute()
        took = time.perf_counter() - t0
    finally:
        xtree._commit_task = real
    print(f"tree n={n}: shard and segment tasks {took:.1f} s", flush=True)
    job, refs = held["job"], held["results"]
    store = get_store(url)
    entries = []  # the entries the segments hold, as the shard tasks returned them
    for (rel, name), got in zip(job.order, refs, strict=True):
        member = "/".join(filter(None, (rel, name)))
        if member in job.segmented:
            got = [e for ref in got for e in log.segment(store, member, ref[member], "bench")]
        entries.append(got)
    unsegmented = copy_job(job)
    unsegmented.segmented = set()
    rows = []
    copy = os.path.join(workdir, "entries")
    subprocess.run(["cp", "-al", url, copy], check=True)
    for kind, j, received, at in (
        ("tree-entries", unsegmented, entries, copy),
        ("tree-segments", job, refs, url),
    ):
        j = copy_job(j)
        j.url = at
        row = commit_in_child(j, kind, received, at, workdir, None)
        assert row["shape"] == [n], row
        rows.append({"n": n, "write": "DataTree w-", "commit": kind.split("-")[1], **row})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def copy_job(job: Any) -> Any:
    """A shallow copy of an xarray ``CommitJob`` (attributes only)."""
    out = type(job).__new__(type(job))
    out.__dict__.update(job.__dict__)
    return out


BOX = 128
"""Chunks per shard of the region and replacing writes (the commit's cost is in the
stored list it changes: every entry of it is hidden or replaced)."""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("sizes", type=int, nargs="*", default=[100_000])
    p.add_argument("--workdir", default=None)
    p.add_argument("--records", action="store_true", help="a records write of n partitions")
    p.add_argument("--tree", action="store_true", help="a DataTree write of n chunks")
    p.add_argument("--measure", nargs=3, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return 0
    rows = []
    for n in args.sizes:
        workdir = tempfile.mkdtemp(dir=args.workdir)
        try:
            kind = run_records if args.records else run_tree if args.tree else run
            rows += kind(n, workdir)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    mib = 1 << 20
    print("| chunks | write | commit receives | items received | traced peak "
          "| peak RSS above start | wall | CPU |")  # fmt: skip
    print("|---:|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']:,} | {r['write']} | {r['commit']} | {r['received']:,} "
            f"| {r['traced_peak'] / mib:.1f} MiB "
            f"| {r['rss_above'] / mib:.1f} MiB | {r['wall']:.2f} s | {r['cpu']:.2f} s |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
