"""A ragged array whose shard list is stored in segments (docs/spec.md 14.3.1): the
segment references carry an ``items`` range, the open reads the head only and a read
of some items loads only the segments that hold them, with the values of the items
written; references without the summary (written before it) make the reader load the
whole list, and ``arrayds upgrade`` adds it; a summary that disagrees with its segment
is a CorruptionError naming the segment, and ``verify`` finds it."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

import arrayds.ragged as rg
from arrayds import to_arrayrecord
from arrayds.errors import CorruptionError
from arrayds.kinds.ragged.manifest import RaggedManifest, RaggedShardLog
from arrayds.nodes import commit
from arrayds.nodes import history as log
from arrayds.nodes.names import dump_json
from arrayds.storage import get_store
from arrayds.tools.upgrade import upgrade
from arrayds.verify import verify

N = 300
RAGGED = ("records", "items")


@pytest.fixture(autouse=True)
def small_segments(monkeypatch):
    """Segments of 8 entries: a few hundred one-item shards make dozens of them."""
    monkeypatch.setattr(log, "SEGMENT_LIMIT", 8)


def _items(n: int = N, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        rng.integers(-99, 99, size=(2, int(rng.integers(0, 13)))).astype("i4") for _ in range(n)
    ]


@pytest.fixture
def written(tmp_path):
    """A ragged array of one item per shard (``shard_size=1``), in segments."""
    url = str(tmp_path / "r")
    items = _items()
    rg.write_ragged(items, url, piece_len=4, shard_size=1)
    log.clear_cache()
    return url, items


def _head(url: str) -> dict:
    with open(f"{url}/arrayds.json", "rb") as f:
        return json.loads(f.read())


def _forge(url: str, change) -> dict:
    head = _head(url)
    change(head["shards"]["segments"])
    with open(f"{url}/arrayds.json", "wb") as f:
        f.write(dump_json(head))
    log.clear_cache()
    return head


def _whole(url: str) -> rg.RaggedArray:
    """The same array read from its whole list (every segment loaded at the open)."""
    store = get_store(url, None)
    raw = commit.read(store, "").raw
    return rg.RaggedArray(store, "", RaggedManifest.from_json(raw, url))


def _equal(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


def test_references_carry_the_item_range_of_their_segment(written):
    url, items = written
    shards = _head(url)["shards"]
    refs = shards["segments"]
    assert len(refs) >= N // log.SEGMENT_LIMIT - 1 and all(r["count"] <= 8 for r in refs)
    stops = [r["items"][1] for r in refs]
    assert [r["items"][0] for r in refs] == [0, *stops[:-1]]
    tail = shards["tail"]
    assert (tail[0]["items"][0] if tail else stops[-1]) == stops[-1]
    assert not log.needs_index(_head(url), RAGGED)


def test_reads_equal_numpy_and_the_whole_list_across_many_segments(written):
    url, items = written
    ra, whole = rg.open_ragged(url), _whole(url)
    assert isinstance(ra.manifest.shards, RaggedShardLog) and len(ra) == N
    rng = np.random.default_rng(1)
    for i in rng.integers(0, N, 40).tolist():
        np.testing.assert_array_equal(ra[i], items[i])
        np.testing.assert_array_equal(ra[i, 1, :3], items[i][1, :3])  # a channel's start
        np.testing.assert_array_equal(ra[-1 - i], whole[-1 - i])
    pick = rng.integers(0, N, 50)
    _equal(ra[pick], [items[i] for i in pick.tolist()])
    _equal(ra[17:260:7, 0], [x[0] for x in items[17:260:7]])
    _equal(ra.get(pick, slice(None), slice(2, 5)), whole.get(pick, slice(None), slice(2, 5)))
    np.testing.assert_array_equal(ra.pad(4, items=pick), whole.pad(4, items=pick))
    _equal(rg.read_ragged(url).compute(scheduler="sync"), items)
    _equal(list(ra), items)
    assert ra.shapes == [x.shape for x in items] and ra.nshards == whole.nshards


def test_a_read_of_one_item_loads_one_segment(written):
    url, items = written
    refs = _head(url)["shards"]["segments"]
    ra = rg.open_ragged(url)
    assert len(log._cache) == 0 and len(ra) == N  # the head says
    assert ra.nshards == sum(r["count"] for r in refs) + len(_head(url)["shards"]["tail"])
    np.testing.assert_array_equal(ra[123], items[123])
    assert len(log._cache) == 1
    np.testing.assert_array_equal(ra[5, 0, :2], items[5][0, :2])  # first samples
    assert len(log._cache) == 2
    _equal(ra[[6, 7, 124]], [items[6], items[7], items[124]])  # the same two segments
    assert len(log._cache) == 2 < len(refs)
    # a partition of the dask reader: its shard's segment only, from a pickled handle
    sh = _whole(url).manifest.shards[200]
    assert len(pickle.dumps(ra)) < len(pickle.dumps(_whole(url))) / 4  # refs, not entries
    clone = pickle.loads(pickle.dumps(ra))
    log.clear_cache()
    part = clone.to_bag().to_delayed()[200].compute(scheduler="sync")
    _equal(part, items[sh.start : sh.stop])
    assert len(log._cache) == 1


def test_appends_summarize_their_segments_and_read_the_same(tmp_path):
    url = str(tmp_path / "a")
    items = _items(120, seed=3)
    for a in range(0, 120, 30):
        to_arrayrecord(items[a : a + 30], url, mode="a", piece_len=4, shard_size=1, compact=False)
    assert all("items" in r for r in _head(url)["shards"]["segments"])
    log.clear_cache()
    ra = rg.open_ragged(url)
    for i in (0, 29, 30, 77, 119):
        np.testing.assert_array_equal(ra[i], items[i])
    assert len(log._cache) < len(_head(url)["shards"]["segments"])
    _equal(ra[:], items)


def test_references_without_items_read_the_whole_list_and_upgrade_adds_them(written):
    url, items = written

    def strip(refs):
        for r in refs:
            del r["items"]  # as written before the summary

    head = _forge(url, strip)
    assert log.needs_index(head, RAGGED) and not log.needs_index(head)
    ra = rg.open_ragged(url)
    np.testing.assert_array_equal(ra[200], items[200])
    assert len(log._cache) == len(head["shards"]["segments"])  # the whole list
    _equal(ra[::-9], items[::-9])
    assert upgrade(url, dry_run=True) == [""]
    assert upgrade(url) == [""] and upgrade(url) == []
    assert not log.needs_index(_head(url), RAGGED)
    log.clear_cache()
    ra = rg.open_ragged(url)
    np.testing.assert_array_equal(ra[200], items[200])
    assert len(log._cache) == 1
    assert rg.open_ragged(url, version=1)[200].tolist() == items[200].tolist()  # kept


def test_some_references_without_items_read_the_whole_list(written):
    url, items = written

    def strip(refs):
        del refs[2]["items"]

    head = _forge(url, strip)
    ra = rg.open_ragged(url)
    _equal(ra[[0, 150, N - 1]], [items[0], items[150], items[N - 1]])
    assert len(log._cache) == len(head["shards"]["segments"])


def test_a_forged_items_summary_is_corruption_naming_the_segment(written):
    url, items = written

    def shift(refs):  # still a tiling of the items, but not the segments'
        refs[1]["items"][1] += 1
        refs[2]["items"][0] += 1

    head = _forge(url, shift)
    bad = head["shards"]["segments"][1]["path"]
    ra = rg.open_ragged(url)
    np.testing.assert_array_equal(ra[250], items[250])  # a sound segment reads
    disagree = rf"segment '{bad}': its entries hold items \[8, 16\]; the manifest says \[8, 17\]"
    with pytest.raises(CorruptionError, match=disagree):
        ra[9]
    report = verify(url)
    assert not report.ok and any(bad in str(p) for p in report.problems)


def test_references_that_do_not_follow_each_other_are_corruption(written):
    url, _ = written

    def gap(refs):
        refs[3]["items"] = [refs[3]["items"][0] + 2, refs[3]["items"][1]]

    head = _forge(url, gap)
    path = head["shards"]["segments"][3]["path"]
    with pytest.raises(CorruptionError, match=rf"segment '{path}': its reference's items"):
        rg.open_ragged(url)[0]


@pytest.mark.parametrize("items", [[3], [5, 2], [-1, 4], ["a", 8], "x", [0, 1, 2]])
def test_a_malformed_items_summary_is_refused(written, items):
    url, _ = written

    def bad(refs):
        refs[0]["items"] = items

    _forge(url, bad)
    with pytest.raises(CorruptionError, match="manifest segment reference .* is invalid"):
        rg.open_ragged(url)[0]


def test_a_count_the_list_does_not_hold_is_corruption(written):
    url, _ = written
    head = _head(url)
    head["count"] = N + 3
    with open(f"{url}/arrayds.json", "wb") as f:
        f.write(dump_json(head))
    log.clear_cache()
    ra = rg.open_ragged(url)
    with pytest.raises(CorruptionError, match=rf"count {N + 3} disagrees with the shards"):
        ra[N + 1]
    with pytest.raises(CorruptionError, match="count"):
        ra[0]  # the end of the list is checked by every read


def test_a_damaged_entry_in_a_segment_is_corruption_naming_it(written):
    url, _ = written
    ref = _head(url)["shards"]["segments"][4]
    seg_path = f"{url}/{ref['path']}"
    with open(seg_path, "rb") as f:
        doc = json.loads(f.read())
    doc["entries"][2]["path"] = "../x"
    with open(seg_path, "wb") as f:
        f.write(dump_json(doc))
    log.clear_cache()
    ra = rg.open_ragged(url)
    entry = sum(r["count"] for r in _head(url)["shards"]["segments"][:4]) + 2
    where = rf"segment '{ref['path']}': shard entry {entry}: path '../x'"
    with pytest.raises(CorruptionError, match=where):
        ra[doc["entries"][2]["items"][0]]


def test_a_ragged_list_with_indexes_reads_by_item(tmp_path, monkeypatch):
    """Indexes of 4 segment references (docs/spec.md 14.3.2): an index reference
    carries the item range of its segments; a read of one item loads one index and
    one segment; an index whose item range disagrees is corruption naming it."""
    monkeypatch.setattr(log, "INDEX_LIMIT", 4)
    url = str(tmp_path / "r")
    items = _items()
    rg.write_ragged(items, url, piece_len=4, shard_size=1)
    head = _head(url)
    refs = head["shards"]["segments"]
    indexes = [r for r in refs if "refs" in r]
    assert len(indexes) >= 4 and head["format_version"] == 3
    assert [r["items"][0] for r in refs] == [0, *[r["items"][1] for r in refs][:-1]]
    log.clear_cache()
    ra = rg.open_ragged(url)
    assert len(ra) == N and len(log._cache) == 0
    np.testing.assert_array_equal(ra[40], items[40])
    assert len(log._cache) == 2  # the index that holds item 40 and its segment
    rng = np.random.default_rng(3)
    pick = rng.integers(0, N, 60)
    _equal(ra[pick], [items[i] for i in pick.tolist()])
    _equal(ra[::9, 1, :2], [x[1, :2] for x in items[::9]])
    _equal(list(ra), items)
    clone = pickle.loads(pickle.dumps(ra))
    log.clear_cache()
    sh = _whole(url).manifest.shards[150]
    log.clear_cache()
    _equal(clone.to_bag().to_delayed()[150].compute(scheduler="sync"), items[sh.start : sh.stop])
    assert verify(url).ok
    # an index whose items disagree with its segments'
    path = indexes[1]["path"]
    doc = json.loads(open(f"{url}/{path}", "rb").read())
    doc["refs"][0]["items"][0] += 1
    with open(f"{url}/{path}", "wb") as f:
        f.write(dump_json(doc))
    log.clear_cache()
    with pytest.raises(CorruptionError, match=rf"manifest index '{path}'"):
        list(rg.open_ragged(url))


def test_an_append_to_a_long_list_reads_none_of_its_segments(written):
    """An append commits an Extend after the stored entries (their item count is the
    head's ``count``): only the last segment may be read, to merge the tail into it."""
    url, items = written
    n_refs = len(_head(url)["shards"]["segments"])
    more = _items(5, seed=9)
    log.clear_cache()
    out = to_arrayrecord(more, url, mode="a", piece_len=4, shard_size=1, compact=False)
    assert len(log._cache) <= 1 < n_refs
    assert len(out) == N + 5
    log.clear_cache()
    ra = rg.open_ragged(url)
    _equal(ra[N - 2 :], [*items[N - 2 :], *more])
    _equal(list(ra), [*items, *more])
