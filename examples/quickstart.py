"""arrayds quickstart: write ArrayRecord files, read them by index and in batches,
and feed them to a training loop through a data source.

Run it with ``python examples/quickstart.py`` (``make demo``). Files go to a temporary
directory, or to ``$ARRAYDS_QUICKSTART_DIR`` when that is set.
"""

from __future__ import annotations

import os
import tempfile

import numpy as np

import arrayds


def make_example(i: int) -> bytes:
    """A record: 16 token ids (uint16) for example ``i``, deterministic."""
    rng = np.random.default_rng(i)
    return rng.zipf(1.5, size=16).clip(max=65535).astype(np.uint16).tobytes()


def main(workdir: str) -> None:
    # 1. Write: records are bytes; options use the official ArrayRecord grammar.
    first = os.path.join(workdir, "tokens-00000.array_record")
    with arrayds.ArrayRecordWriter(first, "group_size:1,zstd:3") as writer:
        count = writer.write_many(make_example(i) for i in range(1000))
    print(f"wrote {count} records to {os.path.basename(first)} ({os.path.getsize(first)} bytes)")

    # 2. Read by index: the footer index finds a record without scanning.
    reader = arrayds.ArrayRecordReader(first)
    print(f"{len(reader)} records, options {reader.writer_options_string()!r}")
    tokens = np.frombuffer(reader[42], dtype=np.uint16)
    print(f"record 42: {tokens.tolist()}")
    assert reader[42] == make_example(42)

    # 3. Batches: a list, a slice or a numpy array of indices; decoded in parallel.
    batch = reader[[7, 3, 999, 3]]
    print(f"batch of {len(batch)}: lengths {[len(b) for b in batch]}")
    assert reader[10:20] == [make_example(i) for i in range(10, 20)]
    reader.close()

    # 4. The official package's files and ours are the same format; a second shard:
    second = os.path.join(workdir, "tokens-00001.array_record")
    with arrayds.ArrayRecordWriter(second, "group_size:1,zstd:3") as writer:
        writer.write_many(make_example(i) for i in range(1000, 1500))

    # 5. A data source joins the shards into one random-access sequence (Grain,
    #    PyTorch). It pickles, so it works in loader worker processes.
    source = arrayds.ArrayRecordDataSource(os.path.join(workdir, "tokens-*.array_record"))
    print(f"data source: {len(source.paths)} files, {len(source)} records")
    rng = np.random.default_rng(0)
    for step in range(3):
        indices = rng.integers(0, len(source), size=8)
        examples = source.__getitems__(indices)  # one engine call per file
        matrix = np.stack([np.frombuffer(e, dtype=np.uint16) for e in examples])
        assert examples == [make_example(int(i)) for i in indices]
        print(f"step {step}: batch {matrix.shape}, first ids {matrix[:, 0].tolist()}")


if __name__ == "__main__":
    target = os.environ.get("ARRAYDS_QUICKSTART_DIR")
    if target:
        main(target)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(tmp)
