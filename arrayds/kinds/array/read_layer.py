"""The graph layer of a dask array read through read boxes (:class:`BoxReadLayer`):
one task reads a box of stored chunks (a shard's, on object stores), the user's blocks
are views of it, and culling the graph (a region, a few blocks) shrinks each read to
the blocks still needed. Imported only when a dask array is built (dask is optional).

>>> import numpy as np
>>> data = np.arange(8)
>>> layer = BoxReadLayer("x", "x-read", data, ((2, 2, 2, 2),), ((8,),))
>>> sorted(k for k in layer if k[0] == "x-read"), layer.boxes()
([('x-read', 0, 0, 4)], [(slice(0, 8, None),)])
>>> culled, deps = layer.cull({("x", 2)}, set())
>>> sorted(k for k in culled if k[0] == "x-read"), deps[("x", 2)]
([('x-read', 0, 2, 1)], {('x-read', 0, 2, 1)})
"""

from __future__ import annotations

import math
import operator
import sys
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property
from typing import Any

import dask.array as da
import numpy as np
from dask import config, local, threaded
from dask.highlevelgraph import Layer, MaterializedLayer

from .tensor import new_buffer

Key = tuple[Any, ...]


class BoxReadLayer(Layer):
    """The tasks of a dask array ``name`` with blocks ``chunks``, read through the boxes
    ``boxes`` (a coarser grid: every box holds whole blocks). The task of a box is
    ``source[slices]`` for the blocks of the box that are needed, as one box of them
    (all of them unless the graph was culled); the task of a block is a basic slice of
    its box's result (a view: no copy). A box task's key names the run of blocks it
    reads on each axis (``(read_name, *box, *first block, *count)``), so two cullings that
    read different parts of a box never share a key.

    Culling (:meth:`cull`) keeps the blocks asked for and reads, in each box, only the
    smallest run of blocks per axis that holds them: a region of a remote array decodes
    the chunks of the region, and fetches only those unless they are half the shard's
    records or more (then one GET of the whole shard, footer included, beats a footer
    and a GET of half of it: ``Array.read_block`` decides).
    """

    def __init__(
        self,
        name: str,
        read_name: str,
        source: Any,
        chunks: tuple[tuple[int, ...], ...],
        boxes: tuple[tuple[int, ...], ...],
        origin: tuple[int, ...] | None = None,
    ) -> None:
        super().__init__()
        self.name = name
        self.read_name = read_name
        self.source_key = read_name + "-source"
        self.source = source
        self.chunks = chunks
        self.box_chunks = boxes
        # where this array's first element lies in the source (a region of it)
        self.origin = tuple(origin) if origin is not None else (0,) * len(chunks)
        # per axis: block starts, and for each block its box and its place in it
        self._starts = [np.concatenate([[0], np.cumsum(c)]).astype(np.int64) for c in chunks]
        self._box_of: list[np.ndarray] = []
        for c, b in zip(self._starts, boxes, strict=True):
            bounds = np.concatenate([[0], np.cumsum(b)])
            if not np.isin(bounds, c).all():
                raise ValueError(f"read boxes {boxes} do not hold whole blocks {chunks}")
            self._box_of.append(np.searchsorted(bounds, c[:-1], side="right") - 1)

    # -- the mapping: every block (the graph not culled)

    @cached_property
    def _all(self) -> dict[Any, Any]:
        return self._tasks(np.ndindex(*(len(c) for c in self.chunks)))[0]

    def __getitem__(self, key: Any) -> Any:
        return self._all[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._all)

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, key: object) -> bool:
        return key in self._all

    def is_materialized(self) -> bool:
        return "_all" in self.__dict__

    def get_output_keys(self) -> set[Key]:
        return {(self.name, *idx) for idx in np.ndindex(*(len(c) for c in self.chunks))}

    def cull(
        self, keys: set[Any], all_hlg_keys: Iterable[Any]
    ) -> tuple[MaterializedLayer, Mapping[Any, set[Any]]]:
        """The tasks of the blocks in ``keys`` (and of the reads they need), as a new
        layer, with each task's dependencies."""
        wanted = [tuple(k[1:]) for k in keys if isinstance(k, tuple) and k and k[0] == self.name]
        tasks, deps = self._tasks(wanted)
        return MaterializedLayer(tasks, annotations=self.annotations), deps

    def boxes(self) -> list[tuple[slice, ...]]:
        """The region of every read box (all of its blocks), in this array's
        coordinates."""
        return [out for _, out in self.regions()]

    def regions(self) -> list[tuple[tuple[slice, ...], tuple[slice, ...]]]:
        """Every read box (all of its blocks) as ``(region of the source, region of
        this array)``: they differ by :attr:`origin`."""
        tasks = self._tasks(np.ndindex(*(len(c) for c in self.chunks)))[0]
        return [(t[2], self._local(t[2])) for k, t in tasks.items() if k[0] == self.read_name]

    def _local(self, region: tuple[slice, ...]) -> tuple[slice, ...]:
        return tuple(
            slice(r.start - o, r.stop - o) for r, o in zip(region, self.origin, strict=True)
        )

    def region(self, index: tuple[slice, ...], name: str, read_name: str) -> BoxReadLayer:
        """The layer of the array ``name`` that is the region ``index`` of this one
        (step-1 slices with ``0 <= start < stop <= length`` on every axis): its blocks
        and boxes are this layer's cut at the region's edges, its reads those of the
        source inside the region."""
        chunks, boxes = [], []
        for d, sl in enumerate(index):
            for sizes, out in ((self.chunks[d], chunks), (self.box_chunks[d], boxes)):
                edges = np.concatenate([[0], np.cumsum(sizes)])
                cut = np.unique(np.clip(edges, sl.start, sl.stop))
                out.append(tuple(int(n) for n in np.diff(cut)))
        origin = tuple(o + sl.start for o, sl in zip(self.origin, index, strict=True))
        return BoxReadLayer(name, read_name, self.source, tuple(chunks), tuple(boxes), origin)

    def _tasks(self, blocks: Iterable[tuple[int, ...]]) -> tuple[dict[Any, Any], dict[Any, set]]:
        by_box: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
        for idx in blocks:
            box = tuple(int(self._box_of[d][i]) for d, i in enumerate(idx))
            by_box.setdefault(box, []).append(tuple(int(i) for i in idx))
        tasks: dict[Any, Any] = {}
        deps: dict[Any, set] = {}
        if by_box:
            tasks[self.source_key] = self.source
            deps[self.source_key] = set()
        for box, idxs in by_box.items():
            lo = [min(i[d] for i in idxs) for d in range(len(box))]
            hi = [max(i[d] for i in idxs) + 1 for d in range(len(box))]
            read = (self.read_name, *box, *lo, *(h - lo_ for lo_, h in zip(lo, hi, strict=True)))
            s, o = self._starts, self.origin
            region = tuple(
                slice(int(s[d][lo[d]]) + o[d], int(s[d][hi[d]]) + o[d]) for d in range(len(box))
            )
            tasks[read] = (operator.getitem, self.source_key, region)
            deps[read] = {self.source_key}
            for idx in idxs:
                view = tuple(
                    slice(int(s[d][i] - s[d][lo[d]]), int(s[d][i + 1] - s[d][lo[d]]))
                    for d, i in enumerate(idx)
                )
                key = (self.name, *idx)
                tasks[key] = (operator.getitem, read, view)
                deps[key] = {read}
        return tasks, deps


