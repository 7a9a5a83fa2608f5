"""A read-only zarr-python 3 store over an arrayds dataset (docs/zarr.md).

:func:`open_store` presents the groups and arrays of a dataset as a Zarr v3 hierarchy,
so that zarr-python and what reads through it (``zarr.open_group``, xarray's
``engine="zarr"``, ``dask.array.from_zarr``) read arrayds data without a copy:

* each group is a ``zarr.json`` with its attributes; each array a ``zarr.json`` with
  shape, data type, fill value, attributes, ``dimension_names`` and one codec,
  ``bytes`` (little endian), on the stored chunk grid: a regular chunk grid, or for an
  irregular one (appends can make one) zarr's rectilinear chunk grid, the chunk sizes
  along each axis as arrayds stores them;
* each stored chunk is a chunk key (``c/i/j``, the default encoding): ``get`` reads it
  through arrayds (checksums verified, the engine decodes it) and returns its raw
  little-endian bytes, the edge chunks of a regular grid padded with the fill value; a
  chunk never written is absent, so zarr fills it;
* opening the store reads nothing; the first key of a node reads that node's
  manifests only (one consistent snapshot of a group, as ``engine="arrayds"`` reads it);
* each chunk is decoded by the engine straight into the buffer zarr gets (no copy);
  small chunks of a local dataset are read when zarr asks for them, the others (large
  or remote) in worker threads, the chunks zarr asks for at once (its concurrent gets,
  ``get_partial_values``) read together, one engine call per shard file;
* ``version=`` presents that kept version of the root (its children as of the moment
  it stands for, as :func:`arrayds.open` reads them);
* writes (``set``, ``delete``) raise ``ValueError`` naming the view as read only.

The rectilinear chunk grid is experimental in zarr-python (3.4 reads it once
``zarr.config.set({"array.rectilinear_chunks": True})``; 3.1 has none): where the
installed zarr has no such grid, or its flag is off, the ``zarr.json`` of an array with
an irregular grid raises ``ValueError`` naming the array and what would read it, as
does that of an array whose data type Zarr v3 cannot express. Nodes of other kinds
(records, ragged arrays) are not part of the hierarchy.

>>> import numpy as np, zarr, arrayds, arrayds.zarr
>>> _ = arrayds.to_arrayrecord(np.arange(6.0).reshape(2, 3), "memory://doc-zarr", "x")
>>> g = zarr.open_group(arrayds.zarr.open_store("memory://doc-zarr"), mode="r")
>>> g["x"][:, 1:].tolist()
[[1.0, 2.0], [4.0, 5.0]]
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import functools
import itertools
import json
import math
import os
import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import zarr
from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from zarr.codecs import BytesCodec
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding
from zarr.core.dtype import get_data_type_from_native_dtype
from zarr.core.metadata.v3 import ArrayV3Metadata

from .kinds.array.handle import Array
from .kinds.array.manifest import ArrayManifest
from .kinds.array.tensor import new_buffer, npy_header
from .nodes.registry import parse_node
from .storage import get_store
from .xarray.attrs import decode_attrs
from .xarray.state import DatasetState, read_state

__all__ = ["ArraydsZarrStore", "open_store"]

ZARR_JSON = "zarr.json"
INTERNAL = "_arrayds"
"""The attribute in which arrayds' xarray writer keeps what xarray does not see
(arrayds.xarray.backend.INTERNAL): not presented."""
INLINE_BYTES = 1 << 20
"""A chunk of a local dataset of at most this many bytes is read on zarr's event loop
itself, when zarr asks for it (a hop to a worker thread costs more than such a read);
larger chunks, and those of remote datasets, are read in batches in worker threads."""
RECTILINEAR = "array.rectilinear_chunks"
"""zarr's configuration flag of rectilinear chunk grids (zarr-python 3.4)."""
READ_ONLY = "store was opened in read-only mode and does not support writing"
"""zarr's own wording (its store tests match it), followed by the view's reason."""


