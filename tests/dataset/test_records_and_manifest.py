"""The .npy chunk records, fill values, compression strings and manifests (no I/O)."""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayds import CorruptionError
from arrayds.kinds.array.manifest import (
    ArrayManifest,
    ShardEntry,
    ShardTable,
    decode_fill_value,
    encode_fill_value,
    make_fill_value,
)
from arrayds.kinds.array.tensor import check_dtype, decode_chunk, encode_chunk, npy_header
from arrayds.kinds.group import GroupManifest
from arrayds.nodes.options import check_compression
from arrayds.nodes.registry import parse_node

DTYPES = [
    "|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8",
    "<c8", "<c16", "<M8[ns]", "<M8[D]", "<m8[us]", "|S5", "<U3", "|V4", ">i4",
]  # fmt: skip


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (1, 2, 3), (2, 1, 2, 2)])
def test_record_is_npy_and_round_trips(dtype, shape):
    dt = np.dtype(dtype)
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * dt.itemsize, dtype=np.uint8)
    arr = np.frombuffer(raw.tobytes(), dtype=dt).reshape(shape)
    rec = encode_chunk(arr)
    header = npy_header(dt, shape)
    assert len(header) % 64 == 0  # data is 64-byte aligned
    assert bytes(rec[: len(header)]) == header
    loaded = np.load(io.BytesIO(rec.tobytes()))  # any numpy reads a chunk
    assert loaded.dtype == dt and loaded.shape == shape
    assert loaded.tobytes() == arr.tobytes()
    back = decode_chunk(rec.tobytes(), dt, shape)
    assert back.tobytes() == arr.tobytes() and not back.flags.writeable


def test_encode_casts_and_handles_non_contiguous():
    x = np.arange(24, dtype=np.int64).reshape(4, 6)[::2, ::3]
    rec = encode_chunk(x, np.dtype("<f4"))
    assert np.load(io.BytesIO(rec.tobytes())).tolist() == x.astype("f4").tolist()


def test_header_of_numpy_int_shape_is_plain_npy():
    # (np.int64(3),) and (3,) share one cache entry; whichever comes first, the
    # header must be one numpy itself can read (ragged code passes numpy ints)
    npy_header.cache_clear()
    npy_header(np.dtype("<f8"), (np.int64(3), np.int64(5)))
    rec = encode_chunk(np.ones((3, 5)))
    assert np.load(io.BytesIO(rec.tobytes())).tolist() == np.ones((3, 5)).tolist()


def test_decode_accepts_any_valid_npy_header():
    x = np.arange(6, dtype="<i2").reshape(2, 3)
    buf = io.BytesIO()
    np.lib.format.write_array(buf, x, version=(2, 0))
    got = decode_chunk(buf.getvalue(), np.dtype("<i2"), (2, 3), "a chunk")
    assert got.tolist() == x.tolist()


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda r: r[:-2], "expected 12 for dtype <i2 shape"),
        (lambda r: b"garbage" + r, "not a .npy array"),
        (lambda r: r.replace(b"'<i2'", b"'<u2'"), "holds dtype <u2 shape"),
        (
            lambda r: r.replace(b"(2, 3)", b"(3, 2)"),
            r"shape \(3, 2\).*expected dtype <i2 shape \(2, 3\)",
        ),
    ],
)
def test_decode_rejects_mismatches(mutate, message):
    rec = encode_chunk(np.zeros((2, 3), "<i2")).tobytes()
    with pytest.raises(CorruptionError, match=message) as e:
        decode_chunk(mutate(rec), np.dtype("<i2"), (2, 3), "array 'x' chunk (0, 0)")
    assert "array 'x' chunk (0, 0)" in str(e.value)


def test_check_dtype_rejections():
    for bad, msg in [
        (object, "not supported"),
        ([("a", "i4")], "structured"),
        ("S0", "has no size"),
        ("M8", "needs a unit"),
    ]:
        with pytest.raises(ValueError, match=msg):
            check_dtype(bad, "arr")


@pytest.mark.parametrize(
    "dtype,value",
    [
        ("<f4", math.nan), ("<f8", math.inf), ("<f2", -math.inf), ("<f8", -0.5),
        ("<c16", complex(math.nan, -math.inf)), ("<c8", 1 + 2j), ("|b1", True),
        ("<u8", 2**64 - 1), ("<i8", -(2**63)), ("<M8[ns]", "NaT"), ("<M8[s]", "2024-01-02"),
        ("<m8[ms]", 1234), ("|S3", b"ab"), ("<U4", "héé"), ("|V2", b"\x01\x02"),
    ],
)  # fmt: skip
def test_fill_values_round_trip_through_json(dtype, value):
    dt = np.dtype(dtype)
    if dt.kind == "V":
        fill = np.frombuffer(value, dtype=dt).reshape(())
    else:
        fill = make_fill_value(value, dt)
    text = json.dumps(encode_fill_value(fill), allow_nan=False)
    back = decode_fill_value(json.loads(text), dt)
    assert back.dtype == dt
    assert back.tobytes() == fill.tobytes() or (
        dt.kind in "fc" and np.isnan(back) == np.isnan(fill)
    )


