"""The second level of a long shard list (docs/spec.md 14.3.2): once a head would keep
more than INDEX_LIMIT segment references, the first INDEX_LIMIT of them move into an
index (an immutable file of references) that the head references instead, so a head
stays bounded however long the list; a read loads the head, the indexes whose box
meets it and the segments it needs; an index that disagrees with its reference is a
CorruptionError naming it; region writes rewrite only the index and segment they
touch; gc keeps what retained versions name; ``upgrade`` indexes an older long head.

Small limits (segments of 8 entries, indexes of 4 references, a tail of 4) make the
levels appear at a few hundred chunks."""

from __future__ import annotations

import json
import os
import uuid

import dask
import dask.array as da
import numpy as np
import pytest
from records import long_lists

import arrayds
from arrayds.errors import CorruptionError
from arrayds.nodes import commit
from arrayds.nodes import history as log
from arrayds.nodes.names import dump_json
from arrayds.storage import get_store
from arrayds.tools.gc import collect_garbage
from arrayds.verify import verify


@pytest.fixture(autouse=True)
def small_levels(monkeypatch):
    long_lists.small_levels(monkeypatch)
    yield
    log.clear_cache()


def _entry(i: int) -> dict:
    return {"path": f"c/{i:06d}-0.array_record", "records": 1, "start": [i], "stop": [i + 1]}


def _array(shards, n):
    return {"format": "arrayds", "kind": "array", "attrs": {}, "shape": [n], "shards": shards}


def _head(url: str) -> dict:
    return json.loads(open(os.path.join(url, "arrayds.json"), "rb").read())


def _check_head(head: dict, n: int) -> None:
    """Index references first, then at most INDEX_LIMIT segment references; every
    index holds INDEX_LIMIT references; the counts add up to ``n``."""
    shards = head["shards"]
    refs = shards["segments"]
    kinds = ["refs" in r for r in refs]
    last = max((i for i, k in enumerate(kinds) if k), default=-1)
    assert not any(kinds[last + 1 :]) and all(kinds[: last + 1])
    assert len(refs) - last - 1 <= log.INDEX_LIMIT
    assert all(r["refs"] == log.INDEX_LIMIT for r in refs[: last + 1])
    assert sum(r["count"] for r in refs) + len(shards["tail"]) == n


def test_appends_keep_a_bounded_head_and_read_back_at_every_version():
    store = get_store(f"memory://index-{uuid.uuid4().hex}", None)
    commit.commit(store, "n", lambda b: _array([], 0), write_id="w0")
    rng = np.random.default_rng(1)
    want: list = []
    at: dict[int, list] = {}
    while len(want) < 400:
        new = [_entry(len(want) + j) for j in range(int(rng.integers(1, 14)))]
        change = commit.Extend({"shape": [len(want) + len(new)]}, new)
        m = commit.commit(store, "n", lambda b, c=change: c, write_id=uuid.uuid4().hex)
        want += new
        at[m["generation"]] = list(want)
        _check_head(commit.read(store, "n").head, len(want))
    head = commit.read(store, "n").head
    assert head["format_version"] == log.INDEXED_VERSION == 3  # indexed: version 3
    indexes = [r for r in head["shards"]["segments"] if "refs" in r]
    assert len(indexes) >= 8  # 400 entries: about 400 / (8 * 4) indexes
    # an index reference summarizes its references: entries, records, box
    for r in indexes:
        held = log.index(store, "n", r, "n")
        assert r["count"] == r["records"] == sum(x["count"] for x in held)
        assert r["box"] == [
            [min(x["box"][0][0] for x in held)],
            [max(x["box"][1][0] for x in held)],
        ]
    for g in list(at)[::7]:
        assert commit.read(store, "n", version=g).raw["shards"] == at[g], g
    # every file each version names exists
    for v in commit.versions(store, "n"):
        for p in log.log_files(store, "n", commit.read(store, "n", version=v.generation).head):
            assert store.exists(f"n/{p}"), p


