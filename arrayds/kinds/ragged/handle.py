"""Reading ragged arrays: the :class:`RaggedArray` handle (``ra[i]``,
``ra[idx, 0, :n]`` reading only the pieces a selection touches) and ``read_ragged``.

>>> import numpy as np, arrayds
>>> clips = [np.arange(2 * n, dtype="f4").reshape(2, n) for n in (5, 3, 8)]
>>> ra = arrayds.ragged.write_ragged(clips, "memory://doc-ragged-handle", piece_len=4)
>>> open_ragged("memory://doc-ragged-handle")[2, 0, 3:6]
array([3., 4., 5.], dtype=float32)
"""

from __future__ import annotations

import errno
import numbers
import operator
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import wait
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import CorruptionError
from ...files.common import run_each
from ...nodes import registry as kinds
from ...nodes.handle import Node
from ...nodes.history import resolve
from ...nodes.names import (
    new_write_id,
)
from ...nodes.read import check_version_args, locate, read_pinned
from ...nodes.shards import io_pool, node_shard_reader, read_shard_records
from ...storage import get_store
from ...storage.base import BaseStore as Store
from ..array.manifest import MAX_CHUNK_BYTES
from ..array.tensor import decode_chunk

if TYPE_CHECKING:
    import dask.bag
from ...html_repr import node_html
from .manifest import RaggedManifest, RaggedShard, RaggedShardLog, count_pieces

_PAD_BATCH = 256  # items read per batch by pad()


# -------------------------------------------------------------- shard indexes

_INDEX_CACHE_SIZE = 4096
_indexes: OrderedDict[tuple[Any, ...], tuple[np.ndarray, np.ndarray]] = OrderedDict()
_indexes_lock = threading.Lock()


def _after_fork_in_child() -> None:  # pragma: no cover - exercised by process pools
    global _indexes_lock
    _indexes_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# ------------------------------------------------------------------ selection


def is_int(k: Any) -> bool:
    return isinstance(k, numbers.Integral) and not isinstance(k, (bool, np.bool_))


class _AxisKey:
    """One item-axis entry of a selection, resolved against one item's length:
    the element range ``[lo, hi)`` it needs and how to index a block that starts at
    element ``off``."""

    __slots__ = ("kind", "key")

    def __init__(self, key: Any) -> None:
        if isinstance(key, slice):
            self.kind = "slice"
            self.key: Any = key
        elif is_int(key):
            self.kind = "int"
            self.key = int(key)
        else:
            arr = np.asarray(key)
            if arr.dtype.kind == "b":
                raise IndexError(
                    "boolean masks are not supported on the axes of ragged items (their "
                    "lengths differ); use integer indices or slices"
                )
            if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
                raise IndexError(
                    f"an item axis takes an int, a slice or a 1-d list of ints, got {key!r}"
                )
            self.kind = "array"
            self.key = arr.astype(np.int64)

    def span(self, n: int, item: int, axis: int) -> tuple[int, int, Any]:
        """-> (lo, hi, local) where local(off) gives the key for a block at ``off``.
        ``lo == hi`` means no element is needed."""
        if self.kind == "slice":
            s, e, st = self.key.indices(n)
            count = len(range(s, e, st))
            if count == 0:
                return 0, 0, lambda off: slice(0, 0)
            if st > 0:
                last = s + (count - 1) * st
                return s, last + 1, lambda off: slice(s - off, last + 1 - off, st)
            last = s + (count - 1) * st
            return (
                last,
                s + 1,
                lambda off: slice(s - off, None if e - off < 0 else e - off, st),
            )
        if self.kind == "int":
            k = self.key
            if not -n <= k < n:
                raise IndexError(
                    f"index {k} is out of bounds for axis {axis} of item {item} (length {n})"
                )
            k %= n
            return k, k + 1, lambda off: k - off
        arr = self.key
        if arr.size == 0:
            return 0, 0, lambda off: arr
        if arr.min() < -n or arr.max() >= n:
            raise IndexError(
                f"index {arr[(arr < -n) | (arr >= n)][0]} is out of bounds for axis {axis} "
                f"of item {item} (length {n})"
            )
        arr = np.where(arr < 0, arr + n, arr)
        return int(arr.min()), int(arr.max()) + 1, lambda off: arr - off


