"""Records pipeline: training examples -> a records dataset, written in parallel by a
dask cluster, then read train-style with random access and by the official package.

    python examples/records_pipeline.py                 # 100,000 examples
    python examples/records_pipeline.py --n 5000        # smaller (the test does this)

Steps:
1. make JSON-like examples with numpy features (a dask bag, generated lazily);
2. write them with ``arrayds.to_arrayrecord`` on a ``LocalCluster`` (2 worker
   processes): one shard per partition, written in parallel, committed atomically;
3. train-style random access: shuffled mini-batches through
   ``arrayds.ArrayRecordDataSource(url, decode=True)``;
4. read one shard with the official ``array_record`` package (no arrayds needed to
   get the bytes; the msgpack payload is then decoded with arrayds.serializers).

Files go to a temporary directory, or to ``--out DIR``.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import dask.bag as db
import numpy as np

import arrayds
from arrayds import records as records
from arrayds.kinds.records import serializers

VOCAB = 32_000
_POOL = np.random.default_rng(2024).integers(0, VOCAB, size=1 << 20, dtype=np.int32)
_NOISE = np.random.default_rng(2025).standard_normal(1 << 16).astype(np.float16)


def make_example(i: int) -> dict:
    """One training example (deterministic in ``i``, cheap to make): text, token ids,
    an embedding, a label and metadata."""
    n = 8 + (i * 7919) % 56
    start = (i * 104_729) % (len(_POOL) - 64)
    e = (i * 31) % (len(_NOISE) - 16)
    return {
        "id": i,
        "text": f"example number {i}",
        "tokens": _POOL[start : start + n].copy(),
        "embedding": _NOISE[e : e + 16].copy(),
        "label": (i * 7) % 10,
        "meta": {"source": "synthetic", "split": "train", "quality": (i % 1000) / 1000},
    }


def write(url: str, n: int, partitions: int) -> None:
    from dask.distributed import Client, LocalCluster

    bag = db.range(n, npartitions=partitions).map(make_example)
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster),
    ):
        t0 = time.perf_counter()
        arrayds.to_arrayrecord(bag, url, mode="w")
        dt = time.perf_counter() - t0
    ds = records.open_records(url)
    size = sum(s.file_size for s in ds.shards)
    print(
        f"wrote {len(ds):,} examples in {ds.num_shards} shards ({size / 2**20:.1f} MiB, "
        f"serializer {ds.serializer!r}) in {dt:.1f} s with 2 workers"
    )
    assert len(ds) == n


def train(url: str, steps: int, batch_size: int) -> None:
    src = arrayds.ArrayRecordDataSource(url, decode=True)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(src))
    seen = 0
    t0 = time.perf_counter()
    for step in range(steps):
        idx = order[step * batch_size : (step + 1) * batch_size]
        batch = src[idx]  # one batched read per shard file
        embeddings = np.stack([ex["embedding"] for ex in batch]).astype(np.float32)
        labels = np.array([ex["label"] for ex in batch])
        lengths = np.array([len(ex["tokens"]) for ex in batch])
        assert [ex["id"] for ex in batch] == idx.tolist()
        seen += len(batch)
        if step == 0:
            print(
                f"step 0: embeddings {embeddings.shape}, labels {labels[:6].tolist()}, "
                f"mean length {lengths.mean():.1f}"
            )
    dt = time.perf_counter() - t0
    print(f"{steps} shuffled steps, {seen:,} examples, {seen / dt:,.0f} examples/s")
    ex = src[int(order[0])]
    want = make_example(int(order[0]))
    assert np.array_equal(ex["tokens"], want["tokens"]) and ex["meta"] == want["meta"]


def read_with_official(url: str) -> None:
    from array_record.python import array_record_module

    ds = records.open_records(url)
    shard = ds.shard_paths[1]
    reader = array_record_module.ArrayRecordReader(shard)
    n = reader.num_records()
    raw = reader.read([0, n - 1])
    reader.close()
    first = serializers.get(ds.serializer).decode(raw[0])
    print(
        f"official reader: {os.path.basename(shard)} holds {n:,} records; "
        f"first is example {first['id']} with {len(first['tokens'])} tokens"
    )
    assert first["id"] == ds.shards[0].num_records


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=int(os.environ.get("ARRAYDS_EXAMPLE_N", 100_000)))
    p.add_argument("--partitions", type=int, default=8)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        url = os.path.join(args.out or tmp, "train")
        write(url, args.n, args.partitions)
        train(url, min(args.steps, args.n // args.batch_size or 1), args.batch_size)
        read_with_official(url)


if __name__ == "__main__":
    main()
