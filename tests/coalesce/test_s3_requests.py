"""Coalesced reads on S3 (docs/guide.md, Coalesced reads): requests counted by the
proxy in front of moto.

Targets: a whole-array dask read makes at most 1.2 x (shards + stored bytes / 8 MiB)
requests; a region at most two per shard touched plus one per 8 MiB; batched record
reads one pass per shard; a ranged response of the wrong length is a CorruptionError
naming the shard and the range.
"""

from __future__ import annotations

import dask.array as da
import numpy as np
import pytest

import arrayds
from arrayds import CorruptionError
from arrayds.nodes import shards as store_mod

MIB8 = 8 << 20


@pytest.fixture
def grid(s3_url, s3_opts):
    """A 256 x 256 float32 array in 64 chunks and 4 shards on S3 -> (url, data, shards)."""
    data = np.random.default_rng(0).random((256, 256), dtype="f4")
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(32, 32)),
        s3_url,
        shard_size=16 * 32 * 32 * 4,
        storage_options=s3_opts,
    )
    a = arrayds.open_array(s3_url, storage_options=s3_opts)
    shards = {e.path: e.bytes for e in a.manifest.shards}
    assert len(shards) >= 4 and all(shards.values())
    return s3_url, data, shards


def _requests(proxy) -> int:
    got = proxy.stats.snapshot()
    assert set(got["methods"]) <= {"GET"}, got
    return got["requests"]


def test_whole_array_dask_read_is_one_get_per_shard(s3, grid, proxy):
    url, data, shards = grid
    x = arrayds.from_arrayrecord(url, storage_options=s3.storage_options(proxy.url))
    assert x.chunks == ((32,) * 8, (32,) * 8)  # the user's blocks stay the stored chunks
    proxy.stats.reset()
    np.testing.assert_array_equal(x.compute(scheduler="threads"), data)
    n = _requests(proxy)
    assert n == len(shards)  # each shard, footer included, in one ranged GET
    assert n <= 1.2 * (len(shards) + sum(shards.values()) / MIB8)
    # a second read reads the chunks again, coalesced: one GET per shard
    proxy.stats.reset()
    np.testing.assert_array_equal(x.compute(scheduler="threads"), data)
    assert _requests(proxy) == len(shards)


def test_region_dask_read_within_two_per_shard_touched(s3, grid, proxy):
    url, data, shards = grid
    x = arrayds.from_arrayrecord(url, storage_options=s3.storage_options(proxy.url))
    a = arrayds.open_array(url, storage_options=s3.storage_options(proxy.url))
    touched = {
        e.path
        for e in a.manifest.shards
        if e.start[0] * 32 < 200 and e.stop[0] * 32 > 40 and e.start[1] * 32 < 90
    }
    proxy.stats.reset()
    np.testing.assert_array_equal(
        x[40:200, 10:90].compute(scheduler="threads"), data[40:200, 10:90]
    )
    assert _requests(proxy) <= 2 * len(touched) + 1


def test_slicing_and_oindex_coalesce_per_shard(s3, grid, proxy):
    url, data, shards = grid
    a = arrayds.open_array(url, storage_options=s3.storage_options(proxy.url))
    proxy.stats.reset()
    rows = [1, 70, 140, 250]
    np.testing.assert_array_equal(a.oindex[rows, ::3], data[rows, ::3])
    # each shard: its footer, then its chunks in one coalesced GET
    assert _requests(proxy) <= 2 * len(shards)
    proxy.stats.reset()
    np.testing.assert_array_equal(a[:, 5], data[:, 5])
    assert _requests(proxy) <= len(shards)  # the readers are open: one GET per shard


