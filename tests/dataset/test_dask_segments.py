"""Long dask writes (more than ``SEGMENT_LIMIT`` shards, docs/spec.md 14.4.1): the
workers write the shards' manifest entries as segments and the commit task receives
only their references, so its memory does not grow with the number of chunks. Real
writes on local folders with the threaded scheduler (``SEGMENT_LIMIT`` made small);
a real SIGKILL of a writer process after its segments are written and before its
commit leaves the array as it was, and gc removes the orphan segments."""

from __future__ import annotations

import os
import pickle

import dask
import dask.array as da
import numpy as np
import pytest
from dask.core import get_dependencies

import arrayds
from arrayds.nodes import commit
from arrayds.nodes import history as log
from arrayds.storage import get_store
from arrayds.tools.gc import collect_garbage
from arrayds.verify import verify
from dataset.test_crash import run_child

LIMIT = 8


@pytest.fixture(autouse=True)
def _small_segments(monkeypatch):
    monkeypatch.setattr(log, "SEGMENT_LIMIT", LIMIT)


def _head(url: str) -> dict:
    return commit.read(get_store(url), "").head


def test_the_commit_receives_segment_references_not_entries(tmp_path, task_results):
    url = str(tmp_path / "a")
    n = 10 * LIMIT + 3
    d = arrayds.to_arrayrecord(da.arange(n, chunks=1), url, shard_size=1, compute=False)
    graph = dict(d.__dask_graph__())
    deps = get_dependencies(graph, d.key)
    assert len(deps) == 11 and all(str(k).startswith("arrayds-segment-") for k in deps)
    with task_results() as seen, dask.config.set(scheduler="threads"):
        a = d.compute()
    refs = [seen.got[k] for k in sorted(deps, key=lambda k: int(str(k).rsplit("-", 1)[1]))]
    assert [r["count"] for r in refs] == [LIMIT] * 10 + [3]
    assert all(set(r) == {"path", "count", "records", "box"} for r in refs)  # no entries
    stored = _head(url)["shards"]
    assert stored == {"segments": refs, "tail": []}
    assert refs[1]["box"] == [[LIMIT], [2 * LIMIT]]
    np.testing.assert_array_equal(a[...], np.arange(n))
    log.clear_cache()
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.arange(n))
    assert verify(url).ok


def test_short_writes_keep_one_commit_task_over_the_shards(tmp_path):
    d = arrayds.to_arrayrecord(
        da.arange(LIMIT, chunks=1), str(tmp_path / "a"), shard_size=1, compute=False
    )
    deps = get_dependencies(dict(d.__dask_graph__()), d.key)
    assert len(deps) == LIMIT and all(str(k).startswith("arrayds-shard-") for k in deps)


def test_long_2d_write_and_long_append_read_back_exactly(tmp_path):
    url = str(tmp_path / "a")
    x = np.arange(30 * 6, dtype="i4").reshape(30, 6)
    arrayds.to_arrayrecord(da.from_array(x, chunks=(1, 2)), url, shard_size=1)
    assert len(_head(url)["shards"]["segments"]) == 12  # 90 shards
    y = np.arange(40 * 6, dtype="i4").reshape(40, 6) * -1
    arrayds.to_arrayrecord(da.from_array(y, chunks=(2, 3)), url, shard_size=1, mode="a")
    log.clear_cache()
    got = arrayds.open_array(url)
    assert got.shape == (70, 6)
    np.testing.assert_array_equal(got[...], np.concatenate([x, y]))
    assert got.chunks[0] == (1,) * 30 + (2,) * 20
    assert verify(url).ok


def test_a_long_append_that_lost_the_race_lands_after_the_other_rows(tmp_path):
    url = str(tmp_path / "a")
    arrayds.to_arrayrecord(da.arange(20, chunks=1), url, shard_size=1)
    pending = arrayds.to_arrayrecord(
        da.arange(100, 140, chunks=1), url, shard_size=1, mode="a", compute=False
    )
    arrayds.to_arrayrecord(da.arange(50, 53, chunks=1), url, mode="a")
    planned = set(os.listdir(os.path.join(url, log.LOG_DIR)))
    with dask.config.set(scheduler="threads"):
        pending.compute()
    log.clear_cache()
    want = np.concatenate([np.arange(20), np.arange(50, 53), np.arange(100, 140)])
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)
    stored = _head(url)["shards"]["segments"]
    moved = stored[-5:]  # the appended entries, moved 3 chunks on: written anew
    assert [r["box"] for r in moved][0] == [[23], [23 + LIMIT]]
    assert not {r["path"].rsplit("/", 1)[1] for r in moved} & planned
    assert verify(url).ok