def test_default_fill_is_zero_bytes_for_every_kind():
    for dt in ["|S4", "<U2", "<M8[ns]", "|V3", "<f8"]:
        assert make_fill_value(0, np.dtype(dt)).tobytes() == bytes(np.dtype(dt).itemsize)


def test_fill_value_errors_name_the_array():
    with pytest.raises(ValueError, match="arr: fill_value 300 cannot be stored as dtype"):
        make_fill_value(300, np.dtype("u1"), "arr")
    for value, dt in [(-1, "u1"), (np.int64(-5), "u4"), (2**63, "i8"), (np.uint64(2**63), "i8")]:
        with pytest.raises(ValueError, match="out of its range"):
            make_fill_value(value, np.dtype(dt), "arr")
    assert make_fill_value(np.int64(-128), np.dtype("i1"), "arr") == -128
    with pytest.raises(ValueError, match="is not an integer"):
        make_fill_value(1.5, np.dtype("i4"), "arr")
    with pytest.raises(ValueError, match="does not fit"):
        decode_fill_value(256, np.dtype("u1"))


def test_compression_strings():
    assert check_compression("zstd") == "zstd:3"
    assert check_compression(" zstd:1 , window_log:18") == "zstd:1,window_log:18"
    assert check_compression("uncompressed") == "uncompressed"
    assert check_compression("brotli") == "brotli:6"
    for bad, msg in [
        ("zstd:99", "out of range"),
        ("gzip", "unknown compression 'gzip'"),
        ("zstd,brotli", "two codecs"),
        ("group_size:4,zstd", "always use group_size:1"),
        ("", "no codec"),
        ("snappy,window_log:20", "conflicts"),
        ("zstd:x", "not an integer"),
    ]:
        with pytest.raises(ValueError, match=msg):
            check_compression(bad, "arr")


def test_array_manifest_round_trip_is_compact_for_huge_grids():
    m = ArrayManifest.new((10**8, 10**8), "<f4", ((10**4,) * 10**4,) * 2, fill_value=math.nan)
    m = m.with_(
        shards=[
            ShardEntry("c/a-0.array_record", (0, 0), (1, 1), 0, 1000),
            ShardEntry("c/a-1.array_record", (5000, 7000), (5001, 7002), 0, 2000),
        ],
        generation=3,
        commit="abc",
    )
    text = json.dumps(m.to_json())
    assert len(text) < 2048
    back = parse_node(json.loads(text), "x")
    assert isinstance(back, ArrayManifest)
    assert back.shape == m.shape and back.grid == m.grid and back.shards == m.shards
    assert back.generation == 3 and math.isnan(back.fill[()])


def _valid() -> dict:
    return ArrayManifest.new((4, 4), "<i4", ((2, 2), (4,))).to_json()


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda d: d.update(format="zarr"), "not an arrayds manifest"),
        (lambda d: d.update(kind="table"), "node kind 'table' is not supported"),
        (lambda d: d.update(shape=[4, -1]), "non-negative ints"),
        (lambda d: d.update(dtype="O"), "manifest dtype"),
        (lambda d: d.update(chunks=[[[2, 1]], [[4, 1]]]), "manifest chunks"),
        (lambda d: d.update(fill_value="x"), "manifest fill_value"),
        (lambda d: d.update(dims=["a"]), "manifest dims"),
        (lambda d: d.update(shards=[{"path": "../x", "start": [0, 0], "stop": [1, 1]}]),
         "must stay inside the node folder"),
        (lambda d: d.update(shards=[{"path": "c/x", "start": [0, 0], "stop": [3, 1]}]),
         "not inside the chunk grid"),
        (lambda d: d.update(shards=[{"path": "c/x", "start": [0, 0], "stop": [1, 1],
                                     "records": 5}]), "the box holds 1 chunks"),
        (lambda d: d.update(shards=[{"path": "c/arrayds.json", "start": [0, 0],
                                     "stop": [1, 1]}]), "reserved name"),
        (lambda d: d.update(shards=[["c/x", [0, 0], [1, 1]]]), "not an object"),
        (lambda d: d.update(shards=[{"path": "c/x", "start": [0, 0], "stop": [1, 1],
                                     "offset": -1}]), "offset -1"),
        (lambda d: d.update(shards=[{"path": "c/x", "start": [0, 0], "stop": [1, 1],
                                     "bytes": "9"}]), "bytes '9'"),
        (lambda d: d.update(shards=[{"path": "c/x", "start": [0], "stop": [1]}]),
         "must have 2 entries"),
        (lambda d: d.pop("shape"), "has no 'shape'"),
    ],
)  # fmt: skip
def test_bad_manifests_are_corruption_errors(change, message):
    d = _valid()
    change(d)
    err = NotImplementedError if "not supported" in message else CorruptionError
    with pytest.raises(err, match=message):
        parse_node(d, "array 'somewhere'")


