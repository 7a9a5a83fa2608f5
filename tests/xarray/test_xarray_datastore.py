"""The writable xarray data store: xarray's own encoding machinery
(``Dataset.dump_to_store``), buffered variables, one commit per sync, and its
errors."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import xarray as xr

import arrayds
from arrayds.errors import CommitConflictError
from arrayds.xarray.datastore import ArrayDSWritableStore


def generation(url: str) -> int:
    with open(os.path.join(url, "arrayds.json")) as f:
        return json.load(f)["generation"]


def test_buffered_until_sync_then_one_commit(tmp_path):
    url = str(tmp_path / "st")
    st = ArrayDSWritableStore.open(url, mode="w")
    ds = xr.Dataset({"a": ("x", [1.0, np.nan])}, attrs={"title": "t"})
    ds.dump_to_store(st)
    assert not os.path.exists(os.path.join(url, "arrayds.json"))  # nothing visible yet
    st.sync()
    assert generation(url) == 1  # one commit for all variables and attributes
    xr.testing.assert_identical(xr.open_dataset(url, engine="arrayds").load(), ds)
    # mode "a" through the same store: adds a variable, keeps the stored ones
    xr.Dataset({"b": ("x", [3, 4])}).dump_to_store(st)
    st.close()
    assert generation(url) == 2
    back = xr.open_dataset(url, engine="arrayds").load()
    assert sorted(back.data_vars) == ["a", "b"] and back.attrs == {"title": "t"}


def test_reading_the_store_commits_what_is_buffered(tmp_path):
    url = str(tmp_path / "rd")
    with ArrayDSWritableStore.open(url, mode="w") as st:
        xr.Dataset({"v": ("t", [5, 6])}).dump_to_store(st)
        assert st.get_variables()["v"].shape == (2,)
        assert dict(st.get_dimensions()) == {"t": 2}


def test_errors(tmp_path):
    url = str(tmp_path / "err")
    with pytest.raises(ValueError, match="mode must be"):
        ArrayDSWritableStore.open(url, mode="r+")
    arrayds.to_arrayrecord(xr.Dataset({"v": ("x", [1, 2, 3])}), url)
    with pytest.raises(FileExistsError, match="already exists"):
        ArrayDSWritableStore.open(url, mode="w-")
    st = ArrayDSWritableStore.open(url, mode="a")
    arrayds.to_arrayrecord(xr.Dataset({"w": ("x", [4, 5, 6])}), url, mode="a")  # another writer
    xr.Dataset({"z": ("x", [7, 8, 9])}).dump_to_store(st)
    with pytest.raises(CommitConflictError, match="another writer"):
        st.sync()
    assert sorted(xr.open_dataset(url, engine="arrayds").data_vars) == ["v", "w"]
    enc = {"dtype": "i1"}
    with pytest.raises(ValueError, match=r"variable 'q'.*would wrap around"):
        xr.Dataset({"q": ("x", [1.0, 2.0, 900.0], {}, enc)}).dump_to_store(
            ArrayDSWritableStore.open(url, mode="a")
        )
