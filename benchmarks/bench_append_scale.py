"""What one small append costs when the node already holds n shards.

An append's commit should cost what it adds: read the manifest's head and the newest
segments, write the new entries (and, every eighth equal append, the tiered merge of
the newest small shards), never the n entries before. Each case runs in a fresh
process on a dataset built for it and makes nine appends one after
the other (the eighth fills a tier of the tiered merge, ``compact="tiered"``, the
default); the table gives the median and the largest wall time of one append, the
CPU time of all nine, the manifest segments and indexes parsed per append at most
(the per-process cache is cleared before each), and the process's peak RSS above its
RSS before the first append.

Cases:

* ``dask``: ``to_arrayrecord(da.zeros((1, 128), chunks=(1, 128)), url, mode="a")``
  on the (n, 128) array of n one-row shards;
* ``Array.append``: the same row through an open ``Array`` handle;
* ``records``: ``to_arrayrecord(bag_of_one_record, url, mode="a")`` on the records
  dataset of n one-record shards;
* ``xarray``: ``ds.to_arrayrecord(url, append_dim="t")`` of one step on a dataset
  whose variable ``v`` (and coordinate ``t``) hold n one-element chunks (written by
  xarray here, so only for n up to ``--xarray-max``);
* ``ragged``: ``arrayds.ragged.write_ragged([item], url, mode="a")`` of one item of
  two float32 on a ragged array of n one-item shards (written by ``write_ragged``
  with ``shard_size=1`` here, so only for n up to ``--xarray-max`` too).

The arrays and records datasets are those of ``bench_manifest_scale.py`` (hard links
of one shard file, a manifest of n entries upgraded to segments and indexes).

    python benchmarks/bench_append_scale.py 100000 1000000
    python benchmarks/bench_append_scale.py 100000 --cases ragged
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE]

APPENDS = 9


def status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def run_case(case: str, url: str) -> dict[str, Any]:
    """The nine appends of ``case`` on ``url``, in this process."""
    import dask
    import dask.array as da
    import dask.bag as db
    import numpy as np
    import xarray as xr

    import arrayds
    import arrayds.ragged as rg
    from arrayds.nodes import history as log

    dask.config.set(scheduler="sync")
    handle = arrayds.open_array(url, mode="r+") if case == "Array.append" else None
    n0 = xr.open_dataset(url, engine="arrayds").sizes["t"] if case == "xarray" else 0
    warm(case)
    start = status_kib("VmRSS")
    walls, loaded = [], []
    c0 = time.process_time()
    for i in range(APPENDS):
        log.clear_cache()
        t0 = time.perf_counter()
        if case == "dask":
            arrayds.to_arrayrecord(da.zeros((1, 128), chunks=(1, 128)), url, mode="a", shard_size=1)
        elif case == "Array.append":
            assert handle is not None
            handle.append(np.zeros((1, 128)))
        elif case == "records":
            bag = db.from_sequence([b"r" * 100], npartitions=1)
            arrayds.to_arrayrecord(bag, url, mode="a", compression="uncompressed")
        elif case == "ragged":
            rg.write_ragged([np.zeros(2, "f4")], url, mode="a", shard_size=1)
        else:
            step = xr.Dataset({"v": (("t",), da.zeros(1, chunks=1))}, coords={"t": [n0 + i]})
            arrayds.to_arrayrecord(step, url, mode="a", append_dim="t", shard_size=1)
        walls.append(time.perf_counter() - t0)
        loaded.append(len(log._cache))
    cpu = time.process_time() - c0
    return {
        "median": statistics.median(walls),
        "max": max(walls),
        "cpu": cpu,
        "loaded": max(loaded),
        "rss_above": (status_kib("VmHWM") - start) * 1024,
    }


def warm(case: str) -> None:
    """The same append once on a small dataset in memory: the first append of a
    process imports and sets up what every later one reuses."""
    import dask.array as da
    import dask.bag as db
    import numpy as np
    import xarray as xr

    import arrayds

    url = "memory://bench-append-warm"
    if case in ("dask", "Array.append"):
        arrayds.to_arrayrecord(np.zeros((1, 128)), url, mode="w")
        arrayds.to_arrayrecord(da.zeros((1, 128), chunks=(1, 128)), url, mode="a")
        arrayds.open_array(url, mode="r+").append(np.zeros((1, 128)))
    elif case == "records":
        arrayds.to_arrayrecord([b"r"], url, mode="w")
        arrayds.to_arrayrecord(db.from_sequence([b"r"], npartitions=1), url, mode="a")
    elif case == "ragged":
        import arrayds.ragged as rg

        rg.write_ragged([np.zeros(2, "f4")] * 2, url, mode="w", shard_size=1)
        rg.write_ragged([np.zeros(2, "f4")], url, mode="a", shard_size=1)
    else:
        ds = xr.Dataset({"v": (("t",), da.zeros(2, chunks=1))}, coords={"t": [0, 1]})
        arrayds.to_arrayrecord(ds, url, mode="w")
        step = xr.Dataset({"v": (("t",), da.zeros(1, chunks=1))}, coords={"t": [2]})
        arrayds.to_arrayrecord(step, url, mode="a", append_dim="t")


def build(kind: str, url: str, n: int, workdir: str) -> None:
    """The dataset of ``kind`` with n shards at ``url``."""
    import bench_manifest_scale as scale

    if kind == "array":
        scale.build_array(url, n, scale.array_template(workdir))
    elif kind == "records":
        scale.build_records(url, n, scale.records_template(workdir))
    elif kind == "ragged":
        import numpy as np

        import arrayds.ragged as rg

        rg.write_ragged([np.zeros(2, "f4")] * n, url, shard_size=1)
    else:
        import dask
        import dask.array as da
        import numpy as np
        import xarray as xr

        import arrayds

        ds = xr.Dataset({"v": (("t",), da.zeros(n, chunks=1))}, coords={"t": np.arange(n)})
        with dask.config.set(scheduler="threads"):
            arrayds.to_arrayrecord(ds.chunk({"t": 1}), url, shard_size=1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("sizes", nargs="*", type=int, default=[100_000])
    p.add_argument("--xarray-max", type=int, default=100_000)
    p.add_argument("--cases", help="a comma-separated subset of the cases (default: all)")
    p.add_argument("--case", help=argparse.SUPPRESS)
    p.add_argument("--url", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case, args.url)))
        return
    import arrayds

    print(f"arrayds {arrayds.__version__} at {os.path.dirname(arrayds.__file__)}")
    rows = []
    work = tempfile.mkdtemp(prefix="bench-append-")
    try:
        for n in args.sizes:
            kinds = {"array": ("dask", "Array.append"), "records": ("records",)}
            if n <= args.xarray_max:
                kinds["xarray"] = ("xarray",)
                kinds["ragged"] = ("ragged",)
            for kind, cases in kinds.items():
                for case in cases:  # each on a dataset of its own, built anew
                    if args.cases and case not in args.cases.split(","):
                        continue
                    dst = os.path.join(work, f"run-{case}-{n}")
                    t0 = time.perf_counter()
                    build(kind, dst, n, os.path.join(work, f"t-{case}-{n}"))
                    print(f"built {kind} of {n} shards in {time.perf_counter() - t0:.0f} s",
                          flush=True)  # fmt: skip
                    out = subprocess.run(
                        [sys.executable, __file__, "--case", case, "--url", dst],
                        check=True,
                        capture_output=True,
                        text=True,
                    )
                    got = json.loads(out.stdout.strip().splitlines()[-1])
                    rows.append((n, case, got))
                    shutil.rmtree(dst)
                    shutil.rmtree(os.path.join(work, f"t-{case}-{n}"), ignore_errors=True)
                    print(n, case, got, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print()
    print("| shards | append | median | largest | CPU (9 appends) | segments parsed per "
          "append (max) | peak RSS above start |")  # fmt: skip
    print("|---:|---|---:|---:|---:|---:|---:|")
    for n, case, g in rows:
        print(
            f"| {n:,} | {case} | {g['median'] * 1e3:.1f} ms | {g['max'] * 1e3:.1f} ms | "
            f"{g['cpu']:.2f} s | {g['loaded']} | {g['rss_above'] / 2**20:.1f} MiB |"
        )


if __name__ == "__main__":
    main()
