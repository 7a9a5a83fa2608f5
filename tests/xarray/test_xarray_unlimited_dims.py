"""``unlimited_dims=`` (netCDF's writer argument, which xarray's own backend tests pass
to every store) is accepted and ignored, as xarray's zarr store ignores it: every
dimension of an arrayds array can grow by appending. A value that is not ``None``, a
name or a list of names is refused with a ``ValueError`` naming it, before any write."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import arrayds


def dataset(start: int = 0) -> xr.Dataset:
    return xr.Dataset(
        {"v": (("time", "x"), np.arange(6.0).reshape(3, 2) + start)},
        coords={"time": np.arange(start, start + 3), "x": [10, 20]},
    )


@pytest.mark.parametrize("dims", [["time"], ("time", "x"), "time", None])
def test_unlimited_dims_accepted_and_ignored(tmp_path, dims) -> None:
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(dataset(), url, unlimited_dims=dims)
    dataset(3).arrayds.to_arrayrecord(url, append_dim="time", unlimited_dims=dims)
    with xr.open_dataset(url, engine="arrayds") as back:
        xr.testing.assert_identical(back.load(), xr.concat([dataset(), dataset(3)], "time"))
        assert "unlimited_dims" not in back.encoding


def test_unlimited_dims_accepted_for_a_datatree(tmp_path) -> None:
    url = str(tmp_path / "tree")
    child = xr.Dataset({"w": ("y", np.arange(4.0))})
    tree = xr.DataTree.from_dict({"/": dataset(), "/child": child})
    arrayds.to_arrayrecord(tree, url, unlimited_dims=["time", "y"])
    with xr.open_dataset(url, engine="arrayds", group="child") as back:
        xr.testing.assert_identical(back.load(), child)


@pytest.mark.parametrize("bad", [5, {"time": 1}, [["time"]]])
def test_unlimited_dims_of_a_wrong_type_is_refused(tmp_path, bad) -> None:
    url = tmp_path / "ds"
    with pytest.raises(ValueError, match="unlimited_dims must be None, a dimension name"):
        arrayds.to_arrayrecord(dataset(), str(url), unlimited_dims=bad)
    assert not url.exists()
