"""The anchor side of benchmarks/bench_arrays.py: the zarr rows (unsharded and sharded)
of the A1-A4 workloads by the anchor interpreter's zarr-python (3.4, with its request
coalescing), on the same data in the same run.

Run by benchmarks/anchor_runner.py in the anchor interpreter (protocol:
benchmarks/anchors/harness.py). The job (JSON on stdin):

* ``root``: a directory to write the zarr arrays in (removed before each write, untimed);
* ``repeat``: how many times each measured section runs (the runner keeps the fastest);
* ``cases``: a list of ``{"case": "a1" | "a4", "data": path, "chunk": c, "shard": s,
  "workloads": [...], "coords": [[i, j], ...]}``: ``data`` a ``.npy`` file of the
  square float32 array; ``workloads`` which of ``A1``, ``A2``, ``A3`` (case ``a1``) to
  run, ``coords`` the A3 reads (top-left corners of ``c`` x ``c`` boxes).

The arrays are written as bench_arrays.py writes its in-process zarr ones: chunks of
``c`` x ``c``, ``ZstdCodec(level=1)``, unsharded or with ``s`` x ``s`` shards (dask
blocks rechunked to the shard), ``da.store(lock=False)``, dask's threaded scheduler.
Sections are labelled ``workload|system|variant`` (system ``zarr`` or
``zarr-sharded``; variant: the dask blocks of a read, ``chunk-sized``,
``2x2-chunk``, ``shard-sized`` or ``chunks=z.shards``, ``-`` otherwise). Every read is
checked against the data once, outside the sections.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import dask
import dask.array as da
import numpy as np
import zarr
from harness import finish, job, section, versions
from zarr.codecs import ZstdCodec


def create(path: str, data: np.ndarray, chunk: int, shard: int | None) -> Any:
    if os.path.exists(path):
        shutil.rmtree(path)
    kw: dict[str, Any] = {"shards": (shard, shard)} if shard else {}
    return zarr.create_array(
        store=path,
        shape=data.shape,
        chunks=(chunk, chunk),
        dtype=data.dtype,
        compressors=ZstdCodec(level=1),
        overwrite=True,
        **kw,
    )


def run(label: str, repeat: int, fn: Any, setup: Any = None) -> None:
    for _ in range(repeat):
        if setup is not None:
            setup()
        with section(label):
            fn()


def one_case(case: dict[str, Any], root: str, repeat: int) -> None:
    data = np.load(case["data"])
    chunk, shard = int(case["chunk"]), int(case["shard"])
    work = set(case.get("workloads", ()))
    a4 = case["case"] == "a4"
    x = da.from_array(data, chunks=(chunk, chunk))
    for system, sh in (("zarr", None), ("zarr-sharded", shard)):
        path = os.path.join(root, f"{case['case']}-{system}")
        src = x.rechunk((shard, shard)) if sh else x
        target: dict[str, Any] = {}

        def prepare(path=path, sh=sh, target=target) -> None:
            target["z"] = create(path, data, chunk, sh)

        def write(src=src, target=target) -> None:
            da.store(src, target["z"], lock=False)

        if a4 or "A1" in work:
            run(f"{'A4 dask write' if a4 else 'A1'}|{system}|-", repeat, write, prepare)
        else:
            prepare()
            write()
        z = zarr.open_array(path, mode="r")
        assert np.array_equal(z[chunk : 2 * chunk, :chunk], data[chunk : 2 * chunk, :chunk])
        if sh:
            blocks = [("chunks=z.shards", z.shards)]
        elif a4:
            blocks = [("chunk-sized", None), ("shard-sized", (shard, shard))]
        else:
            blocks = [("chunk-sized", None), ("2x2-chunk", (2 * chunk, 2 * chunk))]
        if "A2" in work:
            want = float(data.sum(dtype=np.float64))
            for name, c in blocks:
                y = da.from_zarr(z) if c is None else da.from_zarr(z, chunks=c)
                assert np.isclose(float(y.sum(dtype=np.float64).compute()), want)
                run(f"A2|{system}|{name}", repeat, lambda y=y: y.sum().compute())
        if "A3" in work:
            coords = case["coords"]

            def loop(z=z, coords=coords) -> None:
                for i, j in coords:
                    z[i : i + chunk, j : j + chunk]

            z[:chunk, :chunk]  # metadata read before the section, as in-process
            run(f"A3|{system}|-", repeat, loop)
        if a4:
            for name, c in blocks:
                y = da.from_zarr(z) if c is None else da.from_zarr(z, chunks=c)
                assert np.array_equal(y[:chunk, -chunk:].compute(), data[:chunk, -chunk:])
                run(f"A4 dask read|{system}|{name}", repeat, y.compute)
            assert np.array_equal(z[...], data)
            run(f"A4 direct read|{system}|-", repeat, lambda z=z: z[...])
        shutil.rmtree(path)


def main() -> None:
    j = job()
    with dask.config.set(scheduler="threads"):
        for case in j["cases"]:
            one_case(case, j["root"], int(j["repeat"]))
    finish(versions=versions("zarr", "dask", "numpy", "numcodecs"))


if __name__ == "__main__":
    main()
