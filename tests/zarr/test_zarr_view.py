"""The zarr view (arrayds.zarr) read by zarr-python, xarray's zarr engine and dask:
what they read equals what arrayds reads, on real files and the real engine."""

from __future__ import annotations

import contextlib
import json
import os
import sys

import dask.array as da
import numpy as np
import pytest
import xarray as xr
import zarr
from zarr.abc.store import RangeByteRequest
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

import arrayds
import arrayds.zarr
from arrayds import CorruptionError
from arrayds.nodes.shards import clear_reader_cache, io_stats, reset_io_stats

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "xarray"))
from conformance.servers import load_helper, moto_bucket  # noqa: E402
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


async def _list(store: arrayds.zarr.ArraydsZarrStore) -> list[str]:
    return [k async for k in store.list()]


def _irregular(url: str) -> tuple[np.ndarray, np.ndarray]:
    """A group with an irregular array ``grow`` (written by dask) and an irregular
    array ``holes`` (fill -1) of which two chunks are written; their values."""
    g = arrayds.open(url, mode="w")
    x = np.arange(60, dtype=">i4").reshape(10, 6)
    arrayds.to_arrayrecord(da.from_array(x, chunks=((3, 5, 2), (4, 2))), url, "grow")
    assert arrayds.open_array(url, "grow").chunks == ((3, 5, 2), (4, 2))
    h = g.create_array("holes", shape=(7,), dtype="f8", chunks=((2, 4, 1),), fill_value=-1)
    h[0:2] = [1.0, 2.0]
    h[6:] = [7.0]
    return x, h[...]


RECTILINEAR = "array.rectilinear_chunks"
HAS_RECTILINEAR = RECTILINEAR.split(".")[1] in zarr.config.get("array")
# skipped with a zarr before 3.4 only (the project venv's 3.1): under 3.4 and later
# (`make test-latest`) they run, and fail if the flag went missing
NO_RECTILINEAR = pytest.mark.skipif(
    not HAS_RECTILINEAR and tuple(map(int, zarr.__version__.split(".")[:2])) < (3, 4),
    reason=f"zarr {zarr.__version__}: no rectilinear grid",
)


def test_irregular_grid_is_a_clear_error_naming_the_array(tmp_path):
    """Without zarr's rectilinear chunk grid (zarr 3.1), or with its flag off (3.4),
    the zarr.json of an irregular array is an error naming it and what reads it."""
    url = str(tmp_path / "i")
    _irregular(url)
    arrayds.open(url, mode="r+").create_array("ok", shape=(2,), dtype="i4", chunks=2)
    if HAS_RECTILINEAR:
        why = r"it is experimental in zarr .* and off: turn it on with zarr.config.set\("
        off = zarr.config.set({RECTILINEAR: False})
    else:
        why = r"zarr .* has none: read it with arrayds, with a zarr-python that has one"
        off = contextlib.nullcontext()
    with off:
        zg = view(url)
        for name in ("grow", "holes"):
            with pytest.raises(
                ValueError, match=rf"array '.*{name}' has an irregular chunk grid .*; {why}"
            ):
                zg[name]
        assert zg["ok"][...].tolist() == [0, 0]  # the rest of the hierarchy reads


@NO_RECTILINEAR
def test_irregular_grid_is_a_rectilinear_chunk_grid(tmp_path):
    url = str(tmp_path / "r")
    x, holes = _irregular(url)
    store = arrayds.zarr.open_store(url)
    with zarr.config.set({RECTILINEAR: True}):
        z = view(url)["grow"]
        assert z.read_chunk_sizes == ((3, 5, 2), (4, 2)) and z.dtype == np.dtype("<i4")
        np.testing.assert_array_equal(z[...], x)
        np.testing.assert_array_equal(z[2:9, 3:5], x[2:9, 3:5])
        h = view(url)["holes"]
        assert h.read_chunk_sizes == ((2, 4, 1),) and h.fill_value == -1
        assert h[...].tolist() == holes.tolist() == [1, 2, -1, -1, -1, -1, 7]
        assert h.nchunks_initialized == 2
        meta = json.loads(sync(store.get("grow/zarr.json", default_buffer_prototype())).to_bytes())
        grid = meta["chunk_grid"]
        assert grid["name"] == "rectilinear"
        assert grid["configuration"]["chunk_shapes"] == [[3, 5, 2], [4, 2]]
        # each chunk is its own shape, not padded: chunk (2, 1) holds x[8:10, 4:6]
        raw = sync(store.get("grow/c/2/1", default_buffer_prototype())).to_bytes()
        assert raw == x[8:10, 4:6].astype("<i4").tobytes()
        assert sync(store.get("holes/c/1", default_buffer_prototype())) is None
        keys = sorted(k for k in sync(_list(store)) if k.startswith("holes/"))
        assert keys == ["holes/c/0", "holes/c/2", "holes/zarr.json"]


