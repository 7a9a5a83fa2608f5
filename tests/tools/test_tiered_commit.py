"""The tiered merge runs inside the append's own commit for every kind and every
append path: an append whose shards fill a tier makes exactly one new
version, and that version names the merged shard; a commit another writer beats
between its read and its put removes its merged shard (nothing of it is visible),
and an append retried after that merges again from what the other writer left.

Appends of records, ragged arrays, dask arrays and xarray datasets (``append_dim``),
each through ``arrayds.to_arrayrecord``; the race is a store whose next conditional
put of a manifest first lets another writer commit (real files, no mock)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import arrayds
from arrayds.errors import CommitConflictError
from arrayds.nodes import retry
from arrayds.storage import LocalStore, clear_store_cache, register_store
from arrayds.verify import verify

TIER = 8  # MERGE_FACTOR: eight shards of one size make one of the next tier
OTHER = 9  # what the other writer appends: a batch the size of the others


class RacingStore(LocalStore):
    """A local store whose next conditional put of a manifest first runs ``race``
    (another writer's commit, through this same store: it is run once)."""

    race = None

    def put_if_match(self, key, *args, **kwargs):
        race, RacingStore.race = RacingStore.race, None
        if race is not None and key.rsplit("/", 1)[-1] == "arrayds.json":
            race()
        return super().put_if_match(key, *args, **kwargs)


@pytest.fixture
def racing():
    """Local paths served by :class:`RacingStore` for the test."""
    register_store("file", RacingStore)
    clear_store_cache()
    try:
        yield RacingStore
    finally:
        RacingStore.race = None
        register_store("file", LocalStore)
        clear_store_cache()


def _data_files(url: str) -> set[str]:
    """The files below ``url`` but manifests and history (shards of every member)."""
    out = set()
    for root, _dirs, files in os.walk(url):
        rel = os.path.relpath(root, url)
        if "_arrayds" in rel.split(os.sep):
            continue
        out |= {os.path.join(rel, f) for f in files if f != "arrayds.json"}
    return out


def _arm(url: str, other) -> dict[str, set[str]]:
    """Let ``other()`` commit at the next manifest put; returns where the files there
    then (``seen["pending"]``) and the files ``other`` added (``seen["other"]``) are
    recorded once it ran."""
    seen: dict[str, set[str]] = {}

    def race():
        seen["pending"] = before = _data_files(url)
        other()
        seen["other"] = _data_files(url) - before

    RacingStore.race = race
    return seen


# ------------------------------------------------------------------ the kinds


def _records(url, i, **kw):
    return arrayds.to_arrayrecord([b"r%d-%d" % (i, k) for k in range(3)], url, **kw)


def _records_rows(n):
    return [b"r%d-%d" % (i, k) for i in range(n) for k in range(3)]


def _clip(i):
    return [np.full((2, 20), i, "f4"), np.full((2, 21), -i, "f4")]


def _ragged(url, i, **kw):
    return arrayds.to_arrayrecord(_clip(i), url, piece_len=16, **kw)


def _dask(url, i, **kw):
    import dask.array as da

    x = da.from_array(np.full((1, 3), i, "i4"), chunks=(1, 3))
    return arrayds.to_arrayrecord(x, url, **kw)


def _xarray_step(i):
    xr = pytest.importorskip("xarray")
    return xr.Dataset(
        {"t2m": (("time", "x"), np.full((1, 4), i, "f4"))},
        coords={"time": [i], "x": np.arange(4)},
    )


def _xarray(url, i, *, mode, **kw):
    if mode == "w":
        return arrayds.to_arrayrecord(_xarray_step(i), url, mode="w", **kw)
    return arrayds.to_arrayrecord(_xarray_step(i), url, mode="a", append_dim="time", **kw)


def _nshards(url, kind, version=None):
    if kind == "records":
        return arrayds.open(url, version=version).num_shards
    if kind == "ragged":
        return arrayds.open_ragged(url, version=version).nshards
    if kind == "xarray":
        return arrayds.open_array(url, "t2m", version=version).nshards
    return arrayds.open_array(url, version=version).nshards


def _content(url, kind, version=None):
    if kind == "records":
        return arrayds.open(url, version=version).data_source()[:]
    if kind == "ragged":
        ra = arrayds.open_ragged(url, version=version)
        return [ra[k].tolist() for k in range(len(ra))]
    if kind == "xarray":
        return arrayds.open_array(url, "t2m", version=version)[...].tolist()
    return arrayds.open_array(url, version=version)[...].tolist()


def _want(kind, n):
    if kind == "records":
        return _records_rows(n)
    if kind == "ragged":
        return [c.tolist() for i in range(n) for c in _clip(i)]
    if kind == "xarray":
        return [[float(i)] * 4 for i in range(n)]
    return [[i] * 3 for i in range(n)]


WRITERS = {"records": _records, "ragged": _ragged, "dask": _dask, "xarray": _xarray}


def _grow(url, kind, n):
    """The node written once, then appended to ``n - 1`` times without merging."""
    write = WRITERS[kind]
    for i in range(n):
        write(url, i, mode="a" if i else "w", compact=False)


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_an_append_that_fills_a_tier_makes_one_version_with_its_tail_merged(tmp_path, kind):
    url = str(tmp_path / kind)
    _grow(url, kind, TIER - 1)
    versions = arrayds.versions(url)
    assert _nshards(url, kind) == TIER - 1
    WRITERS[kind](url, TIER - 1, mode="a")  # compact="tiered", the default of appends
    after = arrayds.versions(url)
    assert len(after) == len(versions) + 1  # the append and its merge: one commit
    assert after[-1].generation == versions[-1].generation + 1
    assert _nshards(url, kind, after[-1].generation) == 1  # that version is merged
    assert _content(url, kind, after[-1].generation) == _want(kind, TIER)
    # the version before it still reads the small shards it names
    assert _nshards(url, kind, versions[-1].generation) == TIER - 1
    assert _content(url, kind, versions[-1].generation) == _want(kind, TIER - 1)
    assert verify(url, progress=False).ok


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_compact_false_appends_make_one_version_and_merge_nothing(tmp_path, kind):
    url = str(tmp_path / kind)
    _grow(url, kind, TIER + 1)
    assert _nshards(url, kind) == TIER + 1
    assert len(arrayds.versions(url)) == TIER + 1


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_an_append_that_loses_its_put_leaves_no_merged_shard(tmp_path, racing, kind):
    url = str(tmp_path / kind)
    _grow(url, kind, TIER - 1)
    versions = arrayds.versions(url)
    before = _data_files(url)
    write = WRITERS[kind]
    seen = _arm(url, lambda: write(url, OTHER, mode="a", compact=False))
    with pytest.raises(CommitConflictError, match="nothing of this write is visible"):
        write(url, TIER - 1, mode="a", retries=0)
    assert seen["other"]  # the other writer committed its shards
    # before its put the append had written its shard and the merged one
    new = {f for f in seen["pending"] - before if f.startswith("t2m" if kind == "xarray" else "")}
    assert len(new) == 2
    # neither the append's shard nor its merged one is left; the node is the other's
    assert _data_files(url) == before | seen["other"]
    assert len(arrayds.versions(url)) == len(versions) + 1
    assert _nshards(url, kind) == TIER
    want = _want(kind, TIER - 1) + _want(kind, OTHER + 1)[-len(_want(kind, 1)) :]
    assert _content(url, kind) == want


@pytest.mark.parametrize("kind", ["records", "dask", "xarray", "ragged"])
def test_a_retried_append_merges_again_from_the_other_writer_s_commit(tmp_path, racing, kind):
    url = str(tmp_path / kind)
    _grow(url, kind, TIER - 1)
    versions = arrayds.versions(url)
    before = _data_files(url)
    write = WRITERS[kind]
    seen = _arm(url, lambda: write(url, OTHER, mode="a", compact=False))
    retried = retry.retried()
    write(url, TIER - 1, mode="a")  # refused once, then retried on the fresh read
    assert retry.retried() == retried + 1
    mine = (lambda f: f.startswith("t2m")) if kind == "xarray" else (lambda f: True)
    assert len([f for f in seen["other"] if mine(f)]) == 1
    after = arrayds.versions(url)
    assert len(after) == len(versions) + 2  # the other writer's commit and this append
    assert _nshards(url, kind) == 1  # all nine merged: the other writer's shard among them
    one = len(_want(kind, 1))
    want = _want(kind, TIER - 1) + _want(kind, OTHER + 1)[-one:] + _want(kind, TIER)[-one:]
    assert _content(url, kind) == want
    # the merged shard of the refused attempt and the append's own shard are gone:
    # what is new besides the other writer's shard is the one merged shard committed
    assert len([f for f in _data_files(url) - before - seen["other"] if mine(f)]) == 1
    assert verify(url, progress=False).ok


def test_a_delayed_dask_append_merges_in_its_commit_task(tmp_path):
    import dask.array as da

    url = str(tmp_path / "d")
    _grow(url, "dask", TIER - 1)
    n = len(arrayds.versions(url))
    x = da.from_array(np.full((1, 3), TIER - 1, "i4"), chunks=(1, 3))
    d = arrayds.to_arrayrecord(x, url, mode="a", compute=False)
    assert len(arrayds.versions(url)) == n  # nothing before it is computed
    out = d.compute()
    assert out.nshards == 1 and len(arrayds.versions(url)) == n + 1
    assert arrayds.open_array(url)[...].tolist() == _want("dask", TIER)


def test_a_merge_that_fails_fails_its_append_and_leaves_nothing(tmp_path):
    """A shard the merge must copy is missing: the append raises naming it, and
    neither its own shard nor a merged one is left (no version is added)."""
    url = str(tmp_path / "r")
    _grow(url, "records", TIER - 1)
    victim = arrayds.open(url).manifest.shards[3].path
    os.remove(os.path.join(url, victim))
    before = _data_files(url)
    versions = arrayds.versions(url)
    with pytest.raises(FileNotFoundError, match="named by the manifest is missing"):
        _records(url, TIER - 1, mode="a")
    assert _data_files(url) == before
    assert arrayds.versions(url) == versions
    _records(url, TIER - 1, mode="a", compact=False)  # an append that does not merge lands
    assert arrayds.open(url).num_shards == TIER


def test_an_append_whose_tier_another_writer_merged_and_gc_removed_retries(tmp_path, monkeypatch):
    """An append read the head, then, before its merge read the tier's small shards,
    another writer merged them away and gc (``min_age=0``) removed them: the append
    commits unmerged, its put is refused (the head moved) and its retry goes on the
    other writer's merged head; every row once. (Before: a FileNotFoundError.)"""
    from arrayds.nodes import merge, shards
    from arrayds.tools.gc import collect_garbage

    url = str(tmp_path / "r")
    _grow(url, "records", TIER - 1)
    merge_tier = merge.TieredMerge._merge
    other: list[int] = []

    def raced(self, node, kind, doc, window, appended):
        if not other:
            other.append(1)
            _records(url, TIER - 1, mode="a")  # fills the tier: merged in its commit
            collect_garbage(url, min_age=0, keep_versions=1, older_than=0)
            shards.clear_reader_cache()  # as in another process: no open shard is kept
        return merge_tier(self, node, kind, doc, window, appended)

    monkeypatch.setattr(merge.TieredMerge, "_merge", raced)
    retried = retry.retried()
    _records(url, TIER, mode="a")
    assert other and retry.retried() == retried + 1
    assert sorted(_content(url, "records")) == sorted(_want("records", TIER + 1))
    assert verify(url, progress=False).ok
