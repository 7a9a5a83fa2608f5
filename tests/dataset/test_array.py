"""Arrays on a real store (local folder and memory://) through the real engine."""

from __future__ import annotations

import json
import math
import os
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayds
from arrayds.kinds.array.handle import Array
from arrayds.nodes.commit import manifest_key
from arrayds.nodes.shards import node_shard_reader

DTYPES = [
    "|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8",
    "<c8", "<c16", "<M8[ns]", "<M8[D]", "<m8[s]", "|S7", "<U5",
]  # fmt: skip
SHAPES = {0: (), 1: (11,), 2: (7, 5), 3: (4, 3, 5), 4: (3, 2, 4, 3)}
CHUNKS = {0: (), 1: (4,), 2: (3, 2), 3: (2, 3, 2), 4: (2, 1, 3, 2)}


def sample(dtype: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    dt = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if dt.kind == "b":
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
    if dt.kind == "f":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind in "Mm":
        return rng.integers(-(2**40), 2**40, size=shape).astype("i8").view(dt)
    if dt.kind == "S":
        return np.array([b"x%dy" % i for i in range(n)], dtype=dt).reshape(shape)
    return np.array([f"é{i}" for i in range(n)], dtype=dt).reshape(shape)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ndim", [0, 1, 2, 3, 4])
def test_round_trip_every_dtype_and_ndim(tmp_path, dtype, ndim):
    url = str(tmp_path / "ds")
    data = sample(dtype, SHAPES[ndim])
    g = arrayds.open(url, mode="w")
    a = g.create_array("x", SHAPES[ndim], dtype, CHUNKS[ndim])
    a[...] = data
    b = arrayds.open_array(url, "x")
    got = b[...]
    assert got.dtype == np.dtype(dtype) and got.shape == data.shape
    assert got.tobytes() == data.tobytes()
    assert b.nchunks_initialized == b.nchunks
    if ndim:
        assert b[tuple(slice(1, None) for _ in range(ndim))].tobytes() == (
            data[tuple(slice(1, None) for _ in range(ndim))].tobytes()
        )


def test_round_trip_on_memory_store(url):
    data = sample("<f8", (20, 30))
    a = arrayds.open_array(url, "grp/arr", mode="w", shape=(20, 30), dtype="f8", chunks=(6, 7))
    a[:] = data
    b = arrayds.open_array(url, "grp/arr")
    np.testing.assert_array_equal(b[...], data)
    np.testing.assert_array_equal(np.asarray(b), data)
    assert list(arrayds.open(url)) == ["grp"]


@st.composite
def basic_keys(draw, shape):
    key = []
    for n in shape:
        kind = draw(st.sampled_from(["int", "slice", "all"]))
        if kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "slice":
            key.append(
                slice(
                    draw(st.none() | st.integers(-n - 3, n + 3)),
                    draw(st.none() | st.integers(-n - 3, n + 3)),
                    draw(st.none() | st.integers(-5, 5).filter(bool)),
                )
            )
        else:
            key.append(slice(None))
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), None)
    if draw(st.booleans()) and key:
        i = draw(st.integers(0, len(key) - 1))
        key = key[:i] + [Ellipsis] + [k for k in key[i:] if k is None or draw(st.booleans())]
    return tuple(key)


@st.composite
def ortho_keys(draw, shape):
    key = []
    for n in shape:
        kind = draw(st.sampled_from(["ints", "bools", "slice", "int"]))
        if kind == "ints":
            key.append(np.array(draw(st.lists(st.integers(-n, n - 1), max_size=6)), dtype=int))
        elif kind == "bools":
            key.append(np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n))))
        elif kind == "int":
            key.append(draw(st.integers(-n, n - 1)))
        else:
            key.append(
                slice(
                    draw(st.none() | st.integers(-n, n)),
                    None,
                    draw(st.none() | st.integers(-3, 3).filter(bool)),
                )
            )
    return tuple(key)


