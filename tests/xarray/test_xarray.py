"""The xarray backend and writer: round trips, laziness, chunks, append, region,
atomic commits and errors — all through real files, the real engine and real dask."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from dask.delayed import Delayed

import arrayds
from arrayds.errors import CommitConflictError
from arrayds.nodes.shards import clear_reader_cache, io_stats, reset_io_stats


def climate(nt: int = 12, chunks: dict | None = None, seed: int = 0) -> xr.Dataset:
    """Several variables, datetime64 time, string labels, attrs and CF encodings."""
    rng = np.random.default_rng(seed)
    ny, nx = 5, 6
    t2m = (280 + 10 * rng.random((nt, ny, nx))).astype("f4")
    t2m[0, 0, 0] = np.nan  # masked through _FillValue
    # values exactly representable with scale_factor 0.25 / add_offset 1000
    pres = 1000.0 + 0.25 * rng.integers(-400, 400, size=(nt, ny, nx))
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), t2m, {"units": "K", "long_name": "2 m temperature"}),
            "pres": (("time", "lat", "lon"), pres, {"units": "hPa"}),
            "flag": (("time",), rng.integers(0, 2, nt).astype(bool)),
            "count": (("station",), np.array([3, 1, 4], dtype="i8")),
        },
        coords={
            "time": pd.date_range("2001-01-01", periods=nt, freq="6h"),
            "lat": ("lat", np.linspace(-10, 10, ny), {"units": "degrees_north"}),
            "lon": ("lon", np.linspace(0, 25, nx).astype("f4"), {"units": "degrees_east"}),
            "station": np.array(["berlin", "oslo", "rome"], dtype=object),
            "station_code": ("station", np.array(["B", "OS", "R"])),
            "ref": ((), np.float64(1.5)),
        },
        attrs={
            "title": "synthetic climate",
            "history": "created by the test suite",
            "version": np.int32(3),
            "valid_range": np.array([-5.0, 5.0], dtype="f4"),
            "pair": (1, "a"),
            "missing": float("nan"),
        },
    )
    ds.t2m.encoding = {"_FillValue": np.float32(-9999.0)}
    ds.pres.encoding = {
        "dtype": "int16",
        "scale_factor": 0.25,
        "add_offset": 1000.0,
        "_FillValue": np.int16(-32768),
    }
    ds.time.encoding = {"units": "hours since 2000-01-01", "calendar": "proleptic_gregorian"}
    if chunks:
        ds = ds.chunk(chunks)
    return ds


@pytest.fixture
def url(tmp_path) -> str:
    return str(tmp_path / "climate.arrayds")


def test_round_trip_is_identical(url):
    ds = climate()
    g = arrayds.to_arrayrecord(ds, url)
    assert isinstance(g, arrayds.Group)
    back = xr.open_dataset(url, engine="arrayds")
    assert list(back.data_vars) == list(ds.data_vars)
    loaded = back.load()
    xr.testing.assert_identical(loaded, ds)
    # the CF encodings survive as encodings
    assert back.time.encoding["units"] == "hours since 2000-01-01"
    assert back.time.encoding["calendar"] == "proleptic_gregorian"
    assert back.pres.encoding["scale_factor"] == 0.25
    assert back.pres.encoding["add_offset"] == 1000.0
    assert back.pres.encoding["dtype"] == np.dtype("int16")
    assert back.t2m.encoding["_FillValue"] == np.float32(-9999.0)
    assert back.station.dtype == object and back.station_code.dtype.kind == "U"
    assert type(back.attrs["version"]) is np.int32
    # stored as CF says: the raw arrays hold the encoded numbers
    raw = arrayds.open_array(url, "pres")
    assert raw.dtype == np.int16 and raw.dims == ("time", "lat", "lon")
    assert arrayds.open_array(url, "time").dtype == np.int64
    assert np.isnan(back.t2m.values[0, 0, 0]) and arrayds.open_array(url, "t2m")[0, 0, 0] == -9999
    back.close()


def test_round_trip_dask_chunks_and_chunks_equal_the_written_grid(url):
    ds = climate(nt=20, chunks={"time": (5, 5, 7, 3), "lat": 2, "lon": 4})
    arrayds.to_arrayrecord(ds, url)
    back = xr.open_dataset(url, engine="arrayds", chunks={})
    assert back.t2m.chunks == ds.t2m.chunks == ((5, 5, 7, 3), (2, 2, 1), (4, 2))
    assert back.pres.chunks == ds.pres.chunks
    assert back.t2m.encoding["preferred_chunks"] == {"time": (5, 5, 7, 3), "lat": 2, "lon": 4}
    assert arrayds.open_array(url, "t2m").chunks == ds.t2m.chunks
    xr.testing.assert_identical(back.compute(), ds.compute())
    # the dask graphs read from the store in worker processes too
    total = back.t2m.sum().compute(scheduler="processes", num_workers=2)
    np.testing.assert_allclose(total, ds.t2m.sum().compute(), rtol=1e-6)


def test_lazy_isel_reads_only_touched_chunks(url):
    ds = climate(nt=24, chunks={"time": 4, "lat": 5, "lon": 3})  # 6 x 1 x 2 chunks
    arrayds.to_arrayrecord(ds, url, shard_size=1)  # one shard file per chunk
    clear_reader_cache()
    reset_io_stats()
    back = xr.open_dataset(url, engine="arrayds")  # no dask
    # opening reads manifests, then xarray loads the index coordinates: time (6
    # chunks, chunked like the data), lat (1), lon (2), station (1), plus single chunk
    # reads by xarray's CF time decoder, which peeks at the first and last time (and,
    # with cftime installed, once more)
    peeks = 3 if importlib.util.find_spec("cftime") is not None else 2
    assert io_stats()["records_read"] == 6 + 1 + 2 + 1 + peeks
    reset_io_stats()
    sub = back.t2m.isel(time=slice(5, 7), lon=[4])
    assert io_stats()["records_read"] == 0  # still lazy
    vals = sub.values
    assert io_stats()["records_read"] == 1  # time chunk 1, lon chunk 1
    np.testing.assert_array_equal(vals, ds.t2m.isel(time=slice(5, 7), lon=[4]).values)
    reset_io_stats()
    picked = back.pres.isel(time=[0, 23], lat=2).values  # outer indexing, 2 time chunks
    assert io_stats()["records_read"] == 2 * 2  # x 2 lon chunks
    np.testing.assert_array_equal(picked, ds.pres.isel(time=[0, 23], lat=2).values)
    reset_io_stats()
    assert float(back.t2m[3, 4, 5]) == float(ds.t2m[3, 4, 5])
    assert io_stats() == {"reader_opens": 1, "read_calls": 1, "records_read": 1}


def test_append_along_time_is_one_commit(url):
    ds = climate(nt=8, chunks={"time": 4})
    arrayds.to_arrayrecord(ds, url)
    more = climate(nt=6, seed=1, chunks={"time": 3})
    more = more.assign_coords(time=pd.date_range("2001-01-03", periods=6, freq="6h"))
    # variables without the append dimension are overwritten, as xarray's zarr does
    out = more.arrayds.to_arrayrecord(url, append_dim="time")
    gen = json.loads(open(os.path.join(url, "arrayds.json")).read())["generation"]
    assert gen == 2 and out.attrs["title"] == "synthetic climate"
    back = xr.open_dataset(url, engine="arrayds", chunks={})
    assert back.sizes["time"] == 14
    assert back.t2m.chunks[0] == (4, 4, 3, 3)
    want = xr.concat([ds, more], dim="time", data_vars="minimal", coords="minimal")
    xr.testing.assert_identical(back.load(), want.compute())
    assert back.time.encoding["units"] == "hours since 2000-01-01"


def _snapshot_files(root: str) -> dict[str, bytes]:
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[os.path.relpath(p, root)] = open(p, "rb").read()
    return out


def test_bad_appends_change_nothing(url):
    ds = climate(nt=4)
    arrayds.to_arrayrecord(ds, url)
    before = _snapshot_files(url)
    more = climate(nt=2, seed=2).assign_coords(time=pd.date_range("2002-01-01", periods=2))
    wrong_dims = more.assign(t2m=more.t2m.transpose("time", "lon", "lat"))
    with pytest.raises(ValueError, match=r"variable 't2m': dimensions .* do not match"):
        arrayds.to_arrayrecord(wrong_dims, url, mode="a", append_dim="time")
    wrong_dtype = more.assign(flag=more.flag.astype("f8"))
    with pytest.raises(
        ValueError,
        match=r"variable .flag.: dtype float64 does not match the stored variable.s bool",
    ):
        arrayds.to_arrayrecord(wrong_dtype, url, mode="a", append_dim="time")
    wrong_len = more.isel(lat=slice(0, 3))
    with pytest.raises(ValueError, match=r"variable '(t2m|pres|lat)'"):
        arrayds.to_arrayrecord(wrong_len, url, mode="a", append_dim="time")
    with pytest.raises(ValueError, match="append_dim 'level' is not a dimension"):
        arrayds.to_arrayrecord(more, url, mode="a", append_dim="level")
    with pytest.raises(ValueError, match="needs mode 'a'"):
        arrayds.to_arrayrecord(more, url, append_dim="time")
    assert _snapshot_files(url) == before
    xr.testing.assert_identical(xr.open_dataset(url, engine="arrayds").load(), ds)


def test_region_overwrite(url):
    ds = climate(nt=12, chunks={"time": 4})
    arrayds.to_arrayrecord(ds, url)
    patch = ds[["t2m", "pres", "flag"]].isel(time=slice(4, 8)).drop_vars(["lat", "lon", "ref"])
    patch = patch.assign(t2m=patch.t2m * 0 + 300, pres=patch.pres * 0 + 1001.0)
    patch.arrayds.to_arrayrecord(url, region={"time": slice(4, 8)})
    back = xr.open_dataset(url, engine="arrayds").load()
    assert (back.t2m.isel(time=slice(4, 8)) == 300).all()
    assert (back.pres.isel(time=slice(4, 8)) == 1001.0).all()
    xr.testing.assert_identical(back.isel(time=slice(0, 4)), ds.isel(time=slice(0, 4)).compute())
    xr.testing.assert_identical(back.isel(time=slice(8, 12)), ds.isel(time=slice(8, 12)).compute())
    with pytest.raises(ValueError, match="not aligned to the chunk grid"):
        arrayds.to_arrayrecord(
            patch.isel(time=slice(0, 2)), url, mode="r+", region={"time": slice(5, 7)}
        )
    with pytest.raises(ValueError, match="variable 'count' has none of the region dimensions"):
        arrayds.to_arrayrecord(
            ds[["count", "flag"]].isel(time=slice(0, 4)),
            url,
            mode="r+",
            region={"time": slice(0, 4)},
        )
    with pytest.raises(ValueError, match="region dimension 'time' is not in the data"):
        arrayds.to_arrayrecord(ds[["count"]], url, mode="r+", region={"time": slice(0, 4)})


def test_compute_false_and_one_atomic_commit(url):
    ds = climate(chunks={"time": 3})
    d = arrayds.to_arrayrecord(ds, url, compute=False)
    assert isinstance(d, Delayed)
    assert not os.path.exists(os.path.join(url, "arrayds.json"))
    d.compute()
    xr.testing.assert_identical(xr.open_dataset(url, engine="arrayds").load(), ds.compute())

    # a failing block: nothing of the second write becomes visible
    def boom(x):
        raise RuntimeError("disk on fire")

    bad = climate(seed=5, chunks={"time": 3})
    bad["t2m"] = bad.t2m.copy(data=bad.t2m.data.map_blocks(boom, dtype="f4"))
    with pytest.raises(RuntimeError, match="disk on fire"):
        arrayds.to_arrayrecord(bad, url, mode="w")
    xr.testing.assert_identical(xr.open_dataset(url, engine="arrayds").load(), ds.compute())


def test_conflicting_writers(url):
    ds = climate(nt=4)
    arrayds.to_arrayrecord(ds, url)
    later = climate(nt=2, seed=3).assign_coords(time=pd.date_range("2003-01-01", periods=2))
    pending = arrayds.to_arrayrecord(
        later, url, mode="a", append_dim="time", retries=0, compute=False
    )
    arrayds.to_arrayrecord(ds.assign_attrs(title="other writer"), url, mode="w")
    with pytest.raises(CommitConflictError, match="another writer"):
        pending.compute()
    back = xr.open_dataset(url, engine="arrayds")
    assert back.attrs["title"] == "other writer" and back.sizes["time"] == 4


def _append_with_pending_roll_forward(url: str) -> tuple[xr.Dataset, xr.Dataset]:
    """Write 4 time steps, append 2, then put t2m's own manifest back: a writer killed
    right after its commit point, one member not rolled forward yet."""
    ds = climate(nt=4)
    arrayds.to_arrayrecord(ds, url)
    old_child = open(os.path.join(url, "t2m", "arrayds.json"), "rb").read()
    more = climate(nt=2, seed=4).assign_coords(time=pd.date_range("2004-01-01", periods=2))
    arrayds.to_arrayrecord(more, url, mode="a", append_dim="time")
    with open(os.path.join(url, "t2m", "arrayds.json"), "wb") as f:
        f.write(old_child)
    return ds, more


def test_readers_see_the_snapshot_while_roll_forward_is_pending(url):
    ds, more = _append_with_pending_roll_forward(url)
    assert arrayds.open_array(url, "t2m").shape[0] == 4  # the array API: per-array state
    back = xr.open_dataset(url, engine="arrayds")
    assert back.t2m.shape[0] == 6  # the dataset: all of the commit or nothing
    want = xr.concat([ds, more], dim="time", data_vars="minimal", coords="minimal")
    xr.testing.assert_identical(back.load(), want)
    # the next write rolls it forward
    arrayds.to_arrayrecord(ds[["count"]].assign_attrs(note="x"), url, mode="a")
    assert arrayds.open_array(url, "t2m").shape[0] == 6


def test_changes_through_the_array_api_are_seen(url):
    ds = climate(nt=4)
    arrayds.to_arrayrecord(ds, url)
    a = arrayds.open_array(url, "count", mode="r+")
    a[0] = 42
    assert xr.open_dataset(url, engine="arrayds")["count"].values.tolist() == [42, 1, 4]


def test_mode_w_replaces_and_w_dash_refuses(url):
    ds = climate(nt=4)
    arrayds.to_arrayrecord(ds, url)
    with pytest.raises(FileExistsError, match="already exists"):
        arrayds.to_arrayrecord(ds, url)
    small = xr.Dataset({"only": ("z", np.arange(3))})
    arrayds.to_arrayrecord(small, url, mode="w")
    # the old variables are gone (the node's _arrayds/ keeps only the folder of the
    # pending-write markers, arrayds.nodes.pending: empty once no write is under way)
    assert sorted(n for n in os.listdir(url) if n != "_arrayds") == ["arrayds.json", "only"]
    assert [f for _d, _s, fs in os.walk(os.path.join(url, "_arrayds")) for f in fs] == []
    xr.testing.assert_identical(xr.open_dataset(url, engine="arrayds").load(), small)
    # mode "a" without append_dim adds variables
    arrayds.to_arrayrecord(xr.Dataset({"extra": ("w", [1.5, 2.5])}), url, mode="a")
    assert set(xr.open_dataset(url, engine="arrayds").data_vars) == {"only", "extra"}


def test_unsupported_dtype_names_the_variable(url):
    ds = xr.Dataset({"ok": ("x", [1, 2]), "bad": ("x", np.array([{"a": 1}, None], dtype=object))})
    with pytest.raises((TypeError, ValueError), match="variable 'bad'"):
        arrayds.to_arrayrecord(ds, url)
    assert not os.path.exists(url)
    with pytest.raises(TypeError, match="attribute 'when'"):
        arrayds.to_arrayrecord(xr.Dataset(attrs={"when": object()}), url)
    with pytest.raises(ValueError, match="unexpected encoding keys"):
        arrayds.to_arrayrecord(
            xr.Dataset({"ok": ("x", [1, 2])}), url, encoding={"ok": {"zlib": True}}
        )


def test_dataarray_accessor_and_encoding_chunks(url):
    arr = xr.DataArray(
        np.arange(24.0).reshape(4, 6), dims=("y", "x"), name="field", attrs={"units": "m"}
    )
    arr.arrayds.to_arrayrecord(url, encoding={"field": {"chunks": (2, 3)}})
    back = xr.open_dataarray(url, engine="arrayds")
    xr.testing.assert_identical(back.load(), arr)
    assert back.encoding["chunks"] == (2, 3)
    unnamed = xr.DataArray(np.ones(3), dims="t")
    arrayds.to_arrayrecord(unnamed, url + "2")
    xr.testing.assert_identical(xr.open_dataarray(url + "2", engine="arrayds").load(), unnamed)


def test_guess_engine_group_and_memory_urls(tmp_path):
    ds = climate(nt=4)
    root = str(tmp_path / "root")
    arrayds.to_arrayrecord(ds, root, "runs/a")
    back = xr.open_dataset(root, group="runs/a")  # engine guessed from the manifest
    xr.testing.assert_identical(back.load(), ds)
    assert "runs" in arrayds.open(root)
    arrayds.to_arrayrecord(ds, "memory://xr-test-mem", mode="w")
    mem = xr.open_dataset("memory://xr-test-mem", engine="arrayds", chunks={})
    xr.testing.assert_identical(mem.compute(scheduler="threads"), ds)
    assert not xr.backends.list_engines()["arrayds"].guess_can_open(str(tmp_path / "nothing"))


def test_open_dataset_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no arrayds dataset"):
        xr.open_dataset(str(tmp_path / "missing"), engine="arrayds")
    url = str(tmp_path / "clips")
    arrayds.to_arrayrecord([np.ones((2, 3)), np.ones((2, 5))], url)
    with pytest.raises(ValueError, match="'ragged' node"):
        xr.open_dataset(url, engine="arrayds")


def test_single_array_node_opens_as_dataset(tmp_path):
    url = str(tmp_path / "arr")
    arrayds.to_arrayrecord(da.arange(10, chunks=4), url, dims=("x",))
    back = xr.open_dataset(url, engine="arrayds", chunks={})
    assert back.data.chunks == ((4, 4, 2),) and back.data.dims == ("x",)
    assert back.data.values.tolist() == list(range(10))


def test_closed_dataset(url):
    arrayds.to_arrayrecord(climate(nt=4), url)
    with xr.open_dataset(url, engine="arrayds") as back:
        assert back._close is not None
        v = back.t2m.values
    assert v.shape == (4, 5, 6)


def test_copy_between_datasets_with_dask(tmp_path):
    src = str(tmp_path / "src")
    dst = str(tmp_path / "dst")
    ds = climate(nt=10, chunks={"time": 5})
    arrayds.to_arrayrecord(ds, src)
    with dask.config.set(scheduler="threads"):
        arrayds.to_arrayrecord(xr.open_dataset(src, engine="arrayds", chunks={}), dst)
    xr.testing.assert_identical(xr.open_dataset(dst, engine="arrayds").load(), ds.compute())
    assert xr.open_dataset(dst, engine="arrayds", chunks={}).t2m.chunks[0] == (5, 5)
    shutil.rmtree(src)


def test_every_dtype_round_trips(url):
    n = 4
    variables = {
        f"v_{dt}": ("x", np.arange(n).astype(dt))
        for dt in ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8", "c8", "c16"]
    }
    variables["flags"] = ("x", np.array([True, False, True, True]))
    variables["td"] = ("x", np.array([1, 2, 3, 4], dtype="m8[s]").astype("m8[ns]"))
    variables["when"] = (
        "x",
        np.array(["2000-01-01", "NaT", "2001-02-03T04:05", "1999-12-31"], dtype="M8[ns]"),
    )
    variables["raw"] = ("x", np.array([b"a", b"bc", b"", b"def"]))
    variables["vlen_bytes"] = ("x", np.array([b"a", b"bc", b"", b"def"], dtype=object))
    variables["text"] = ("x", np.array(["ä", "βγ", "", "x"]))
    variables["empty"] = (("x", "e"), np.zeros((n, 0)))
    variables["scalar"] = ((), 3.5)
    ds = xr.Dataset(variables)
    arrayds.to_arrayrecord(ds, url)
    back = xr.open_dataset(url, engine="arrayds").load()
    for k in ds.variables:
        assert back[k].dtype == ds[k].dtype, k
    xr.testing.assert_identical(back, ds)


def test_appending_longer_strings_is_refused(url):
    ds = xr.Dataset(
        {"name": ("t", np.array(["ab", "cd"], dtype=object))},
        coords={"t": [0, 1]},
    )
    arrayds.to_arrayrecord(ds, url)
    longer = xr.Dataset(
        {"name": ("t", np.array(["abcdef"], dtype=object))},
        coords={"t": [2]},
    )
    with pytest.raises(ValueError, match="strings of up to 6 characters do not fit"):
        arrayds.to_arrayrecord(longer, url, mode="a", append_dim="t")
    fits = xr.Dataset({"name": ("t", np.array(["x"], dtype=object))}, coords={"t": [2]})
    arrayds.to_arrayrecord(fits, url, mode="a", append_dim="t")
    back = xr.open_dataset(url, engine="arrayds").load()
    assert back.name.values.tolist() == ["ab", "cd", "x"] and back.name.dtype == object


def test_unknown_chunk_sizes_and_empty_dataset(url):
    x = da.arange(10, chunks=5)
    ragged_chunks = x[x > 3]  # unknown chunk sizes
    ds = xr.Dataset({"v": ("n", ragged_chunks)})
    with pytest.raises(ValueError, match="variable 'v': the dask array has unknown chunk sizes"):
        arrayds.to_arrayrecord(ds, url)
    assert not os.path.exists(url)
    empty = xr.Dataset(attrs={"note": "nothing yet"})
    arrayds.to_arrayrecord(empty, url)
    xr.testing.assert_identical(xr.open_dataset(url, engine="arrayds"), empty)


def test_group_attrs_change_keeps_the_dataset_snapshot(url):
    _append_with_pending_roll_forward(url)
    g = arrayds.open(url, mode="r+")
    g.attrs["note"] = "edited through the group API"
    with open(os.path.join(url, "arrayds.json")) as f:
        raw = json.load(f)
    assert "snapshot" in raw and set(raw["snapshot"]["members"]) >= {"t2m", "pres"}
    assert raw["attrs"]["note"] == "edited through the group API"
    back = xr.open_dataset(url, engine="arrayds")
    assert back.t2m.shape[0] == 6  # the snapshot still wins over the stale member
