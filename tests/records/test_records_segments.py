"""Records datasets whose shard list is kept in segments and indexes (docs/spec.md
14.3.1, 14.3.2) read by record index: the values of random reads equal the whole
list's after appends, tiered merges and an overwrite; a read of one record loads one
index and one segment; a missing or forged segment is a CorruptionError naming it.

Small limits (segments of 8 entries, indexes of 4 references, a tail of 4) make both
levels appear at a few dozen shards."""

from __future__ import annotations

import json
import os

import dask
import dask.bag as db
import numpy as np
import pytest

import arrayds
from arrayds import records
from arrayds.errors import CorruptionError
from arrayds.nodes import history as log

from . import long_lists


@pytest.fixture(autouse=True)
def small_levels(monkeypatch):
    long_lists.small_levels(monkeypatch)
    yield
    log.clear_cache()


def _head(url: str) -> dict:
    with open(os.path.join(url, "arrayds.json"), "rb") as f:
        return json.load(f)


def _whole(url: str) -> list[bytes]:
    """Every record, read through the whole list of shard files (no pages)."""
    return arrayds.ArrayRecordDataSource(records.open_records(url).shard_paths)[:]


def _check_reads(url: str, want: list[bytes], seed: int) -> None:
    log.clear_cache()
    ds = records.open_records(url)
    assert len(ds) == len(want) and len(log._cache) == 0  # the open reads the head only
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(want), 200)
    assert ds[idx] == [want[i] for i in idx]
    assert [ds[int(i)] for i in idx[:40]] == [want[i] for i in idx[:40]]
    assert ds[-1] == want[-1] and ds[::-5] == want[::-5]
    assert list(ds) == want == _whole(url)


def test_appends_merges_and_an_overwrite_read_back_by_record_index(tmp_path):
    url = str(tmp_path / "r")
    rng = np.random.default_rng(4)
    records.write_records([b"a0"], url, serializer="raw")
    want: list[bytes] = [b"a0"]
    for _ in range(90):  # one shard per append, kept
        new = [b"a%d" % (len(want) + j) for j in range(int(rng.integers(1, 6)))]
        arrayds.to_arrayrecord(new, url, mode="a", compact=False)
        want += new
    assert any("refs" in r for r in _head(url)["shards"]["segments"])  # both levels
    _check_reads(url, want, 1)
    old = records.open_records(url, version=60)  # a kept version, read the same way
    assert old[:] == want[: len(old)] and len(old) < len(want)

    # an append whose tiered merge rewrites the list (its small shards merged)
    new = [b"t%d" % i for i in range(3)]
    arrayds.to_arrayrecord(new, url, mode="a")
    want += new
    assert records.open_records(url).num_shards < 91
    _check_reads(url, want, 3)

    # mode "w" replaces the dataset: a new list, read the same way
    bag = db.from_sequence([b"w%d" % i for i in range(300)], npartitions=150)
    with dask.config.set(scheduler="sync"):  # this process's limits
        records.write_records(bag, url, serializer="raw", mode="w")
    want = [b"w%d" % i for i in range(300)]
    assert any("refs" in r for r in _head(url)["shards"]["segments"])
    _check_reads(url, want, 2)


def _dask_records(tmp_path) -> tuple[str, list[bytes]]:
    return long_lists.dask_records(tmp_path, 300)


def _last_segment(url: str) -> tuple[str, int]:
    """The path of the head's last segment reference (not an index) and the index of
    its first record."""
    segs = _head(url)["shards"]["segments"]
    k = max(i for i, r in enumerate(segs) if "refs" not in r)
    return segs[k]["path"], sum(r["records"] for r in segs[:k])


def test_a_read_of_one_record_loads_one_index_and_one_segment(tmp_path):
    url, data = _dask_records(tmp_path)
    path, first = _last_segment(url)
    log.clear_cache()
    ds = records.open_records(url)
    assert ds[first] == data[first] and len(log._cache) == 1  # a head reference: one segment
    assert ds[1] == data[1] and len(log._cache) == 3  # the first index and its segment
    assert records.read_records(url).compute() == data


def test_a_missing_segment_is_corruption_naming_it(tmp_path):
    url, data = _dask_records(tmp_path)
    path, first = _last_segment(url)
    os.remove(os.path.join(url, path))
    log.clear_cache()  # a fresh process: the writer kept the segments it wrote
    ds = records.open_records(url)
    assert ds[0] == data[0] and ds[first - 1] == data[first - 1]  # the others read
    with pytest.raises(CorruptionError, match=rf"segment '{path}' is missing"):
        ds[first]
    with pytest.raises(CorruptionError, match=rf"segment '{path}' is missing"):
        records.data_source(url)[[0, len(data) - 1]]


def test_a_forged_segment_is_corruption_naming_it(tmp_path):
    url, data = _dask_records(tmp_path)
    path, first = _last_segment(url)
    file = os.path.join(url, path)
    with open(file, "rb") as f:
        doc = json.load(f)
    doc["entries"][0]["records"] += 1  # its entries no longer add up to its reference's
    with open(file, "w") as f:
        json.dump(doc, f)
    log.clear_cache()
    ds = records.open_records(url)
    assert ds[0] == data[0]
    with pytest.raises(CorruptionError, match=rf"segment '{path}': its entries hold \d+ records"):
        ds[len(data) - 1]


def test_a_bag_of_a_long_list_loads_no_segment_until_its_tasks_run(tmp_path):
    import pickle

    url, data = _dask_records(tmp_path)
    n = records.open_records(url).num_shards
    log.clear_cache()
    bag = records.read_records(url)
    assert bag.npartitions == n and len(log._cache) == 0  # the graph names no shard
    path, first = _last_segment(url)
    part = bag.to_delayed()[n - 1].compute(scheduler="sync")
    assert part == data[-len(part) :] and len(log._cache) == 1  # its segment only
    assert bag.compute(scheduler="sync") == data
    assert pickle.loads(pickle.dumps(bag)).compute(scheduler="sync") == data  # a worker's
    assert records.read_records(url, decode=False).name != bag.name
    assert records.read_records(url).name == bag.name  # the same list, the same graph
    os.remove(os.path.join(url, path))
    log.clear_cache()
    with pytest.raises(CorruptionError, match=rf"segment '{path}' is missing"):
        records.read_records(url).compute(scheduler="sync")
