"""The one commit path: how any write of any node kind becomes visible.

Every write of arrayds (``a[...] = v``, ``append``, attrs, a dask or Beam write, records,
ragged arrays, an xarray snapshot, a DataTree, a group or array creation, compaction)
ends in :func:`commit`:

1. read the node's manifest with its storage version (:func:`read`);
2. ``check`` that the node is as the write planned it (else the write fails and its
   shards are removed: nothing of it becomes visible);
3. ``build`` the next manifest from what is there; :func:`commit` sets its
   ``generation`` (one more than the current one, or more if ``build`` asks) and its
   ``commit`` (the write id);
4. create the missing groups above the node (:func:`ensure_parents`), make the names of
   the files the new manifest adds durable (:meth:`Store.flush`), and replace the
   manifest with one conditional put (:meth:`Store.put_if_match` on the version read in
   step 1): the compare-and-swap. If another writer committed in between, the put is
   refused: a write whose changes commute (an append) starts again at step 1, up to
   ``retries`` times; any other write raises :class:`CommitConflictError`;
5. after the commit, best effort: ``after`` (a kind's own follow-up, e.g. the xarray
   roll forward), then remove what only the replaced manifest used (``replaces``).

A write that commits again with the same write id (a dask task retried after its
worker was lost once the commit had landed) finds its own commit and returns it.

>>> from arrayds.store import Store
>>> st = Store("memory://commit-doc")
>>> m = commit(st, "g", lambda base: {"format": "arrayds", "format_version": 1,
...                                 "kind": "group", "attrs": {}}, write_id="w1")
>>> m["generation"], read(st, "g").commit
(1, 'w1')
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..abc.store import ABSENT, Store, Version
from ..errors import CommitConflictError, PreconditionFailedError
from ..store import (
    MANIFEST,
    dump_json,
    is_reserved_name,
    join_component,
    new_write_id,
    parse_json,
)

__all__ = [
    "NodeVersion",
    "child_nodes",
    "commit",
    "ensure_parents",
    "is_node_file",
    "manifest_key",
    "put_if_newer",
    "read",
    "referenced_files",
    "replace",
    "remove_replaced",
]

Check = Callable[["NodeVersion"], None]
Build = Callable[["NodeVersion"], Mapping[str, Any]]
After = Callable[["NodeVersion", dict[str, Any]], None]


def manifest_key(node: str) -> str:
    """The key of the manifest of ``node``.

    >>> manifest_key(""), manifest_key("a/b")
    ('arrayds.json', 'a/b/arrayds.json')
    """
    return f"{node}/{MANIFEST}" if node else MANIFEST


@dataclass(frozen=True)
class NodeVersion:
    """A node's manifest as one read saw it, with the storage version of those bytes
    (what a commit's conditional put requires to be still there)."""

    store: Store
    node: str
    raw: dict[str, Any] | None
    """The manifest (JSON object), or ``None`` if the node has none."""
    version: Version

    @property
    def exists(self) -> bool:
        return self.raw is not None

    @property
    def kind(self) -> str | None:
        kind = self.raw.get("kind") if self.raw is not None else None
        return kind if isinstance(kind, str) else None

    @property
    def generation(self) -> int:
        """The manifest's generation (0 when there is none or it is not a count)."""
        return generation_of(self.raw)

    @property
    def commit(self) -> str | None:
        c = self.raw.get("commit") if self.raw is not None else None
        return c if isinstance(c, str) else None

    @property
    def stamp(self) -> tuple[int, str] | None:
        """(generation, commit), or ``None`` for a missing node: what a write that
        planned from this read expects to find at its commit."""
        return None if self.raw is None else (self.generation, self.commit or "")

    @property
    def what(self) -> str:
        return self.store.display(self.node)


def generation_of(raw: Mapping[str, Any] | None) -> int:
    """The ``generation`` of a manifest (0 for none or a value that is not a count)."""
    g = raw.get("generation") if raw is not None else None
    return g if isinstance(g, int) and not isinstance(g, bool) and g >= 0 else 0


def read(store: Store, node: str) -> NodeVersion:
    """The manifest of ``node`` and its version. A manifest that is not a JSON object
    raises :class:`arrayds.CorruptionError` naming the node."""
    data, version = store.get_versioned(manifest_key(node))
    raw = None if data is None else parse_json(data, store.display(node))
    return NodeVersion(store, node, raw, version if data is not None else ABSENT)


def referenced_files(manifest: Mapping[str, Any]) -> set[str]:
    """The files (``/``-separated, relative to the node) a manifest names: its
    ``shards`` and those of a group snapshot's members (``<member>/...``). Every node
    kind lists its files as ``{"shards": [{"path": ...}, ...]}``.

    >>> sorted(referenced_files({"shards": [{"path": "c/a-0.array_record"}],
    ...     "snapshot": {"members": {"x": {"shards": [{"path": "c/b-0.array_record"}]}}}}))
    ['c/a-0.array_record', 'x/c/b-0.array_record']
    """
    out: set[str] = set()
    shards = manifest.get("shards")
    if isinstance(shards, list):
        for s in shards:
            if isinstance(s, dict) and isinstance(s.get("path"), str):
                out.add(s["path"])
    snap = manifest.get("snapshot")
    members = snap.get("members") if isinstance(snap, dict) else None
    if isinstance(members, dict):
        for name, member in members.items():
            if isinstance(name, str) and isinstance(member, dict):
                out |= {f"{name}/{q}" for q in referenced_files(member)}
    return out


def is_node_file(rel: str) -> bool:
    """Whether ``rel`` (a path a manifest names) is a plain file inside its node: no
    empty, ``.`` or ``..`` segment, no backslash and no reserved name (the manifest,
    lock and temporary files). Only such files are removed after a commit.

    >>> is_node_file("c/a-0.array_record"), is_node_file("arrayds.json"), is_node_file("../x")
    (True, False, False)
    """
    return (
        bool(rel)
        and "\\" not in rel
        and not rel.startswith("/")
        and all(seg not in ("", ".", "..") and not is_reserved_name(seg) for seg in rel.split("/"))
    )


def _key(node: str, rel: str) -> str:
    """The key of the file ``rel`` (a checked manifest path) inside ``node``."""
    return f"{node}/{rel}" if node else rel


def _discard(store: Store, node: str, written: Iterable[str]) -> None:
    """Remove the files a failed write added, except any that the node's manifest now
    references (never delete committed data). Best effort: leftovers are orphans,
    which no reader sees and ``arrayds gc`` removes."""
    written = set(written)
    if not written:
        return
    try:
        now = read(store, node).raw
        keep = referenced_files(now) if now is not None else set()
        store.delete(sorted(_key(node, p) for p in written - keep))
    except Exception:  # noqa: BLE001 - best effort
        pass


def commit(
    store: Store,
    node: str,
    build: Build,
    *,
    write_id: str,
    check: Check | None = None,
    written: Iterable[str] = (),
    retries: int = 0,
    parents: bool = True,
    replaces: bool = False,
    clear: Iterable[str] = (),
    after: After | None = None,
    what: str | None = None,
) -> dict[str, Any]:
    """Commit the next manifest of ``node`` (see the module docstring); returns it.

    ``build(base)`` returns the new manifest from the current one (``base``);
    ``check(base)`` raises if the node is not as the write expects; ``written``: the
    files (relative to the node) the write added, removed if the write fails;
    ``retries``: how often a refused conditional put is retried from a fresh read
    (only for writes that commute, such as appends); ``parents``: create the missing
    groups above the node; ``replaces``: after the commit, remove what only the old
    manifest used (:func:`remove_replaced`), and with ``clear`` also every other file
    of those folders of the node (a create replacing a node: its uncommitted leftovers
    go too); ``after(base, new)``: a follow-up run once the commit landed, whose
    failure is the caller's to report.
    """
    written = tuple(written)
    clear = tuple(clear)
    label = what or f"node {store.display(node)!r}"
    attempt = 0
    while True:
        base = read(store, node)
        if base.commit == write_id and base.raw is not None:
            return base.raw  # this write committed already (a retried task)
        try:
            if check is not None:
                check(base)
            new = dict(build(base))
        except BaseException:
            _discard(store, node, written)
            raise
        new["generation"] = max(base.generation + 1, generation_of(new))
        new["commit"] = write_id
        data = dump_json(new)
        if parents and node:
            ensure_parents(store, node)
        added = referenced_files(new) - (referenced_files(base.raw) if base.raw else set())
        store.flush(_key(node, p) for p in sorted(added))
        try:
            store.put_if_match(manifest_key(node), data, base.version)
        except PreconditionFailedError as e:
            if attempt < retries:
                attempt += 1
                time.sleep(random.uniform(0.0, 0.01 * attempt))
                continue
            _discard(store, node, written)
            raise _conflict(label, base, e) from None
        if after is not None:
            after(base, new)
        if replaces and base.raw is not None:
            remove_replaced(store, node, base.raw, new, folders=clear)
        return new


def _conflict(label: str, base: NodeVersion, e: PreconditionFailedError) -> CommitConflictError:
    """The error of a commit whose conditional put was refused (``e``: the store's
    words for it, e.g. "conditional PUT refused")."""
    if base.raw is None:
        happened = "another writer created this node while this write ran"
    else:
        happened = (
            f"another writer committed to it while this write committed (generation "
            f"{base.generation + 1} was taken)"
        )
    return CommitConflictError(
        f"{label}: {happened}; nothing of this write is visible ({e.strerror or e})"
    )


def _is_empty_group(manifest: Mapping[str, Any]) -> bool:
    """The empty generation-1 group that creates a missing parent: if a group is there
    already, the goal is met."""
    return (
        manifest.get("kind") == "group"
        and manifest.get("generation") == 1
        and not manifest.get("attrs")
        and "snapshot" not in manifest
    )


def replace(store: Store, node: str, manifest: Mapping[str, Any]) -> bool:
    """Replace the manifest of ``node`` with ``manifest`` exactly as given (its own
    ``generation`` and ``commit``), as one compare-and-swap on the version read: a
    rewrite of a manifest (tools, tests of forged manifests). Returns whether it wrote.

    :class:`CommitConflictError` if the manifest there has the same or a larger
    generation, or if another writer replaced it between the read and the put. The
    names of the files it adds are made durable first (:meth:`Store.flush`). An
    empty generation-1 group (a missing parent) over a group writes nothing: the goal
    is met.

    >>> from arrayds.store import Store
    >>> st = Store("memory://commit-replace-doc")
    >>> replace(st, "", {"kind": "group", "generation": 3, "attrs": {"a": 1}})
    True
    >>> replace(st, "", {"kind": "group", "generation": 2})
    Traceback (most recent call last):
    ...
    arrayds.errors.CommitConflictError: memory://commit-replace-doc: another writer ...
    """
    base = read(store, node)
    cur = base.raw.get("generation") if base.raw is not None else None
    want = manifest.get("generation")
    counted = isinstance(cur, int) and not isinstance(cur, bool) and isinstance(want, int)
    if counted and want <= cur:
        if _is_empty_group(manifest) and base.kind == "group":
            return False
        raise CommitConflictError(
            f"{base.what}: another writer committed generation {cur} while "
            f"this write prepared generation {want}; nothing of this write is visible"
        )
    added = referenced_files(manifest) - (referenced_files(base.raw) if base.raw else set())
    store.flush(_key(node, p) for p in sorted(added))
    try:
        store.put_if_match(manifest_key(node), dump_json(manifest), base.version)
    except PreconditionFailedError as e:
        if base.raw is None and _is_empty_group(manifest) and read(store, node).kind == "group":
            return False
        raise _conflict(f"{base.what}", base, e) from None
    return True


def put_if_newer(store: Store, node: str, manifest: Mapping[str, Any], tries: int = 8) -> bool:
    """Write ``manifest`` at ``node`` unless the manifest there has the same or a
    larger generation (compare-and-swap, retried while others race): the roll forward
    of members a group snapshot lists. Returns whether it wrote."""
    data = dump_json(manifest)
    want = generation_of(manifest)
    for _ in range(tries):
        base = read(store, node)
        if base.raw is not None and base.generation >= want:
            return False
        try:
            store.put_if_match(manifest_key(node), data, base.version)
            return True
        except PreconditionFailedError:
            continue
    return False


def _group_json() -> dict[str, Any]:
    from ..manifest import GroupManifest

    return GroupManifest().to_json()


def ensure_parents(store: Store, node: str) -> None:
    """Create the missing groups above ``node`` (the root included): each with one
    conditional put that creates it only if nothing is there; a group another writer
    created first meets the goal. A node on the way that is not a group is a
    ``ValueError`` (nothing is written below it)."""
    if not node:
        return
    parts = node.split("/")
    for i in range(len(parts)):
        parent = "/".join(parts[:i])
        base = read(store, parent)
        if base.raw is None:
            doc = dict(_group_json(), generation=1, commit=new_write_id())
            try:
                store.put_if_match(manifest_key(parent), dump_json(doc), ABSENT)
                continue
            except PreconditionFailedError:
                base = read(store, parent)
        if base.kind != "group":
            raise ValueError(
                f"cannot create {store.display(node)!r}: {store.display(parent)!r} is "
                f"{_kind_phrase(base.kind)} node, not a group"
            )


def check_parents(store: Store, node: str) -> None:
    """``ValueError`` if a node above ``node`` exists and is not a group (read only:
    used before a write starts, so it fails before any shard is written)."""
    parts = node.split("/") if node else []
    for i in range(len(parts)):
        parent = "/".join(parts[:i])
        base = read(store, parent)
        if base.raw is None:
            return
        if base.kind != "group":
            raise ValueError(
                f"cannot create {store.display(node)!r}: {store.display(parent)!r} is "
                f"{_kind_phrase(base.kind)} node, not a group"
            )


def _kind_phrase(kind: str | None) -> str:
    kind = kind or "an unknown"
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


def child_nodes(store: Store, node: str) -> list[str]:
    """The names (sorted) of the folders directly below ``node`` that hold a manifest."""
    return [c for c in store.list_dir(node) if store.exists(manifest_key(join_component(node, c)))]


def remove_replaced(
    store: Store,
    node: str,
    old: Mapping[str, Any],
    new: Mapping[str, Any] | None,
    *,
    folders: Iterable[str] = (),
) -> None:
    """After a commit replaced ``old`` with ``new`` at ``node``: remove the files only
    ``old`` referenced and, if ``old`` was a group, its child nodes that ``new`` does
    not use. ``folders`` (relative to the node): also remove every other file below
    them that ``new`` does not reference (files of writes that never committed). Best
    effort: what is left is an orphan (no reader sees it; ``arrayds gc`` removes it).
    """
    keep = referenced_files(new) if new is not None else set()
    try:
        # a forged old manifest may name any key: only plain files inside the node go
        doomed = {p for p in referenced_files(old) - keep if is_node_file(p)}
        start = len(node) + 1 if node else 0
        for folder in folders:
            if any(p.startswith(folder + "/") for p in keep):
                doomed |= {k[start:] for k, _, _ in store.list(_key(node, folder))} - keep
            else:  # nothing of it is kept: the folder goes
                store.delete_prefix(_key(node, folder))
        if doomed:
            store.delete(sorted(_key(node, p) for p in doomed))
        if old.get("kind") != "group":
            return
        used = {p.split("/", 1)[0] for p in keep}
        into_group = new is not None and new.get("kind") == "group"
        for child in child_nodes(store, node):
            folder = join_component(node, child)
            if child not in used:
                store.delete_prefix(folder)
            elif not into_group:
                # an old child node named like the folder of the new node's files
                start = len(node) + 1 if node else 0
                store.delete([k for k, _, _ in store.list(folder) if k[start:] not in keep])
    except Exception:  # noqa: BLE001 - best effort
        pass
