"""Batches read ahead from S3: ``ArrayRecordDataSource.batches`` reads the
records of several batches as one coalesced pass per shard, so a block shuffle's
window, or a group of fully shuffled batches, costs a GET per shard instead of one
per batch and shard. Requests counted by the proxy in front of moto."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from arrayds import records
from arrayds.sampler import BlockShuffleSampler

N, SHARDS, BATCH = 4096, 4, 64


@pytest.fixture
def source(s3, s3_url, s3_opts, proxy):
    """(data source through the proxy, the records): 4096 records of 100 B in 4 shards,
    every shard's footer already read."""
    rng = np.random.default_rng(5)
    recs = [rng.integers(0, 256, 100, dtype=np.uint8).tobytes() for _ in range(N)]
    records.write_records(recs, s3_url, num_shards=SHARDS, storage_options=s3_opts)
    src = records.data_source(s3_url, storage_options=s3.storage_options(proxy.url))
    src[list(range(0, N, N // SHARDS))]  # open every shard
    return src, recs


def _epoch(src, recs, order, readahead, proxy) -> int:
    """Read ``order`` in batches, check every record; the GETs it took."""
    proxy.stats.reset()
    got = list(src.batches(order, BATCH, readahead=readahead))
    assert [len(b) for b in got] == [BATCH] * (len(order) // BATCH)
    assert [r for b in got for r in b] == [recs[i] for i in order]
    stats = proxy.stats.snapshot()
    assert set(stats["methods"]) == {"GET"}
    return stats["requests"]


def test_a_block_shuffle_window_is_one_get_per_shard(source, proxy):
    src, recs = source
    order = BlockShuffleSampler(N, BATCH, 8, seed=0).epoch_order(0)
    windows = N // (BATCH * 8)
    ahead = _epoch(src, recs, order, 8, proxy)  # a group of 8 batches is one window
    assert ahead <= SHARDS * windows
    alone = _epoch(src, recs, order, 0, proxy)  # each batch draws from 8 blocks
    assert alone >= 3 * ahead


def test_fully_shuffled_batches_share_their_gets(source, proxy):
    src, recs = source
    order = np.random.default_rng(0).permutation(N)
    groups = N // (BATCH * 8)
    ahead = _epoch(src, recs, order, 8, proxy)
    assert ahead <= SHARDS * groups
    assert _epoch(src, recs, order, 0, proxy) >= 6 * ahead


def test_leaving_early_waits_for_the_read_in_flight(source, proxy):
    src, recs = source
    it = src.batches(np.arange(N), BATCH, readahead=2)
    assert next(it) == recs[:BATCH]  # the next group is being read in the background
    it.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("arrayds-batches")]
    assert proxy.stats.snapshot()["max_in_flight"] >= 1
    assert proxy.stats.in_flight == 0


@pytest.mark.parametrize(
    ("args", "kw", "error", "match"),
    [
        ((range(4), 0), {}, ValueError, "batch_size must be an int >= 1, got 0"),
        ((range(4), 2), {"readahead": -1}, ValueError, "readahead must be an int >= 0"),
        ((range(4), 2.0), {}, ValueError, "batch_size"),
        (([0, N], 2), {}, IndexError, str(N)),
    ],
)
def test_bad_arguments_raise_at_the_call(source, args, kw, error, match):
    src, _ = source
    with pytest.raises(error, match=match):
        src.batches(*args, **kw)  # before any batch is asked for
