"""The xarray backend: ``xr.open_dataset(url, engine="arrayds")`` (docs/xarray.md).

A dataset is a group node whose member arrays are the variables (docs/spec.md,
"Xarray datasets"): each array's ``dims`` are the variable's dimensions, its
attributes the variable's (CF-encoded) attributes, the group's attributes the
global ones. Opening reads manifests only (:func:`arrayds.xarray.state.read_state`
gives a consistent snapshot of all members); every variable is a lazily indexed
:class:`ArrayDSBackendArray`, so ``ds.isel(...)`` reads only the chunks it touches,
and ``encoding["preferred_chunks"]`` makes ``chunks={}`` produce dask chunks equal to
the stored grid. CF decoding (times, ``_FillValue``, ``scale_factor``/``add_offset``)
is xarray's own, exactly as for netCDF and zarr. Opened datasets pickle (each
array as its URL and manifest snapshot); ``Dataset.load_async`` reads variables
concurrently (``async_getitem``); ``xr.open_datatree`` / ``xr.open_groups`` map the
groups below a node to a tree (``supports_groups``), read again when a tree commit
(docs/spec.md section 10.4) happened meanwhile.

>>> import numpy as np, xarray as xr, arrayds
>>> ds = xr.Dataset({"t": ("x", np.arange(4.0))}, attrs={"title": "demo"})
>>> _ = arrayds.to_arrayrecord(ds, "memory://doc-backend", mode="w")
>>> back = xr.open_dataset("memory://doc-backend", engine="arrayds")
>>> back.attrs["title"], back.t.values.tolist()
('demo', [0.0, 1.0, 2.0, 3.0])
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

import numpy as np
from xarray import Variable
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.backends.common import AbstractDataStore
from xarray.backends.store import StoreBackendEntrypoint
from xarray.coding import strings
from xarray.core import indexing
from xarray.core.utils import FrozenDict

from ..errors import CommitConflictError
from ..kinds.array.handle import Array
from ..kinds.array.manifest import ArrayManifest
from ..nodes import commit as node_commit
from ..nodes.names import check_component, join_component
from ..nodes.read import check_version_args
from ..nodes.registry import parse_node
from ..storage import get_store, new_store
from ..storage.base import BaseStore as Store
from .attrs import decode_attrs
from .state import chain_stamps, read_state

__all__ = ["INTERNAL", "ArrayDSBackendArray", "ArrayDSBackendEntrypoint", "ArrayDSDataStore"]

INTERNAL = "_arrayds"
"""Attribute of a member array holding what xarray does not see (e.g.
``{"strings": "vlen"}`` for variables that were object arrays of str)."""


def _axis_chunks(sizes: tuple[int, ...]) -> int | tuple[int, ...]:
    """One axis of the stored grid as xarray encodes chunks: an int for a regular
    axis (equal chunks, the last one possibly shorter), else the tuple of sizes."""
    if not sizes:
        return 0
    first = sizes[0]
    if all(s == first for s in sizes[:-1]) and sizes[-1] <= first:
        return first
    return tuple(sizes)


def _nan_fill_only(attrs: Mapping[str, Any], dtype: np.dtype) -> bool:
    """A float variable whose only CF masking is ``_FillValue`` NaN (xarray's default
    for floats): decoding would replace NaN by NaN, a full pass over the data for
    nothing."""
    if dtype.kind != "f" or any(
        k in attrs for k in ("missing_value", "scale_factor", "add_offset", "valid_range")
    ):
        return False
    fv = attrs.get("_FillValue")
    try:
        return fv is not None and np.ndim(fv) == 0 and bool(np.isnan(fv))
    except TypeError:
        return False


class ArrayDSBackendArray(BackendArray):
    """A lazily indexed array node. Outer (orthogonal) indexing is native
    (``IndexingSupport.OUTER``: any mix of ints, slices and 1-d integer arrays, one
    per axis), so xarray hands selections down as they are and only the chunks a
    selection touches are read — one batched engine read per shard file."""

    __slots__ = ("_array", "_vlen", "dtype", "shape")

    def __init__(self, array: Array, vlen: str | None = None) -> None:
        self._array = array
        self._vlen = vlen
        self.shape = array.shape
        if vlen == "str":
            self.dtype = strings.create_vlen_dtype(str)
        elif vlen == "bytes":
            self.dtype = strings.create_vlen_dtype(bytes)
        else:
            self.dtype = array.dtype

    def get_array(self) -> Array:
        return self._array

    def _raw(self, key: tuple[Any, ...]) -> np.ndarray:
        a = self._array
        if all(isinstance(k, (slice, int, np.integer)) for k in key):
            out = a[key] if key else a[()]
        else:
            out = a.oindex[key]
        if self._vlen is not None:
            out = np.asarray(out).astype(object)
        return out

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._raw
        )

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        """xarray's asynchronous indexing (``Dataset.load_async``, xarray >= 2025.7):
        the read runs on the event loop's default thread pool (not arrayds' I/O pool,
        which the read itself uses for its shards), so the reads of all variables
        that ``load_async`` gathers are in flight at once."""
        import asyncio

        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self.__getitem__, key)


class ArrayDSDataStore(AbstractDataStore):
    """The members of one group, as xarray's encoded (not yet CF-decoded) variables;
    with ``version``/``as_of``, of that version of the group's history."""

    def __init__(
        self,
        store: Store,
        node: str,
        *,
        lazy: bool = False,
        version: int | None = None,
        as_of: datetime | None = None,
    ) -> None:
        check_version_args(version, as_of, "r", f"dataset {store.display(node)!r}")
        self._store = store
        self._node = node
        self._version = version
        self._as_of = as_of
        self.moment: datetime | None = None
        """For a version of the history: the moment its child groups are read as of."""
        self._members: dict[str, tuple[str, ArrayManifest]] | None = None
        self._attrs: dict[str, Any] = {}
        self._groups: list[str] = []
        if not lazy:
            self._load()

    def _load(self) -> dict[str, tuple[str, ArrayManifest]]:
        if self._members is not None:
            return self._members
        store, node = self._store, self._node
        state = read_state(store, node, version=self._version, as_of=self._as_of)
        self.moment = state.moment
        what = f"dataset {store.display(node)!r}"
        if state.kind is None:
            manifest = store.path(node_commit.manifest_key(node))
            raise FileNotFoundError(f"no arrayds dataset at {what[8:]}: {manifest} does not exist")
        if state.kind == "array":
            # a single array node opens as a dataset of one variable
            m = parse_node(state.root, what)  # type: ignore[arg-type]
            name = node.rsplit("/", 1)[-1] if node else "data"
            self._members = {name: (node, m)}
        elif state.kind == "group":
            self._members = {
                name: (f"{node}/{name}" if node else name, m) for name, m in state.members.items()
            }
            self._attrs = decode_attrs(state.attrs)
            self._groups = list(state.groups)
        else:
            raise ValueError(
                f"{what} is a {state.kind!r} node; xarray opens groups and arrays (pass "
                f"group= to name a group inside it)"
            )
        return self._members

    @property
    def store(self) -> Store:
        return self._store

    def __reduce__(self) -> tuple[Any, ...]:
        # an opened dataset pickles (to another process, a dask worker): its
        # variables carry their own arrays (arrayds.Array pickles as URL + manifest),
        # so the store itself is only needed for close(): it comes back without
        # reading anything
        return (
            _closed_store,
            (self._store.url, self._store.storage_options, self._node, self._version, self._as_of),
        )

    def get_variables(self) -> Mapping[str, Variable]:
        out = {}
        for name, (node, m) in self._load().items():
            out[None if name == "__values__" else name] = self._variable(name, node, m)
        return FrozenDict(out)

    def _variable(self, name: str, node: str, m: ArrayManifest) -> Variable:
        attrs = decode_attrs(m.attrs)
        internal = attrs.pop(INTERNAL, None) or {}
        vlen = internal.get("strings") if isinstance(internal, dict) else None
        dims = m.dims if m.dims is not None else tuple(f"{name}_dim_{i}" for i in range(m.ndim))
        array = Array(self._store, node, m, "r")
        data = indexing.LazilyIndexedArray(ArrayDSBackendArray(array, vlen))
        chunks = tuple(_axis_chunks(c) for c in m.grid.chunks)
        encoding: dict[str, Any] = {
            "chunks": chunks,
            "preferred_chunks": dict(zip(dims, chunks, strict=True)),
            "compression": m.compression,
        }
        if _nan_fill_only(attrs, m.dtype):
            # masking NaN with NaN changes nothing: keep the encoding, skip the pass
            encoding["_FillValue"] = attrs.pop("_FillValue")
        return Variable(dims, data, attrs, encoding)

    def child_groups(self) -> list[str]:
        """The names of the groups inside this one (DataTree children)."""
        self._load()
        return list(self._groups)

    def get_attrs(self) -> Mapping[str, Any]:
        self._load()
        return FrozenDict(self._attrs)

    def get_dimensions(self) -> Mapping[str, int]:
        dims: dict[str, int] = {}
        for name, (_node, m) in self._load().items():
            names = m.dims or tuple(f"{name}_dim_{i}" for i in range(m.ndim))
            for d, n in zip(names, m.shape, strict=True):
                dims[d] = n
        return FrozenDict(dims)

    def get_encoding(self) -> dict[str, Any]:
        return {}

    def close(self) -> None:
        """Nothing to release: shard readers live in the per-process reader cache
        (shards are immutable), which closes them when evicted."""