@NO_RECTILINEAR
def test_large_chunks_of_a_rectilinear_grid_read_in_worker_threads(tmp_path):
    url = str(tmp_path / "big")
    x = np.random.default_rng(1).random((700, 400))  # chunk 0: 400x400 float64, > 1 MiB
    arrayds.to_arrayrecord(da.from_array(x, chunks=((400, 300), (400,))), url)
    with zarr.config.set({RECTILINEAR: True}):
        z = view(url)
        assert z.read_chunk_sizes == ((400, 300), (400,))
        np.testing.assert_array_equal(z[...], x)
        np.testing.assert_array_equal(z[390:410, ::7], x[390:410, ::7])


@NO_RECTILINEAR
def test_xarray_reads_an_appended_dataset_through_its_rectilinear_grid(tmp_path):
    """An append along time makes the time axis irregular (5 + 5 + 2 steps here)."""
    url = str(tmp_path / "xa")
    ds = climate(chunks={"time": 5})
    arrayds.to_arrayrecord(ds.isel(time=slice(0, 10)), url)
    arrayds.to_arrayrecord(ds.isel(time=slice(10, None)), url, mode="a", append_dim="time")
    assert arrayds.open_array(url, "t2m").chunks[0] == (5, 5, 2)
    want = xr.open_dataset(url, engine="arrayds").load()
    with zarr.config.set({RECTILINEAR: True}):
        got = xr.open_zarr(arrayds.zarr.open_store(url), consolidated=False)
        assert got.t2m.chunks[0] == (5, 5, 2)
        got = got.load()
    for k in ("t2m", "pres", "flag", "time"):
        xr.testing.assert_equal(got[k], want[k])


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


