"""The tiered merge of an append to a long ragged array weighs only the newest entries
of its shard list (docs/spec.md 7.5, ``MERGE_WINDOW``): an append parses the tail and
the last segments, and a merge that takes stored entries drops them from the segments
that hold them (an ``Extend`` with ``drop``). Real files, ``SEGMENT_LIMIT`` and
``MERGE_WINDOW`` made small so a few hundred shards make a long list."""

from __future__ import annotations

import numpy as np
import pytest

import arrayds.ragged as rg
from arrayds.kinds.ragged.manifest import RaggedManifest, RaggedWindow
from arrayds.nodes import commit, merge
from arrayds.nodes import history as log
from arrayds.storage import get_store
from arrayds.verify import verify

LIMIT = 4
WINDOW = 8
N = 200  # one item per shard: 50 segments


@pytest.fixture(autouse=True)
def _small(monkeypatch):
    monkeypatch.setattr(log, "SEGMENT_LIMIT", LIMIT)
    monkeypatch.setattr(merge, "MERGE_WINDOW", WINDOW)
    log.clear_cache()


def _item(k: int) -> np.ndarray:
    return np.full(1 + k % 4, k, dtype=np.int32)


def _manifest(url: str) -> RaggedManifest:
    store = get_store(url)
    return RaggedManifest.from_json(log.resolve(store, "", commit.read(store, "").head, url), url)


def _read(url: str) -> list[np.ndarray]:
    log.clear_cache()
    ra = rg.open_ragged(url)
    return [np.asarray(ra[i]) for i in range(len(ra))]


def test_appends_parse_only_the_newest_segments_and_merge_them(tmp_path):
    url = str(tmp_path / "r")
    rg.write_ragged([_item(k) for k in range(N)], url, shard_size=1)
    assert len(_manifest(url).shards) == N
    loaded = []
    for k in range(N, N + 9):
        log.clear_cache()
        rg.write_ragged([_item(k)], url, mode="a", shard_size=1)
        loaded.append(len(log._cache))
    # the whole list is 50 segments (and their indexes): each append reads a few
    assert max(loaded) <= 6, loaded
    m = _manifest(url)
    assert len(m.shards) < N + 9  # the merges took stored entries
    assert m.count == N + 9
    got = _read(url)
    assert len(got) == N + 9
    assert all(np.array_equal(a, _item(k)) for k, a in enumerate(got))
    assert verify(url).ok


def test_a_window_parses_entries_from_its_first_item_and_a_stored_list_from_zero():
    doc = {"dtype": "<i4", "ndim": 1, "axis": 0, "piece_len": 4}
    entries = [{"path": "c/a", "items": [5, 7], "records": 3}]
    m = RaggedManifest.from_json({**doc, "shards": RaggedWindow(entries, 5)}, "w")
    assert (m.shards[0].start, m.count) == (5, 7)
    with pytest.raises(Exception, match="start 0"):  # JSON: items count from 0
        RaggedManifest.from_json({**doc, "shards": entries}, "w")
