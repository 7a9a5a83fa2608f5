"""Chunked N-d arrays: arrayds next to zarr-python 3, tensorstore and h5py, same data,
same codec, one run, page cache hot.

    python benchmarks/bench_arrays.py                 # the full workloads (~256 MiB)
    python benchmarks/bench_arrays.py --quick         # 4x smaller, one repeat
    python benchmarks/bench_arrays.py --only A3,A4    # some workloads

Workloads (docs/performance.md, "Arrays"):

* A1: write a float32 8192x8192 dask array, chunks 1024x1024, threaded scheduler;
* A2: ``from_<system>(...).sum().compute()`` over it;
* A3: 200 random single-chunk reads through each system's direct API (latency);
* A4: 4096x4096 float32 with 64x64 chunks (4096 chunks): dask write, dask full read,
  direct full read;
* A5: A1 written and summed on ``LocalCluster(n_workers=2, processes=True,
  threads_per_worker=1)``; the workers generate the blocks (same values).

Systems and options: arrayds (``compression="zstd:1"``, default shard grouping: 16 MiB
shards); zarr-python 3.4 of the anchor interpreter (``$ARRAYDS_ANCHOR_PYTHON``,
benchmarks/anchors/arrays.py through benchmarks/anchor_runner.py, the same field
(benchmarks/anchors/field.py), run before the other systems of each workload, A5 on a
cluster of its own; without an anchor interpreter the zarr columns say they were
skipped) with ``ZstdCodec(level=1)``, unsharded and sharded (16 MiB shards; dask
writes use blocks equal to the shard shape, reads use
``from_zarr(z, chunks=z.shards)``); tensorstore (zarr3 driver, zstd level 1); h5py
(chunked, zstd level 1 through hdf5plugin, or gzip level 1 when hdf5plugin is
missing; writes hold a lock, HDF5 is not thread-safe; not in A5: one HDF5 file cannot
be written by two processes). Where a workload allows whole multiples of the stored
chunks per dask task (A4), every system gets that variant too; the table names the
option behind each figure.

Data: deterministic, compressible float32 (benchmarks/anchors/field.py: a smooth field
plus hash noise quantized to 1/64; zstd:1 stores it at about 80%). Every figure is the
best of ``--repeat`` runs; write targets are removed before each run (untimed).
Machine limits (zstd level 1 on one core with the ``zstandard`` package, memcpy) are
measured on the same data.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import dask
import dask.array as da
import numpy as np

import arrayds

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "anchors")]
from anchor_runner import AnchorUnavailable, run_anchor  # noqa: E402
from field import a5_cluster, generated, make_data, values  # noqa: E402

TARGETS = {  # arrayds / best anchor (throughput), or latency ratio for A3
    "A1": (">=", 1.1),
    "A2": (">=", 1.1),
    "A3": ("<=", 1.0),
    "A4 dask write": (">=", 1.2),
    "A4 dask read": (">=", 1.2),
    "A4 direct read": (">=", 1.2),
    "A5 write": (">=", 1.2),
    "A5 read": (">=", 1.2),
}


# -------------------------------------------------------------------- timing


class Timing(float):
    """The best wall-clock seconds of some runs, with ``cpu``: the least CPU seconds
    (all threads of every process that ``cpu_clock`` counts) of the same runs."""

    cpu: float


def process_cpu() -> float:
    return time.process_time()


cpu_clock: Callable[[], float] = process_cpu
"""What counts as CPU time: this process (threaded workloads), or this process plus
the cluster's worker processes (A5)."""


def best_of(repeat: int, fn: Callable[[], Any], setup: Callable[[], Any] | None = None) -> Timing:
    best = cpu_best = float("inf")
    for _ in range(repeat):
        if setup is not None:
            setup()
        c0 = cpu_clock()
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
        cpu_best = min(cpu_best, cpu_clock() - c0)
    t = Timing(best)
    t.cpu = cpu_best
    return t