def test_a_region_write_over_a_long_list(tmp_path):
    url = str(tmp_path / "a")
    n = 6 * LIMIT
    arrayds.to_arrayrecord(da.arange(n, chunks=1), url, shard_size=1)
    arrayds.to_arrayrecord(
        da.full(2 * LIMIT, -1, chunks=1), url, mode="r+", region=slice(LIMIT, 3 * LIMIT)
    )
    want = np.arange(n)
    want[LIMIT : 3 * LIMIT] = -1
    log.clear_cache()
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)
    assert verify(url).ok


def _segment_paths(url: str) -> list[str]:
    """The leaf segments the head names, in order (through its indexes)."""
    lg = log.ShardLog(get_store(url), "", _head(url)["shards"], "a")
    return [lg.segment_ref(k)["path"] for k in range(lg.nsegments)]


def test_a_long_region_write_rewrites_only_the_segments_it_meets(tmp_path):
    url = str(tmp_path / "a")
    n = 12 * LIMIT
    arrayds.to_arrayrecord(da.arange(n, chunks=1), url, shard_size=1)
    before = _segment_paths(url)
    assert len(before) == 12
    # chunks [2L + 3, 5L + 3): segments 2 and 5 keep part of their entries, 3 and 4 none
    lo, hi = 2 * LIMIT + 3, 5 * LIMIT + 3
    d = arrayds.to_arrayrecord(
        -da.arange(lo, hi, chunks=1), url, mode="r+", region=slice(lo, hi), shard_size=1,
        compute=False,
    )  # fmt: skip
    graph = dict(d.__dask_graph__())
    stored = os.listdir(os.path.join(url, "c"))
    assert not any(p.encode() in pickle.dumps(graph) for p in stored)  # no stored entry
    assert all(str(k).startswith("arrayds-segment-") for k in get_dependencies(graph, d.key))
    with dask.config.set(scheduler="threads"):
        d.compute()
    after = _segment_paths(url)
    assert after[:2] == before[:2] and after[4:10] == before[6:]  # untouched, not rewritten
    assert len(after) == 13 and not {*after[2:4], *after[10:]} & set(before)  # 2, 5; new
    lg = log.ShardLog(get_store(url), "", _head(url)["shards"], "a")
    assert [len(lg.load(k)) for k in (2, 3)] == [3, LIMIT - 3]  # what segments 2, 5 keep
    want = np.arange(n)
    want[lo:hi] *= -1
    log.clear_cache()
    got = arrayds.open_array(url)
    np.testing.assert_array_equal(got[...], want)
    assert len(got.manifest.shards) == n  # the hidden entries dropped
    assert verify(url).ok


@pytest.mark.parametrize(("old", "new", "hidden"), [(1, 2, True), (2, 1, False), (2, 2, True)])
def test_a_region_write_hides_the_entries_one_of_its_boxes_holds_whole(tmp_path, old, new, hidden):
    """Old shards of ``old`` chunks, a region write of shards of ``new`` chunks: an
    old entry goes from the list only if one new box holds it whole."""
    url = str(tmp_path / "a")
    n = 8 * LIMIT
    x = np.arange(n, dtype="i8")
    arrayds.to_arrayrecord(da.from_array(x, chunks=1), url, shard_size=8 * old)
    lo, hi = 2 * LIMIT, 6 * LIMIT
    arrayds.to_arrayrecord(
        da.from_array(-x[lo:hi], chunks=1), url, mode="r+", region=slice(lo, hi),
        shard_size=8 * new,
    )  # fmt: skip
    x[lo:hi] *= -1
    log.clear_cache()
    got = arrayds.open_array(url)
    np.testing.assert_array_equal(got[...], x)
    kept_old = (n - (hi - lo)) // old if hidden else n // old
    assert len(got.manifest.shards) == kept_old + (hi - lo) // new
    assert verify(url).ok


