"""The zarr view (arrayds.zarr) read by zarr-python, xarray's zarr engine and dask:
what they read equals what arrayds reads, on real files and the real engine."""

from __future__ import annotations

import os
import sys

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

import arrayds
import arrayds.zarr
from arrayds import CorruptionError
from arrayds.nodes.shards import clear_reader_cache, io_stats, reset_io_stats

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "xarray"))
from test_xarray import _append_with_pending_roll_forward, climate  # noqa: E402

# zarr warns that the fixed-width str/bytes data types have no Zarr v3 specification yet
pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")


def view(url: str, **kw) -> zarr.Group | zarr.Array:
    return zarr.open(arrayds.zarr.open_store(url, **kw), mode="r")


def test_numpy_written_array_with_edge_and_missing_chunks(tmp_path):
    url = str(tmp_path / "a")
    a = arrayds.open_array(
        url, mode="w", shape=(7, 9), dtype=">f8", chunks=(3, 4), fill_value=np.nan
    )
    a[:5, 2:] = np.arange(35.0).reshape(5, 7)  # chunk row 2 and column 0 of row ... partly
    z = view(url)
    assert isinstance(z, zarr.Array)
    assert z.shape == (7, 9) and z.chunks == (3, 4) and z.dtype == np.dtype("<f8")
    np.testing.assert_array_equal(z[...], a[...])
    np.testing.assert_array_equal(z[1:6, 3:8], a[1:6, 3:8])
    np.testing.assert_array_equal(z.oindex[[0, 6], [8, 1]], a.oindex[[0, 6], [8, 1]])
    assert np.isnan(z.fill_value)
    assert z.nchunks_initialized == a.nchunks_initialized


def test_dask_written_dtypes_attrs_and_dims(tmp_path):
    url = str(tmp_path / "d")
    g = arrayds.open(url, mode="w")
    g.attrs.update({"title": "t", "scale": 0.5, "shape": [2, 3]})
    values = {
        "f2": np.arange(10, dtype="f2"),
        "c8": (np.arange(10) * (1 + 2j)).astype("c8"),
        "b": np.arange(10) % 3 == 0,
        "u2": np.arange(10, dtype=">u2"),
        "t": np.arange(10).astype("M8[s]"),
        "s": np.array([b"x", b"yz"] * 5),
        "u": np.array(["ä", "βγ"] * 5),
    }
    for name, x in values.items():
        arrayds.to_arrayrecord(da.from_array(x, chunks=4), url, name, dims=("i",))
    arrayds.open_array(url, "f2", mode="r+").attrs["units"] = "m"
    zg = view(url)
    assert dict(zg.attrs) == {"title": "t", "scale": 0.5, "shape": [2, 3]}
    assert sorted(zg.array_keys()) == sorted(values)
    for name, x in values.items():
        z = zg[name]
        got = z[...]
        assert got.dtype == x.dtype.newbyteorder("<") or got.dtype == x.dtype, name
        np.testing.assert_array_equal(got, x)
        assert z.metadata.dimension_names == ("i",)
    assert dict(zg["f2"].attrs) == {"units": "m"}
    y = da.from_zarr(zg["c8"])
    assert y.chunks == ((4, 4, 2),)
    np.testing.assert_array_equal(y.compute(), values["c8"])


def test_groups_nested(tmp_path):
    url = str(tmp_path / "g")
    g = arrayds.open(url, mode="w")
    g.create_group("a/b").attrs["deep"] = True
    x = g.create_array("a/b/x", shape=(3,), dtype="i2", chunks=2, fill_value=7)
    x[:2] = [1, 2]
    g.create_array("y", shape=(2, 2), dtype="u1", chunks=1)
    zg = view(url)
    assert sorted(zg.group_keys()) == ["a"] and sorted(zg.array_keys()) == ["y"]
    assert zg["a/b"].attrs["deep"] is True
    assert zg["a/b/x"][...].tolist() == [1, 2, 7]
    assert zg["y"][...].tolist() == [[0, 0], [0, 0]]  # nothing written: zarr fills
    members = sorted(k for k, _ in zg.members(max_depth=None))
    assert members == ["a", "a/b", "a/b/x", "y"]


def test_opening_reads_no_shard_and_chunks_are_lazy(tmp_path):
    url = str(tmp_path / "l")
    arrayds.to_arrayrecord(np.arange(64.0).reshape(8, 8), url, "x", chunks=2)
    clear_reader_cache()
    reset_io_stats()
    store = arrayds.zarr.open_store(url)
    z = zarr.open_group(store, mode="r")["x"]
    assert z.shape == (8, 8) and io_stats()["records_read"] == 0
    assert z[2:4, 4:6].tolist() == [[20.0, 21.0], [28.0, 29.0]]
    assert io_stats()["records_read"] == 1


