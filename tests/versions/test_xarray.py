"""Old versions of xarray datasets: ``xr.open_dataset(url, engine="arrayds",
version=N | as_of=t)`` is exactly the dataset after N writes (appends along time,
a region write, a new variable, attrs); ``open_datatree`` likewise; the same
versions through ``arrayds.open``."""

from __future__ import annotations

import pickle
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import arrayds

xr = pytest.importorskip("xarray")


def _step(i: int):
    return xr.Dataset(
        {"t": (("time", "x"), np.full((2, 3), float(i)))},
        coords={"time": np.arange(2 * i, 2 * i + 2), "x": [10, 20, 30]},
        attrs={"step": i},
    )


def _history(w):
    """Write a dataset in steps; returns [the dataset after each write]."""
    so = w.so
    after = []

    def seen():
        after.append(xr.open_dataset(w.url, engine="arrayds", storage_options=so).load())

    arrayds.to_arrayrecord(_step(0), w.url, mode="w", storage_options=so)
    seen()
    for i in (1, 2, 3):
        arrayds.to_arrayrecord(_step(i), w.url, mode="a", append_dim="time", storage_options=so)
        seen()
    region = xr.Dataset({"t": (("time", "x"), np.full((2, 3), -1.0))})
    arrayds.to_arrayrecord(
        region, w.url, mode="r+", region={"time": slice(0, 2)}, storage_options=so
    )
    seen()
    return after


def test_each_version_is_the_dataset_after_that_many_writes(where):
    after = _history(where)
    vs = arrayds.versions(where.url, storage_options=where.so)
    assert [v.generation for v in vs] == list(range(1, len(after) + 1))
    for n, expected in enumerate(after, 1):
        got = xr.open_dataset(
            where.url, engine="arrayds", version=n, storage_options=where.so
        ).load()
        xr.testing.assert_identical(got, expected)
        # the same through arrayds.open (the group's children as of then)
        g = arrayds.open(where.url, version=n, storage_options=where.so)
        np.testing.assert_array_equal(g["t"][:], expected.t.values)
    # as_of each commit time
    for v, expected in zip(vs, after, strict=True):
        got = xr.open_dataset(where.url, engine="arrayds", as_of=v.time, storage_options=where.so)
        xr.testing.assert_identical(got.load(), expected)


def test_an_old_version_opens_lazily_with_dask_and_pickles(quick):
    after = _history(quick)
    ds = xr.open_dataset(quick.url, engine="arrayds", version=2, chunks={})
    assert ds.t.chunks is not None
    xr.testing.assert_identical(ds.load(), after[1])
    back = pickle.loads(pickle.dumps(xr.open_dataset(quick.url, engine="arrayds", version=2)))
    xr.testing.assert_identical(back.load(), after[1])


def test_bad_versions_through_xarray(quick):
    _history(quick)
    with pytest.raises(ValueError, match="no version 9; the versions kept are 1, 2, 3, 4, 5"):
        xr.open_dataset(quick.url, engine="arrayds", version=9)
    with pytest.raises(TypeError, match="version must be an int"):
        xr.open_dataset(quick.url, engine="arrayds", version=1.5)
    first = arrayds.versions(quick.url)[0].time
    with pytest.raises(ValueError, match="no version was committed at or before"):
        xr.open_dataset(quick.url, engine="arrayds", as_of=first - timedelta(seconds=1))
    with pytest.raises(ValueError, match="not both"):
        xr.open_dataset(quick.url, engine="arrayds", version=1, as_of=first)
    with pytest.raises(FileNotFoundError):
        xr.open_dataset(quick.url + "/none", engine="arrayds", version=1)


def test_open_datatree_at_a_version(quick):
    pytest.importorskip("xarray", minversion="2024.10")
    root = xr.Dataset({"a": ("x", np.arange(3.0))})
    tree = xr.DataTree.from_dict({"/": root, "/sub": _step(0)})
    arrayds.to_arrayrecord(tree, quick.url, mode="w")
    before = xr.open_datatree(quick.url, engine="arrayds").load()
    then = datetime.now(timezone.utc)
    n = arrayds.versions(quick.url)[-1].generation
    arrayds.to_arrayrecord(_step(1), quick.url, "sub", mode="a", append_dim="time")
    now = xr.open_datatree(quick.url, engine="arrayds").load()
    assert now["sub"].sizes["time"] == 4
    # the root's version n is still its current one: the groups below as they are now
    current = xr.open_datatree(quick.url, engine="arrayds", version=n).load()
    xr.testing.assert_identical(current, now)
    # as_of: every group as of then
    old = xr.open_datatree(quick.url, engine="arrayds", as_of=then).load()
    xr.testing.assert_identical(old, before)
    # a new root version: version n now stands for the moment before it
    arrayds.open(quick.url, mode="r+").attrs["k"] = 1
    old = xr.open_datatree(quick.url, engine="arrayds", version=n).load()
    xr.testing.assert_identical(old, now)


def test_mode_w_over_an_xarray_dataset_leaves_no_unreadable_version(quick):
    arrayds.to_arrayrecord(_step(0), quick.url, mode="w")
    arrayds.to_arrayrecord(_step(1), quick.url, mode="a", append_dim="time")
    arrayds.to_arrayrecord(xr.Dataset({"o": ("y", np.arange(3.0))}), quick.url, mode="w")
    for v in arrayds.versions(quick.url):
        xr.open_dataset(quick.url, engine="arrayds", version=v.generation).load()
