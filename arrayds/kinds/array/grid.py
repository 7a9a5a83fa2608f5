"""Chunk-grid arithmetic and selection planning for chunked N-d arrays.

Nothing here does I/O. A chunk grid is stored run-length encoded per axis
(``[[size, count], ...]``, see docs/spec.md section 4), so an axis of 10**4 equal
chunks costs one run, and every lookup below is vectorized over runs, never a Python
loop over chunks of the whole array.

* :class:`AxisGrid` — one axis: element index <-> chunk index, chunk offsets/lengths.
* :class:`ChunkGrid` — the N-d grid (a tuple of :class:`AxisGrid`).
* :func:`normalize_chunks` — user chunk specs -> per-axis tuples (no dask needed).
* :func:`parse_selection` — numpy basic / orthogonal indexing -> per-axis
  :class:`AxisSelection` (an int64 index array or a slice), plus how to shape the result.
* :func:`plan_axis` — one axis selection -> the chunks it touches, and for each the
  selection inside the chunk and the destination in the output (slices when possible).

>>> g = ChunkGrid.from_chunks(((4, 4, 2), (5, 5)))
>>> g.nchunks, g.shape
(6, (10, 10))
>>> g.axes[0].chunk_of(np.array([0, 3, 4, 9]))
array([0, 0, 1, 2])
>>> plan = plan_axis(g.axes[0], AxisSelection.from_slice(slice(2, 9, 3), 10))
>>> plan.chunks.tolist()
[0, 1, 2]
>>> plan.local
[slice(2, 3, 3), slice(1, 2, 3), slice(0, 1, 3)]
>>> plan.out
[slice(0, 1, None), slice(1, 2, None), slice(2, 3, None)]
"""

from __future__ import annotations

import bisect
import math
import numbers
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "AxisGrid",
    "AxisPlan",
    "AxisSelection",
    "ChunkGrid",
    "Selection",
    "decode_runs",
    "encode_runs",
    "normalize_chunks",
    "parse_selection",
    "plan_axis",
]


# ----------------------------------------------------------------- run-length codes


def encode_runs(sizes: Sequence[int]) -> list[list[int]]:
    """Chunk lengths of one axis -> ``[[size, count], ...]`` (adjacent equal merged).

    >>> encode_runs([4, 4, 4, 2])
    [[4, 3], [2, 1]]
    >>> encode_runs([])
    []
    """
    runs: list[list[int]] = []
    for s in sizes:
        s = int(s)
        if runs and runs[-1][0] == s:
            runs[-1][1] += 1
        else:
            runs.append([s, 1])
    return runs