def test_records_batches_one_pass_per_shard(s3, s3_url, s3_opts, proxy):
    from arrayds import records as records

    items = [{"id": i, "x": np.full(50, i, dtype="f4")} for i in range(400)]
    records.write_records(items, s3_url, "train", num_shards=4, storage_options=s3_opts)
    slow = s3.storage_options(proxy.url)
    src = records.data_source(f"{s3_url}/train", decode=True, storage_options=slow)
    batch = list(range(0, 400, 7))
    proxy.stats.reset()
    assert [r["id"] for r in src.__getitems__(batch)] == batch
    assert _requests(proxy) <= 2 * 4  # a footer and one coalesced GET per shard
    proxy.stats.reset()
    assert [r["id"] for r in src.__getitems__(batch[::-1])] == batch[::-1]
    assert _requests(proxy) <= 4
    store_mod.clear_reader_cache()
    bag = records.read_records(s3_url, "train", storage_options=slow)
    proxy.stats.reset()
    assert [r["id"] for r in bag.compute(scheduler="threads")] == list(range(400))
    assert _requests(proxy) <= 4  # each shard whole in one GET


def test_ragged_read_coalesces(s3, s3_url, s3_opts, proxy):
    from arrayds.kinds.ragged.handle import open_ragged

    clips = [np.arange(2 * n, dtype="f4").reshape(2, n) for n in range(100, 160)]
    arrayds.to_arrayrecord(clips, s3_url, "audio", storage_options=s3_opts)
    ra = open_ragged(s3_url, "audio", storage_options=s3.storage_options(proxy.url))
    nshards = len({sh.path for sh in ra.manifest.shards})
    picks = list(range(0, 60, 5))
    proxy.stats.reset()
    got = ra.get(picks)  # one batched read: each shard's pieces coalesced
    for i, g in zip(picks, got, strict=True):
        np.testing.assert_array_equal(g, clips[i])
    # per shard: its footer (with the index record) and one coalesced GET
    assert _requests(proxy) <= 2 * nshards + 1


def test_verify_requests(s3, grid, proxy):
    url, data, shards = grid
    proxy.stats.reset()
    from arrayds.verify import verify

    report = verify(url, storage_options=s3.storage_options(proxy.url))
    assert report.ok
    # verify checks each shard's real size, then reads it whole in one GET
    got = proxy.stats.snapshot()["methods"]
    assert got["HEAD"] <= 2 * len(shards)  # verify asks for sizes itself
    assert got["GET"] <= len(shards) + 4  # + the manifests


def test_truncated_shard_is_corruption_naming_shard_and_range(s3, grid, s3_fs, proxy):
    url, data, shards = grid
    a = arrayds.open_array(url, storage_options=s3.storage_options(proxy.url))
    a[0:32, 0:32]  # the shard holding chunk (0, 0) is open: its footer is cached
    rel = a.manifest.table.paths[
        int(a.manifest.table.path_ids[a.manifest.table.locate_one([0, 0])[0]])
    ]
    key = f"{url[len('s3://') :]}/{rel}"
    body = s3_fs.cat_file(key)
    s3_fs.pipe_file(key, body[:100])  # damage: the object shrinks under an open reader
    with pytest.raises(CorruptionError, match=r"asked for bytes \[\d+, \d+\)") as e:
        a[:]
    assert rel in str(e.value)


def test_coalescing_options_per_call_and_in_dask_graphs(s3, grid, proxy, monkeypatch):
    from arrayds.storage.coalesce import coalescing

    url, data, shards = grid
    slow = s3.storage_options(proxy.url)
    a = arrayds.open_array(url, storage_options=slow)
    np.testing.assert_array_equal(a[:], data)  # every reader open
    proxy.stats.reset()
    np.testing.assert_array_equal(a[0:32], data[0:32])  # 8 chunks, 1 or 2 shards
    assert _requests(proxy) <= 2
    proxy.stats.reset()
    with coalescing(gap=0, max_size="2K"):  # runs of touching 4 KiB chunks: in pieces
        np.testing.assert_array_equal(a[0:32], data[0:32])
    assert _requests(proxy) >= 8
    with coalescing(max_size="2K"):
        x = arrayds.from_arrayrecord(url, storage_options=slow)
    proxy.stats.reset()
    np.testing.assert_array_equal(x.compute(scheduler="threads"), data)  # outside the block
    assert _requests(proxy) >= 16 * len(shards)  # 16 chunks of 4 KiB per shard
    monkeypatch.setenv("ARRAYDS_COALESCE_MAX", "2K")
    proxy.stats.reset()
    np.testing.assert_array_equal(a[0:32], data[0:32])
    assert _requests(proxy) >= 8
    monkeypatch.setenv("ARRAYDS_COALESCE_GAP", "-1")
    with pytest.raises(ValueError, match="ARRAYDS_COALESCE_GAP"):
        a[0:32]