def rmtree(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.unlink(path)


# ------------------------------------------------------------------- systems


class TSArray:
    """A tensorstore array as dask's ``from_array``/``store`` target. Pickles as its
    spec; each process opens it once."""

    _open: dict[str, Any] = {}  # per process: spec -> open TensorStore

    def __init__(self, spec: dict[str, Any], shape: tuple[int, ...]) -> None:
        self.spec = spec
        self.shape = shape
        self.dtype = np.dtype("f4")
        self.ndim = len(shape)

    @property
    def ts(self) -> Any:
        key = json.dumps(self.spec, sort_keys=True)
        t = TSArray._open.get(key)
        if t is None:
            import tensorstore

            t = TSArray._open.setdefault(key, tensorstore.open(self.spec).result())
        return t

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.ts[key].read().result()

    def __setitem__(self, key: Any, value: np.ndarray) -> None:
        self.ts[key].write(value).result()

    def __reduce__(self) -> tuple[Any, ...]:
        return (TSArray, (self.spec, self.shape))


def ts_spec(path: str, shape: tuple[int, int], chunk: int) -> dict[str, Any]:
    return {
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": path},
        "metadata": {
            "shape": list(shape),
            "data_type": "float32",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [chunk, chunk]}},
            "codecs": [
                {"name": "bytes", "configuration": {"endian": "little"}},
                {"name": "zstd", "configuration": {"level": 1}},
            ],
        },
    }


def h5_filter() -> tuple[dict[str, Any], str]:
    try:
        import hdf5plugin

        return dict(hdf5plugin.Zstd(clevel=1)), "zstd level 1 (hdf5plugin)"
    except ImportError:
        return {"compression": "gzip", "compression_opts": 1}, "gzip level 1 (no hdf5plugin)"


class System:
    """One storage system on one array: create, dask write, dask read, direct reads."""

    name = ""

    def __init__(self, root: str, shape: tuple[int, int], chunk: int) -> None:
        self.root = root
        self.shape = shape
        self.chunk = chunk
        self.path = os.path.join(root, self.name)

    def prepare(self) -> None:
        """Remove what a previous run wrote and create the empty target (untimed)."""
        rmtree(self.path)

    def write(self, x: da.Array) -> None:
        raise NotImplementedError

    def dask(self, multiple: int | None = None) -> da.Array:
        raise NotImplementedError

    def read_box(self, i: int, j: int, h: int, w: int) -> np.ndarray:
        raise NotImplementedError

    def read_all(self) -> np.ndarray:
        raise NotImplementedError

    def stored_bytes(self) -> int:
        total = 0
        for folder, _dirs, names in os.walk(self.path):
            total += sum(os.path.getsize(os.path.join(folder, n)) for n in names)
        if os.path.isfile(self.path):
            total = os.path.getsize(self.path)
        return total


class ArraydsSystem(System):
    name = "arrayds"

    def write(self, x: da.Array) -> None:
        arrayds.to_arrayrecord(x, self.path, mode="w-", compression="zstd:1")
        self._a = None

    @property
    def a(self) -> arrayds.Array:
        if getattr(self, "_a", None) is None:
            self._a = arrayds.open_array(self.path)
        return self._a

    def dask(self, multiple: int | None = None) -> da.Array:
        if multiple is None:
            return arrayds.from_arrayrecord(self.path)
        if multiple == -1:
            return arrayds.from_arrayrecord(self.path, chunks="shards")
        return arrayds.from_arrayrecord(self.path, chunks=(multiple * self.chunk,) * 2)

    def read_box(self, i: int, j: int, h: int, w: int) -> np.ndarray:
        return self.a[i : i + h, j : j + w]

    def read_all(self) -> np.ndarray:
        return self.a[...]


