"""Long dask writes (more than ``SEGMENT_LIMIT`` shards, docs/spec.md 14.4.1): the
workers write the shards' manifest entries as segments and the commit task receives
only their references, so its memory does not grow with the number of chunks. Real
writes on local folders with the threaded scheduler (``SEGMENT_LIMIT`` made small);
a real SIGKILL of a writer process after its segments are written and before its
commit leaves the array as it was, and gc removes the orphan segments."""

from __future__ import annotations

import os

import dask
import dask.array as da
import numpy as np
import pytest
from dask.callbacks import Callback
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


class _Results(Callback):
    """Every task's result, by key."""

    def __init__(self) -> None:
        super().__init__()
        self.got: dict = {}

    def _posttask(self, key, result, dsk, state, id):  # noqa: A002 - dask's names
        self.got[key] = result


def test_the_commit_receives_segment_references_not_entries(tmp_path):
    url = str(tmp_path / "a")
    n = 10 * LIMIT + 3
    d = arrayds.to_arrayrecord(da.arange(n, chunks=1), url, shard_size=1, compute=False)
    graph = dict(d.__dask_graph__())
    deps = get_dependencies(graph, d.key)
    assert len(deps) == 11 and all(str(k).startswith("arrayds-segment-") for k in deps)
    with _Results() as seen, dask.config.set(scheduler="threads"):
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
with dask.config.set(scheduler="threads"):
    arrayds.to_arrayrecord(da.arange(100, 200, chunks=1), sys.argv[1], shard_size=1, mode="a")
"""


def test_killed_after_writing_segments_before_the_commit(tmp_path):
    url = str(tmp_path / "a")
    arrayds.to_arrayrecord(da.arange(3 * LIMIT, chunks=1), url, shard_size=1)
    head = open(os.path.join(url, "arrayds.json"), "rb").read()
    log_dir = os.path.join(url, log.LOG_DIR)
    named = set(os.listdir(log_dir))
    proc = run_child(CHILD, url)
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
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.arange(3 * LIMIT))
    assert verify(url).ok
    # the killed write's pending marker keeps its segments and shards from gc, however
    # old they are, until the marker is taken for a crashed write's
    kept = collect_garbage(url, min_age=0)
    assert not {p for p in kept.removed if log.LOG_DIR in p or p.endswith(".array_record")}
    report = collect_garbage(url, min_age=0, max_write_age=0)
    assert {os.path.basename(p) for p in report.removed if log.LOG_DIR in p} == orphans
    assert len([p for p in report.removed if p.endswith(".array_record")]) == 100  # its shards
    assert set(os.listdir(log_dir)) == named
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.arange(3 * LIMIT))