def numpy_oindex(x: np.ndarray, key: tuple) -> np.ndarray:
    out = x
    axis = 0
    for k in key:
        if isinstance(k, (int, np.integer)):
            out = np.take(out, k, axis=axis)
            continue
        if isinstance(k, np.ndarray) and k.dtype == bool:
            k = np.flatnonzero(k)
        if isinstance(k, np.ndarray):
            out = np.take(out, k, axis=axis)
        else:
            out = out[(slice(None),) * axis + (k,)]
        axis += 1
    return out


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """A 3-d array with an irregular grid, partly written (fill NaN elsewhere)."""
    url = str(tmp_path_factory.mktemp("hyp") / "ds")
    data = np.random.default_rng(1).standard_normal((13, 9, 6))
    chunks = ((3, 3, 1, 4, 2), (2, 2, 5), (6,))
    a = arrayds.open_array(
        url, mode="w", shape=data.shape, dtype="f8", chunks=chunks, fill_value=np.nan
    )
    a[:10, 2:] = data[:10, 2:]
    expected = np.full(data.shape, np.nan)
    expected[:10, 2:] = data[:10, 2:]
    return arrayds.open_array(url), expected


@given(data=st.data())
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_basic_selection_equals_numpy(stored, data):
    a, expected = stored
    key = data.draw(basic_keys(expected.shape))
    try:
        want = expected[key]
    except IndexError:
        with pytest.raises(IndexError):
            a[key]
        return
    got = a[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@given(data=st.data())
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_orthogonal_selection_equals_numpy(stored, data):
    a, expected = stored
    key = data.draw(ortho_keys(expected.shape))
    got = a.oindex[key]
    want = numpy_oindex(expected, key)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@given(data=st.data())
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_setitem_equals_numpy(tmp_path_factory, data):
    url = str(tmp_path_factory.mktemp("set") / "ds")
    shape = (7, 6)
    a = arrayds.open_array(url, mode="w", shape=shape, dtype="i4", chunks=((2, 3, 2), (4, 2)))
    expected = np.zeros(shape, "i4")
    for step in range(3):
        if data.draw(st.booleans()):
            key = data.draw(basic_keys(shape))
            value = np.asarray(data.draw(st.integers(-100, 100)), "i4")
            try:
                expected[key] = value
            except IndexError:
                with pytest.raises(IndexError):
                    a[key] = value
                continue
            a[key] = value
        else:
            key = data.draw(ortho_keys(shape))
            sub = numpy_oindex(expected, key)
            value = np.arange(sub.size, dtype="i4").reshape(sub.shape) + 1000 * step
            a.oindex[key] = value
            # write through numpy the orthogonal way
            idx = []
            for k, n in zip(key, shape, strict=True):
                if isinstance(k, (int, np.integer)):
                    idx.append(np.array([k % n]))
                elif isinstance(k, np.ndarray):
                    idx.append(np.flatnonzero(k) if k.dtype == bool else k % n)
                else:
                    idx.append(np.arange(n)[k])
            expected[np.ix_(*idx)] = value.reshape([len(i) for i in idx])
    np.testing.assert_array_equal(a[...], expected)
    np.testing.assert_array_equal(arrayds.open_array(url)[...], expected)


def test_setitem_rmw_keeps_neighbours_and_stacks_shards(url):
    a = arrayds.open_array(url, mode="w", shape=(10, 10), dtype="i2", chunks=(4, 4), fill_value=-1)
    a[:, :] = np.arange(100, dtype="i2").reshape(10, 10)
    a[5, 5] = 999  # inside one chunk: read, modify, rewrite
    a[::3, 9] = 7  # strided column across three chunk rows
    want = np.arange(100, dtype="i2").reshape(10, 10)
    want[5, 5] = 999
    want[::3, 9] = 7
    np.testing.assert_array_equal(a[...], want)
    assert a.generation == 4 and a.nshards >= 2
    a[:, :] = 0  # hides every older entry: they are dropped from the manifest
    assert a.nshards == 1
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.zeros((10, 10)))