INTO_READS = 8
"""The most boxes :meth:`BoxReadArray.compute` reads at once (fewer if dask's
``num_workers`` says so, or :data:`INTO_FETCH_BYTES` does)."""

INTO_FETCH_BYTES = 8 << 20
"""The fetched bytes :meth:`BoxReadArray.compute` keeps in flight: at most
``max(INTO_FETCH_BYTES, result bytes / INTO_FETCH_SHARE)``, and at least one box. A
read holds up to twice its bytes in flight beyond its result (each response, what the
client allocated to receive it, and what the allocator keeps of both), so its peak
memory stays within 1.5x the result; a few boxes at once still overlap one box's
transfer with another's decode."""

INTO_FETCH_SHARE = 6
"""See :data:`INTO_FETCH_BYTES`."""


_LOCAL_SCHEDULERS = {
    "threads": threaded.get,
    "threading": threaded.get,
    "sync": local.get_sync,
    "synchronous": local.get_sync,
    "single-threaded": local.get_sync,
}
"""dask's names of the threaded and synchronous schedulers (``scheduler=`` of
``compute``), the ones a :class:`BoxReadArray` reads into its result with."""


class BoxReadArray(da.Array):
    """The dask array over a :class:`BoxReadLayer` (what ``array_to_dask`` returns
    on object stores): a ``dask.array.Array`` in every respect but three. Its own
    ``compute()`` (and ``np.asarray``) on the threaded or synchronous scheduler reads
    every box straight into one preallocated result, ``source.read_into(region,
    out[region])`` in one task per box, instead of making the blocks and copying them
    into a new array (dask's final concatenation): half the peak memory, no copy. Its
    :meth:`store` into a numpy array reads the boxes straight into the target the same
    way. A region of it (:meth:`__getitem__`) is again a ``BoxReadArray``. Boxes are
    read a few at a time (:data:`INTO_READS`, :data:`INTO_FETCH_BYTES`). Any other
    scheduler or option, and every other array derived from it, computes as dask does.
    """

    __slots__ = ()

    def _into_get(self, kwargs: Mapping[str, Any], also: Iterable[str] = ()) -> Any:
        """The scheduler's ``get`` when this array's own reads serve a call with
        ``kwargs`` (keys other than the scheduler's and ``also`` are not served), else
        None (then dask's path)."""
        from dask.base import get_scheduler

        if not isinstance(self.dask.layers.get(self.name), BoxReadLayer) or set(kwargs) - {
            "scheduler",
            "get",
            "num_workers",
            *also,
        }:
            return None
        scheduler = kwargs.get("scheduler")
        if "distributed" not in sys.modules and kwargs.get("get") is None:
            # no distributed Client can exist in this process: resolve the scheduler
            # without get_scheduler, which imports distributed to look for one (memory
            # and time in a fresh process, for nothing)
            if scheduler is None:
                scheduler = config.get("scheduler", None)
            if scheduler is None:
                return threaded.get  # a dask array's default
            if isinstance(scheduler, str):
                return _LOCAL_SCHEDULERS.get(scheduler.lower())
            return scheduler if scheduler in (threaded.get, local.get_sync) else None
        get = get_scheduler(scheduler=scheduler, get=kwargs.get("get"), collections=[self])
        return get if get in (threaded.get, local.get_sync) else None

    def _read_boxes(self, get: Any, kwargs: Mapping[str, Any], out: np.ndarray) -> None:
        """Read every box into ``out`` (this array's shape and dtype): one task per box,
        as many at once as :data:`INTO_READS`, ``num_workers`` and the fetched-bytes
        budget (:data:`INTO_FETCH_BYTES`) allow."""
        layer = self.dask.layers[self.name]
        assert isinstance(layer, BoxReadLayer)
        source = layer.source
        regions = layer.regions()
        boxes = [here for _, here in regions]
        dsk = {
            (layer.read_name + "-into", i): (source.read_into, region, out[here])
            for i, (region, here) in enumerate(regions)
        }
        if get is not threaded.get:
            get(dsk, list(dsk))
            return
        n = kwargs.get("num_workers") or config.get("num_workers", None) or INTO_READS
        get(dsk, list(dsk), num_workers=min(int(n), INTO_READS, _fitting(source, boxes, out)))

    def __getitem__(self, index: Any) -> Any:
        """``x[index]``; a region (step-1 slices, an ``Ellipsis``) that is not empty is
        again a :class:`BoxReadArray`, whose blocks are dask's for that slice and whose
        ``compute()`` reads the region's part of every box it meets straight into one
        result. Any other index is dask's.

        >>> import arrayds
        >>> url = "memory://doc-region"
        >>> a = arrayds.open_array(url, mode="w", shape=(6,), dtype="i4", chunks=2)
        >>> a[:] = np.arange(6, dtype="i4")
        >>> y = arrayds.from_arrayrecord(url)[1:5]
        >>> type(y).__name__, y.chunks, y.compute().tolist()
        ('BoxReadArray', ((1, 2, 1),), [1, 2, 3, 4])
        """
        layer = self.dask.layers.get(self.name)
        region = _region(index, self.shape) if isinstance(layer, BoxReadLayer) else None
        if region is None or len(self.dask.layers) != 1:
            return super().__getitem__(index)
        if all(sl == slice(0, n) for sl, n in zip(region, self.shape, strict=True)):
            return self
        from dask.base import tokenize
        from dask.highlevelgraph import HighLevelGraph

        token = tokenize(self.name, region)
        sub = layer.region(region, "getitem-" + token, "arrayds-read-" + token)
        graph = HighLevelGraph.from_collections(sub.name, sub, dependencies=[])
        return BoxReadArray(graph, sub.name, sub.chunks, meta=self._meta)

    def compute(self, **kwargs: Any) -> Any:
        get = self._into_get(kwargs)
        if get is None:
            return super().compute(**kwargs)
        # like Array.__getitem__'s result: a block of the engine's pool from 1 MiB on
        # (a process that reads again reuses a freed result's pages, no page faults)
        out = new_buffer(math.prod(self.shape) * self.dtype.itemsize)
        out = out.view(self.dtype).reshape(self.shape)
        self._read_boxes(get, kwargs, out)
        return out

    def store(self, target: Any, **kwargs: Any) -> Any:
        """``dask.array.store(self, target, **kwargs)``; into a writable numpy array of
        this array's shape and dtype (``lock`` True or False; the boxes are disjoint
        regions, so no lock is needed), computed now on the threaded or synchronous
        scheduler, every box is decoded straight into ``target`` (as :meth:`compute`
        reads into its result) and None is returned. Any other target or option takes
        dask's path.

        >>> import arrayds
        >>> a = arrayds.open_array("memory://doc-store", mode="w", shape=(4,), dtype="i4", chunks=1)
        >>> a[:] = np.arange(4, dtype="i4")
        >>> x, target = a.to_dask(), np.zeros(4, "i4")
        >>> type(x).__name__, x.store(target), target.tolist()
        ('BoxReadArray', None, [0, 1, 2, 3])
        """
        get = self._into_get(kwargs, ("lock", "compute", "return_stored"))
        if (
            get is None
            or kwargs.get("lock", True) not in (True, False)
            or not kwargs.get("compute", True)
            or kwargs.get("return_stored", False)
            or not isinstance(target, np.ndarray)
            or target.shape != self.shape
            or target.dtype != self.dtype
            or not target.flags.writeable
        ):
            return super().store(target, **kwargs)
        self._read_boxes(get, {k: v for k, v in kwargs.items() if k == "num_workers"}, target)
        return None


