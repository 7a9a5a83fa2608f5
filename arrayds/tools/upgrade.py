"""``arrayds upgrade``: :func:`upgrade` stores every node of a dataset in the newest
manifest format version (docs/spec.md, "Format version 2").

A node keeps the format version it was created in: this release reads and writes
format 1 nodes as they are. Upgrading is one commit per node of the same logical
manifest (:func:`arrayds.nodes.commit.upgrade`): no shard is read or rewritten, and
readers see the node before or after, never a mix. Once a node is upgraded, an older
arrayds refuses it ("dataset format version 2 is newer than this arrayds supports
(1); upgrade arrayds"), so upgrade only once every reader runs this release.

>>> from arrayds.nodes import commit
>>> from arrayds.storage import get_store
>>> st = get_store("memory://doc-upgrade", None)
>>> _ = commit.commit(st, "", lambda b: {"format": "arrayds", "kind": "group",
...                   "attrs": {}}, write_id="w1", format_version=1)
>>> upgrade("memory://doc-upgrade"), upgrade("memory://doc-upgrade")
([''], [])
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from ..abc.store import Store
from ..nodes import commit, registry
from ..nodes import history as log
from ..nodes.names import join_component
from .walk import Item, open_root, walk

__all__ = ["upgrade"]


def _own_items(store: Store, node: str) -> list[Item]:
    """The own manifests at or below ``node`` (snapshot copies left out); the first
    one that cannot be read or is of a format this arrayds does not know raises."""
    out = []
    for item in walk(store, node):
        if item.source:
            continue
        if isinstance(item.parsed, BaseException):
            raise item.parsed
        out.append(item)
    return out


def _format_version(item: Item) -> int:
    v = item.raw.get("format_version") if item.raw is not None else None
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _summary(item: Item) -> tuple[str, ...]:
    """The segment summary keys the node's kind reads its shard list by."""
    kind = registry.find(item.raw.get("kind") if item.raw is not None else None)
    return kind.segment_summary if kind is not None else ("records",)


def _roll_forward(store: Store, node: str, raw: Mapping[str, Any]) -> None:
    """Complete the roll forward of the members the group ``raw`` (at ``node``)
    lists in its snapshot (docs/spec.md 10.2 step 5), top-down, before they are
    upgraded: an upgrade commit of a member whose own manifest is older than its
    snapshot copy would otherwise make the stale manifest the newer one. Members in
    the newest format already are not upgraded, so they are left to the next write."""
    snap = raw.get("snapshot")
    members = snap.get("members") if isinstance(snap, dict) else None
    if not isinstance(members, dict):
        return
    for name, entry in members.items():
        if not isinstance(name, str) or not isinstance(entry, dict):
            continue
        child = join_component(node, name)
        own = commit.read(store, child)
        if not own.exists or own.format_version < commit.NEWEST:  # it will be upgraded
            commit.put_if_newer(store, child, entry)
        if entry.get("kind") == "group":
            _roll_forward(store, child, entry)


def upgrade(
    url: str | os.PathLike[str],
    component: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    dry_run: bool = False,
) -> list[str]:
    """Store every node at or below ``component`` of the dataset at ``url`` in the
    newest format version; returns the nodes upgraded (their paths from the root,
    ``""`` for the root, parents first), or with ``dry_run`` those that would be.

    Each node is one commit of the same manifest (no shard is touched); nodes in the
    newest format already are left alone, so running it again upgrades nothing,
    except that a shard list stored before the segment summaries its kind reads by
    is written anew with them (docs/spec.md 14.3.1), the same entries. A
    group's pending roll forward (an interrupted dataset write) is completed before
    its members are upgraded.
    Every manifest is read before anything is written: one that cannot be read, or
    of a newer format, raises and nothing is changed. A node another writer commits
    to while it is upgraded raises :class:`arrayds.errors.CommitConflictError` (the
    nodes before it are upgraded; run it again). Older arrayds releases cannot read
    an upgraded node: upgrade once every reader of the dataset runs this release.

    >>> from arrayds.nodes import commit
    >>> from arrayds.storage import get_store
    >>> st = get_store("memory://doc-upgrade-fn", None)
    >>> for node in ("", "a", "b"):
    ...     _ = commit.commit(st, node, lambda b: {"format": "arrayds", "kind": "group",
    ...                       "attrs": {}}, write_id="w" + node, format_version=1)
    >>> upgrade("memory://doc-upgrade-fn", "a", dry_run=True)
    ['a']
    >>> upgrade("memory://doc-upgrade-fn")
    ['', 'a', 'b']
    >>> commit.read(st, "b").format_version
    2
    """
    store, node = open_root(url, storage_options, component)
    items = _own_items(store, node)
    if dry_run:
        return [
            it.node
            for it in items
            if _format_version(it) < commit.NEWEST
            or log.needs_index(commit.read(store, it.node).head or {}, _summary(it))
        ]
    done = []
    for item in items:
        if commit.upgrade(store, item.node, _summary(item)):
            done.append(item.node)
        raw = commit.read(store, item.node).raw
        if raw is not None and raw.get("kind") == "group":
            _roll_forward(store, item.node, raw)
    return done
