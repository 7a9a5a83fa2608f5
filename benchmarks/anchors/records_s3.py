"""The cloud-loader anchor of benchmarks/bench_s3.py's records rows: webdataset reading
tar shards from S3.

Run by benchmarks/anchor_runner.py in the anchor interpreter (protocol:
benchmarks/anchors/harness.py). The job (JSON on stdin):

* ``mode``: ``"write"`` packs the records of ``data`` (a ``.npy`` file, one record of
  bytes per row) into ``shards`` tar shards of consecutive records (``wds.TarWriter``,
  one ``bin`` member per record, key ``%08d`` of its index) and uploads them to
  ``s3://bucket/path/`` through ``direct``, reporting ``stored`` (their bytes);
  ``"read"`` measures them through ``proxy``;
* ``direct``, ``proxy``: s3fs-style options (``endpoint_url``, ``key``, ``secret``);
* ``batch``: the batch size; ``batches``: how many batches an epoch is measured over
  (``null``: all); ``window``: the shuffle buffer, in records; ``repeat``.

webdataset reads each shard as one HTTP stream: a presigned URL of it, read through
webdataset's ``curl`` pipe (what it does with ``http(s)://`` URLs). Measured sections:

* ``scan``: the shards in order, records in order, in batches of ``batch``;
* ``shuffle``: webdataset's shuffle — the shard order shuffled, then records through
  a shuffle buffer of ``window`` records (it has no full random shuffle: a shard is
  one stream).

Every record read is checked against ``data`` after its section.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
from harness import finish, job, section, versions


def shard_keys(j: dict[str, Any]) -> list[str]:
    return [f"{j['path']}/shard-{i:05d}.tar" for i in range(j["shards"])]


def write(j: dict[str, Any], data: np.ndarray) -> int:
    import s3fs
    import webdataset as wds

    so = j["direct"]
    fs = s3fs.S3FileSystem(endpoint_url=so["endpoint_url"], key=so["key"], secret=so["secret"])
    bounds = np.linspace(0, len(data), j["shards"] + 1).astype(int)
    total = 0
    for key, lo, hi in zip(shard_keys(j), bounds[:-1], bounds[1:], strict=True):
        buf = io.BytesIO()
        with wds.TarWriter(buf) as sink:
            for i in range(lo, hi):
                sink.write({"__key__": f"{i:08d}", "bin": data[i].tobytes()})
        fs.pipe_file(f"{j['bucket']}/{key}", buf.getvalue())
        total += len(buf.getvalue())
    return total


def measure(j: dict[str, Any], data: np.ndarray) -> None:
    import s3fs
    import webdataset as wds

    so = j["proxy"]
    fs = s3fs.S3FileSystem(endpoint_url=so["endpoint_url"], key=so["key"], secret=so["secret"])
    urls = [fs.url(f"{j['bucket']}/{key}", expires=3600) for key in shard_keys(j)]  # presigned

    def epoch(shuffle: bool) -> list[tuple[str, bytes]]:
        ds = wds.WebDataset(urls, shardshuffle=len(urls) if shuffle else False, seed=0)
        if shuffle:
            ds = ds.shuffle(j["window"])
        got: list[tuple[str, bytes]] = []
        batches = ds.to_tuple("__key__", "bin").batched(j["batch"], collation_fn=list)
        for n, batch in enumerate(batches):
            got.extend(batch)
            if j["batches"] is not None and n + 1 == j["batches"]:
                break
        return got

    def check(got: list[tuple[str, bytes]]) -> None:
        for key, value in got:
            assert value == data[int(key)].tobytes(), key
        want = len(data) if j["batches"] is None else min(len(data), j["batches"] * j["batch"])
        assert len(got) == want, (len(got), want)

    epoch(False)[:1]  # imports and a first connection, unmeasured
    for label, shuffle in (("scan", False), ("shuffle", True)):
        for _ in range(j["repeat"]):
            with section(label):
                got = epoch(shuffle)
            check(got)


def main() -> None:
    j = job()
    data = np.load(j["data"])
    extra: dict[str, Any] = {}
    if j["mode"] == "write":
        extra["stored"] = write(j, data)
    elif j["mode"] == "read":
        measure(j, data)
    else:
        raise ValueError(f"unknown mode {j['mode']!r}")
    finish(versions=versions("webdataset", "numpy"), **extra)


if __name__ == "__main__":
    main()
