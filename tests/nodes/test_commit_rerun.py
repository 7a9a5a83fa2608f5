"""A commit run again after it landed (a dask commit task re-run because its worker
was lost before it reported) commits nothing twice, whatever other writers committed
after it, and a failed commit never removes a file the node's head names: shard
files, and the segment and index files of its lists (docs/spec.md 14.7). Real
commits on local folders; the long list is stored in segments (``SEGMENT_LIMIT``
made small)."""

from __future__ import annotations

import os

import dask
import dask.array as da
import numpy as np
import pytest

import arrayds
from arrayds.errors import CommitConflictError
from arrayds.nodes import commit, pending
from arrayds.nodes import history as log
from arrayds.nodes.history import Extend
from arrayds.nodes.names import new_write_id
from arrayds.storage import get_store
from arrayds.verify import verify

LIMIT = 8


@pytest.fixture(autouse=True)
def small(monkeypatch):
    monkeypatch.setattr(log, "SEGMENT_LIMIT", LIMIT)


def _paths(store, node):
    return [e["path"] for e in commit.read(store, node).raw["shards"]]


def _extend(path):
    return lambda base: Extend({}, [{"path": path}])


def test_a_commit_run_again_after_another_commit_commits_nothing_twice(tmp_path):
    store = get_store(str(tmp_path / "n"))
    commit.commit(store, "", lambda b: {"kind": "records", "shards": []}, write_id=new_write_id())
    mine = new_write_id()
    commit.commit(store, "", _extend("c/mine"), write_id=mine)
    commit.commit(store, "", _extend("c/other"), write_id=new_write_id())
    again = commit.commit(store, "", _extend("c/mine"), write_id=mine)  # the re-run
    assert _paths(store, "") == ["c/mine", "c/other"]
    assert again["commit"] != mine  # the current manifest, as it is
    for k in range(commit.RECENT_COMMITS - 2):  # still recognised 63 commits later
        commit.commit(store, "", _extend(f"c/{k}"), write_id=new_write_id())
    commit.commit(store, "", _extend("c/mine"), write_id=mine)
    assert _paths(store, "").count("c/mine") == 1


def _files(root):
    return {os.path.relpath(os.path.join(d, f), root) for d, _s, fs in os.walk(root) for f in fs}


def _number(key) -> int:
    return int(str(key).rsplit("-", 1)[1])


def test_a_landed_array_commit_rerun_after_an_append_keeps_every_file(tmp_path, task_results):
    """The commit task of a long dask append (segment references) landed; another
    append committed; the task runs again: its check fails (the array moved), and
    before, its clean-up removed the segments the head names."""
    url = str(tmp_path / "a")
    arrayds.to_arrayrecord(da.arange(5, chunks=1), url, shard_size=1)
    n = 5 * LIMIT + 3
    d = arrayds.to_arrayrecord(da.arange(5, 5 + n, chunks=1), url, mode="a", shard_size=1,
                               compute=False)  # fmt: skip
    graph = dict(d.__dask_graph__())
    task = graph[d.key]  # (commit function, its job, [segment task keys])
    func, job, keys = task.func, task.args[0], sorted(task.dependencies, key=_number)
    with task_results() as seen, dask.config.set(scheduler="threads"):
        d.compute()
    arrayds.open_array(url, mode="r+").append(np.array([-1]))
    files = _files(url)
    want = np.concatenate([np.arange(5 + n), [-1]])
    func(job, [seen.got[k] for k in keys])  # the re-run: nothing twice, no error
    log.clear_cache()
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)
    assert files <= _files(url) and verify(url).ok


def test_a_failed_commit_keeps_the_segments_the_head_names(tmp_path):
    """A write that lists, among the files to remove if it fails, segment files the
    node's head names (a re-run more than RECENT_COMMITS commits after it landed)
    removes none of them."""
    url = str(tmp_path / "a")
    arrayds.to_arrayrecord(da.arange(5 * LIMIT, chunks=1), url, shard_size=1)
    store = get_store(url)
    head = commit.read(store, "").head
    named = sorted(log.log_files(store, "", head))
    assert named  # the list is in segments
    files = _files(url)

    def refuse(base):
        raise CommitConflictError("the array moved")

    with pytest.raises(CommitConflictError):
        commit.commit(store, "", _extend("c/x"), write_id=new_write_id(), check=refuse,
                      written=[*named, *_paths(store, "")[:3]])  # fmt: skip
    assert files == _files(url)
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.arange(5 * LIMIT))
    assert verify(url).ok


def test_a_write_refused_once_commits_nothing_when_run_again(tmp_path):
    """A registered write's commit is refused and removes its files (and its marker);
    the task runs again (dask's ``retries``) when nothing refuses it any more: it must
    not commit a manifest naming the files it removed."""
    store = get_store(str(tmp_path / "n"))
    commit.commit(store, "", lambda b: {"kind": "records", "shards": []}, write_id=new_write_id())
    mine = pending.begin(store, "")
    path = f"c/{mine}-0.array_record"
    store.put(path, b"shard")
    refuse = [True]

    def check(base):
        if refuse[0]:
            raise CommitConflictError("the node moved")

    def run():
        return commit.commit(store, "", _extend(path), write_id=mine, check=check,
                             written=[path], registered=True)  # fmt: skip

    with pytest.raises(CommitConflictError, match="moved"):
        run()
    assert not store.exists(path)  # the refused write removed its file
    refuse[0] = False
    with pytest.raises(CommitConflictError, match=f"write {mine} ended before this commit"):
        run()
    assert _paths(store, "") == []


def test_a_rerun_more_than_recent_commits_after_it_landed_commits_nothing(tmp_path):
    """The head's ``recent`` list no longer names the write; its ended marker and the
    node's versions tell it landed."""
    store = get_store(str(tmp_path / "n"))
    commit.commit(store, "", lambda b: {"kind": "records", "shards": []}, write_id=new_write_id())
    mine = pending.begin(store, "")
    commit.commit(store, "", _extend("c/mine"), write_id=mine, registered=True)
    for k in range(commit.RECENT_COMMITS + 1):
        commit.commit(store, "", _extend(f"c/{k}"), write_id=new_write_id())
    assert mine not in commit.recent_commits(commit.read(store, "").head)
    again = commit.commit(store, "", _extend("c/mine"), write_id=mine, registered=True)
    assert _paths(store, "").count("c/mine") == 1 and again["commit"] != mine
