"""The anchor side of benchmarks/bench_arrays.py: the zarr rows (unsharded and sharded)
of the A1-A5 workloads by the anchor interpreter's zarr-python (3.4, with its request
coalescing), on the same data in the same run.

Run by benchmarks/anchor_runner.py in the anchor interpreter (protocol:
benchmarks/anchors/harness.py). The job (JSON on stdin):

* ``root``: a directory to write the zarr arrays in (removed before each write, untimed);
* ``repeat``: how many times each measured section runs (the runner keeps the fastest);
* ``cases``: a list of ``{"case": "a1" | "a4", "data": path, "chunk": c, "shard": s,
  "workloads": [...], "coords": [[i, j], ...]}``: ``data`` a ``.npy`` file of the
  square float32 array; ``workloads`` which of ``A1``, ``A2``, ``A3`` (case ``a1``) to
  run, ``coords`` the A3 reads (top-left corners of ``c`` x ``c`` boxes); or
  ``{"case": "a5", "n": n, "chunk": c, "shard": s}``: the n x n field of
  benchmarks/anchors/field.py generated block by block on the workers of a
  ``LocalCluster(n_workers=2, processes=True, threads_per_worker=1)``, written
  (``A5 write``) and summed (``A5 read``); its sections' CPU time adds that of both
  workers to this process's (the client and its scheduler).

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
from field import a5_cluster, generated
from harness import finish, job, process_cpu, section, versions
from zarr.codecs import ZstdCodec


def create(path: str, shape: tuple[int, ...], chunk: int, shard: int | None) -> Any:
    if os.path.exists(path):
        shutil.rmtree(path)
    kw: dict[str, Any] = {"shards": (shard, shard)} if shard else {}
    return zarr.create_array(
        store=path,
        shape=shape,
        chunks=(chunk, chunk),
        dtype="f4",
        compressors=ZstdCodec(level=1),
        overwrite=True,
        **kw,
    )


def run(label: str, repeat: int, fn: Any, setup: Any = None, cpu_clock: Any = process_cpu) -> None:
    for _ in range(repeat):
        if setup is not None:
            setup()
        with section(label, cpu_clock):
            fn()


def a5(case: dict[str, Any], root: str, repeat: int) -> None:
    """The cluster workload: as bench_arrays.py's A5, the blocks generated on the
    workers (sharded zarr: one block per shard), written with ``da.store`` and summed
    with the stored chunks and with 2 x 2 chunk (sharded: shard) blocks."""
    n, chunk, shard = int(case["n"]), int(case["chunk"]), int(case["shard"])
    with a5_cluster(process_cpu, ("field", "zarr")) as cluster_cpu:
        want = float(generated(n, chunk).sum(dtype=np.float64).compute())
        for system, sh in (("zarr", None), ("zarr-sharded", shard)):
            path = os.path.join(root, f"a5-{system}")
            src = generated(n, sh or chunk)
            target: dict[str, Any] = {}

            def prepare(path=path, sh=sh, target=target) -> None:
                target["z"] = create(path, (n, n), chunk, sh)

            def write(src=src, target=target) -> None:
                da.store(src, target["z"], lock=False)

            run(f"A5 write|{system}|-", repeat, write, prepare, cluster_cpu)
            z = zarr.open_array(path, mode="r")
            blocks = (
                [("chunks=z.shards", z.shards)]
                if sh
                else [
                    ("chunk-sized", None),
                    ("2x2-chunk", (2 * chunk, 2 * chunk)),
                ]
            )
            for name, c in blocks:
                y = da.from_zarr(z) if c is None else da.from_zarr(z, chunks=c)
                assert np.isclose(float(y.sum(dtype=np.float64).compute()), want)
                run(f"A5 read|{system}|{name}", repeat, y.sum().compute, None, cluster_cpu)
            shutil.rmtree(path)


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
            target["z"] = create(path, data.shape, chunk, sh)

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
    for case in j["cases"]:
        if case["case"] == "a5":  # on its cluster (the client is the scheduler then)
            a5(case, j["root"], int(j["repeat"]))
            continue
        with dask.config.set(scheduler="threads"):
            one_case(case, j["root"], int(j["repeat"]))
    finish(versions=versions("zarr", "dask", "distributed", "numpy", "numcodecs"))


if __name__ == "__main__":
    main()
