"""Chunked N-d arrays on ArrayRecord shards (docs/guide.md, Arrays).

An :class:`Array` is a handle on one array node: its manifest (read once, at open)
plus the store. Reading a selection:

1. :func:`grid.parse_selection` and :func:`grid.plan_axis` turn the key into the
   touched chunks along each axis (vectorized over chunks, slices where possible);
2. :meth:`manifest.ShardTable.locate` maps all touched chunk coordinates to
   (shard entry, record) at once;
3. chunks are grouped by shard file; each group is **one** batched engine read
   (decoded in parallel by the engine), groups run on a small thread pool;
4. the engine decodes each record straight into its final place (GIL released, in
   parallel): a chunk taken whole is written into the output array's memory (its
   ``.npy`` header compared, not copied), and a selection that is exactly one chunk
   is decoded into a new writable buffer whose data becomes the result, with no
   further copy. A chunk taken in part is decoded and its part copied into the
   output. Chunks no shard covers are ``fill_value``.

Writing (``a[sel] = v``, ``append``) builds the new chunks (reading partially covered
ones first), writes them as one new immutable shard and commits a new manifest in
which that shard's entries come last (they override older ones).

>>> import arrayds, numpy as np
>>> a = arrayds.open_array("memory://doc-array", mode="w", shape=(6, 4), dtype="i4", chunks=(4, 2))
>>> a[1:5, 1] = 7
>>> a[:, 1].tolist(), a.nchunks_initialized, a.nchunks
([0, 7, 7, 7, 7, 0], 2, 4)
>>> a.append(np.ones((3, 4), "i4"))
(9, 4)
>>> a.chunks
((4, 4, 1), (2, 2))
"""

from __future__ import annotations

import contextlib
import errno
import html
import itertools
import math
import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import CommitConflictError, CorruptionError
from ...files.common import run_each
from ...files.reader import ArrayRecordReader
from ...html_repr import node_html
from ...nodes import commit, pending
from ...nodes import registry as kinds
from ...nodes.handle import Node
from ...nodes.history import resolve
from ...nodes.merge import check_compact, compact_small_files
from ...nodes.merge import tiered as tiered_merge
from ...nodes.names import SHARD_DIR, check_json_value, join_component, new_write_id, shard_name
from ...nodes.options import writer_options
from ...nodes.read import kind_phrase, missing_node, read_node
from ...nodes.retry import APPEND_RETRIES, check_retries
from ...nodes.shards import (
    io_pool,
    node_shard_reader,
    read_shard_records,
    read_shard_records_into,
    write_shard,
)
from ...storage import get_store
from ...storage.base import BaseStore as Store
from ...storage.coalesce import coalesce_options
from .grid import (
    AxisGrid,
    AxisPlan,
    ChunkGrid,
    Selection,
    box_selection,
    ortho_key,
    parse_selection,
    plan_axis,
)
from .manifest import ArrayManifest, ShardEntry, ShardList
from .tensor import decode_chunk, encode_chunk, new_buffer, npy_header
from .to_dask import array_to_dask

__all__ = [
    "Array",
    "ArrayInfo",
    "Attributes",
    "dask_array",
    "read_array_manifest",
    "rebase_append",
    "rebase_base",
    "restore_array",
    "stack_entries",
]


# ------------------------------------------------------------------ attributes


class Attributes(MutableMapping):
    """User attributes of a node; every change is committed at once (a new
    manifest), so set several keys with one :meth:`update`. In mode ``"r"`` changes
    raise ``PermissionError``. Values must be JSON-serializable."""

    def __init__(
        self,
        get: Callable[[], dict[str, Any]],
        commit: Callable[[dict[str, Any]], None],
        writable: bool,
        what: str,
    ) -> None:
        self._get = get
        self._commit = commit
        self._writable = writable
        self.what = what

    def __getitem__(self, key: str) -> Any:
        return self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def _check(self) -> None:
        if not self._writable:
            raise PermissionError(f"{self.what} is open read-only (mode 'r'); attrs cannot change")

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        self._check()
        new = dict(self._get())
        del new[key]
        self._commit(new)

    def update(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        """Set several attributes with one commit."""
        self._check()
        new = dict(self._get())
        new.update(*args, **kwargs)
        for k in new:
            if not isinstance(k, str):
                raise TypeError(f"{self.what}: attribute names must be str, got {k!r}")
        check_json_value(new, self.what)
        self._commit(new)

    def asdict(self) -> dict[str, Any]:
        return dict(self._get())

    def __repr__(self) -> str:
        return f"Attributes({self._get()!r})"


# -------------------------------------------------------------------- info


@dataclass
class ArrayInfo:
    """What ``Array.info`` shows: (field, value) rows, printable and HTML."""

    rows: list[tuple[str, str]]

    def __repr__(self) -> str:
        w = max(len(k) for k, _ in self.rows)
        return "\n".join(f"{k:<{w}} : {v}" for k, v in self.rows)

    def __str__(self) -> str:
        return self.__repr__()

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
            f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
            for k, v in self.rows
        )
        return f"<table>{body}</table>"

    def __getitem__(self, key: str) -> str:
        for k, v in self.rows:
            if k == key:
                return v
        raise KeyError(key)


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n} B"  # pragma: no cover


# ------------------------------------------------------------------ helpers


def _cartesian(arrays: Sequence[np.ndarray]) -> np.ndarray:
    """(K, n) coordinates of the product of 1-d arrays, C order."""
    n = len(arrays)
    if n == 0:
        return np.zeros((1, 0), dtype=np.int64)
    grids = np.meshgrid(*arrays, indexing="ij")
    return np.stack([g.reshape(-1) for g in grids], axis=1).astype(np.int64, copy=False)


def _runs(sorted_ids: np.ndarray) -> list[tuple[int, int]]:
    """Positions [a, b) of maximal runs of consecutive ids in an ascending array."""
    if sorted_ids.size == 0:
        return []
    cut = np.flatnonzero(np.diff(sorted_ids) != 1) + 1
    starts = np.concatenate([[0], cut])
    stops = np.concatenate([cut, [sorted_ids.size]])
    return [(int(a), int(b)) for a, b in zip(starts, stops, strict=False)]


