"""``to_arrayrecord`` / ``from_arrayrecord``: one entry point, dispatch by data type
(writing) or by the stored node's kind (reading).

Writers are tried in registration order; each is a ``(name, predicate, writer)``.
This module registers dask arrays and numpy arrays. Later modules (records from bags
and lists, ragged arrays, xarray) add theirs with :func:`register_writer` and
:func:`register_reader` without touching the array path.

>>> import arrayds, numpy as np
>>> a = arrayds.to_arrayrecord(np.eye(3), "memory://doc-api", mode="w", chunks=2)
>>> a.chunks, arrayds.from_arrayrecord("memory://doc-api").compute()[2, 2]
(((2, 1), (2, 1)), np.float64(1.0))
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .array import Array
from .dataset import _missing, _read_node
from .manifest import ArrayManifest, GroupManifest
from .store import Store, check_component

__all__ = ["from_arrayrecord", "register_reader", "register_writer", "to_arrayrecord"]

Writer = Callable[..., Any]
Reader = Callable[..., Any]

_writers: list[tuple[str, Callable[[Any], bool], Writer]] = []
_readers: dict[str, Reader] = {}


def register_writer(
    name: str, predicate: Callable[[Any], bool], writer: Writer, *, first: bool = False
) -> None:
    """Add a writer for data that ``predicate`` accepts. ``writer(data, store, node,
    **options)`` receives every keyword of :func:`to_arrayrecord` (``mode``,
    ``compression``, ``shard_size``, ``region``, ``attrs``, ``dims``, ``serializer``,
    ``group_size``, ``compute``, ``progress``) plus the extra ``**kwargs``."""
    entry = (name, predicate, writer)
    _writers[:] = [w for w in _writers if w[0] != name]
    if first:
        _writers.insert(0, entry)
    else:
        _writers.append(entry)


def register_reader(kind: str, reader: Reader) -> None:
    """Add a reader for stored nodes of ``kind``: ``reader(store, node, manifest, *,
    chunks, name, **kwargs)`` returns a dask collection (``kwargs``: the extra keywords
    of :func:`from_arrayrecord`; a reader that takes none raises ``TypeError``)."""
    _readers[kind] = reader


def to_arrayrecord(
    data: Any,
    url: str | os.PathLike[str],
    component: str | None = None,
    *,
    mode: str = "w-",
    compression: str = "zstd:3",
    shard_size: int | str | None = None,
    region: tuple[slice, ...] | Mapping[str, slice] | None = None,
    attrs: Mapping[str, Any] | None = None,
    dims: Sequence[str] | None = None,
    serializer: str = "auto",
    group_size: int = 1,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    progress: bool = False,
    **kwargs: Any,
) -> Any:
    """Write ``data`` to the node ``url`` + ``component`` in parallel (API.md §3).

    Arrays (``dask.array.Array``; ``numpy.ndarray``, chunked by ``chunks=``, default
    ``"auto"`` ~4 MiB): every dask block becomes one chunk (one record) of the stored
    grid, which equals the dask chunk grid; one task writes each shard, one task
    commits. ``mode``: ``"w-"`` create (``FileExistsError`` if the node exists),
    ``"w"`` replace, ``"a"`` append along axis 0 (other axes must match), ``"r+"``
    overwrite ``region`` (a tuple of slices aligned to the chunk grid; default: all).
    ``shard_size`` (bytes or ``"128MiB"``) groups neighbouring blocks into shard files;
    the default makes blocks of 16 MiB or more their own shard and groups smaller ones
    up to 16 MiB. Extra keyword: ``fill_value`` (new arrays, default 0).

    Returns the written :class:`arrayds.Array` (read-only handle), or with
    ``compute=False`` a ``dask.delayed.Delayed`` that writes and commits when computed
    (nothing is visible before). ``progress=True`` shows a progress bar for local
    schedulers.

    >>> import arrayds, dask.array as da
    >>> x = da.ones((4, 6), chunks=(2, 3), dtype="f4")
    >>> d = arrayds.to_arrayrecord(x, "memory://doc-to", "data/x", mode="w", compute=False)
    >>> "data/x" in arrayds.open("memory://doc-to", mode="a")
    False
    >>> d.compute().nchunks_initialized
    4
    """
    store = Store.get(os.fspath(url), storage_options)
    node = check_component(component)
    options = dict(
        mode=mode,
        compression=compression,
        shard_size=shard_size,
        region=region,
        attrs=attrs,
        dims=dims,
        serializer=serializer,
        group_size=group_size,
        compute=compute,
        progress=progress,
    )
    for _name, predicate, writer in _writers:
        if predicate(data):
            return writer(data, store, node, **options, **kwargs)
    raise TypeError(
        f"to_arrayrecord({store.display(node)!r}): cannot write data of type "
        f"{type(data).__module__}.{type(data).__qualname__} (registered writers: "
        f"{[w[0] for w in _writers]})"
    )


def from_arrayrecord(
    url: str | os.PathLike[str],
    component: str | None = None,
    *,
    chunks: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    name: str | None = None,
    **kwargs: Any,
) -> Any:
    """A lazy dask collection over the node ``url`` + ``component``.

    For an array: a ``dask.array.Array`` whose chunks equal the stored grid, or whole
    multiples of it with ``chunks=`` (an int/tuple/dict whose block boundaries are
    stored chunk boundaries, ``"auto"``, or ``"shards"`` for one block per shard box);
    each task reads its chunks with one batched engine read per shard. The graph name
    is deterministic in (url, component, manifest generation, chunks) unless ``name``
    is given. Works with the threaded, processes and distributed schedulers.

    For records: a ``dask.bag.Bag`` with one partition per shard; extra keywords go to
    :func:`arrayds.records.read_records` (``allow_pickle=True`` for a dataset written
    with pickle, ``serializer=``, ``decode=False`` for the stored bytes). For a ragged
    array: a bag of numpy arrays.

    >>> import arrayds, numpy as np
    >>> _ = arrayds.to_arrayrecord(np.arange(10), "memory://doc-from", mode="w", chunks=2)
    >>> arrayds.from_arrayrecord("memory://doc-from", chunks=4).chunks
    ((4, 4, 2),)
    """
    store = Store.get(os.fspath(url), storage_options)
    node = check_component(component)
    m = _read_node(store, node)
    if m is None:
        raise _missing(store, node)
    kind = getattr(m, "kind", None)
    if isinstance(m, GroupManifest):
        children = store.child_nodes(node)
        raise ValueError(
            f"{store.display(node)!r} is a group; pass component= naming one of its nodes "
            f"{children}"
        )
    reader = _readers.get(kind)  # type: ignore[arg-type]
    if reader is None:
        raise NotImplementedError(f"{store.display(node)!r}: no dask reader for kind {kind!r}")
    return reader(store, node, m, chunks=chunks, name=name, **kwargs)


# ------------------------------------------------------------------ arrays


def _is_dask_array(x: Any) -> bool:
    mod = type(x).__module__
    if not mod.startswith("dask.array"):
        return False
    da = sys.modules.get("dask.array")
    if da is not None and isinstance(x, da.Array):
        return True
    return hasattr(x, "chunks") and hasattr(x, "dtype") and hasattr(x, "__dask_graph__")


def _array_options(
    what: str,
    serializer: str,
    group_size: int,
    kwargs: dict[str, Any],
    allowed: Sequence[str] = ("fill_value",),
) -> None:
    if serializer not in ("auto", None):
        raise ValueError(f"{what}: serializer={serializer!r} applies to records, not arrays")
    if group_size != 1:
        raise ValueError(
            f"{what}: array shards always use group_size 1 (one chunk per record, each "
            f"independently addressable); got group_size={group_size}"
        )
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(f"{what}: unexpected keyword arguments {unknown} for an array")


def _write_dask_array(
    x: Any,
    store: Store,
    node: str,
    *,
    serializer: str,
    group_size: int,
    **options: Any,
) -> Any:
    from .dask.array import write_array

    what = f"array {store.display(node)!r}"
    extra = {k: options.pop(k) for k in list(options) if k not in _WRITE_KEYS}
    _array_options(what, serializer, group_size, extra)
    if isinstance(options.get("region"), Mapping):
        raise TypeError(f"{what}: region as a dict of dimension names is for xarray input")
    return write_array(x, store, node, **options, **extra)


_WRITE_KEYS = (
    "mode",
    "compression",
    "shard_size",
    "region",
    "attrs",
    "dims",
    "compute",
    "progress",
)


def _write_numpy(
    x: np.ndarray,
    store: Store,
    node: str,
    *,
    chunks: Any = None,
    **options: Any,
) -> Any:
    try:
        import dask.array as da
    except ImportError:  # pragma: no cover - dask is a dependency of the [dask] extra
        raise ImportError("to_arrayrecord needs dask: pip install 'arrayds[dask]'") from None
    from .grid import normalize_chunks
    from .tensor import check_dtype

    what = f"array {store.display(node)!r}"
    dt = check_dtype(x.dtype, what)
    norm = normalize_chunks("auto" if chunks is None else chunks, x.shape, dt.itemsize, what)
    return _write_dask_array(da.from_array(x, chunks=norm), store, node, **options)


def no_extra_keywords(what: str, kwargs: Mapping[str, Any]) -> None:
    """``TypeError`` naming the keywords a kind's dask reader does not take."""
    if kwargs:
        raise TypeError(f"from_arrayrecord({what}): unexpected keyword arguments {sorted(kwargs)}")


