"""Dask reads on S3: whole-array reads into one result (``BoxReadArray.compute`` and
``store``) keep the fetched bytes in flight within the budget (the proxy holds the
shard GETs and counts them), every shard one GET; a region decodes only its chunks and
fetches a shard it needs half of in one GET."""

from __future__ import annotations

import threading
import time

import numpy as np

import arrayds
from arrayds.kinds.array import read_layer
from arrayds.nodes import shards as store_mod
from tests.coalesce.test_s3_requests import grid  # noqa: F401


def _wait_held(proxy, n: int) -> None:
    """Until ``n`` requests wait at the proxy (a handshake; the deadline only bounds a
    failure)."""
    deadline = time.monotonic() + 30
    while proxy.stats.snapshot()["held"] < n:
        assert time.monotonic() < deadline, proxy.stats.snapshot()
        time.sleep(0.001)


def test_whole_array_reads_keep_the_fetch_budget_in_flight(s3, grid, proxy, monkeypatch):  # noqa: F811
    url, data, shards = grid
    slow = s3.storage_options(proxy.url)
    largest = max(shards.values())
    # two shards' bytes, no share of the result: two GETs at once, never more
    monkeypatch.setattr(read_layer, "INTO_FETCH_SHARE", 1 << 40)
    monkeypatch.setattr(read_layer, "INTO_FETCH_BYTES", int(2.2 * largest))
    for how in ("compute", "store"):
        x = arrayds.from_arrayrecord(url, storage_options=slow)
        target = np.zeros(data.shape, data.dtype)
        proxy.stats.reset()
        proxy.release.clear()
        proxy.hold = lambda head: head.startswith(b"GET ")
        got: list = []

        def read(x=x, how=how, target=target, got=got) -> None:
            if how == "compute":
                got.append(x.compute(scheduler="threads", num_workers=8))
            else:
                x.store(target, scheduler="threads", num_workers=8)
                got.append(target)

        t = threading.Thread(target=read)
        t.start()
        try:
            _wait_held(proxy, 2)
        finally:
            proxy.release.set()
            t.join()
        proxy.hold = None
        np.testing.assert_array_equal(got[0], data)
        stats = proxy.stats.snapshot()
        assert stats["max_in_flight"] == 2, stats
        assert stats["requests"] == len(shards)  # each shard whole, in one GET


def test_region_of_half_of_each_shard_is_one_get_per_shard_decoding_only_its_chunks(
    s3,
    grid,  # noqa: F811
    proxy,
):
    url, data, shards = grid  # 8 x 8 chunks of 32 x 32, shards of 2 x 8 chunks
    x = arrayds.from_arrayrecord(url, storage_options=s3.storage_options(proxy.url))
    store_mod.reset_io_stats()
    proxy.stats.reset()
    got = x[:, 0:128].compute(scheduler="threads")  # half of every shard's chunks
    np.testing.assert_array_equal(got, data[:, 0:128])
    assert proxy.stats.snapshot()["requests"] == len(shards)  # each shard whole, one GET
    assert store_mod.io_stats()["records_read"] == 32  # only the region's chunks decoded
    # less than half of a shard: its footer, then its chunks
    store_mod.clear_reader_cache()
    store_mod.reset_io_stats()
    proxy.stats.reset()
    np.testing.assert_array_equal(x[:, 0:96].compute(scheduler="threads"), data[:, 0:96])
    assert proxy.stats.snapshot()["requests"] == 2 * len(shards)
    assert store_mod.io_stats()["records_read"] == 24
