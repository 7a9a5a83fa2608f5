"""One atomic commit for a group of arrays (docs/spec.md, "Dataset snapshots").

Every node has its own manifest, and replacing one file is atomic; a dataset of
several variables (arrays under one group) needs more: an append along ``time`` must
become visible for ``time``, ``t2m`` and ``precip`` at once. The group's manifest is
the commit point:

1. every shard of every variable is written first (new, unique names);
2. the group manifest is replaced by one holding a **snapshot**: the full manifest of
   every member array, the commit id and the global attributes — one atomic write;
3. afterwards each member's own ``arrayds.json`` is brought up to date (*roll
   forward*), so the arrays also read correctly through ``arrayds.open_array``.

Readers (:func:`read_state`) read the group manifest, then the members' manifests,
then the group manifest again (repeating if it changed in between). A member's own
manifest wins when its ``generation`` is at least the snapshot's (it is up to date,
or was changed later through the array API); otherwise the roll forward is still
pending and the snapshot's copy is used. A child array not in the snapshot counts
only if its commit id is newer than the snapshot's (it was added later); older ones
are leftovers of a replaced dataset. A reader therefore sees the state before a
commit or after it, never a mix.

A member array's shard list stored in segments (docs/spec.md 14.3), in its own
manifest or in the snapshot's copy, is read lazily (a
:class:`arrayds.nodes.history.ShardLog`): opening a dataset reads the manifests'
heads, and a read loads the segments its chunks lie in. A commit writes each
member's list as a change of the list it read (:func:`member_entry`: the entries an
append adds, nothing for an untouched member), so neither the snapshot nor the roll
forward reads the entries stored before (docs/spec.md 10.2).

A DataTree commit (:mod:`arrayds.xarray.tree`) also lists *subgroups* in the tree
root's snapshot, each a group manifest with its own snapshot: reading any group
therefore resolves its manifest from the root down, at each level the newer of the
node's own manifest and the copy the level above lists (docs/spec.md section 10.4).

>>> from arrayds.storage import get_store
>>> from arrayds.kinds.array.manifest import ArrayManifest
>>> st = get_store("memory://doc-state")
>>> m = ArrayManifest.new((3,), "i4", ((3,),), dims=("x",))
>>> _ = commit_snapshot(st, "", expected=read_state(st, ""), members={"v": m},
...                     changed={"v"}, attrs={"title": "t"}, write_id=new_write_id())
>>> s = read_state(st, "")
>>> sorted(s.members), s.attrs, s.members["v"].generation
(['v'], {'title': 't'}, 1)
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..abc.store import ABSENT, Store
from ..errors import CommitConflictError, CorruptionError
from ..kinds.array.manifest import ArrayManifest, ShardList
from ..nodes import commit as node_commit
from ..nodes.commit import Merge, NodeVersion, generation_of
from ..nodes.history import Appended, ShardLog, kept
from ..nodes.names import FORMAT, FORMAT_VERSION, is_reserved_name, join_component, new_write_id
from ..nodes.read import read_pinned
from ..nodes.registry import parse_node
from ..nodes.shards import io_pool

__all__ = [
    "SNAPSHOT",
    "DatasetState",
    "Rebase",
    "Snapshot",
    "chain_stamps",
    "commit_snapshot",
    "copy_logs",
    "group_entry",
    "group_json",
    "member_entry",
    "new_write_id",
    "newer",
    "next_generation",
    "read_state",
    "forget_histories",
    "remove_replaced_members",
    "roll_forward",
    "run_all",
]

SNAPSHOT = "snapshot"
"""The key of the group manifest holding the snapshot."""

Stamp = tuple[int, str] | None
"""A manifest's ``(generation, commit)`` as read (:attr:`NodeVersion.stamp`), or
``None`` for a node without one."""


@dataclass
class DatasetState:
    """What a reader sees at one moment: the node's kind, the group's raw manifest,
    the member arrays (resolved), the global attributes (raw JSON) and the
    (generation, commit) of every child manifest as read (for conflict checks)."""

    kind: str | None
    root: dict[str, Any] | None
    members: dict[str, ArrayManifest] = field(default_factory=dict)
    attrs: dict[str, Any] = field(default_factory=dict)
    children: dict[str, Stamp] = field(default_factory=dict)
    stale: set[str] = field(default_factory=set)
    others: list[str] = field(default_factory=list)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)
    own: Stamp = None
    chain: list[Stamp] = field(default_factory=list)
    moment: datetime | None = None
    """For a version of the history: the moment its children were read as of."""

    @property
    def exists(self) -> bool:
        return self.root is not None

    @property
    def version(self) -> tuple[Any, Any] | None:
        if self.root is None:
            return None
        return (self.root.get("generation"), self.root.get("commit"))


def group_entry(raw: Mapping[str, Any] | None, name: str) -> dict[str, Any] | None:
    """The group manifest that the snapshot of the group manifest ``raw`` lists for
    its child ``name`` (a DataTree commit, docs/spec.md section 10.4), or ``None``."""
    snap = raw.get(SNAPSHOT) if isinstance(raw, Mapping) else None
    members = snap.get("members") if isinstance(snap, dict) else None
    entry = members.get(name) if isinstance(members, dict) else None
    if isinstance(entry, dict) and entry.get("kind") == "group":
        return entry
    return None


def newer(own: dict[str, Any] | None, copy: dict[str, Any] | None) -> dict[str, Any] | None:
    """A node's own manifest, unless the copy an ancestor's snapshot lists is newer
    (a larger ``generation``: its roll forward is pending)."""
    if copy is None or (own is not None and generation_of(own) >= generation_of(copy)):
        return own
    return copy


def _read_all(store: Store, nodes: list[str]) -> list[NodeVersion]:
    """The manifests of ``nodes`` (concurrently on an object store)."""
    if store.local or len(nodes) <= 1:
        return [node_commit.read(store, n) for n in nodes]
    return list(io_pool().map(lambda n: node_commit.read(store, n), nodes))


def _chain(store: Store, node: str) -> list[NodeVersion]:
    """The manifests of the root, every group down to ``node`` and ``node`` itself,
    as stored (one read each; the root, ``node == ""``, is one read)."""
    segs = node.split("/") if node else []
    paths = [""] + ["/".join(segs[: i + 1]) for i in range(len(segs))]
    return _read_all(store, paths)


def _effective(node: str, reads: list[NodeVersion]) -> dict[str, Any] | None:
    """The effective manifest of ``node`` from the manifests :func:`_chain` read: at
    each level the newer of its own manifest and the copy in the level above's
    snapshot."""
    segs = node.split("/") if node else []
    eff = reads[0].lazy_raw
    for seg, own in zip(segs, reads[1:], strict=True):
        eff = newer(own.lazy_raw, group_entry(eff, seg))
    return eff


def _resolve(store: Store, node: str) -> tuple[list[Stamp], dict[str, Any] | None]:
    """The stamps of the manifests of the root, every group down to ``node`` and
    ``node`` itself (for the re-read check) and the effective manifest of ``node``
    (:func:`_effective`)."""
    reads = _chain(store, node)
    return [r.stamp for r in reads], _effective(node, reads)


def chain_stamps(store: Store, node: str) -> list[Stamp]:
    """The ``(generation, commit)`` of the manifests of the root and every group down
    to ``node``: unchanged between two calls, no commit at or above ``node`` happened.
    Only the heads are read (no shard log is resolved)."""
    return [r.stamp for r in _chain(store, node)]


def _read_children(store: Store, node: str, names: Iterable[str]) -> dict[str, NodeVersion]:
    names = list(names)
    reads = _read_all(store, [join_component(node, n) for n in names])
    return dict(zip(names, reads, strict=True))


def read_state(
    store: Store,
    node: str,
    max_tries: int = 8,
    *,
    version: int | None = None,
    as_of: datetime | None = None,
) -> DatasetState:
    """The consistent state of the group ``node`` (see the module docstring); with
    ``version``/``as_of``, of that version of its history (:func:`_state_at`)."""
    what = f"dataset {store.display(node)!r}"
    if version is not None or as_of is not None:
        return _state_at(store, node, version, as_of, what)
    chain, root = _resolve(store, node)
    for _ in range(max_tries):
        if root is None:
            return DatasetState(kind=None, root=None, own=chain[-1], chain=chain)
        kind = root.get("kind")
        if kind != "group":
            return DatasetState(kind=kind, root=root, own=chain[-1], chain=chain)
        snap, snap_members, folders = _listed(store, node, root)
        children = _read_children(store, node, [*snap_members, *folders])
        names = [n for n in children if n in snap_members or children[n].exists]
        again = _chain(store, node)
        if [r.stamp for r in again] == chain:
            break
        chain, root = [r.stamp for r in again], _effective(node, again)
    else:  # pragma: no cover - needs a writer committing faster than we read
        raise CommitConflictError(f"{what}: the dataset kept changing while it was read")
    return _assemble(what, root, chain, children, names, snap_members, snap)


def _listed(
    store: Store, node: str, root: Mapping[str, Any]
) -> tuple[Any, dict[str, Any], list[str]]:
    """The group manifest's snapshot, the members it lists (in the order the
    variables were written) and the node's other folders that may hold a child
    (each child's manifest is read anyway, so one listing of the folders and those
    reads find the child nodes: :func:`arrayds.nodes.commit.child_nodes` would read
    each one twice)."""
    snap = root.get(SNAPSHOT)
    members: dict[str, Any] = {}
    if isinstance(snap, dict) and isinstance(snap.get("members"), dict):
        members = snap["members"]
    folders = sorted(f for f in set(store.list_dir(node)) - set(members) if not is_reserved_name(f))
    return snap, members, folders


def _state_at(
    store: Store,
    node: str,
    version: int | None,
    as_of: datetime | None,
    what: str,
    max_tries: int = 8,
) -> DatasetState:
    """The state of version ``version`` (or the one at ``as_of``) of the node: its
    own manifest of then (versions are immutable: one read), the members its
    snapshot lists as listed, the other children as of the moment that version
    stands for (:func:`arrayds.nodes.read.read_pinned`). A version that is the
    current one when it is read stands for "now": its children are read as they
    are, and the read counts only if the node is still at that version afterwards
    (as :func:`read_state` checks); else a writer committed in between, the version
    is now a kept one with a moment of its own, and it is read again."""
    for _ in range(max_tries):
        nv = node_commit.read(store, node, version=version, as_of=as_of)
        root, chain = nv.lazy_raw, [nv.stamp]
        if root is None or root.get("kind") != "group":
            kind = root.get("kind") if root is not None else None
            return DatasetState(kind=kind, root=root, own=chain[-1], chain=chain, moment=as_of)
        moment = as_of
        if moment is None:
            pin = read_pinned(store, node, version=nv.generation)[1]
            moment = pin.children_as_of if pin is not None else None
        snap, snap_members, folders = _listed(store, node, root)

        def child(name: str, moment: datetime | None = moment) -> NodeVersion:
            n = join_component(node, name)
            if moment is None:
                return node_commit.read(store, n)
            try:
                return node_commit.read(store, n, as_of=moment)
            except ValueError:  # no version of it then
                return NodeVersion(store, n, None, ABSENT)

        children = {n: child(n) for n in [*snap_members, *folders]}
        if moment is not None or node_commit.read(store, node).generation == nv.generation:
            break
    else:  # pragma: no cover - needs a writer committing faster than we read
        raise CommitConflictError(f"{what}: the dataset kept changing while it was read")
    names = [n for n in children if n in snap_members or children[n].exists]
    state = _assemble(what, root, chain, children, names, snap_members, snap)
    state.moment = moment
    return state


def _assemble(
    what: str,
    root: dict[str, Any],
    chain: list[Stamp],
    children: dict[str, NodeVersion],
    names: list[str],
    snap_members: dict[str, Any],
    snap: Any,
) -> DatasetState:
    """The state of a group whose manifest ``root`` and ``children`` were read."""
    state = DatasetState(kind="group", root=root, own=chain[-1], chain=chain)
    attrs = root.get("attrs", {})
    state.attrs = dict(attrs) if isinstance(attrs, dict) else {}
    snap_commit = str(snap.get("commit", "")) if isinstance(snap, dict) else None
    tree = isinstance(snap, dict) and snap.get("tree") is True
    for name in names:
        state.children[name] = children[name].stamp
        entry = group_entry(root, name)
        if entry is not None:  # a subgroup of a DataTree commit
            eff = newer(children[name].lazy_raw, entry)
            if eff is not None and eff.get("kind") == "group":
                state.groups[name] = eff
                state.others.append(name)
                continue
            # replaced later (a larger generation) by a node of another kind: that
            # node is read as a child the snapshot does not list
        child: Any = None
        in_snap = snap_members.get(name) if entry is None else None
        head = children[name].head
        raw: Any = None
        if not isinstance(in_snap, dict) or (
            head is not None and generation_of(head) >= generation_of(in_snap)
        ):  # else its roll forward is pending: the snapshot's copy is used
            # a long shard list (an array's, a subgroup's members') loads when read
            raw = children[name].lazy_raw
        if raw is not None:
            try:
                child = parse_node(raw, f"{what} member {name!r}")
            except (CorruptionError, NotImplementedError):
                if name not in snap_members:
                    raise
                child = None
        if in_snap is not None:
            m_s = ArrayManifest.from_json(in_snap, f"{what} snapshot of {name!r}")
            if isinstance(child, ArrayManifest) and child.generation >= m_s.generation:
                state.members[name] = child
            else:
                state.members[name] = m_s
                state.stale.add(name)
        elif isinstance(child, ArrayManifest):
            if snap_commit is None or child.commit > snap_commit:
                state.members[name] = child
        elif child is not None:
            state.others.append(name)
            if (
                isinstance(raw, dict)
                and raw.get("kind") == "group"
                and (not tree or str(raw.get("commit", "")) > str(snap_commit))
            ):
                state.groups[name] = raw
    return state


def group_json(
    generation: int, write_id: str, attrs: Mapping[str, Any], members: Mapping[str, Any]
) -> dict[str, Any]:
    """A group manifest at ``generation`` whose snapshot lists ``members`` (JSON)."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": "group",
        "generation": generation,
        "commit": write_id,
        "attrs": dict(attrs),
        SNAPSHOT: {"commit": write_id, "members": dict(members)},
    }


