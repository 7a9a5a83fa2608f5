"""Datasets: a tree of nodes under one URL — ``open``, ``open_array`` and ``Group``.

Every node is a folder holding an ``arrayds.json`` manifest (docs/spec.md). A group
finds its children by listing the sub-folders that hold a manifest; missing
intermediate groups are created when a node is written below them.

Modes (for :func:`open` and :func:`open_array`): ``"r"`` read only (default),
``"r+"`` modify an existing node, ``"a"`` modify or create, ``"w"`` create,
replacing what is there, ``"w-"`` create, failing if the node exists.

>>> import arrayds, numpy as np
>>> g = arrayds.open("memory://doc-ds", mode="w")
>>> a = g.create_array("images/train", shape=(10, 4), dtype="u1", chunks=(5, 4))
>>> a[:] = np.arange(40).reshape(10, 4)
>>> g.attrs["title"] = "demo"
>>> g2 = arrayds.open("memory://doc-ds")
>>> list(g2), g2["images/train"][9].tolist(), g2.attrs["title"]
(['images'], [36, 37, 38, 39], 'demo')
>>> print(g2.tree())
/
└── images
    └── train (10, 4) uint8
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from .kinds.array.create import create_array_node, new_array_manifest
from .kinds.array.handle import Array
from .kinds.array.manifest import ArrayManifest
from .kinds.group import Group, GroupManifest, create_group_node
from .nodes.commit import check_parents, ensure_parents
from .nodes.handle import check_mode, open_handle, refuse_existing
from .nodes.names import check_component
from .nodes.options import DEFAULT_COMPRESSION
from .nodes.read import check_version_args, kind_phrase, missing_node, read_pinned
from .storage import get_store

__all__ = [
    "Group",
    "check_parents",
    "create_array_node",
    "create_group_node",
    "ensure_parents",
    "new_array_manifest",
    "open",
    "open_array",
    "open_group",
    "open_handle",
    "refuse_existing",
]


# ------------------------------------------------------------------- opening


def open(  # noqa: A001 - the public name (docs/api.md)
    url: str | os.PathLike[str],
    mode: str = "r",
    *,
    storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> Any:
    """Open the dataset at ``url``: its root :class:`Group` (or the :class:`Array`
    when ``url`` names an array node).

    ``"r"``/``"r+"`` need an existing dataset (``FileNotFoundError`` naming the URL);
    ``"a"`` opens or creates a group; ``"w"`` creates an empty group, replacing the
    node's previous content; ``"w-"`` fails if a node exists.

    ``version=N`` (a generation, see :func:`arrayds.versions`) or ``as_of=`` (a
    datetime: the newest version committed at or before it; a naive datetime means
    UTC) opens that version of the root's history, read only (mode ``"r"``; writing
    raises ``PermissionError`` naming the version). A version the history does not
    keep is a ``ValueError`` naming the versions it keeps. The children of a group
    opened so are read as they were at the moment the version stands for: ``as_of``,
    or for ``version=N`` the last moment N was current (just before version N + 1
    was committed; their current state if N is the newest version).

    >>> import arrayds
    >>> arrayds.open("memory://doc-open", mode="w")
    <arrayds.Group 'memory://doc-open' (0 members) mode='r+'>
    >>> g = arrayds.open("memory://doc-open", mode="r+")
    >>> g.attrs["step"] = 1
    >>> dict(arrayds.open("memory://doc-open", version=1).attrs)
    {}
    """
    check_mode(mode)
    store = get_store(os.fspath(url), storage_options)
    check_version_args(version, as_of, mode, f"dataset {store.display('')!r}")
    if mode in ("w", "w-"):
        return create_group_node(store, "", mode)
    m, pin = read_pinned(store, "", version=version, as_of=as_of)
    if m is None:
        if mode == "a":
            return create_group_node(store, "", mode)
        raise missing_node(store, "", "dataset")
    return open_handle(store, "", m, mode if mode == "r" else "r+", pin)


def open_group(
    url: str | os.PathLike[str],
    component: str | None = None,
    mode: str = "r",
    *,
    storage_options: Mapping[str, Any] | None = None,
    attrs: Mapping[str, Any] | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> Group:
    """Open (or with ``"a"``/``"w"``/``"w-"`` create) the group at ``url`` +
    ``component``. ``version=``/``as_of=``: a version of the group's history, read
    only, its children as of the moment it stands for (as for :func:`open`).

    >>> import arrayds
    >>> g = arrayds.open_group("memory://doc-og", "a/b", mode="a", attrs={"k": 1})
    >>> g.name, arrayds.open_group("memory://doc-og", "a/b").attrs["k"]
    ('/a/b', 1)
    """
    check_mode(mode)
    store = get_store(os.fspath(url), storage_options)
    node = check_component(component)
    check_version_args(version, as_of, mode, f"group {store.display(node)!r}")
    if mode in ("w", "w-"):
        return create_group_node(store, node, mode, attrs)
    m, pin = read_pinned(store, node, version=version, as_of=as_of)
    if m is None:
        if mode == "a":
            return create_group_node(store, node, mode, attrs)
        raise missing_node(store, node, "group")
    if not isinstance(m, GroupManifest):
        raise ValueError(f"{store.display(node)!r} is {kind_phrase(m.kind)} node, not a group")
    return open_handle(store, node, m, mode if mode == "r" else "r+", pin)


def open_array(
    url: str | os.PathLike[str],
    component: str | None = None,
    mode: str = "r",
    *,
    storage_options: Mapping[str, Any] | None = None,
    shape: Sequence[int] | None = None,
    dtype: Any = None,
    chunks: Any = None,
    fill_value: Any = 0,
    compression: str = DEFAULT_COMPRESSION,
    dims: Sequence[str] | None = None,
    attrs: Mapping[str, Any] | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> Array:
    """Open the array at ``url`` + ``component``.

    ``"r"`` (default) and ``"r+"`` need an existing array. To create one (modes
    ``"w"``, ``"w-"``, or ``"a"`` when it does not exist) pass ``shape``, ``dtype``
    and ``chunks`` (and optionally ``fill_value``, ``compression``, ``dims``,
    ``attrs``), as for :meth:`Group.create_array`. ``"w-"`` on an existing node is
    ``FileExistsError`` naming it, whatever the other arguments. ``version=`` /
    ``as_of=`` open a version of the array's history, read only (as for :func:`open`).

    >>> import arrayds
    >>> a = arrayds.open_array("memory://doc-oa", "x/y", mode="w", shape=(3,), dtype="f4", chunks=2)
    >>> arrayds.open_array("memory://doc-oa", "x/y").shape
    (3,)
    """
    check_mode(mode)
    store = get_store(os.fspath(url), storage_options)
    node = check_component(component)
    display = store.display(node)
    check_version_args(version, as_of, mode, f"array {display!r}")

    def create() -> Array:
        if shape is None or dtype is None or chunks is None:
            raise TypeError(
                f"open_array({display!r}, mode={mode!r}) creates an array: pass shape=, "
                f"dtype= and chunks="
            )
        m = new_array_manifest(
            shape,
            dtype,
            chunks,
            fill_value=fill_value,
            compression=compression,
            dims=dims,
            attrs=attrs,
            name=f"array {display!r}",
        )
        return create_array_node(store, node, m, mode)

    if mode in ("w", "w-"):
        if mode == "w-":
            refuse_existing(store, node)  # an existing node: FileExistsError first
        return create()
    m, pin = read_pinned(store, node, version=version, as_of=as_of)
    if m is None:
        if mode == "a" and shape is not None:
            return create()
        raise missing_node(store, node, "array")
    if not isinstance(m, ArrayManifest):
        raise ValueError(
            f"{display!r} is {kind_phrase(m.kind)} node, not an array"
            + ("; pass component= to name an array inside it" if m.kind == "group" else "")
        )
    return open_handle(store, node, m, mode if mode == "r" else "r+", pin)
