"""Reading along on S3 (arrayds/files/read_along.py): ``batches`` reads, with a group's
requests, the records of later groups that finish a shard or join the group's ranges,
and keeps them (at most ``keep_bytes``) until their group comes, so a shuffled epoch
makes fewer requests and fetches fewer bytes twice. Requests and bytes counted by the
proxy in front of moto, for both backends; the coalescing gap is scaled down with the
data (64 KiB for records of about 750 stored bytes)."""

from __future__ import annotations

import numpy as np
import pytest

from arrayds import records
from arrayds.sampler import BlockShuffleSampler
from arrayds.storage.coalesce import coalescing

from .conftest import plain_files

N, SHARDS, BATCH, AHEAD = 8192, 4, 64, 8  # groups of 512 records: 16 an epoch
GAP = 64 << 10


@pytest.fixture(params=["fsspec", "obstore"])
def backend(request):
    if request.param == "obstore":
        pytest.importorskip("obstore", reason="the obstore backend needs arrayds[obstore]")
    return request.param


@pytest.fixture(scope="module")
def written(s3):
    """(url, the records, stored bytes): 8192 records of 1000 B (6 bits of noise each,
    about 750 stored bytes) in 4 shards, written once for the module."""
    import s3fs

    rng = np.random.default_rng(7)
    recs = [rng.integers(0, 64, 1000, dtype=np.uint8).tobytes() for _ in range(N)]
    url = "s3://arrayds-test/read-along"
    opts = s3.storage_options()
    records.write_records(recs, url, num_shards=SHARDS, storage_options=opts)
    stored = s3fs.S3FileSystem(**opts).du(url[len("s3://") :])
    return url, recs, stored


@pytest.fixture
def source(s3, written, proxy, backend):
    url, recs, stored = written
    so = {**s3.storage_options(proxy.url), "backend": backend}
    return records.data_source(url, storage_options=so), recs, stored


def _epoch(src, recs, order, proxy, **kw) -> tuple[int, int]:
    """Read ``order`` in batches (groups of 8), check every record; the GETs and the
    bytes it took."""
    proxy.stats.reset()
    with coalescing(gap=GAP):
        got = list(src.batches(order, BATCH, readahead=AHEAD, **kw))
    assert [r for b in got for r in b] == [recs[i] for i in order]
    stats = proxy.stats.snapshot()
    assert set(stats["methods"]) == {"GET"}
    return stats["requests"], stats["bytes_down"]


def test_a_block_shuffled_epoch_reads_each_shard_about_once(source, proxy):
    src, recs, stored = source
    order = BlockShuffleSampler(N, BATCH, AHEAD, seed=0).epoch_order(0)
    without, fetched_without = _epoch(src, recs, order, proxy, keep_bytes=0)
    src.close()
    along, fetched = _epoch(src, recs, order, proxy)  # keep_bytes: 32 MiB, the default
    # the epoch (6 MB) is less than keep_bytes: every later record of a shard is read
    # along with the first group that reads it, one open and one GET per shard; the
    # bytes are the shards and the opens' tails (128 KiB each)
    assert along == 2 * SHARDS
    assert fetched < stored + SHARDS * 160_000 and fetched < fetched_without
    # without: a GET per shard and group, or more (blocks more than 64 KiB apart)
    assert without >= SHARDS * N // (BATCH * AHEAD)


def test_keep_bytes_bounds_what_is_read_along(source, proxy):
    src, recs, stored = source
    order = BlockShuffleSampler(N, BATCH, AHEAD, seed=1).epoch_order(0)
    counts = []
    for keep in (0, 512 << 10, 2 << 20):
        src.close()
        counts.append(_epoch(src, recs, order, proxy, keep_bytes=keep))
    # the more is kept, the fewer GETs (the bytes move less: a gap joins by dropping
    # up to 64 KiB of later records it does not keep)
    assert counts[0][0] > counts[1][0] > counts[2][0] > 2 * SHARDS


def test_odd_orders_read_right(source, proxy):
    """Orders that repeat records and leave others out, decoded items too."""
    src, recs, _ = source
    rng = np.random.default_rng(2)
    order = np.concatenate([rng.integers(0, N, 3000), np.arange(100), rng.permutation(N)[:2000]])
    _epoch(src, recs, order, proxy)
    _epoch(src, recs, order[::-1].copy(), proxy, keep_bytes=100_000)


def test_files_of_unknown_size_read_nothing_along(s3, s3_url, s3_opts, proxy, backend):
    """Plain ArrayRecord files (a glob): their sizes are not known, so each group
    reads only its own records, as with ``keep_bytes=0``."""
    recs = [b"%05d" % i * 150 for i in range(N)]
    src = plain_files(s3, s3_url, s3_opts, proxy, backend, recs, SHARDS)
    order = BlockShuffleSampler(N, BATCH, AHEAD, seed=0).epoch_order(0)
    assert _epoch(src, recs, order, proxy) == _epoch(src, recs, order, proxy, keep_bytes=0)


@pytest.mark.parametrize("keep", [-1, 1.5, True, "32M"])
def test_a_bad_keep_bytes_raises_at_the_call(source, keep):
    src, _, _ = source
    with pytest.raises(ValueError, match="keep_bytes must be an int >= 0"):
        src.batches(range(4), 2, keep_bytes=keep)
