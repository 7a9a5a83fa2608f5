"""A dask write on a real cluster (two worker processes) moves no block between workers.

The write graph fuses every block-producing task into the one shard task that needs it
(``arrayds.kinds.array.dask.write_graph``), so each shard task computes its blocks in the
worker process that writes them. What the workers report is checked, nothing mocked:
the scheduler's task stream (which tasks ran, and every transfer a task waited for)
and each worker's log of incoming transfers, before and after the write. The only
data allowed to travel are the shard tasks' small manifest entries, gathered by the
commit task.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest
from distributed import get_task_stream

import arrayds

from .test_distributed import CHUNK, expected_block, source


def _incoming(dask_worker=None) -> list[dict]:
    return [
        {"keys": {str(k): int(v) for k, v in d["keys"].items()}, "total": int(d["total"])}
        for d in dask_worker.transfer_incoming_log
    ]


@pytest.fixture
def on_cluster(client):
    with client.as_current():
        yield client


def _transfers_during(client, fn):
    before = {w: len(v) for w, v in client.run(_incoming).items()}
    with get_task_stream(client) as ts:
        out = fn()
    after = client.run(_incoming)
    incoming = [d for w, v in after.items() for d in v[before.get(w, 0) :]]
    return out, ts.data, incoming


def test_generated_write_transfers_no_block_between_workers(tmp_path, on_cluster):
    client = on_cluster
    n = 4 * CHUNK  # 4096 x 4096 float32, 16 blocks of 4 MiB, 4 shards of 16 MiB
    url = str(tmp_path / "ds")
    x = source(n)
    a, stream, incoming = _transfers_during(
        client, lambda: arrayds.to_arrayrecord(x, url, "x", mode="w-", compression="zstd:1")
    )
    assert a.nshards == 4 and a.nchunks_initialized == 16
    # the task stream shows no task waiting for a transfer other than the commit
    waited = [
        str(t["key"])
        for t in stream
        if any(s["action"] == "transfer" for s in t["startstops"])
        and not str(t["key"]).startswith("arrayds-commit-")
    ]
    assert waited == []
    # the workers received nothing but shard entries (a few hundred bytes each)
    moved = {k: b for d in incoming for k, b in d["keys"].items()}
    assert all(k.startswith("arrayds-shard-") for k in moved), moved
    assert sum(d["total"] for d in incoming) < 64 << 10, incoming
    # one task per shard plus the commit ran; no block task ran on its own
    names = sorted(t["key"] if isinstance(t["key"], str) else str(t["key"]) for t in stream)
    assert len(names) == 5, names
    assert sum(k.startswith("arrayds-shard-") for k in names) == 4, names
    assert sum(k.startswith("arrayds-commit-") for k in names) == 1, names
    # both workers wrote shards (otherwise "no transfer" would prove nothing)
    assert len({t["worker"] for t in stream if str(t["key"]).startswith("arrayds-shard-")}) == 2
    np.testing.assert_array_equal(
        arrayds.open_array(url, "x")[n - 10 :, :20], expected_block(n - 10, 0, (10, 20))
    )


def test_shared_input_is_computed_once_on_the_cluster(tmp_path, on_cluster):
    """A block needed by two shards (split by a rechunk) stays its own task: it is
    computed once, and moves to the worker of the other shard."""
    client = on_cluster
    n = 2 * CHUNK
    url = str(tmp_path / "rc")
    # 2 input blocks of 1024 rows; written as 512-row blocks, one per shard of 2 MiB
    x = source(n).rechunk((CHUNK, n))
    y = x.rechunk((CHUNK // 2, n))
    a, stream, _ = _transfers_during(
        client,
        lambda: arrayds.to_arrayrecord(y, url, "x", mode="w-", shard_size=CHUNK // 2 * n * 4),
    )
    assert a.nshards == 4
    keys = [t["key"] if isinstance(t["key"], str) else str(t["key"]) for t in stream]
    assert sum(k.startswith("arrayds-shard-") for k in keys) == 4
    assert len(keys) == len(set(keys)), keys  # nothing computed twice
    # the shared input blocks ran as tasks of their own, besides shards and commit
    assert len(keys) > 5, keys
    np.testing.assert_array_equal(arrayds.open_array(url, "x")[...], expected_block(0, 0, (n, n)))


def test_write_of_a_persisted_array(tmp_path, on_cluster):
    """Blocks already held by the workers (persisted) are inputs, not tasks to fuse."""
    client = on_cluster
    url = str(tmp_path / "p")
    x = client.persist(source(2 * CHUNK))
    try:
        a = arrayds.to_arrayrecord(x + 1, url, "x", mode="w-")
        want = expected_block(0, 0, (2 * CHUNK, 2 * CHUNK)) + 1
        np.testing.assert_array_equal(a[...], want)
    finally:
        del x


def test_compute_false_write_on_the_cluster(tmp_path, on_cluster):
    url = str(tmp_path / "cf")
    x = da.random.default_rng(11).random((2048, 2048), chunks=512).astype(np.float32)
    d = arrayds.to_arrayrecord(x, url, "x", mode="w-", compute=False)
    a = d.compute()
    np.testing.assert_array_equal(a[...], x.compute())
