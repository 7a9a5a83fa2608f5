"""arrayds quickstart (``make demo``): a chunked array written in parallel by a dask
cluster, sliced lazily, read back as a dask array; then plain ArrayRecord records.

1. build a lazy dask array (a 4096 x 4096 float32 field, 64 blocks of 512 x 512);
2. write it with a ``LocalCluster`` of two worker processes: one task per shard file,
   one commit task, no locks; nothing is visible until the commit;
3. open it like a numpy array and slice it: only the chunks a selection touches are
   read (and decoded in parallel);
4. read it back with ``from_arrayrecord``: a dask array with exactly the stored chunks,
   computed on the cluster;
5. print ``info``;
6. records: write ArrayRecord files, read them by index and in batches, join them in a
   data source for training loops (Grain, PyTorch).

Run it with ``python examples/quickstart.py`` (``--size 2048`` for a smaller array).
Files go to a temporary directory, or to ``$ARRAYDS_QUICKSTART_DIR`` when that is set.
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


def field_block(block_info=None) -> np.ndarray:
    """One block of a smooth 'temperature' field plus a little deterministic texture
    (so it compresses, but not to nothing)."""
    info = block_info[None]
    (i0, i1), (j0, j1) = info["array-location"]
    y = np.arange(i0, i1, dtype=np.float32)[:, None]
    x = np.arange(j0, j1, dtype=np.float32)[None, :]
    smooth = 280.0 + 15.0 * np.sin(y / 700.0) * np.cos(x / 900.0)
    texture = ((y * 7 + x * 13) % 17) * np.float32(0.01)
    return (smooth + texture).astype(np.float32)


def arrays_demo(workdir: str, size: int, chunk: int) -> None:
    from distributed import Client, LocalCluster

    url = os.path.join(workdir, "demo.arrayds")

    # 1. A lazy dask array: nothing is computed yet.
    x = da.map_blocks(
        field_block, chunks=((chunk,) * (size // chunk), (chunk,) * (size // chunk)), dtype="f4"
    )
    print(
        f"dask array: shape {x.shape}, {x.dtype}, {x.npartitions} blocks of {chunk}x{chunk} "
        f"({x.nbytes / 2**20:.0f} MiB)"
    )

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        # 2. Write: the workers compute the blocks and each writes its own shard file.
        t0 = time.perf_counter()
        a = arrayds.to_arrayrecord(
            x,
            url,
            "temperature",
            mode="w",
            compression="zstd:1",
            dims=("y", "x"),
            attrs={"units": "K"},
        )
        nworkers = len(client.scheduler_info()["workers"])
        print(
            f"wrote {a.nchunks} chunks in {a.nshards} shards with {nworkers} worker processes "
            f"in {time.perf_counter() - t0:.1f} s"
        )

        # 3. Slice lazily: open reads the manifest only; a selection reads the chunks it
        #    touches (here 2 of 64), as numpy arrays.
        t = arrayds.open_array(url, "temperature")
        print(repr(t))
        window = t[1020:1026, 2046:2050]
        print(
            f"t[1020:1026, 2046:2050] -> {window.shape}, "
            f"mean {window.mean():.3f} {t.attrs['units']}"
        )
        corners = t.oindex[[0, size - 1], [0, size - 1]]
        print(f"corners: {np.round(corners, 2).tolist()}")
        assert np.array_equal(window, x[1020:1026, 2046:2050].compute())

        # 4. Read back with dask: same chunks as stored, one task per chunk, on the cluster.
        y = arrayds.from_arrayrecord(url, "temperature")
        print(
            f"from_arrayrecord: {y.npartitions} blocks, chunks equal to the stored grid: "
            f"{y.chunks == a.chunks}"
        )
        mean, anomaly_max = dask.compute(y.mean(dtype="f8"), abs(y - y.mean(axis=0)).max())
        print(
            f"mean {float(mean):.4f} K, largest anomaly from the column means "
            f"{float(anomaly_max):.3f} K"
        )
        sample = y[::511, ::255]  # lazy too: reads one chunk in two
        assert np.array_equal(sample.compute(), x[::511, ::255].compute())

    # 5. Info: shape, chunking, shards, sizes, compression ratio.
    print(arrayds.open_array(url, "temperature").info)


def make_example(i: int) -> bytes:
    """A record: 16 token ids (uint16) for example ``i``, deterministic."""
    rng = np.random.default_rng(i)
    return rng.zipf(1.5, size=16).clip(max=65535).astype(np.uint16).tobytes()


def records_demo(workdir: str) -> None:
    # 6a. Write: records are bytes; options use the official ArrayRecord grammar.
    first = os.path.join(workdir, "tokens-00000.array_record")
    with arrayds.ArrayRecordWriter(first, "group_size:1,zstd:3") as writer:
        count = writer.write_many(make_example(i) for i in range(1000))
    print(f"wrote {count} records to {os.path.basename(first)} ({os.path.getsize(first)} bytes)")

    # 6b. Read by index (the footer index finds a record without scanning) and in
    #     batches (a list, slice or numpy array of indices, decoded in parallel).
    with arrayds.ArrayRecordReader(first) as reader:
        tokens = np.frombuffer(reader[42], dtype=np.uint16)
        print(f"record 42: {tokens.tolist()}")
        assert reader[42] == make_example(42)
        batch = reader[[7, 3, 999, 3]]
        print(f"batch of {len(batch)}: lengths {[len(b) for b in batch]}")
        assert reader[10:20] == [make_example(i) for i in range(10, 20)]

    # 6c. A second shard, and a data source joining them into one random-access
    #     sequence (Grain, PyTorch); it pickles, so it works in loader worker processes.
    second = os.path.join(workdir, "tokens-00001.array_record")
    with arrayds.ArrayRecordWriter(second, "group_size:1,zstd:3") as writer:
        writer.write_many(make_example(i) for i in range(1000, 1500))
    source = arrayds.ArrayRecordDataSource(os.path.join(workdir, "tokens-*.array_record"))
    print(f"data source: {len(source.paths)} files, {len(source)} records")
    indices = np.random.default_rng(0).integers(0, len(source), size=8)
    examples = source.__getitems__(indices)  # one engine call per file
    assert examples == [make_example(int(i)) for i in indices]
    print(f"random batch: {np.stack([np.frombuffer(e, np.uint16) for e in examples]).shape}")


def main(workdir: str, size: int = 4096, chunk: int = 512) -> None:
    arrays_demo(workdir, size, chunk)
    records_demo(workdir)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096, help="rows and columns of the array")
    parser.add_argument("--chunk", type=int, default=512, help="rows and columns of a chunk")
    args = parser.parse_args()
    target = os.environ.get("ARRAYDS_QUICKSTART_DIR")
    if target:
        main(target, args.size, args.chunk)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(tmp, args.size, args.chunk)
