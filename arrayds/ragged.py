"""Ragged arrays: items of one dtype and ndim but different shapes (API.md section 4).

The canonical case is a collection of audio clips of 5 to 30 minutes with 2 channels:
``ra[i]`` is one clip, ``ra[idx, 0, :48_000]`` the first second of channel 0 of the
clips ``idx`` — and that read touches only the pieces holding the first second.

Layout (docs/spec.md, "Ragged arrays"): a node of kind ``"ragged"``. Every item is
cut along its *variable axis* into pieces of ``piece_len`` elements (the last piece
shorter; an item of length 0 is one empty piece). Each piece is one record holding
the ``.npy`` encoding of that block, like a chunk of an N-d array. A shard is an
ArrayRecord file holding the pieces of a contiguous range of items, item after item,
followed by one *index record*: the ``.npy`` of an ``int64`` array of shape
``(items, ndim)`` with every item's shape. The manifest lists the shards with their
item ranges, so opening reads the manifest only; a shard's index is read (once per
process) the first time one of its items is needed.

* :func:`write_ragged` — from a list of arrays (shards written in parallel) or a
  ``dask.bag.Bag`` (one task per partition, fused with the bag) plus one commit task;
  ``arrayds.to_arrayrecord`` dispatches here for ragged input.
* :func:`open_ragged` — a :class:`RaggedArray` handle.
* :func:`read_ragged` — a ``dask.bag.Bag`` of numpy arrays, one partition per shard
  (``arrayds.from_arrayrecord`` dispatches here for ragged nodes).

>>> import numpy as np, arrayds.ragged as rg
>>> clips = [np.arange(2 * n, dtype="f4").reshape(2, n) for n in (5, 3, 8)]
>>> ra = rg.write_ragged(clips, "memory://doc-ragged", piece_len=4)
>>> len(ra), ra.shapes
(3, [(2, 5), (2, 3), (2, 8)])
>>> ra[2, 0, 3:6]
array([3., 4., 5.], dtype=float32)
>>> [x.tolist() for x in ra[[1, 0], 1, :4]]
[[3.0, 4.0, 5.0], [5.0, 6.0, 7.0, 8.0]]
>>> ra.pad(4, fill=-1)[1, 0].tolist()
[0.0, 1.0, 2.0, -1.0]
"""

from __future__ import annotations

import contextvars
import errno
import math
import numbers
import operator
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import CommitConflictError, CorruptionError
from .manifest import (
    FORMAT,
    FORMAT_VERSION,
    MAX_CHUNK_BYTES,
    check_compression,
    check_json_value,
    writer_options,
)
from .node import Node, check_version_args, read_pinned
from .nodes import commit as node_commit
from .nodes import kinds
from .storage import get_store
from .store import (
    SHARD_DIR,
    SHARD_SUFFIX,
    Store,
    check_component,
    io_pool,
    is_reserved_name,
    join_component,
    new_write_id,
    node_shard_reader,
    read_records,
    write_shard,
)
from .tensor import check_dtype, decode_chunk, encode_chunk

if TYPE_CHECKING:  # pragma: no cover
    import dask.bag
    from dask.delayed import Delayed

__all__ = [
    "PIECE_BYTES",
    "SHARD_BYTES",
    "RaggedArray",
    "RaggedManifest",
    "RaggedShard",
    "open_ragged",
    "read_ragged",
    "write_ragged",
]

KIND = "ragged"
PIECE_BYTES = 1 << 20
"""Target uncompressed bytes of one piece when ``piece_len`` is not given (1 MiB)."""
SHARD_BYTES = 64 << 20
"""Target uncompressed bytes of one shard file when ``shard_size`` is not given."""
_MODES = ("w-", "w", "a")
_PAD_BATCH = 256  # items read per batch by pad()


# ------------------------------------------------------------------ manifest


@dataclass(frozen=True)
class RaggedShard:
    """One shard file: items ``[start, stop)`` as ``records - 1`` piece records, then
    the index record (the items' shapes)."""

    path: str
    start: int
    stop: int
    records: int
    bytes: int | None = None

    @property
    def items(self) -> int:
        return self.stop - self.start

    @property
    def index_record(self) -> int:
        return self.records - 1

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "path": self.path,
            "items": [self.start, self.stop],
            "records": self.records,
        }
        if self.bytes is not None:
            d["bytes"] = self.bytes
        return d

    def shifted(self, by: int) -> RaggedShard:
        return RaggedShard(self.path, self.start + by, self.stop + by, self.records, self.bytes)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