def _split_key(key: Any, ndim: int, what: str) -> tuple[Any, list[Any]]:
    """``ra[items, k1, k2, ...]`` -> (items key, per-item keys for every axis)."""
    if isinstance(key, tuple):
        if not key:
            return slice(None), [slice(None)] * ndim
        items, rest = key[0], list(key[1:])
    else:
        items, rest = key, []
    if items is Ellipsis:
        items = slice(None)
    n_ell = sum(1 for k in rest if k is Ellipsis)
    if n_ell > 1:
        raise IndexError(f"{what}: an index can only have a single ellipsis ('...')")
    if any(k is None for k in rest):
        raise IndexError(f"{what}: np.newaxis (None) is not supported in ragged selections")
    if n_ell:
        i = next(j for j, k in enumerate(rest) if k is Ellipsis)
        fill = ndim - (len(rest) - 1)
        if fill < 0:
            raise IndexError(f"{what}: too many indices for items with {ndim} dimensions")
        rest = rest[:i] + [slice(None)] * fill + rest[i + 1 :]
    if len(rest) > ndim:
        raise IndexError(
            f"{what}: too many indices: the items have {ndim} dimensions, got {len(rest)} "
            f"item-axis indices after the item selection"
        )
    rest = rest + [slice(None)] * (ndim - len(rest))
    return items, rest


def _item_indices(key: Any, n: int, what: str) -> tuple[np.ndarray, bool]:
    """The item selection -> (int64 indices, scalar?)."""
    if is_int(key):
        i = int(key)
        if not -n <= i < n:
            raise IndexError(f"{what}: item {i} is out of range for {n} items")
        return np.array([i % n], dtype=np.int64), True
    if isinstance(key, slice):
        return np.arange(*key.indices(n), dtype=np.int64), False
    arr = np.asarray(key)
    if arr.dtype.kind == "b":
        if arr.shape != (n,):
            raise IndexError(f"{what}: a boolean item mask must have length {n}, got {arr.shape}")
        return np.flatnonzero(arr).astype(np.int64), False
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise IndexError(
            f"{what}: items are selected by an int, a slice, a 1-d list/array of ints or a "
            f"boolean mask, got {key!r}"
        )
    arr = arr.astype(np.int64)
    if arr.size and (arr.min() < -n or arr.max() >= n):
        bad = int(arr[(arr < -n) | (arr >= n)][0])
        raise IndexError(f"{what}: item {bad} is out of range for {n} items")
    return np.where(arr < 0, arr + n, arr), False


# ------------------------------------------------------------------ the handle


