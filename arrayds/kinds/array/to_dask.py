"""A dask array over a stored array: one task per shard box on object stores, the
stored chunks as the blocks the user sees (:func:`array_to_dask`, what
``Array.to_dask`` and ``from_arrayrecord`` return).

>>> import arrayds, numpy as np
>>> a = arrayds.open_array("memory://doc-to-dask", mode="w", shape=(4,), dtype="i4", chunks=2)
>>> a[:] = np.arange(4, dtype="i4")
>>> x = array_to_dask(a)
>>> x.chunks, int(x.sum().compute())
(((2, 2),), 6)
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from ...storage.coalesce import Coalesce, coalescing, explicit_options

if TYPE_CHECKING:
    from .handle import Array

ZERO_COPY_BLOCKS = False
"""Kept for compatibility; no effect. A dask block that is exactly one stored chunk is
always decoded by the engine into a new writable buffer and returned without a copy."""


class ArraySource:
    """What ``dask.array.from_array`` slices: reads a box of whole chunks with one
    batched engine read per shard. Pickles as the array's URL plus its manifest
    snapshot; a worker process rebuilds it once and reuses its cached shard readers.
    """

    __slots__ = ("_a", "_coalesce", "shape", "dtype", "ndim")

    def __init__(self, a: Array, coalesce: Coalesce | None = None) -> None:
        self._a = a
        # the coalescing block the graph was made in (its tasks run elsewhere)
        self._coalesce = coalesce if coalesce is not None else explicit_options()
        self.shape = a.shape
        self.dtype = a.dtype
        self.ndim = a.ndim

    def __getitem__(self, key: tuple[slice, ...]) -> np.ndarray:
        opts = self._coalesce
        if opts is None:
            return self._a.read_block(key, zero_copy=ZERO_COPY_BLOCKS)
        with coalescing(opts.gap, opts.max_size, opts.max_ratio):
            return self._a.read_block(key, zero_copy=ZERO_COPY_BLOCKS)

    def read_into(self, key: tuple[slice, ...], out: np.ndarray) -> None:
        """Read the box ``key`` (step-1 slices) into ``out`` (an array of its shape,
        e.g. a view of a larger result): whole chunks are decoded straight into it."""
        opts = self._coalesce
        if opts is None:
            self._a.read_block(key, out=out)
            return
        with coalescing(opts.gap, opts.max_size, opts.max_ratio):
            self._a.read_block(key, out=out)

    @property
    def stored_bytes(self) -> int | None:
        """The bytes of the array's shard files (None if the manifest does not record
        them): what a read of the whole array fetches, for budgeting reads in flight."""
        return self._a.stored_bytes

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        a = self._a
        return ("arrayds", a.store.canonical_url, a.path, a.generation, a.manifest.commit)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ArraySource, (self._a, self._coalesce))

    def __repr__(self) -> str:
        return f"ArraySource({self._a!r})"


def _snap(bounds: np.ndarray, stored: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(stored, bounds, side="right") - 1
    return np.unique(np.concatenate([[stored[0]], stored[idx], [stored[-1]]]))


def read_chunks(a: Array, chunks: Any = None) -> tuple[tuple[int, ...], ...]:
    """The dask chunks for reading ``a``: the stored grid (``None``), one block per
    shard box (``"shards"``), ``"auto"`` (dask's size target, snapped to whole
    stored chunks) or an explicit spec whose boundaries must be stored chunk
    boundaries (``ValueError`` naming the expected boundaries otherwise)."""
    grid = a.grid
    what = a.what
    if chunks is None:
        return grid.chunks
    if any(ax.length == 0 for ax in grid.axes):
        return grid.chunks
    if isinstance(chunks, str) and chunks == "shards":
        out = []
        table = a.manifest.table
        for d, ax in enumerate(grid.axes):
            cb = np.unique(np.concatenate([table.starts[:, d], table.stops[:, d], [0, ax.nchunks]]))
            eb = np.unique(np.concatenate([ax.offset_of(cb[cb < ax.nchunks]), [ax.length]]))
            out.append(tuple(int(s) for s in np.diff(eb)))
        return tuple(out)
    from dask.array.core import normalize_chunks

    if isinstance(chunks, str) and chunks == "auto":
        req = normalize_chunks(
            "auto", a.shape, dtype=a.dtype, previous_chunks=tuple(max(1, c) for c in a.chunk_shape)
        )
        out = []
        for ax, cs in zip(grid.axes, req, strict=False):
            bounds = np.concatenate([[0], np.cumsum(cs)])
            eb = _snap(bounds, ax.boundaries())
            out.append(tuple(int(s) for s in np.diff(eb)))
        return tuple(out)
    req = normalize_chunks(chunks, a.shape, dtype=a.dtype)
    for d, (ax, cs) in enumerate(zip(grid.axes, req, strict=False)):
        bounds = np.cumsum(cs)[:-1]
        for b in bounds.tolist():
            if not ax.is_boundary(int(b)):
                c = int(ax.chunk_of(np.array(b)))
                lo = int(ax.offset_of(np.array(c)))
                hi = lo + int(ax.size_of(np.array(c)))
                raise ValueError(
                    f"{what}: chunks={chunks!r} puts a block boundary at {b} on axis {d}, inside "
                    f"the stored chunk [{lo}, {hi}); blocks must be whole multiples of the stored "
                    f"chunks {a.chunk_shape} (boundaries such as {lo} or {hi})"
                )
    return tuple(tuple(int(s) for s in cs) for cs in req)


READ_TASK_BYTES = 64 << 20
"""On object stores, the most (decoded) bytes one read task of a dask array reads
(see :func:`io_chunks`)."""


def io_chunks(a: Array, dchunks: tuple[tuple[int, ...], ...]) -> tuple[tuple[int, ...], ...]:
    """The blocks the read tasks of a dask array over a remote ``a`` read: one box per
    shard (a shard's chunks in one task, so its byte ranges coalesce into few
    requests), cut along the first axes at stored chunk boundaries where a box would
    hold more than :data:`READ_TASK_BYTES`. ``dchunks`` (the user's blocks) when they
    are not a refinement of those boxes, or the store is local (the engine reads
    local chunks at memory speed: a task per block keeps them parallel)."""
    if a.store.local or any(len(c) == 0 or 0 in c for c in dchunks):
        return dchunks
    boxes = list(read_chunks(a, "shards"))
    itemsize = a.dtype.itemsize
    for d, ax in enumerate(a.grid.axes):
        other = itemsize * math.prod(max(c) for k, c in enumerate(boxes) if k != d)
        if max(boxes[d]) * other <= READ_TASK_BYTES:
            continue
        # cut this axis's boxes into runs of stored chunks within the budget
        ends = set(np.cumsum(boxes[d]).tolist())
        out: list[int] = []
        pos = run = 0
        for size in np.diff(ax.boundaries()).tolist():
            if run and (run + size) * other > READ_TASK_BYTES:
                out.append(run)
                run = 0
            run += size
            pos += size
            if pos in ends:
                out.append(run)
                run = 0
        boxes[d] = tuple(out)
    io = tuple(tuple(int(s) for s in c) for c in boxes)
    for c, b in zip(dchunks, io, strict=True):
        if not set(np.cumsum(b).tolist()) <= set(np.cumsum(c).tolist()):
            return dchunks  # the user's blocks span several boxes: read them as asked
    return io


def array_to_dask(a: Array, chunks: Any = None, name: str | None = None) -> Any:
    """A ``dask.array.Array`` over ``a`` whose blocks are ``chunks``
    (:func:`read_chunks`). Locally one ``from_array`` task reads each block. On
    object stores one task reads each shard's box (:func:`io_chunks`: all its
    chunks at once, their byte ranges coalesced) and the user's blocks are slices
    of it (views: ``getitem`` tasks that copy nothing); a culled graph (a region, a
    few blocks) reads in each shard only the chunks of the blocks it keeps
    (:class:`arrayds.kinds.array.read_layer.BoxReadLayer`). There ``compute()`` of
    the whole array reads every box straight into one result
    (:class:`arrayds.kinds.array.read_layer.BoxReadArray`)."""
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    dchunks = read_chunks(a, chunks)
    src = ArraySource(a)
    if name is None:
        name = "from-arrayrecord-" + tokenize(src, dchunks)
    io = io_chunks(a, dchunks)
    if io == dchunks:
        return _from_source(src, dchunks, name)
    from .read_layer import BoxReadArray, BoxReadLayer

    layer = BoxReadLayer(name, "arrayds-read-" + tokenize(src, io), src, dchunks, io)
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[])
    return BoxReadArray(graph, name, dchunks, meta=np.empty((0,) * a.ndim, dtype=a.dtype))


def _from_source(src: ArraySource, dchunks: tuple[tuple[int, ...], ...], name: str) -> Any:
    import dask.array as da

    a = src._a
    return da.from_array(
        src,
        chunks=dchunks,
        name=name,
        lock=False,
        asarray=False,
        fancy=False,
        inline_array=False,
        meta=np.empty((0,) * a.ndim, dtype=a.dtype),
    )
