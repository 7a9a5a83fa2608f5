"""Feed a Grain pipeline from a records dataset, and read its shards with Grain's own
ArrayRecord source (no arrayds involved in that read).

    python examples/grain_pipeline.py            # 20,000 examples
    python examples/grain_pipeline.py --n 2000   # smaller (the test does this)
"""

from __future__ import annotations

import argparse
import os
import tempfile

import dask.bag as db
import grain
import numpy as np

import arrayds
from arrayds import records as records
from arrayds.kinds.records import serializers

SEQ = 32


def make_example(i: int) -> dict:
    rng = np.random.default_rng(i)
    return {"id": i, "tokens": rng.integers(0, 1000, size=SEQ, dtype=np.int32)}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=int(os.environ.get("ARRAYDS_EXAMPLE_N", 20_000)))
    p.add_argument("--batch-size", type=int, default=64)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = os.path.join(tmp, "lm")
        bag = db.range(args.n, npartitions=4).map(make_example)
        arrayds.to_arrayrecord(bag, url)

        # 1. arrayds data source, decoded, in a Grain MapDataset pipeline
        src = arrayds.ArrayRecordDataSource(url, decode=True)
        ds = (
            grain.MapDataset.source(src)
            .shuffle(seed=42)
            .map(lambda ex: ex["tokens"])
            .batch(args.batch_size, drop_remainder=True)
        )
        total = 0
        for k, batch in enumerate(ds):
            assert batch.shape == (args.batch_size, SEQ) and batch.dtype == np.int32
            total += len(batch)
            if k == 0:
                print(f"first batch {batch.shape}, tokens[0,:5] {batch[0, :5].tolist()}")
        print(f"{len(ds)} shuffled batches, {total} examples")
        assert total == (args.n // args.batch_size) * args.batch_size

        # 2. Grain's own ArrayRecord source over the dataset's shard files
        shards = records.open_records(url).shard_paths
        gsrc = grain.sources.ArrayRecordDataSource(shards)
        decode = serializers.get(records.open_records(url).serializer).decode
        ex = decode(gsrc[len(gsrc) - 1])
        print(f"grain.sources.ArrayRecordDataSource: {len(gsrc)} records in {len(shards)} files")
        assert len(gsrc) == args.n and ex["id"] == args.n - 1
        assert np.array_equal(ex["tokens"], make_example(args.n - 1)["tokens"])


if __name__ == "__main__":
    main()