class _Plan:
    """A selection mapped onto the chunk grid: per-axis plans, the touched chunk
    coordinates (K, ndim) and their (entry, record) in the shard table."""

    __slots__ = ("plans", "lens", "coords", "entry", "record", "multi", "sizes", "table")

    def __init__(self, m: ArrayManifest, sel: Selection) -> None:
        axes = m.grid.axes
        self.plans: list[AxisPlan] = [
            plan_axis(ax, s) for ax, s in zip(axes, sel.axes, strict=True)
        ]
        self.lens = tuple(len(p.sizes) for p in self.plans)
        self.sizes = [p.sizes for p in self.plans]
        if all(n == 1 for n in self.lens):  # one chunk: skip the products
            self.coords = np.array([[int(p.chunks[0]) for p in self.plans]], dtype=np.int64)
            self.multi: Any = [(0,)] * len(self.lens)
        else:
            self.coords = _cartesian([p.chunks for p in self.plans])
            self.multi = np.unravel_index(np.arange(self.coords.shape[0]), self.lens)
        if not self.lens:
            self.coords = np.zeros((1, 0), dtype=np.int64)
        c = self.coords
        self.table = m.table_for(c.min(axis=0), c.max(axis=0)) if c.size else m.table
        """The shard table ``entry`` numbers point into (of the entries near the
        selection only, for a long list: :meth:`ArrayManifest.table_for`)."""
        self.entry, self.record = self.table.locate(c)

    @property
    def k(self) -> int:
        return self.coords.shape[0]

    def index(self, k: int) -> tuple[int, ...]:
        return tuple(int(m[k]) for m in self.multi)

    def chunk_shape(self, idx: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(s[i] for s, i in zip(self.sizes, idx, strict=True))

    def local_key(self, idx: tuple[int, ...]) -> tuple[Any, ...]:
        return ortho_key([p.local[i] for p, i in zip(self.plans, idx, strict=True)])

    def out_key(self, idx: tuple[int, ...]) -> tuple[Any, ...]:
        return ortho_key([p.out[i] for p, i in zip(self.plans, idx, strict=True)])

    def full(self) -> np.ndarray:
        f = np.ones(self.k, dtype=bool)
        for p, m in zip(self.plans, self.multi, strict=True):
            f &= p.full[np.asarray(m)]
        return f


def stack_entries(
    old: Sequence[ShardEntry], new: Sequence[ShardEntry], grid_shape: Sequence[int] | None = None
) -> Sequence[ShardEntry]:
    """Old entries (minus those a single new box hides completely) then the new ones.
    ``grid_shape``: the chunk grid the old entries lie in (known anyway for a
    :class:`ShardList`); new boxes wholly outside it (an append) hide nothing, and the
    old entries are then not looked at."""
    if not new:
        return old if isinstance(old, ShardList) else list(old)
    if isinstance(old, ShardList):
        grid_shape = old.extent
    if grid_shape is not None:
        new = list(new)
        inside = [n for n in new if all(a < g for a, g in zip(n.start, grid_shape, strict=False))]
        if not inside:
            return old.extended(new) if isinstance(old, ShardList) else [*old, *new]
    if isinstance(old, ShardList):
        hid = old.hiding(list(new))  # a long list: only the segments new boxes meet
        if hid is not None:
            return hid
    kept = [e for e in old if not any(n.contains_box(e.start, e.stop) for n in new)]
    return kept + list(new)


@dataclass(frozen=True)
class _Appended:
    """The shard an append wrote (:meth:`Array._append_shard`)."""

    manifest: ArrayManifest
    """The manifest with the append: its grid grown, its entries added."""
    entries: list[ShardEntry]
    first: int
    """The first chunk index (along the append's axis) the shard holds."""
    whole: bool
    """Whether the shard holds only new chunks (no partly filled chunk it completed)."""
    n: int
    """The shard's number within the write (``c/<write id>-<n>``)."""

    @property
    def written(self) -> list[str]:
        return [e.path for e in self.entries]


_Rebased = tuple[ArrayManifest, ArrayManifest, Sequence[ShardEntry]]
"""An append placed on another writer's commit: (that node's manifest, the manifest to
commit, the entries it adds)."""


def rebase_base(base: commit.NodeVersion, what: str) -> ArrayManifest:
    """The array ``base`` holds, that an append whose commit lost a race goes on
    (:class:`CommitConflictError` if it was removed or is another kind of node now)."""
    if base.kind != "array":
        raise CommitConflictError(
            f"{what} was removed or replaced by a {base.kind or 'missing'} node while this "
            f"append ran; nothing of this write is visible"
        )
    return kinds.get("array").parse(base.lazy_raw, what)


def rebase_append(
    cur: ArrayManifest,
    planned: ArrayManifest,
    axis: int,
    first: int,
    new: Sequence[ShardEntry],
    what: str,
    attrs: Mapping[str, Any] | None = None,
) -> tuple[ArrayManifest, list[ShardEntry]]:
    """An append planned as ``planned`` (the manifest it read, its grid grown along
    ``axis`` by the chunks from index ``first`` on, which the shards of ``new`` hold
    whole), placed after the rows of the array ``cur`` another writer left: (the
    manifest to commit, the moved entries); ``attrs`` are set over ``cur``'s. Only
    entries move, nothing is written again. :class:`CommitConflictError` if the
    appended chunks do not fit ``cur`` (another dtype, or other chunks on the other
    axes)."""
    others = [d for d in range(planned.ndim) if d != axis]
    if (
        cur.dtype != planned.dtype
        or cur.ndim != planned.ndim
        or any(cur.grid.axes[d] != planned.grid.axes[d] for d in others)
    ):
        chunks = [planned.grid.chunks[d] for d in others]
        raise CommitConflictError(
            f"{what}: another writer replaced the array (now dtype {cur.dtype}, shape "
            f"{cur.shape}, chunks {cur.grid.chunks}) while this append of chunks of dtype "
            f"{planned.dtype} and chunks {chunks} on the other axes ran; nothing of this "
            f"write is visible"
        )
    ax = planned.grid.axes[axis]
    shift = cur.grid.axes[axis].nchunks - first
    axes = list(cur.grid.axes)
    axes[axis] = cur.grid.axes[axis].concat(ax.sub(first, ax.nchunks))
    added = [e.shifted(axis, shift) for e in new]
    shards = stack_entries(cur.shards, added, cur.grid.grid_shape)
    merged_attrs = {**cur.attrs, **dict(attrs or {})}
    return cur.with_(grid=ChunkGrid(axes), attrs=merged_attrs, shards=shards), added


# -------------------------------------------------------------------- Array


class Array(Node):
    """A chunked N-d array stored as ArrayRecord shards (docs/guide.md, Arrays).

    Open one with :func:`arrayds.open_array`, ``group[name]`` or
    ``group.create_array``; write one from dask or numpy with
    :func:`arrayds.to_arrayrecord`.

    >>> import arrayds, numpy as np
    >>> a = arrayds.open_array("memory://doc-array2", mode="w", shape=(4, 5),
    ...                        dtype="f8", chunks=2, fill_value=np.nan)
    >>> a[:2, :2] = 1.0
    >>> a[0, ::2]
    array([ 1., nan, nan])
    >>> a.oindex[[0, 3], [1, 0]].shape
    (2, 2)
    """

    _kind = "array"

    def __init__(self, store: Store, node: str, manifest: ArrayManifest, mode: str = "r") -> None:
        self._store = store
        self._node = node
        self._m = manifest
        self._mode = mode
        self._lock = threading.Lock()

    # -- identity

    @property
    def manifest(self) -> ArrayManifest:
        """The manifest this handle reads (a snapshot taken at open or last commit)."""
        return self._m

    # -- metadata

    @property
    def shape(self) -> tuple[int, ...]:
        return self._m.shape

    @property
    def dtype(self) -> np.dtype:
        return self._m.dtype

    @property
    def ndim(self) -> int:
        return self._m.ndim

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.itemsize

    @property
    def chunks(self) -> tuple[tuple[int, ...], ...]:
        """Dask-style chunks: one tuple of chunk lengths per axis."""
        return self._m.grid.chunks

    @property
    def grid(self) -> ChunkGrid:
        return self._m.grid

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        """The nominal chunk shape (used for data added by :meth:`append`)."""
        return self._m.chunk_shape

    @property
    def nchunks(self) -> int:
        return self._m.grid.nchunks

    @property
    def nchunks_initialized(self) -> int:
        """Chunks covered by some shard (the others read as ``fill_value``)."""
        return self._m.table.covered_count(self._m.grid.grid_shape)

    @property
    def nshards(self) -> int:
        """Shard entries in the manifest."""
        return len(self._m.shards)

    @property
    def fill_value(self) -> Any:
        """The value of chunks never written (a numpy scalar of ``dtype``)."""
        return self._m.fill[()]

    @property
    def compression(self) -> str:
        return self._m.compression

    @property
    def dims(self) -> tuple[str, ...] | None:
        return self._m.dims

    @property
    def generation(self) -> int:
        """Incremented by every commit to this array."""
        return self._m.generation

    @property
    def attrs(self) -> Attributes:
        return Attributes(
            lambda: self._m.attrs,
            self._commit_attrs,
            not self.read_only,
            self.what,
        )

    @property
    def stored_bytes(self) -> int | None:
        """Bytes of the shard files the manifest references (None if unknown)."""
        sizes: dict[str, int] = {}
        for e in self._m.shards:
            if e.bytes is None:
                return None
            sizes[e.path] = e.bytes
        return sum(sizes.values())

    @property
    def info(self) -> ArrayInfo:
        """A summary table (prints as text, renders as HTML in Jupyter)."""
        m = self._m
        regular = all(
            len(ax.runs) <= 1
            or (len(ax.runs) == 2 and ax.runs[1][1] == 1 and ax.runs[1][0] < ax.runs[0][0])
            for ax in m.grid.axes
        )
        chunk_txt = str(m.chunk_shape) if regular else f"irregular {m.grid.chunks}"
        if len(chunk_txt) > 200:
            chunk_txt = chunk_txt[:200] + "..."
        stored = self.stored_bytes
        rows = [
            ("Name", self.name),
            ("URL", self._store.url),
            ("Type", "arrayds.Array"),
            ("Shape", str(self.shape)),
            ("Dtype", f"{self.dtype} ({self.dtype.str})"),
            ("Chunks", chunk_txt),
            ("Chunk grid", str(m.grid.grid_shape)),
            ("Chunks initialized", f"{self.nchunks_initialized}/{self.nchunks}"),
            ("Fill value", repr(self.fill_value)),
            ("Compression", m.compression),
            ("Dims", str(m.dims)),
            ("Shards", str(len({e.path for e in m.shards}))),
            ("No. bytes", f"{self.nbytes} ({_fmt_bytes(self.nbytes)})"),
        ]
        if stored is not None:
            rows.append(("Stored bytes", f"{stored} ({_fmt_bytes(stored)})"))
            if stored:
                rows.append(("Storage ratio", f"{self.nbytes / stored:.2f}"))
        rows.append(("Generation", str(m.generation)))
        rows.append(("Mode", self._mode))
        if m.attrs:
            rows.append(("Attributes", ", ".join(sorted(m.attrs))))
        return ArrayInfo(rows)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self) -> str:
        chunks = self._m.chunk_shape
        return (
            f"<arrayds.Array {self._store.display(self._node)!r} shape={self.shape} "
            f"dtype={self.dtype} chunks={chunks} mode={self._mode!r}>"
        )

    def _repr_html_(self) -> str:
        """A summary table and the chunk map (:mod:`arrayds.html_repr`)."""

        return node_html(self._store, self._node, self._m, mode=self._mode, version=self.version)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[...]
        return out if dtype is None else out.astype(dtype, copy=False)

    # -- pickling: reopen from the URL, same manifest snapshot

    def __reduce__(self) -> tuple[Any, ...]:
        m = self._m
        stored = m.shards.stored() if isinstance(m.shards, ShardList) else None
        doc = m.to_json() if stored is None else {**m.header_json(), "shards": stored}
        return (
            restore_array,
            (self._store.url, self._store.storage_options, self._node, self._mode, doc),
        )

    def refresh(self) -> Array:
        """Re-read the manifest (see commits made by other writers); returns self."""
        self._m = read_array_manifest(self._store, self._node)
        return self

    # -- reading

    def __getitem__(self, key: Any) -> np.ndarray:
        if type(key) is tuple:
            got = self._read_exact_chunk(key, zero_copy=False)
            if got is not None:
                return got
        sel = parse_selection(key, self.shape, self.what)
        return self._read(sel)

    @property
    def oindex(self) -> _OIndex:
        """Orthogonal (outer) indexing: each index applies to its own axis
        (``a.oindex[[0, 2], [1, 3]]`` is a 2x2 block); int arrays, bool arrays,
        ints and slices may be mixed. Also assignable."""
        return _OIndex(self)

    def _read(
        self, sel: Selection, zero_copy: bool = False, out: np.ndarray | None = None
    ) -> np.ndarray:
        m = self._m
        dtype = m.dtype
        work = sel.work_shape
        if sel.size == 0:
            return np.empty(sel.shape, dtype=dtype)
        plan = _Plan(m, sel)
        if plan.k == 1:  # the latency path: one chunk
            if plan.entry[0] < 0:
                return np.full(sel.shape, m.fill, dtype=dtype)
            idx = (0,) * m.ndim
            if plan.full()[0]:
                table = plan.table
                relpath = table.paths[int(table.path_ids[plan.entry[0]])]
                coord = tuple(int(c) for c in plan.coords[0])
                chunk = self._decode_new(relpath, int(plan.record[0]), coord, plan.chunk_shape(idx))
                return chunk.reshape(sel.shape)
            got: list[np.ndarray] = []
            self._fetch(plan, np.zeros(1, dtype=np.int64), lambda k, i, chunk: got.append(chunk))
            return np.array(got[0][plan.local_key(idx)], copy=True).reshape(sel.shape)
        present = plan.entry >= 0
        if not present.any():
            return np.full(sel.shape, m.fill, dtype=dtype)
        if out is None or out.shape != work:  # else the caller's array (read_block)
            out = new_buffer(sel.size * dtype.itemsize).view(dtype).reshape(work)
        if not present.all():
            for k in np.flatnonzero(~present):
                out[plan.out_key(plan.index(int(k)))] = m.fill

        def put(k: int, idx: tuple[int, ...], chunk: np.ndarray) -> None:
            out[plan.out_key(idx)] = chunk[plan.local_key(idx)]

        self._fetch(plan, np.flatnonzero(present), put, out)
        return out.reshape(sel.shape)

    def _reader(
        self,
        relpath: str,
        whole: bool = False,
        shards: Mapping[str, int | None] | None = None,
    ) -> ArrayRecordReader:
        """The reader of shard ``relpath``; ``whole``: fetch it whole (see
        :meth:`_whole`); ``shards``: the other shards the same read opens by footer
        (their footers are prefetched, :func:`arrayds.nodes.shards.node_shard_reader`)."""
        try:
            size = self._m.shard_sizes().get(relpath)
            return node_shard_reader(self._store, self._node, relpath, size, shards, whole=whole)
        except FileNotFoundError:
            raise FileNotFoundError(
                errno.ENOENT,
                f"{self.what}: shard {relpath!r} named by the manifest is missing",
                self._store.path(self._node, relpath),
            ) from None
        except CorruptionError as e:
            raise CorruptionError(f"{self.what}: shard {relpath!r} is damaged: {e}") from None

    def _whole(self, relpath: str, count: int) -> bool:
        """Whether a read of ``count`` records of shard ``relpath`` fetches the whole
        shard, footer included, in one request: a remote shard of known size at most
        the coalescing ``max_size``, of which the read needs half the records or more
        (:func:`arrayds.nodes.shards.shard_reader`'s ``whole``)."""
        if self._store.local or not 2 * count >= self._m.shard_records(relpath) > 0:
            return False
        size = self._m.shard_sizes().get(relpath)
        return size is not None and size <= coalesce_options().max_size

    def _reader_with(
        self, relpath: str, recs: Any, shards: Mapping[str, int | None] | None = None
    ) -> ArrayRecordReader:
        """The reader of shard ``relpath``, checked to hold every record in ``recs``
        (else the manifest and the shard disagree: CorruptionError naming both). A
        read of half the shard's records asks for the whole shard
        (:meth:`_whole`); ``shards``: as :meth:`_reader`'s."""
        reader = self._reader(relpath, self._whole(relpath, len(recs)), shards)
        n = len(reader)
        top = max(recs) if isinstance(recs, list) else int(recs.max())
        if top >= n:
            raise CorruptionError(
                f"{self.what}: shard {relpath!r} has {n} records, but the manifest "
                f"needs record {top}"
            )
        return reader

    def _read_records(
        self, relpath: str, recs: Any, shards: Mapping[str, int | None] | None = None
    ) -> list[bytes]:
        """One batched engine read of records ``recs`` of shard ``relpath``, with the
        record count checked and errors naming the array and the shard (``shards``: as
        :meth:`_reader`'s)."""
        reader = self._reader_with(relpath, recs, shards)
        try:
            return read_shard_records(reader, recs)
        except CorruptionError as e:
            raise CorruptionError(f"{self.what}: shard {relpath!r} is damaged: {e}") from None

    def decode_records_into(
        self,
        relpath: str,
        recs: Any,
        buffers: list[Any],
        prefix: Any = None,
        shards: Mapping[str, int | None] | None = None,
    ) -> bool:
        """Decode records ``recs`` of shard ``relpath`` into ``buffers`` (one batched
        engine call). False when a record is not ``prefix`` + its buffer's size (a
        header this writer would not produce, or a damaged manifest): the caller then
        takes the general path, which decodes any valid header or names the damage.
        ``shards``: the other shards the same read opens by footer (relpath -> recorded
        size), whose footers are then prefetched."""
        reader = self._reader_with(relpath, recs, shards)
        try:
            read_shard_records_into(reader, recs, buffers, prefix)
        except CorruptionError as e:
            raise CorruptionError(f"{self.what}: shard {relpath!r} is damaged: {e}") from None
        except ValueError:
            return False
        return True

    def _decode_new(
        self, relpath: str, r: int, coord: tuple[int, ...], shape: tuple[int, ...]
    ) -> np.ndarray:
        """Chunk ``coord`` (record ``r`` of shard ``relpath``) as a new writable array:
        the record is decoded into a fresh buffer and the array is its data part (no
        copy after the decode)."""
        dtype = self._m.dtype

        def what() -> str:
            return f"{self.what} chunk {coord} (shard {relpath!r}, record {r})"

        h = len(npy_header(dtype, shape))
        buf = new_buffer(h + math.prod(shape) * dtype.itemsize)
        if self.decode_records_into(relpath, [r], [buf]):
            return decode_chunk(buf, dtype, shape, what)
        rec = self._read_records(relpath, [r])[0]
        return decode_chunk(rec, dtype, shape, what).copy()

    def _read_exact_chunk(self, key: tuple[slice, ...], zero_copy: bool) -> np.ndarray | None:
        """If ``key`` (step-1 slices) is exactly one stored chunk, read it with no
        planning at all (the common dask task); else None. The result is always a
        writable array of its own (``zero_copy`` is kept for callers; no effect)."""
        m = self._m
        axes = m.grid.axes
        if len(key) != len(axes):
            return None
        coord = []
        shape = []
        for k, ax in zip(key, axes, strict=True):
            if type(k) is not slice or k.step not in (None, 1):
                return None
            a, b = k.start, k.stop
            if type(a) is not int or type(b) is not int or not 0 <= a < b <= ax.length:
                return None
            c = ax.chunk_of_int(a)
            off, size = ax.offset_size_int(c)
            if off != a or off + size != b:
                return None
            coord.append(c)
            shape.append(size)
        table = m.table_for(coord, coord)
        e, r = table.locate_one(coord)
        if e < 0:
            return np.full(shape, m.fill, dtype=m.dtype)
        return self._decode_new(table.entries[e].path, r, tuple(coord), tuple(shape))

    def _fetch(
        self,
        plan: _Plan,
        ks: np.ndarray,
        put: Callable[[int, tuple[int, ...], np.ndarray], None],
        out: np.ndarray | None = None,
    ) -> None:
        """Read and decode the chunks ``ks`` of ``plan`` (all present), one batched
        read per shard file, files in parallel; ``put(k, idx, chunk)`` receives each
        decoded chunk (a read-only view of the record). With ``out`` (the output in
        work shape), chunks taken whole are decoded by the engine straight into
        ``out[plan.out_key(idx)]`` instead (``put`` gets the rest)."""
        if ks.size == 0:
            return
        m = self._m
        table = plan.table
        pids = table.path_ids[plan.entry[ks]]
        if ks.size == 1 or pids.min() == pids.max():
            groups = [ks]
        else:
            order = np.argsort(pids, kind="stable")
            ks = ks[order]
            pids = pids[order]
            cut = np.flatnonzero(pids[1:] != pids[:-1]) + 1
            groups = np.split(ks, cut)
        dtype = m.dtype
        paths = [table.paths[int(table.path_ids[plan.entry[g[0]]])] for g in groups]
        # the remote shards this read opens by footer (not those it fetches whole):
        # their footers are fetched at once when it opens the first
        by_footer = None
        if len(groups) > 2 and not self._store.local:
            sizes = m.shard_sizes()
            by_footer = {
                p: sizes.get(p)
                for p, g in zip(paths, groups, strict=True)
                if not self._whole(p, len(g))
            }

        full = plan.full() if out is not None else None

        def run(job: tuple[str, np.ndarray]) -> None:
            relpath, group = job
            if full is not None and self._fetch_into(
                plan, group, full, relpath, out, put, by_footer
            ):
                return
            bufs = self._read_records(relpath, plan.record[group], by_footer)
            for k, buf in zip(group.tolist(), bufs, strict=True):
                idx = plan.index(k)
                shape = plan.chunk_shape(idx)

                def what(k: int = k) -> str:
                    return (
                        f"{self.what} chunk {tuple(int(c) for c in plan.coords[k])} "
                        f"(shard {relpath!r}, record {int(plan.record[k])})"
                    )

                put(k, idx, decode_chunk(buf, dtype, shape, what))

        run_each(io_pool(), run, list(zip(paths, groups, strict=True)))

    def _fetch_into(
        self,
        plan: _Plan,
        group: np.ndarray,
        full: np.ndarray,
        relpath: str,
        out: Any,
        put: Callable[[int, tuple[int, ...], np.ndarray], None],
        shards: Mapping[str, int | None] | None = None,
    ) -> bool:
        """Decode the chunks of ``group`` (one shard) in one engine call (one fetch):
        those taken whole straight into their boxes of ``out``, strided or not, the
        others into a chunk-shaped array each, handed to ``put`` (each record's ``.npy``
        header is compared by the engine). False when a record's header is not the
        expected one: then the general path decodes them all (``shards``: as
        :meth:`_reader`'s)."""
        dtype = self._m.dtype
        # numpy exports no buffer for datetime64/timedelta64: same bytes as int64
        raw = np.dtype("<i8") if dtype.kind in "Mm" else dtype
        target = out.view(raw) if raw is not dtype else out
        dests: list[np.ndarray] = []
        heads: list[bytes] = []
        parts: list[tuple[int, tuple[int, ...], np.ndarray]] = []
        for k in group.tolist():
            idx = plan.index(k)
            shape = plan.chunk_shape(idx)
            view = None
            if full[k]:
                key = plan.out_key(idx)
                if all(type(p) is slice for p in key):
                    view = target[key]
            if view is None or view.shape != shape:
                view = np.empty(shape, raw)
                parts.append((k, idx, view))
            dests.append(view)
            heads.append(npy_header(dtype, shape))
        if not self.decode_records_into(relpath, plan.record[group], dests, heads, shards):
            return False
        for k, idx, chunk in parts:
            put(k, idx, chunk.view(dtype) if raw is not dtype else chunk)
        return True

    # -- writing

    def _check_writable(self) -> None:
        if self.read_only:
            raise PermissionError(
                f"{self.what} is open read-only (mode {self._mode!r}); open it with mode "
                f"'r+' or 'a' to write"
            )

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check_writable()
        self._write(parse_selection(key, self.shape, self.what), value)

    def _write(self, sel: Selection, value: Any) -> None:
        self._check_writable()
        with self._lock:
            self._write_locked(sel, value)

    def _write_locked(self, sel: Selection, value: Any) -> None:
        m = self._m
        dtype = m.dtype
        value = np.asarray(value)
        try:
            v = np.broadcast_to(value, sel.shape).reshape(sel.work_shape)
        except ValueError:
            raise ValueError(
                f"{self.what}: cannot assign a value of shape {value.shape} to a selection "
                f"of shape {sel.shape}"
            ) from None
        if sel.size == 0:
            return
        if value.dtype != dtype and not np.can_cast(value.dtype, dtype, "unsafe"):
            raise TypeError(f"{self.what}: cannot store dtype {value.dtype} as {dtype}")
        plan = _Plan(m, sel)
        full = plan.full()
        existing: dict[int, np.ndarray] = {}
        partial = np.flatnonzero(~full)
        if partial.size:
            for k in partial[plan.entry[partial] < 0].tolist():
                existing[k] = np.full(plan.chunk_shape(plan.index(k)), m.fill, dtype=dtype)

            def keep(k: int, idx: tuple[int, ...], chunk: np.ndarray) -> None:
                existing[k] = chunk.copy()

            self._fetch(plan, partial[plan.entry[partial] >= 0], keep)

        axis_runs = [_runs(p.chunks) for p in plan.plans]
        write_id = pending.begin(self._store, self._node)
        relpath = shard_name(write_id, 0, folder=SHARD_DIR)
        entries: list[ShardEntry] = []
        boxes = list(itertools.product(*axis_runs))
        offset = 0
        for box in boxes:
            start = tuple(int(p.chunks[a]) for p, (a, _b) in zip(plan.plans, box, strict=False))
            stop = tuple(
                int(p.chunks[b - 1]) + 1 for p, (_a, b) in zip(plan.plans, box, strict=False)
            )
            e = ShardEntry(relpath, start, stop, offset)
            entries.append(e)
            offset += e.records

        def records() -> Iterator[np.ndarray]:
            for box in boxes:
                pos = [np.arange(a, b) for a, b in box]
                ks = (
                    np.ravel_multi_index(np.meshgrid(*pos, indexing="ij"), plan.lens)
                    if pos
                    else [0]
                )
                for k in np.asarray(ks).reshape(-1).tolist():
                    idx = plan.index(k)
                    src = v[plan.out_key(idx)]
                    chunk = existing.pop(k, None)
                    if chunk is None:
                        yield encode_chunk(src, dtype)
                    else:
                        chunk[plan.local_key(idx)] = src
                        yield encode_chunk(chunk, dtype)

        with pending.uploading(self._store, self._node, write_id):
            nbytes = write_shard(
                self._store,
                join_component(self._node, relpath),
                records(),
                writer_options(m.compression),
                defer_sync=True,  # synced while the commit below is prepared
            )
        entries = [ShardEntry(e.path, e.start, e.stop, e.offset, nbytes) for e in entries]
        shards = stack_entries(m.shards, entries)
        self._commit(m.with_(shards=shards), write_id, [relpath], entries, registered=True)

    def append(
        self,
        data: Any,
        axis: int = 0,
        *,
        compact: bool | str = "tiered",
        retries: int = APPEND_RETRIES,
    ) -> tuple[int, ...]:
        """Append ``data`` along ``axis``; returns (and sets) the new shape.

        ``data`` must match the array's shape on every other axis and have a dtype
        that casts to the array's (same kind). A partly filled last chunk along
        ``axis`` is completed first (read, extended, rewritten), then new chunks of
        the nominal chunk length follow. One new shard, one commit. ``compact``: as for
        :func:`arrayds.to_arrayrecord`: ``"tiered"`` merges the newest small shards,
        the new one among them, where they fill a tier (about one append in eight),
        in the append's own commit (:func:`arrayds.nodes.merge.tiered`: one version
        either way); ``True`` compacts the array once it holds 64 small files
        (after the commit); ``False`` neither. ``retries``: how often an append that
        lost a commit race to another writer is committed again after that writer's
        rows, from a fresh read (the commit's retries, with a bounded random backoff:
        :mod:`arrayds.nodes.retry`): a shard of whole new chunks is kept and only its
        entries move, as a dask append's; a shard that completed a partly filled last
        chunk is written again over the rows there now. ``0`` raises
        :class:`arrayds.errors.CommitConflictError` at once.

        >>> import arrayds, numpy as np
        >>> a = arrayds.open_array("memory://doc-append", mode="w", shape=(0, 2),
        ...                        dtype="i8", chunks=(3, 2))
        >>> a.append(np.arange(8).reshape(4, 2)), a.chunks
        ((4, 2), ((3, 1), (2,)))
        >>> a.append(np.zeros((3, 2), "i8")), a.chunks
        ((7, 2), ((3, 3, 1), (2,)))
        """
        check_compact(compact, self.what)
        retries = check_retries(retries, f"{self.what}: append")
        self._check_writable()
        with self._lock:
            shape = self._append_locked(data, axis, tiered=compact == "tiered", retries=retries)
            if compact is True:
                self._compact_small_files()
            return shape

    def _compact_small_files(self) -> None:
        """``compact=True`` after an append: compact the array once it holds
        :data:`arrayds.nodes.merge.AUTO_COMPACT_FILES` small files."""
        m = self._m
        with contextlib.suppress(CommitConflictError):  # committed to since: a later append
            merged = compact_small_files(self._store, self._node, m, (m.generation, m.commit or ""))
            if merged is not None:
                self._m = merged

    def _checked_append(self, m: ArrayManifest, data: Any, axis: int) -> tuple[np.ndarray, int]:
        """``data`` as an array and ``axis`` as an index, checked against ``m``."""
        ndim = m.ndim
        if ndim == 0:
            raise ValueError(f"{self.what}: cannot append to a 0-d array")
        if not -ndim <= axis < ndim:
            raise ValueError(f"{self.what}: axis {axis} is out of range for {ndim} dimensions")
        axis %= ndim
        data = np.asarray(data)
        shape = m.shape
        expected = tuple("n" if d == axis else shape[d] for d in range(ndim))
        if data.ndim != ndim or any(data.shape[d] != shape[d] for d in range(ndim) if d != axis):
            raise ValueError(
                f"{self.what}: cannot append data of shape {data.shape} along axis {axis}: "
                f"expected shape {expected}".replace("'n'", "n")
            )
        if data.dtype != m.dtype and not np.can_cast(data.dtype, m.dtype, "same_kind"):
            raise ValueError(
                f"{self.what}: cannot append data of dtype {data.dtype} to an array of dtype "
                f"{m.dtype} (expected a dtype that casts to {m.dtype.str})"
            )
        return data, axis

    def _append_locked(
        self, data: Any, axis: int, *, tiered: bool = False, retries: int = 0
    ) -> tuple[int, ...]:
        data, axis = self._checked_append(self._m, data, axis)
        if data.shape[axis] == 0:
            return self.shape
        store, node = self._store, self._node
        write_id = pending.begin(store, node)
        with pending.uploading(store, node, write_id):
            app = self._append_shard(data, axis, write_id, 0)
        written = list(app.written)  # the commit removes what it holds if the write fails

        def rebase(base: commit.NodeVersion) -> _Rebased:
            """The append placed after the rows another writer committed (``base``)."""
            nonlocal app
            cur = rebase_base(base, self.what)
            if app.whole:  # whole new chunks: only the entries move
                moved = rebase_append(cur, app.manifest, axis, app.first, app.entries, self.what)
                return cur, *moved
            # it completed the last chunk it read: written again over what is there now
            self._m = cur
            self._checked_append(cur, data, axis)
            old = app
            app = self._append_shard(data, axis, write_id, old.n + 1)
            written[:] = app.written
            store.delete([join_component(node, p) for p in old.written])
            return cur, app.manifest, app.entries

        self._commit(
            app.manifest,
            write_id,
            written,
            app.entries,
            tiered=tiered and bool(app.entries),
            retries=retries,
            rebase=rebase if retries else None,
            registered=True,
        )
        return self.shape

    def _append_shard(self, data: np.ndarray, axis: int, write_id: str, n: int) -> _Appended:
        """Write the shard ``c/<write_id>-<n>`` of an append of ``data`` (checked)
        along ``axis`` to this handle's manifest: the partly filled last chunk it
        completes (read), then new chunks of the nominal length."""
        m = self._m
        ndim = m.ndim
        n_new = data.shape[axis]
        ax = m.grid.axes[axis]
        nominal = m.chunk_shape[axis] if m.chunk_shape[axis] > 0 else n_new
        first = ax.nchunks
        head: np.ndarray | None = None
        head_len = 0
        if ax.nchunks:
            last_len = int(ax.size_of(np.array(ax.nchunks - 1)))
            if last_len < nominal:
                first = ax.nchunks - 1
                head_len = last_len
                sl = [slice(None)] * ndim
                sl[axis] = slice(ax.length - last_len, ax.length)
                head = self[tuple(sl)]
        total = head_len + n_new
        if head is not None:
            block = np.concatenate([head, data.astype(m.dtype, copy=False)], axis=axis)
        else:
            block = data
        new_sizes = AxisGrid.regular(total, nominal)
        new_axis = ax.sub(0, first).concat(new_sizes)
        axes = list(m.grid.axes)
        axes[axis] = new_axis
        grid = ChunkGrid(axes)
        new_m = m.with_(grid=grid)
        gshape = grid.grid_shape
        entries: list[ShardEntry] = []
        if all(gshape[d] > 0 for d in range(ndim)):
            start = tuple(first if d == axis else 0 for d in range(ndim))
            stop = gshape
            relpath = shard_name(write_id, n, folder=SHARD_DIR)
            sub_axes = [
                new_axis.sub(first, new_axis.nchunks) if d == axis else grid.axes[d]
                for d in range(ndim)
            ]
            offsets = [ax_.boundaries() for ax_ in sub_axes]

            def records() -> Iterator[np.ndarray]:
                for c in itertools.product(*(range(len(o) - 1) for o in offsets)):
                    sl = tuple(
                        slice(int(o[i]), int(o[i + 1])) for o, i in zip(offsets, c, strict=False)
                    )
                    yield encode_chunk(block[sl], m.dtype)

            nbytes = write_shard(
                self._store,
                join_component(self._node, relpath),
                records(),
                writer_options(m.compression),
                defer_sync=True,  # synced while the commit below is prepared
            )
            entries.append(ShardEntry(relpath, start, stop, 0, nbytes))
        new_m = new_m.with_(shards=stack_entries(m.shards, entries, m.grid.grid_shape))
        return _Appended(new_m, entries, first, head is None, n)

    # -- commits

    def _commit(
        self,
        new: ArrayManifest,
        write_id: str,
        written: Sequence[str] = (),
        added: Sequence[ShardEntry] | None = None,
        *,
        tiered: bool = False,
        retries: int = 0,
        rebase: Callable[[commit.NodeVersion], _Rebased] | None = None,
        registered: bool = False,
    ) -> None:
        """Make ``new`` the manifest, if nobody committed since this handle's
        snapshot (else :class:`CommitConflictError`, and the shards ``written`` are
        removed: nothing becomes visible). ``added``: the entries ``new`` appends to
        the snapshot's (all of them kept): the commit then writes only those.
        ``tiered`` (an append): the tiered merge runs inside this commit
        (:func:`arrayds.nodes.merge.tiered`), the ``written`` shards among those it
        may merge. ``rebase(base)`` (an append, ``retries``): the write placed on a
        node another writer committed to since the snapshot (that node's manifest,
        the manifest to commit, the entries it adds), committed instead of a conflict,
        up to ``retries`` times.
        ``registered``: ``write_id``'s pending marker is put (its shards are written)."""
        snap = self._m
        stamp = (snap.generation, snap.commit or "")
        final = new
        spliced = False

        def check(base: commit.NodeVersion) -> None:
            if rebase is None and base.stamp != stamp:
                raise CommitConflictError(self._moved_on(base))

        def build(base: commit.NodeVersion) -> Any:
            nonlocal spliced, final
            spliced = False
            old, final, entries = snap, new, added
            if rebase is not None and base.stamp != stamp:
                old, final, entries = rebase(base)
            if entries is not None and len(final.shards) == len(old.shards) + len(entries):
                return commit.Extend(final.header_json(), [e.to_json() for e in entries])
            # a region write over a long stored list: only the segments it hides
            # entries of are rewritten (the list must be the one the base stores)
            shards = final.shards
            got = None
            if isinstance(shards, ShardList) and base.head is not None:
                got = shards.stored_change(base.head.get("shards"))
            if got is None:
                return final.to_json()
            drop, extra = got
            spliced = True
            return commit.Extend(final.header_json(), [e.to_json() for e in extra], drop)

        merge = tiered_merge(self._store, self._node, written) if tiered else None
        raw = commit.commit(
            self._store,
            self._node,
            build,
            write_id=write_id,
            check=check,
            written=written,
            retries=retries if rebase is not None else 0,
            parents=False,
            what=self.what,
            merge=merge,
            registered=registered,
        )
        if spliced or (merge is not None and merge.merged is not None):
            # the head as stored (an Extend's commit), its segments read when used
            self._m = kinds.get("array").parse(
                resolve(self._store, self._node, raw, self.what, lazy=True), self.what
            )
        else:
            self._m = final.committed(raw["generation"], write_id)

    def _moved_on(self, base: commit.NodeVersion) -> str:
        """The conflict of a commit of this handle that finds ``base`` instead of the
        node it read."""
        if not base.exists:
            return f"{self.what} was removed while this handle was writing"
        return (
            f"{self.what}: another writer committed generation {base.generation} after "
            f"this handle read generation {self._m.generation}; nothing of this write is "
            f"visible (an append retries from a fresh read with retries=N; other writes: "
            f"reopen the array and write again)"
        )

    def _commit_attrs(self, attrs: dict[str, Any]) -> None:
        self._check_writable()
        with self._lock:
            self._commit(self._m.with_(attrs=attrs), new_write_id(), added=())

    # -- dask

    def to_dask(self, chunks: Any = None, name: str | None = None) -> Any:
        """A dask array over this array (same as :func:`arrayds.from_arrayrecord`)."""
        return dask_array(self, chunks=chunks, name=name)

    def read_block(
        self, key: tuple[slice, ...], zero_copy: bool = False, out: np.ndarray | None = None
    ) -> np.ndarray:
        """Read a box given as step-1 slices (one dask task): one plan, one batched
        read per shard. ``out``: an array of the box's shape (a view of a larger one,
        strided or not) that the chunks are decoded straight into; returned."""
        if out is None:
            got = self._read_exact_chunk(key, zero_copy)
            if got is not None:
                return got
        sel = box_selection(key, self.shape)
        if sel is None:
            sel = parse_selection(key, self.shape, self.what)
        if out is not None and out.shape != sel.shape:
            raise ValueError(f"{self.what}: out has shape {out.shape}, the box {sel.shape}")
        got = self._read(sel, zero_copy=zero_copy, out=out)
        if out is None:
            return got
        if not np.may_share_memory(got, out):  # a path that made its own array
            out[...] = got
        return out