@dataclass
class RaggedManifest:
    """The manifest of a ragged node (docs/spec.md, "Ragged arrays")."""

    dtype: np.dtype
    ndim: int
    axis: int
    piece_len: int
    compression: str = "zstd:3"
    attrs: dict[str, Any] = field(default_factory=dict)
    shards: list[RaggedShard] = field(default_factory=list)
    generation: int = 0
    commit: str = ""

    kind = KIND

    @property
    def count(self) -> int:
        return self.shards[-1].stop if self.shards else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "kind": KIND,
            "generation": self.generation,
            "commit": self.commit,
            "dtype": self.dtype.str,
            "ndim": self.ndim,
            "axis": self.axis,
            "piece_len": self.piece_len,
            "compression": self.compression,
            "count": self.count,
            "attrs": self.attrs,
            "shards": [s.to_json() for s in self.shards],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], what: str) -> RaggedManifest:
        """Parse and validate; any violation is a :class:`arrayds.CorruptionError`."""

        def bad(msg: str) -> CorruptionError:
            return CorruptionError(f"{what}: ragged manifest: {msg}")

        try:
            dtype = check_dtype(d.get("dtype"), what)
        except (TypeError, ValueError) as e:
            raise bad(f"dtype: {e}") from None
        ndim, axis, piece_len = d.get("ndim"), d.get("axis"), d.get("piece_len")
        if not _is_count(ndim) or ndim < 1:
            raise bad(f"ndim {ndim!r} must be a positive integer")
        if not _is_count(axis) or axis >= ndim:
            raise bad(f"axis {axis!r} must be in 0..{ndim - 1}")
        if not _is_count(piece_len) or piece_len < 1:
            raise bad(f"piece_len {piece_len!r} must be a positive integer")
        compression = d.get("compression", "zstd:3")
        if not isinstance(compression, str):
            raise bad(f"compression {compression!r} is not a string")
        attrs = d.get("attrs", {})
        if not isinstance(attrs, dict):
            raise bad("attrs must be an object")
        gen = d.get("generation", 0)
        if not _is_count(gen):
            raise bad(f"generation {gen!r} is not a count")
        raw = d.get("shards")
        if not isinstance(raw, list):
            raise bad("'shards' must be a list")
        shards: list[RaggedShard] = []
        expect = 0
        for i, e in enumerate(raw):
            if not isinstance(e, dict):
                raise bad(f"shard entry {i} is not an object")
            path = e.get("path")
            if (
                not isinstance(path, str)
                or not path
                or path.startswith("/")
                or "\\" in path
                or "://" in path
                or any(seg in ("", ".", "..") or is_reserved_name(seg) for seg in path.split("/"))
            ):
                raise bad(f"shard entry {i}: path {path!r} must be relative to the node folder")
            items = e.get("items")
            if (
                not isinstance(items, list)
                or len(items) != 2
                or not all(_is_count(x) for x in items)
                or items[0] != expect
                or items[1] <= items[0]
            ):
                raise bad(
                    f"shard entry {i}: items {items!r} must be [start, stop) with start "
                    f"{expect} (shards tile the items in order) and stop > start"
                )
            records = e.get("records")
            if not _is_count(records) or records < items[1] - items[0] + 1:
                raise bad(
                    f"shard entry {i}: records {records!r} must count at least one piece per "
                    f"item plus the index record"
                )
            nbytes = e.get("bytes")
            if nbytes is not None and not _is_count(nbytes):
                raise bad(f"shard entry {i}: bytes {nbytes!r}")
            shards.append(RaggedShard(path, items[0], items[1], records, nbytes))
            expect = items[1]
        count = d.get("count", expect)
        if count != expect:
            raise bad(f"count {count!r} disagrees with the shards, which hold {expect} items")
        return cls(
            dtype=dtype,
            ndim=ndim,
            axis=axis,
            piece_len=piece_len,
            compression=compression,
            attrs=dict(attrs),
            shards=shards,
            generation=gen,
            commit=str(d.get("commit", "")),
        )