def test_fill_values_for_chunks_never_written(url):
    g = arrayds.open(url, mode="w")
    cases = {
        "f": ("f4", np.nan), "c": ("c16", complex(1, np.inf)), "t": ("M8[ns]", "NaT"),
        "b": ("?", True), "s": ("S3", b"zz"), "u": ("U2", "é"), "i": ("u8", 2**64 - 1),
    }  # fmt: skip
    for name, (dtype, fill) in cases.items():
        g.create_array(name, (5, 4), dtype, 2, fill_value=fill)
    g2 = arrayds.open(url)
    for name, (dtype, fill) in cases.items():
        a = g2[name]
        want = np.full((5, 4), fill, dtype=dtype)
        np.testing.assert_array_equal(a[...], want)
        assert a.nchunks_initialized == 0
        assert np.array(a.fill_value, dtype=dtype).tobytes() == want[:1, 0].tobytes()


def test_append_grows_and_fills_the_partial_chunk(url):
    a = arrayds.open_array(url, mode="w", shape=(0, 3), dtype="f4", chunks=(4, 3))
    parts = [np.full((n, 3), i, "f4") for i, n in enumerate([3, 2, 9, 1])]
    shapes = [a.append(p) for p in parts]
    assert shapes == [(3, 3), (5, 3), (14, 3), (15, 3)]
    assert a.chunks == ((4, 4, 4, 3), (3,))
    want = np.concatenate(parts)
    np.testing.assert_array_equal(a[...], want)
    b = arrayds.open_array(url)
    assert b.shape == (15, 3)
    np.testing.assert_array_equal(b[...], want)
    # along another axis, with casting from a smaller int kind
    c = arrayds.open_array(url + "-2", "c", mode="w", shape=(2, 2), dtype="i8", chunks=2)
    c[:] = 1
    assert c.append(np.array([[5], [6]], dtype="i2"), axis=1) == (2, 3)
    assert c[...].tolist() == [[1, 1, 5], [1, 1, 6]]


def test_append_errors_name_the_array(url):
    a = arrayds.open_array(url, "x", mode="w", shape=(4, 3), dtype="i4", chunks=2)
    with pytest.raises(
        ValueError, match=r"array '.*x'.*shape \(2, 4\) along axis 0: expected shape \(n, 3\)"
    ):
        a.append(np.zeros((2, 4), "i4"))
    with pytest.raises(ValueError, match="dtype float64 to an array of dtype int32"):
        a.append(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="cannot append to a 0-d array"):
        arrayds.open_array(url, "z", mode="w", shape=(), dtype="i4", chunks=()).append(1)
    assert arrayds.open_array(url, "x").shape == (4, 3)


def test_huge_sparse_array(url, stats):
    n, c = 10**8, 10**4
    a = arrayds.open_array(
        url, mode="w", shape=(n, n), dtype="f4", chunks=(c, c), fill_value=np.nan
    )
    blocks = {(0, 0): 1.0, (5_000, 7_000): 2.0, (9_999, 9_999): 3.0}
    for (i, j), v in blocks.items():
        a[i * c : (i + 1) * c, j * c : (j + 1) * c] = np.full((c, c), v, "f4")
    raw = arrayds.open(url).store.get_versioned(manifest_key(""))[0]
    assert len(raw) < 4096  # a few KiB for 10**8 chunks
    b = arrayds.open_array(url)
    assert b.nchunks == 10**8 and b.nchunks_initialized == 3
    stats_before = stats()
    # a region straddling a written chunk and fill chunks, at once
    r0, c0 = 5_000 * c - 2, 7_000 * c - 3
    got = b[r0 : r0 + 5, c0 : c0 + 6]
    want = np.full((5, 6), np.nan, "f4")
    want[2:, 3:] = 2.0
    np.testing.assert_array_equal(got, want)
    assert stats()["records_read"] - stats_before["records_read"] == 1
    assert b[n - 1, n - 1] == 3.0 and math.isnan(b[n - 1, 0])


