"""DataTree: ``xr.open_datatree`` / ``xr.open_groups`` map arrayds groups to tree
nodes; modelled on xarray's zarr DataTree tests (same tree written through zarr
must open identical)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import arrayds

DataTree = pytest.importorskip("xarray").DataTree


def tree() -> xr.DataTree:
    root = xr.Dataset({"a": ("y", [6, 7, 8]), "set0": ("x", [9, 10])}, attrs={"title": "root"})
    set1 = xr.Dataset(
        {"a": 0, "b": 1.5},
        coords={"time": pd.date_range("2000-01-01", periods=2)},
    ).assign(c=("time", [0.5, np.nan]))
    set2 = xr.Dataset({"a": ("x", [2.0, 3.0]), "s": ("x", np.array(["p", "q"], dtype=object))})
    return DataTree.from_dict({"/": root, "/set1": set1, "/set1/set2": set2, "/set3": None})


def write_groups(dt: xr.DataTree, url: str) -> None:
    for node in dt.subtree:
        arrayds.to_arrayrecord(node.to_dataset(inherit=False), url, node.path.strip("/") or None)


def test_open_datatree_round_trips_like_zarr(tmp_path):
    dt = tree()
    url = str(tmp_path / "tree.ads")
    write_groups(dt, url)
    back = xr.open_datatree(url, engine="arrayds")
    xr.testing.assert_identical(back, dt)
    assert back["set1"].attrs == {} and back.attrs == {"title": "root"}
    zst = str(tmp_path / "tree.zarr")
    dt.to_zarr(zst, consolidated=False)
    xr.testing.assert_identical(back, xr.open_datatree(zst, engine="zarr", consolidated=False))


def test_open_groups_and_a_subtree(tmp_path):
    dt = tree()
    url = str(tmp_path / "tree.ads")
    write_groups(dt, url)
    groups = xr.open_groups(url, engine="arrayds")
    assert sorted(groups) == ["/", "/set1", "/set1/set2", "/set3"]
    xr.testing.assert_identical(groups["/set1/set2"], dt["set1/set2"].to_dataset(inherit=False))
    sub = xr.open_datatree(url, engine="arrayds", group="set1")
    expected = DataTree.from_dict(
        {"/": dt["set1"].to_dataset(inherit=False), "/set2": dt["set1/set2"].to_dataset(False)}
    )
    xr.testing.assert_identical(sub, expected)
    lazy = xr.open_datatree(url, engine="arrayds", chunks={})
    assert lazy["set1/set2"].a.chunks == ((2,),)


def test_open_datatree_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no arrayds dataset"):
        xr.open_datatree(str(tmp_path / "missing"), engine="arrayds")
    with pytest.raises(TypeError, match="opens a dataset URL"):
        xr.open_groups(b"not a url", engine="arrayds")
