"""A huge, mostly empty array: shape (10**8, 10**8) float32 in (10**4, 10**4) chunks
- 10**16 elements, 40 PB if it were dense, 10**8 chunks - with three chunks written.

Chunks that were never written read as the fill value (NaN here) and cost nothing:
the manifest lists three shard entries, not 10**8 chunks, so it is a few KiB; opening
reads only that; a read touches only the chunks it overlaps. A window straddling a
written chunk and never-written ones comes back in one read.

    python examples/sparse_big_array.py
    python examples/sparse_big_array.py --chunk 1000      # 10**5 x 10**5 chunks (faster)

Files go to a temporary directory (or ``--workdir``).
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile
import time

import numpy as np

import arrayds

N = 10**8


def tile(k: int, chunk: int) -> np.ndarray:
    """The content of the k-th written chunk: ``k + 1`` plus a gradient in [0, 1)."""
    rows = np.arange(chunk, dtype=np.float32)[:, None] / np.float32(2 * chunk)
    cols = np.arange(chunk, dtype=np.float32)[None, :] / np.float32(2 * chunk)
    return np.float32(k + 1) + rows + cols


def main(workdir: str, chunk: int) -> None:
    url = os.path.join(workdir, "sparse.arrayds")
    written = [(0, 0), (N // chunk // 2, N // chunk // 10 * 7), (N // chunk - 1, N // chunk - 1)]

    g = arrayds.open(url, mode="w")
    a = g.create_array(
        "world",
        shape=(N, N),
        dtype="f4",
        chunks=(chunk, chunk),
        fill_value=np.nan,
        compression="zstd:1",
        dims=("y", "x"),
        attrs={"description": "three tiles of a 10**8 x 10**8 grid"},
    )
    t0 = time.perf_counter()
    for k, (i, j) in enumerate(written):
        a[i * chunk : (i + 1) * chunk, j * chunk : (j + 1) * chunk] = tile(k, chunk)
    print(
        f"created {a.shape} {a.dtype}: {a.nchunks:,} chunks of {a.chunk_shape}, wrote "
        f"{len(written)} of them in {time.perf_counter() - t0:.1f} s"
    )

    manifest = os.path.getsize(os.path.join(url, "world", "arrayds.json"))
    print(f"manifest: {manifest:,} bytes for {a.nchunks:,} chunks")
    assert manifest < 8192

    t0 = time.perf_counter()
    b = arrayds.open_array(url, "world")
    print(f"opened in {1000 * (time.perf_counter() - t0):.1f} ms: {b!r}")
    assert b.nchunks == (N // chunk) ** 2 and b.nchunks_initialized == len(written)

    # One read across the corner of the middle tile: 2 x 3 of its elements, the rest
    # from three never-written neighbours (fill value).
    i, j = written[1]
    r0, c0 = i * chunk - 3, j * chunk - 2
    t0 = time.perf_counter()
    window = b[r0 : r0 + 5, c0 : c0 + 5]
    print(f"b[{r0}:{r0 + 5}, {c0}:{c0 + 5}] ({1000 * (time.perf_counter() - t0):.1f} ms):")
    print(np.array2string(window, precision=4, max_line_width=100))
    expect = np.full((5, 5), np.nan, dtype="f4")
    expect[3:, 2:] = tile(1, chunk)[:2, :3]
    np.testing.assert_array_equal(window, expect)

    # Orthogonal indexing across the whole grid: the three tiles' corners and a gap.
    far = [0, written[1][0] * chunk, N - 1]
    picks = b.oindex[far, [0, written[1][1] * chunk, N - 1]]
    print(f"oindex at rows/cols {far}:")
    print(np.array2string(picks, precision=4))
    assert picks[0, 0] == 1 and picks[1, 1] == 2 and picks[2, 2] == tile(2, chunk)[-1, -1]
    assert math.isnan(picks[0, 2]) and math.isnan(picks[2, 0])
    print(b.info)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunk", type=int, default=10**4, help="chunk rows and columns")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    if args.workdir:
        main(args.workdir, args.chunk)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(tmp, args.chunk)