def test_only_touched_chunks_are_read_in_one_call_per_shard(local_url, stats):
    data = np.arange(64 * 64, dtype="i4").reshape(64, 64)
    arrayds.to_arrayrecord(data, local_url, mode="w", chunks=8)  # one shard
    a = arrayds.open_array(local_url)
    stats()  # zeroed by the fixture
    np.testing.assert_array_equal(a[3:20, 9:10], data[3:20, 9:10])
    s = stats()
    assert s == {"reader_opens": 1, "read_calls": 1, "records_read": 3}
    a[40, ::16]  # 4 chunks of one chunk row
    s = stats()
    assert s["reader_opens"] == 1 and s["read_calls"] == 2 and s["records_read"] == 7
    a.oindex[[0, 63], [0, 63]]  # 4 corner chunks
    assert stats()["records_read"] == 11
    a[0:0]  # nothing touched
    assert stats()["read_calls"] == 3


def test_several_shards_read_once_each(local_url, stats):
    import dask.array as da

    x = da.from_array(np.arange(40 * 40, dtype="f8").reshape(40, 40), chunks=10)
    arrayds.to_arrayrecord(x, local_url, mode="w", shard_size=10 * 40 * 8)  # 4 row shards
    a = arrayds.open_array(local_url)
    assert a.nshards == 4
    stats()
    np.testing.assert_array_equal(a[...], x.compute())
    assert stats() == {"reader_opens": 4, "read_calls": 4, "records_read": 16}
    a[...]
    assert stats()["reader_opens"] == 4  # footers are read once per process


def test_modes(url):
    with pytest.raises(FileNotFoundError, match="no arrayds dataset at"):
        arrayds.open(url)
    with pytest.raises(FileNotFoundError, match="no arrayds array at"):
        arrayds.open_array(url, "x")
    g = arrayds.open(url, mode="a")
    assert g.mode == "r+" and len(g) == 0
    a = arrayds.open_array(url, "x", mode="w-", shape=(4,), dtype="i8", chunks=2)
    a[:] = 1
    with pytest.raises(FileExistsError, match="already exists"):
        arrayds.open_array(url, "x", mode="w-", shape=(4,), dtype="i8", chunks=2)
    # The node exists: that is the answer, before any complaint about the arguments.
    with pytest.raises(FileExistsError, match=r"/x' already exists") as info:
        arrayds.open_array(url, "x", mode="w-")
    assert info.value.filename.endswith("/x")
    with pytest.raises(FileExistsError, match="already exists"):
        arrayds.open_array(url, mode="w-")  # the root group
    with pytest.raises(TypeError, match="pass shape="):
        arrayds.open_array(url, "y", mode="w-")  # nothing there: the arguments are missing
    with pytest.raises(FileExistsError):
        g.create_array("x", (4,), "i8", 2)
    assert arrayds.open_array(url, "x")[...].tolist() == [1, 1, 1, 1]
    r = arrayds.open_array(url, "x")
    with pytest.raises(PermissionError, match="read-only"):
        r[0] = 5
    with pytest.raises(PermissionError):
        r.append([1])
    with pytest.raises(PermissionError):
        r.attrs["a"] = 1
    with pytest.raises(PermissionError):
        arrayds.open(url).create_array("y", (1,), "i1", 1)
    rp = arrayds.open_array(url, "x", mode="r+")
    rp[0] = 5
    assert arrayds.open_array(url, "x", mode="a")[...].tolist() == [5, 1, 1, 1]
    w = arrayds.open_array(url, "x", mode="w", shape=(2,), dtype="f4", chunks=1)
    assert w[...].tolist() == [0.0, 0.0] and w.generation > rp.generation
    with pytest.raises(TypeError, match="pass shape=, dtype= and chunks="):
        arrayds.open_array(url, "new", mode="w")
    assert arrayds.open_array(url, "new", mode="a", shape=(3,), dtype="u1", chunks=3).shape == (3,)
    with pytest.raises(ValueError, match="mode must be one of"):
        arrayds.open_array(url, "x", mode="rw")
    with pytest.raises(ValueError, match="is a group node, not an array"):
        arrayds.open_array(url)
    # 'w' on the root replaces the whole tree
    arrayds.open(url, mode="w")
    assert list(arrayds.open(url)) == []


