"""Reading an arrayds dataset through its zarr view (``arrayds.zarr``) next to
arrayds' own read: the A2 and A4 read workloads of bench_arrays.py, same data.

    python benchmarks/bench_zarr_view.py            # the full sizes (8192² and 4096²)
    python benchmarks/bench_zarr_view.py --quick    # 2048² and 1024², one repeat

It runs in the project venv (zarr-python 3.1) and in ``.venv-latest`` (zarr-python 3.4,
Python 3.12: ``make test-latest`` builds it), where docs/performance.md's figures come
from, that venv's interpreter also named as the anchor interpreter below.

Workloads (docs/performance.md, "Arrays"; the data of bench_arrays.py, written once by
arrayds with ``compression="zstd:1"``, default shard grouping):

* A2: 8192x8192 float32 in 1024x1024 chunks, ``.sum().compute()`` of
  ``arrayds.from_arrayrecord(url)`` vs ``da.from_zarr(view)`` (one dask task per chunk
  both, threaded scheduler);
* A4 dask read: 4096x4096 float32 in 64x64 chunks (4096 chunks), ``.compute()`` of the
  same two dask arrays;
* A4 direct read: ``a[...]`` (arrayds) vs ``z[...]`` (zarr-python over the view).

Beside them, the **zarr floor**: the same reads by zarr-python of the same data kept in
its own ``MemoryStore``, uncompressed and with no codec but ``bytes`` (no decoding, no
I/O): what zarr-python itself spends on each chunk (its tasks, its codec pipeline, the
copy of every chunk into the result), which no store can go below.

Each figure is the best of ``--repeat`` runs, the runs of the readers interleaved;
CPU seconds (all threads of the process) are measured beside wall-clock seconds, and
the ratios are view / arrayds (above 1: the view is slower) and floor / arrayds.

Then the floor of the **anchor interpreter's zarr-python** (3.4; ``$ARRAYDS_ANCHOR_PYTHON``
or ``.venv-anchors``, through benchmarks/anchor_runner.py and
benchmarks/anchors/zarr_floor.py): the same floor reads of the same data, in the same
run after the rows above (each the fastest of ``--repeat`` runs, with that run's CPU
seconds), against the arrayds figures of the first table. Without an anchor
interpreter that table says it was skipped.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import dask
import dask.array as da
import numpy as np
import zarr
from zarr.storage import MemoryStore

import arrayds
import arrayds.zarr

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from anchor_runner import AnchorUnavailable, run_anchor  # noqa: E402
from bench_arrays import Timing, best_of, make_data  # noqa: E402

TARGET = 1.3
"""The target: reading through the view costs at most 1.3x arrayds' own read."""


def interleave(repeat: int, jobs: dict[str, Callable[[], Any]]) -> dict[str, Timing]:
    """The least wall-clock and the least CPU seconds of ``repeat`` runs of each job,
    the jobs run in turn."""
    runs: dict[str, list[Timing]] = {name: [] for name in jobs}
    for _ in range(repeat):
        for name, fn in jobs.items():
            runs[name].append(best_of(1, fn))
    out = {}
    for name, ts in runs.items():
        out[name] = Timing(min(ts))
        out[name].cpu = min(t.cpu for t in ts)
    return out


def workloads(root: str, n: int, chunk: int, n4: int, chunk4: int, repeat: int) -> list[tuple]:
    """The rows of the first table; each workload's data is left in ``root`` as
    ``<label>.npy`` for :func:`anchor_floor`."""
    rows = []
    for label, size, c in (("A2", n, chunk), ("A4", n4, chunk4)):
        url = os.path.join(root, label)
        data = make_data(size)
        np.save(os.path.join(root, f"{label}.npy"), data)
        arrayds.to_arrayrecord(da.from_array(data, chunks=c), url, compression="zstd:1", mode="w")
        a = arrayds.open_array(url)
        z = zarr.open_array(arrayds.zarr.open_store(url), mode="r")
        assert z.chunks == (c, c) and np.array_equal(z[...], data)
        f = zarr.create_array(
            MemoryStore(), shape=data.shape, chunks=(c, c), dtype=data.dtype, compressors=None
        )
        f[...] = data
        x, y, w = arrayds.from_arrayrecord(url), da.from_zarr(z), da.from_zarr(f)
        if label == "A2":
            want = float(data.sum(dtype=np.float64))
            for s in (x, y, w):
                assert np.isclose(float(s.sum(dtype=np.float64).compute()), want)
            cases = {"A2 sum": [lambda s=s: s.sum().compute() for s in (x, y, w)]}
        else:
            cases = {
                "A4 dask read": [s.compute for s in (x, y, w)],
                "A4 direct read": [lambda a=a: a[...], lambda z=z: z[...], lambda f=f: f[...]],
            }
        for name, jobs in cases.items():
            t = interleave(repeat, dict(zip(("arrayds", "view", "floor"), jobs, strict=True)))
            rows.append((name, f"{size}² in {c}² chunks", t["arrayds"], t["view"], t["floor"]))
        del f, w  # the floor's in-memory copy
    return rows