def next_generation(state: DatasetState, name: str) -> int:
    """The generation a rewritten child ``name`` of the group read as ``state`` needs:
    above its own manifest's and above any copy the group's snapshot holds (of an
    array, or of a group a DataTree commit listed). The snapshot's own rule: a
    member's copy in the snapshot must win over its own manifest until rolled
    forward (:func:`newer`)."""
    g = 0
    st = state.children.get(name)
    if st is not None:
        g = st[0]
    if name in state.members:
        g = max(g, state.members[name].generation)
    if name in state.groups:
        g = max(g, generation_of(state.groups[name]))
    return g + 1


def check_unchanged(
    base: NodeVersion, expected: Stamp, children: Mapping[str, Stamp], what: str
) -> None:
    """:class:`CommitConflictError` unless the group manifest ``base`` (as the commit
    read it) and the manifests of its ``children`` (name -> stamp) still have the
    stamps a write planned from (``expected`` for the group)."""
    if base.stamp != expected:
        raise CommitConflictError(
            f"{what}: another writer committed to the dataset after this write started; "
            f"nothing of this write is visible"
        )
    current = _read_children(base.store, base.node, sorted(children))
    for name, version in current.items():
        if version.stamp != children[name]:
            raise CommitConflictError(
                f"{what}: variable {name!r} was changed by another writer after this write "
                f"started; nothing of this write is visible"
            )


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
POOL_THREADS = 8
"""Threads that run the independent small writes of one dataset commit at once (its
shard files, the roll forward of its members): each mostly waits for storage."""