def _region(index: Any, shape: tuple[int, ...]) -> tuple[slice, ...] | None:
    """``index`` as one ``slice(start, stop)`` per axis of ``shape`` (start < stop) if
    it is a region: step-1 slices and at most one ``Ellipsis``, none of them empty;
    else None."""
    if not isinstance(index, tuple):
        index = (index,)
    if sum(i is Ellipsis for i in index) > 1 or not all(
        i is Ellipsis or type(i) is slice for i in index
    ):
        return None
    if Ellipsis in index:
        at = index.index(Ellipsis)
        index = index[:at] + (slice(None),) * (len(shape) - len(index) + 1) + index[at + 1 :]
    if len(index) > len(shape):
        return None
    index = index + (slice(None),) * (len(shape) - len(index))
    out = []
    for sl, n in zip(index, shape, strict=True):
        bounds = (sl.start, sl.stop, sl.step)
        if not all(v is None or isinstance(v, (int, np.integer)) for v in bounds):
            return None
        start, stop, step = sl.indices(n)
        if step != 1 or start >= stop:
            return None
        out.append(slice(start, stop))
    return tuple(out)


def _fitting(source: Any, boxes: list[tuple[slice, ...]], out: np.ndarray) -> int:
    """How many of ``boxes`` (regions of ``out``) fit in the fetched-bytes budget at
    once (:data:`INTO_FETCH_BYTES`), at least one: each box is taken to fetch its share
    of ``source``'s stored bytes (its ``stored_bytes``, when it knows them; else its
    decoded bytes)."""
    stored = getattr(source, "stored_bytes", None)
    whole = out.itemsize * math.prod(getattr(source, "shape", out.shape))
    share = stored / whole if stored and whole else 1.0
    largest = max((math.prod(s.stop - s.start for s in box) for box in boxes), default=0)
    largest *= out.itemsize
    budget = max(INTO_FETCH_BYTES, out.nbytes / INTO_FETCH_SHARE)
    return max(1, int(budget // max(1.0, largest * share)))