class RaggedArray(Node):
    """Variable-length items of one dtype and ndim (docs/ragged.md).

    ``len(ra)``, ``ra.dtype``, ``ra.shapes`` (one shape per item), ``ra[i]`` (one
    array), ``ra[[i, j]]`` or ``ra[a:b]`` (a list), ``ra[idx, ch, t0:t1]`` (items, then
    numpy indexing inside each item with awkward's semantics: slices truncate per item,
    nothing is padded), ``ra.pad(n, fill)`` (a dense array), iteration,
    ``ra.to_bag()`` and ``ra.to_awkward()``. Only the pieces a selection touches are
    read: one batched engine read per shard file, shard files in parallel.

    >>> import numpy as np, arrayds.ragged as rg
    >>> ra = rg.write_ragged([np.ones(3, "i2"), np.arange(6, dtype="i2")], "memory://doc-ra")
    >>> ra.dtype, ra.lengths.tolist(), [x.tolist() for x in ra[:, 1:3]]
    (dtype('int16'), [3, 6], [[1, 1], [1, 2]])
    """

    _kind = "ragged array"

    def __init__(self, store: Store, node: str, manifest: RaggedManifest, mode: str = "r"):
        self._store = store
        self._node = node
        self._m = manifest
        self._mode = mode
        self._starts: np.ndarray | None = None  # of a shard list that is a plain list

    # -- identity and metadata

    @property
    def manifest(self) -> RaggedManifest:
        return self._m

    def __len__(self) -> int:
        return self._m.count

    @property
    def dtype(self) -> np.dtype:
        return self._m.dtype

    @property
    def ndim(self) -> int:
        """The number of dimensions of every item."""
        return self._m.ndim

    @property
    def axis(self) -> int:
        """The variable axis: items are stored in pieces along it."""
        return self._m.axis

    @property
    def piece_len(self) -> int:
        """Elements along :attr:`axis` per stored piece."""
        return self._m.piece_len

    @property
    def compression(self) -> str:
        return self._m.compression

    @property
    def attrs(self) -> dict[str, Any]:
        """User attributes (a copy; set them with ``write_ragged(..., attrs=)``)."""
        return dict(self._m.attrs)

    @property
    def nshards(self) -> int:
        return len(self._m.shards)

    @property
    def shape_array(self) -> np.ndarray:
        """Every item's shape as an ``int64`` array of shape ``(len(ra), ndim)``
        (reads each shard's index once per process)."""
        m = self._m
        if not m.shards:
            return np.zeros((0, m.ndim), dtype=np.int64)
        idx = self._indexes(range(len(m.shards)))
        out = np.concatenate([idx[k][0] for k in range(len(m.shards))])
        out.flags.writeable = False
        return out

    @property
    def shapes(self) -> list[tuple[int, ...]]:
        """One shape (a tuple of ints) per item."""
        return [tuple(r) for r in self.shape_array.tolist()]

    @property
    def lengths(self) -> np.ndarray:
        """Every item's length along :attr:`axis`."""
        return self.shape_array[:, self._m.axis]

    @property
    def nbytes(self) -> int:
        """Uncompressed bytes of all items."""
        return int(np.prod(self.shape_array, axis=1).sum()) * self.dtype.itemsize

    @property
    def stored_bytes(self) -> int | None:
        if any(s.bytes is None for s in self._m.shards):
            return None
        return sum(int(s.bytes or 0) for s in self._m.shards)

    def __repr__(self) -> str:
        return (
            f"<arrayds.RaggedArray {self._store.display(self._node)!r} {len(self)} items "
            f"ndim={self.ndim} dtype={self.dtype} axis={self.axis} piece_len={self.piece_len}>"
        )

    def _repr_html_(self) -> str:
        """A summary table and a bar of the shards (:mod:`arrayds.html_repr`)."""

        return node_html(self._store, self._node, self._m, mode=self._mode, version=self.version)

    def __reduce__(self) -> tuple[Any, ...]:
        m = self._m
        doc = m.to_json() if not isinstance(m.shards, RaggedShardLog) else {
            **replace(m, shards=[]).to_json(),
            "count": m.count,
            "shards": m.shards.stored(),  # the references, not the entries
        }  # fmt: skip
        return (_restore, (self._store.url, self._store.storage_options, self._node, doc))

    # -- shard indexes

    def _reader(self, sh: RaggedShard, shards: Mapping[str, int | None] | None = None) -> Any:
        """The reader of shard ``sh``; ``shards``: the shards the same read needs
        (their footers are prefetched, :func:`arrayds.nodes.shards.node_shard_reader`).
        The byte size the manifest records spares an open on an object store a HEAD."""
        relpath = sh.path
        try:
            return node_shard_reader(self._store, self._node, relpath, sh.bytes or None, shards)
        except FileNotFoundError:
            raise FileNotFoundError(
                errno.ENOENT,
                f"{self.what}: shard {relpath!r} named by the manifest is missing",
                self._store.path(self._node, relpath),
            ) from None
        except CorruptionError as e:
            raise CorruptionError(f"{self.what}: shard {relpath!r} is damaged: {e}") from None

    def _needs(self, shard_ids: Iterable[int]) -> dict[str, int | None]:
        """The shard files of ``shard_ids`` (relpath -> recorded size): what one read
        of those shards opens."""
        shards = [self._m.shards[k] for k in shard_ids]
        return {sh.path: sh.bytes or None for sh in shards}

    def _load_index(
        self, k: int, shards: Mapping[str, int | None] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        sh = self._m.shards[k]
        key = (self._store.token, self._store.path(self._node, sh.path))
        with _indexes_lock:
            hit = _indexes.get(key)
            if hit is not None:
                _indexes.move_to_end(key)
                return hit
        reader = self._reader(sh, shards)
        n = len(reader)
        if n != sh.records:
            raise CorruptionError(
                f"{self.what}: shard {sh.path!r} holds {n} records, the manifest says {sh.records}"
            )
        (raw,) = read_shard_records(reader, [sh.index_record])
        what = f"{self.what}: index record of shard {sh.path!r}"
        shapes = decode_chunk(raw, np.dtype("<i8"), (sh.items, self._m.ndim), what)
        shapes = np.array(shapes, dtype=np.int64)
        if (shapes < 0).any():
            raise CorruptionError(f"{what} holds a negative length")
        # Bounds (docs/spec.md): no item longer than the shard's pieces can hold (so
        # the piece counts cannot overflow), no piece larger than a chunk may be.
        lengths, plen = shapes[:, self._m.axis], self._m.piece_len
        if sh.items and int(lengths.max()) > (sh.records - 1) * plen:
            raise CorruptionError(
                f"{what}: an item of length {int(lengths.max())} needs more pieces than the "
                f"{sh.records - 1} the shard holds"
            )
        piece_bytes = (
            np.prod(np.delete(shapes, self._m.axis, axis=1).astype(np.float64), axis=1)
            * np.minimum(lengths, plen)
            * self._m.dtype.itemsize
        )
        if sh.items and float(piece_bytes.max()) > MAX_CHUNK_BYTES:
            j = int(piece_bytes.argmax())
            raise CorruptionError(
                f"{what}: item {sh.start + j} of shape {tuple(shapes[j].tolist())} makes pieces "
                f"of more than the {MAX_CHUNK_BYTES} bytes a chunk may hold"
            )
        pieces = count_pieces(lengths, plen)
        first = np.zeros(sh.items, dtype=np.int64)
        np.cumsum(pieces[:-1], out=first[1:])
        if int(pieces.sum()) + 1 != sh.records:
            raise CorruptionError(
                f"{what}: the item shapes need {int(pieces.sum())} pieces, the shard holds "
                f"{sh.records - 1}"
            )
        shapes.flags.writeable = False
        first.flags.writeable = False
        with _indexes_lock:
            _indexes[key] = (shapes, first)
            while len(_indexes) > _INDEX_CACHE_SIZE:
                _indexes.popitem(last=False)
        return shapes, first

    def _indexes(self, shard_ids: Iterable[int]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        ids = sorted(set(int(k) for k in shard_ids))
        needs = self._needs(ids)
        got = run_each(io_pool(), lambda k: self._load_index(k, needs), ids)
        return dict(zip(ids, got, strict=True))

    def _locate(self, items: np.ndarray) -> np.ndarray:
        """Shard number of each (valid) item index (of a list stored in segments:
        only the segments that hold them are loaded)."""
        shards = self._m.shards
        if isinstance(shards, RaggedShardLog):
            return shards.locate(items)
        if self._starts is None:
            self._starts = np.array([s.start for s in shards], dtype=np.int64)
        return np.searchsorted(self._starts, items, side="right") - 1

    # -- reading

    def _gather(
        self,
        items: np.ndarray,
        p0: np.ndarray,
        p1: np.ndarray,
        shapes: np.ndarray,
        shard_of: np.ndarray,
        firsts: np.ndarray,
    ) -> list[np.ndarray]:
        """For each item, the block made of its pieces ``[p0, p1)`` (concatenated
        along the axis); one batched read per shard file, files in parallel."""
        m = self._m
        axis, plen, dtype = m.axis, m.piece_len, m.dtype
        counts = p1 - p0
        blocks: list[Any] = [None] * len(items)
        for j in np.flatnonzero(counts == 0).tolist():
            shp = list(shapes[j])
            shp[axis] = 0
            blocks[j] = np.empty(shp, dtype=dtype)
        need = np.flatnonzero(counts > 0)
        if need.size == 0:
            return blocks
        # flat list of (item position, piece number, record number)
        rep = np.repeat(need, counts[need])
        starts = np.repeat(np.cumsum(counts[need]) - counts[need], counts[need])
        piece = p0[rep] + (np.arange(rep.size) - starts)
        record = firsts[rep] + piece
        sh = shard_of[rep]
        order = np.argsort(sh, kind="stable")
        rep, piece, record, sh = rep[order], piece[order], record[order], sh[order]
        cut = np.flatnonzero(sh[1:] != sh[:-1]) + 1
        groups = np.split(np.arange(rep.size), cut)
        parts: dict[int, list[np.ndarray]] = {}
        lock = threading.Lock()
        needs = self._needs(int(sh[g[0]]) for g in groups)

        def run(g: np.ndarray) -> None:
            shard = m.shards[int(sh[g[0]])]
            relpath = shard.path
            reader = self._reader(shard, needs)
            try:
                bufs = read_shard_records(reader, record[g])
            except CorruptionError as e:
                raise CorruptionError(f"{self.what}: shard {relpath!r} is damaged: {e}") from None
            local: list[tuple[int, int, np.ndarray]] = []
            for pos, buf in zip(g.tolist(), bufs, strict=True):
                j = int(rep[pos])
                p = int(piece[pos])
                shp = list(shapes[j])
                n = shp[axis]
                shp[axis] = min(plen, n - p * plen) if n else 0
                what = f"{self.what} item {int(items[j])} piece {p} (shard {relpath!r})"
                local.append((j, p, decode_chunk(buf, dtype, shp, what)))
            with lock:
                for j, p, arr in local:
                    parts.setdefault(j, []).append((p, arr))  # type: ignore[arg-type]

        run_each(io_pool(), run, groups)
        for j, lst in parts.items():
            if len(lst) == 1:
                blocks[j] = lst[0][1]  # type: ignore[index]
            else:
                lst.sort(key=operator.itemgetter(0))  # type: ignore[arg-type]
                blocks[j] = np.concatenate([a for _, a in lst], axis=axis)  # type: ignore[misc]
        return blocks

    def _select(self, items: np.ndarray, rest: list[Any]) -> list[np.ndarray]:
        m = self._m
        if items.size == 0:
            return []
        axis, plen = m.axis, m.piece_len
        shard_of = self._locate(items)
        idx = self._indexes(np.unique(shard_of).tolist())
        shapes = np.empty((items.size, m.ndim), dtype=np.int64)
        firsts = np.empty(items.size, dtype=np.int64)
        for k in np.unique(shard_of).tolist():
            sel = shard_of == k
            local = items[sel] - m.shards[k].start
            shapes[sel] = idx[k][0][local]
            firsts[sel] = idx[k][1][local]
        keys = [_AxisKey(k) for k in rest]
        ak = keys[axis]
        p0 = np.zeros(items.size, dtype=np.int64)
        p1 = np.zeros(items.size, dtype=np.int64)
        locals_: list[Any] = []
        lengths = shapes[:, axis].tolist()
        if ak.kind == "slice" and ak.key == slice(None):
            # whole items: every piece
            n_arr = shapes[:, axis]
            p1[:] = np.where(n_arr > 0, -(-n_arr // plen), 0)
            locals_ = [slice(None)] * items.size
        elif ak.kind == "array" and any(k.kind == "array" and k.key.size == 0 for k in keys):
            # numpy: advanced keys that broadcast to nothing select nothing, and their
            # bounds are not checked; no piece is needed
            locals_ = [ak.key] * items.size
        else:
            for j, n in enumerate(lengths):
                lo, hi, local = ak.span(n, int(items[j]), axis)
                if hi > lo:
                    p0[j] = lo // plen
                    p1[j] = (hi - 1) // plen + 1
                locals_.append(local)
        blocks = self._gather(items, p0, p1, shapes, shard_of, firsts)
        out: list[np.ndarray] = []
        other = [k.key for k in keys]
        for j, block in enumerate(blocks):
            loc = locals_[j]
            key = list(other)
            key[axis] = loc if not callable(loc) else loc(int(p0[j]) * plen)
            try:
                res = block[tuple(key)]
            except IndexError as e:
                raise IndexError(f"{self.what} item {int(items[j])}: {e}") from None
            if isinstance(res, np.ndarray):
                if not res.flags.writeable:
                    res = res.copy()
            else:
                res = np.asarray(res)
            out.append(res)
        return out

    def __getitem__(self, key: Any) -> np.ndarray | list[np.ndarray]:
        item_key, rest = _split_key(key, self._m.ndim, self.what)
        items, scalar = _item_indices(item_key, len(self), self.what)
        out = self._select(items, rest)
        return out[0] if scalar else out

    def get(self, items: Any, *key: Any) -> list[np.ndarray]:
        """Always a list: ``ra.get(idx, 0, slice(0, 100))`` == ``ra[idx, 0, :100]``."""
        _, rest = _split_key((0, *key), self._m.ndim, self.what)
        idx, _ = _item_indices(items, len(self), self.what)
        return self._select(idx, rest)

    def __iter__(self) -> Iterator[np.ndarray]:
        """Items in order, one shard at a time (the next shard is read while the
        current one is consumed)."""
        shards = self._m.shards
        if not shards:
            return
        pool = io_pool()
        nxt = pool.submit(self._read_shard, 0)
        try:
            for k in range(len(shards)):
                cur = nxt.result()
                if k + 1 < len(shards):
                    nxt = pool.submit(self._read_shard, k + 1)
                yield from cur
        finally:  # a loop left early: the read ahead ends before the generator does
            nxt.cancel()
            wait([nxt])

    def _read_shard(self, k: int) -> list[np.ndarray]:
        sh = self._m.shards[k]
        return self._select(np.arange(sh.start, sh.stop, dtype=np.int64), [slice(None)] * self.ndim)

    def pad(
        self,
        n: int | None = None,
        fill: Any = 0,
        *,
        items: Any = None,
    ) -> np.ndarray:
        """A dense array ``(len(items), ...)``: each item truncated or padded with
        ``fill`` to ``n`` along :attr:`axis` (default: the longest item); other axes
        that differ between items are padded to their longest. Only the pieces
        within the first ``n`` elements are read.

        >>> import numpy as np, arrayds.ragged as rg
        >>> ra = rg.write_ragged([np.ones(2), np.ones(4)], "memory://doc-pad")
        >>> ra.pad(3, fill=0).tolist()
        [[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
        """
        m = self._m
        idx = (
            np.arange(len(self), dtype=np.int64)
            if items is None
            else _item_indices(items, len(self), self.what)[0]
        )
        if n is not None and (not is_int(n) or n < 0):
            raise ValueError(f"{self.what}: pad length must be a non-negative int, got {n!r}")
        shapes = self.shape_array[idx] if idx.size else np.zeros((0, m.ndim), np.int64)
        dims = shapes.max(axis=0).tolist() if idx.size else [0] * m.ndim
        if n is not None:
            dims[m.axis] = int(n)
        rest = [slice(None)] * m.ndim
        rest[m.axis] = slice(0, dims[m.axis])
        try:
            out = np.full((idx.size, *dims), fill, dtype=m.dtype)
        except (TypeError, ValueError) as e:
            raise ValueError(
                f"{self.what}: fill value {fill!r} does not fit dtype {m.dtype} ({e})"
            ) from None
        for a in range(0, idx.size, _PAD_BATCH):
            for j, arr in enumerate(self._select(idx[a : a + _PAD_BATCH], rest)):
                out[(a + j, *tuple(slice(0, s) for s in arr.shape))] = arr
        return out

    # -- collections

    def to_bag(self) -> dask.bag.Bag:
        """A ``dask.bag.Bag`` of the items (numpy arrays), one partition per shard."""
        import dask.bag as db

        name = f"from-arrayrecord-ragged-{self._m.commit or new_write_id()}-{id(self):x}"
        n = len(self._m.shards)
        if n == 0:
            return db.from_sequence([], npartitions=1)
        graph = {(name, k): (_bag_partition, self, k) for k in range(n)}
        return db.Bag(graph, name, n)

    to_dask = to_bag

    def to_awkward(self, items: Any = None) -> Any:
        """An ``awkward.Array`` of the items (``len * [fixed or var] * ... * dtype``:
        axes whose length is the same for every item are regular). Needs the
        ``awkward`` package.

        >>> import numpy as np, arrayds.ragged as rg
        >>> ra = rg.write_ragged([np.zeros((2, 3)), np.zeros((2, 1))], "memory://doc-ak")
        >>> str(ra.to_awkward().type)
        '2 * 2 * var * float64'
        """
        try:
            import awkward as ak
        except ImportError:
            raise ImportError(
                "RaggedArray.to_awkward() needs the 'awkward' package (pip install awkward)"
            ) from None
        idx = (
            np.arange(len(self), dtype=np.int64)
            if items is None
            else _item_indices(items, len(self), self.what)[0]
        )
        arrays = self._select(idx, [slice(None)] * self.ndim) if idx.size else []
        shapes = (
            np.array([a.shape for a in arrays], dtype=np.int64).reshape(len(arrays), self.ndim)
            if arrays
            else np.zeros((0, self.ndim), dtype=np.int64)
        )
        flat = (
            np.concatenate([a.reshape(-1) for a in arrays])
            if arrays
            else np.empty(0, dtype=self.dtype)
        )
        return ak.Array(_awkward_layout(ak, flat, shapes))


def _awkward_layout(ak: Any, flat: np.ndarray, shapes: np.ndarray) -> Any:
    """The layout of ``len(shapes)`` items whose C-ordered data are concatenated in
    ``flat``: nested lists, regular where every item has the same length."""
    contents = ak.contents
    index = ak.index
    n, ndim = shapes.shape
    # counts[d]: one list length per list at nesting level d
    counts = []
    mult = np.ones(n, dtype=np.int64)
    for d in range(ndim):
        c = np.repeat(shapes[:, d], mult)
        counts.append(c)
        mult = mult * shapes[:, d]
    layout: Any = contents.NumpyArray(flat)
    for d in range(ndim - 1, -1, -1):
        c = counts[d]
        col = shapes[:, d]
        if n and (col == col[0]).all():
            layout = contents.RegularArray(layout, int(col[0]), zeros_length=len(c))
        else:
            offsets = np.zeros(len(c) + 1, dtype=np.int64)
            np.cumsum(c, out=offsets[1:])
            layout = contents.ListOffsetArray(index.Index64(offsets), layout)
    return layout


def _bag_partition(ra: RaggedArray, k: int) -> list[np.ndarray]:
    return ra._read_shard(k)


def _restore(
    url: str, storage_options: Mapping[str, Any], node: str, manifest: dict[str, Any]
) -> RaggedArray:
    store = get_store(url, storage_options)
    what = store.display(node)
    doc = resolve(store, node, manifest, what, lazy=True)
    return RaggedArray(store, node, RaggedManifest.from_json(doc, what))


# ------------------------------------------------------------------ opening


def open_ragged(
    url: str | os.PathLike[str],
    component: str | None = None,
    mode: str = "r",
    *,
    storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> RaggedArray:
    """Open the ragged array at ``url`` + ``component`` (reads the manifest only).
    ``version=N`` / ``as_of=`` (a datetime; naive means UTC): that version of its
    history (:func:`arrayds.versions`; ``ValueError`` naming the versions kept if it
    is not one of them).

    >>> import numpy as np, arrayds.ragged as rg
    >>> _ = rg.write_ragged([np.zeros(5), np.zeros(7)], "memory://doc-open-ragged")
    >>> _ = rg.write_ragged([np.zeros(2)], "memory://doc-open-ragged", mode="a")
    >>> len(rg.open_ragged("memory://doc-open-ragged")), len(
    ...     rg.open_ragged("memory://doc-open-ragged", version=1))
    (3, 2)
    """
    if mode != "r":
        raise ValueError(
            f"open_ragged supports mode 'r' only (write with to_arrayrecord(..., mode=...)), "
            f"got {mode!r}"
        )
    store, node = locate(url, component, storage_options, "a ragged array")
    check_version_args(version, as_of, mode, f"ragged array {store.display(node)!r}")
    m, pin = read_pinned(store, node, version=version, as_of=as_of)
    if m is not None and not isinstance(m, RaggedManifest):
        kind = getattr(m, "kind", None)
        raise ValueError(f"{store.display(node)!r} is a {kind!r} node, not a ragged array")
    if m is None:
        raise FileNotFoundError(
            errno.ENOENT,
            f"no ragged array at {store.display(node)!r} ({store.path(node, 'arrayds.json')} "
            f"does not exist)",
            store.display(node),
        )
    ra = RaggedArray(store, node, m, mode)
    ra.pinned(pin)
    return ra


def read_ragged(
    url: str | os.PathLike[str],
    component: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> dask.bag.Bag:
    """A ``dask.bag.Bag`` of the items, one partition per shard (``version=`` /
    ``as_of=``: of that version of the history, as :func:`open_ragged`).

    >>> import numpy as np, arrayds.ragged as rg
    >>> _ = rg.write_ragged([np.arange(n) for n in (1, 2, 3)], "memory://doc-read-ragged")
    >>> [x.tolist() for x in rg.read_ragged("memory://doc-read-ragged").compute(scheduler="sync")]
    [[0], [0, 1], [0, 1, 2]]
    """
    return open_ragged(
        url, component, storage_options=storage_options, version=version, as_of=as_of
    ).to_bag()


def api_reader(
    store: Store, node: str, m: RaggedManifest, *, chunks: Any, name: Any, **kwargs: Any
) -> Any:
    kinds.no_extra_keywords(f"ragged array {store.display(node)!r}", kwargs)
    if chunks is not None:
        raise ValueError(
            f"ragged array {store.display(node)!r}: chunks= applies to N-d arrays (a ragged "
            f"array reads as a bag with one partition per shard)"
        )
    return RaggedArray(store, node, m).to_bag()


# -------------------------------------------------------------- node handles


def node_factory(store: Store, node: str, m: RaggedManifest, mode: str) -> RaggedArray:
    return RaggedArray(store, node, m, "r")