def _pieces(lengths: np.ndarray, piece_len: int) -> np.ndarray:
    """Pieces per item: ceil(length / piece_len), at least one."""
    return np.maximum(1, -(-lengths // piece_len))


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


def _is_int(k: Any) -> bool:
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
        elif _is_int(key):
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
    if _is_int(key):
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
    """Variable-length items of one dtype and ndim (API.md section 4).

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
        self._starts = np.array([s.start for s in manifest.shards], dtype=np.int64)
        # shard byte sizes the manifest records: opens on object stores skip a HEAD
        self._sizes = {s.path: s.bytes or None for s in manifest.shards}

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
        from .html_repr import node_html

        return node_html(self._store, self._node, self._m, mode=self._mode, version=self.version)

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _restore,
            (self._store.url, self._store.storage_options, self._node, self._m.to_json()),
        )

    # -- shard indexes

    def _reader(self, relpath: str) -> Any:
        try:
            sizes = self._sizes
            return node_shard_reader(self._store, self._node, relpath, sizes.get(relpath), sizes)
        except FileNotFoundError:
            raise FileNotFoundError(
                errno.ENOENT,
                f"{self._what}: shard {relpath!r} named by the manifest is missing",
                self._store.path(self._node, relpath),
            ) from None
        except CorruptionError as e:
            raise CorruptionError(f"{self._what}: shard {relpath!r} is damaged: {e}") from None

    def _load_index(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        sh = self._m.shards[k]
        key = (self._store.token, self._store.path(self._node, sh.path))
        with _indexes_lock:
            hit = _indexes.get(key)
            if hit is not None:
                _indexes.move_to_end(key)
                return hit
        reader = self._reader(sh.path)
        n = len(reader)
        if n != sh.records:
            raise CorruptionError(
                f"{self._what}: shard {sh.path!r} holds {n} records, the manifest says {sh.records}"
            )
        (raw,) = read_records(reader, [sh.index_record])
        what = f"{self._what}: index record of shard {sh.path!r}"
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
        pieces = _pieces(lengths, plen)
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
        if len(ids) <= 1:
            return {k: self._load_index(k) for k in ids}
        futures = {k: io_pool().submit(self._load_index, k) for k in ids}
        return {k: f.result() for k, f in futures.items()}

    def _locate(self, items: np.ndarray) -> np.ndarray:
        """Shard number of each (valid) item index."""
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

        def run(g: np.ndarray) -> None:
            relpath = m.shards[int(sh[g[0]])].path
            reader = self._reader(relpath)
            try:
                bufs = read_records(reader, record[g])
            except CorruptionError as e:
                raise CorruptionError(f"{self._what}: shard {relpath!r} is damaged: {e}") from None
            local: list[tuple[int, int, np.ndarray]] = []
            for pos, buf in zip(g.tolist(), bufs, strict=True):
                j = int(rep[pos])
                p = int(piece[pos])
                shp = list(shapes[j])
                n = shp[axis]
                shp[axis] = min(plen, n - p * plen) if n else 0
                what = f"{self._what} item {int(items[j])} piece {p} (shard {relpath!r})"
                local.append((j, p, decode_chunk(buf, dtype, shp, what)))
            with lock:
                for j, p, arr in local:
                    parts.setdefault(j, []).append((p, arr))  # type: ignore[arg-type]

        if len(groups) == 1:
            run(groups[0])
        else:
            futures = [io_pool().submit(contextvars.copy_context().run, run, g) for g in groups]
            for f in futures:
                f.result()
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
                raise IndexError(f"{self._what} item {int(items[j])}: {e}") from None
            if isinstance(res, np.ndarray):
                if not res.flags.writeable:
                    res = res.copy()
            else:
                res = np.asarray(res)
            out.append(res)
        return out

    def __getitem__(self, key: Any) -> np.ndarray | list[np.ndarray]:
        item_key, rest = _split_key(key, self._m.ndim, self._what)
        items, scalar = _item_indices(item_key, len(self), self._what)
        out = self._select(items, rest)
        return out[0] if scalar else out

    def get(self, items: Any, *key: Any) -> list[np.ndarray]:
        """Always a list: ``ra.get(idx, 0, slice(0, 100))`` == ``ra[idx, 0, :100]``."""
        _, rest = _split_key((0, *key), self._m.ndim, self._what)
        idx, _ = _item_indices(items, len(self), self._what)
        return self._select(idx, rest)

    def __iter__(self) -> Iterator[np.ndarray]:
        """Items in order, one shard at a time (the next shard is read while the
        current one is consumed)."""
        shards = self._m.shards
        if not shards:
            return
        pool = io_pool()
        nxt = pool.submit(self._read_shard, 0)
        for k in range(len(shards)):
            cur = nxt.result()
            if k + 1 < len(shards):
                nxt = pool.submit(self._read_shard, k + 1)
            yield from cur

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
            else _item_indices(items, len(self), self._what)[0]
        )
        if n is not None and (not _is_int(n) or n < 0):
            raise ValueError(f"{self._what}: pad length must be a non-negative int, got {n!r}")
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
                f"{self._what}: fill value {fill!r} does not fit dtype {m.dtype} ({e})"
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
            else _item_indices(items, len(self), self._what)[0]
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
    return RaggedArray(store, node, RaggedManifest.from_json(manifest, store.display(node)))


# ------------------------------------------------------------------ opening


def _locate_node(
    url: str | os.PathLike[str], component: str | None, storage_options: Mapping[str, Any] | None
) -> tuple[Store, str]:
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str):
        raise TypeError(f"a ragged array URL must be a str or path, got {type(url).__name__}")
    return get_store(url, storage_options), check_component(component)


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
    store, node = _locate_node(url, component, storage_options)
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
    ra._pin = pin
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


# ------------------------------------------------------------------ writing


def _parse_bytes(v: Any, what: str) -> int:
    if _is_int(v) and not isinstance(v, bool):
        if v <= 0:
            raise ValueError(f"{what} must be positive, got {v!r}")
        return int(v)
    if isinstance(v, str):
        units = {
            "": 1,
            "b": 1,
            "kb": 10**3,
            "mb": 10**6,
            "gb": 10**9,
            "kib": 1 << 10,
            "mib": 1 << 20,
            "gib": 1 << 30,
            "k": 1 << 10,
            "m": 1 << 20,
            "g": 1 << 30,
        }
        mt = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", v)
        if mt and mt.group(2).lower() in units:
            n = int(float(mt.group(1)) * units[mt.group(2).lower()])
            if n > 0:
                return n
    raise ValueError(f"{what} must be a positive int or a size such as '64MiB', got {v!r}")


@dataclass(frozen=True)
class _Layout:
    dtype: np.dtype
    ndim: int
    axis: int
    piece_len: int

    def check(self, x: Any, where: str) -> np.ndarray:
        """An item as an array, or ValueError/TypeError naming it."""
        arr = np.asarray(x)
        if arr.dtype.kind == "O":
            raise TypeError(f"{where}: object arrays cannot be stored (expected {self.dtype})")
        if arr.ndim != self.ndim or arr.dtype != self.dtype:
            raise ValueError(
                f"{where} has ndim {arr.ndim} and dtype {arr.dtype}; every item of a ragged "
                f"array must have ndim {self.ndim} and dtype {self.dtype}"
            )
        return arr


def _first_layout(first: Any, axis: int | None, piece_len: int | None, where: str) -> _Layout:
    arr = np.asarray(first)
    try:
        dt = check_dtype(arr.dtype, where)
    except ValueError as e:
        raise TypeError(str(e)) from None
    if arr.ndim == 0:
        raise ValueError(f"{where} is 0-d; ragged items need at least one dimension")
    if axis is None:
        # the longest axis of the first item (ties: the last of them)
        ax = max(range(arr.ndim), key=lambda d: (arr.shape[d], d))
    else:
        if not _is_int(axis) or not -arr.ndim <= axis < arr.ndim:
            raise ValueError(f"axis {axis!r} is out of range for items with {arr.ndim} dimensions")
        ax = int(axis) % arr.ndim
    if piece_len is None:
        row = math.prod(s for d, s in enumerate(arr.shape) if d != ax) * dt.itemsize
        plen = max(1, PIECE_BYTES // max(1, row))
    else:
        if not _is_int(piece_len) or piece_len < 1:
            raise ValueError(f"piece_len must be a positive int, got {piece_len!r}")
        plen = int(piece_len)
    return _Layout(dt, arr.ndim, ax, plen)


def _item_records(arr: np.ndarray, lay: _Layout) -> Iterator[np.ndarray]:
    n = arr.shape[lay.axis]
    if n == 0:
        yield encode_chunk(arr, lay.dtype)
        return
    sl: list[Any] = [slice(None)] * lay.ndim
    for a in range(0, n, lay.piece_len):
        sl[lay.axis] = slice(a, a + lay.piece_len)
        yield encode_chunk(arr[tuple(sl)], lay.dtype)


@dataclass(frozen=True)
class _WritePlan:
    store: Store
    node: str
    write_id: str
    layout: _Layout | None
    options: str
    shard_bytes: int


def _write_items(
    items: Iterable[Any], plan: _WritePlan, part: int, lay: _Layout | None = None
) -> list[dict[str, Any]]:
    """Task: write the items of one partition as one or more shards (split at
    ``shard_bytes``) -> their entries (item counts local to the partition)."""
    lay = lay or plan.layout
    assert lay is not None
    out: list[dict[str, Any]] = []
    batch: list[np.ndarray] = []
    size = 0
    local = 0

    def flush() -> None:
        nonlocal batch, size
        if not batch:
            return
        relpath = f"{SHARD_DIR}/{plan.write_id}-{part}-{len(out)}{SHARD_SUFFIX}"
        shapes = np.array([a.shape for a in batch], dtype=np.int64).reshape(len(batch), lay.ndim)
        npieces = int(_pieces(shapes[:, lay.axis], lay.piece_len).sum())

        def records() -> Iterator[np.ndarray]:
            for a in batch:
                yield from _item_records(a, lay)
            yield encode_chunk(shapes, np.dtype("<i8"))

        nbytes = write_shard(
            plan.store, join_component(plan.node, relpath), records(), plan.options
        )
        out.append({"path": relpath, "items": len(batch), "records": npieces + 1, "bytes": nbytes})
        batch, size = [], 0

    for x in items:
        where = f"ragged item {local}" + (f" of partition {part}" if part >= 0 else "")
        arr = lay.check(x, where)
        if batch and size + arr.nbytes > plan.shard_bytes:
            flush()
        batch.append(arr)
        size += arr.nbytes
        local += 1
    flush()
    return out


def _write_partition(items: Iterable[Any], plan: _WritePlan, part: int) -> dict[str, Any]:
    """Bag task: the items of one partition -> its shard entries."""
    return {"shards": _write_items(items, plan, part), "part": part}


def _commit(
    results: list[list[dict[str, Any]]] | list[dict[str, Any]],
    plan: _WritePlan,
    mode: str,
    compression: str,
    attrs: Mapping[str, Any] | None,
    base: tuple[int, str] | None,
) -> dict[str, Any]:
    """Task: assign item ranges in partition order and commit the manifest
    (:func:`arrayds.nodes.commit.commit`) if the node is still as the write found it
    (``base``: its stamp then, ``None`` if it had none); else the shards are removed
    and nothing of the write is visible."""
    store, node = plan.store, plan.node
    where = store.display(node)
    lay = plan.layout
    assert lay is not None
    entries: list[RaggedShard] = []
    pos = 0
    for r in results:
        for e in r["shards"] if isinstance(r, dict) else r:
            entries.append(RaggedShard(e["path"], pos, pos + e["items"], e["records"], e["bytes"]))
            pos += e["items"]

    def check(now: node_commit.NodeVersion) -> None:
        if now.stamp == base:
            return
        if mode == "w-" and now.exists:
            raise FileExistsError(
                errno.EEXIST, f"{where} already exists (mode 'w-' never replaces)", where
            )
        raise CommitConflictError(
            f"ragged array {where!r}: another writer committed while this write ran; nothing "
            f"of this write is visible"
        )

    def build(now: node_commit.NodeVersion) -> dict[str, Any]:
        if mode == "a" and now.raw is not None:
            old = RaggedManifest.from_json(now.raw, f"ragged array {where!r}")
            n0 = old.count
            man = RaggedManifest(
                old.dtype,
                old.ndim,
                old.axis,
                old.piece_len,
                old.compression,
                {**old.attrs, **dict(attrs or {})},
                old.shards + [e.shifted(n0) for e in entries],
            )
        else:
            man = RaggedManifest(
                lay.dtype,
                lay.ndim,
                lay.axis,
                lay.piece_len,
                compression,
                dict(attrs or {}),
                entries,
            )
        return man.to_json()

    return node_commit.commit(
        store,
        node,
        build,
        write_id=plan.write_id,
        check=check,
        written=[e.path for e in entries],
        replaces=mode == "w",
        what=f"ragged array {where!r}",
    )


def _is_bag(obj: Any) -> bool:
    try:
        import dask.bag as db
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, db.Bag)


@dataclass(frozen=True)
class _Request:
    """A checked ragged write, before any shard is written (:func:`_check_write`)."""

    store: Store
    node: str
    mode: str
    compression: str
    shard_bytes: int
    attrs: dict[str, Any] | None
    old: RaggedManifest | None
    """The ragged array appended to (``mode="a"`` on an existing one)."""
    base: tuple[int, str] | None
    """The node's stamp when the write started (what its commit expects)."""
    write_id: str

    @property
    def where(self) -> str:
        return self.store.display(self.node)

    def layout(self, first: Any, axis: int | None, piece_len: int | None) -> _Layout:
        """The layout of the items: the stored one when appending (``first`` checked
        against it), else read from the first item."""
        old = self.old
        if old is not None:
            lay = _Layout(old.dtype, old.ndim, old.axis, old.piece_len)
            if first is not None:
                lay.check(first, "ragged item 0")
            return lay
        return _first_layout(first, axis, piece_len, "ragged item 0")

    def plan(self, lay: _Layout, shard_bytes: int) -> _WritePlan:
        options = writer_options(self.compression if self.old is None else self.old.compression)
        return _WritePlan(self.store, self.node, self.write_id, lay, options, shard_bytes)

    def commit_task(self, writes: Any, plan: _WritePlan) -> Delayed:
        from dask.delayed import delayed

        return delayed(_commit, pure=False)(
            writes,
            plan,
            self.mode,
            self.compression,
            self.attrs,
            self.base,
            dask_key_name=f"commit-ragged-{self.write_id}",
        )


def _check_write(
    store: Store,
    node: str,
    mode: str,
    compression: str,
    piece_len: int | None,
    axis: int | None,
    shard_size: int | str | None,
    attrs: Mapping[str, Any] | None,
) -> _Request:
    """Check a ragged write against its arguments and the node (before any shard is
    written): mode, compression, attrs, the groups above, and for ``"w-"``/``"a"`` the
    node itself."""
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES} for a ragged array, got {mode!r}")
    where = store.display(node)
    compression = check_compression(compression, f"ragged array {where!r}")
    shard_bytes = SHARD_BYTES if shard_size is None else _parse_bytes(shard_size, "shard_size")
    if attrs is not None:
        if not isinstance(attrs, Mapping):
            raise TypeError(f"ragged array {where!r}: attrs must be a mapping")
        check_json_value(dict(attrs), f"ragged array {where!r}")
    node_commit.check_parents(store, node)
    base = node_commit.read(store, node)
    current = base.raw
    old: RaggedManifest | None = None
    if current is not None:
        if mode == "w-":
            raise FileExistsError(
                errno.EEXIST,
                f"{where!r} already exists (mode 'w-'); use mode 'w' to replace it or 'a' "
                f"to append",
                where,
            )
        if mode == "a":
            if current.get("kind") != KIND:
                raise ValueError(
                    f"cannot append ragged items to {where!r}: it is a {current.get('kind')!r} node"
                )
            old = RaggedManifest.from_json(current, f"ragged array {where!r}")
            if axis is not None and (int(axis) % old.ndim) != old.axis:
                raise ValueError(
                    f"ragged array {where!r} is stored in pieces along axis {old.axis}; cannot "
                    f"append with axis={axis}"
                )
            if piece_len is not None and piece_len != old.piece_len:
                raise ValueError(
                    f"ragged array {where!r} has piece_len {old.piece_len}; cannot append with "
                    f"piece_len={piece_len}"
                )
    return _Request(
        store,
        node,
        mode,
        compression,
        shard_bytes,
        dict(attrs) if attrs else None,
        old,
        base.stamp,
        new_write_id(),
    )


def _write_bag(
    data: dask.bag.Bag,
    req: _Request,
    axis: int | None,
    piece_len: int | None,
    first: Any,
    compute: bool,
    progress: bool,
) -> RaggedArray | Delayed:
    """A bag: one shard-writing task per partition (fused with the bag's own tasks),
    then the commit task."""
    import dask.bag as db
    from dask.base import get_scheduler
    from dask.highlevelgraph import HighLevelGraph

    if req.old is None:
        # the layout (dtype, ndim, axis, piece_len) comes from the first item:
        # compute partitions until one has an item (usually just the first)
        first = first if first is not None else _first_item(data)
        if first is None:
            raise ValueError(f"ragged array {req.where!r}: the bag has no items")
    lay = req.layout(None if req.old is not None else first, axis, piece_len)
    plan = req.plan(lay, req.shard_bytes)
    wname = f"write-ragged-{req.write_id}"
    layer = {
        (wname, k): (_write_partition, (data.name, k), plan, k) for k in range(data.npartitions)
    }
    graph = HighLevelGraph.from_collections(wname, layer, dependencies=[data])
    writes = db.Bag(graph, wname, data.npartitions).to_delayed(optimize_graph=True)
    committed = req.commit_task(writes, plan)
    if not compute:
        return committed
    from .progress import compute as _compute  # a bar only on a terminal (issue 6)

    man = _compute(committed, progress=progress, scheduler=get_scheduler(collections=[data]))
    return RaggedArray(req.store, req.node, RaggedManifest.from_json(man, req.where))


def _write_list(
    data: Any, req: _Request, axis: int | None, piece_len: int | None, compute: bool
) -> RaggedArray | Delayed:
    """A list: items packed into shards of about ``shard_bytes`` in order, written in
    threads (or as delayed tasks with ``compute=False``), then committed."""
    from dask.delayed import delayed

    where = req.where
    if isinstance(data, np.ndarray) and data.dtype.kind != "O":
        data = list(data)
    if not isinstance(data, (list, tuple)):
        raise TypeError(
            f"ragged array {where!r}: expected a list of numpy arrays or a dask bag of them, "
            f"got {type(data).__name__}"
        )
    if not data and req.old is None:
        raise ValueError(f"ragged array {where!r}: no items to write")
    items = list(data)
    lay = req.layout(items[0] if items else None, axis, piece_len)
    arrays = [lay.check(x, f"ragged item {i}") for i, x in enumerate(items)]
    # group items into shards of about shard_bytes, in order
    groups: list[list[np.ndarray]] = []
    size = 0
    for a in arrays:
        if not groups or (groups[-1] and size + a.nbytes > req.shard_bytes):
            groups.append([])
            size = 0
        groups[-1].append(a)
        size += a.nbytes
    plan = req.plan(lay, 1 << 62)
    if not compute:
        writes = [
            delayed(_write_items, pure=False)(
                delayed(g, traverse=False),
                plan,
                k,
                dask_key_name=f"write-ragged-{req.write_id}-{k}",
            )
            for k, g in enumerate(groups)
        ]
        return req.commit_task(writes, plan)
    if len(groups) <= 1:
        results = [_write_items(g, plan, k) for k, g in enumerate(groups)]
    else:
        with ThreadPoolExecutor(min(len(groups), max(2, os.cpu_count() or 1))) as ex:
            futures = [ex.submit(_write_items, g, plan, k) for k, g in enumerate(groups)]
            try:
                results = [f.result() for f in futures]
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    man = _commit(results, plan, req.mode, req.compression, req.attrs, req.base)
    return RaggedArray(req.store, req.node, RaggedManifest.from_json(man, where))


def write(
    data: Sequence[np.ndarray] | dask.bag.Bag,
    store: Store,
    node: str,
    *,
    mode: str = "w-",
    compression: str = "zstd:3",
    piece_len: int | None = None,
    axis: int | None = None,
    shard_size: int | str | None = None,
    attrs: Mapping[str, Any] | None = None,
    compute: bool = True,
    progress: bool = False,
    first: Any = None,
) -> RaggedArray | Delayed:
    """:func:`write_ragged` at ``node`` of ``store`` (the entry of both it and
    ``to_arrayrecord``); ``first``: a bag's first item when the caller read it
    already.

    >>> import numpy as np
    >>> from arrayds.storage import get_store
    >>> len(write([np.zeros(3), np.zeros(5)], get_store("memory://doc-ragged-write"), "x"))
    2
    """
    req = _check_write(store, node, mode, compression, piece_len, axis, shard_size, attrs)
    if _is_bag(data):
        return _write_bag(data, req, axis, piece_len, first, compute, progress)
    return _write_list(data, req, axis, piece_len, compute)


def write_ragged(
    data: Sequence[np.ndarray] | dask.bag.Bag,
    url: str | os.PathLike[str],
    component: str | None = None,
    *,
    mode: str = "w-",
    compression: str = "zstd:3",
    piece_len: int | None = None,
    axis: int | None = None,
    shard_size: int | str | None = None,
    attrs: Mapping[str, Any] | None = None,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    progress: bool = False,
) -> RaggedArray | Delayed:
    """Write numpy arrays of one dtype and ndim but different shapes as a ragged array.

    ``data``: a list (or tuple) of arrays, or a ``dask.bag.Bag`` of arrays. Items are
    cut into pieces of ``piece_len`` elements along ``axis``. Defaults: ``axis`` is
    the longest axis of the first item (ties: the last), ``piece_len`` makes a piece
    of the first item about :data:`PIECE_BYTES` (1 MiB) uncompressed. Items are packed
    into shard files of about ``shard_size`` bytes (default :data:`SHARD_BYTES`,
    64 MiB) in order, never splitting an item; a bag writes each partition as its
    own shard(s). Shards are written in parallel (threads for a list, one task per
    partition for a bag); one final commit makes them visible together.

    ``mode``: ``"w-"`` create (``FileExistsError`` if the node exists), ``"w"``
    replace, ``"a"`` append items (dtype, ndim and axis must match the stored ones;
    ``piece_len`` is the stored one). An item whose ndim or dtype differs from the
    first is a ``ValueError`` naming it, and nothing is committed.

    With ``compute=False`` returns a ``dask.delayed.Delayed`` that writes and commits
    (its result is the manifest dict). A bag written to a new node has its first
    partition computed once up front to read the layout (dtype, ndim, axis,
    piece_len) from its first item.

    >>> import numpy as np, arrayds.ragged as rg
    >>> ra = rg.write_ragged([np.zeros((2, 10), "f4"), np.zeros((2, 4), "f4")],
    ...                      "memory://doc-write-ragged", piece_len=3)
    >>> ra.axis, ra.piece_len, ra.nshards
    (1, 3, 1)
    """
    store, node = _locate_node(url, component, storage_options)
    return write(
        data,
        store,
        node,
        mode=mode,
        compression=compression,
        piece_len=piece_len,
        axis=axis,
        shard_size=shard_size,
        attrs=attrs,
        compute=compute,
        progress=progress,
    )


# ------------------------------------------------------- to/from_arrayrecord


def _is_array_item(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype.kind != "O" and x.ndim >= 1


def _is_ragged_list(data: Any) -> bool:
    """A non-empty list/tuple made only of numpy arrays (ndim >= 1)."""
    return (
        isinstance(data, (list, tuple))
        and bool(data)
        and all(isinstance(x, np.ndarray) for x in data)
        and any(_is_array_item(x) for x in data)
    )


def _first_of(part: Any) -> list[Any]:
    for item in part:
        return [item]
    return []


def _first_item(bag: Any) -> Any:
    # Each probe task returns at most one item: the partition itself stays on the
    # worker (shipping a whole partition to the client doubled the cost of
    # to_arrayrecord(bag) for large record partitions).
    for part in bag.map_partitions(_first_of).to_delayed():
        got = part.compute()
        if len(got):
            return got[0]
    return None


def _api_writer(
    data: Any,
    store: Store,
    node: str,
    *,
    region: Any,
    dims: Any,
    serializer: str,
    group_size: int,
    **options: Any,
) -> Any:
    """``arrayds.to_arrayrecord`` for lists of numpy arrays and for bags. They are a
    ragged array (API.md section 3) unless the call asks for records — a
    ``serializer`` other than ``"auto"``, a ``group_size`` or ``num_shards`` — or the
    data is a bag whose first item is not a numpy array: then they go to records
    (:mod:`arrayds.records`), numpy arrays serialized like any other object."""
    first = None
    as_records = serializer not in ("auto", None) or group_size != 1 or "num_shards" in options
    if not as_records and _is_bag(data):
        first = _first_item(data)
        as_records = not _is_array_item(first)
    if as_records:
        # a bag of other objects, or records options: the records writer's input
        extra = {"region": region, "dims": dims, "serializer": serializer}
        records = kinds.get_writer("records")
        return records.write(data, store, node, group_size=group_size, **extra, **options)
    where = f"ragged array {store.display(node)!r}"
    for key, value in (("region", region), ("dims", dims)):
        if value is not None:
            raise ValueError(f"{where}: {key}= applies to N-d arrays, not ragged arrays")
    unknown = sorted(set(options) - set(_RAGGED_WRITE_KEYS))
    if unknown:
        raise TypeError(f"{where}: unexpected keyword arguments {unknown} for a ragged array")
    return write(data, store, node, first=first, **options)


_RAGGED_WRITE_KEYS = (
    "mode",
    "compression",
    "shard_size",
    "attrs",
    "compute",
    "progress",
    "piece_len",
    "axis",
)
"""The keywords of ``to_arrayrecord`` that a ragged array write takes."""


def _api_reader(
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


def _node_factory(store: Store, node: str, m: RaggedManifest, mode: str) -> RaggedArray:
    return RaggedArray(store, node, m, "r")


def _shard_refs(m: RaggedManifest) -> list[kinds.ShardRef]:
    """The shard files of a ragged array: pieces then an index record, counted."""
    return [kinds.ShardRef(s.path, records=s.records, size=s.bytes, entry=s) for s in m.shards]


kinds.register(
    kinds.NodeKind(
        KIND,
        parse=RaggedManifest.from_json,
        open=_node_factory,  # arrayds.open(url)["clips"] -> RaggedArray
        to_dask=_api_reader,
        shard_folder=SHARD_DIR,
        shards=_shard_refs,
        verify_extra=kinds.lazy("arrayds.tools.verify", "ragged_checks"),
        describe=kinds.lazy("arrayds.tools.describe", "describe_ragged"),
        info_text=kinds.lazy("arrayds.tools.describe", "ragged_text"),
        cat=kinds.lazy("arrayds.tools.cat", "cat_ragged"),
        compact=kinds.lazy("arrayds.tools.compact", "compact_ragged"),
        totals="ragged",
        plural="ragged",
        phrase="a ragged array",
    )
)
kinds.register_writer(
    kinds.Writer("ragged", lambda x: _is_ragged_list(x) or _is_bag(x), _api_writer, KIND)
)