def chunk_of(buf, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """The chunk array of the bytes a ``get`` returned."""
    return np.frombuffer(buf.to_bytes(), dtype=dtype).reshape(shape)


def test_large_chunks_are_read_in_worker_threads_with_checksums(tmp_path):
    # 2 MiB chunks: more than the view reads on zarr's event loop, so these gets take
    # the batched path in a worker thread (as every get of a remote dataset does)
    assert 512 * 512 * 8 > arrayds.zarr.INLINE_BYTES
    url = str(tmp_path / "big")
    x = np.random.default_rng(1).random((600, 1100))
    a = arrayds.open_array(url, mode="w", shape=x.shape, dtype="f8", chunks=512, fill_value=-1)
    a[...] = x
    z = view(url)
    np.testing.assert_array_equal(z[...], x)
    np.testing.assert_array_equal(da.from_zarr(z).compute(), x)
    store = z.store
    keys = [
        ("c/1/2", None),
        ("zarr.json", None),
        ("c/0/0", RangeByteRequest(8, 24)),
        ("c/5/0", None),
    ]
    got = sync(store.get_partial_values(default_buffer_prototype(), keys))
    edge = np.full((512, 512), -1.0)
    edge[:88, :76] = x[512:, 1024:]  # the corner chunk, padded with the fill value
    np.testing.assert_array_equal(chunk_of(got[0], "<f8", (512, 512)), edge)
    assert json.loads(got[1].to_bytes())["chunk_grid"]["configuration"]["chunk_shape"] == [512, 512]
    assert chunk_of(got[2], "<f8", (2,)).tolist() == x[0, 1:3].tolist()
    assert got[3] is None  # outside the grid
    path = a.store.path("", a.manifest.shards[0].path)
    data = bytearray(open(path, "rb").read())
    data[100:140] = b"\xff" * 40  # inside the first chunk
    open(path, "wb").write(bytes(data))
    clear_reader_cache()
    z = view(url)
    with pytest.raises(CorruptionError, match="is damaged"):
        z[:10, :10]
    with pytest.raises(CorruptionError, match="is damaged"):
        da.from_zarr(z).sum().compute()


def test_one_batch_mixes_arrays_missing_chunks_and_documents(tmp_path):
    # memory:// is not a local file system: every chunk get goes through a batch
    url = f"memory://zarr-batch-{tmp_path.name}"
    g = arrayds.open(url, mode="w")
    p = g.create_array("p", shape=(4, 6), dtype=">i4", chunks=(2, 3), fill_value=9)
    p[:2, :] = np.arange(12).reshape(2, 6)  # chunk row 1 never written
    q = g.create_array("q", shape=(5,), dtype="M8[s]", chunks=2)
    q[...] = np.arange(5).astype("M8[s]")
    store = arrayds.zarr.open_store(url)
    zg = zarr.open_group(store, mode="r")
    zp, zq = zg["p"], zg["q"]
    keys = ["p/c/0/1", "q/c/2", "p/c/1/0", "q/zarr.json", "q/c/0", "p/c/0/0", "p/c/0/1"]
    got = sync(store.get_partial_values(default_buffer_prototype(), [(k, None) for k in keys]))
    one_by_one = [sync(store.get(k)) for k in keys]
    assert [b is None for b in got] == [False, False, True, False, False, False, False]
    for a, b in zip(got, one_by_one, strict=True):
        assert (a is None and b is None) or a.to_bytes() == b.to_bytes()
    assert chunk_of(got[0], "<i4", (2, 3)).tolist() == [[3, 4, 5], [9, 10, 11]]
    assert chunk_of(got[1], "<i8", (2,)).tolist() == [4, 0]  # the edge chunk, fill 0
    assert chunk_of(got[4], "<i8", (2,)).tolist() == [0, 1]
    np.testing.assert_array_equal(zp[...], p[...])
    np.testing.assert_array_equal(zq[...], q[...])


@pytest.fixture(scope="module")
def s3():
    with moto_bucket("arrayds-zarr-view") as server:
        yield server


def test_remote_gets_of_a_shard_are_one_batched_read(s3, tmp_path):
    proxy = load_helper("s3", "s3server").LatencyProxy(("127.0.0.1", s3.port), latency=0.0)
    proxy.start()
    try:
        opts = s3.storage_options(proxy.url)
        x = np.arange(64.0).reshape(8, 8)
        own, through = (f"s3://arrayds-zarr-view/{tmp_path.name}-{n}" for n in ("own", "view"))
        for url in (own, through):  # two copies: each read starts with no open reader
            arrayds.to_arrayrecord(x, url, chunks=2, storage_options=opts)
        a = arrayds.open_array(own, storage_options=opts)
        assert a.nshards == 1  # one shard of 16 chunks
        proxy.stats.reset()
        np.testing.assert_array_equal(a[...], x)
        own_requests = proxy.stats.snapshot()["requests"]
        store = arrayds.zarr.open_store(through, storage_options=opts)
        z = zarr.open_array(store, mode="r")
        keys = [(f"c/{i}/{j}", None) for i in range(4) for j in range(4)]
        proxy.stats.reset()
        got = sync(store.get_partial_values(default_buffer_prototype(), keys))
        # the 16 gets are one engine read of the shard, as arrayds' own read is
        assert proxy.stats.snapshot()["requests"] == own_requests
        for (key, _), buf in zip(keys, got, strict=True):
            i, j = map(int, key.split("/")[1:])
            assert (
                chunk_of(buf, "<f8", (2, 2)).tolist()
                == x[2 * i : 2 * i + 2, 2 * j : 2 * j + 2].tolist()
            )
        np.testing.assert_array_equal(z[...], x)
    finally:
        proxy.stop()