class TensorstoreSystem(System):
    name = "tensorstore"

    def prepare(self) -> None:
        import tensorstore

        rmtree(self.path)
        spec = ts_spec(self.path, self.shape, self.chunk)
        tensorstore.open(spec, create=True, delete_existing=True).result()
        self.spec = {k: v for k, v in spec.items() if k != "metadata"}
        TSArray._open.clear()

    def target(self) -> TSArray:
        return TSArray(getattr(self, "spec", None) or self._read_spec(), self.shape)

    def _read_spec(self) -> dict[str, Any]:
        return {"driver": "zarr3", "kvstore": {"driver": "file", "path": self.path}}

    def write(self, x: da.Array) -> None:
        da.store(x, self.target(), lock=False)

    def dask(self, multiple: int | None = None) -> da.Array:
        c = self.chunk if multiple in (None, -1) else multiple * self.chunk
        return da.from_array(
            self.target(), chunks=(c, c), asarray=False, fancy=False, lock=False, name=False
        )

    def read_box(self, i: int, j: int, h: int, w: int) -> np.ndarray:
        return self.t[i : i + h, j : j + w].read().result()

    @property
    def t(self) -> Any:
        return self.target().ts

    def read_all(self) -> np.ndarray:
        return self.t.read().result()


class H5System(System):
    name = "h5py"

    def prepare(self) -> None:
        import h5py

        self.close()
        rmtree(self.path)
        kw, self.filter_note = h5_filter()
        self.f = h5py.File(self.path, "w")
        self.d = self.f.create_dataset(
            "x", shape=self.shape, dtype="f4", chunks=(self.chunk, self.chunk), **kw
        )

    def close(self) -> None:
        for attr in ("f", "fr"):
            f = getattr(self, attr, None)
            if f is not None:
                f.close()
                setattr(self, attr, None)

    def write(self, x: da.Array) -> None:
        da.store(x, self.d, lock=True)
        self.f.close()
        self.f = None

    @property
    def dr(self) -> Any:
        import h5py

        if getattr(self, "fr", None) is None:
            self.fr = h5py.File(self.path, "r")
        return self.fr["x"]

    def dask(self, multiple: int | None = None) -> da.Array:
        c = self.chunk if multiple in (None, -1) else multiple * self.chunk
        return da.from_array(self.dr, chunks=(c, c), lock=True, name=False)

    def read_box(self, i: int, j: int, h: int, w: int) -> np.ndarray:
        return self.dr[i : i + h, j : j + w]

    def read_all(self) -> np.ndarray:
        return self.dr[...]


SYSTEMS = [ArraydsSystem, TensorstoreSystem, H5System]
ANCHOR_SYSTEMS = ["zarr", "zarr-sharded"]
"""The zarr rows, run by the anchor interpreter's zarr-python (anchors/arrays.py)."""


# ------------------------------------------------------------------- anchors


class Anchor:
    """The zarr side of A1-A4 by the anchor interpreter's zarr-python (3.4), on the
    same data in the same run (benchmarks/anchors/arrays.py, run before the other
    systems of the workload); ``skipped`` says why when there is no anchor interpreter
    (then the zarr columns are empty: no other zarr-python stands in)."""

    def __init__(self) -> None:
        self.sections: dict[str, dict[str, Any]] = {}
        self.versions: dict[str, str] = {}
        self.skipped = ""

    def run(self, root: str, repeat: int, case: dict[str, Any]) -> None:
        if self.skipped:
            return
        try:
            got = run_anchor("arrays", {"root": root, "repeat": repeat, "cases": [case]})
        except AnchorUnavailable as e:
            self.skipped = str(e)
            return
        self.sections.update(got.sections)
        self.versions = got.info["versions"]

    def figures(self, workload: str, scale: float) -> dict[str, tuple[float, str, float]]:
        """System -> (value, note, value per CPU second) of ``workload``: its fastest
        variant; ``scale / seconds`` is the value (MB/s), or with a negative ``scale``,
        ``-scale * seconds`` (ms per read)."""
        out: dict[str, tuple[float, str, float]] = {}
        for label, s in self.sections.items():
            w, system, variant = label.split("|")
            if w != workload:
                continue
            name = system
            if scale < 0:
                f = (-scale * s["seconds"], -scale * s["cpu"])
            else:
                f = (scale / s["seconds"], scale / max(s["cpu"], 1e-9))
            note = ANCHOR_NOTES.get(system, "") + (
                "" if variant == "-" else f", {variant} dask blocks"
            )
            note += f"; zarr {self.versions.get('zarr')} in the anchor interpreter"
            better = name not in out or (f[0] < out[name][0] if scale < 0 else f[0] > out[name][0])
            if better:
                out[name] = (f[0], note, f[1])
        return out


