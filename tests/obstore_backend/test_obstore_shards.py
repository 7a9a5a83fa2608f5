"""Shard files read through the obstore backend on moto: a remote shard is opened (its
tail and footer) and read (its chunk ranges) through the dataset's own store, so with
``storage_options={"backend": "obstore"}`` every request of a read comes from
obstore's client and none from s3fs. The proxy in front of moto counts the requests
per client (their User-Agent: "object_store" for obstore, "aiobotocore" for s3fs)."""

from __future__ import annotations

import uuid

import dask.array as da
import numpy as np
import pytest

import arrayds
from arrayds import CorruptionError
from arrayds.nodes import shards as store_mod

from .conftest import BUCKET

pytest.importorskip("obstore", reason="the obstore backend needs arrayds[obstore]")

OBSTORE, S3FS = "object_store", "aiobotocore"


@pytest.fixture
def grid(s3):
    """A 128 x 128 float64 array in 16 chunks and 4 shards (a row of 4 chunks each),
    written to moto directly -> (url, data)."""
    url = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    data = np.random.default_rng(3).random((128, 128))
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(32, 32)),
        url,
        shard_size=4 * 32 * 32 * 8,
        storage_options=s3.storage_options(),
    )
    return url, data


def _through(s3, proxy, backend: str) -> dict:
    return {**s3.storage_options(proxy.url), "backend": backend}


def test_obstore_opens_and_reads_shards_with_its_own_client(s3, grid, proxy):
    url, data = grid
    proxy.stats.reset()
    a = arrayds.open_array(url, storage_options=_through(s3, proxy, "obstore"))
    shards = {e.path for e in a.manifest.shards}
    assert len(shards) == 4
    opened = proxy.stats.snapshot()["requests"]  # the manifest
    # one chunk of each shard (not read whole): a footer and a chunk range each
    rows, cols = [5, 40, 70, 100], [3]
    np.testing.assert_array_equal(a.oindex[rows, cols], data[np.ix_(rows, cols)])
    got = proxy.stats.snapshot()
    assert got["agents"] == {OBSTORE: got["requests"]}, got
    assert set(got["methods"]) == {"GET"}
    assert got["requests"] - opened == 2 * len(shards)
    # the readers are open: a region needs only the chunk ranges, one GET per shard
    proxy.stats.reset()
    np.testing.assert_array_equal(a[:, 40:90], data[:, 40:90])
    got = proxy.stats.snapshot()
    assert got["agents"] == {OBSTORE: len(shards)}, got
    # a whole-array dask read in a fresh cache: each shard whole, footer included
    store_mod.clear_reader_cache()
    x = arrayds.from_arrayrecord(url, storage_options=_through(s3, proxy, "obstore"))
    proxy.stats.reset()
    np.testing.assert_array_equal(x.compute(scheduler="threads"), data)
    got = proxy.stats.snapshot()
    assert got["agents"] == {OBSTORE: got["requests"]} and got["requests"] <= 1 + len(shards)


def test_fsspec_backend_reads_with_s3fs(s3, grid, proxy):
    """The same read through the fsspec backend: every request is s3fs's (what the
    per-client count above tells apart)."""
    url, data = grid
    a = arrayds.open_array(url, storage_options=_through(s3, proxy, "fsspec"))
    proxy.stats.reset()
    np.testing.assert_array_equal(a.oindex[[5, 40, 70, 100], [3]], data[[5, 40, 70, 100]][:, [3]])
    got = proxy.stats.snapshot()
    assert got["agents"] == {S3FS: 8}, got


def test_records_data_source_opens_shards_through_obstore(s3, proxy):
    from arrayds import records

    url = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    items = [{"id": i, "x": np.full(20, i, dtype="f4")} for i in range(200)]
    records.write_records(items, url, "train", num_shards=4, storage_options=s3.storage_options())
    src = records.data_source(
        f"{url}/train", decode=True, storage_options=_through(s3, proxy, "obstore")
    )
    proxy.stats.reset()
    batch = list(range(0, 200, 9))
    assert [r["id"] for r in src.__getitems__(batch)] == batch
    got = proxy.stats.snapshot()
    assert got["agents"] == {OBSTORE: got["requests"]}, got


@pytest.mark.parametrize("damage", ["longer", "shorter", "empty"])
def test_a_shard_of_another_size_is_corruption_through_obstore(s3, grid, proxy, damage):
    """A shard replaced by an object of another size than the manifest records: the
    open through obstore (one ranged GET of the tail, one byte past the recorded end)
    raises CorruptionError naming the array and the shard, never wrong data."""
    import s3fs

    url, data = grid
    a = arrayds.open_array(url, storage_options=_through(s3, proxy, "obstore"))
    first = min(e.path for e in a.manifest.shards)
    fs = s3fs.S3FileSystem(**s3.storage_options())
    key = f"{url[len('s3://') :]}/{first}"
    good = fs.cat_file(key)
    bad = {"longer": good + b"x", "shorter": good[:-1], "empty": b""}[damage]
    fs.pipe_file(key, bad)
    try:
        proxy.stats.reset()
        with pytest.raises(CorruptionError, match=r"shard .* is damaged: .*expected to have"):
            a[0:32, 0:32]
        assert proxy.stats.snapshot()["agents"].get(S3FS, 0) == 0
    finally:
        fs.pipe_file(key, good)