def test_max_ratio_caps_the_bytes_of_a_sparse_batch(s3, s3_url, s3_opts, proxy):
    from arrayds import records
    from arrayds.storage.coalesce import coalescing

    rng = np.random.default_rng(1)
    recs = [rng.integers(0, 256, 200, dtype=np.uint8).tobytes() for _ in range(2000)]
    records.write_records(recs, s3_url, num_shards=2, storage_options=s3_opts)
    src = records.data_source(s3_url, storage_options=s3.storage_options(proxy.url))
    src[[0, 1999]]  # both shards open
    batch = list(range(0, 2000, 50))  # 20 records of each shard, 10 KB apart
    fetched = {}
    for ratio in (None, 4):
        proxy.stats.reset()
        with coalescing(max_ratio=ratio):
            assert src.__getitems__(batch) == [recs[i] for i in batch]
        got = proxy.stats.snapshot()
        fetched[ratio] = (got["requests"], got["bytes_down"])
    assert fetched[None][0] == 2  # no cap: a GET per shard, most of each shard
    assert fetched[None][1] >= 30 * 40 * 200
    assert fetched[4][0] == 40  # capped: the records 10 KB apart are fetched alone
    assert fetched[4][1] < fetched[None][1] / 10


def test_region_dask_read_fetches_the_regions_chunks_not_whole_shards(s3, s3_url, s3_opts, proxy):
    # 1 MiB shards of 16 random chunks of 64 KiB: a region of one chunk column
    data = np.random.default_rng(2).random((512, 2048), dtype="f4")
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(128, 128)),
        s3_url,
        shard_size=16 * 128 * 128 * 4,
        storage_options=s3_opts,
    )
    slow = s3.storage_options(proxy.url)
    a = arrayds.open_array(s3_url, storage_options=slow)
    touched = [e for e in a.manifest.shards if e.start[1] < 1]
    x = arrayds.from_arrayrecord(s3_url, storage_options=slow)
    proxy.stats.reset()
    np.testing.assert_array_equal(x[:, 0:128].compute(scheduler="threads"), data[:, 0:128])
    got = proxy.stats.snapshot()
    needed = 4 * 128 * 128 * 4  # 4 chunks
    # the chunks asked for, plus each touched shard's footer (a 128 KiB tail)
    assert got["bytes_down"] <= 1.05 * needed + len(touched) * (128 << 10)
    assert got["bytes_down"] < sum(e.bytes for e in touched)
    assert got["requests"] <= 2 * len(touched) + 1


def test_damaged_shard_in_a_dask_read_is_corruption_naming_shard_and_range(s3, grid, s3_fs, proxy):
    url, data, shards = grid
    x = arrayds.from_arrayrecord(url, storage_options=s3.storage_options(proxy.url))
    a = arrayds.open_array(url, storage_options=s3.storage_options(proxy.url))
    np.testing.assert_array_equal(x[0:32, 0:32].compute(scheduler="threads"), data[0:32, 0:32])
    table = a.manifest.table
    rel = table.paths[int(table.path_ids[table.locate_one([0, 0])[0]])]
    key = f"{url[len('s3://') :]}/{rel}"
    s3_fs.pipe_file(key, s3_fs.cat_file(key)[:100])  # the shard shrinks under its open reader
    with pytest.raises(CorruptionError, match=r"asked for bytes \[\d+, \d+\)") as e:
        x.compute(scheduler="threads")
    assert rel in str(e.value)
    store_mod.clear_reader_cache()  # a fresh reader: the shard is not the size recorded
    with pytest.raises(CorruptionError, match="expected to have") as e:
        x.compute(scheduler="threads")
    assert rel in str(e.value)