def run_all(calls: Sequence[Callable[[], Any]]) -> list[Any]:
    """The results of ``calls`` (in order), run at once on a small per-process pool
    (one call runs here). Every call finishes before the first error, if any, is
    raised."""
    global _pool
    if len(calls) <= 1:
        return [c() for c in calls]
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="arrayds-xr")
        pool = _pool
    futures = [pool.submit(c) for c in calls]
    wait(futures)
    return [f.result() for f in futures]


def _forget_pool_after_fork() -> None:
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_after_fork)


def roll_forward(
    store: Store,
    node: str,
    doc: Mapping[str, Any],
    names: Iterable[str] | None = None,
    files_id: str | None = None,
) -> None:
    """Bring the own manifest of each member that the snapshot of the committed group
    manifest ``doc`` (at ``node``) lists up to date (all of them, or ``names``), with
    :func:`arrayds.nodes.commit.put_if_newer`, top-down: a subgroup's manifest before
    its members'. A member whose own manifest is as new or newer stays as it is. The
    write is committed already, so a failure is a warning, not the write's failure:
    readers use the snapshot, and the next write to the group rolls forward again. It
    runs in the commit of ``doc``, which holds the pending marker of its write id
    (:mod:`arrayds.nodes.pending`): the segments it writes are named after that id
    (``files_id``, default ``doc``'s ``commit``)."""
    files_id = files_id or (doc.get("commit") if isinstance(doc.get("commit"), str) else None)
    members = (doc.get(SNAPSHOT) or {}).get("members") or {}
    todo = [(n, e) for n, e in members.items() if names is None or n in names]

    def one(name: str, entry: Mapping[str, Any]) -> Exception | None:
        child = join_component(node, name)
        try:
            node_commit.put_if_newer(store, child, entry, files_id=files_id)
        except Exception as e:  # noqa: BLE001
            return e
        return None

    # the members are independent nodes: their manifests are written at once
    errors = run_all([functools.partial(one, n, e) for n, e in todo])
    for (name, entry), e in zip(todo, errors, strict=True):
        if e is not None:
            warnings.warn(
                f"{store.display(node)!r}: committed, but the manifest of member {name!r} "
                f"could not be brought up to date ({type(e).__name__}: {e}); readers are "
                f"not affected, and the next write to the group retries",
                RuntimeWarning,
                stacklevel=2,
            )
        if entry.get("kind") == "group":  # top-down: its members once it is written
            roll_forward(store, join_component(node, name), entry, files_id=files_id)


