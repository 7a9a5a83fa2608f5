"""``to_arrayrecord`` / ``from_arrayrecord``: one entry point, dispatch by data type
(writing) or by the stored node's kind (reading).

Writing asks the node-kind registry for the first writer that accepts the data
(:func:`arrayds.nodes.registry.writer_for`, in the documented order
:data:`arrayds.nodes.registry.WRITER_ORDER`); reading asks the stored node's kind for its
``to_dask``. This module holds the two array writers (dask arrays, numpy arrays).

>>> import arrayds, numpy as np
>>> a = arrayds.to_arrayrecord(np.eye(3), "memory://doc-api", mode="w", chunks=2)
>>> a.chunks, arrayds.from_arrayrecord("memory://doc-api").compute()[2, 2]
(((2, 1), (2, 1)), np.float64(1.0))
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .kinds.group import GroupManifest
from .nodes import commit
from .nodes import registry as kinds
from .nodes.history import VersionInfo
from .nodes.merge import AUTO_COMPACT_FILES, check_compact
from .nodes.names import check_component
from .nodes.options import DEFAULT_COMPRESSION
from .nodes.read import check_version_args, missing_node, read_node
from .storage import get_store
from .tools.compact import compact as compact_nodes

__all__ = ["from_arrayrecord", "to_arrayrecord", "versions"]


def to_arrayrecord(
    data: Any,
    url: str | os.PathLike[str],
    component: str | None = None,
    *,
    mode: str = "w-",
    compression: str = DEFAULT_COMPRESSION,
    shard_size: int | str | None = None,
    region: tuple[slice, ...] | Mapping[str, slice] | None = None,
    attrs: Mapping[str, Any] | None = None,
    dims: Sequence[str] | None = None,
    serializer: str = "auto",
    group_size: int = 1,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    progress: bool = False,
    compact: bool | str = "tiered",
    **kwargs: Any,
) -> Any:
    """Write ``data`` to the node ``url`` + ``component`` in parallel (docs/guide.md).

    Arrays (``dask.array.Array``; ``numpy.ndarray``, chunked by ``chunks=``, default
    ``"auto"`` ~4 MiB): every dask block becomes one chunk (one record) of the stored
    grid, which equals the dask chunk grid; one task writes each shard, one task
    commits. ``mode``: ``"w-"`` create (``FileExistsError`` if the node exists),
    ``"w"`` replace, ``"a"`` append along axis 0 (other axes must match), ``"r+"``
    overwrite ``region`` (a tuple of slices aligned to the chunk grid; default: all).
    ``shard_size`` (bytes or ``"128MiB"``) groups neighbouring blocks into shard files;
    the default makes blocks of 16 MiB or more their own shard and groups smaller ones
    up to 16 MiB. Extra keyword: ``fill_value`` (new arrays, default 0).

    ``compact``: what an append (``mode="a"``, ``append_dim=``) does to the node's
    shards. ``"tiered"`` (the default): where the newest small shards of a node fill a
    tier, they are merged into one shard inside the append's own commit (one version
    per append, whatever the kind: :func:`arrayds.nodes.merge.tiered`), as a
    log-structured merge tree does
    (:func:`arrayds.nodes.merge.tail_to_merge`: eight shards of one tier make one
    of the next), so a node grown by small appends keeps a few dozen files (its opens
    and reads stay as fast as those of the data written at once) at the price of
    copying each appended byte about log8(appends) times and keeping the merged files
    until ``arrayds gc`` expires the versions that name them. An append retried after
    a concurrent writer's commit merges again from what that writer left. ``True``:
    after any write, compact the node and those below it if they hold
    :data:`arrayds.nodes.merge.AUTO_COMPACT_FILES` (64) or more small shard files
    (:func:`arrayds.compact`: everything rewritten into shards of ``shard_size``).
    ``False``: neither (a pipeline that runs ``arrayds compact`` on a schedule).

    ``retries=`` (extra keyword of appends: arrays, records, xarray ``append_dim=``;
    default :data:`arrayds.nodes.retry.APPEND_RETRIES`): how often an append whose
    commit lost the race to another writer's is placed after that writer's rows and
    committed again, after a random wait (:mod:`arrayds.nodes.retry`); its shards are
    not written again. ``0`` raises :class:`arrayds.CommitConflictError` at once. An
    append that no longer fits (the node was replaced by one of another dtype, grid or
    encoding) raises it too. Nothing of a write that raises is visible. Not an integer
    of 0 or more: ``ValueError``.

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
    store = get_store(os.fspath(url), storage_options)
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
    check_compact(compact, f"to_arrayrecord({store.display(node)!r})")
    if compact is True and not compute:
        raise ValueError(
            f"to_arrayrecord({store.display(node)!r}): compact=True compacts after the "
            f"write commits, so it needs compute=True"
        )
    try:
        writer = kinds.writer_for(data)
    except TypeError as e:
        raise TypeError(f"to_arrayrecord({store.display(node)!r}): {e}") from None
    if mode == "a" and compact != "tiered":
        # the writers' appends merge by tiers inside their own commit unless told not to
        kwargs["compact"] = compact
    out = writer.write(data, store, node, **options, **kwargs)
    if compact is True:
        compact_nodes(
            store.url,
            node or None,
            storage_options=store.storage_options or None,
            min_small_files=AUTO_COMPACT_FILES,
        )
    return out


