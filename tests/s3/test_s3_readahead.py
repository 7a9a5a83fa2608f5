"""Batches read ahead from S3: ``ArrayRecordDataSource.batches`` reads the
records of several batches as one coalesced pass per shard, so a block shuffle's
window, or a group of fully shuffled batches, costs a GET per shard instead of one
per batch and shard; the reads go through the store of the backend the data source
was opened with (obstore's ``get_ranges`` or fsspec's ``cat_ranges``), and a batch
over unopened shards opens them at once. Requests counted by the proxy in front of
moto, for both backends."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from arrayds import CorruptionError, records
from arrayds.sampler import BlockShuffleSampler

from .conftest import plain_files

N, SHARDS, BATCH = 4096, 4, 64


@pytest.fixture(params=["fsspec", "obstore"])
def backend(request):
    if request.param == "obstore":
        pytest.importorskip("obstore", reason="the obstore backend needs arrayds[obstore]")
    return request.param


@pytest.fixture
def written(s3_url, s3_opts):
    """(url, the records): 4096 records of 100 B in 4 shards."""
    rng = np.random.default_rng(5)
    recs = [rng.integers(0, 256, 100, dtype=np.uint8).tobytes() for _ in range(N)]
    records.write_records(recs, s3_url, num_shards=SHARDS, storage_options=s3_opts)
    return s3_url, recs


@pytest.fixture
def source(s3, written, proxy, backend):
    """(data source through the proxy with ``backend``, the records), every shard's
    footer already read."""
    url, recs = written
    so = {**s3.storage_options(proxy.url), "backend": backend}
    src = records.data_source(url, storage_options=so)
    src[list(range(0, N, N // SHARDS))]  # open every shard
    return src, recs


def _epoch(src, recs, order, readahead, proxy, keep_bytes=0) -> int:
    """Read ``order`` in batches, check every record; the GETs it took (by default
    nothing read along for later groups: tests/s3/test_s3_read_along.py does)."""
    proxy.stats.reset()
    got = list(src.batches(order, BATCH, readahead=readahead, keep_bytes=keep_bytes))
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


def test_the_default_read_ahead_holds_32_mib_of_records(source, proxy):
    src, recs = source
    # 4096 records of about 100 stored bytes: one group of 32 MiB holds the epoch, so
    # a full shuffle is one GET per shard; 8 batches a group need one per shard and group
    order = np.random.default_rng(1).permutation(N)
    assert _epoch(src, recs, order, None, proxy) == SHARDS
    assert _epoch(src, recs, order, 8, proxy) == SHARDS * (N // (BATCH * 8))


def _user_agents(proxy) -> list[bytes]:
    """Let the proxy note the User-Agent header of every request from now on."""
    seen: list[bytes] = []

    def note(head: bytes) -> bool:
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"user-agent:"):
                seen.append(line.split(b":", 1)[1].strip().lower())
        return False

    proxy.hold = note
    return seen


def test_reads_go_through_the_store_of_the_backend(source, proxy, backend):
    src, recs = source
    agents = _user_agents(proxy)
    order = np.random.default_rng(2).permutation(N)[:512]
    assert _epoch(src, recs, order, 8, proxy) == SHARDS  # one group, one GET per shard
    assert len(agents) == SHARDS
    client = b"object_store" if backend == "obstore" else b"botocore"
    assert all(client in a for a in agents), agents


def test_a_batch_opens_its_shards_at_once(s3, written, proxy, backend):
    url, recs = written
    so = {**s3.storage_options(proxy.url), "backend": backend}
    src = records.data_source(url, storage_options=so)  # no shard open yet
    held: list[bytes] = []
    all_held = threading.Event()

    def hold(head: bytes) -> bool:  # keep every GET until one per shard is waiting
        if head.startswith(b"GET"):
            held.append(head)
            if len(held) == SHARDS:
                all_held.set()
            return True
        return False

    proxy.stats.reset()
    proxy.hold = hold
    idx = [k * (N // SHARDS) + 7 for k in range(SHARDS)]
    got: list = []
    reader = threading.Thread(target=lambda: got.append(src[idx]))
    reader.start()
    opened_together = all_held.wait(60)  # one after another, the first would wait alone
    proxy.release.set()
    reader.join()
    assert opened_together and got == [[recs[i] for i in idx]]
    # each open one GET of a tail of at most 128 KiB (these shards are smaller: whole),
    # then one GET per shard for the records
    assert proxy.stats.snapshot()["requests"] == 2 * SHARDS


def test_a_remote_shard_opens_with_a_128_kib_tail(s3, s3_url, s3_opts, proxy, backend):
    rng = np.random.default_rng(6)
    recs = [rng.integers(0, 64, 1024, dtype=np.uint8).tobytes() for _ in range(2000)]
    records.write_records(recs, s3_url, num_shards=1, storage_options=s3_opts)
    src = records.data_source(
        s3_url, storage_options={**s3.storage_options(proxy.url), "backend": backend}
    )
    proxy.stats.reset()
    assert src[1234] == recs[1234]
    stats = proxy.stats.snapshot()
    # the tail (the reader's default would be 1 MiB of this 2 MB shard), then the record
    assert stats["methods"] == {"GET": 2}
    assert 128 * 1024 < stats["bytes_down"] < 128 * 1024 + 1024 + 4096  # + HTTP headers


def test_plain_files_read_through_the_backend(s3, s3_url, s3_opts, s3_fs, proxy, backend):
    """Plain ArrayRecord files (a glob) on S3: no sizes known, so the default
    read-ahead is 8 batches; the records' ranges come through the backend's store."""
    recs = [b"%05d" % i * 20 for i in range(N)]
    src = plain_files(s3, s3_url, s3_opts, proxy, backend, recs, SHARDS)
    assert len(src) == N  # the files were opened to count their records
    agents = _user_agents(proxy)
    order = np.random.default_rng(3).permutation(N)
    assert _epoch(src, recs, order, None, proxy) == SHARDS * (N // (BATCH * 8))
    client = b"object_store" if backend == "obstore" else b"botocore"
    assert agents and all(client in a for a in agents), agents


@pytest.mark.parametrize("keep", [-300, 50])  # bytes kept past the record's start
def test_a_shard_cut_short_after_it_was_opened_is_corruption(source, s3_fs, keep):
    src, recs = source  # every shard open: its size is known
    last = src.paths[-1]
    raw = s3_fs.cat_file(last)
    at = raw.find(recs[N - 3])  # random bytes: stored as they are
    assert at > 0
    s3_fs.pipe_file(last, raw[: at + keep])
    with pytest.raises(CorruptionError, match=last.rsplit("/", 1)[-1]):
        src[[N - 3, 0]]
    assert src[[1, 2]] == recs[1:3]  # the other shards still read


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
