"""The walk the tools share: every manifest at or below a node, parsed by its kind.

>>> import arrayds, numpy as np
>>> from arrayds.storage import get_store
>>> _ = arrayds.to_arrayrecord(np.arange(4), "memory://doc-walk", "g/x", chunks=2)
>>> [(item.node, item.kind.name) for item in walk(get_store("memory://doc-walk"), "")]
[('', 'group'), ('g', 'group'), ('g/x', 'array')]
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..abc.store import Store
from ..errors import CorruptionError
from ..manifest import parse_node
from ..nodes import commit, kinds
from ..storage import get_store
from ..store import check_component, join_component

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


def walk(store: Store, node: str) -> Iterator[Item]:
    """Every node at or below ``node`` (depth first, children sorted), with the
    manifests that nodes hold of their members (a group's xarray snapshot) right
    after the node that holds them. Unreadable manifests are items too (their
    ``parsed`` is the error); nothing below them is walked."""
    try:
        raw = commit.read(store, node).raw
    except (CorruptionError, OSError) as e:
        yield Item(node, None, e)
        return
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
        for child in commit.child_nodes(store, node):
            yield from walk(store, join_component(node, child))


def open_root(
    url: Any, storage_options: Mapping[str, Any] | None, component: str | None
) -> tuple[Store, str]:
    """The store of ``url`` and the checked ``component``; ``FileNotFoundError``
    naming the manifest if no node is there."""
    store = get_store(os.fspath(url), storage_options)
    node = check_component(component)
    if not commit.read(store, node).exists:
        where = repr(store.url) + (f" (component {node!r})" if node else "")
        key = commit.manifest_key(node)
        raise FileNotFoundError(
            2,
            f"no arrayds dataset at {where}: {store.url_of(key)} does not exist",
            store.display(node),
        )
    return store, node