def _long_array(url: str, n: int) -> np.ndarray:
    """``n`` one-element chunks in entries of one chunk each (strided writes), block
    by block, then some chunks of the second half again (newer entries hide older
    ones; the first half's chunks are each in one segment only)."""
    a = arrayds.open_array(url, mode="w", shape=(n,), dtype="i8", chunks=1, fill_value=-1)
    want = np.full(n, -1, "i8")
    for b in range(0, n, 16):
        a[b : b + 16 : 2] = np.arange(b, min(b + 16, n), 2)
        want[b : b + 16 : 2] = np.arange(b, min(b + 16, n), 2)
    a[n // 2 : n : 70] = -np.arange(n // 2, n, 70)
    want[n // 2 : n : 70] = -np.arange(n // 2, n, 70)
    return want


def test_a_read_loads_the_head_one_index_and_one_segment(tmp_path):
    url = str(tmp_path / "a")
    n = 600
    want = _long_array(url, n)
    head = _head(url)
    _check_head(head, len(log.ShardLog(get_store(url, None), "", head["shards"], "a")))
    assert sum("refs" in r for r in head["shards"]["segments"]) >= 4
    log.clear_cache()
    a = arrayds.open_array(url)
    assert len(log._cache) == 0  # the open reads the head only
    assert a[100] == want[100]
    assert len(log._cache) == 2  # the index that holds chunk 100, and its segment
    assert a[n - 10] == want[n - 10]
    rng = np.random.default_rng(0)
    for _ in range(20):
        lo = int(rng.integers(0, n))
        hi = int(rng.integers(lo, n + 1))
        np.testing.assert_array_equal(a[lo:hi], want[lo:hi])
    np.testing.assert_array_equal(a[...], want)
    assert verify(url).ok


def _index_ref(url: str) -> dict:
    return next(r for r in _head(url)["shards"]["segments"] if "refs" in r)


def _rewrite_index(url: str, change) -> str:
    """Apply ``change`` to the first index file's document; its path."""
    path = _index_ref(url)["path"]
    f = os.path.join(url, path)
    doc = json.loads(open(f, "rb").read())
    change(doc)
    with open(f, "wb") as out:
        out.write(dump_json(doc))
    log.clear_cache()
    return path


def _more_records(doc):
    doc["refs"][0]["records"] += 1


def _nested(doc):
    doc["refs"][0]["refs"] = 1


def _wrong_format(doc):
    doc["format"] = "arrayds-segment"


def _short(doc):
    doc["refs"].pop()


def _outside(doc):
    doc["refs"][0]["box"] = [[5000], [5001]]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_more_records, r"its segments hold \d+ records; the manifest says"),
        (_nested, "holds the index reference"),
        (_wrong_format, "is not an arrayds index"),
        (_short, r"holds \d+ refs; the manifest says"),
        (_outside, "outside the box"),
    ],
)
def test_a_forged_index_is_corruption_naming_it(tmp_path, change, message):
    url = str(tmp_path / "a")
    _long_array(url, 300)
    path = _rewrite_index(url, change)
    a = arrayds.open_array(url)
    with pytest.raises(CorruptionError, match=rf"manifest index '{path}'.*{message}"):
        a[...]
    report = verify(url)
    assert not report.ok and any(path in str(p) for p in report.problems)


def test_a_missing_index_is_corruption_and_gc_removes_nothing(tmp_path):
    url = str(tmp_path / "a")
    _long_array(url, 300)
    path = _index_ref(url)["path"]
    os.unlink(os.path.join(url, path))
    log.clear_cache()
    a = arrayds.open_array(url)  # the open does not need it
    with pytest.raises(CorruptionError, match=rf"manifest index '{path}' is missing"):
        a[0]
    before = set(os.listdir(os.path.join(url, log.LOG_DIR)))
    collect_garbage(url, min_age=0, keep_versions=1)
    assert set(os.listdir(os.path.join(url, log.LOG_DIR))) == before


def test_a_region_write_rewrites_only_the_index_and_segment_it_touches(tmp_path):
    url = str(tmp_path / "a")
    want = _long_array(url, 600)
    before = _head(url)["shards"]["segments"]
    log.clear_cache()
    a = arrayds.open_array(url, mode="r+")
    a[40:44] = 7  # hides the entries of chunks 40 and 42: one segment in the first index
    want[40:44] = 7
    after = _head(url)["shards"]["segments"]
    changed = [(x["path"], y["path"]) for x, y in zip(before, after, strict=True) if x != y]
    assert len(changed) == 1 and changed[0][0] == before[0]["path"]  # the first index only
    new_leaves = log.index(get_store(url, None), "", after[0], "a")
    old_leaves = log.index(get_store(url, None), "", before[0], "a")
    assert sum(x != y for x, y in zip(old_leaves, new_leaves, strict=True)) == 1
    log.clear_cache()
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)
    # gc keeps what the version before the write names, until it expires
    collect_garbage(url, min_age=0, keep_versions=2)
    assert arrayds.open_array(url, version=arrayds.versions(url)[-2].generation)[40] == 40
    collect_garbage(url, min_age=0, keep_versions=1)
    named = log.log_files(get_store(url, None), "", _head(url))
    assert {f"{log.LOG_DIR}/{f}" for f in os.listdir(os.path.join(url, log.LOG_DIR))} == named
    log.clear_cache()
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)
    assert verify(url).ok