def from_arrayrecord(
    url: str | os.PathLike[str],
    component: str | None = None,
    *,
    chunks: Any = None,
    storage_options: Mapping[str, Any] | None = None,
    name: str | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
    **kwargs: Any,
) -> Any:
    """A lazy dask collection over the node ``url`` + ``component`` (with
    ``version=N`` or ``as_of=`` a datetime, naive meaning UTC: over that version of
    the node's history, see :func:`arrayds.versions`; ``ValueError`` naming the
    versions kept if it is not one of them).

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
    >>> _ = arrayds.to_arrayrecord(np.arange(4), "memory://doc-from", mode="a", chunks=2)
    >>> [arrayds.from_arrayrecord("memory://doc-from", version=v).shape for v in (1, 2)]
    [(10,), (14,)]
    """
    store = get_store(os.fspath(url), storage_options)
    node = check_component(component)
    check_version_args(version, as_of, "r", f"node {store.display(node)!r}")
    m = read_node(store, node, version=version, as_of=as_of)
    if m is None:
        raise missing_node(store, node)
    if isinstance(m, GroupManifest):
        children = commit.child_nodes(store, node)
        raise ValueError(
            f"{store.display(node)!r} is a group; pass component= naming one of its nodes "
            f"{children}"
        )
    kind = kinds.get(getattr(m, "kind", None), store.display(node))
    if kind.to_dask is None:
        raise NotImplementedError(f"{store.display(node)!r}: no dask reader for kind {kind.name!r}")
    return kind.to_dask(store, node, m, chunks=chunks, name=name, **kwargs)


def versions(
    url: str | os.PathLike[str],
    component: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
) -> list[VersionInfo]:
    """The versions of the node ``url`` + ``component`` that its history keeps,
    oldest first, the current one last: each a ``VersionInfo(generation, commit,
    time, current)`` (``time``: the commit time, an aware UTC datetime). Open one with
    ``version=generation`` (or ``as_of=`` a time) in :func:`arrayds.open`,
    :func:`arrayds.open_array`, :func:`from_arrayrecord`, ``xr.open_dataset(...,
    engine="arrayds")``, ... Every commit of a format 2 node is a version until
    ``arrayds gc`` expires it; a write with ``mode="w"`` starts a new history; a
    format 1 node keeps only its current version. No node there:
    ``FileNotFoundError``.

    >>> import arrayds, numpy as np
    >>> a = arrayds.open_array("memory://doc-versions", mode="w", shape=(0,), dtype="i4",
    ...                        chunks=2)
    >>> _ = a.append(np.arange(3))
    >>> [(v.generation, v.current) for v in arrayds.versions("memory://doc-versions")]
    [(1, False), (2, True)]
    >>> arrayds.open_array("memory://doc-versions", version=1).shape
    (0,)
    """
    store = get_store(os.fspath(url), storage_options)
    node = check_component(component)
    found = commit.versions(store, node)
    if not found:
        raise missing_node(store, node)
    return found
