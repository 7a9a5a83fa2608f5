"""Chunk-grid arithmetic and selection planning (no I/O)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arrayds.kinds.array.grid import (
    AxisGrid,
    AxisSelection,
    ChunkGrid,
    decode_runs,
    encode_runs,
    normalize_chunks,
    ortho_key,
    parse_selection,
    plan_axis,
)


def test_runs_round_trip_and_huge_axis_is_small():
    sizes = (4, 4, 4, 2, 7, 7)
    assert decode_runs(encode_runs(sizes)) == sizes
    ax = AxisGrid.regular(10**8, 10**4)
    assert ax.runs == [[10**4, 10**4]]
    assert ax.nchunks == 10**4 and ax.length == 10**8
    idx = np.array([0, 9_999, 10_000, 10**8 - 1])
    assert ax.chunk_of(idx).tolist() == [0, 0, 1, 9_999]


def test_irregular_axis_lookups_match_brute_force():
    sizes = [3, 3, 1, 5, 5, 5, 2]
    ax = AxisGrid.from_sizes(sizes)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    for i in range(ax.length):
        c = int(np.searchsorted(bounds, i, side="right") - 1)
        assert ax.chunk_of(np.array(i)) == c
    cs = np.arange(len(sizes))
    assert ax.offset_of(cs).tolist() == bounds[:-1].tolist()
    assert ax.size_of(cs).tolist() == sizes
    assert [p for p in range(ax.length + 1) if ax.is_boundary(p)] == bounds.tolist()
    assert ax.sub(2, 5).sizes() == (1, 5, 5)
    assert ax.sub(0, 2).concat(AxisGrid.from_sizes([9])).sizes() == (3, 3, 9)


def test_axis_rejects_bad_runs():
    with pytest.raises(ValueError, match="size and count must be >= 1"):
        AxisGrid([[0, 3]])


def test_chunk_grid_shapes():
    g = ChunkGrid.from_chunks(((4, 4, 2), (5, 0, 5)))
    assert g.shape == (10, 10) and g.grid_shape == (3, 2) and g.nchunks == 6
    assert g.chunk_shape((2, 1)) == (2, 5)
    assert g.chunk_slices((1, 1)) == (slice(4, 8), slice(5, 10))
    assert ChunkGrid([]).nchunks == 1  # a 0-d array is one chunk
    assert ChunkGrid.regular((0, 3), (2, 3)).chunks == ((0,), (3,))


@pytest.mark.parametrize(
    "spec,shape,expected",
    [
        (4, (10,), ((4, 4, 2),)),
        ((None, -1), (3, 2), ((3,), (2,))),
        (((1, 2), 5), (3, 7), ((1, 2), (5, 2))),
        ({0: 2}, (3, 2), ((2, 1), (2,))),
        (5, (0,), ((0,),)),
    ],
)
def test_normalize_chunks(spec, shape, expected):
    assert normalize_chunks(spec, shape) == expected


def test_normalize_chunks_auto_targets_megabytes():
    chunks = normalize_chunks("auto", (10_000, 10_000), itemsize=4)
    nbytes = max(chunks[0]) * max(chunks[1]) * 4
    assert 1 << 20 <= nbytes <= 8 << 20


@pytest.mark.parametrize(
    "spec,message",
    [
        ((2,), "expected one per axis"),
        (0, "must be >= 1"),
        (((1, 1), 2), "sum to 2, expected the axis length 3"),
        ("big", "must be an int, a tuple or 'auto'"),
    ],
)
def test_normalize_chunks_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        normalize_chunks(spec, (3, 4), name="arr")


def test_parse_selection_shapes_and_errors():
    sel = parse_selection((Ellipsis, None, 2), (4, 5, 6))
    assert sel.shape == (4, 5, 1) and sel.work_shape == (4, 5, 1)
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 5"):
        parse_selection((0, 5), (4, 5), "arr")
    with pytest.raises(IndexError, match="too many indices"):
        parse_selection((0, 0, 0), (4, 5), "arr")
    with pytest.raises(IndexError, match="use a.oindex"):
        parse_selection(([0], [1]), (4, 5), "arr")
    with pytest.raises(IndexError, match="single ellipsis"):
        parse_selection((..., ...), (4, 5))
    with pytest.raises(ValueError, match="step cannot be zero"):
        parse_selection(slice(None, None, 0), (4,))
    with pytest.raises(IndexError, match="boolean index along axis 0 has shape"):
        parse_selection(np.ones(3, bool), (4,))
    with pytest.raises(IndexError, match="are valid indices"):
        parse_selection("a", (4,))
    assert parse_selection(([0, 1], [1]), (4, 5), orthogonal=True).shape == (2, 1)


def _brute_force(grid: AxisGrid, sel: AxisSelection) -> np.ndarray:
    """Element -> output mapping through the plan, checked against indices()."""
    n = grid.length
    data = np.arange(n) * 10 + 1
    out = np.full(sel.count, -1)
    plan = plan_axis(grid, sel)
    offs = grid.offset_of(plan.chunks)
    sizes = grid.size_of(plan.chunks)
    for c, o, s, loc, dst, full in zip(
        plan.chunks, offs, sizes, plan.local, plan.out, plan.full, strict=True
    ):
        chunk = data[o : o + s]
        out[dst] = chunk[loc]
        if full:
            assert len(chunk[loc]) == s and (chunk[loc] == chunk).all()
        assert grid.chunk_of(np.array(o)) == c
    assert np.unique(plan.chunks).size == plan.chunks.size
    return out


@st.composite
def axis_and_selection(draw):
    sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=8))
    grid = AxisGrid.from_sizes(sizes)
    n = grid.length
    kind = draw(st.sampled_from(["slice", "array", "bool"]))
    if kind == "slice":
        start = draw(st.none() | st.integers(-n - 2, n + 2))
        stop = draw(st.none() | st.integers(-n - 2, n + 2))
        step = draw(st.none() | st.integers(-4, 4).filter(lambda s: s != 0))
        key = slice(start, stop, step)
        return grid, AxisSelection.from_slice(key, n), np.arange(n)[key]
    if kind == "array":
        idx = draw(st.lists(st.integers(-n, n - 1), max_size=12))
        return grid, AxisSelection.from_array(idx, n, "a", 0), np.arange(n)[np.array(idx, int)]
    mask = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return grid, AxisSelection.from_array(mask, n, "a", 0), np.arange(n)[mask]


@given(axis_and_selection())
@settings(max_examples=300, deadline=None)
def test_plan_axis_matches_numpy(case):
    grid, sel, expected_idx = case
    out = _brute_force(grid, sel)
    assert out.tolist() == (expected_idx * 10 + 1).tolist()
    assert sel.indices().tolist() == expected_idx.tolist()


def test_ortho_key_uses_ix_only_for_two_arrays():
    x = np.arange(20).reshape(4, 5)
    k = ortho_key([np.array([0, 3]), slice(1, 3)])
    assert x[k].tolist() == [[1, 2], [16, 17]]
    k = ortho_key([np.array([3, 0]), slice(4, None, -2), np.array([0])])
    y = np.arange(60).reshape(4, 5, 3)
    assert y[k].shape == (2, 3, 1)
    assert y[k][:, :, 0].tolist() == y[[3, 0]][:, 4::-2, 0].tolist()
