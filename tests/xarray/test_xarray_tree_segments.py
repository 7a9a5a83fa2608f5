"""DataTree writes of many chunks commit segment references, not entries (docs/spec.md
10.4, 14.4.1): the tasks that wrote a variable's shards write its manifest segments,
one copy in the member and one in each group from the member's up to the tree's root
(the root's snapshot lists every subgroup with its members' lists: each node stores
its copy in its own folder), and the commit task receives only their references. The
root's head then holds a nested member's list as a shard log of segments in the
root's folder, read lazily, checked by ``verify`` and kept by gc. Real writes on local
folders, ``SEGMENT_LIMIT`` made small and the graphs run in this process."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import arrayds
from arrayds.errors import CommitConflictError
from arrayds.nodes import history as log
from arrayds.nodes.commit import read
from arrayds.storage import new_store
from arrayds.tools.gc import collect_garbage
from arrayds.tools.verify import verify

LIMIT = 8
N = 3 * LIMIT + 5
NESTED = ("snapshot", "members", "a", "snapshot", "members", "b", "snapshot", "members", "v")


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(log, "SEGMENT_LIMIT", LIMIT)
    with dask.config.set(scheduler="sync"):
        yield


def _tree(n: int = N, scale: int = 1) -> xr.DataTree:
    """A root dataset, a group ``a`` and below it ``a/b`` with a variable of ``n``
    one-element chunks (``n`` shards with ``shard_size=1``)."""
    v = da.arange(n, chunks=1) * scale
    return xr.DataTree.from_dict(
        {
            "/": xr.Dataset({"r": ("y", [1, 2])}, attrs={"title": "t"}),
            "/a": xr.Dataset({"s": ("z", [3.0])}),
            "/a/b": xr.Dataset({"v": ("x", v)}, coords={"x": np.arange(n)}),
        }
    )


def _head(url: str, node: str = "") -> dict:
    with open(os.path.join(url, node, "arrayds.json")) as f:
        return json.load(f)


def _at(head: dict, path: tuple[str, ...]) -> dict:
    for p in path:
        head = head[p]
    return head


def _logs(url: str, node: str) -> set[str]:
    return set(os.listdir(os.path.join(url, node, "_arrayds", "log")))


def _check(url: str, n: int = N, scale: int = 1) -> None:
    back = xr.open_datatree(url, engine="arrayds")
    np.testing.assert_array_equal(back["a/b"].v.values, np.arange(n) * scale)
    assert back["a"].s.values.tolist() == [3.0] and back.attrs["title"] == "t"
    assert verify(url, progress=False).ok


def test_a_tree_commits_segment_references_in_every_node(tmp_path, small):
    url = str(tmp_path / "t")
    delayed = arrayds.to_arrayrecord(_tree(), url, shard_size=1, compute=False)
    graph = dict(delayed.__dask_graph__())
    inputs = [str(k) for k in graph[delayed.key].dependencies]
    # v and its coordinate x: a reference per LIMIT shards; nothing else is long
    assert len([k for k in inputs if "segment" in k]) == 2 * -(-N // LIMIT)
    # ... and no shard task of group a/b (the third: keys end "-<group>-<variable>-<i>")
    shards = [k.split("-")[-3] for k in inputs if "-shard-" in k]
    assert len(shards) == len(inputs) - 2 * -(-N // LIMIT) and "2" not in shards
    delayed.compute()
    _check(url)
    # the root's copy of the nested list is a log of segments in the root's folder,
    # the same entries as every other node's copy, each in its own folder
    nested = _at(_head(url), (*NESTED, "shards"))
    assert set(nested) == {"segments", "tail"} and nested["tail"] == []
    assert {r["path"].rsplit("/", 1)[1] for r in nested["segments"]} <= _logs(url, "")
    store = new_store(url)
    whole = log.resolve(store, "", _head(url), "t")
    entries = _at(whole, (*NESTED, "shards"))
    assert len(entries) == N
    for node, path in (("a", NESTED[3:]), ("a/b", NESTED[6:]), ("a/b/v", ())):
        own = log.resolve(store, node, _head(url, node), node)
        assert list(_at(own, (*path, "shards"))) == list(entries), node
    # the head stays small: references, not entries
    assert os.path.getsize(os.path.join(url, "arrayds.json")) < 6000
    # gc keeps everything the heads name (the nested lists' segments included)
    assert collect_garbage(url, min_age=0).removed == []
    _check(url)


def test_a_crash_after_the_commit_reads_the_nested_lists_from_the_root(
    tmp_path, small, no_roll_forward
):
    url = str(tmp_path / "t")
    with pytest.raises(no_roll_forward):
        arrayds.to_arrayrecord(_tree(), url, shard_size=1)
    assert read(new_store(url), "a/b").raw is None  # only the root's head was written
    _check(url)  # every level read through the root's snapshot
    ds = xr.open_dataset(url, engine="arrayds", group="a/b")
    np.testing.assert_array_equal(ds.v.values, np.arange(N))
    # gc keeps the segments the root's nested lists name (their own copies are not
    # committed: their nodes have no head yet)
    collect_garbage(url, min_age=0)
    _check(url)
    # an append to the subgroup commits on top of the pending roll forward
    more = xr.Dataset(
        {"v": ("x", da.arange(N, N + 4, chunks=1))}, coords={"x": np.arange(N, N + 4)}
    )
    arrayds.to_arrayrecord(more, url, "a/b", mode="a", append_dim="x", shard_size=1)
    back = xr.open_datatree(url, engine="arrayds")
    np.testing.assert_array_equal(back["a/b"].v.values, np.arange(N + 4))
    assert verify(url, progress=False).ok


def test_a_dataset_write_to_the_root_keeps_the_nested_lists_as_stored(tmp_path, small):
    url = str(tmp_path / "t")
    arrayds.to_arrayrecord(_tree(), url, shard_size=1)
    nested = _at(_head(url), (*NESTED, "shards"))
    log.clear_cache()
    arrayds.to_arrayrecord(xr.Dataset({"w": ("y", [0, 1])}), url, mode="a")
    assert len(log._cache) == 0  # no segment was read
    assert _at(_head(url), (*NESTED, "shards")) == nested  # the same references
    log.clear_cache()
    arrayds.open(url, mode="r+").attrs["title"] = "t"  # a group attribute change too
    assert len(log._cache) == 0
    assert _at(_head(url), (*NESTED, "shards")) == nested
    _check(url)
    assert xr.open_datatree(url, engine="arrayds").w.values.tolist() == [0, 1]


def test_mode_w_replaces_a_long_tree(tmp_path, small):
    url = str(tmp_path / "t")
    arrayds.to_arrayrecord(_tree(), url, shard_size=1)
    old = set(glob.glob(os.path.join(url, "a", "b", "v", "c", "*")))
    arrayds.to_arrayrecord(_tree(N + 3, scale=2), url, shard_size=1, mode="w")
    _check(url, N + 3, 2)
    new = set(glob.glob(os.path.join(url, "a", "b", "v", "c", "*")))
    assert len(new) == N + 3 and not old & new  # the replaced shard files are gone
    assert collect_garbage(url, min_age=0, older_than=0).removed == []
    _check(url, N + 3, 2)


def test_a_refused_tree_commit_removes_its_segments(tmp_path, small):
    url = str(tmp_path / "t")
    arrayds.to_arrayrecord(_tree(), url, shard_size=1)
    before = {n: _logs(url, n) for n in ("", "a", "a/b", "a/b/v")}
    d = arrayds.to_arrayrecord(_tree(N, scale=3), url, shard_size=1, mode="w", compute=False)
    arrayds.to_arrayrecord(xr.Dataset({"e": ("q", [1])}), url, "a", mode="a")  # a conflict
    with pytest.raises(CommitConflictError):
        d.compute()
    for n, logs in before.items():  # the refused write's segments are gone in every node
        assert _logs(url, n) == logs, n
    _check(url)


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    import dask, dask.array as da, numpy as np, xarray as xr
    import arrayds
    from arrayds.nodes import commit

    def die(*a, **k):  # the segments are written; the commit is not
        os.kill(os.getpid(), signal.SIGKILL)

    commit._commit = die
    n = int(sys.argv[2])
    dt = xr.DataTree.from_dict({"/": xr.Dataset(), "/a/b": xr.Dataset(
        {"v": ("x", da.arange(n, chunks=1) * 5)})})
    with dask.config.set(scheduler="synchronous"):
        arrayds.to_arrayrecord(dt, sys.argv[1], mode="w", shard_size=1)
    """
)