def test_irregular_grid_is_a_clear_error_naming_the_array(tmp_path):
    url = str(tmp_path / "i")
    g = arrayds.open(url, mode="w")
    x = da.from_array(np.arange(10, dtype="i4"), chunks=((3, 5, 2),))
    arrayds.to_arrayrecord(x, url, "grow")  # dask's chunks become the stored grid
    assert arrayds.open_array(url, "grow").chunks == ((3, 5, 2),)
    g.create_array("ok", shape=(2,), dtype="i4", chunks=2)
    zg = view(url)
    with pytest.raises(ValueError, match=r"array '.*grow' has an irregular chunk grid .* zarr"):
        zg["grow"]
    assert zg["ok"][...].tolist() == [0, 0]  # the rest of the hierarchy reads


def test_versions(tmp_path):
    url = str(tmp_path / "v")
    g = arrayds.open(url, mode="w")
    g.attrs["step"] = 1
    gen = max(v.generation for v in arrayds.versions(url))
    g.attrs["step"] = 2
    a = g.create_array("x", shape=(2,), dtype="i4", chunks=2)
    a[:] = [5, 6]
    zold = view(url, version=gen)
    assert dict(zold.attrs) == {"step": 1} and list(zold.array_keys()) == []
    znew = view(url)
    assert dict(znew.attrs) == {"step": 2} and znew["x"][...].tolist() == [5, 6]
    with pytest.raises(ValueError, match="version"):
        view(url, version=999)


def test_corrupted_chunk_is_a_corruption_error_through_zarr(tmp_path):
    url = str(tmp_path / "c")
    a = arrayds.open_array(url, mode="w", shape=(8, 8), dtype="f8", chunks=4)
    a[...] = np.random.default_rng(0).random((8, 8))
    path = a.store.path("", a.manifest.shards[0].path)
    data = bytearray(open(path, "rb").read())
    data[100:140] = b"\xff" * 40  # inside the first chunk
    open(path, "wb").write(bytes(data))
    clear_reader_cache()
    z = view(url)
    with pytest.raises(CorruptionError, match="is damaged"):
        z[...]
    with pytest.raises(CorruptionError):
        da.from_zarr(z).sum().compute()


def test_xarray_zarr_engine_reads_what_arrayds_reads(tmp_path):
    url = str(tmp_path / "x")
    arrayds.to_arrayrecord(climate(chunks={"time": 5}), url)
    want = xr.open_dataset(url, engine="arrayds").load()
    store = arrayds.zarr.open_store(url)
    for got in (
        xr.open_zarr(store, consolidated=False),
        xr.open_dataset(store, engine="zarr", consolidated=False),
    ):
        assert got.t2m.encoding["preferred_chunks"]["time"] == 5
        got = got.load()
        # JSON has no tuples and no str/object distinction: values and dtypes agree
        assert set(got.variables) == set(want.variables)
        for k in want.variables:
            xr.testing.assert_equal(got[k], want[k])
            if want[k].dtype != object:
                assert got[k].dtype == want[k].dtype, k
            assert want[k].attrs == got[k].attrs
        assert got.attrs["title"] == want.attrs["title"]
        assert got.attrs["pair"] == list(want.attrs["pair"])


def test_xarray_reads_the_snapshot_while_roll_forward_is_pending(tmp_path):
    url = str(tmp_path / "p")
    _append_with_pending_roll_forward(url)
    want = xr.open_dataset(url, engine="arrayds").load()
    got = xr.open_zarr(arrayds.zarr.open_store(url), consolidated=False).load()
    assert got.t2m.shape[0] == 6
    xr.testing.assert_equal(got.t2m, want.t2m)


def test_writes_are_refused(tmp_path):
    url = str(tmp_path / "w")
    arrayds.to_arrayrecord(np.zeros(4), url, "x", chunks=2)
    store = arrayds.zarr.open_store(url)
    # zarr itself refuses to open a read-only store for writing ...
    for mode in ("r+", "a", "w"):
        with pytest.raises(ValueError, match="read-only"):
            zarr.open_group(store, mode=mode)
    with pytest.raises(ValueError, match="read-only"):
        xr.Dataset({"v": ("i", [1])}).to_zarr(store, mode="a", consolidated=False)
    # ... and what reaches the store is refused naming the view
    buf = default_buffer_prototype().buffer.from_bytes(b"\0" * 16)
    with pytest.raises(ValueError, match=r"zarr view of .* is read only \(set 'x/c/0' refused\)"):
        sync(store.set("x/c/0", buf))
    with pytest.raises(ValueError, match=r"zarr view of .* is read only \(delete 'x' refused\)"):
        sync(store.delete_dir("x"))
    assert arrayds.open_array(url, "x")[...].tolist() == [0.0] * 4


def test_open_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no arrayds dataset"):
        arrayds.zarr.open_store(tmp_path / "nothing")
    url = str(tmp_path / "r")
    arrayds.to_arrayrecord([{"a": 1}], url)  # a records node
    with pytest.raises(ValueError, match="'records' node; the zarr view presents groups"):
        view(url)
    url = str(tmp_path / "q")
    arrayds.open_array(url, mode="w", shape=(2,), dtype="f16", chunks=2)
    with pytest.raises(ValueError, match=r"array '.*q': zarr v3 cannot express its dtype float128"):
        view(url)
    with pytest.raises(ValueError, match="read_only=False"):
        arrayds.zarr.ArraydsZarrStore(url, read_only=False)
