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
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property
from typing import Any

import dask.array as da
import numpy as np
from dask.highlevelgraph import Layer, MaterializedLayer

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
    smallest run of blocks per axis that holds them, unless that run is half the box
    or more (then the whole box: on an object store one GET of the whole shard beats
    a footer and a GET of half of it): a small region of a remote array fetches the
    chunks of the region, not whole shards.
    """

    def __init__(
        self,
        name: str,
        read_name: str,
        source: Any,
        chunks: tuple[tuple[int, ...], ...],
        boxes: tuple[tuple[int, ...], ...],
    ) -> None:
        super().__init__()
        self.name = name
        self.read_name = read_name
        self.source_key = read_name + "-source"
        self.source = source
        self.chunks = chunks
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

    def _box_blocks(self, axis: int, box: int) -> tuple[int, int]:
        """The blocks ``[first, stop)`` of box ``box`` along ``axis``."""
        hit = np.flatnonzero(self._box_of[axis] == box)
        return int(hit[0]), int(hit[-1]) + 1

    def boxes(self) -> list[tuple[slice, ...]]:
        """The region of every read box (all of its blocks)."""
        tasks = self._tasks(np.ndindex(*(len(c) for c in self.chunks)))[0]
        return [t[2] for k, t in tasks.items() if k[0] == self.read_name]

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
            whole = [self._box_blocks(d, b) for d, b in enumerate(box)]
            if 2 * math.prod(h - l_ for l_, h in zip(lo, hi, strict=True)) >= math.prod(
                h - l_ for l_, h in whole
            ):  # half the box or more: the whole box (on object stores one GET)
                lo, hi = [l_ for l_, _ in whole], [h for _, h in whole]
            read = (self.read_name, *box, *lo, *(h - lo_ for lo_, h in zip(lo, hi, strict=True)))
            s = self._starts
            region = tuple(slice(int(s[d][lo[d]]), int(s[d][hi[d]])) for d in range(len(box)))
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
``num_workers`` says so): the memory it needs beyond the result is the fetched bytes
of the boxes in flight."""


class BoxReadArray(da.Array):
    """The dask array over a :class:`BoxReadLayer` (what ``array_to_dask`` returns
    on object stores): a ``dask.array.Array`` in every respect but one. Its own
    ``compute()`` (and ``np.asarray``) on the threaded or synchronous scheduler reads
    every box straight into one preallocated result, ``source.read_into(region,
    out[region])`` in one task per box (at most :data:`INTO_READS` at once), instead
    of making the blocks and copying them into a new array (dask's final
    concatenation): half the peak memory, no copy. Any other scheduler or option,
    and every array derived from it, computes as dask does.
    """

    __slots__ = ()

    def compute(self, **kwargs: Any) -> Any:
        from dask import config, local, threaded
        from dask.base import get_scheduler

        layer = self.dask.layers.get(self.name)
        get = get_scheduler(
            scheduler=kwargs.get("scheduler"), get=kwargs.get("get"), collections=[self]
        )
        if (
            not isinstance(layer, BoxReadLayer)
            or get not in (threaded.get, local.get_sync)
            or set(kwargs) - {"scheduler", "get", "num_workers"}
        ):
            return super().compute(**kwargs)
        out = np.empty(self.shape, self.dtype)
        source = layer.source
        dsk = {
            (layer.read_name + "-into", i): (source.read_into, region, out[region])
            for i, region in enumerate(layer.boxes())
        }
        if get is threaded.get:
            n = kwargs.get("num_workers") or config.get("num_workers", None) or INTO_READS
            get(dsk, list(dsk), num_workers=min(int(n), INTO_READS))
        else:
            get(dsk, list(dsk))
        return out