def test_sigkill_between_the_segments_and_the_commit(tmp_path):
    url = str(tmp_path / "t")
    n = log.SEGMENT_LIMIT + 9
    dt = xr.DataTree.from_dict(
        {"/": xr.Dataset(), "/a/b": xr.Dataset({"v": ("x", da.arange(n, chunks=1))})}
    )
    arrayds.to_arrayrecord(dt, url, shard_size=1)
    before = {n_: _logs(url, n_) for n_ in ("", "a/b", "a/b/v")}
    r = subprocess.run(
        [sys.executable, "-c", KILLED, url, str(n)], capture_output=True, timeout=300
    )
    assert r.returncode == -9, r.stderr.decode()[-2000:]
    for node, logs in before.items():  # the killed write's segments are there
        assert len(_logs(url, node)) > len(logs), node
    back = xr.open_datatree(url, engine="arrayds")
    np.testing.assert_array_equal(back["a/b"].v.values, np.arange(n))  # unchanged
    # once its marker has expired, gc removes exactly the killed write's files
    report = collect_garbage(url, min_age=0, max_write_age=0)
    for node, logs in before.items():
        assert _logs(url, node) == logs, node
    assert report.removed and verify(url, progress=False).ok
    np.testing.assert_array_equal(
        xr.open_datatree(url, engine="arrayds")["a/b"].v.values, np.arange(n)
    )


