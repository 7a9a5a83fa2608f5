"""The array read path decodes chunks into their final place (Reader.read_into):
results equal the general path (engine bytes + decode_chunk) on every dtype, are
writable and never shared, and records with another valid .npy header still read."""

from __future__ import annotations

import io
import itertools

import numpy as np
import pytest

import arrayds
from arrayds import ArrayRecordReader, ArrayRecordWriter
from arrayds.kinds.array.grid import parse_selection
from arrayds.kinds.array.handle import _Plan
from arrayds.kinds.array.tensor import decode_chunk
from arrayds.nodes.shards import clear_reader_cache, node_shard_reader

from .test_array import CHUNKS, DTYPES, SHAPES, sample


def old_path_chunk(a: arrayds.Array, coord: tuple[int, ...]) -> np.ndarray:
    """A chunk as the general path decodes it: the record's bytes, then decode_chunk."""
    m = a.manifest
    e, r = m.table.locate_one(list(coord))
    shape = tuple(ax.offset_size_int(c)[1] for ax, c in zip(m.grid.axes, coord, strict=True))
    reader = node_shard_reader(a.store, a.path, m.table.entries[e].path)
    return decode_chunk(reader.read(r), m.dtype, shape, "chunk")


def general_path_chunks(a: arrayds.Array, key: tuple[slice, ...]) -> tuple[list[int], np.ndarray]:
    """Fetch ``key`` as Array._read does; returns the chunks that the in-place path
    left to the general path (``put``) and the output."""
    sel = parse_selection(key, a.shape, "x")
    plan = _Plan(a.manifest, sel)
    out = np.empty(sel.work_shape, dtype=a.dtype)
    called: list[int] = []
    a._fetch(plan, np.flatnonzero(plan.entry >= 0), lambda k, i, c: called.append(k), out)
    return called, out.reshape(sel.shape)


def chunk_box(a: arrayds.Array, coord: tuple[int, ...]) -> tuple[slice, ...]:
    out = []
    for ax, c in zip(a.manifest.grid.axes, coord, strict=True):
        off, size = ax.offset_size_int(c)
        out.append(slice(off, off + size))
    return tuple(out)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_every_dtype_equals_the_general_path(tmp_path, dtype, ndim):
    data = sample(dtype, SHAPES[ndim], seed=ndim)
    a = arrayds.open_array(
        str(tmp_path / "ds"), "x", mode="w", shape=data.shape, dtype=dtype, chunks=CHUNKS[ndim]
    )
    a[...] = data
    grid = [range(len(c)) for c in a.chunks]
    for coord in itertools.product(*grid):
        got = a[chunk_box(a, coord)]  # exactly one chunk: decoded into a new buffer
        want = old_path_chunk(a, coord)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        assert got.flags.writeable and got.flags.c_contiguous
    whole = a[...]  # chunks decoded straight into the output
    np.testing.assert_array_equal(whole, data)
    assert whole.flags.writeable
    called, out = general_path_chunks(a, (slice(None),) * ndim)
    assert called == []  # every chunk was decoded in place
    np.testing.assert_array_equal(out, data)
    # partial chunks (general path) next to whole ones, strided output boxes
    sub = tuple(slice(1, None) for _ in range(ndim))
    np.testing.assert_array_equal(a[sub], data[sub])
    np.testing.assert_array_equal(a.to_dask().compute(), data)


def test_results_are_private_and_writable(tmp_path):
    a = arrayds.open_array(
        str(tmp_path / "ds"), "x", mode="w", shape=(8, 6), dtype="<f4", chunks=(4, 3)
    )
    data = np.arange(48, dtype="<f4").reshape(8, 6)
    a[...] = data
    for key in [(slice(0, 4), slice(0, 3)), (slice(0, 8), slice(0, 6)), (slice(0, 4), slice(0, 6))]:
        first = a[key]
        first[...] = -1
        np.testing.assert_array_equal(a[key], data[key])  # a later read is unaffected
    block = a.to_dask().blocks[1, 1].compute()
    assert block.flags.writeable
    block += 1
    np.testing.assert_array_equal(a[4:8, 3:6], data[4:8, 3:6])


@pytest.mark.parametrize("url_kind", ["local", "memory"])
def test_records_with_another_valid_header_still_read(tmp_path, url_kind):
    """A shard written by another implementation (.npy 2.0 headers): the engine's
    size/prefix check fails, and the general path decodes every record."""
    import uuid

    url = str(tmp_path / "ds") if url_kind == "local" else f"memory://into-{uuid.uuid4().hex}"
    a = arrayds.open_array(url, "x", mode="w", shape=(6, 4), dtype="<i2", chunks=(3, 2))
    data = np.arange(24, dtype="<i2").reshape(6, 4)
    a[...] = data
    (entry,) = a.manifest.table.entries
    path = a.store.path("x", entry.path)
    if not a.store.local:
        path = a.store.fs.unstrip_protocol(path)
    with ArrayRecordReader(path, storage_options=None) as r:
        records = r.read_all()
        options = r.writer_options_string() or ""
    rewritten = []
    for k, rec in enumerate(records):
        chunk = decode_chunk(rec, np.dtype("<i2"), (3, 2), "chunk")
        buf = io.BytesIO()
        np.lib.format.write_array(buf, np.ascontiguousarray(chunk), version=(2, 0))
        rewritten.append(buf.getvalue())
        assert rewritten[-1] != rec, k
    with ArrayRecordWriter(path, options) as w:
        w.write_many(rewritten)
    clear_reader_cache()
    b = arrayds.open_array(url, "x")
    called, _ = general_path_chunks(b, (slice(None), slice(None)))
    assert sorted(called) == [0, 1, 2, 3]  # the in-place path declined, nothing lost
    np.testing.assert_array_equal(b[...], data)
    np.testing.assert_array_equal(b[0:3, 2:4], data[0:3, 2:4])
    np.testing.assert_array_equal(b[1:5, 1:3], data[1:5, 1:3])
    assert b[0:3, 0:2].flags.writeable
    np.testing.assert_array_equal(b.to_dask().compute(), data)