def decode_runs(runs: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """``[[size, count], ...]`` -> the tuple of chunk lengths (materialized).

    >>> decode_runs([[4, 3], [2, 1]])
    (4, 4, 4, 2)
    """
    out: list[int] = []
    for size, count in runs:
        out.extend([int(size)] * int(count))
    return tuple(out)


# ------------------------------------------------------------------------- grids


class AxisGrid:
    """The chunking of one axis, as runs of equal chunk lengths.

    ``length`` elements split into ``nchunks`` chunks; chunk ``c`` covers elements
    ``[offset_of(c), offset_of(c) + size_of(c))``. All lookups accept int64 arrays.

    >>> ax = AxisGrid([[10, 3], [5, 1]])
    >>> ax.length, ax.nchunks
    (35, 4)
    >>> ax.offset_of(np.array([0, 3])), ax.size_of(np.array([2, 3]))
    (array([ 0, 30]), array([10,  5]))
    """

    __slots__ = (
        "runs",
        "length",
        "nchunks",
        "_regular",
        "_c0l",
        "_e0l",
        "_sizesl",
        "_arrays",
    )

    def __init__(self, runs: Sequence[Sequence[int]]) -> None:
        clean: list[list[int]] = []
        for run in runs:
            size, count = int(run[0]), int(run[1])
            if size < 1 or count < 1:
                raise ValueError(f"chunk run {list(run)}: size and count must be >= 1")
            if clean and clean[-1][0] == size:
                clean[-1][1] += count
            else:
                clean.append([size, count])
        self.runs = clean
        # plain lists: a grid is made on every open and append; the int64 arrays of
        # the vectorized lookups are made when one is first used (_np)
        c0, e0 = [0], [0]
        for size, count in clean:
            c0.append(c0[-1] + count)
            e0.append(e0[-1] + size * count)
        self._c0l = c0
        self._e0l = e0
        self._sizesl = [size for size, _count in clean]
        self.nchunks = c0[-1]
        self.length = e0[-1]
        self._regular = len(clean) == 1
        self._arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def _np(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(chunk sizes of the runs, first chunk of each run and the end, first element
        of each run and the end) as int64 arrays."""
        if self._arrays is None:
            self._arrays = (
                np.array(self._sizesl, dtype=np.int64),
                np.array(self._c0l, dtype=np.int64),
                np.array(self._e0l, dtype=np.int64),
            )
        return self._arrays

    @property
    def _sizes(self) -> np.ndarray:
        return self._np()[0]

    @property
    def _c0(self) -> np.ndarray:
        return self._np()[1]

    @property
    def _e0(self) -> np.ndarray:
        return self._np()[2]

    @classmethod
    def from_sizes(cls, sizes: Sequence[int]) -> AxisGrid:
        """From explicit chunk lengths (dask-style), e.g. ``(4, 4, 2)``."""
        return cls(encode_runs(sizes))

    @classmethod
    def regular(cls, length: int, chunk: int) -> AxisGrid:
        """``length`` elements in chunks of ``chunk`` (the last one may be shorter)."""
        if length == 0:
            return cls([])
        full, rest = divmod(length, chunk)
        runs = [[chunk, full]] if full else []
        if rest:
            runs.append([rest, 1])
        return cls(runs)

    # -- lookups (vectorized)

    def _run_of_chunk(self, c: np.ndarray) -> np.ndarray:
        if self._regular:
            return np.zeros(np.shape(c), dtype=np.int64)
        return np.searchsorted(self._c0, c, side="right") - 1

    # -- scalar lookups (plain ints, no numpy overhead: the hot path of small reads)

    def chunk_of_int(self, i: int) -> int:
        """Element index -> chunk index, for one int."""
        if self._regular:
            return i // self._sizesl[0]
        r = bisect.bisect_right(self._e0l, i) - 1
        return self._c0l[r] + (i - self._e0l[r]) // self._sizesl[r]

    def offset_size_int(self, c: int) -> tuple[int, int]:
        """Chunk index -> (first element, length), for one int."""
        if self._regular:
            size = self._sizesl[0]
            return c * size, size
        r = bisect.bisect_right(self._c0l, c) - 1
        size = self._sizesl[r]
        return self._e0l[r] + (c - self._c0l[r]) * size, size

    def chunk_of(self, idx: np.ndarray) -> np.ndarray:
        """Element indices (0 <= i < length) -> chunk indices."""
        idx = np.asarray(idx, dtype=np.int64)
        if self._regular:
            return idx // self._sizes[0]
        r = np.searchsorted(self._e0, idx, side="right") - 1
        return self._c0[r] + (idx - self._e0[r]) // self._sizes[r]

    def offset_of(self, c: np.ndarray) -> np.ndarray:
        """Chunk indices -> the index of their first element."""
        c = np.asarray(c, dtype=np.int64)
        if self._regular:
            return c * self._sizes[0]
        r = self._run_of_chunk(c)
        return self._e0[r] + (c - self._c0[r]) * self._sizes[r]

    def size_of(self, c: np.ndarray) -> np.ndarray:
        """Chunk indices -> chunk lengths."""
        c = np.asarray(c, dtype=np.int64)
        if self._regular:
            return np.full(np.shape(c), self._sizes[0], dtype=np.int64)
        return self._sizes[self._run_of_chunk(c)]

    def boundaries(self) -> np.ndarray:
        """All chunk boundaries ``[0, ..., length]`` (materialized: O(nchunks))."""
        return np.concatenate([[0], np.cumsum(self.sizes())]).astype(np.int64)

    def sizes(self) -> tuple[int, ...]:
        """All chunk lengths (materialized: O(nchunks))."""
        return decode_runs(self.runs)

    def is_boundary(self, pos: int) -> bool:
        """Whether element position ``pos`` (0..length) starts a chunk or is the end."""
        if pos == self.length or pos == 0:
            return True
        if pos < 0 or pos > self.length:
            return False
        c = int(self.chunk_of(np.array([pos]))[0])
        return int(self.offset_of(np.array([c]))[0]) == pos

    def nominal(self) -> int:
        """The length of the first chunk (0 for an empty axis)."""
        return self._sizesl[0] if self._sizesl else 0

    def sub(self, c_start: int, c_stop: int) -> AxisGrid:
        """The grid of chunks ``[c_start, c_stop)`` of this axis."""
        if c_stop <= c_start:
            return AxisGrid([])
        sizes: list[list[int]] = []
        for (size, _count), a, b in zip(self.runs, self._c0l[:-1], self._c0l[1:], strict=False):
            lo, hi = max(a, c_start), min(b, c_stop)
            if hi > lo:
                sizes.append([size, hi - lo])
        return AxisGrid(sizes)

    def concat(self, other: AxisGrid) -> AxisGrid:
        """This axis followed by ``other`` (used by appends)."""
        return AxisGrid(self.runs + other.runs)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AxisGrid) and self.runs == other.runs

    def __hash__(self) -> int:
        return hash(tuple(map(tuple, self.runs)))

    def __repr__(self) -> str:
        return f"AxisGrid({self.runs})"


class ChunkGrid:
    """An N-d chunk grid: one :class:`AxisGrid` per axis (0-d: one chunk).

    >>> g = ChunkGrid.regular((10, 7), (4, 7))
    >>> g.chunks, g.grid_shape
    (((4, 4, 2), (7,)), (3, 1))
    """

    __slots__ = ("axes",)

    def __init__(self, axes: Sequence[AxisGrid]) -> None:
        self.axes = tuple(axes)

    @classmethod
    def regular(cls, shape: Sequence[int], chunks: Sequence[int]) -> ChunkGrid:
        return cls([AxisGrid.regular(int(n), int(c)) for n, c in zip(shape, chunks, strict=False)])

    @classmethod
    def from_chunks(cls, chunks: Sequence[Sequence[int]]) -> ChunkGrid:
        """From dask-style chunks (zero-length chunks are dropped)."""
        return cls([AxisGrid.from_sizes([c for c in cs if c]) for cs in chunks])

    @classmethod
    def from_runs(cls, runs: Sequence[Sequence[Sequence[int]]]) -> ChunkGrid:
        return cls([AxisGrid(r) for r in runs])

    @property
    def ndim(self) -> int:
        return len(self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(ax.length for ax in self.axes)

    @property
    def grid_shape(self) -> tuple[int, ...]:
        """Number of chunks along each axis."""
        return tuple(ax.nchunks for ax in self.axes)

    @property
    def nchunks(self) -> int:
        return math.prod(self.grid_shape)

    @property
    def chunks(self) -> tuple[tuple[int, ...], ...]:
        """Dask-style chunks; an empty axis is ``(0,)`` as dask spells it."""
        return tuple(ax.sizes() or (0,) for ax in self.axes)

    def runs(self) -> list[list[list[int]]]:
        return [ax.runs for ax in self.axes]

    def chunk_shape(self, coord: Sequence[int]) -> tuple[int, ...]:
        """The shape of the chunk at grid coordinate ``coord``."""
        return tuple(int(ax.size_of(np.array(c))) for ax, c in zip(self.axes, coord, strict=False))

    def chunk_slices(self, coord: Sequence[int]) -> tuple[slice, ...]:
        """The element slices covered by the chunk at ``coord``."""
        out = []
        for ax, c in zip(self.axes, coord, strict=False):
            o = int(ax.offset_of(np.array(c)))
            out.append(slice(o, o + int(ax.size_of(np.array(c)))))
        return tuple(out)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChunkGrid) and self.axes == other.axes

    def __hash__(self) -> int:
        return hash(self.axes)

    def __repr__(self) -> str:
        return f"ChunkGrid({[ax.runs for ax in self.axes]})"


# ------------------------------------------------------------------ chunk specs


def normalize_chunks(
    chunks: Any, shape: Sequence[int], itemsize: int = 1, name: str = "array"
) -> tuple[tuple[int, ...], ...]:
    """A user chunk spec -> dask-style per-axis chunk lengths.

    Accepts an int (every axis), a tuple with one entry per axis (an int, ``-1`` or
    ``None`` for the whole axis, or an explicit tuple of lengths), or ``"auto"``
    (about 4 MiB per chunk, square-ish; uses dask's rule when dask is installed).

    >>> normalize_chunks(4, (10, 3))
    ((4, 4, 2), (3,))
    >>> normalize_chunks((None, (1, 2)), (2, 3))
    ((2,), (1, 2))
    >>> normalize_chunks(((1, 2),), (4,))
    Traceback (most recent call last):
    ...
    ValueError: array: chunks (1, 2) along axis 0 sum to 3, expected the axis length 4
    """
    shape = tuple(int(n) for n in shape)
    ndim = len(shape)
    if isinstance(chunks, str):
        if chunks != "auto":
            raise ValueError(f"{name}: chunks must be an int, a tuple or 'auto', got {chunks!r}")
        return _auto_chunks(shape, itemsize)
    if isinstance(chunks, numbers.Integral) and not isinstance(chunks, bool):
        chunks = (int(chunks),) * ndim
    if isinstance(chunks, dict):
        chunks = tuple(chunks.get(i, chunks.get(i - ndim, -1)) for i in range(ndim))
    if not isinstance(chunks, (tuple, list)):
        raise TypeError(
            f"{name}: chunks must be an int, a tuple or 'auto', got {type(chunks).__name__}"
        )
    if len(chunks) != ndim:
        raise ValueError(
            f"{name}: chunks {tuple(chunks)!r} have {len(chunks)} entries, expected one per "
            f"axis of shape {shape} ({ndim})"
        )
    out: list[tuple[int, ...]] = []
    for axis, (c, n) in enumerate(zip(chunks, shape, strict=False)):
        if c is None or (isinstance(c, numbers.Integral) and int(c) == -1):
            out.append((n,) if n else (0,))
        elif isinstance(c, numbers.Integral) and not isinstance(c, bool):
            c = int(c)
            if c < 1:
                raise ValueError(f"{name}: chunk length {c} along axis {axis} must be >= 1")
            out.append(AxisGrid.regular(n, c).sizes() or (0,))
        elif isinstance(c, (tuple, list)):
            sizes = tuple(int(s) for s in c)
            if any(s < 0 for s in sizes):
                raise ValueError(f"{name}: negative chunk length in {sizes} along axis {axis}")
            if sum(sizes) != n:
                raise ValueError(
                    f"{name}: chunks {sizes} along axis {axis} sum to {sum(sizes)}, expected "
                    f"the axis length {n}"
                )
            out.append(tuple(s for s in sizes if s) or (0,))
        else:
            raise TypeError(
                f"{name}: chunk spec {c!r} along axis {axis} must be an int, -1, None or a "
                f"tuple of lengths"
            )
    return tuple(out)


def _auto_chunks(shape: tuple[int, ...], itemsize: int) -> tuple[tuple[int, ...], ...]:
    target = 4 << 20
    try:
        from dask.array.core import normalize_chunks as dask_normalize

        return tuple(
            tuple(c) for c in dask_normalize("auto", shape, limit=target, dtype=f"V{itemsize}")
        )
    except ImportError:  # pragma: no cover - dask is a test dependency
        pass
    ndim = len(shape)
    if ndim == 0:
        return ()
    side = max(1, int((target / max(itemsize, 1)) ** (1.0 / ndim)))
    return tuple(AxisGrid.regular(n, min(max(n, 1), side)).sizes() or (0,) for n in shape)


# ---------------------------------------------------------------------- selection


@dataclass(frozen=True)
class AxisSelection:
    """What one axis of a selection picks, in output order.

    Either a ``slice`` (``start``, ``step`` and ``count`` describe it; ``step`` may be
    negative) or an int64 array ``index`` of element indices (repeats and any order
    allowed). ``drop`` is True for an integer index, whose axis disappears.
    """

    count: int
    start: int = 0
    step: int = 1
    index: np.ndarray | None = None
    drop: bool = False

    @classmethod
    def from_slice(cls, s: slice, n: int) -> AxisSelection:
        start, stop, step = s.indices(n)
        count = len(range(start, stop, step))
        return cls(count=count, start=start, step=step)

    @classmethod
    def from_int(cls, i: int, n: int, name: str, axis: int) -> AxisSelection:
        if i < -n or i >= n:
            raise IndexError(f"{name}: index {i} is out of bounds for axis {axis} with size {n}")
        return cls(count=1, start=i % n if n else 0, step=1, drop=True)

    @classmethod
    def from_array(cls, idx: Any, n: int, name: str, axis: int) -> AxisSelection:
        arr = np.asarray(idx)
        if arr.dtype.kind == "b":
            if arr.ndim != 1 or arr.shape[0] != n:
                raise IndexError(
                    f"{name}: boolean index along axis {axis} has shape {arr.shape}, "
                    f"expected ({n},)"
                )
            arr = np.flatnonzero(arr)
        elif arr.size == 0:
            arr = np.empty(0, dtype=np.int64)
        elif arr.dtype.kind not in "iu":
            raise IndexError(
                f"{name}: index along axis {axis} must be integers or booleans, got dtype "
                f"{arr.dtype}"
            )
        if arr.ndim != 1:
            raise IndexError(
                f"{name}: integer index along axis {axis} must be 1-d, got shape {arr.shape}"
            )
        arr = arr.astype(np.int64, copy=False)
        if arr.size:
            lo, hi = int(arr.min()), int(arr.max())
            if hi >= n or lo < -n:
                bad = hi if hi >= n else lo
                raise IndexError(
                    f"{name}: index {bad} is out of bounds for axis {axis} with size {n}"
                )
            if lo < 0:
                arr = np.where(arr < 0, arr + n, arr)
        return cls(count=int(arr.size), index=arr)

    @property
    def is_slice(self) -> bool:
        return self.index is None

    def indices(self) -> np.ndarray:
        """The selected element indices in output order (materialized)."""
        if self.index is not None:
            return self.index
        return self.start + self.step * np.arange(self.count, dtype=np.int64)


@dataclass(frozen=True)
class Selection:
    """A parsed selection: one :class:`AxisSelection` per array axis plus the final
    result shape. The result is assembled in ``work_shape`` (one axis per array axis,
    integer-indexed axes of length 1), then reshaped to ``shape`` (dropped axes
    removed, ``np.newaxis`` axes inserted)."""

    axes: tuple[AxisSelection, ...]
    shape: tuple[int, ...]

    @property
    def work_shape(self) -> tuple[int, ...]:
        return tuple(a.count for a in self.axes)

    @property
    def size(self) -> int:
        return math.prod(self.work_shape)


def box_selection(key: Sequence[slice], shape: Sequence[int]) -> Selection | None:
    """A tuple of step-1 slices with non-negative bounds inside ``shape`` (what dask's
    ``from_array`` passes) -> :class:`Selection`, skipping the general parser; None if
    ``key`` is anything else."""
    if len(key) != len(shape):
        return None
    axes = []
    for k, n in zip(key, shape, strict=True):
        if type(k) is not slice or k.step not in (None, 1):
            return None
        a = 0 if k.start is None else k.start
        b = n if k.stop is None else k.stop
        if type(a) is not int or type(b) is not int or not 0 <= a <= b <= n:
            return None
        axes.append(AxisSelection(count=b - a, start=a))
    return Selection(axes=tuple(axes), shape=tuple(a.count for a in axes))


def _is_int(k: Any) -> bool:
    if isinstance(k, (bool, np.bool_)):
        return False
    if isinstance(k, numbers.Integral):
        return True
    if isinstance(k, np.ndarray) and k.ndim == 0 and k.dtype.kind in "iu":
        return True
    return False


def _is_array_like(k: Any) -> bool:
    return isinstance(k, (list, np.ndarray)) or (
        hasattr(k, "__array__") and not isinstance(k, (slice, type(Ellipsis)))
    )


def parse_selection(
    key: Any, shape: Sequence[int], name: str = "array", orthogonal: bool = False
) -> Selection:
    """A numpy-style key -> :class:`Selection`.

    Basic indexing (ints, slices with any step, ``...``, ``np.newaxis``) always works.
    Integer and boolean arrays are orthogonal: each picks along its own axis. With
    ``orthogonal=False`` (plain ``a[...]``) at most one array is allowed, where numpy's
    result is the same; two or more raise ``IndexError`` pointing at ``oindex``.

    >>> sel = parse_selection((1, slice(None, None, -2), None), (3, 5))
    >>> sel.shape, [a.count for a in sel.axes]
    ((3, 1), [1, 3])
    """
    shape = tuple(int(n) for n in shape)
    ndim = len(shape)
    if not isinstance(key, tuple):
        key = (key,)
    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError(f"{name}: an index can only have a single ellipsis ('...')")
    consumed = sum(1 for k in key if k is not None and k is not Ellipsis)
    if consumed > ndim:
        raise IndexError(
            f"{name}: too many indices: the array is {ndim}-dimensional, but {consumed} "
            f"were indexed"
        )
    expanded: list[Any] = []
    for k in key:
        if k is Ellipsis:
            expanded.extend([slice(None)] * (ndim - consumed))
        else:
            expanded.append(k)
    if n_ellipsis == 0:
        expanded.extend([slice(None)] * (ndim - consumed))

    axes: list[AxisSelection] = []
    out_shape: list[int] = []
    n_arrays = 0
    axis = 0
    for k in expanded:
        if k is None:
            out_shape.append(1)
            continue
        n = shape[axis]
        if isinstance(k, slice):
            for part in (k.start, k.stop, k.step):
                if part is not None and not _is_int(part):
                    raise IndexError(
                        f"{name}: slice {k} along axis {axis} must have integer bounds"
                    )
            if k.step is not None and operator.index(k.step) == 0:
                raise ValueError(f"{name}: slice step cannot be zero (axis {axis})")
            sel = AxisSelection.from_slice(
                slice(
                    None if k.start is None else operator.index(k.start),
                    None if k.stop is None else operator.index(k.stop),
                    None if k.step is None else operator.index(k.step),
                ),
                n,
            )
            out_shape.append(sel.count)
        elif _is_int(k):
            sel = AxisSelection.from_int(operator.index(k), n, name, axis)
        elif isinstance(k, (bool, np.bool_)):
            raise IndexError(f"{name}: a boolean scalar is not a valid index (axis {axis})")
        elif _is_array_like(k):
            n_arrays += 1
            sel = AxisSelection.from_array(k, n, name, axis)
            out_shape.append(sel.count)
        else:
            raise IndexError(
                f"{name}: only integers, slices (':'), ellipsis ('...'), numpy.newaxis "
                f"(None) and integer or boolean arrays are valid indices, got "
                f"{type(k).__name__} for axis {axis}"
            )
        axes.append(sel)
        axis += 1
    if n_arrays > 1 and not orthogonal:
        raise IndexError(
            f"{name}: more than one array index; use a.oindex[...] for orthogonal (outer) indexing"
        )
    return Selection(axes=tuple(axes), shape=tuple(out_shape))


# ----------------------------------------------------------------- axis planning


@dataclass(frozen=True)
class AxisPlan:
    """The chunks one axis selection touches.

    ``chunks[j]`` is a chunk index; ``local[j]`` selects inside that chunk and
    ``out[j]`` is where those elements go along this axis of the output (both a slice
    or an int64 array, in matching order). ``full[j]`` says whether the chunk is taken
    whole, in order (a write need not read it first).
    """

    chunks: np.ndarray
    local: list[slice | np.ndarray]
    out: list[slice | np.ndarray]
    full: np.ndarray
    sizes: list[int]


_SMALL = 64  # up to this many chunks along an axis, plan with plain ints


def _plan_ascending_small(grid: AxisGrid, start: int, step: int, count: int) -> AxisPlan | None:
    """The plan of an ascending slice in plain Python (None if it spans too many
    chunks, where the vectorized path is faster)."""
    last = start + (count - 1) * step
    c0 = grid.chunk_of_int(start)
    c1 = grid.chunk_of_int(last)
    if c1 - c0 >= _SMALL:
        return None
    chunks: list[int] = []
    local: list[slice | np.ndarray] = []
    out: list[slice | np.ndarray] = []
    full: list[bool] = []
    sizes: list[int] = []
    for c in range(c0, c1 + 1):
        off, size = grid.offset_size_int(c)
        k_lo = max(0, -((start - off) // step))
        k_hi = min(count, -((start - off - size) // step))
        if k_hi <= k_lo:
            continue
        lstart = start + k_lo * step - off
        lstop = start + (k_hi - 1) * step - off + 1
        chunks.append(c)
        local.append(slice(lstart, lstop, step))
        out.append(slice(k_lo, k_hi))
        full.append(step == 1 and lstart == 0 and lstop == size)
        sizes.append(size)
    return AxisPlan(np.array(chunks, dtype=np.int64), local, out, np.array(full, dtype=bool), sizes)


def _plan_ascending(
    grid: AxisGrid, start: int, step: int, count: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For elements start + k*step (k < count, step > 0): touched chunks with the
    k-range [k_lo, k_hi) falling in each, plus chunk offsets and lengths."""
    last = start + (count - 1) * step
    c0 = int(grid.chunk_of(np.array(start)))
    c1 = int(grid.chunk_of(np.array(last)))
    cs = np.arange(c0, c1 + 1, dtype=np.int64)
    off = grid.offset_of(cs)
    size = grid.size_of(cs)
    k_lo = np.maximum(0, -((start - off) // step))  # ceil((off - start) / step)
    k_hi = np.minimum(count, -((start - off - size) // step))
    keep = k_hi > k_lo
    return cs[keep], k_lo[keep], k_hi[keep], off[keep], size[keep]


def plan_axis(grid: AxisGrid, sel: AxisSelection) -> AxisPlan:
    """Map one axis selection onto the chunks of ``grid``.

    >>> ax = AxisGrid.regular(10, 4)
    >>> p = plan_axis(ax, AxisSelection.from_slice(slice(None, None, -3), 10))
    >>> p.chunks.tolist(), p.local
    ([0, 1, 2], [slice(3, None, -3), slice(2, 1, -3), slice(1, 0, -3)])
    >>> p.out
    [slice(2, 4, None), slice(1, 2, None), slice(0, 1, None)]
    >>> p = plan_axis(ax, AxisSelection.from_array([9, 0, 8], 10, "a", 0))
    >>> p.chunks.tolist(), [x.tolist() for x in p.local], p.out
    ([0, 2], [[0], [1, 0]], [slice(1, 2, None), array([0, 2])])
    """
    empty = AxisPlan(np.empty(0, dtype=np.int64), [], [], np.empty(0, dtype=bool), [])
    if sel.count == 0:
        return empty
    if sel.index is None:
        step = sel.step
        if step > 0:
            small = _plan_ascending_small(grid, sel.start, step, sel.count)
            if small is not None:
                return small
            cs, k_lo, k_hi, off, size = _plan_ascending(grid, sel.start, step, sel.count)
            lstart = sel.start + k_lo * step - off
            lstop = sel.start + (k_hi - 1) * step - off + 1
            local = [slice(int(a), int(b), step) for a, b in zip(lstart, lstop, strict=False)]
            out = [slice(int(a), int(b)) for a, b in zip(k_lo, k_hi, strict=False)]
            full = (lstart == 0) & (lstop == size) & (step == 1)
            return AxisPlan(cs, local, out, full, size.tolist())
        # descending: plan the ascending mirror, then reverse within each chunk
        astep = -step
        astart = sel.start + (sel.count - 1) * step
        n = sel.count
        cs, k_lo, k_hi, off, size = _plan_ascending(grid, astart, astep, n)
        lo = astart + k_lo * astep - off  # smallest local index taken
        hi = astart + (k_hi - 1) * astep - off  # largest local index taken
        local = [
            slice(int(h), (int(lw) - 1) if lw > 0 else None, step)
            for h, lw in zip(hi, lo, strict=False)
        ]
        out = [slice(int(n - b), int(n - a)) for a, b in zip(k_lo, k_hi, strict=False)]
        return AxisPlan(cs, local, out, np.zeros(len(cs), dtype=bool), size.tolist())
    idx = sel.index
    ch = grid.chunk_of(idx)
    if idx.size > 1 and np.all(ch[1:] >= ch[:-1]):
        order = None
        sorted_ch = ch
    else:
        order = np.argsort(ch, kind="stable")
        sorted_ch = ch[order]
    cut = np.flatnonzero(sorted_ch[1:] != sorted_ch[:-1]) + 1
    starts = np.concatenate([[0], cut]).astype(np.int64)
    stops = np.concatenate([cut, [idx.size]]).astype(np.int64)
    cs = sorted_ch[starts]
    offs = grid.offset_of(cs)
    sizes = grid.size_of(cs)
    local_l: list[slice | np.ndarray] = []
    out_l: list[slice | np.ndarray] = []
    full = np.zeros(len(cs), dtype=bool)
    for j, (a, b) in enumerate(zip(starts, stops, strict=False)):
        a, b = int(a), int(b)
        if order is None:
            pos: slice | np.ndarray = slice(a, b)
            loc = idx[a:b] - offs[j]
        else:
            p = order[a:b]
            loc = idx[p] - offs[j]
            pos = slice(int(p[0]), int(p[0]) + (b - a)) if p[-1] - p[0] == b - a - 1 else p
        if b - a == sizes[j] and loc[0] == 0 and np.all(np.diff(loc) == 1):
            full[j] = True
            local_l.append(slice(0, int(sizes[j])))
        else:
            local_l.append(loc)
        out_l.append(pos)
    return AxisPlan(cs, local_l, out_l, full, sizes.tolist())


def ortho_key(parts: Sequence[slice | np.ndarray]) -> tuple[Any, ...]:
    """Per-axis slices/arrays -> a numpy key that indexes orthogonally (outer).

    numpy treats one array index orthogonally already; with two or more arrays, all
    array axes go through ``np.ix_`` (slices are expanded only then).
    """
    n_arr = sum(1 for p in parts if not isinstance(p, slice))
    if n_arr <= 1:
        return tuple(parts)
    return _ix(parts)


def _ix(parts: Sequence[slice | np.ndarray]) -> tuple[Any, ...]:
    arrays = []
    for p in parts:
        if isinstance(p, slice):
            start, stop, step = p.start or 0, p.stop, p.step or 1
            if stop is None:
                # only produced for descending slices ending at element 0
                stop = -1
            arrays.append(np.arange(start, stop, step, dtype=np.int64))
        else:
            arrays.append(p)
    return np.ix_(*arrays)
