"""Long shard lists read by region (docs/spec.md 14.3, 14.4): segments hold at most
SEGMENT_LIMIT entries and their references say what they hold (records, chunk box);
an array opens from its head and a read loads only the segments whose box meets it,
with the same answers as the whole list; a reference that disagrees with its
segment is a CorruptionError naming the segment."""

from __future__ import annotations

import json
import os
import pickle
import uuid

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


def _entry(i: int, path: str = "") -> dict:
    path = path or f"c/{i:06d}-0.array_record"
    return {"path": path, "records": 1, "start": [i], "stop": [i + 1]}


def _array(shards, n):
    return {"format": "arrayds", "kind": "array", "attrs": {}, "shape": [n], "shards": shards}


@pytest.fixture(autouse=True)
def small_segments(monkeypatch):
    """Segments of 64 entries: the arrays below need a few hundred, not thousands."""
    monkeypatch.setattr(log, "SEGMENT_LIMIT", 64)


@pytest.fixture
def store():
    st = get_store(f"memory://split-{uuid.uuid4().hex}", None)
    yield st
    st.delete_prefix("")


def test_a_long_list_is_written_as_segments_of_at_most_the_limit(store):
    n = 2 * log.SEGMENT_LIMIT + 40
    entries = [_entry(i) for i in range(n)]
    commit.commit(store, "n", lambda b: _array(entries, n), write_id="w1")
    head = commit.read(store, "n").head
    refs = head["shards"]["segments"]
    assert [r["count"] for r in refs] == [log.SEGMENT_LIMIT, log.SEGMENT_LIMIT, 40]
    starts = [0, log.SEGMENT_LIMIT, 2 * log.SEGMENT_LIMIT]
    boxes = [[[a], [a + r["count"]]] for a, r in zip(starts, refs, strict=True)]
    assert [r["box"] for r in refs] == boxes
    assert [r["records"] for r in refs] == [r["count"] for r in refs]
    assert commit.read(store, "n").raw["shards"] == entries
    # appends merge only while the merged segment fits the limit
    for k in range(40):
        more = [_entry(n + k)]
        commit.commit(store, "n", lambda b, s=more: commit.Extend({}, s), write_id=f"a{k}")
    refs = commit.read(store, "n").head["shards"]["segments"]
    assert all(r["count"] <= log.SEGMENT_LIMIT for r in refs)
    assert commit.read(store, "n").raw["shards"] == [_entry(i) for i in range(n + 40)]


def _long_array(url: str, n: int) -> np.ndarray:
    """An array of ``n`` one-element chunks, the even ones each its own shard entry
    (a strided write makes one entry per element), written block by block; then a
    few chunks again (newer entries in the last segment hide older ones)."""
    a = arrayds.open_array(url, mode="w", shape=(n,), dtype="i8", chunks=1, fill_value=-1)
    want = np.full(n, -1, "i8")
    for b in range(0, n, 32):
        a[b : b + 32 : 2] = np.arange(b, b + 32, 2)
        want[b : b + 32 : 2] = np.arange(b, b + 32, 2)
    a[10:n:70] = -np.arange(10, n, 70)
    want[10:n:70] = -np.arange(10, n, 70)
    return want


def test_a_read_loads_only_the_segments_it_needs(tmp_path):
    url = str(tmp_path / "a")
    n = 8 * log.SEGMENT_LIMIT
    want = _long_array(url, n)
    refs = json.loads((tmp_path / "a" / "arrayds.json").read_bytes())["shards"]["segments"]
    assert len(refs) >= 4 and all("box" in r for r in refs)
    log.clear_cache()
    a = arrayds.open_array(url)  # a new process: nothing cached
    assert a.shape == (n,)
    assert len(log._cache) == 0  # the open read the head only
    assert a[2 * log.SEGMENT_LIMIT + 3] == want[2 * log.SEGMENT_LIMIT + 3]
    assert 1 <= len(log._cache) <= 2 < len(refs)  # the segments of that chunk
    assert a[80] == want[80] and a[10] == want[10]  # an overwritten chunk, its newest value
    np.testing.assert_array_equal(a[200:210], want[200:210])
    assert len(log._cache) < len(refs)
    rng = np.random.default_rng(0)
    for _ in range(20):
        lo = int(rng.integers(0, n))
        hi = int(rng.integers(lo, n + 1))
        np.testing.assert_array_equal(a[lo:hi], want[lo:hi])
    np.testing.assert_array_equal(a[...], want)
    assert a.nchunks_initialized == int((want != -1).sum())