def open_store(
    url: str | os.PathLike[str],
    version: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> ArraydsZarrStore:
    """A read-only zarr-python 3 store presenting the dataset at ``url`` (a group or
    an array) as a Zarr v3 hierarchy; ``version=N`` presents that kept version of it
    (:func:`arrayds.versions`). Nothing is read until zarr asks for a key.

    >>> import numpy as np, zarr, arrayds, arrayds.zarr
    >>> g = arrayds.open("memory://doc-open-store", mode="w")
    >>> g.attrs["title"] = "demo"
    >>> _ = arrayds.to_arrayrecord(np.arange(4, dtype="i2"), "memory://doc-open-store", "v")
    >>> zg = zarr.open_group(arrayds.zarr.open_store("memory://doc-open-store"), mode="r")
    >>> dict(zg.attrs), zg["v"][:].tolist()
    ({'title': 'demo'}, [0, 1, 2, 3])
    >>> zarr.open_group(arrayds.zarr.open_store("memory://doc-open-store", version=1),
    ...                 mode="r").attrs.asdict()
    {}
    """
    store = ArraydsZarrStore(os.fspath(url), version=version, storage_options=storage_options)
    store._resolve_root()  # a missing dataset or version fails here, naming it
    return store


@dataclass
class _GroupView:
    """A group as zarr sees it: its ``zarr.json``, its member arrays (manifests of one
    consistent snapshot) and its child groups (read on first use)."""

    meta: bytes
    arrays: dict[str, ArrayManifest]
    groups: list[str]
    moment: Any
    children: dict[str, Any] = field(default_factory=dict)


@dataclass
class _ArrayView:
    """An array as zarr sees it: the arrayds handle, its chunk shape (None: an
    irregular grid, presented as a rectilinear one) and, once asked for, its
    ``zarr.json``."""

    array: Array
    chunk_shape: tuple[int, ...] | None
    meta: bytes | None = None
    chunk_bytes: int = field(init=False)
    """The bytes of the largest chunk as zarr reads it."""

    def __post_init__(self) -> None:
        largest = self.chunk_shape or tuple(max(s, default=0) for s in self.array.grid.chunks)
        self.chunk_bytes = math.prod(largest) * self.array.dtype.itemsize


_Wanted = tuple[_ArrayView, tuple[int, ...], "asyncio.Future[Any]"]
"""A chunk get waiting for its batch: the array, the chunk coordinate, the future."""


class ArraydsZarrStore(Store):
    """The zarr view of an arrayds dataset (see the module docstring); make one with
    :func:`open_store`. It pickles as its URL, version and storage options.

    >>> import arrayds, arrayds.zarr
    >>> _ = arrayds.open("memory://doc-store-class", mode="w")
    >>> s = arrayds.zarr.open_store("memory://doc-store-class")
    >>> s.read_only, s.supports_writes, s.supports_listing
    (True, False, True)
    """

    supports_writes = False
    supports_deletes = False
    supports_partial_writes = False
    supports_listing = True

    def __init__(
        self,
        url: str,
        *,
        version: int | None = None,
        storage_options: Mapping[str, Any] | None = None,
        read_only: bool = True,
    ) -> None:
        if not read_only:
            raise ValueError(
                f"the arrayds zarr view of {url!r} is read only (read_only=False was "
                f"passed); write through arrayds"
            )
        super().__init__(read_only=True)
        self.url = url
        self.version = version
        self.storage_options = dict(storage_options or {})
        self._store = get_store(url, self.storage_options)
        self._lock = threading.RLock()  # _resolve_root holds it while making views
        self._root: _GroupView | _ArrayView | None = None
        self._chunked: dict[str, _ArrayView] = {}  # node path -> array, for chunk keys
        # per event loop: the chunk gets of this turn of the loop (see _chunk)
        self._batches: dict[asyncio.AbstractEventLoop, list[_Wanted]] = {}

    def __repr__(self) -> str:
        at = "" if self.version is None else f" version={self.version}"
        return f"<arrayds.zarr.ArraydsZarrStore {self._store.display('')!r}{at}>"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ArraydsZarrStore)
            and other._store.token == self._store.token
            and other._store.root == self._store.root
            and other.version == self.version
        )

    def __hash__(self) -> int:
        return hash((self._store.token, self._store.root, self.version))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (self.url, self.version, self.storage_options))

    # -- writes: refused

    def _refuse(self, what: str) -> ValueError:
        return ValueError(
            f"{READ_ONLY}: the arrayds zarr view of {self._store.display('')!r} is read "
            f"only ({what} refused); write through arrayds (arrayds.open(url, mode='r+'))"
        )

    async def set(self, key: str, value: Buffer) -> None:
        raise self._refuse(f"set {key!r}")

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        raise self._refuse(f"set {key!r}")

    async def delete(self, key: str) -> None:
        raise self._refuse(f"delete {key!r}")

    async def delete_dir(self, prefix: str) -> None:
        raise self._refuse(f"delete {prefix!r}")

    async def clear(self) -> None:
        raise self._refuse("clear")

    # -- the hierarchy (resolved lazily, one node at a time)

    def _group_view(self, node: str, state: DatasetState) -> _GroupView:
        attrs = _json_attrs(decode_attrs(state.attrs))
        meta = json.dumps(
            {"zarr_format": 3, "node_type": "group", "attributes": attrs}, allow_nan=True
        ).encode()
        return _GroupView(meta, dict(state.members), sorted(state.groups), state.moment)

    def _array_view(self, node: str, m: ArrayManifest) -> _ArrayView:
        view = _ArrayView(Array(self._store, node, m, "r"), _regular_chunk_shape(m))
        with self._lock:
            self._chunked[node] = view
        return view

    def _resolve_root(self) -> _GroupView | _ArrayView:
        with self._lock:
            if self._root is None:
                state = read_state(self._store, "", version=self.version)
                if state.kind is None:
                    raise FileNotFoundError(
                        f"no arrayds dataset at {self._store.display('')!r}"
                        + ("" if self.version is None else f" (version {self.version})")
                    )
                if state.kind == "array":
                    self._root = self._array_view("", parse_node(state.root, self.url))
                elif state.kind == "group":
                    self._root = self._group_view("", state)
                else:
                    raise ValueError(
                        f"{self._store.display('')!r} is a {state.kind!r} node; the zarr "
                        f"view presents groups and arrays"
                    )
            return self._root

    def _child(self, parent: _GroupView, node: str, name: str) -> _GroupView | _ArrayView | None:
        with self._lock:
            got = parent.children.get(name)
        if got is not None:
            return got
        child = f"{node}/{name}" if node else name
        if name in parent.arrays:
            got = self._array_view(child, parent.arrays[name])
        elif name in parent.groups:
            moment = parent.moment
            state = read_state(self._store, child, as_of=moment) if moment else None
            got = self._group_view(child, state or read_state(self._store, child))
        else:
            return None
        with self._lock:
            return parent.children.setdefault(name, got)

    def _find(self, key: str) -> tuple[_GroupView | _ArrayView | None, str, str]:
        """The node a key falls in, the node's path and the rest of the key: for a
        group the rest is ``zarr.json`` or a name below it, for an array ``zarr.json``
        or a chunk key."""
        view: _GroupView | _ArrayView | None = self._resolve_root()
        parts = [p for p in key.split("/") if p] if key else []
        node = ""
        i = 0
        while isinstance(view, _GroupView) and i < len(parts) - 1:
            view = self._child(view, node, parts[i])
            node = f"{node}/{parts[i]}" if node else parts[i]
            i += 1
        return view, node, "/".join(parts[i:])

    # -- reads

    def _array_meta(self, view: _ArrayView) -> bytes:
        if view.chunk_shape is None:
            _check_rectilinear(view.array)  # zarr's flag may change: asked at every read
        if view.meta is None:
            view.meta = _array_json(view.array, view.chunk_shape)
        return view.meta

    def _chunk_lookup(self, key: str) -> tuple[_ArrayView, tuple[int, ...]] | None:
        """The array and chunk coordinate of ``key`` if it is a chunk key of an array
        already resolved (no walk of the hierarchy), else None."""
        parts = key.split("/")
        i = len(parts) - 1
        while i > 0 and parts[i].isdigit():
            i -= 1
        if parts[i] != "c":
            return None
        view = self._chunked.get("/".join(parts[:i]))
        if view is None:
            return None
        coord = _chunk_coord("/".join(parts[i:]), view.array)
        return None if coord is None else (view, coord)

    def _read_key(self, key: str) -> np.ndarray | bytes | None:
        view, _node, rest = self._find(key)
        if view is None:
            return None
        if rest == ZARR_JSON:
            return view.meta if isinstance(view, _GroupView) else self._array_meta(view)
        if isinstance(view, _ArrayView):
            coord = _chunk_coord(rest, view.array)
            if coord is not None:
                return _read_one(view, coord)
        return None

    async def get(
        self,
        key: str,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        """The bytes of ``key`` (a ``zarr.json`` or a chunk), or ``None`` if absent."""
        prototype = prototype or default_buffer_prototype()
        hit = self._chunk_lookup(key)
        got: np.ndarray | bytes | None
        if hit is None:  # a zarr.json, or a key of a node not read yet
            got = await asyncio.to_thread(self._read_key, key)
        elif self._store.local and hit[0].chunk_bytes <= INLINE_BYTES:
            got = _read_one(*hit)
        else:
            got = await self._chunk(*hit)
        if got is None:
            return None
        data = np.frombuffer(got, dtype=np.uint8) if isinstance(got, bytes) else got
        return prototype.buffer.from_array_like(_byte_range(data, byte_range, key))

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        # the chunks asked for together are read together (one batch, see _chunk)
        # unless they are read on the event loop (small chunks of a local dataset)
        return list(await asyncio.gather(*(self.get(k, prototype, r) for k, r in key_ranges)))

    # -- chunk batches: the gets of one turn of an event loop, read together

    def _chunk(self, view: _ArrayView, coord: tuple[int, ...]) -> asyncio.Future[Any]:
        """A future of chunk ``coord`` of ``view`` (its bytes, None if never written).
        zarr asks for each chunk in a task of its own, many at once: the chunks asked
        for in one turn of the loop are read after it, as one batch in a worker thread
        (one engine call per shard file, see :func:`_read_chunks`)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        batch = self._batches.get(loop)
        if batch is None:  # only this loop's thread touches its batch
            batch = self._batches[loop] = []
            loop.call_soon(self._flush, loop, batch)
        batch.append((view, coord, fut))
        return fut

    def _flush(self, loop: asyncio.AbstractEventLoop, batch: list[_Wanted]) -> None:
        if self._batches.get(loop) is batch:
            del self._batches[loop]
        batch = [w for w in batch if not w[2].done()]  # a cancelled get wants nothing
        if not batch:
            return
        run = contextvars.copy_context().run  # the reads see the caller's options
        done = loop.run_in_executor(None, run, _read_batch, batch)
        done.add_done_callback(functools.partial(_settle_later, batch))

    async def exists(self, key: str) -> bool:
        def run() -> bool:
            view, _node, rest = self._find(key)
            if view is None:
                return False
            if rest == ZARR_JSON:
                return True
            if isinstance(view, _ArrayView):
                coord = _chunk_coord(rest, view.array)
                return coord is not None and view.array.manifest.table.locate_one(coord)[0] >= 0
            return False

        return await asyncio.to_thread(run)

    # -- listing

    def _keys(self) -> list[str]:
        out: list[str] = []

        def walk(view: _GroupView | _ArrayView, node: str) -> None:
            prefix = f"{node}/" if node else ""
            out.append(prefix + ZARR_JSON)
            if isinstance(view, _ArrayView):
                out.extend(prefix + "c/" + "/".join(map(str, c)) for c in _stored(view.array))
                return
            for name in sorted([*view.arrays, *view.groups]):
                child = self._child(view, node, name)
                if child is not None:
                    walk(child, prefix + name)

        walk(self._resolve_root(), "")
        return out

    async def list(self) -> AsyncIterator[str]:
        for k in await asyncio.to_thread(self._keys):
            yield k

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        for k in await asyncio.to_thread(self._keys):
            if k.startswith(prefix):
                yield k

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        prefix = prefix.rstrip("/")
        start = f"{prefix}/" if prefix else ""
        seen: set[str] = set()
        for k in await asyncio.to_thread(self._keys):
            if k.startswith(start):
                name = k[len(start) :].split("/", 1)[0]
                if name not in seen:
                    seen.add(name)
                    yield name


def _restore(url: str, version: int | None, storage_options: dict[str, Any]) -> ArraydsZarrStore:
    return ArraydsZarrStore(url, version=version, storage_options=storage_options)


# -- metadata


def _regular_chunk_shape(m: ArrayManifest) -> tuple[int, ...] | None:
    """The zarr chunk shape of a grid whose chunks along each axis are equal but the
    last (never larger), else None (an irregular grid)."""
    shape = []
    for sizes, nominal in zip(m.grid.chunks, m.chunk_shape or m.shape, strict=True):
        if not sizes:
            shape.append(max(1, nominal))
            continue
        first = sizes[0]
        if any(s != first for s in sizes[:-1]) or sizes[-1] > first:
            return None
        shape.append(first)
    return tuple(shape)


def _check_rectilinear(a: Array) -> None:
    """Raise ``ValueError`` naming ``a`` (an array with an irregular chunk grid) unless
    the installed zarr reads rectilinear chunk grids now."""
    try:
        enabled = zarr.config.get(RECTILINEAR)
    except KeyError:  # a zarr without rectilinear chunk grids
        enabled = None
    if enabled:
        return
    what = (
        f"array {a.store.display(a.path)!r} has an irregular chunk grid (chunks "
        f"{a.manifest.grid.chunks}), which zarr reads as a rectilinear chunk grid"
    )
    if enabled is None:
        raise ValueError(
            f"{what}; zarr {zarr.__version__} has none: read it with arrayds, with a "
            f"zarr-python that has one (3.4), or rewrite it with regular chunks"
        )
    raise ValueError(
        f"{what}; it is experimental in zarr {zarr.__version__} and off: turn it on with "
        f"zarr.config.set({{{RECTILINEAR!r}: True}}), or read the array with arrayds"
    )


def _array_json(a: Array, chunk_shape: tuple[int, ...] | None) -> bytes:
    what = f"array {a.store.display(a.path)!r}"
    m = a.manifest
    try:
        dtype = get_data_type_from_native_dtype(_little(m.dtype))
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what}: zarr v3 cannot express its dtype {m.dtype}: {e}") from None
    attrs = _json_attrs(decode_attrs(m.attrs))
    attrs.pop(INTERNAL, None)
    # as JSON, which every zarr 3 parses into its own classes
    grid: dict[str, Any] = {"name": "regular", "configuration": {"chunk_shape": chunk_shape}}
    if chunk_shape is None:  # every axis its chunk sizes (an empty axis: one nominal step)
        sizes = [
            list(s) if s else max(1, n)
            for s, n in zip(m.grid.chunks, m.chunk_shape or m.shape, strict=True)
        ]
        grid = {"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": sizes}}
    meta = ArrayV3Metadata(
        shape=m.shape,
        data_type=dtype,
        chunk_grid=grid,
        chunk_key_encoding=DefaultChunkKeyEncoding(separator="/"),
        fill_value=m.fill[()],
        codecs=(BytesCodec(endian="little" if m.dtype.itemsize > 1 else None),),
        attributes=attrs,
        dimension_names=m.dims,
        storage_transformers=None,
    )
    return meta.to_buffer_dict(default_buffer_prototype())[ZARR_JSON].to_bytes()


def _little(dtype: np.dtype) -> np.dtype:
    return dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype


def _json_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes as JSON values (numpy scalars and arrays as numbers and lists), with
    ``_FillValue`` in the encoding xarray's zarr backend reads."""
    out = {str(k): _json_value(v) for k, v in attrs.items()}
    fv = attrs.get("_FillValue")
    if fv is not None and np.ndim(fv) == 0:
        out["_FillValue"] = _xarray_fill(fv)
    return out


def _json_value(v: Any) -> Any:
    if isinstance(v, np.generic):
        return _json_value(v.item())
    if isinstance(v, np.ndarray):
        return [_json_value(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, bytes):
        return base64.standard_b64encode(v).decode()
    return v


def _xarray_fill(v: Any) -> Any:
    """A ``_FillValue`` attribute as xarray's zarr backend stores it (floats as the
    base64 of their little-endian double, bytes as base64, complex as two of those)."""
    v = np.asarray(v)[()]
    kind = np.asarray(v).dtype.kind
    if kind == "f":
        return base64.standard_b64encode(np.float64(v).astype("<f8").tobytes()).decode()
    if kind == "c":
        return [
            base64.standard_b64encode(np.float64(x).astype("<f8").tobytes()).decode()
            for x in (v.real, v.imag)
        ]
    return _json_value(v)


# -- chunks


def _chunk_coord(rest: str, a: Array) -> tuple[int, ...] | None:
    """The chunk coordinate of the chunk key ``rest`` (``c/i/j``), None if it is not
    the key of a chunk of the grid."""
    parts = rest.split("/")
    if parts[0] != "c" or len(parts) != a.ndim + 1:
        return None
    try:
        coord = tuple(int(p) for p in parts[1:])
    except ValueError:
        return None
    grid = a.grid.grid_shape
    if any(not 0 <= c < n or str(c) != p for c, n, p in zip(coord, grid, parts[1:], strict=True)):
        return None
    return coord


def _read_batch(batch: list[_Wanted]) -> list[np.ndarray | BaseException | None]:
    """The chunks of ``batch`` (each array's together, see :func:`_read_chunks`), in
    its order."""
    by_array: dict[int, list[int]] = {}
    for i, (view, _coord, _fut) in enumerate(batch):
        by_array.setdefault(id(view), []).append(i)
    out: list[np.ndarray | BaseException | None] = [None] * len(batch)
    for idx in by_array.values():
        got = _read_chunks(batch[idx[0]][0], [batch[i][1] for i in idx])
        for i, chunk in zip(idx, got, strict=True):
            out[i] = chunk
    return out


def _read_one(view: _ArrayView, coord: tuple[int, ...]) -> np.ndarray | None:
    """Chunk ``coord`` of ``view`` (see :func:`_read_chunks`), an error raised: zarr's
    usual get, with no more work than the one chunk needs."""
    table = view.array.manifest.table
    e, r = table.locate_one(coord)
    if e < 0:
        return None
    return _read_shard(view, table.paths[table.path_ids[e]], [coord], [r])[0]


def _settle(batch: list[_Wanted], got: list[np.ndarray | BaseException | None]) -> None:
    for (_view, _coord, fut), chunk in zip(batch, got, strict=True):
        if fut.done():
            continue
        if isinstance(chunk, BaseException):
            fut.set_exception(chunk)
        else:
            fut.set_result(chunk)


def _settle_later(batch: list[_Wanted], done: asyncio.Future[Any]) -> None:
    """:func:`_settle` with the result of a batch read in a worker thread."""
    if done.cancelled():
        got: list[Any] = [asyncio.CancelledError()] * len(batch)
    elif done.exception() is not None:
        got = [done.exception()] * len(batch)
    else:
        got = done.result()
    _settle(batch, got)


def _read_chunks(
    view: _ArrayView, coords: list[tuple[int, ...]]
) -> list[np.ndarray | BaseException | None]:
    """Chunks ``coords`` of ``view`` as little-endian bytes of the chunk shape zarr
    reads (of a regular grid the full chunk shape, an edge chunk padded with the fill
    value; of a rectilinear one the chunk's own), None for one never written. The chunks of
    one shard file are decoded by one engine call straight into their buffers
    (checksums verified); an error reading a shard is the result of its chunks."""
    m = view.array.manifest
    table = m.table
    entry, record = table.locate(np.array(coords, dtype=np.int64).reshape(len(coords), m.ndim))
    by_path: dict[int, list[int]] = {}
    for i, e in enumerate(entry.tolist()):
        if e >= 0:
            by_path.setdefault(int(table.path_ids[e]), []).append(i)
    out: list[np.ndarray | BaseException | None] = [None] * len(coords)
    for pid, idx in by_path.items():
        try:
            got = _read_shard(view, table.paths[pid], [coords[i] for i in idx], record[idx])
        except Exception as e:  # the error of these chunks' gets
            got = [e] * len(idx)
        for i, chunk in zip(idx, got, strict=True):
            out[i] = chunk
    return out


def _read_shard(
    view: _ArrayView, relpath: str, coords: list[tuple[int, ...]], records: np.ndarray | list[int]
) -> list[np.ndarray]:
    """Chunks ``coords`` of ``view``, records ``records`` of shard ``relpath`` (see
    :func:`_read_chunks`)."""
    a = view.array
    m = a.manifest
    dtype = m.dtype
    axes = m.grid.axes
    bufs: list[np.ndarray] = []
    dests: list[np.ndarray] = []
    heads: list[bytes] = []
    boxes = [[ax.offset_size_int(c) for ax, c in zip(axes, coord, strict=True)] for coord in coords]
    for box in boxes:
        shape = tuple(n for _o, n in box)
        full_shape = view.chunk_shape or shape
        buf = new_buffer(math.prod(full_shape) * dtype.itemsize).view(dtype).reshape(full_shape)
        dest = buf
        if shape != full_shape:  # an edge chunk: zarr reads the full chunk shape
            buf[...] = m.fill
            dest = buf[tuple(slice(0, n) for n in shape)]
        bufs.append(buf)
        dests.append(dest)
        heads.append(npy_header(dtype, shape))
    # numpy exports no buffer for datetime64/timedelta64: the same bytes as int64
    targets = [d.view("<i8") for d in dests] if dtype.kind in "Mm" else dests
    if not a.decode_records_into(relpath, records, targets, heads):
        # a header this writer would not write: arrayds' general path reads any valid
        # one (or names the damage)
        for box, dest in zip(boxes, dests, strict=True):
            dest[...] = a[tuple(slice(o, o + n) for o, n in box)]
    little = _little(dtype)
    return [
        (buf if little == dtype else buf.astype(little)).reshape(-1).view(np.uint8) for buf in bufs
    ]


def _stored(a: Array) -> list[tuple[int, ...]]:
    """The coordinates of the stored chunks (the union of the manifest's boxes)."""
    seen: set[tuple[int, ...]] = set()
    for e in a.manifest.shards:
        seen.update(itertools.product(*(range(s, b) for s, b in zip(e.start, e.stop, strict=True))))
    return sorted(seen)


def _byte_range(data: np.ndarray, r: ByteRequest | None, key: str) -> np.ndarray:
    """The bytes of ``data`` that ``r`` asks for (zarr's three request kinds)."""
    n = data.size
    if r is None:
        return data
    if isinstance(r, RangeByteRequest):
        return data[min(r.start, n) : min(r.end, n)]
    if isinstance(r, OffsetByteRequest):
        return data[min(r.offset, n) :]
    if isinstance(r, SuffixByteRequest):
        return data[max(n - r.suffix, 0) :]
    raise TypeError(f"Unexpected byte_range, got {r!r} for key {key!r} (zarr's ByteRequest types)")
