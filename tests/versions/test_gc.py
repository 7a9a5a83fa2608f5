"""gc retention (docs/cli.md, gc): ``collect_garbage(url, keep_versions=,
older_than=)`` keeps the current version, the newest ``keep_versions`` and the
versions replaced less than ``older_than`` ago; it removes the expired version files,
the manifest segments and the shard files no kept version names, and nothing else;
every kept version still reads, an expired one is a ``ValueError``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import arrayds
from arrayds import records as records
from arrayds.nodes import commit
from arrayds.nodes import history as log
from arrayds.storage import get_store
from arrayds.tools.gc import DEFAULT_RETENTION, collect_garbage


def _history(w, n=6):
    """An array whose every version rewrites the whole array (so each version has
    shard files of its own); returns {generation: values}."""
    a = arrayds.open_array(
        w.url, "x", mode="w", shape=(4,), dtype="i4", chunks=2, storage_options=w.so
    )
    out = {a.generation: a[:]}
    for i in range(n):
        a[:] = np.full(4, i)
        out[a.generation] = a[:]
    return out


def _files(w, node):
    st = get_store(w.url, w.so)
    start = len(node) + 1 if node else 0
    return {k[start:] for k, _, _ in st.list(node)}


def _needed(w, node):
    """The files (relative to ``node``) the kept versions name, and the version files."""
    st = get_store(w.url, w.so)
    need = {"arrayds.json"}
    for v in commit.versions(st, node):
        nv = commit.read(st, node, version=v.generation)
        need |= commit.referenced_files(nv.raw) | log.log_files(st, node, nv.head)
        if not v.current:
            need.add(log.version_key(v.generation))
    return need


def _check_kept(w, hist, kept):
    vs = [v.generation for v in arrayds.versions(w.url, "x", storage_options=w.so)]
    assert vs == kept
    for g, values in hist.items():
        if g in kept:
            a = arrayds.open_array(w.url, "x", version=g, storage_options=w.so)
            np.testing.assert_array_equal(a[:], values)
        else:
            with pytest.raises(
                ValueError, match=f"no version {g}; the (versions kept are|history keeps only)"
            ):
                arrayds.open_array(w.url, "x", version=g, storage_options=w.so)
    assert _files(w, "x") == _needed(w, "x")


def test_keep_versions_keeps_exactly_what_the_newest_need(where):
    hist = _history(where)
    gens = sorted(hist)
    dry = collect_garbage(
        where.url, storage_options=where.so, min_age=0, keep_versions=3, dry_run=True
    )
    assert len(dry.expired) == len(gens) - 3 and dry.removed and dry.dry_run
    assert len(arrayds.versions(where.url, "x", storage_options=where.so)) == len(gens)
    r = collect_garbage(where.url, storage_options=where.so, min_age=0, keep_versions=3)
    assert sorted(r.expired) == sorted(dry.expired) and sorted(r.removed) == sorted(dry.removed)
    assert r.keep_versions == 3 and r.older_than is None
    _check_kept(where, hist, gens[-3:])
    r = collect_garbage(where.url, storage_options=where.so, min_age=0, keep_versions=1)
    _check_kept(where, hist, gens[-1:])
    again = collect_garbage(where.url, storage_options=where.so, min_age=0, keep_versions=1)
    assert again.expired == [] and again.removed == []


def test_the_default_keeps_a_week_and_older_than_0_expires_all(quick):
    hist = _history(quick)
    r = collect_garbage(quick.url, min_age=0)
    assert r.older_than == DEFAULT_RETENTION and r.expired == [] and r.removed == []
    _check_kept(quick, hist, sorted(hist))
    r = collect_garbage(quick.url, min_age=0, older_than=timedelta(0))
    _check_kept(quick, hist, [max(hist)])
    assert r.versions_kept == 2  # the root group and x, each its current version


def _commits_stamped(monkeypatch, when: datetime) -> None:
    """The next commits carry the time ``when`` (the writer's clock said so), as the
    commits of a version written long ago would: no test waits for a version to age."""
    monkeypatch.setattr(log, "now", lambda: when.isoformat(timespec="microseconds"))


def test_older_than_counts_from_when_a_version_was_replaced(quick, monkeypatch):
    hours_ago = [datetime.now(timezone.utc) - timedelta(hours=h) for h in (4, 3, 2)]
    with monkeypatch.context() as m:
        _commits_stamped(m, hours_ago[0])
        a = arrayds.open_array(quick.url, mode="w", shape=(2,), dtype="i1", chunks=1)
        _commits_stamped(m, hours_ago[1])
        a[:] = 1  # version 2
        _commits_stamped(m, hours_ago[2])
        a[:] = 2  # version 3: version 2 replaced 2 hours ago
    a[:] = 3  # version 4: version 3 (committed 2 hours ago) replaced now
    r = collect_garbage(quick.url, min_age=0, older_than=3600.0)
    assert [v.generation for v in arrayds.versions(quick.url)] == [3, 4]
    assert len(r.expired) == 2
    # with keep_versions too: kept if either rule keeps it
    a[:] = 4
    r = collect_garbage(quick.url, min_age=0, older_than=0, keep_versions=2)
    assert [v.generation for v in arrayds.versions(quick.url)] == [4, 5]


def test_min_age_still_keeps_young_unreferenced_files(quick):
    hist = _history(quick, n=2)
    r = collect_garbage(quick.url, older_than=0)  # min_age: 24 h
    assert len(r.expired) == 2 and r.removed == [] and r.kept_young
    np.testing.assert_array_equal(arrayds.open_array(quick.url, "x")[:], hist[max(hist)])


def test_segments_no_kept_version_names_are_removed(quick):
    """Past 32 entries a shard list moves into segments (_arrayds/log), merged as
    appends go on (the segments of before a merge are named only by older versions);
    a rewrite of every entry writes a new list."""
    a = arrayds.open_array(quick.url, "x", mode="w", shape=(0,), dtype="i2", chunks=1)
    for i in range(70):
        a.append(np.array([i], "i2"), compact=False)
    appended = a.generation
    st = get_store(quick.url, None)
    assert log.log_files(st, "x", commit.read(st, "x").head)
    a[:] = np.arange(70, dtype="i2")[::-1]
    old_segments = {p for p in _files(quick, "x") if p.startswith(log.LOG_DIR)}
    r = collect_garbage(quick.url, min_age=0, keep_versions=2)
    vs = [v.generation for v in arrayds.versions(quick.url, "x")]
    assert vs == [appended, appended + 1]
    assert _files(quick, "x") == _needed(quick, "x")
    np.testing.assert_array_equal(
        arrayds.open_array(quick.url, "x", version=appended)[:], np.arange(70)
    )
    gone = old_segments - _files(quick, "x")
    assert gone and {quick_url_rel(p, quick) for p in r.removed} >= {f"x/{p}" for p in gone}
    collect_garbage(quick.url, min_age=0, keep_versions=1)
    assert not {p for p in _files(quick, "x") if p.startswith(log.LOG_DIR)} - set(
        log.log_files(st, "x", commit.read(st, "x").head)
    )
    np.testing.assert_array_equal(arrayds.open_array(quick.url, "x")[:], np.arange(70)[::-1])


def quick_url_rel(shown, w):
    st = get_store(w.url, None)
    base = st.url_of("")
    return shown[len(base) :].lstrip("/")


def test_records_and_groups_keep_what_their_versions_need(quick):
    url = quick.url + "/r"
    g = arrayds.open(quick.url, mode="w")
    records.write_records([b"a", b"b"], url)
    records.write_records([b"c"], url, mode="a")
    g.attrs["k"] = 1
    collect_garbage(quick.url, min_age=0, keep_versions=2)
    assert len(records.open_records(url, version=1)) == 2
    assert dict(arrayds.open(quick.url, version=1).attrs) == {}
    collect_garbage(quick.url, min_age=0, older_than=0)
    with pytest.raises(ValueError, match="keeps only the current version"):
        records.open_records(url, version=1)
    assert [records.open_records(url)[i] for i in range(3)] == [b"a", b"b", b"c"]


def test_xarray_dataset_versions_survive_gc_of_the_others(quick):
    xr = pytest.importorskip("xarray")
    after = []
    for i in range(4):
        ds = xr.Dataset(
            {"t": (("time", "x"), np.full((2, 3), float(i)))},
            coords={"time": [2 * i, 2 * i + 1], "x": [1, 2, 3]},
        )
        kw = {"mode": "w"} if i == 0 else {"mode": "a", "append_dim": "time"}
        arrayds.to_arrayrecord(ds, quick.url, **kw)
        after.append(xr.open_dataset(quick.url, engine="arrayds").load())
    collect_garbage(quick.url, min_age=0, keep_versions=2)
    for n in (3, 4):
        got = xr.open_dataset(quick.url, engine="arrayds", version=n).load()
        xr.testing.assert_identical(got, after[n - 1])
    with pytest.raises(ValueError, match="no version 2; the versions kept are 3, 4"):
        xr.open_dataset(quick.url, engine="arrayds", version=2)


def test_format_1_nodes_collect_as_before(quick):
    from arrayds.kinds.array.create import new_array_manifest

    st = get_store(quick.url, None)
    m = new_array_manifest((4,), "i4", 2).to_json()
    commit.commit(st, "v1", lambda b: m, write_id=commit.new_write_id(), format_version=1)
    a = arrayds.open_array(quick.url, "v1", mode="r+")
    a[:] = [1, 2, 3, 4]
    first = {p for p in _files(quick, "v1") if p.startswith("c/")}
    a[:] = [5, 6, 7, 8]
    r = collect_garbage(quick.url, min_age=0)  # the default retention: nothing to keep
    assert {quick_url_rel(p, quick) for p in r.removed} == {f"v1/{p}" for p in first}
    assert r.expired == [] and arrayds.open_array(quick.url, "v1")[:].tolist() == [5, 6, 7, 8]
    assert commit.read(st, "v1").format_version == 1


def test_bad_retention_arguments(quick):
    _history(quick, n=1)
    with pytest.raises(ValueError, match="keep_versions must be an int >= 0"):
        collect_garbage(quick.url, keep_versions=-1)
    with pytest.raises(ValueError, match="keep_versions must be an int"):
        collect_garbage(quick.url, keep_versions=1.5)
    with pytest.raises(TypeError, match="older_than must be seconds or a timedelta"):
        collect_garbage(quick.url, older_than="7d")
    with pytest.raises(ValueError, match="older_than must be >= 0"):
        collect_garbage(quick.url, older_than=-1)
    with pytest.raises(FileNotFoundError):
        collect_garbage(quick.url + "/none", older_than=0)
    assert len(arrayds.versions(quick.url, "x")) == 2  # nothing was removed