def test_an_unindexed_long_list_still_reads(tmp_path):
    """Segment references without a summary (written before them) may hold any
    chunk: a read loads them all, and gets the same values."""
    url = str(tmp_path / "a")
    want = _long_array(url, 6 * log.SEGMENT_LIMIT)
    head_path = tmp_path / "a" / "arrayds.json"
    head = json.loads(head_path.read_bytes())
    head["shards"]["segments"] = [
        {"path": r["path"], "count": r["count"]} for r in head["shards"]["segments"]
    ]
    head_path.write_bytes(dump_json(head))
    log.clear_cache()
    a = arrayds.open_array(url)
    assert a[150] == want[150]
    assert len(log._cache) == len(head["shards"]["segments"])
    np.testing.assert_array_equal(a[...], want)


def _forged(tmp_path, change) -> str:
    url = str(tmp_path / "a")
    _long_array(url, 6 * log.SEGMENT_LIMIT)
    head_path = tmp_path / "a" / "arrayds.json"
    head = json.loads(head_path.read_bytes())
    change(head["shards"]["segments"])
    head_path.write_bytes(dump_json(head))
    log.clear_cache()
    return url


def test_a_segment_outside_its_box_is_corruption_naming_it(tmp_path):
    def shift(refs):
        refs[0]["box"] = [[10], [11]]  # says it holds chunks it does not

    url = _forged(tmp_path, shift)
    a = arrayds.open_array(url)
    assert a[300] == 300  # this read does not need segment 0's entries ...
    outside = r"segment .*: its entries span the chunk box .*, outside the box"
    with pytest.raises(CorruptionError, match=outside):
        a[...]  # ... this one does, and finds them outside the box it was given


def test_a_segment_whose_records_disagree_is_corruption_naming_it(tmp_path):
    def more(refs):
        refs[1]["records"] += 1

    url = _forged(tmp_path, more)
    disagree = r"segment '_arrayds/log/.*': its entries hold \d+ records; the manifest says"
    with pytest.raises(CorruptionError, match=disagree):
        arrayds.open_array(url)[...]


@pytest.mark.parametrize(
    "box",
    [[[0]], [[0], [1], [2]], [[1], [0]], [[-1], [3]], [["a"], [1]], "box", [[0, 0], [1]]],
)
def test_a_malformed_segment_box_is_refused(tmp_path, box):
    def bad(refs):
        refs[0]["box"] = box

    url = _forged(tmp_path, bad)
    with pytest.raises(CorruptionError, match="manifest segment reference .* is invalid"):
        arrayds.open_array(url)[0]


def test_a_missing_segment_of_a_lazy_list_is_corruption_naming_it(tmp_path):
    url = str(tmp_path / "a")
    _long_array(url, 6 * log.SEGMENT_LIMIT)
    head = json.loads((tmp_path / "a" / "arrayds.json").read_bytes())
    ref = head["shards"]["segments"][-1]
    (tmp_path / "a" / ref["path"]).unlink()
    log.clear_cache()
    a = arrayds.open_array(url)  # the open does not need it
    with pytest.raises(CorruptionError, match=rf"segment '{ref['path']}' is missing"):
        a[...]
    report = verify(url)
    assert not report.ok and any(ref["path"] in p for p in map(str, report.problems))


def _segment_paths(url: str) -> set[str]:
    head = json.loads(open(f"{url}/arrayds.json", "rb").read())
    shards = head["shards"]
    return {r["path"] for r in shards["segments"]} if isinstance(shards, dict) else set()