def test_w_replacing_an_array_removes_its_shards(local_url):
    a = arrayds.open_array(local_url, "x", mode="w", shape=(8,), dtype="i4", chunks=2)
    a[:] = np.arange(8)
    shard_dir = os.path.join(local_url, "x", "c")
    assert len(os.listdir(shard_dir)) == 1
    arrayds.open_array(local_url, "x", mode="w", shape=(8,), dtype="i4", chunks=2)
    # its files go one by one (a folder removed whole could take a shard another
    # writer uploaded after the listing: arrayds.nodes.pending)
    assert os.listdir(shard_dir) == []
    assert arrayds.open_array(local_url, "x")[...].tolist() == [0] * 8


def test_group_api(url):
    g = arrayds.open(url, mode="w")
    g.attrs.update(title="t", n=3)
    sub = g.create_group("a", attrs={"k": [1, 2]})
    sub.create_array("b", (2, 3), "i4", (1, 3), dims=("y", "x"), attrs={"units": "m"})
    g.create_array("c/d/e", (4,), "f2", 2)
    assert g.require_group("a") == sub
    with pytest.raises(FileExistsError):
        g.create_group("a")
    g2 = arrayds.open(url)
    assert sorted(g2) == ["a", "c"] and len(g2) == 2
    assert dict(g2.attrs) == {"title": "t", "n": 3}
    assert g2["a"].attrs["k"] == [1, 2]
    b = g2["a/b"]
    assert isinstance(b, Array) and b.dims == ("y", "x") and b.attrs["units"] == "m"
    assert isinstance(g2["c/d"], arrayds.Group) and "c/d/e" in g2 and "zz" not in g2
    assert [n for n, _ in g2.arrays()] == [] and [n for n, _ in g2.groups()] == ["a", "c"]
    with pytest.raises(KeyError, match="'nope' is not a node"):
        g2["nope"]
    text = repr(g2.tree())
    assert text.splitlines() == [
        "/",
        "├── a",
        "│   └── b (2, 3) int32",
        "└── c",
        "    └── d",
        "        └── e (4,) float16",
    ]
    assert "<pre>" in g2.tree()._repr_html_() and "arrayds.Group" in g2._repr_html_()
    assert "2 members" in repr(g2)
    with pytest.raises(ValueError, match="is an array node, not a group"):
        g.create_array("a/b/c", (1,), "i1", 1)
    for bad in ["../x", "/abs", "a//b", "a\\b", ".", "a/../b"]:
        with pytest.raises(ValueError):
            g.create_array(bad, (1,), "i1", 1)
        with pytest.raises(ValueError):
            arrayds.open_array(url, bad)


def test_attrs_persist_and_validate(url):
    a = arrayds.open_array(url, mode="w", shape=(2,), dtype="i1", chunks=1, attrs={"a": 1})
    a.attrs["b"] = {"c": [1, "x"]}
    del a.attrs["a"]
    assert dict(arrayds.open_array(url).attrs) == {"b": {"c": [1, "x"]}}
    with pytest.raises(TypeError, match="JSON-serializable"):
        a.attrs["bad"] = object()
    with pytest.raises(TypeError, match="JSON-serializable"):
        a.attrs["nan"] = float("nan")


def test_metadata_info_repr_and_pickle(url):
    a = arrayds.open_array(
        url,
        "m",
        mode="w",
        shape=(10, 4),
        dtype="<f4",
        chunks=((3, 7), 4),
        fill_value=1.5,
        compression="zstd:1",
        dims=["t", "x"],
    )
    a[:3] = 2.0
    assert a.shape == (10, 4) and a.ndim == 2 and a.dtype == np.float32
    assert a.chunks == ((3, 7), (4,)) and a.nchunks == 2 and a.nchunks_initialized == 1
    assert a.fill_value == 1.5 and a.compression == "zstd:1" and a.dims == ("t", "x")
    assert len(a) == 10 and a.size == 40 and a.nbytes == 160
    info = a.info
    assert info["Shape"] == "(10, 4)" and info["Chunks initialized"] == "1/2"
    assert info["Compression"] == "zstd:1" and "irregular" in info["Chunks"]
    assert "Stored bytes" in repr(info) and "<table>" in a._repr_html_()
    assert "shape=(10, 4)" in repr(a) and "float32" in repr(a)
    b = pickle.loads(pickle.dumps(a))
    assert b.mode == a.mode and b.generation == a.generation
    np.testing.assert_array_equal(b[...], a[...])