ANCHOR_NOTES = {
    "zarr": "ZstdCodec(level=1), da.store(lock=False) / da.from_zarr",
    "zarr-sharded": "ZstdCodec(level=1), 16 MiB shards, dask blocks = shards for writes",
}
anchor = Anchor()


# ----------------------------------------------------------------- workloads


class Results:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(
        self,
        workload: str,
        unit: str,
        figures: dict[str, tuple[float, str, float]],
        higher: bool = True,
    ) -> None:
        """``figures``: system -> (value, the options behind it, the value per CPU
        second: MB per CPU second, or CPU ms per read for latencies)."""
        ours = figures.get("arrayds")
        anchors = {k: v for k, v in figures.items() if k != "arrayds"}
        pick = max if higher else min
        best = best_cpu = None
        if anchors:
            best = pick(anchors.items(), key=lambda kv: kv[1][0])
            best_cpu = pick(anchors.items(), key=lambda kv: kv[1][2])
        ratio = ratio_cpu = None
        if ours is not None and best is not None and best_cpu is not None:
            ratio = ours[0] / best[1][0]
            ratio_cpu = ours[2] / best_cpu[1][2]
        self.rows.append(
            {
                "workload": workload,
                "unit": unit,
                "figures": {k: list(v) for k, v in figures.items()},
                "best_anchor": best[0] if best else None,
                "ratio": ratio,
                "best_anchor_cpu": best_cpu[0] if best_cpu else None,
                "ratio_cpu": ratio_cpu,
                "higher_is_better": higher,
            }
        )
        sys.stderr.write(
            f"  {workload}: "
            + ", ".join(f"{k} {v[0]:.4g} {unit}" for k, v in figures.items())
            + (f" -> ratio {ratio:.2f}" if ratio is not None else "")
            + "\n"
        )


def mbps(nbytes: int, seconds: float) -> float:
    return nbytes / seconds / 1e6


def fig(nbytes: int, t: Timing, note: str) -> tuple[float, str, float]:
    """(MB/s, note, MB per CPU second)."""
    return (mbps(nbytes, t), note, mbps(nbytes, t.cpu))


def interleave(
    repeat: int, jobs: list[tuple[str, Callable[[], Any], Callable[[], Any] | None]]
) -> dict[str, Timing]:
    """Time every job ``repeat`` times, in rounds (each round runs every job once), so
    that the load of a shared machine spreads over all systems alike."""
    best: dict[str, Timing] = {}
    for _ in range(repeat):
        for name, fn, setup in jobs:
            t = best_of(1, fn, setup)
            old = best.get(name)
            if old is None:
                best[name] = t
            else:
                merged = Timing(min(old, t))
                merged.cpu = min(old.cpu, t.cpu)
                best[name] = merged
    return best


def best_variant(
    timings: dict[str, Timing], nbytes: int, notes: dict[str, tuple[str, str]]
) -> dict[str, tuple[float, str, float]]:
    """Per system, the fastest of its variants. ``notes``: job -> (system, note)."""
    out: dict[str, tuple[float, str, float]] = {}
    for job, t in timings.items():
        system, note = notes[job]
        f = fig(nbytes, t, note)
        if system not in out or f[0] > out[system][0]:
            out[system] = f
    return out


READ_API = {
    "arrayds": "from_arrayrecord(url)",
    "tensorstore": "da.from_array(TensorStore)",
    "h5py": "da.from_array(dataset, lock=True)",
}