class _OIndex:
    __slots__ = ("_a",)

    def __init__(self, a: Array) -> None:
        self._a = a

    def __getitem__(self, key: Any) -> np.ndarray:
        a = self._a
        return a._read(parse_selection(key, a.shape, a.what, orthogonal=True))

    def __setitem__(self, key: Any, value: Any) -> None:
        a = self._a
        a._check_writable()
        a._write(parse_selection(key, a.shape, a.what, orthogonal=True), value)


# ----------------------------------------------------------------- reading


def read_array_manifest(store: Store, node: str) -> ArrayManifest:
    """The manifest of the array ``node``: ``FileNotFoundError`` if there is no node,
    ``ValueError`` naming its kind if it is not an array.

    >>> import arrayds
    >>> a = arrayds.open_array("memory://doc-ram", "x", mode="w", shape=(2,), dtype="i1", chunks=1)
    >>> read_array_manifest(a.store, "x").shape
    (2,)
    """
    m = read_node(store, node)
    if m is None:
        raise missing_node(store, node, "array")
    if not isinstance(m, ArrayManifest):
        raise ValueError(
            f"{store.display(node)!r} is {kind_phrase(m.kind)} node, not an array"
            + ("; pass component= to name an array inside it" if m.kind == "group" else "")
        )
    return m