def _read_array(
    store: Store, node: str, m: ArrayManifest, *, chunks: Any, name: Any, **kwargs: Any
) -> Any:
    from .dask.array import array_to_dask

    no_extra_keywords(f"array {store.display(node)!r}", kwargs)

    return array_to_dask(Array(store, node, m, "r"), chunks=chunks, name=name)


# ----------------------------------------------------------------- records


def _is_records_input(x: Any) -> bool:
    """A dask bag, or a list/tuple of records (bytes or objects). A list made only
    of numpy arrays is a ragged array (a later kind), not records."""
    bag = sys.modules.get("dask.bag")
    if bag is not None and isinstance(x, bag.Bag):
        return True
    if isinstance(x, (list, tuple)):
        return not (x and all(isinstance(i, np.ndarray) for i in x))
    return False


def _write_records(
    data: Any,
    store: Store,
    node: str,
    *,
    shard_size: Any = None,
    region: Any = None,
    dims: Any = None,
    **options: Any,
) -> Any:
    from .records import write_records

    what = f"records dataset {store.display(node)!r}"
    for key, value in (("shard_size", shard_size), ("region", region), ("dims", dims)):
        if value is not None:
            raise ValueError(f"{what}: {key}= applies to arrays, not records")
    return write_records(
        data,
        store.url,
        node or None,
        storage_options=store.storage_options or None,
        **options,
    )


_RECORDS_READ_KEYS = ("allow_pickle", "serializer", "decode")


def _read_records(store: Store, node: str, m: Any, *, chunks: Any, name: Any, **kwargs: Any) -> Any:
    from .records import read_records

    what = f"records dataset {store.display(node)!r}"
    if chunks is not None or name is not None:
        raise ValueError(f"{what}: chunks= and name= apply to arrays")
    no_extra_keywords(what, {k: v for k, v in kwargs.items() if k not in _RECORDS_READ_KEYS})
    return read_records(
        store.url, node or None, storage_options=store.storage_options or None, **kwargs
    )


register_writer("dask.array", _is_dask_array, _write_dask_array)
register_writer("numpy", lambda x: isinstance(x, np.ndarray), _write_numpy)
register_writer("records", _is_records_input, _write_records)
register_reader("array", _read_array)
register_reader("records", _read_records)