def forget_histories(store: Store, node: str, members: Iterable[str]) -> None:
    """The history of the group ``node`` and of its ``members`` is removed (a dataset
    replaced whole starts a new one, as every node written with mode ``"w"``)."""
    node_commit.forget_history(store, node)
    for name in members:
        node_commit.forget_history(store, join_component(node, name))


def remove_replaced_members(
    store: Store,
    node: str,
    children: Iterable[str] = (),
    files: Mapping[str, Sequence[Any]] | None = None,
) -> None:
    """After a commit of the group ``node``: remove the whole child nodes
    ``children`` and the shard files ``files`` (member -> paths, or its replaced
    shard list as read: removed one stored segment at a time) it no longer
    references. Best effort: leftovers are orphans that readers ignore (and
    ``arrayds gc`` removes)."""
    for name in children:
        try:
            store.delete_prefix(join_component(node, name))
        except Exception:  # noqa: BLE001 - best effort
            pass
    for name, listed in (files or {}).items():
        member = join_component(node, name)
        try:
            parts: Iterable[list[str]] = (
                [[p if isinstance(p, str) else p.path for p in listed]]
                if not isinstance(listed, ShardList)
                else listed.paths()
            )
            for paths in parts:
                store.delete(sorted({f"{member}/{p}" if member else p for p in paths}))
        except Exception:  # noqa: BLE001 - best effort
            pass