def sum_jobs(systems: list[Any], chunk: int, want: float) -> tuple[list[Any], dict[str, Any]]:
    """One timed ``.sum()`` job per system and dask chunking variant, each checked once
    against ``want``; returns the jobs and their notes for :func:`best_variant`."""
    jobs, notes = [], {}
    for s in systems:
        for mult, note in sum_variants(s, chunk):
            y = s.dask(mult)
            got = float(y.sum(dtype=np.float64).compute())
            assert abs(got - want) <= 1e-6 * abs(want), (s.name, got, want)
            jobs.append((f"{s.name}/{mult}", lambda y=y: y.sum().compute(), None))
            notes[f"{s.name}/{mult}"] = (s.name, note)
    return jobs, notes


def sum_variants(s: System, chunk: int) -> list[tuple[int | None, str]]:
    """The dask blocks each system is read with for ``.sum()`` (A2, A5): the stored
    chunks, and 16 MiB blocks (two chunks by two; arrayds: its 16 MiB shards); the
    faster one counts."""
    base = (None, f"{READ_API[s.name]}, chunks {chunk}x{chunk}")
    if isinstance(s, ArraydsSystem):
        return [base, (-1, 'from_arrayrecord(url, chunks="shards") (16 MiB)')]
    return [base, (2, f"{READ_API[s.name]}, chunks {2 * chunk}x{2 * chunk}")]


WRITE_NOTES = {
    "arrayds": 'to_arrayrecord(compression="zstd:1"), default shard grouping (16 MiB shards)',
    "tensorstore": "da.store(lock=False) into a zarr3 TensorStore",
    "h5py": "da.store(lock=True)",
}


def a1_a2_a3(root: str, n: int, chunk: int, repeat: int, nreads: int, res: Results, only) -> None:
    data = make_data(n)
    nbytes = data.nbytes
    shard = chunk * 2  # 4 MiB chunks -> 16 MiB shards
    rng = np.random.default_rng(0)
    nc = n // chunk
    coords = (rng.integers(0, nc, size=(nreads, 2)) * chunk).tolist()
    np.save(os.path.join(root, "a1.npy"), data)
    case = {"case": "a1", "data": os.path.join(root, "a1.npy"), "chunk": chunk}
    case |= {"shard": shard, "workloads": sorted(only & {"A1", "A2", "A3"}), "coords": coords}
    anchor.run(root, repeat, case)
    os.unlink(os.path.join(root, "a1.npy"))
    systems = [cls(os.path.join(root, "a1"), (n, n), chunk) for cls in SYSTEMS]
    os.makedirs(os.path.join(root, "a1"), exist_ok=True)
    x = da.from_array(data, chunks=(chunk, chunk))
    with dask.config.set(scheduler="threads"):
        jobs = []
        for s in systems:
            jobs.append((s.name, lambda s=s: s.write(x), s.prepare))
        timings = interleave(repeat, jobs)
        notes = {s.name: (s.name, WRITE_NOTES[s.name]) for s in systems}
        h5 = [s for s in systems if isinstance(s, H5System)][0]
        notes["h5py"] = ("h5py", WRITE_NOTES["h5py"] + ", " + h5.filter_note)
        if "A1" in only:
            figures = best_variant(timings, nbytes, notes) | anchor.figures("A1", nbytes / 1e6)
            res.add("A1", "MB/s", figures)
        res.sizes = {s.name: s.stored_bytes() / nbytes for s in systems}  # type: ignore[attr-defined]

        # correctness before timing reads
        for s in systems:
            got = s.read_box(chunk, 2 * chunk, chunk, chunk)
            assert np.array_equal(got, data[chunk : 2 * chunk, 2 * chunk : 3 * chunk]), s.name

        if "A2" in only:
            want = float(data.sum(dtype=np.float64))
            jobs, notes = sum_jobs(systems, chunk, want)
            figures = best_variant(interleave(repeat, jobs), nbytes, notes)
            res.add("A2", "MB/s", figures | anchor.figures("A2", nbytes / 1e6))

    if "A3" in only:
        jobs = []
        for s in systems:
            s.read_box(0, 0, chunk, chunk)  # open handles, read metadata (untimed)

            def loop(s=s) -> None:
                for i, j in coords:
                    s.read_box(i, j, chunk, chunk)

            jobs.append((s.name, loop, None))
        timings = interleave(repeat, jobs)
        figures = {
            name: (1000 * t / nreads, "direct API, one chunk per read", 1000 * t.cpu / nreads)
            for name, t in timings.items()
        }
        figures |= anchor.figures("A3", -1000 / nreads)
        res.add("A3", "ms/read", figures, higher=False)
    for s in systems:
        if isinstance(s, H5System):
            s.close()