@pytest.mark.parametrize(
    "entry",
    [
        {"path": "c/x-0.array_record", "start": [0, 0], "stop": [2, 1], "records": 2},
        {"path": "c/x", "start": [1, 0], "stop": [2, 1], "offset": 3, "bytes": 10},
        {"path": "c/x", "start": [True, 0], "stop": [2, 1]},  # a bool is an int in JSON's eyes
        {"path": "c/x", "start": [0, 0], "stop": [1, 1], "records": 1.0},
        {"path": "sub dir/x y", "start": [0, 0], "stop": [1, 1]},  # not a writer's name
    ],
)
def test_shard_entries_parse_the_same_on_the_quick_and_the_checked_path(entry):
    """Entries of the writers' form take a quick path; every other accepted entry the
    field-by-field one: both give the same entry."""
    from arrayds.kinds.array.manifest import _parse_entry, _plain_entry

    d = _valid()
    d["shards"] = [entry]
    m = parse_node(d, "x")
    grid = m.grid
    assert list(m.shards) == [_parse_entry(0, entry, grid.ndim, grid.grid_shape, "x")]
    quick = _plain_entry(entry, grid.ndim, grid.grid_shape)
    assert quick is None or quick == m.shards[0]


def _row_entries(n: int) -> list[dict]:
    return [
        {"path": f"c/w-{i}.array_record", "start": [i, 0], "stop": [i + 1, 1], "records": 1,
         "bytes": 100 + i}
        for i in range(n)
    ]  # fmt: skip


@pytest.mark.parametrize(
    "odd,message",
    [
        ({"path": "../x", "start": [9, 0], "stop": [10, 1]}, "must stay inside the node"),
        ({"path": "c/x", "start": [9, 0], "stop": [99, 1]}, "not inside the chunk grid"),
        ({"path": "c/x", "start": [9, 0], "stop": [9, 1]}, "not inside the chunk grid"),
        ({"path": "c/x", "start": [9, 0], "stop": [10, 1], "records": 2}, "box holds 1"),
        ({"path": "c/x", "start": [9, 0], "stop": [10, 1], "offset": -1}, "offset -1"),
        ({"path": "c/x", "start": [9, 0], "stop": [10, 1], "bytes": -5}, "bytes -5"),
        ({"path": "c/x", "start": [9, 0], "stop": [10, 1], "bytes": 2.5}, "bytes 2.5"),
        ({"path": "c/x", "start": [9.5, 0], "stop": [10, 1]}, "not inside the chunk grid"),
        ({"path": "c/x", "start": [9, 2**70], "stop": [10, 1]}, "not inside the chunk grid"),
        ({"path": "c/arrayds.json", "start": [9, 0], "stop": [10, 1]}, "reserved name"),
        ({"path": "c/x", "start": [9], "stop": [10]}, "must have 2 entries"),
        ({"start": [9, 0], "stop": [10, 1]}, "non-empty string"),
        ("c/x", "not an object"),
        # accepted by the entry-by-entry parse, as in a single entry
        ({"path": "c/x", "start": [9, False], "stop": [10, True]}, None),
        ({"path": "sub dir/x y", "start": [9, 0], "stop": [10, 1]}, None),
        ({"path": "c/x", "start": [9, 0], "stop": [10, 1], "records": 1.0}, None),
    ],
)  # fmt: skip
def test_a_segment_parses_by_columns_as_entry_by_entry(odd, message):
    """A segment-sized list is checked a column at a time; one odd entry sends the
    whole list to the entry-by-entry parse, which names it or accepts it the same."""
    from arrayds.kinds.array.manifest import ShardColumns, _parse_entry, _parse_shards

    grid = ArrayManifest.new((16, 4), "<i4", ((1,) * 16, (4,))).grid
    plain = _row_entries(16)
    cols = ShardColumns.of(_parse_shards(plain, grid, "x"))
    assert [e.to_json() for e in _parse_shards(plain, grid, "x")] == plain
    assert cols.sizes == [100 + i for i in range(16)] and cols.starts[:, 0].tolist() == list(
        range(16)
    )
    raw = [*plain[:9], odd, *plain[10:]]
    if message is not None:
        with pytest.raises(CorruptionError, match=f"shard entry 9: .*{message}"):
            _parse_shards(raw, grid, "x")
    else:
        got = _parse_shards(raw, grid, "x")
        assert got == [_parse_entry(i, e, 2, (16, 1), "x") for i, e in enumerate(raw)]


