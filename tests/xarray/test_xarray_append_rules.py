"""Append and region writes are checked before anything is written, with the rules
and error types of ``Dataset.to_zarr``: each bad write below is refused by xarray's
zarr backend and by arrayds alike (``ValueError``), and the refused arrayds write
leaves every stored file byte for byte as it was."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from xr_helpers import tree_digest

import arrayds

zarr = pytest.importorskip("zarr")
pytestmark = pytest.mark.filterwarnings("ignore:The data type .* does not have a Zarr V3")


def base() -> xr.Dataset:
    return xr.Dataset(
        {
            "v": (("time", "x"), np.arange(12.0).reshape(4, 3)),
            "name": (("x",), np.array(["a", "b", "c"])),
            "n": (("time",), np.arange(4, dtype="i4")),
            "label": (("time",), np.array(["p", "q", "r", "s"])),
        },
        coords={"time": pd.date_range("2000-01-01", periods=4), "x": [10, 20, 30]},
    ).chunk({"time": 2})


def more(**changes) -> xr.Dataset:
    ds = base().assign_coords(time=pd.date_range("2000-01-05", periods=4))
    return ds.assign(**changes) if changes else ds


CASES = {
    "append_dim not stored": (lambda: more(), {"mode": "a", "append_dim": "y"}),
    "append: other length of a stored dimension": (
        lambda: more().isel(x=slice(0, 2)),
        {"mode": "a", "append_dim": "time"},
    ),
    "append: encoding for a stored variable": (
        lambda: more(),
        {"mode": "a", "append_dim": "time", "encoding": {"v": {"dtype": "f4"}}},
    ),
    "region: slice length differs from the data": (
        lambda: base()[["v", "n", "label"]].isel(time=slice(0, 2)).drop_vars("x"),
        {"mode": "r+", "region": {"time": slice(0, 4)}},
    ),
    "region: dimension not in the data": (
        lambda: base()[["name"]].drop_vars("x"),
        {"mode": "r+", "region": {"time": slice(0, 2)}},
    ),
    "region: variable without the region dimension": (
        lambda: base()[["v", "name"]].isel(time=slice(0, 2)).drop_vars("x"),
        {"mode": "r+", "region": {"time": slice(0, 2)}},
    ),
    "region: a variable not stored": (
        lambda: (
            base()[["v"]].isel(time=slice(0, 2)).drop_vars("x").assign(new=(("time",), [1.0, 2.0]))
        ),
        {"mode": "r+", "region": {"time": slice(0, 2)}},
    ),
    "region: slice with a step": (
        lambda: base()[["n"]].isel(time=slice(0, 2)),
        {"mode": "r+", "region": {"time": slice(0, 4, 2)}},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_refused_like_to_zarr_and_nothing_changes(tmp_path, case):
    make, kw = CASES[case]
    ads, zst = str(tmp_path / "ds.arrayds"), str(tmp_path / "ds.zarr")
    arrayds.to_arrayrecord(base(), ads)
    base().to_zarr(zst, mode="w", consolidated=False)
    with pytest.raises(ValueError):
        make().to_zarr(zst, consolidated=False, **kw)
    before = tree_digest(ads)
    with pytest.raises(ValueError) as e:
        arrayds.to_arrayrecord(make(), ads, **kw)
    assert "nothing was written" in str(e.value) or "dataset" in str(e.value)
    assert tree_digest(ads) == before
    xr.testing.assert_identical(xr.open_dataset(ads, engine="arrayds").load(), base().compute())


def test_stricter_than_zarr_where_zarr_leaves_an_inconsistent_store(tmp_path):
    """zarr accepts these two writes and leaves variables of different lengths along
    one dimension (xarray then cannot open the store: 'conflicting sizes'); arrayds
    refuses them before writing anything."""
    ads, zst = str(tmp_path / "ds.arrayds"), str(tmp_path / "ds.zarr")
    arrayds.to_arrayrecord(base(), ads)
    base().to_zarr(zst, mode="w", consolidated=False)
    before = tree_digest(ads)
    shorter = xr.Dataset({"w": ("x", [1.0, 2.0])})
    shorter.to_zarr(zst, mode="a", consolidated=False)  # accepted by zarr
    with pytest.raises(ValueError, match="conflicting sizes"):
        xr.open_dataset(zst, engine="zarr", consolidated=False)
    with pytest.raises(ValueError, match=r"variable 'w': Unable to update size .*'x' \(2 != 3\)"):
        arrayds.to_arrayrecord(shorter, ads, mode="a")
    with pytest.raises(ValueError, match=r"variable 'n' .* not in the data"):
        arrayds.to_arrayrecord(more().drop_vars("n"), ads, mode="a", append_dim="time")
    # zarr stores the numbers as the strings "0.0", "1.0", ...: a value changed
    floats = more(label=("time", np.arange(4.0)))
    with pytest.raises(ValueError, match=r"variable 'label': dtype float64 does not match"):
        arrayds.to_arrayrecord(floats, ads, mode="a", append_dim="time")
    assert tree_digest(ads) == before


def test_good_append_and_region_still_work(tmp_path):
    ads = str(tmp_path / "ds.arrayds")
    arrayds.to_arrayrecord(base(), ads)
    arrayds.to_arrayrecord(more(), ads, mode="a", append_dim="time")
    back = xr.open_dataset(ads, engine="arrayds")
    assert back.sizes == {"time": 8, "x": 3}
    patch = base()[["v", "n"]].isel(time=slice(2, 4)).drop_vars("x") * 0
    arrayds.to_arrayrecord(patch, ads, mode="r+", region={"time": slice(2, 4)})
    back = xr.open_dataset(ads, engine="arrayds").load()
    assert float(back.v.isel(time=slice(2, 4)).sum()) == 0.0
    assert float(back.v.isel(time=slice(0, 2)).sum()) == float(base().v[:2].sum())