def anchor_floor(root: str, args: argparse.Namespace) -> dict[str, Any]:
    """The floor reads by the anchor interpreter's zarr-python (anchors/zarr_floor.py)
    -> ``{"sections": ..., "versions": ...}``, or ``{"skipped": why}``."""
    cases = [
        {"label": label, "data": os.path.join(root, f"{label}.npy"), "chunk": c}
        for label, c in (("A2", args.chunk), ("A4", args.chunk4))
    ]
    try:
        got = run_anchor("zarr_floor", {"cases": cases, "repeat": args.repeat})
    except AnchorUnavailable as e:
        return {"skipped": str(e)}
    return {"sections": got.sections, "versions": got.info["versions"]}


def render_anchor(rows: list[tuple], anchor: dict[str, Any]) -> str:
    """The anchor interpreter's floor beside arrayds' figures of ``rows``."""
    if "skipped" in anchor:
        return f"Anchor floor (zarr-python 3.4): skipped: {anchor['skipped']}."
    v = anchor["versions"]
    out = [
        f"The zarr floor of the anchor interpreter's zarr {v['zarr']} (Python "
        f"{v['python']}, dask {v['dask']}), same data, same run, after the rows above:",
        "",
        "| workload | arrayds wall / CPU s | zarr floor wall / CPU s "
        "| floor / arrayds wall (CPU) |",
        "|---|---|---|---|",
    ]
    for name, _what, own, _view, _floor in rows:
        s = anchor["sections"][name]
        out.append(
            f"| {name} | {own:.3f} / {own.cpu:.3f} | {s['seconds']:.3f} / {s['cpu']:.3f} | "
            f"{s['seconds'] / own:.2f}x ({s['cpu'] / own.cpu:.2f}x) |"
        )
    return "\n".join(out)


def render(rows: list[tuple], args: argparse.Namespace, elapsed: float) -> str:
    load = os.getloadavg()
    out = [
        f"zarr {zarr.__version__}, arrayds {arrayds.__version__}; best of {args.repeat}; "
        f"load average before {args.load_before[0]:.2f}, after {load[0]:.2f}; "
        f"{elapsed:.0f} s in all",
        "",
        "| workload | data | arrayds wall / CPU s | view wall / CPU s | view / arrayds "
        f"wall (CPU) | target ≤ {TARGET}x | zarr floor wall / CPU s | floor / arrayds wall (CPU) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, what, own, view, floor in rows:
        ratio = view / own
        out.append(
            f"| {name} | {what} | {own:.3f} / {own.cpu:.3f} | {view:.3f} / {view.cpu:.3f} | "
            f"{ratio:.2f}x ({view.cpu / own.cpu:.2f}x) | "
            f"{'met' if ratio <= TARGET else '**missed**'} | "
            f"{floor:.3f} / {floor.cpu:.3f} | {floor / own:.2f}x ({floor.cpu / own.cpu:.2f}x) |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=8192, help="A2 rows and columns")
    p.add_argument("--chunk", type=int, default=1024)
    p.add_argument("--n4", type=int, default=4096, help="A4 rows and columns")
    p.add_argument("--chunk4", type=int, default=64)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workdir", default=None, help="where to write (default: a temp dir)")
    p.add_argument("--quick", action="store_true", help="2048² / 1024² arrays, one repeat")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.chunk, args.n4, args.repeat = 2048, 256, 1024, 1
    args.load_before = os.getloadavg()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="bench-zarr-view-") as root:
        with dask.config.set(scheduler="threads"):
            rows = workloads(root, args.n, args.chunk, args.n4, args.chunk4, args.repeat)
        anchor = anchor_floor(root, args)
    text = render(rows, args, time.perf_counter() - t0) + "\n\n" + render_anchor(rows, anchor)
    sys.stdout.write("## Reading through the zarr view (arrayds.zarr)\n\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