def test_mode_w_over_a_long_array_commits_segments_and_removes_the_old_files(tmp_path):
    url = str(tmp_path / "a")
    arrayds.to_arrayrecord(da.arange(10 * LIMIT, chunks=1), url, shard_size=1)
    old_files = set(os.listdir(os.path.join(url, "c")))
    d = arrayds.to_arrayrecord(
        da.arange(3 * LIMIT, dtype="i2", chunks=1) * 2, url, mode="w", shard_size=1,
        compute=False,
    )  # fmt: skip
    graph = dict(d.__dask_graph__())
    assert all(str(k).startswith("arrayds-segment-") for k in get_dependencies(graph, d.key))
    with dask.config.set(scheduler="threads"):
        d.compute()
    log.clear_cache()
    got = arrayds.open_array(url)
    assert got.dtype == np.dtype("i2")
    np.testing.assert_array_equal(got[...], np.arange(3 * LIMIT) * 2)
    assert not set(os.listdir(os.path.join(url, "c"))) & old_files  # every replaced file gone
    assert len(_segment_paths(url)) == 3
    assert len(arrayds.versions(url)) == 1  # a replaced node starts a new history
    assert verify(url).ok


CHILD = f"""
import sys, threading
import dask, dask.array as da
import arrayds
from arrayds.kinds.array import dask as ad
from arrayds.nodes import history
history.SEGMENT_LIMIT = {LIMIT}

def stop_at_commit(job, refs):
    print(len(refs), flush=True)  # every segment written: now kill me
    threading.Event().wait()

ad._commit_segments_task = stop_at_commit
mode = sys.argv[2]
region = slice(0, 100) if mode == "r+" else None
with dask.config.set(scheduler="threads"):
    arrayds.to_arrayrecord(
        da.arange(100, 200, chunks=1), sys.argv[1], shard_size=1, mode=mode, region=region
    )
"""


@pytest.mark.parametrize("mode", ["a", "r+", "w"])
def test_killed_after_writing_segments_before_the_commit(tmp_path, mode):
    url = str(tmp_path / "a")
    n = 100 if mode == "r+" else 3 * LIMIT
    arrayds.to_arrayrecord(da.arange(n, chunks=1), url, shard_size=1)
    head = open(os.path.join(url, "arrayds.json"), "rb").read()
    log_dir = os.path.join(url, log.LOG_DIR)
    named = set(os.listdir(log_dir))
    proc = run_child(CHILD, url, mode)
    try:
        line = proc.stdout.readline()
        assert line.strip() == str(-(-100 // LIMIT)), proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    orphans = set(os.listdir(log_dir)) - named
    assert len(orphans) == -(-100 // LIMIT)  # written, never named
    assert open(os.path.join(url, "arrayds.json"), "rb").read() == head
    log.clear_cache()
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.arange(n))
    assert verify(url).ok
    # the killed write's pending marker keeps its segments and shards from gc, however
    # old they are, until the marker is taken for a crashed write's
    kept = collect_garbage(url, min_age=0)
    assert not {p for p in kept.removed if log.LOG_DIR in p or p.endswith(".array_record")}
    report = collect_garbage(url, min_age=0, max_write_age=0)
    assert {os.path.basename(p) for p in report.removed if log.LOG_DIR in p} == orphans
    assert len([p for p in report.removed if p.endswith(".array_record")]) == 100  # its shards
    assert set(os.listdir(log_dir)) == named
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.arange(n))


@pytest.mark.parametrize("mode", ["w", "a", "r+"])
def test_a_long_committed_write_does_not_compute_twice(tmp_path, mode):
    url = str(tmp_path / "a")
    arrayds.to_arrayrecord(da.arange(4 * LIMIT, chunks=1), url, shard_size=1)
    kw = {"region": slice(LIMIT, 3 * LIMIT)} if mode == "r+" else {}
    d = arrayds.to_arrayrecord(
        -da.arange(2 * LIMIT, chunks=1), url, mode=mode, shard_size=1, compute=False, **kw
    )
    with dask.config.set(scheduler="threads"):
        d.compute()
    head = open(os.path.join(url, "arrayds.json"), "rb").read()
    log.clear_cache()
    with pytest.raises(RuntimeError, match="already committed"):
        d.compute()
    assert open(os.path.join(url, "arrayds.json"), "rb").read() == head


def test_stored_positions_refuse_a_derived_list():
    """Positions name entries of the list as stored: a list derived from it (entries
    appended or hidden) has none to give."""
    from arrayds.kinds.array.grid import ChunkGrid
    from arrayds.kinds.array.manifest import ShardEntry, ShardList

    grid = ChunkGrid.from_chunks(((1, 1),))
    lst = ShardList([{"path": "c/a", "start": [0], "stop": [1]}], grid, "doc")
    assert lst.stored_positions([0], [0], lambda cols: cols.starts[:, 0] == 0) == {"": [0]}
    more = lst.extended([ShardEntry("c/b", (1,), (2,))])
    with pytest.raises(ValueError, match="derived shard list"):
        more.stored_positions([0], [1], lambda cols: cols.starts[:, 0] >= 0)
