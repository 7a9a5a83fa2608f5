"""A dask analysis on stored data: normalise the rows of a tall matrix read with
``from_arrayrecord`` and take its leading singular vectors with
``dask.array.linalg.svd_compressed``; compare with the same analysis in memory.

The matrix is a rank-``k`` signal plus noise (deterministic), written once as an
arrayds array with row blocks; ``from_arrayrecord`` gives a dask array with exactly
those blocks, so the SVD graph is the one dask would build for the in-memory array.

    python examples/svd_pipeline.py                      # 20,000 x 400 float64 (64 MB)
    python examples/svd_pipeline.py --rows 4000 --cols 100

Files go to a temporary directory (or ``--workdir``).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import dask
import dask.array as da
import numpy as np

import arrayds


def make_matrix(rows: int, cols: int, rank: int, seed: int = 7) -> np.ndarray:
    """Rows drawn from a ``rank``-dimensional subspace with decaying strengths, plus
    1% noise."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.standard_normal((cols, rank)))
    strengths = np.geomspace(10.0, 2.0, rank)
    scores = rng.standard_normal((rows, rank)) * strengths
    return scores @ basis.T + 0.01 * rng.standard_normal((rows, cols))


def normalise_rows(x):
    """Rows scaled to unit Euclidean norm (works on numpy and dask arrays alike)."""
    if isinstance(x, da.Array):
        return x / da.linalg.norm(x, axis=1, keepdims=True)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def subspace_error(v1: np.ndarray, v2: np.ndarray) -> float:
    """Sine of the largest principal angle between the row spaces of v1 and v2."""
    cosines = np.linalg.svd(v1 @ v2.T, compute_uv=False)
    return float(np.sqrt(max(0.0, 1.0 - cosines.min() ** 2)))


def main(workdir: str, rows: int, cols: int, rank: int, block_rows: int) -> None:
    url = os.path.join(workdir, "svd.arrayds")
    data = make_matrix(rows, cols, rank)
    t0 = time.perf_counter()
    stored = arrayds.to_arrayrecord(
        da.from_array(data, chunks=(block_rows, cols)), url, "X", mode="w", compression="zstd:1"
    )
    print(
        f"wrote X {stored.shape} {stored.dtype} as {stored.nchunks} row blocks in "
        f"{stored.nshards} shards ({time.perf_counter() - t0:.2f} s)"
    )

    # The pipeline on stored data: lazy until compute.
    x = arrayds.from_arrayrecord(url, "X")
    assert x.chunks == stored.chunks
    u, s, v = da.linalg.svd_compressed(normalise_rows(x), k=rank, n_power_iter=2, seed=0)
    t0 = time.perf_counter()
    u, s, v = dask.compute(u, s, v)
    print(f"svd_compressed on from_arrayrecord data: {time.perf_counter() - t0:.2f} s")
    print(f"singular values: {np.round(s, 4).tolist()}")

    # The same dask pipeline over the in-memory matrix, same blocks, same seed.
    xm = da.from_array(data, chunks=(block_rows, cols))
    um, sm, vm = dask.compute(
        *da.linalg.svd_compressed(normalise_rows(xm), k=rank, n_power_iter=2, seed=0)
    )
    same = np.allclose(s, sm, rtol=1e-12, atol=0) and np.allclose(np.abs(u), np.abs(um), atol=1e-10)
    print(f"identical to the in-memory dask result: {same}")
    assert same, "the stored data gave a different SVD than the in-memory data"

    # And the exact SVD of the normalised matrix in numpy.
    _, s_exact, v_exact = np.linalg.svd(normalise_rows(data), full_matrices=False)
    rel = float(np.max(np.abs(s - s_exact[:rank]) / s_exact[:rank]))
    angle = subspace_error(v, v_exact[:rank])
    print(
        f"vs numpy.linalg.svd: singular values within {rel:.1e} (relative), "
        f"right singular subspace within sin(angle) {angle:.1e}"
    )
    assert rel < 1e-6 and angle < 1e-4, (rel, angle)
    explained = float((s**2).sum() / (s_exact**2).sum())
    print(f"{rank} components explain {explained:.2%} of the normalised rows' energy")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--cols", type=int, default=400)
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--block-rows", type=int, default=2_000)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    if args.workdir:
        main(args.workdir, args.rows, args.cols, args.rank, args.block_rows)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(tmp, args.rows, args.cols, args.rank, args.block_rows)