def member_entry(
    m: ArrayManifest,
    stamp: Stamp,
    count: int | None,
    segments: Mapping[str, ShardLog] | None = None,
) -> dict[str, Any]:
    """The JSON of the member array ``m`` for a snapshot. Its shard list is an
    :class:`arrayds.nodes.history.Appended` of the list of the manifest stamped
    ``stamp`` where it is known to be one: a list read lazily and changed since
    (:meth:`arrayds.kinds.array.manifest.ShardList.extension`: entries added, and
    those a region write hides left out), or ``count`` (the stamped list's length)
    given; the new entries are those of ``segments`` (node -> the segments that node
    holds), then those of ``m``'s list. A commit then neither reads nor writes again
    the stored entries it keeps where its copy has that stamp (a list read lazily
    stays unread).

    >>> m = ArrayManifest.new((2,), "i4", ((1, 1),)).committed(3, "w3")
    >>> member_entry(m, (3, "w3"), 0)["shards"]
    Appended(0 - 0 + 0 + 0 entries)
    """
    shards = m.shards
    parts = shards.extension() if isinstance(shards, ShardList) else None
    if parts is None or (count is not None and len(parts[0]) != count):
        if count is None:
            return m.to_json()
        entries = m.to_json()["shards"]
        parts = entries[:count], entries[count:], []
    out = Appended(parts[0], parts[1], stamp, drop=parts[2], segments=segments)
    return {**m.header_json(), "shards": out}