def dask_array(a: Array, chunks: Any = None, name: str | None = None) -> Any:
    """A dask array over ``a`` (:func:`arrayds.kinds.array.dask.array_to_dask`).

    The one upcall of this module: dask is optional and :mod:`arrayds.kinds.array.dask`
    builds on this module, so it is imported here, when a dask array is asked for.

    >>> import arrayds
    >>> a = arrayds.open_array("memory://doc-da", mode="w", shape=(4,), dtype="i1", chunks=2)
    >>> dask_array(a).chunks
    ((2, 2),)
    """

    return array_to_dask(a, chunks=chunks, name=name)


# ----------------------------------------------------------------- unpickle

_restored: dict[tuple[Any, ...], ArrayManifest] = {}
_restored_lock = threading.Lock()


def restore_array(
    url: str, storage_options: dict[str, Any], node: str, mode: str, manifest: dict[str, Any]
) -> Array:
    """Rebuild a pickled :class:`Array` in another process (what its ``__reduce__``
    names): same snapshot; the parsed manifest (and its shard table) is cached per
    process by (url, node, generation, commit).

    >>> import arrayds, pickle
    >>> a = arrayds.open_array("memory://doc-restore", mode="w", shape=(2,), dtype="i1", chunks=1)
    >>> pickle.loads(pickle.dumps(a)).generation == a.generation
    True
    """
    store = get_store(url, storage_options)
    key = (store.token, store.root, node, manifest.get("generation"), manifest.get("commit"))
    m = _restored.get(key)
    if m is None:
        what = f"array {store.display(node)!r}"
        # a long list travels as the head stores it: its segments load when read here
        m = ArrayManifest.from_json(resolve(store, node, manifest, what, lazy=True), what)
        with _restored_lock:
            if len(_restored) > 256:
                _restored.clear()
            _restored[key] = m
    return Array(store, node, m, mode)
