"""Audio clips of different lengths as a ragged array.

The scenario: many stereo clips (48 kHz, float32) of very different durations. A
model wants the first seconds of some clips, one channel, in a dense batch; an
analysis job wants statistics over every clip in parallel. With a ragged array:

* clips are written from a ``dask.bag`` in parallel (one task per partition), each
  clip cut into pieces along time, so
* ``ra[idx, 0, :n]`` reads only the pieces holding the first ``n`` samples of
  channel 0 of the clips ``idx`` (awkward semantics: each clip is truncated on its
  own, nothing is padded), ``ra.pad(n)`` gives a dense ``(clips, channels, n)``
  batch, and ``arrayds.from_arrayrecord(url)`` is a dask bag of whole clips.

Run: ``python examples/audio_clips.py [--clips 24] [--min-seconds 5] [--max-seconds 40]``
(the canonical case is minutes per clip; the defaults keep the example quick).
"""

from __future__ import annotations

import argparse
import os
import tempfile

import dask
import dask.bag as db
import numpy as np

import arrayds
from arrayds.nodes.shards import io_stats, reset_io_stats

RATE = 48_000


def make_clip(i: int, min_s: float, max_s: float) -> np.ndarray:
    """Clip ``i``: a chord whose pitch depends on ``i``, left/right slightly apart."""
    rng = np.random.default_rng(i)
    n = int(rng.uniform(min_s, max_s) * RATE)
    t = np.arange(n, dtype=np.float32) / RATE
    f0 = 110.0 * 2 ** (i % 12 / 12)
    gain = np.float32(rng.uniform(0.2, 1.0))
    tone = gain * sum(np.sin(2 * np.pi * f0 * k * t) / k for k in (1, 2, 3)).astype(np.float32)
    left = tone + 0.01 * rng.standard_normal(n).astype(np.float32)
    right = 0.8 * tone + 0.01 * rng.standard_normal(n).astype(np.float32)
    return np.stack([left, right])  # (channels, samples)


def main(workdir: str, clips: int, min_s: float, max_s: float) -> None:
    url = os.path.join(workdir, "clips.arrayds")
    # the engine releases the GIL: threads are the right dask scheduler for arrayds
    dask.config.set(scheduler="threads")

    # 1. write in parallel from a bag: pieces of 2**17 samples (~1 MiB of stereo
    #    float32) along time, the variable axis
    bag = db.from_sequence(range(clips), npartitions=4).map(make_clip, min_s, max_s)
    ra = arrayds.to_arrayrecord(bag, url, mode="w", compression="zstd:1")
    minutes = ra.lengths.sum() / RATE / 60
    print(
        f"wrote {len(ra)} clips ({minutes:.1f} minutes of stereo audio) in {ra.nshards} "
        f"shards, pieces of {ra.piece_len} samples along axis {ra.axis}"
    )
    print(f"durations (s): {np.round(ra.lengths[:8] / RATE, 1).tolist()} ...")

    # 2. one clip, whole
    clip = ra[3]
    print(f"clip 3: shape {clip.shape}, dtype {clip.dtype}")
    np.testing.assert_array_equal(clip, make_clip(3, min_s, max_s))

    # 3. the first second of channel 0 of a few clips: only the first piece of each
    ra = arrayds.open_ragged(url)
    picks = [0, 5, 7, clips - 1]
    ra.shapes  # noqa: B018 - reads the shard indexes once, so the count below is pieces only
    reset_io_stats()
    firsts = ra[picks, 0, :RATE]
    print(
        f"first second of channel 0 of clips {picks}: shapes {[x.shape for x in firsts]}, "
        f"{io_stats()['records_read']} pieces read"
    )
    # awkward semantics: slices truncate per clip
    tails = ra[picks, :, -RATE // 2 :]
    print(f"last half second, both channels: {[x.shape for x in tails]}")

    # 4. a dense batch for a model: pad/truncate to 3 seconds
    batch = ra.pad(3 * RATE, fill=0.0, items=picks)
    print(f"dense batch: {batch.shape} {batch.dtype}")

    # 5. parallel analysis over every clip: a dask bag with one partition per shard
    rms = arrayds.from_arrayrecord(url).map(lambda x: float(np.sqrt((x**2).mean()))).compute()
    print(f"RMS of {len(rms)} clips: min {min(rms):.3f}, max {max(rms):.3f}")

    # 6. awkward, when installed
    try:
        ak_array = ra.to_awkward(items=picks[:2])
        print(f"awkward: {ak_array.type}")
    except ImportError:
        print("awkward not installed; skipping to_awkward()")
    print("done")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clips", type=int, default=24)
    p.add_argument("--min-seconds", type=float, default=5.0)
    p.add_argument("--max-seconds", type=float, default=40.0)
    p.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    args = p.parse_args()
    if args.dir:
        main(args.dir, args.clips, args.min_seconds, args.max_seconds)
    else:
        with tempfile.TemporaryDirectory() as d:
            main(d, args.clips, args.min_seconds, args.max_seconds)
