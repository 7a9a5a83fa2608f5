"""Reading a node's manifest: the head or a kept version (``version=``/``as_of=``),
parsed by its kind; the URL of a dataset located; the data source of a dataset URL
(registered with the file layer's :class:`~arrayds.ArrayRecordDataSource`).

>>> import arrayds
>>> _ = arrayds.open_array("memory://doc-nodes-read", mode="w", shape=(2,), dtype="i1",
...                        chunks=1)
>>> store, node = locate("memory://doc-nodes-read", None, None)
>>> read_node(store, node).kind
'array'
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..files.data_source import register_dataset_resolver
from ..storage import get_store, new_store
from ..storage.base import BaseStore as Store
from . import commit
from .names import check_component
from .registry import find, get, parse_node


def data_source(
    url: str,
    storage_options: Mapping[str, Any] | None,
    *,
    allow_pickle: bool,
    serializer: Any,
    version: int | None = None,
    as_of: Any = None,
) -> Any:
    """For ``ArrayRecordDataSource(url)``: the shards and decoder of the dataset at
    ``url`` if its kind reads as a data source (records), else ``None`` (then ``url``
    is an ArrayRecord file). ``allow_pickle`` and ``serializer`` are the data
    source's arguments: the consent to unpickle and the user's serializer;
    ``version``/``as_of``: that version of the dataset's history (a ``ValueError``
    naming the versions kept if it is not one of them)."""
    try:
        store = new_store(url, storage_options)  # not get_store: plain files come through here
        base = commit.read(store, "")
    except (OSError, ValueError):
        return None
    if base.head is None:
        return None
    try:
        kind = get(base.kind)
    except NotImplementedError:
        return None
    if kind.data_source is None:
        return None
    if version is not None or as_of is not None:  # errors here are the user's to see
        base = commit.read(store, "", version=version, as_of=as_of)
    # a kind that reads part of a long list: the shard list stays lazy
    raw = base.lazy_raw if kind.lazy_shards else base.raw
    assert raw is not None
    m = kind.parse(raw, store.display(""))
    return kind.data_source(store, "", m, allow_pickle=allow_pickle, serializer=serializer)


__all__ = [
    "Pin",
    "check_version_args",
    "kind_phrase",
    "missing_node",
    "read_node",
    "read_pinned",
    "replaced_at",
]


@dataclass(frozen=True)
class Pin:
    """What a handle opened with ``version=``/``as_of=`` remembers: the version it
    reads and the moment its children are read as of (``None``: their current state,
    for the newest version opened by number)."""

    generation: int
    children_as_of: datetime | None


def check_version_args(version: Any, as_of: Any, mode: str, what: str) -> bool:
    """Whether an open asks for a version of the history (``version=`` or
    ``as_of=``); ``ValueError`` for both, or for a mode other than ``"r"`` (an old
    version is read only); ``TypeError`` for a version that is not an int or an
    ``as_of`` that is not a datetime.

    >>> check_version_args(None, None, "r+", "x"), check_version_args(3, None, "r", "x")
    (False, True)
    >>> check_version_args(3, None, "a", "array 'x'")
    Traceback (most recent call last):
    ...
    ValueError: array 'x': version=/as_of= open a version of the history read only ...
    """
    if version is None and as_of is None:
        return False
    if version is not None and as_of is not None:
        raise ValueError(f"{what}: give version= or as_of=, not both")
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise TypeError(f"{what}: version must be an int, got {version!r}")
    if as_of is not None and not isinstance(as_of, datetime):
        raise TypeError(f"{what}: as_of must be a datetime, got {as_of!r}")
    if mode != "r":
        raise ValueError(
            f"{what}: version=/as_of= open a version of the history read only (mode 'r'), "
            f"got mode {mode!r}"
        )
    return True


def read_node(
    store: Store, node: str, *, version: int | None = None, as_of: datetime | None = None
) -> Any | None:
    """The parsed manifest of ``node`` (a ``GroupManifest``, ``ArrayManifest``, ...,
    by its kind), or ``None`` if the node does not exist; with ``version`` or
    ``as_of``, that version of its history (:func:`read_pinned`). A damaged manifest
    raises :class:`arrayds.CorruptionError` naming the node.

    >>> import arrayds
    >>> g = arrayds.open("memory://doc-read-node", mode="w")
    >>> read_node(g.store, "").kind, read_node(g.store, "nothing")
    ('group', None)
    """
    return read_pinned(store, node, version=version, as_of=as_of)[0]


def read_pinned(
    store: Store, node: str, *, version: int | None = None, as_of: datetime | None = None
) -> tuple[Any | None, Pin | None]:
    """The parsed manifest of ``node`` (``None`` if there is none) and, when
    ``version`` (a generation) or ``as_of`` (the newest version committed at or
    before that time; a naive datetime is UTC) is given, the :class:`Pin` of the
    version read. A version the history does not keep is a ``ValueError`` naming the
    versions it keeps (:func:`arrayds.nodes.commit.read`).

    The pin's ``children_as_of`` is the moment the version stands for: ``as_of``
    itself, or for ``version=N`` the last moment version N was current (just before
    the next version was committed; ``None`` when N is the current version). The
    children of a group opened at a version are read as of that moment.

    >>> import arrayds
    >>> g = arrayds.open("memory://doc-read-pinned", mode="w")
    >>> g.attrs["a"] = 1
    >>> m, pin = read_pinned(g.store, "", version=1)
    >>> m.attrs, pin.generation, pin.children_as_of is not None
    ({}, 1, True)
    """
    nv = commit.read(store, node, version=version, as_of=as_of)
    if nv.head is None:
        return None, None
    kind = find(nv.kind)
    raw = nv.lazy_raw if kind is not None and kind.lazy_shards else nv.raw
    assert raw is not None
    m = parse_node(raw, f"node {store.display(node)!r}")
    if version is None and as_of is None:
        return m, None
    if as_of is not None:
        return m, Pin(nv.generation, as_of)
    return m, Pin(nv.generation, replaced_at(store, node, nv.generation))


def replaced_at(store: Store, node: str, generation: int) -> datetime | None:
    """Just before the version after ``generation`` was committed (``None`` if
    ``generation`` is the current version or the next one has no time)."""
    cur = commit.read(store, node)
    if cur.generation <= generation:
        return None
    try:  # one read: the next generation is kept (generations may skip numbers)
        t = commit.read(store, node, version=generation + 1).time
    except ValueError:
        nxt = [v for v in commit.versions(store, node) if v.generation > generation]
        t = nxt[0].time if nxt else None
    return None if t is None else t - timedelta(microseconds=1)


def missing_node(store: Store, node: str, what: str = "node") -> FileNotFoundError:
    """The ``FileNotFoundError`` for a node that does not exist (naming the URL, the
    component and the manifest path), for the caller to raise.

    >>> import arrayds
    >>> e = missing_node(arrayds.open("memory://doc-missing", mode="w").store, "x", "array")
    >>> e.errno == errno.ENOENT, e.filename
    (True, 'memory://doc-missing/x')
    """
    where = repr(store.url) + (f" (component {node!r})" if node else "")
    return FileNotFoundError(
        errno.ENOENT,
        f"no arrayds {what} at {where}: {store.path(node, 'arrayds.json')} does not exist",
        store.display(node),
    )


def kind_phrase(kind: str) -> str:
    """``"an array"``, ``"a group"``, ``"a records"`` ... for messages.

    >>> kind_phrase("array"), kind_phrase("group")
    ('an array', 'a group')
    """
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


register_dataset_resolver(data_source)


def locate(
    url: str | os.PathLike[str],
    component: str | None,
    storage_options: Mapping[str, Any] | None,
    what: str = "a dataset",
) -> tuple[Store, str]:
    """-> (the store of the dataset root at ``url``, the node name ``component`` inside
    it); ``TypeError`` naming ``what`` if ``url`` is not a str or path.

    >>> store, node = locate("memory://doc-locate", "a/b", None)
    >>> node
    'a/b'
    """
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str):
        raise TypeError(f"{what} URL must be a str or path, got {type(url).__name__}")
    return get_store(url, storage_options), check_component(component)