def test_a_shard_table_of_columns_locates_as_one_of_entries():
    from arrayds.kinds.array.manifest import ShardColumns

    entries = [ShardEntry(f"c/{i % 3}", (i, 0), (i + 2, 2), i, 10 * i) for i in range(12)]
    cols = ShardColumns.of(entries)
    assert list(cols) == entries and cols[-1] == entries[-1] and cols[2:4] == entries[2:4]
    assert list(cols.without(frozenset({0, 5}))) == [e for i, e in enumerate(entries)
                                                     if i not in (0, 5)]  # fmt: skip
    with pytest.raises(IndexError):
        cols[12]
    coords = np.array([[r, c] for r in range(14) for c in range(3)])
    a, b = ShardTable(cols, 2), ShardTable(entries, 2)
    for x, y in zip(a.locate(coords), b.locate(coords), strict=True):
        assert x.tolist() == y.tolist()
    assert a.sizes == b.sizes and a.records_per_path() == b.records_per_path()
    assert ShardColumns.joined([cols[:3], cols.without(frozenset(range(3)))], 2).paths == (
        cols.paths
    )


def test_newer_format_version_is_refused_clearly():
    d = _valid()
    d["format_version"] = 4
    with pytest.raises(NotImplementedError, match="format version 4 is newer"):
        parse_node(d, "x")


def test_group_manifest():
    g = parse_node(GroupManifest(attrs={"a": 1}, generation=2).to_json(), "g")
    assert isinstance(g, GroupManifest) and g.attrs == {"a": 1} and g.generation == 2


@st.composite
def boxes_and_coords(draw):
    ndim = draw(st.integers(0, 3))
    gshape = tuple(draw(st.integers(1, 5)) for _ in range(ndim))
    n = draw(st.integers(0, 8))
    entries = []
    for i in range(n):
        start = tuple(draw(st.integers(0, g - 1)) for g in gshape)
        stop = tuple(draw(st.integers(a + 1, g)) for a, g in zip(start, gshape, strict=True))
        entries.append(ShardEntry(f"c/{i}", start, stop, draw(st.integers(0, 3))))
    return gshape, entries


@given(boxes_and_coords())
@settings(max_examples=200, deadline=None)
def test_locate_matches_last_containing_box(case):
    gshape, entries = case
    table = ShardTable(entries, len(gshape))
    scan = ShardTable(entries, len(gshape))
    scan.CELL_LIMIT = 0  # force the entry scan used for very fragmented histories
    coords = np.array(list(np.ndindex(*gshape)), dtype=np.int64).reshape(
        len(list(np.ndindex(*gshape))), len(gshape)
    )
    entry, record = table.locate(coords)
    e2, r2 = scan.locate(coords)
    assert e2.tolist() == entry.tolist() and r2.tolist() == record.tolist()
    for i, c in enumerate(coords):  # the single-coordinate path agrees too
        e1, r1 = table.locate(c[None, :])
        assert (int(e1[0]), int(r1[0])) == (int(entry[i]), int(record[i]))
    covered = 0
    for c, e, r in zip(coords, entry, record, strict=True):
        want = -1
        for i, s in enumerate(entries):
            if all(a <= x < b for a, x, b in zip(s.start, c, s.stop, strict=True)):
                want = i
        assert e == want
        if want >= 0:
            covered += 1
            s = entries[want]
            ext = tuple(b - a for a, b in zip(s.start, s.stop, strict=True))
            rel = tuple(int(x - a) for x, a in zip(c, s.start, strict=True))
            assert r == s.offset + (np.ravel_multi_index(rel, ext) if ext else 0)
        else:
            assert r == -1
    assert table.covered_count(gshape) == covered


def test_locate_scales_to_many_entries_in_blocks():
    entries = [ShardEntry(f"c/{i}", (i, 0), (i + 1, 100), 0) for i in range(3000)]
    table = ShardTable(entries, 2)
    table._BLOCK = 1 << 12  # force several blocks of the scan
    table.CELL_LIMIT = 0
    coords = np.array([[i, j] for i in range(0, 3000, 7) for j in (0, 99)])
    entry, record = table.locate(coords)
    assert entry.tolist() == coords[:, 0].tolist()
    assert record.tolist() == coords[:, 1].tolist()
