"""Whole-array reads into one result on S3 (``BoxReadArray.compute`` and ``store``):
the fetched bytes in flight stay within the budget (the proxy holds the shard GETs
and counts them), every shard is one GET."""

from __future__ import annotations

import threading
import time

import numpy as np

import arrayds
from arrayds.kinds.array import read_layer
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
