"""Beam pipeline: TFRecord files -> an arrayds records dataset -> features, with Apache Beam.

    python examples/beam_pipeline.py                    # 20,000 examples, 2 workers
    python examples/beam_pipeline.py --n 2000           # smaller (the test does this)

Needs the ``[beam]`` extra. Steps, on Beam's DirectRunner with 2 worker processes
(``--workers 0``: the in-process runner; any other runner takes the same transforms):

1. write the input: TFRecord files of serialized examples (here JSON bytes, standing
   in for ``tf.train.Example`` protos), as an upstream job would leave them;
2. convert them with ``arrayds.beam.tfrecord_to_arrayrecord``: one shard per input
   file, each streamed by a worker, committed once when every shard is written;
3. a second pipeline reads that dataset with ``ReadFromArrayRecord`` (split by record
   range across the workers), parses each record into a dict with numpy features
   and writes it with ``WriteToArrayRecord(num_shards=4)``;
4. random access for training: ``arrayds.ArrayRecordDataSource(url, decode=True)``.

Files go to a temporary directory, or to ``--out DIR``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import apache_beam as beam
import numpy as np
from apache_beam.options.pipeline_options import PipelineOptions

import arrayds
from arrayds.beam import ReadFromArrayRecord, WriteToArrayRecord, tfrecord_to_arrayrecord
from arrayds.files.tfrecord import write_tfrecord


def raw_example(i: int) -> bytes:
    """One serialized input example (deterministic in ``i``)."""
    n = 4 + i % 29
    return json.dumps({"id": i, "tokens": [(i * 7 + k) % 1000 for k in range(n)]}).encode()


def features(record: bytes) -> dict:
    """Parse one raw record into training features."""
    ex = json.loads(record)
    tokens = np.asarray(ex["tokens"], dtype=np.int32)
    return {"id": ex["id"], "tokens": tokens, "length": len(tokens), "label": ex["id"] % 10}


def options(workers: int) -> PipelineOptions:
    if workers:
        return PipelineOptions(
            flags=[], direct_num_workers=workers, direct_running_mode="multi_processing"
        )
    return PipelineOptions(flags=[])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000, help="number of examples")
    ap.add_argument("--files", type=int, default=4, help="number of TFRecord input files")
    ap.add_argument("--workers", type=int, default=2, help="DirectRunner worker processes")
    ap.add_argument("--out", default=None, help="output directory (default: a temp dir)")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="arrayds-beam-")

    # 1. the input TFRecord files
    per = -(-args.n // args.files)
    for k in range(args.files):
        ids = range(k * per, min(args.n, (k + 1) * per))
        write_tfrecord(os.path.join(out, f"input-{k:03d}.tfrecord"), map(raw_example, ids))

    # 2. TFRecord -> records dataset (serializer raw: the bytes are kept as they are)
    t0 = time.perf_counter()
    raw_url = os.path.join(out, "corpus.ads", "raw")
    raw = tfrecord_to_arrayrecord(
        options(args.workers), os.path.join(out, "input-*.tfrecord"), raw_url, mode="w"
    )
    print(
        f"converted {len(raw):,} TFRecords into {raw.num_shards} shards "
        f"(serializer {raw.serializer}) in {time.perf_counter() - t0:.1f} s"
    )

    # 3. read it back split by record range, parse, write 4 shards of features
    t0 = time.perf_counter()
    feat_url = os.path.join(out, "corpus.ads", "features")
    with beam.Pipeline(options=options(args.workers)) as p:
        _ = (
            p
            | "Read" >> ReadFromArrayRecord(raw_url)
            | "Parse" >> beam.Map(features)
            | "Write" >> WriteToArrayRecord(feat_url, num_shards=4, mode="w")
        )
    ds = arrayds.records.open_records(feat_url)
    print(
        f"wrote {len(ds):,} feature records in {ds.num_shards} shards "
        f"(serializer {ds.serializer}) in {time.perf_counter() - t0:.1f} s"
    )

    # 4. random access, as a training loop would use it
    src = arrayds.ArrayRecordDataSource(feat_url, decode=True)
    batch = src[list(np.random.default_rng(0).choice(len(src), 8, replace=False))]
    assert len(src) == args.n and all(e["length"] == len(e["tokens"]) for e in batch)
    ids = sorted(e["id"] for e in src)
    assert ids == list(range(args.n)), "every example exactly once"
    print(f"random access: {len(src):,} examples, a batch of {len(batch)}, every id once")


if __name__ == "__main__":
    main()
