"""The tiered merge of an append weighs only the newest entries of a long shard list
(``MERGE_WINDOW``), so an append to a list stored in many segments loads the tail
and the last segments, rewrites only the segments holding the entries it merged,
and leaves every other segment reference of the head as it was. Real appends on
local folders, ``SEGMENT_LIMIT`` and ``MERGE_WINDOW`` made small; the data and
``verify`` are checked after every step.

* arrays: ``to_arrayrecord(mode="a")`` (dask) and ``Array.append``;
* records: ``to_arrayrecord(bag, mode="a")``;
* xarray: an append along ``t`` to a dataset whose members hold long lists, with
  the snapshot's copies and the members' own manifests still agreeing;
* :class:`arrayds.nodes.history.Appended` with ``drop``: the stored list loses its
  last entries by rewriting only the segments that hold them, never reading the
  others (they are deleted here first).
"""

from __future__ import annotations

import json
import os

import dask
import dask.array as da
import dask.bag as db
import numpy as np
import pytest
import xarray as xr

import arrayds
from arrayds.nodes import history as log
from arrayds.nodes import merge
from arrayds.storage import get_store
from arrayds.tools.verify import verify

LIMIT = 8
WINDOW = 16
N = 12 * LIMIT


@pytest.fixture(autouse=True)
def _small(monkeypatch):
    monkeypatch.setattr(log, "SEGMENT_LIMIT", LIMIT)
    monkeypatch.setattr(merge, "MERGE_WINDOW", WINDOW)


def _head(url: str, node: str = "") -> dict:
    with open(os.path.join(url, node, "arrayds.json")) as f:
        return json.load(f)


def _refs(head: dict) -> list[str]:
    return [r["path"] for r in head["shards"]["segments"]]


def _loaded() -> int:
    """Segments and indexes parsed in this process since the last clear."""
    return len(log._cache)


