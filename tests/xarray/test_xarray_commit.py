"""The xarray commits on the one commit path (arrayds.nodes.commit): a refused
commit leaves no shard of its own behind, and the roll forward of the members'
manifests never replaces a newer manifest and only warns when it fails."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest
import xarray as xr

import arrayds
from arrayds.errors import CommitConflictError
from arrayds.nodes.commit import read
from arrayds.storage import get_store
from arrayds.xarray.state import remove_replaced_members, roll_forward


def _shards(path) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, f), path)
        for d, _s, fs in os.walk(path)
        for f in fs
        if f.endswith(".array_record")
    }


def dataset(n: int = 4, seed: int = 0) -> xr.Dataset:
    rng = np.random.default_rng(seed)
    return xr.Dataset(
        {"v": ("t", rng.random(n)), "w": ("t", np.arange(n, dtype="i4"))},
        coords={"t": np.arange(n)},
    ).chunk({"t": 2})


def test_a_refused_dataset_commit_removes_its_shards(tmp_path):
    url = str(tmp_path / "d.ads")
    arrayds.to_arrayrecord(dataset(), url)
    more = dataset(2, seed=1).assign_coords(t=[4, 5])
    pending = arrayds.to_arrayrecord(more, url, mode="a", append_dim="t", retries=0, compute=False)
    arrayds.to_arrayrecord(dataset(seed=2), url, mode="w")  # another writer commits first
    committed = _shards(url)
    with pytest.raises(CommitConflictError, match="another writer"):
        pending.compute()
    # the refused write's shards were written, then removed: only committed data is left
    assert _shards(url) == committed
    xr.testing.assert_identical(xr.open_dataset(url, engine="arrayds").load(), dataset(seed=2))


def test_a_refused_tree_commit_removes_its_shards(tmp_path):
    url = str(tmp_path / "t.ads")
    dt = xr.DataTree.from_dict({"/": dataset(), "/g": dataset(seed=3)})
    arrayds.to_arrayrecord(dt, url)
    pending = arrayds.to_arrayrecord(dt, url, mode="w", compute=False)
    arrayds.to_arrayrecord(dataset(seed=4), url, "g", mode="w")
    committed = _shards(url)
    with pytest.raises(CommitConflictError, match="t.ads/g' was changed by another writer"):
        pending.compute()
    assert _shards(url) == committed
    back = xr.open_dataset(url, engine="arrayds", group="g").load()
    xr.testing.assert_identical(back, dataset(seed=4))


def test_roll_forward_keeps_newer_members_and_warns_on_failure(tmp_path):
    url = str(tmp_path / "d.ads")
    arrayds.to_arrayrecord(dataset().compute(), url)
    st = get_store(url)
    doc = read(st, "").raw
    a = arrayds.open_array(url, "w", mode="r+")
    a[0] = 42  # a later commit through the array API: a larger generation
    newer = read(st, "w").raw
    roll_forward(st, "", doc)
    assert read(st, "w").raw == newer  # the older snapshot copy did not replace it
    # a member whose manifest cannot be written: a warning (the commit had landed)
    shutil.rmtree(os.path.join(url, "v"))
    with open(os.path.join(url, "v"), "wb") as f:
        f.write(b"not a folder")
    with pytest.warns(RuntimeWarning, match="member 'v' could not be brought up to date"):
        roll_forward(st, "", doc, ["v"])
    # the members not named are left alone
    shutil.rmtree(os.path.join(url, "t"))
    roll_forward(st, "", doc, ["w"])
    assert not os.path.exists(os.path.join(url, "t"))


def test_remove_replaced_members_is_best_effort(tmp_path):
    url = str(tmp_path / "d.ads")
    arrayds.to_arrayrecord(dataset().compute(), url)
    st = get_store(url)
    v_files = sorted(_shards(os.path.join(url, "v")))
    assert v_files
    remove_replaced_members(
        st, "", ["w", "missing"], {"v": [*v_files, "c/missing.array_record"], "gone": ["x"]}
    )
    assert not os.path.exists(os.path.join(url, "w"))
    assert _shards(os.path.join(url, "v")) == set()
    assert read(st, "v").exists  # only the named files went, not the manifest
