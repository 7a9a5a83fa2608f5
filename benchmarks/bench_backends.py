"""The two object-store backends side by side: fsspec (s3fs) and obstore, same server,
same objects, same workloads, 5 ms added to every request.

    python benchmarks/bench_backends.py            # 300 ranged GETs, a 2048^2 array
    python benchmarks/bench_backends.py --quick    # 100 ranged GETs, a 1024^2 array

Setup: moto's S3 server behind the 5 ms :class:`LatencyProxy` of tests/s3/s3server.py,
both in a separate process. Each backend is a store from
``arrayds.storage.get_store(url, {..., "backend": name})``. Workloads (best of
--repeat, fresh stores and shard readers each run; "CPU" is this process's CPU time
in the best run, all threads):

* **ranged GETs, one by one** — ``store.get_range`` of N ranges of 4 KiB at random
  offsets of one 16 MiB object, one after another;
* **ranged GETs, batched** — the same N ranges in one call: obstore's
  ``store.get_ranges`` (concurrent requests, neighbours merged) against fsspec's own
  batch, ``fs.cat_ranges`` (concurrent requests on s3fs's event loop);
* **commits** — 20 ``a[0, 0] = i`` on an open array (each one read of the manifest
  and one conditional PUT, plus the chunk's shard);
* **whole-array read** — ``arrayds.open(url)["temp"][:]`` (manifest through the store,
  the shards through the ArrayRecord engine, which reads with fsspec in both cases).
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "s3"))

from s3server import ServerProcess  # noqa: E402

import arrayds  # noqa: E402
from arrayds.nodes import shards as store_mod
from arrayds.storage import clear_store_cache, get_store  # noqa: E402

BACKENDS = ("fsspec", "obstore")


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of the fastest of ``repeat`` runs."""
    runs = []
    for _ in range(repeat):
        store_mod.clear_reader_cache()
        clear_store_cache()
        c0, t0 = cpu(), time.perf_counter()
        fn()
        runs.append((time.perf_counter() - t0, cpu() - c0))
    return min(runs)


def measure(
    backend: str,
    root: str,
    slow: dict[str, Any],
    ranges: list[tuple[int, int]],
    want: list[bytes],
    shape: tuple[int, ...],
    repeat: int,
) -> dict[str, tuple[float, float]]:
    """The workloads of the module docstring through ``backend``."""
    opts = {**slow, "backend": backend}

    def one_by_one() -> None:
        st = get_store(root, opts)
        assert [st.get_range("blob", s, n) for s, n in ranges] == want

    def batched() -> None:
        st = get_store(root, opts)
        if backend == "obstore":
            got = st.get_ranges("blob", ranges)
        else:
            path = st.path("blob")
            got = st.fs.cat_ranges(
                [path] * len(ranges), [s for s, _ in ranges], [s + n for s, n in ranges]
            )
        assert got == want

    def commits() -> None:
        a = arrayds.open(root, mode="r+", storage_options=opts)["temp"]
        for i in range(20):
            a[0, 0] = i

    def whole() -> None:
        assert arrayds.open(root, storage_options=opts)["temp"][:].shape == shape

    return {
        f"{len(ranges)} ranged GETs, one by one": best(one_by_one, repeat),
        f"{len(ranges)} ranged GETs, batched": best(batched, repeat),
        "20 commits": best(commits, repeat),
        f"whole-array read ({shape[0]}^2 f4)": best(whole, repeat),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--latency-ms", type=float, default=5.0)
    args = p.parse_args(argv)
    n_ranges, side = (100, 1024) if args.quick else (300, 2048)
    server = ServerProcess(latency=args.latency_ms / 1000)
    try:
        direct = server.storage_options(through_proxy=False)
        slow = server.storage_options()
        import s3fs

        s3fs.S3FileSystem(**direct).mkdir("bench")
        root = f"s3://bench/{uuid.uuid4().hex}"
        blob = np.random.default_rng(0).integers(0, 255, 16 << 20, dtype=np.uint8).tobytes()
        get_store(root, direct).put("blob", blob)
        x = np.random.default_rng(1).standard_normal((side, side)).astype("f4")
        arrayds.to_arrayrecord(x, root, "temp", chunks=(256, 256), storage_options=direct)
        starts = np.random.default_rng(2).integers(0, len(blob) - 4096, n_ranges).tolist()
        ranges = [(int(s), 4096) for s in starts]
        want = [blob[s : s + n] for s, n in ranges]

        rows = {
            backend: measure(backend, root, slow, ranges, want, x.shape, args.repeat)
            for backend in BACKENDS
        }
    finally:
        server.stop()

    print(f"# bench_backends ({platform.machine()}, {args.latency_ms:g} ms per request)")
    print(
        "| workload | fsspec s | fsspec CPU s | obstore s | obstore CPU s | wall fsspec/obstore "
        "| CPU fsspec/obstore |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in rows["fsspec"]:
        (fw, fc), (ow, oc) = rows["fsspec"][name], rows["obstore"][name]
        print(
            f"| {name} | {fw:.3f} | {fc:.3f} | {ow:.3f} | {oc:.3f} | {fw / ow:.2f}x "
            f"| {fc / oc:.2f}x |"
        )


if __name__ == "__main__":
    main()