def test_compression_options_are_used(url):
    for comp in ["uncompressed", "zstd:1", "brotli:3", "snappy"]:
        if comp.split(":")[0] != "uncompressed" and not arrayds.codecs().get(comp.split(":")[0]):
            continue
        a = arrayds.open_array(
            url, comp, mode="w", shape=(100,), dtype="i8", chunks=10, compression=comp
        )
        a[:] = np.arange(100)
        b = arrayds.open_array(url, comp)
        assert b[...].tolist() == list(range(100))
        relpath = b.manifest.shards[0].path
        r = node_shard_reader(b.store, b.path, relpath)
        assert comp.split(":")[0] in r.writer_options_string()
        assert "group_size:1" in r.writer_options_string()
    with pytest.raises(ValueError, match="unknown compression 'lz9'"):
        arrayds.open_array(
            url, "bad", mode="w", shape=(1,), dtype="i1", chunks=1, compression="lz9"
        )
    assert "bad" not in arrayds.open(url)


def test_shards_are_plain_arrayrecord_files_of_npy_records(local_url):
    from array_record.python.array_record_module import ArrayRecordReader

    a = arrayds.open_array(local_url, mode="w", shape=(6, 4), dtype="<i8", chunks=(3, 2))
    data = np.arange(24).reshape(6, 4)
    a[...] = data
    entry = a.manifest.shards[0]
    r = ArrayRecordReader(os.path.join(local_url, entry.path))  # the official reader
    recs = r.read(list(range(r.num_records())))
    import io

    chunks = [np.load(io.BytesIO(x)) for x in recs]
    assert [c.shape for c in chunks] == [(3, 2)] * 4
    np.testing.assert_array_equal(chunks[1], data[:3, 2:])  # C order of the box
    manifest = json.loads(open(os.path.join(local_url, "arrayds.json")).read())
    assert manifest["format"] == "arrayds" and manifest["kind"] == "array"
    assert manifest["shards"][0]["records"] == 4


def test_irregular_grid_and_0d(url):
    a = arrayds.open_array(url, "irr", mode="w", shape=(10,), dtype="i4", chunks=((1, 5, 4),))
    a[:] = np.arange(10)
    assert arrayds.open_array(url, "irr")[2:9:3].tolist() == [2, 5, 8]
    z = arrayds.open_array(url, "z", mode="w", shape=(), dtype="c8", chunks=(), fill_value=1j)
    assert z[()] == 1j and z.nchunks == 1 and z.nchunks_initialized == 0
    z[...] = 3 + 4j
    assert arrayds.open_array(url, "z")[...] == 3 + 4j
    e = arrayds.open_array(url, "e", mode="w", shape=(0, 5), dtype="f4", chunks=(2, 5))
    assert e[...].shape == (0, 5) and e.nchunks == 0


def test_exact_chunk_reads_take_the_short_path(url, stats):
    a = arrayds.open_array(url, mode="w", shape=(8, 6), dtype="i4", chunks=(4, 3), fill_value=-7)
    a[:4, :] = np.arange(24, dtype="i4").reshape(4, 6)
    b = arrayds.open_array(url)
    stats()
    got = b[0:4, 3:6]
    assert got.tolist() == np.arange(24).reshape(4, 6)[:, 3:].tolist()
    assert got.flags.writeable  # a copy the caller owns
    got[0, 0] = 100
    assert b[0:4, 3:6][0, 0] == 3
    assert stats()["records_read"] == 2
    assert (b[4:8, 0:3] == -7).all()  # never written: fill, no read
    assert stats()["records_read"] == 2
    assert b.read_block((slice(4, 8), slice(3, 6))).tolist() == [[-7] * 3] * 4
    view = b.read_block((slice(0, 4), slice(0, 3)), zero_copy=True)
    assert view.flags.writeable and view[1, 1] == 7  # decoded into its own buffer