def test_a_region_write_rewrites_only_the_segments_it_hides_entries_of(tmp_path):
    url = str(tmp_path / "a")
    want = _long_array(url, 8 * log.SEGMENT_LIMIT)
    before = _segment_paths(url)
    log.clear_cache()
    a = arrayds.open_array(url, mode="r+")
    a[200:204] = 7  # hides the entries of chunks 200 and 202: one segment
    want[200:204] = 7
    after = _segment_paths(url)
    assert len(after - before) == 1 and len(before - after) == 1
    assert len(log._cache) <= 3  # the segments that box meets, not the whole list
    # more writes on the same handle and on fresh ones, against numpy
    rng = np.random.default_rng(1)
    n = a.shape[0]
    for i in range(12):
        lo = int(rng.integers(0, n - 1))
        hi = int(min(n, lo + rng.integers(1, 40)))
        step = int(rng.integers(1, 3))
        if i % 3 == 0:  # a fresh handle now and then; the same one in between
            a = arrayds.open_array(url, mode="r+")
        a[lo:hi:step] = 1000 + i
        want[lo:hi:step] = 1000 + i
        np.testing.assert_array_equal(a[...], want)
    log.clear_cache()
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)
    assert verify(url).ok
    # every retained version still reads as it was
    for v in arrayds.versions(url)[-3:]:
        assert arrayds.open_array(url, version=v.generation).shape == (n,)


def test_a_region_write_on_a_moved_list_falls_back_to_writing_it_whole(tmp_path):
    """A handle whose list is not the one stored (another handle wrote since) is
    refused as before; reopened, its write splices the stored list."""
    url = str(tmp_path / "a")
    want = _long_array(url, 4 * log.SEGMENT_LIMIT)
    a = arrayds.open_array(url, mode="r+")
    b = arrayds.open_array(url, mode="r+")
    b[10:12] = 3
    want[10:12] = 3
    with pytest.raises(arrayds.CommitConflictError):
        a[20:22] = 4
    a = arrayds.open_array(url, mode="r+")
    a[20:22] = 4
    want[20:22] = 4
    log.clear_cache()
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)


def test_gc_keeps_the_segments_of_retained_versions_and_removes_the_rest(tmp_path):
    url = str(tmp_path / "a")
    want = _long_array(url, 4 * log.SEGMENT_LIMIT)
    gen_before = arrayds.versions(url)[-1].generation
    a = arrayds.open_array(url, mode="r+")
    a[40:44] = 1  # rewrites the segment holding chunks 40 and 42
    log_dir = tmp_path / "a" / log.LOG_DIR
    on_disk = set(os.listdir(log_dir))
    # keep the last two versions: the one before the region write names the old segment
    collect_garbage(url, min_age=0, keep_versions=2)
    assert arrayds.open_array(url, version=gen_before)[40] == want[40]
    kept = set(os.listdir(log_dir))
    assert kept < on_disk  # segments of expired versions only were removed
    collect_garbage(url, min_age=0, keep_versions=1)
    named = {r.rpartition("/")[2] for r in _segment_paths(url)}
    assert set(os.listdir(log_dir)) == named  # only what the head names is left
    want[40:44] = 1
    log.clear_cache()
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)
    assert verify(url).ok


def test_a_pickled_long_array_carries_its_head_not_its_entries(tmp_path):
    url = str(tmp_path / "a")
    want = _long_array(url, 8 * log.SEGMENT_LIMIT)
    log.clear_cache()
    a = arrayds.open_array(url)
    whole = sum(len(dump_json(e)) for e in commit.read(get_store(url, None), "").raw["shards"])
    data = pickle.dumps(a)
    assert len(data) < whole / 4  # the references and the tail, not every entry
    log.clear_cache()
    b = pickle.loads(data)
    assert b[300] == want[300] and len(log._cache) < len(_segment_paths(url))
    np.testing.assert_array_equal(b[...], want)
    a[...]  # a handle whose list was parsed whole still pickles (as its entries)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(a))[...], want)