def _fixtures():
    path = Path(__file__).resolve().parents[1] / "data" / "datasets" / "make_fixtures.py"
    spec = importlib.util.spec_from_file_location("arrayds_make_fixtures_tree", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, path.parent / "tree"


def test_the_tree_fixture_pins_nested_lists_in_the_roots_head(tmp_path):
    """tests/data/datasets/tree (make_fixtures.py ``tree``): a DataTree written, then
    replaced by a second whose roll forward never ran. The root's head (format
    version 3) holds ``a/b/v``'s list as an index and a segment in the root's folder;
    every other node's own manifest is the first tree's; readers see the second tree,
    ``verify`` checks it, gc keeps every file a head names, and the next tree write
    rolls it forward."""
    fx, data = _fixtures()
    url = str(shutil.copytree(data, tmp_path / "tree"))
    store = new_store(url)
    head = read(store, "").head
    assert head["format_version"] == log.INDEXED_VERSION
    nested = _at(head, (*NESTED, "shards"))
    assert ["refs" in r for r in nested["segments"]] == [True, False]
    assert all(store.exists(p) for p in log.log_files(store, "", head))
    own = read(store, "a/b/v").raw
    assert own["commit"] != _at(head, NESTED)["commit"]  # the roll forward is pending
    back = xr.open_datatree(url, engine="arrayds")
    np.testing.assert_array_equal(back["a/b"].v.values, fx.tree_value(2))
    assert back.attrs["title"] == "tree 2" and back["a"].attrs["level"] == 1
    assert verify(url, progress=False).ok
    collect_garbage(url, min_age=0)
    np.testing.assert_array_equal(
        xr.open_dataset(url, engine="arrayds", group="a/b").v.values, fx.tree_value(2)
    )
    tree3 = back.copy()
    tree3["a/b"] = back["a/b"].to_dataset(inherit=False) * 3
    arrayds.to_arrayrecord(tree3, url, mode="w")
    assert read(store, "a/b/v").raw["commit"] == read(store, "").raw["commit"]
    again = xr.open_datatree(url, engine="arrayds")
    np.testing.assert_array_equal(again["a/b"].v.values, fx.tree_value(6))