def copy_logs(store: Store, pairs: Sequence[Mapping[str, Any]], what: str) -> dict[str, ShardLog]:
    """The segments that workers wrote before a commit (``pairs``: per segment, node
    -> its reference, one copy in each node that stores the member's list) as a
    :class:`arrayds.nodes.history.ShardLog` per node, for :func:`member_entry`."""
    nodes = list(pairs[0]) if pairs else []
    return {at: ShardLog(store, at, {"segments": [p[at] for p in pairs], "tail": []}, what)
            for at in nodes}  # fmt: skip


@dataclass
class Snapshot:
    """What one dataset commit writes, planned from the state ``expected``: every
    member array (``members``), the global attributes (``attrs``, raw JSON), the
    members an append grew (``appended``: name -> how many entries of its shard list
    in ``members`` come before the new ones) and the members whose new entries were
    written as segments before the commit (``segments``: name -> the references of
    each segment in each node that stores the member's list, node -> reference, in
    order; they follow the ``appended`` entries)."""

    expected: DatasetState
    members: Mapping[str, ArrayManifest]
    attrs: Mapping[str, Any]
    appended: Mapping[str, int] | None = None
    segments: Mapping[str, Sequence[Mapping[str, Any]]] | None = None


Rebase = Callable[[DatasetState], Snapshot]
"""An append's snapshot placed after what other writers committed: called with the
dataset's state as read anew, it returns the snapshot to commit instead, or raises
:class:`arrayds.CommitConflictError` if the append no longer fits it."""


