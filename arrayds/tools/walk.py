"""The walk the tools share: every manifest at or below a node, parsed by its kind.

>>> import arrayds, numpy as np
>>> from arrayds.storage import get_store
>>> _ = arrayds.to_arrayrecord(np.arange(4), "memory://doc-walk", "g/x", chunks=2)
>>> [(item.node, item.kind.name) for item in walk(get_store("memory://doc-walk"), "")]
[('', 'group'), ('g', 'group'), ('g/x', 'array')]

With ``version=`` or ``as_of=`` it walks a version of the node's history, the nodes
below it as they were then (as :func:`arrayds.open` reads them):

>>> arrayds.open("memory://doc-walk", mode="r+").attrs["step"] = 2  # version 2 of the root
>>> _ = arrayds.to_arrayrecord(np.arange(2), "memory://doc-walk", "y", chunks=2)
>>> store = get_store("memory://doc-walk")
>>> [item.node for item in walk(store, "", version=1)], [item.node for item in walk(store, "")]
(['', 'g', 'g/x'], ['', 'g', 'g/x', 'y'])
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..abc.store import Store
from ..errors import CorruptionError
from ..nodes import commit
from ..nodes import registry as kinds
from ..nodes.names import check_component, join_component
from ..nodes.read import check_version_args, replaced_at
from ..nodes.registry import parse_node
from ..storage import get_store

__all__ = ["Item", "open_root", "walk"]


@dataclass
class Item:
    """One manifest met by :func:`walk`: ``node`` is its path from the store's root,
    ``raw`` the JSON (``None`` if unreadable), ``parsed`` the manifest object or the
    error that parsing raised, ``kind`` its record (``None`` if unreadable), ``source``
    ``""`` for the node's own manifest, else where the copy was ("snapshot in ...")."""

    node: str
    raw: dict[str, Any] | None
    parsed: Any
    kind: kinds.NodeKind | None = None
    source: str = ""


def _parse(node: str, raw: Any, what: str, source: str = "") -> Item:
    if not isinstance(raw, Mapping):
        return Item(node, None, CorruptionError(f"{what}: manifest is not an object"), None, source)
    try:
        parsed = parse_node(raw, what)
        kind = kinds.get(raw.get("kind"), what)
    except (CorruptionError, NotImplementedError, ValueError) as e:
        return Item(node, dict(raw), e, None, source)
    return Item(node, dict(raw), parsed, kind, source)


def walk(
    store: Store, node: str, *, version: int | None = None, as_of: datetime | None = None
) -> Iterator[Item]:
    """Every node at or below ``node`` (depth first, children sorted), with the
    manifests that nodes hold of their members (a group's xarray snapshot) right
    after the node that holds them. Unreadable manifests are items too (their
    ``parsed`` is the error); nothing below them is walked.

    ``version=N`` (a generation) or ``as_of=`` (a datetime; naive means UTC): that
    version of ``node``'s history (a ``ValueError`` naming the versions kept if it is
    not one of them), and below it every node as :func:`arrayds.open` reads the
    children of a group opened so (:func:`arrayds.nodes.read.read_pinned`): as of the moment
    the version stands for (``as_of``, or for ``version=N`` just before N + 1 was
    committed; their current state if N is the newest version). A node that had no
    version at that moment (created later) is left out."""
    check_version_args(version, as_of, "r", f"node {store.display(node)!r}")
    yield from _walk(store, node, version, as_of, top=True)


def _walk(
    store: Store, node: str, version: int | None, as_of: datetime | None, *, top: bool
) -> Iterator[Item]:
    try:
        nv = commit.read(store, node, version=version, as_of=as_of)
        raw = nv.raw
    except (CorruptionError, OSError) as e:
        yield Item(node, None, e)
        return
    except ValueError:
        if top:
            raise  # the version asked for is not kept
        return  # no version of this node at that moment: it did not exist yet
    if raw is None:
        return
    item = _parse(node, raw, f"node {store.display(node)!r}")
    yield item
    kind = item.kind
    if kind is None:
        return
    if kind.members is not None:
        source = f"snapshot in {store.display(node)!r}"
        for name, member in sorted(kind.members(item.parsed).items()):
            yield _parse(join_component(node, name), member, f"{source}, member {name!r}", source)
    if kind.children:
        # the children's moment, as arrayds.nodes.read.read_pinned pins it for Group.__getitem__
        moment = as_of
        if moment is None and version is not None:
            moment = replaced_at(store, node, nv.generation)
        for child in commit.child_nodes(store, node):
            yield from _walk(store, join_component(node, child), None, moment, top=False)


def open_root(
    url: Any,
    storage_options: Mapping[str, Any] | None,
    component: str | None,
    *,
    version: int | None = None,
    as_of: datetime | None = None,
) -> tuple[Store, str]:
    """The store of ``url`` and the checked ``component``; ``FileNotFoundError``
    naming the manifest if no node is there. ``version`` / ``as_of`` are checked
    (:func:`arrayds.nodes.read.check_version_args`: ``ValueError`` for both, ``TypeError``
    for a version that is not an int or an ``as_of`` that is not a datetime)."""
    store = get_store(os.fspath(url), storage_options)
    node = check_component(component)
    check_version_args(version, as_of, "r", f"node {store.display(node)!r}")
    if not commit.read(store, node).exists:
        where = repr(store.url) + (f" (component {node!r})" if node else "")
        key = commit.manifest_key(node)
        raise FileNotFoundError(
            2,
            f"no arrayds dataset at {where}: {store.url_of(key)} does not exist",
            store.display(node),
        )
    return store, node