def a4(root: str, n: int, chunk: int, repeat: int, res: Results) -> None:
    data = make_data(n)
    nbytes = data.nbytes
    shard = min(n, 2048)  # 2048 x 2048 float32: 16 MiB shards
    mult = shard // chunk
    np.save(os.path.join(root, "a4.npy"), data)
    case = {"case": "a4", "data": os.path.join(root, "a4.npy"), "chunk": chunk, "shard": shard}
    anchor.run(root, repeat, case)
    os.unlink(os.path.join(root, "a4.npy"))
    systems = [cls(os.path.join(root, "a4"), (n, n), chunk) for cls in SYSTEMS]
    os.makedirs(os.path.join(root, "a4"), exist_ok=True)
    x = da.from_array(data, chunks=(chunk, chunk))
    ntasks = (n // chunk) ** 2
    with dask.config.set(scheduler="threads"):
        jobs, notes = [], {}
        for s in systems:
            jobs.append((s.name, lambda s=s: s.write(x), s.prepare))
            note = WRITE_NOTES[s.name]
            if not isinstance(s, ArraydsSystem):
                note += f", {ntasks} tasks"
            notes[s.name] = (s.name, note)
        figures = best_variant(interleave(repeat, jobs), nbytes, notes)
        res.add("A4 dask write", "MB/s", figures | anchor.figures("A4 dask write", nbytes / 1e6))
        for s in systems:
            if isinstance(s, H5System):
                s.close()

        jobs, notes = [], {}
        for s in systems:
            variants: list[tuple[int | None, str]] = [
                (None, f"{chunk}x{chunk} blocks ({ntasks} tasks)"),
                (mult, f"{shard}x{shard} blocks"),
            ]
            if isinstance(s, ArraydsSystem):
                variants = [(None, variants[0][1]), (-1, 'chunks="shards" (16 MiB shards)')]
            for m, note in variants:
                y = s.dask(m)
                assert np.array_equal(y[:chunk, -chunk:].compute(), data[:chunk, -chunk:])
                job = f"{s.name}/{m}"
                jobs.append((job, lambda y=y: y.compute(), None))
                notes[job] = (s.name, note)
        figures = best_variant(interleave(repeat, jobs), nbytes, notes)
        res.add("A4 dask read", "MB/s", figures | anchor.figures("A4 dask read", nbytes / 1e6))

        jobs, notes = [], {}
        for s in systems:
            assert np.array_equal(s.read_all(), data), s.name
            jobs.append((s.name, s.read_all, None))
            notes[s.name] = (s.name, "one call for the whole array")
        figures = best_variant(interleave(repeat, jobs), nbytes, notes)
        res.add("A4 direct read", "MB/s", figures | anchor.figures("A4 direct read", nbytes / 1e6))
        for s in systems:
            if isinstance(s, H5System):
                s.close()


def a5(root: str, n: int, chunk: int, repeat: int, res: Results) -> None:
    global cpu_clock
    nbytes = n * n * 4
    anchor.run(root, repeat, {"case": "a5", "n": n, "chunk": chunk, "shard": 2 * chunk})
    systems = [
        cls(os.path.join(root, "a5"), (n, n), chunk) for cls in (ArraydsSystem, TensorstoreSystem)
    ]
    os.makedirs(os.path.join(root, "a5"), exist_ok=True)
    with a5_cluster(process_cpu, ("tensorstore", "arrayds")) as cluster_cpu:
        cpu_clock = cluster_cpu
        try:
            x = generated(n, chunk)
            gen = best_of(repeat, lambda: x.sum().compute())
            jobs, notes = [], {}
            for s in systems:
                jobs.append((s.name, lambda s=s: s.write(x), s.prepare))
                notes[s.name] = (s.name, WRITE_NOTES[s.name] + "; blocks generated on the workers")
            figures = best_variant(interleave(repeat, jobs), nbytes, notes)
            res.add("A5 write", "MB/s", figures | anchor.figures("A5 write", nbytes / 1e6))

            want = float(make_data(n).sum(dtype=np.float64))
            jobs, notes = sum_jobs(systems, chunk, want)
            figures = best_variant(interleave(repeat, jobs), nbytes, notes)
            res.add("A5 read", "MB/s", figures | anchor.figures("A5 read", nbytes / 1e6))
            res.a5_generate = mbps(nbytes, gen)  # type: ignore[attr-defined]
        finally:
            cpu_clock = process_cpu


def machine(n: int, chunk: int, repeat: int) -> dict[str, float]:
    out: dict[str, float] = {}
    a = np.ones(256 << 20, dtype=np.uint8)
    b = a.copy()
    out["memcpy GB/s (one core)"] = a.nbytes / best_of(repeat, lambda: np.copyto(b, a)) / 1e9
    try:
        import zstandard
    except ImportError:
        return out
    block = values(0, 0, (chunk, chunk), n).tobytes()
    blocks = [values(i * chunk, 0, (chunk, chunk), n).tobytes() for i in range(4)]
    c = zstandard.ZstdCompressor(level=1)
    d = zstandard.ZstdDecompressor()
    frames = [c.compress(x) for x in blocks]
    total = sum(map(len, blocks))
    out["zstd-1 compress GB/s (one core)"] = (
        total / best_of(repeat, lambda: [c.compress(x) for x in blocks]) / 1e9
    )
    out["zstd-1 decompress GB/s (one core)"] = (
        total / best_of(repeat, lambda: [d.decompress(f) for f in frames]) / 1e9
    )
    out["zstd-1 ratio (stored/raw)"] = sum(map(len, frames)) / total
    del block
    return out


# ------------------------------------------------------------------- render


def fmt(v: float) -> str:
    if v >= 100:
        return f"{v:,.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


HEADERS = {"zarr": "zarr {anchor}", "zarr-sharded": "zarr {anchor} sharded"}


def render(res: Results, limits: dict[str, float], args: argparse.Namespace, elapsed: float) -> str:
    names = [cls.name for cls in SYSTEMS] + ANCHOR_SYSTEMS
    v = anchor.versions.get("zarr", "3.4")
    headers = [HEADERS.get(name, name).format(anchor=v) for name in names]
    load = os.getloadavg()
    lines = [
        f"n={args.n} (A1/A2/A3/A5 {args.n}x{args.n} float32 in {args.chunk}x{args.chunk} "
        f"chunks; A4 {args.n4}x{args.n4} in {args.chunk4}x{args.chunk4}); best of "
        f"{args.repeat}; {os.cpu_count()} CPUs; python {platform.python_version()}; "
        f"load average before the run {args.load_before[0]:.2f}, after {load[0]:.2f}; "
        f"total {elapsed:.0f} s",
        "",
        "| workload | unit | "
        + " | ".join(headers)
        + " | best anchor | ratio | target | ratio (CPU) |",
        "|---|---|" + "---:|" * len(names) + "---|---:|---|---:|",
    ]
    for row in res.rows:
        cells = []
        for name in names:
            f = row["figures"].get(name)
            cells.append("-" if f is None else fmt(f[0]))
        ratio = row["ratio"]
        target = TARGETS.get(row["workload"])
        if ratio is None or target is None:
            verdict = "-"
        else:
            op, goal = target
            ok = ratio >= goal if op == ">=" else ratio <= goal
            verdict = f"{op} {goal:g}x {'met' if ok else 'MISSED'}"
        rc = row["ratio_cpu"]
        lines.append(
            f"| {row['workload']} | {row['unit']} | "
            + " | ".join(cells)
            + f" | {row['best_anchor'] or '-'} | "
            + ("-" if ratio is None else f"{ratio:.2f}x")
            + f" | {verdict} | "
            + ("-" if rc is None else f"{rc:.2f}x ({row['best_anchor_cpu']})")
            + " |"
        )
    lines += [
        "",
        "CPU-time figures (MB per CPU second; A3: CPU ms per read), all threads of the "
        "processes involved (A5: the client, its scheduler and both workers):",
        "",
        "| workload | " + " | ".join(headers) + " |",
        "|---|" + "---:|" * len(names),
    ]
    for row in res.rows:
        cells = []
        for name in names:
            f = row["figures"].get(name)
            cells.append("-" if f is None else fmt(f[2]))
        lines.append(f"| {row['workload']} | " + " | ".join(cells) + " |")
    if anchor.skipped:
        lines += ["", f"zarr {v} (anchor interpreter) columns skipped: {anchor.skipped}"]
    else:
        a = anchor.versions
        lines += [
            "",
            f"zarr {v} columns: the anchor interpreter (Python {a.get('python')}, dask "
            f"{a.get('dask')}, numpy {a.get('numpy')}), same data, same run, run before the "
            "other systems of each workload (not interleaved with them; A5 on a cluster "
            f"of its own, distributed {a.get('distributed')}).",
        ]
    lines += ["", "Options behind each figure:", ""]
    for row in res.rows:
        for name, (_v, note, _c) in row["figures"].items():
            lines.append(f"* {row['workload']} {name}: {note}")
    sizes = getattr(res, "sizes", None)
    if sizes:
        lines += [
            "",
            "Stored size / raw (A1): " + ", ".join(f"{k} {v:.3f}" for k, v in sizes.items()),
        ]
    if hasattr(res, "a5_generate"):
        lines.append(
            f"A5 block generation alone on the cluster (x.sum()): {res.a5_generate:,.0f} MB/s"
        )
    lines += ["", "Machine limits: " + ", ".join(f"{k} {v:.2f}" for k, v in limits.items())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=8192, help="A1/A2/A3/A5 rows and columns")
    p.add_argument("--chunk", type=int, default=1024)
    p.add_argument("--n4", type=int, default=4096, help="A4 rows and columns")
    p.add_argument("--chunk4", type=int, default=64)
    p.add_argument("--reads", type=int, default=200, help="A3 random chunk reads")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--only", default="A1,A2,A3,A4,A5", help="comma-separated workloads")
    p.add_argument("--workdir", default=None, help="where to write (default: a temp dir)")
    p.add_argument("--json", default=None, help="also write the results as JSON here")
    p.add_argument("--quick", action="store_true", help="4096 / 2048 arrays, one repeat")
    args = p.parse_args(argv)
    if args.quick:
        args.n, args.n4, args.repeat = 4096, 2048, 1
    args.load_before = os.getloadavg()
    only = {w.strip().upper() for w in args.only.split(",")}
    t0 = time.perf_counter()
    res = Results()
    with tempfile.TemporaryDirectory(dir=args.workdir, prefix="bench-arrays-") as root:
        if only & {"A1", "A2", "A3"}:
            sys.stderr.write("A1-A3 ...\n")
            a1_a2_a3(root, args.n, args.chunk, args.repeat, args.reads, res, only)
        if "A4" in only:
            sys.stderr.write("A4 ...\n")
            a4(root, args.n4, args.chunk4, args.repeat, res)
        if "A5" in only:
            sys.stderr.write("A5 ...\n")
            a5(root, args.n, args.chunk, args.repeat, res)
    limits = machine(args.n, args.chunk, max(args.repeat, 3))
    text = render(res, limits, args, time.perf_counter() - t0)
    sys.stdout.write("## Chunked arrays: arrayds vs zarr, tensorstore, h5py\n\n" + text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            doc = {"rows": res.rows, "limits": limits, "argv": sys.argv}
            doc["anchor"] = {"versions": anchor.versions, "skipped": anchor.skipped}
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    # Run as the importable module ``bench_arrays`` (not ``__main__``), so that the
    # cluster workers unpickle its functions and classes by reference.
    import bench_arrays

    sys.exit(bench_arrays.main())