def test_dask_appends_to_a_long_array_weigh_only_the_window(tmp_path):
    url = str(tmp_path / "a")
    arrayds.to_arrayrecord(da.arange(N, chunks=1), url, shard_size=1)
    before = _refs(_head(url))
    assert len(before) == N // LIMIT
    n, merged = N, False
    for i in range(MERGE_ROUNDS := 10):
        log.clear_cache()
        arrayds.to_arrayrecord(da.arange(n, n + 1, chunks=1), url, mode="a", shard_size=1)
        n += 1
        # the tail and the segments the window reaches (plus those rewritten)
        assert _loaded() <= 2 * (WINDOW // LIMIT + 1), i
        head = _head(url)
        merged |= len(arrayds.open_array(url).manifest.shards) < n
        # the references before the window are the same files
        assert (
            _refs(head)[: len(before) - WINDOW // LIMIT - 1]
            == before[: len(before) - WINDOW // LIMIT - 1]
        )
        np.testing.assert_array_equal(arrayds.open_array(url)[:], np.arange(n))
    assert merged and MERGE_ROUNDS
    assert verify(url, progress=False).ok


def test_array_append_merges_within_the_window(tmp_path):
    url = str(tmp_path / "a")
    arrayds.to_arrayrecord(da.arange(N, chunks=1), url, shard_size=1)
    a = arrayds.open_array(url, mode="r+")
    for i in range(merge.MERGE_FACTOR):
        log.clear_cache()
        a.append(np.array([N + i]))
        assert _loaded() <= 2 * (WINDOW // LIMIT + 1)
    m = arrayds.open_array(url).manifest
    assert len(m.shards) < N + merge.MERGE_FACTOR  # merged at least once
    # a merge takes at most the window
    assert len(m.shards) >= N + merge.MERGE_FACTOR - WINDOW
    np.testing.assert_array_equal(a[:], np.arange(N + merge.MERGE_FACTOR))
    np.testing.assert_array_equal(arrayds.open_array(url)[:], np.arange(N + merge.MERGE_FACTOR))
    assert verify(url, progress=False).ok


@pytest.fixture
def _here():
    """Bags computed in this process: their commits see the small limits."""
    with dask.config.set(scheduler="sync"):
        yield


def test_records_appends_to_a_long_dataset_merge_within_the_window(tmp_path, _here):
    url = str(tmp_path / "r")
    items = [f"r{i}".encode() for i in range(N)]
    arrayds.to_arrayrecord(db.from_sequence(items, npartitions=N), url)
    assert len(_refs(_head(url))) == N // LIMIT
    for i in range(merge.MERGE_FACTOR):
        log.clear_cache()
        more = [f"a{i}".encode()]
        arrayds.to_arrayrecord(db.from_sequence(more, npartitions=1), url, mode="a")
        items += more
        assert _loaded() <= 2 * (WINDOW // LIMIT + 1)
    ds = arrayds.open(url)
    assert ds.num_records == len(items)
    assert list(arrayds.ArrayRecordDataSource(url)[: len(items)]) == items
    stored = log.resolve(get_store(url), "", _head(url), "r")["shards"]
    assert len(stored) < N + merge.MERGE_FACTOR  # merged
    assert verify(url, progress=False).ok


def _dataset(n: int, start: int = 0) -> xr.Dataset:
    return xr.Dataset({"v": (("t",), da.arange(start, start + n, chunks=1))})


def test_xarray_appends_to_long_members_load_only_the_newest_segments(tmp_path):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(_dataset(N), url, shard_size=1)
    n = N
    for _ in range(merge.MERGE_FACTOR + 2):
        log.clear_cache()
        arrayds.to_arrayrecord(_dataset(1, n), url, mode="a", append_dim="t", shard_size=1)
        n += 1
        # the group's copy and the member's own list: each its window and rewrites
        assert _loaded() <= 4 * (WINDOW // LIMIT + 1)
    got = xr.open_dataset(url, engine="arrayds")
    np.testing.assert_array_equal(got.v.values, np.arange(n))
    assert len(arrayds.open_array(url, "v").manifest.shards) < n  # merged
    store = get_store(url)
    snap = log.resolve(store, "", _head(url), "g")["snapshot"]["members"]["v"]
    own = _head(url, "v")
    assert (own["generation"], own["commit"]) == (snap["generation"], snap["commit"])
    assert snap["shards"] == log.resolve(store, "v", own, "v")["shards"]
    assert verify(url, progress=False).ok


def test_appended_with_drop_rewrites_only_the_segments_it_cuts():
    store = get_store("memory://merge-window-drop")
    entries = [{"path": f"c/{i}", "start": [i], "stop": [i + 1]} for i in range(5 * LIMIT + 3)]
    base, segs = log.encode(store, "n", {"generation": 3, "commit": "w3", "shards": entries}, None)
    refs = base["shards"]["segments"]
    assert [r["count"] for r in refs] == [LIMIT] * 5 + [3] and not base["shards"]["tail"]
    # the segments before the last two are gone (and not cached): they are not read
    store.delete([f"n/{r['path']}" for r in refs[:-2]])
    log.clear_cache()
    new = {"generation": 4, "commit": "w4"}
    extra = [{"path": "c/m", "start": [0], "stop": [1]}]
    new["shards"] = log.Appended(
        entries, extra, (3, "w3"), drop=range(len(entries) - 5, len(entries))
    )
    added: dict = {}
    got, written = log.encode(store, "n", new, base, lambda: None, added)
    assert added[""] == extra
    segs = got["shards"]["segments"]
    assert segs[:-1] == refs[:-2] and segs[-1]["count"] == LIMIT - 2
    assert got["shards"]["tail"] == extra and written == [segs[-1]["path"]]
    # the last segment, all of it dropped, is not read; the one it cut is, uncached
    assert _loaded() == 1  # the one written anew
    assert log.segment(store, "n", segs[-1], "n") == entries[4 * LIMIT : 5 * LIMIT - 2]


def test_appended_rejects_positions_outside_the_list():
    with pytest.raises(ValueError, match="positions 1..2 are not in a list of 2"):
        log.Appended([{}, {}], [], (1, "w"), drop=[2, 1])