def test_a_dask_write_of_many_segments_commits_a_bounded_head(tmp_path):
    """The workers write segments of SEGMENT_LIMIT entries; the commit moves their
    references into indexes."""
    url = str(tmp_path / "d")
    x = da.arange(300, chunks=1)
    with dask.config.set(scheduler="threads"):
        arrayds.to_arrayrecord(x, url, shard_size=1)
    head = _head(url)
    _check_head(head, 300)
    assert sum("refs" in r for r in head["shards"]["segments"]) >= 8
    log.clear_cache()
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.arange(300))
    assert verify(url).ok


def test_upgrade_indexes_a_long_head_written_before_indexes(tmp_path, monkeypatch):
    url = str(tmp_path / "a")
    monkeypatch.setattr(log, "INDEX_LIMIT", 10**9)  # as written before indexes
    want = _long_array(url, 300)
    monkeypatch.setattr(log, "INDEX_LIMIT", 4)
    head = _head(url)
    assert len(head["shards"]["segments"]) > log.INDEX_LIMIT
    assert log.needs_index(head)
    arrayds.upgrade(url)
    head = _head(url)
    assert not log.needs_index(head)
    _check_head(head, len(log.ShardLog(get_store(url, None), "", head["shards"], "a")))
    log.clear_cache()
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)
    assert verify(url).ok


def _long_records(tmp_path):
    return long_lists.dask_records(tmp_path, 300)


def test_a_records_read_loads_one_index_and_one_segment(tmp_path):
    import pickle

    from arrayds import records

    url, data = _long_records(tmp_path)
    head = _head(url)
    assert head["format_version"] == 3
    refs = head["shards"]["segments"]
    assert sum("refs" in r for r in refs) >= 4 and all("records" in r for r in refs)
    log.clear_cache()
    ds = records.open_records(url)
    assert len(ds) == len(data) and len(log._cache) == 0  # the head says how many
    assert ds[5] == data[5]
    assert len(log._cache) == 2  # the first index and the segment of record 5
    mid = len(data) // 2
    assert ds[[mid, 6, mid + 1]] == [data[mid], data[6], data[mid + 1]]
    src = records.data_source(url)
    clone = pickle.loads(pickle.dumps(src))  # a worker: the head's refs, not every file
    log.clear_cache()
    assert clone[100] == data[100] and len(log._cache) == 2
    rng = np.random.default_rng(2)
    idx = rng.integers(0, len(data), 300)
    assert clone[idx] == [data[i] for i in idx]
    assert [clone[int(i)] for i in idx[:50]] == [data[i] for i in idx[:50]]
    assert list(clone) == data and clone[-1] == data[-1]
    assert src.paths == records.open_records(url).shard_paths
    two = arrayds.ArrayRecordDataSource([url, url])  # several datasets: their files listed
    assert len(two) == 2 * len(data) and two[[len(data) + 3, 3]] == [data[3], data[3]]
    batches = list(clone.batches(np.arange(len(data))[::-1], 64))
    assert [r for b in batches for r in b] == data[::-1]
    assert verify(url).ok


def test_a_records_index_that_disagrees_is_corruption_naming_it(tmp_path):
    from arrayds import records

    url, data = _long_records(tmp_path)
    path = _rewrite_index(url, _more_records)
    ds = records.open_records(url)
    with pytest.raises(CorruptionError, match=rf"manifest index '{path}'.*records"):
        ds[0]


def test_the_segment_cache_stays_within_its_bound(monkeypatch):
    monkeypatch.setattr(log, "CACHE_ENTRIES", 300)
    log.clear_cache()
    st = get_store("memory://segment-cache-bound")
    refs = log.write_segments(st, "x", [{"path": f"c/{i}"} for i in range(1000)])
    assert len(refs) == -(-1000 // log.SEGMENT_LIMIT)

    def kept() -> int:
        return sum(len(v) + 1 for v in log._cache.values())

    assert kept() <= 300  # a writer's own segments too
    for ref in refs:
        assert len(log.segment(st, "x", ref, "x")) == ref["count"]
        assert kept() <= 300
    assert list(log._cache)[-1] == (st.canonical_url, f"x/{refs[-1]['path']}")  # the newest
    log.clear_cache()
    assert log.segment(st, "x", refs[0], "x", cache=False)[0] == {"path": "c/0"}
    assert kept() == 0  # a pass over a whole list keeps nothing