def commit_snapshot(
    store: Store,
    node: str,
    *,
    expected: DatasetState,
    members: Mapping[str, ArrayManifest],
    changed: Iterable[str],
    attrs: Mapping[str, Any],
    write_id: str,
    written: Iterable[str] = (),
    remove_children: Iterable[str] = (),
    remove_files: Mapping[str, Iterable[str]] | None = None,
    fresh: bool = False,
    appended: Mapping[str, int] | None = None,
    segments: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    merge: Merge | None = None,
    rebase: Rebase | None = None,
    retries: int = 0,
    registered: bool = False,
) -> dict[str, Any]:
    """Commit ``members`` (all arrays of the dataset, new manifests for ``changed``)
    and ``attrs`` as one atomic write of the group manifest at ``node``, through
    :func:`arrayds.nodes.commit.commit`.

    ``expected`` is the state the write was planned from: if the group or a changed
    member's manifest moved since, :class:`arrayds.CommitConflictError` is raised,
    nothing becomes visible and the files ``written`` (relative to ``node``) are
    removed. After the commit the members' own manifests are rolled forward
    (:func:`roll_forward`), then ``remove_children`` (whole child nodes) and
    ``remove_files`` (member -> shard paths no longer referenced) are deleted, best
    effort (:func:`remove_replaced_members`); ``fresh`` (a dataset replaced whole,
    mode ``"w"``): the group and its members start a new history
    (:func:`forget_histories`). ``appended`` (name -> count): members whose shard
    list is the list of their manifest in ``members`` (its first ``count`` entries)
    followed by new entries; their commit and roll forward then write only the new
    entries (:class:`arrayds.nodes.history.Appended`), whatever the length of the
    history. ``segments`` (name -> references, :class:`Snapshot`): members whose
    new entries workers wrote as segments of each node that stores their list; they
    follow the ``appended`` entries, and the commit holds only their references.
    ``merge``: the tiered merge of the members an append grew, run inside
    this one commit (:func:`arrayds.nodes.merge.tiered` with member name -> appended
    files): a merged member's list is then written anew, and its roll forward writes
    the merged manifest. ``rebase`` (an append, ``retries=``): where the dataset
    moved since ``expected``, the snapshot it returns from the state read anew is
    committed instead of raising, and a refused put is tried again so, from a fresh
    read, up to ``retries`` times (:mod:`arrayds.nodes.retry`). ``registered``: the
    pending marker of ``write_id`` is in ``node`` (:func:`arrayds.nodes.pending.begin`,
    put before the files ``written``). Returns the committed group manifest.
    """
    what = f"dataset {store.display(node)!r}"
    changed = set(changed)
    gone = set(remove_children)
    planned = Snapshot(expected, members, attrs, appended, segments)
    current = planned

    def unchanged(base: NodeVersion) -> None:
        check_unchanged(base, expected.own, {n: expected.children.get(n) for n in changed}, what)

    def build(base: NodeVersion) -> dict[str, Any]:
        nonlocal current
        current = planned
        if rebase is not None:
            try:
                unchanged(base)
            except CommitConflictError:
                current = rebase(read_state(store, node))
        state = current.expected
        member_json: dict[str, dict[str, Any]] = {}
        for name, m in current.members.items():
            stamp = (m.generation, m.commit)
            count: int | None = len(m.shards)  # unchanged: its list as read
            if name in changed:
                count = (current.appended or {}).get(name)
                m = m.with_(generation=next_generation(state, name), commit=write_id)
            pairs = (current.segments or {}).get(name) if name in changed else None
            logs = copy_logs(store, pairs, what) if pairs is not None else None
            member_json[name] = member_entry(m, stamp, count, logs)
        gen = max(base.generation, generation_of(state.root)) + 1
        doc = group_json(gen, write_id, current.attrs, member_json)
        # the subgroups a DataTree commit listed stay listed (their roll forward may be
        # pending), unless this write removes them; their lists as stored (a list read
        # lazily stays unread, :func:`arrayds.nodes.history.kept`)
        carried = {
            n: kept(g)
            for n, g in state.groups.items()
            if n not in gone and n not in current.members
        }
        old_snap = state.root.get(SNAPSHOT) if state.root is not None else None
        if carried and isinstance(old_snap, dict) and old_snap.get("tree") is True:
            doc[SNAPSHOT]["members"].update(carried)
            doc[SNAPSHOT]["tree"] = True
        return doc

    def after(base: NodeVersion, doc: dict[str, Any]) -> None:
        roll_forward(store, node, doc, changed | current.expected.stale)
        remove_replaced_members(store, node, gone - set(current.members), remove_files)
        if fresh:
            forget_histories(store, node, current.members)

    return node_commit.commit(
        store,
        node,
        build,
        write_id=write_id,
        check=None if rebase is not None else unchanged,
        written=written,
        retries=retries if rebase is not None else 0,
        after=after,
        what=what,
        merge=merge,
        registered=registered,
    )
