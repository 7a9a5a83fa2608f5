"""Writing a DataTree in one atomic commit (``arrayds.to_arrayrecord(dt, url)``,
``dt.arrayds.to_arrayrecord(url)``; docs/spec.md section 10.4), read back by
``xr.open_datatree`` / ``xr.open_groups``. Modelled on xarray's zarr DataTree
tests: the same tree written through zarr opens identical."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import arrayds
import arrayds.xarray.tree as xtree
from arrayds.errors import CommitConflictError
from arrayds.kinds.array.manifest import ArrayManifest
from arrayds.nodes.commit import read
from arrayds.storage import new_store

DataTree = pytest.importorskip("xarray").DataTree


def tree(scale: float = 1.0) -> xr.DataTree:
    """Three levels, attrs everywhere, a coordinate inherited by the children, an
    empty group, a dask-backed variable, strings and datetimes."""
    root = xr.Dataset(
        {"a": ("y", np.array([6, 7, 8]) * int(scale))},
        coords={"x": [10, 20], "y": [1, 2, 3]},
        attrs={"title": "root", "version": 2},
    )
    set1 = xr.Dataset(
        {
            "b": (("x", "time"), da.from_array(np.arange(4.0).reshape(2, 2) * scale, chunks=1)),
            "c": ("time", [0.5, np.nan]),
        },
        coords={"time": pd.date_range("2000-01-01", periods=2)},
        attrs={"level": 1},
    )
    set2 = xr.Dataset(
        {"d": ("x", [2.0 * scale, 3.0]), "s": ("x", np.array(["p", "q"], dtype=object))},
        attrs={"level": 2, "nested": {"k": [1, 2]}},
    )
    empty = xr.Dataset(attrs={"note": "empty group"})
    return DataTree.from_dict({"/": root, "/set1": set1, "/set1/set2": set2, "/empty": empty})


def other_tree() -> xr.DataTree:
    return DataTree.from_dict(
        {"/": xr.Dataset({"z": ("n", [1, 2])}, attrs={"title": "other"}), "/set1": xr.Dataset()}
    )


def test_round_trip_identical_and_like_zarr(tmp_path):
    dt = tree()
    url = str(tmp_path / "t.ads")
    g = arrayds.to_arrayrecord(dt, url)
    assert isinstance(g, arrayds.Group)
    back = xr.open_datatree(url, engine="arrayds")
    xr.testing.assert_identical(back, dt)
    # inherited coordinates come from the parent, not from a stored copy
    assert "x" in back["set1/set2"].coords and "x" not in back["set1/set2"].to_dataset(False)
    assert back["set1/set2"].attrs == {"level": 2, "nested": {"k": [1, 2]}}
    assert back["empty"].attrs == {"note": "empty group"} and not back["empty"].data_vars
    lazy = xr.open_datatree(url, engine="arrayds", chunks={})
    assert lazy["set1"].b.chunks == ((1, 1), (1, 1))  # the dask blocks became the chunks
    zst = str(tmp_path / "t.zarr")
    dt.to_zarr(zst, consolidated=False)
    xr.testing.assert_identical(back, xr.open_datatree(zst, engine="zarr", consolidated=False))
    # the roll forward brought every own manifest up to date: node-by-node readers agree
    st = new_store(url)
    for path in ("set1", "set1/b", "set1/set2", "set1/set2/d", "empty"):
        own = read(st, path).raw
        assert own is not None and own["commit"] == read(st, "").raw["commit"]


def test_accessor_open_groups_and_subtree(tmp_path):
    dt = tree()
    url = str(tmp_path / "t.ads")
    dt.arrayds.to_arrayrecord(url)
    groups = xr.open_groups(url, engine="arrayds")
    assert sorted(groups) == ["/", "/empty", "/set1", "/set1/set2"]
    for path, ds in groups.items():
        xr.testing.assert_identical(ds, dt[path].to_dataset(inherit=False))
    sub = xr.open_datatree(url, engine="arrayds", group="set1")
    xr.testing.assert_identical(sub["set2"].to_dataset(False), dt["set1/set2"].to_dataset(False))


def test_write_at_a_component_and_compute_false(tmp_path):
    dt = tree()
    url = str(tmp_path / "t.ads")
    d = arrayds.to_arrayrecord(dt, url, "inner/tree", compute=False)
    with pytest.raises(FileNotFoundError):
        xr.open_datatree(url, engine="arrayds", group="inner/tree")
    d.compute()
    back = xr.open_datatree(url, engine="arrayds", group="inner/tree")
    xr.testing.assert_identical(back, dt)


def test_w_minus_refuses_and_w_replaces_the_whole_tree(tmp_path):
    url = str(tmp_path / "t.ads")
    arrayds.to_arrayrecord(tree(), url)
    with pytest.raises(FileExistsError, match="mode 'w'"):
        arrayds.to_arrayrecord(other_tree(), url)
    with pytest.raises(FileExistsError):
        other_tree().arrayds.to_arrayrecord(url)
    xr.testing.assert_identical(xr.open_datatree(url, engine="arrayds"), tree())
    arrayds.to_arrayrecord(other_tree(), url, mode="w")
    xr.testing.assert_identical(xr.open_datatree(url, engine="arrayds"), other_tree())
    # nodes not in the new tree are gone after the commit
    set1 = tmp_path / "t.ads" / "set1"
    # its history is gone: at most the empty folders of _arrayds/ stay (the markers of
    # writes under way live there: arrayds.nodes.pending)
    assert sorted(n for n in os.listdir(set1) if n != "_arrayds") == ["arrayds.json"]
    assert [f for _d, _s, fs in os.walk(set1 / "_arrayds") for f in fs] == []
    assert not (tmp_path / "t.ads" / "empty").exists()
    assert not (tmp_path / "t.ads" / "a").exists()
    # and replacing again with the first tree gives it back exactly
    arrayds.to_arrayrecord(tree(2.0), url, mode="w")
    xr.testing.assert_identical(xr.open_datatree(url, engine="arrayds"), tree(2.0))


def test_append_modes_and_bad_options_are_refused(tmp_path):
    url = str(tmp_path / "t.ads")
    arrayds.to_arrayrecord(tree(), url)
    for kw in (
        {"mode": "a"},
        {"mode": "r+"},
        {"mode": "a", "append_dim": "x"},
        {"mode": "a", "compact": False},
        {"mode": "a", "compact": True},
    ):
        with pytest.raises(NotImplementedError, match=r"to_dataset\(inherit=False\)"):
            arrayds.to_arrayrecord(tree(), url, **kw)
    with pytest.raises(ValueError, match="mode must be"):
        arrayds.to_arrayrecord(tree(), url, mode="x")
    with pytest.raises(ValueError, match="dims="):
        arrayds.to_arrayrecord(tree(), url, mode="w", dims=("a",))
    with pytest.raises(KeyError, match="not in the tree"):
        arrayds.to_arrayrecord(tree(), url, mode="w", encoding={"/nope": {}})
    xr.testing.assert_identical(xr.open_datatree(url, engine="arrayds"), tree())


def test_per_node_encoding(tmp_path):
    url = str(tmp_path / "t.ads")
    enc = {
        "/set1/set2": {
            "d": {"dtype": "int16", "scale_factor": 0.5, "_FillValue": -1, "chunks": (1,)}
        }
    }
    arrayds.to_arrayrecord(tree(), url, encoding=enc)
    back = xr.open_datatree(url, engine="arrayds")
    xr.testing.assert_identical(back, tree())
    m = ArrayManifest.from_json(read(new_store(url), "set1/set2/d").raw, "d")
    assert m.dtype == np.dtype("int16") and m.chunk_shape == (1,)


def test_bad_names_raise_before_anything_is_written(tmp_path):
    url = str(tmp_path / "t.ads")
    bad = DataTree.from_dict({"/": xr.Dataset({"v": 1}), "/ok/..": xr.Dataset()})
    with pytest.raises(ValueError, match="not a node name"):
        arrayds.to_arrayrecord(bad, url)
    assert not os.path.exists(url)
    # a variable stored under the name of a child group ("None" is stored as
    # "__values__"): refused, nothing written
    clash = DataTree.from_dict({"/": xr.Dataset({None: ("x", [1])}), "/__values__": xr.Dataset()})
    with pytest.raises(ValueError, match="named like its child groups"):
        arrayds.to_arrayrecord(clash, url)
    assert not os.path.exists(url)


def _failing(x: np.ndarray) -> np.ndarray:
    if x.ravel()[0] >= 2:
        raise RuntimeError("injected failure in a shard task")
    return x


def test_failed_shard_task_leaves_the_previous_tree(tmp_path):
    url = str(tmp_path / "t.ads")
    broken = tree()
    bad = da.from_array(np.arange(4.0).reshape(2, 2), chunks=1).map_blocks(_failing)
    broken["set1"] = broken["set1"].to_dataset(inherit=False).assign(b=(("x", "time"), bad))
    with pytest.raises(RuntimeError, match="injected"):
        arrayds.to_arrayrecord(broken, url)
    with pytest.raises(FileNotFoundError):  # nothing was committed
        xr.open_datatree(url, engine="arrayds")
    arrayds.to_arrayrecord(other_tree(), url)
    with pytest.raises(RuntimeError, match="injected"):
        arrayds.to_arrayrecord(broken, url, mode="w")
    xr.testing.assert_identical(xr.open_datatree(url, engine="arrayds"), other_tree())


_real_roll_forward = xtree.roll_forward

KILLED = textwrap.dedent(
    """
    import os, signal, sys
    import dask, dask.array as da, numpy as np, xarray as xr
    import arrayds

    calls = []

    def die(x):
        calls.append(1)
        if len(calls) == 5:  # during the blocks of b: some of its shards are written
            os.kill(os.getpid(), signal.SIGKILL)
        return x

    b = da.from_array(np.arange(4.0).reshape(2, 2), chunks=1).map_blocks(die)
    dt = xr.DataTree.from_dict({
        "/": xr.Dataset({"z": ("n", [5, 6, 7])}, attrs={"title": "new"}),
        "/set1": xr.Dataset({"b": (("p", "q"), b)}),
        "/set2": xr.Dataset({"c": ("p", [1.0, 2.0])}),
    })
    with dask.config.set(scheduler="synchronous"):
        arrayds.to_arrayrecord(dt, sys.argv[1], mode="w", shard_size=1)  # a shard per block
    """
)


def _shards(path) -> list[str]:
    return [f for _d, _s, fs in os.walk(path) for f in fs if f.endswith(".array_record")]


def test_sigkill_before_the_commit_leaves_the_previous_tree(tmp_path):
    url = str(tmp_path / "t.ads")
    arrayds.to_arrayrecord(other_tree(), url)
    before = _shards(tmp_path)
    r = subprocess.run([sys.executable, "-c", KILLED, url], capture_output=True, timeout=120)
    assert r.returncode == -9, r.stderr.decode()[-2000:]
    # shards of the killed write exist (in set1 and beside), but nothing of it is visible
    assert _shards(tmp_path / "t.ads" / "set1") and len(_shards(tmp_path)) > len(before)
    xr.testing.assert_identical(xr.open_datatree(url, engine="arrayds"), other_tree())
    assert sorted(xr.open_groups(url, engine="arrayds")) == ["/", "/set1"]


def test_crash_after_the_commit_reads_the_new_tree(tmp_path, no_roll_forward, monkeypatch):
    url = str(tmp_path / "t.ads")
    with pytest.raises(no_roll_forward):
        arrayds.to_arrayrecord(tree(), url, "data")
    st = new_store(url)
    assert read(st, "data/set1").raw is None  # only the commit point was written
    back = xr.open_datatree(url, engine="arrayds", group="data")
    xr.testing.assert_identical(back, tree())
    groups = xr.open_groups(url, engine="arrayds", group="data")
    assert sorted(groups) == ["/", "/empty", "/set1", "/set1/set2"]
    # opening a subgroup consults the ancestors' snapshots
    ds = xr.open_dataset(url, engine="arrayds", group="data/set1/set2")
    xr.testing.assert_identical(ds, tree()["set1/set2"].to_dataset(inherit=False))


def test_crash_after_replacing_commit_reads_the_new_tree(tmp_path, no_roll_forward):
    url = str(tmp_path / "t.ads")
    with pytest.MonkeyPatch.context() as mp:  # a first tree, fully rolled forward
        mp.setattr(xtree, "roll_forward", _real_roll_forward)
        arrayds.to_arrayrecord(other_tree(), url)
    old_own = read(new_store(url), "set1").raw
    with pytest.raises(no_roll_forward):
        arrayds.to_arrayrecord(tree(), url, mode="w")
    # every own manifest below the root is still the old tree's
    assert read(new_store(url), "set1").raw == old_own
    xr.testing.assert_identical(xr.open_datatree(url, engine="arrayds"), tree())
    xr.testing.assert_identical(
        xr.open_dataset(url, engine="arrayds", group="set1"),
        tree()["set1"].to_dataset(inherit=False),
    )
    # a later dataset write into a subgroup commits on top of the pending roll forward
    more = xr.Dataset({"e": ("x", [1, 2])})
    arrayds.to_arrayrecord(more, url, "set1/set2", mode="a")
    back = xr.open_datatree(url, engine="arrayds")
    xr.testing.assert_identical(
        back["set1/set2"].to_dataset(False).drop_vars("e"), tree()["set1/set2"].to_dataset(False)
    )
    assert back["set1/set2"].e.values.tolist() == [1, 2]
    # and the next tree write rolls everything forward
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(xtree, "roll_forward", _real_roll_forward)
        arrayds.to_arrayrecord(tree(3.0), url, mode="w")
    xr.testing.assert_identical(xr.open_datatree(url, engine="arrayds"), tree(3.0))
    assert read(new_store(url), "set1").raw["commit"] == read(new_store(url), "").raw["commit"]


def test_dataset_write_to_a_tree_root_keeps_the_groups(tmp_path, no_roll_forward):
    url = str(tmp_path / "t.ads")
    with pytest.raises(no_roll_forward):
        arrayds.to_arrayrecord(tree(), url)
    # mode "a" on the root dataset: the subgroups (roll forward pending) stay listed
    arrayds.to_arrayrecord(xr.Dataset({"w": ("y", [0, 0, 1])}), url, mode="a")
    back = xr.open_datatree(url, engine="arrayds")
    assert back.w.values.tolist() == [0, 0, 1]
    xr.testing.assert_identical(back["set1"].to_dataset(False), tree()["set1"].to_dataset(False))
    assert sorted(xr.open_groups(url, engine="arrayds")) == ["/", "/empty", "/set1", "/set1/set2"]


def test_a_group_changed_during_the_write_is_a_conflict(tmp_path):
    url = str(tmp_path / "t.ads")
    arrayds.to_arrayrecord(tree(), url, attrs={"history": "first"})
    assert xr.open_datatree(url, engine="arrayds").attrs["history"] == "first"
    d = arrayds.to_arrayrecord(other_tree(), url, mode="w", compute=False)
    # another writer commits to a group of the tree between planning and commit
    arrayds.to_arrayrecord(xr.Dataset({"e": ("x", [1, 2])}), url, "set1", mode="a")
    with pytest.raises(CommitConflictError, match="set1"):
        d.compute()
    back = xr.open_datatree(url, engine="arrayds")
    assert back.attrs["title"] == "root" and back["set1"].e.values.tolist() == [1, 2]


def test_a_subgroup_replaced_by_an_array_later(tmp_path, no_roll_forward):
    url = str(tmp_path / "t.ads")
    with pytest.raises(no_roll_forward):
        arrayds.to_arrayrecord(tree(), url)
    # the array API replaces the pending subgroup "empty" by an array: a larger
    # generation, so the array wins over the snapshot's group copy
    arrayds.to_arrayrecord(np.arange(3), url, "empty", mode="w", dims=("n",))
    back = xr.open_datatree(url, engine="arrayds")
    assert "empty" not in back.children and back["empty"].values.tolist() == [0, 1, 2]


def test_readers_see_one_tree_while_trees_are_committed(tmp_path):
    """A writer replaces the tree again and again (attributes only: no shard that
    a reader might still want is deleted); every ``open_groups`` shows all groups of
    one commit."""
    import threading

    url = str(tmp_path / "t.ads")

    def version(i: int) -> xr.DataTree:
        return DataTree.from_dict(
            {p: xr.Dataset(attrs={"v": i}) for p in ("/", "/a", "/a/b", "/c")}
        )

    arrayds.to_arrayrecord(version(0), url)
    done = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(1, 16):
                arrayds.to_arrayrecord(version(i), url, mode="w")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=writer)
    t.start()
    seen = set()
    while not done.is_set():
        groups = xr.open_groups(url, engine="arrayds")
        assert sorted(groups) == ["/", "/a", "/a/b", "/c"]
        versions = {ds.attrs["v"] for ds in groups.values()}
        assert len(versions) == 1, versions
        seen |= versions
    t.join()
    assert not errors
    assert xr.open_datatree(url, engine="arrayds").attrs["v"] == 15 and seen


def test_s3_round_trip_and_crash_after_the_commit(xr_s3, no_roll_forward, monkeypatch):
    """On an object store (moto on loopback): the same commit, and the parallel
    root-to-group manifest reads of a pending roll forward."""
    so = xr_s3.storage_options()
    url = "s3://arrayds-xr-conformance/datatree-write"  # the bucket xr_s3 creates
    with monkeypatch.context() as mp:  # the first write rolls forward
        mp.setattr(xtree, "roll_forward", _real_roll_forward)
        arrayds.to_arrayrecord(tree(), url, mode="w", storage_options=so)
    back = xr.open_datatree(url, engine="arrayds", storage_options=so)
    xr.testing.assert_identical(back, tree())
    with pytest.raises(no_roll_forward):
        arrayds.to_arrayrecord(tree(2.0), url, mode="w", storage_options=so)
    back = xr.open_datatree(url, engine="arrayds", storage_options=so)
    xr.testing.assert_identical(back, tree(2.0))
    ds = xr.open_dataset(url, engine="arrayds", group="set1/set2", storage_options=so)
    xr.testing.assert_identical(ds, tree(2.0)["set1/set2"].to_dataset(inherit=False))
