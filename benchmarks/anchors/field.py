"""The field bench_arrays.py writes and reads, for both sides of it: this venv's
systems and the anchor interpreter's zarr (benchmarks/anchors/arrays.py), so that both
write the same values, computed the same way.

A deterministic, compressible float32 field: a smooth part plus a 1024 x 1024 tile of
hash noise quantized to 1/64, repeated (zstd level 1 stores it at about 0.8 of its
size). :func:`generated` computes it block by block where a dask task runs (the
cluster workload A5: nothing large travels from the client).

>>> x = make_data(1024)
>>> x.shape, x.dtype.name, bool((x == generated(1024, 256).compute()).all())
((1024, 1024), 'float32', True)
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator

import dask.array as da
import numpy as np

NOISE_TILE = 1024
_noise: list[np.ndarray] = []


def noise_tile() -> np.ndarray:
    """A 1024x1024 tile of multiplicative-hash noise in [0, 4) quantized to 1/64
    (computed once per process)."""
    if not _noise:
        r = np.arange(NOISE_TILE, dtype=np.uint32)[:, None]
        c = np.arange(NOISE_TILE, dtype=np.uint32)[None, :]
        h = (r * np.uint32(NOISE_TILE) + c) * np.uint32(2654435761)
        _noise.append((h >> np.uint32(24)).astype(np.float32) * np.float32(1 / 64))
    return _noise[0]


def values(i0: int, j0: int, shape: tuple[int, int], n: int) -> np.ndarray:
    """Rows ``i0:``, columns ``j0:`` of the benchmark field: a smooth field plus the
    noise tile repeated (cheap, so the cluster workload A5 measures storage, not data
    generation)."""
    y = np.arange(i0, i0 + shape[0], dtype=np.float32)[:, None]
    x = np.arange(j0, j0 + shape[1], dtype=np.float32)[None, :]
    out = np.sin(y / 500) * (np.float32(10) * np.cos(x / 700))
    out += np.float32(100)
    t = noise_tile()
    rows = np.arange(i0, i0 + shape[0]) % NOISE_TILE
    cols = np.arange(j0, j0 + shape[1]) % NOISE_TILE
    for a in range(0, shape[0], NOISE_TILE):  # add the tile in aligned pieces
        ra = rows[a : a + NOISE_TILE]
        for b in range(0, shape[1], NOISE_TILE):
            cb = cols[b : b + NOISE_TILE]
            if ra[0] == 0 and cb[0] == 0:
                out[a : a + len(ra), b : b + len(cb)] += t[: len(ra), : len(cb)]
            else:
                out[a : a + len(ra), b : b + len(cb)] += t[np.ix_(ra, cb)]
    return out


def make_data(n: int) -> np.ndarray:
    """The whole ``n`` x ``n`` field in memory."""
    out = np.empty((n, n), dtype=np.float32)
    step = 1024
    for i in range(0, n, step):
        out[i : i + step] = values(i, 0, (min(step, n - i), n), n)
    return out


def _gen_block(n: int, block_info=None) -> np.ndarray:
    info = block_info[None]
    (i0, _), (j0, _) = info["array-location"]
    return values(i0, j0, info["chunk-shape"], n)


def generated(n: int, chunk: int) -> da.Array:
    """The same values as :func:`make_data`, computed block by block where the task
    runs (for the cluster workloads: nothing large travels from the client)."""
    chunks = ((chunk,) * (n // chunk), (chunk,) * (n // chunk))
    return da.map_blocks(_gen_block, n, chunks=chunks, dtype=np.float32)


@contextlib.contextmanager
def a5_cluster(
    process_cpu: Callable[[], float], imports: tuple[str, ...]
) -> Iterator[Callable[[], float]]:
    """The cluster of workload A5, for both sides: ``LocalCluster(n_workers=2,
    processes=True, threads_per_worker=1)`` whose workers have imported ``imports``
    first (imports are no part of any figure) -> a clock of the CPU
    seconds of this process and of the workers, each by ``process_cpu``."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        client.run(_import, imports)

        def cluster_cpu() -> float:
            return process_cpu() + sum(client.run(process_cpu).values())

        yield cluster_cpu


def _import(names: tuple[str, ...]) -> None:
    for name in names:
        importlib.import_module(name)