def _closed_store(
    url: str,
    storage_options: Mapping[str, Any],
    node: str,
    version: int | None = None,
    as_of: datetime | None = None,
) -> ArrayDSDataStore:
    """An unpickled :class:`ArrayDSDataStore`: its members are read again (from the
    same version: the current state, or the version it was opened at) only if asked
    for."""
    store = get_store(url, storage_options)
    return ArrayDSDataStore(store, node, lazy=True, version=version, as_of=as_of)


def _split_url(filename_or_obj: Any) -> str | None:
    if isinstance(filename_or_obj, os.PathLike):
        return os.fspath(filename_or_obj)
    if isinstance(filename_or_obj, str):
        return filename_or_obj
    return None


class ArrayDSBackendEntrypoint(BackendEntrypoint):
    """``engine="arrayds"``: open an arrayds dataset (a group of arrays, or a single
    array) with xarray. Extra keywords: ``group`` (a component inside the dataset),
    ``storage_options`` (passed to fsspec), and ``version`` (a generation,
    :func:`arrayds.versions`) or ``as_of`` (a datetime; naive means UTC) to open that
    version of the group's history: a dataset written by appends along a dimension is,
    at version N, exactly as it was after the Nth write (its members as the group's
    snapshot listed them then). A version the history does not keep is a
    ``ValueError`` naming the versions it keeps."""

    description = "Open arrayds datasets (arrays on ArrayRecord shards) in xarray"
    url = "https://github.com/arrayds/arrayds/blob/main/docs/xarray.md"
    open_dataset_parameters = (
        "filename_or_obj",
        "mask_and_scale",
        "decode_times",
        "concat_characters",
        "decode_coords",
        "drop_variables",
        "use_cftime",
        "decode_timedelta",
        "group",
        "storage_options",
        "version",
        "as_of",
    )

    supports_groups = True

    def open_groups_as_dict(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        group: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        version: int | None = None,
        as_of: datetime | None = None,
        **decode: Any,
    ) -> dict[str, Any]:
        """``xr.open_groups(url, engine="arrayds")``: the group ``group`` (default the
        root) and every group below it, as ``{"/": ds, "/a": ds, "/a/b": ds}``. Each
        group is read as :meth:`open_dataset` reads it (one consistent snapshot per
        group); ``decode`` takes the CF decoding keywords of :meth:`open_dataset`.
        ``version``/``as_of``: that version of ``group``'s history, the groups below
        it as of the moment it stands for (``as_of``, or the last moment version N
        was current)."""
        url = _split_url(filename_or_obj)
        if url is None:
            raise TypeError(
                f"engine 'arrayds' opens a dataset URL (str or path), got "
                f"{type(filename_or_obj).__name__}"
            )
        store = get_store(url, storage_options)
        top = check_component(group)
        for _ in range(16):
            before = chain_stamps(store, top)
            out: dict[str, Any] = {}
            pending = [(top, "/")]
            moment = None
            while pending:
                node, path = pending.pop(0)
                if node == top:
                    ds_store = ArrayDSDataStore(store, node, version=version, as_of=as_of)
                    ds_store._load()
                    moment = ds_store.moment
                else:
                    ds_store = ArrayDSDataStore(store, node, as_of=moment)
                out[path] = self.open_dataset(ds_store, **decode)
                for name in ds_store.child_groups():
                    pending.append((join_component(node, name), f"{path.rstrip('/')}/{name}"))
            # a tree commit at or above ``group`` while the groups were read: again
            if chain_stamps(store, top) == before:
                return out
        raise CommitConflictError(  # pragma: no cover - needs commits faster than reads
            f"tree {store.display(top)!r}: the tree kept changing while it was read"
        )

    def open_datatree(  # type: ignore[override]
        self, filename_or_obj: Any, **kwargs: Any
    ) -> Any:
        """``xr.open_datatree(url, engine="arrayds")``: the groups of
        :meth:`open_groups_as_dict` as a ``DataTree`` (xarray >= 2024.10)."""
        try:
            from xarray import DataTree
        except ImportError:  # pragma: no cover - xarray < 2024.10
            raise ImportError(
                "xr.open_datatree(engine='arrayds') needs xarray >= 2024.10 (DataTree)"
            ) from None
        return DataTree.from_dict(self.open_groups_as_dict(filename_or_obj, **kwargs))

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        url = _split_url(filename_or_obj)
        if url is None:
            return False
        try:
            store = new_store(url)  # not cached: xarray guesses for every file it opens
            raw = node_commit.read(store, "").raw
        except Exception:  # noqa: BLE001 - guessing must never fail
            return False
        if not raw or raw.get("format") != "arrayds":
            return False
        return raw.get("kind") in ("group", "array")

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        mask_and_scale: bool = True,
        decode_times: bool = True,
        concat_characters: bool = True,
        decode_coords: bool = True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime: bool | None = None,
        decode_timedelta: bool | None = None,
        group: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        version: int | None = None,
        as_of: datetime | None = None,
    ) -> Any:
        if isinstance(filename_or_obj, ArrayDSDataStore):
            ds_store = filename_or_obj
        else:
            url = _split_url(filename_or_obj)
            if url is None:
                raise TypeError(
                    f"engine 'arrayds' opens a dataset URL (str or path), got "
                    f"{type(filename_or_obj).__name__}"
                )
            ds_store = ArrayDSDataStore(
                get_store(url, storage_options),
                check_component(group),
                version=version,
                as_of=as_of,
            )
        return StoreBackendEntrypoint().open_dataset(
            ds_store,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
            drop_variables=drop_variables,
            use_cftime=use_cftime,
            decode_timedelta=decode_timedelta,
        )