def test_a_records_dataset_opens_from_its_head(tmp_path):
    from arrayds import records

    url = str(tmp_path / "r")
    data = [b"r%d" % i for i in range(200)]
    records.write_records(data, url, serializer="raw", num_shards=200)  # 200 entries
    head = json.loads((tmp_path / "r" / "arrayds.json").read_bytes())
    assert head["shards"]["segments"] and all("records" in r for r in head["shards"]["segments"])
    log.clear_cache()
    opened = records.open_records(url)
    assert len(opened) == 200 and len(log._cache) == 0  # the head says how many
    assert opened[150] == b"r150" and list(opened)[-1] == b"r199"


def _long_records(tmp_path, n: int = 6 * 64 + 20):
    """A records dataset of ``n`` shards of 1 to 3 records each (entries in segments)."""
    return long_lists.dask_records(tmp_path, n)


def test_a_records_read_loads_only_the_segments_its_records_lie_in(tmp_path):
    from arrayds import records

    url, data = _long_records(tmp_path)
    refs = json.loads((tmp_path / "r" / "arrayds.json").read_bytes())["shards"]["segments"]
    assert len(refs) >= 6 and all("records" in r for r in refs)
    ends = np.cumsum([r["records"] for r in refs])

    def segments_of(*idx):  # the segments that hold those records
        return {int(k) for k in np.searchsorted(ends, idx, side="right") if k < len(refs)}

    log.clear_cache()
    ds = records.open_records(url)
    assert len(ds) == len(data) and len(log._cache) == 0
    last = len(data) - 1
    assert ds[last] == data[last] and len(log._cache) == len(segments_of(last))
    mid = len(data) // 2
    assert ds[[mid, 6, mid + 1]] == [data[mid], data[6], data[mid + 1]]
    assert len(log._cache) == len(segments_of(last, mid, 6, mid + 1)) < len(refs)
    src = records.data_source(url)
    clone = pickle.loads(pickle.dumps(src))  # a worker: the pages, not their files
    assert len(pickle.dumps(src)) < len(pickle.dumps(src.paths))  # the refs, not every file
    log.clear_cache()
    assert clone[100] == data[100] and len(log._cache) == 1
    rng = np.random.default_rng(2)
    idx = rng.integers(0, len(data), 300)
    assert clone[idx] == [data[i] for i in idx]
    assert list(clone) == data and clone[-1] == data[-1]
    assert src.paths == records.open_records(url).shard_paths
    two = arrayds.ArrayRecordDataSource([url, url])  # several datasets: their files listed
    assert len(two) == 2 * len(data) and two[[len(data) + 3, 3]] == [data[3], data[3]]
    assert repr(clone) == repr(arrayds.ArrayRecordDataSource(records.open_records(url).shard_paths))


def _forged_records(tmp_path, change) -> str:
    url, data = _long_records(tmp_path)
    head_path = tmp_path / "r" / "arrayds.json"
    head = json.loads(head_path.read_bytes())
    change(head["shards"]["segments"])
    head_path.write_bytes(dump_json(head))
    log.clear_cache()
    return url, data


def test_records_refs_without_a_summary_load_their_segments(tmp_path):
    from arrayds import records

    def strip(refs):
        for r in refs[:3]:
            del r["records"]

    url, data = _forged_records(tmp_path, strip)
    ds = records.open_records(url)
    assert ds[len(data) - 2] == data[-2]
    assert 3 <= len(log._cache) <= 4  # those that say nothing, counted, and the read's
    assert ds[::7] == data[::7]


def test_records_refs_that_disagree_with_their_segment_are_corruption(tmp_path):
    from arrayds import records

    def more(refs):
        refs[1]["records"] += 1
        refs[2]["records"] -= 1  # the total still agrees

    url, data = _forged_records(tmp_path, more)
    ds = records.open_records(url)
    assert ds[3] == data[3]  # segment 0 is sound
    first = json.loads((tmp_path / "r" / "arrayds.json").read_bytes())["shards"]["segments"][0]
    disagree = r"segment '_arrayds/log/.*': its entries hold \d+ records; the manifest says"
    with pytest.raises(CorruptionError, match=disagree):
        ds[first["records"]]  # the first record of segment 1

    def total(refs):
        refs[0]["records"] += 1

    url, _ = _forged_records(tmp_path / "t", total)
    with pytest.raises(CorruptionError, match="num_records"):
        records.open_records(url)[0]
