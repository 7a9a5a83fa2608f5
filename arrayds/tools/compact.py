"""``arrayds compact``: :func:`compact` rewrites fragmented nodes into few large shards.

A dataset grown by many small writes holds one shard file per write (an array
appended one row at a time, records appended twenty at a time) and manifest entries
that newer writes override. Every file costs a request (an open, a footer read) and
every entry a lookup; on object stores, small files are the main cost of reading.
Compaction copies the *live* data of such a node (what a reader can still select)
into new shards of about ``shard_size`` stored bytes and commits a manifest naming
only them, so what every read returns is unchanged, byte for byte.

* :func:`fragmentation` — the rule: the measured figures of one node (files, live
  entries, bytes) and whether it needs compaction;
* :func:`compact` — the walk over a node and everything below it, one atomic commit
  per node (:func:`arrayds.nodes.commit.commit`; a group carrying an xarray snapshot:
  one commit of its snapshot for all its members, docs/spec.md section 10). A commit
  by another writer since compaction read the node is a
  :class:`arrayds.CommitConflictError` and nothing of the compaction is visible.

The old shard files stay: older versions of the dataset, and readers that opened it
before, still use them. ``arrayds gc`` removes them once no manifest names them.

>>> import arrayds, numpy as np
>>> a = arrayds.open_array("memory://doc-compact", mode="w", shape=(0,), dtype="i4", chunks=1)
>>> for i in range(10):
...     _ = a.append(np.array([i], "i4"), compact=False)
>>> a.nshards
10
>>> report = compact("memory://doc-compact")
>>> [(n.action, n.before.files, n.after.files) for n in report.nodes]
[('compacted', 10, 1)]
>>> arrayds.open_array("memory://doc-compact")[:].tolist()
[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..abc.store import Store
from ..nodes import commit, pending
from ..nodes import registry as kinds
from ..nodes.merge import (
    DEFAULT_SHARD_SIZE,
    MAX_TAIL,
    MERGE_FACTOR,
    Fragmentation,
    Rewrite,
    TooFragmentedError,
    commit_rewrite,
    entry_sizes,
    file_sizes,
    format_bytes,
    fragmentation,
    may_merge,
    parse_shard_size,
    rewrite,
    tail_to_merge,
    whole_files,
)
from ..nodes.names import join_component
from ..xarray.state import commit_snapshot, read_state
from .walk import open_root

__all__ = [
    "DEFAULT_SHARD_SIZE",
    "MAX_TAIL",
    "MERGE_FACTOR",
    "CompactReport",
    "Fragmentation",
    "NodeReport",
    "compact",
    "fragmentation",
    "may_merge",
    "parse_shard_size",
    "tail_to_merge",
]


# ------------------------------------------------------------------ the rule


# ------------------------------------------------------------------ reports


@dataclass
class NodeReport:
    """What :func:`compact` did with one node."""

    node: str
    """The node's URL."""
    kind: str
    action: str
    """``"compacted"``, ``"would compact"`` (``dry_run``) or ``"skipped"``."""
    reason: str
    before: Fragmentation | None = None
    after: Fragmentation | None = None
    written: list[str] = field(default_factory=list)
    """The new shard files (relative to the node)."""
    bytes_written: int = 0
    tail: int = 0
    """With ``tiered``: how many of the newest entries are merged (0: the whole node)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "kind": self.kind,
            "action": self.action,
            "reason": self.reason,
            "before": None if self.before is None else self.before.to_json(),
            "after": None if self.after is None else self.after.to_json(),
            "written": self.written,
            "bytes_written": self.bytes_written,
        }

    def line(self) -> str:
        """One line of ``arrayds compact``'s output."""
        b = self.before
        if self.action == "compacted" and b is not None and self.after is not None:
            a = self.after
            return (
                f"compacted {self.node}: {b.files} files ({format_bytes(b.file_bytes)}) -> "
                f"{a.files} ({format_bytes(a.file_bytes)}); {b.entries} entries -> {a.entries}"
            )
        if self.action == "would compact" and b is not None:
            return (
                f"would compact {self.node}: {b.files} files ({format_bytes(b.file_bytes)}), "
                f"{b.entries} entries: {self.reason}"
            )
        return f"skipped {self.node} ({self.kind}): {self.reason}"


@dataclass
class CompactReport:
    """What :func:`compact` did (or, with ``dry_run``, would do), node by node.

    >>> import arrayds
    >>> _ = arrayds.to_arrayrecord([b"x"], "memory://doc-compact-report")
    >>> r = compact("memory://doc-compact-report", dry_run=True)
    >>> r.compacted, r.nodes[0].line(), r.to_json()["shard_size"]
    ([], 'skipped memory://doc-compact-report (records): not fragmented', 67108864)
    """

    url: str
    dry_run: bool
    shard_size: int
    nodes: list[NodeReport] = field(default_factory=list)
    min_small_files: int = 2
    tiered: bool = False

    @property
    def compacted(self) -> list[NodeReport]:
        """The nodes compacted (or that would be, with ``dry_run``)."""
        return [n for n in self.nodes if n.action in ("compacted", "would compact")]

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "dry_run": self.dry_run,
            "shard_size": self.shard_size,
            "nodes": [n.to_json() for n in self.nodes],
        }


# ------------------------------------------------------------------ the walk


def _measure(
    store: Store, node: str, kind: kinds.NodeKind, m: Any, size: int, report: CompactReport
) -> NodeReport:
    """The report line of a node before any write: "skipped" or a plan."""
    shown = store.display(node)
    if kind.compact is None:
        return NodeReport(shown, kind.name, "skipped", "its kind has no compaction")
    if report.tiered:
        sizes = entry_sizes(m)
        n = tail_to_merge(sizes, size // 2) if sizes else 0
        if not n:
            why = (
                "no tier of appended shards is full" if sizes else "its kind is not merged by tiers"
            )
            return NodeReport(shown, kind.name, "skipped", why)
        action = "would compact" if report.dry_run else "compacted"
        n = whole_files(m, n)
        why = f"its newest {n} small shards fill a tier"
        return NodeReport(shown, kind.name, action, why, before=fragmentation(m, size), tail=n)
    least = report.min_small_files
    if least > 2 and len(getattr(m, "shards", ())) < least:
        # automatic compaction: fewer entries than the threshold of files (known
        # without reading the entries)
        return NodeReport(shown, kind.name, "skipped", f"fewer than {least} shard entries")
    try:
        frag = fragmentation(m, size, sizes=file_sizes(store, node, m), min_small_files=least)
    except TooFragmentedError as e:
        return NodeReport(shown, kind.name, "skipped", f"too fragmented to map: {e}")
    if not frag.needs_compaction:
        return NodeReport(shown, kind.name, "skipped", frag.reason, before=frag)
    action = "would compact" if report.dry_run else "compacted"
    return NodeReport(shown, kind.name, action, frag.reason, before=frag)


def _after(rw: Rewrite, size: int, line: NodeReport) -> None:
    line.written = rw.written
    line.bytes_written = rw.bytes_written
    line.after = fragmentation(rw.manifest, size)


def _compact_node(
    store: Store, base: commit.NodeVersion, kind: kinds.NodeKind, report: CompactReport
) -> None:
    """One node of a kind with shards: measure, rewrite, one compare-and-swap commit."""
    node = base.node
    what = f"{kind.a()} {store.display(node)!r}"
    m = kind.parse(base.raw, what)
    line = _measure(store, node, kind, m, report.shard_size, report)
    report.nodes.append(line)
    if line.action != "compacted":
        return
    write_id = pending.begin(store, node)
    with pending.uploading(store, node, write_id):
        rw = rewrite(store, node, kind, m, report.shard_size, write_id, line.tail)
    commit_rewrite(
        store,
        node,
        rw,
        write_id,
        base.stamp,
        what,
        lambda now: (
            f"{what}: another writer committed (generation {now.generation}) after "
            f"compaction read generation {base.generation}; nothing of the compaction "
            f"is visible (run it again)"
        ),
    )
    _after(rw, report.shard_size, line)


def _compact_dataset(
    store: Store, node: str, report: CompactReport, only: set[str] | None = None
) -> list[str]:
    """A group carrying an xarray snapshot: its fragmented member arrays rewritten and
    committed with one commit of the group's snapshot (the dataset stays consistent;
    docs/spec.md section 10.2). Returns the children to walk on (the subgroups and
    the nodes of other kinds; not the members, nor leftovers the snapshot ignores)."""

    state = read_state(store, node)
    array = kinds.get("array")
    lines: dict[str, NodeReport] = {}
    for name, m in state.members.items():
        if only is not None and name not in only:
            continue
        child = join_component(node, name)
        lines[name] = _measure(store, child, array, m, report.shard_size, report)
        report.nodes.append(lines[name])
    todo = [n for n, line in lines.items() if line.action == "compacted"]
    if todo:
        write_id = pending.begin(store, node)
        members = dict(state.members)
        rewrites: dict[str, Rewrite] = {}
        written: list[str] = []
        try:
            for name in todo:
                child = join_component(node, name)
                rw = rewrite(
                    store,
                    child,
                    array,
                    members[name],
                    report.shard_size,
                    write_id,
                    lines[name].tail,
                )
                rewrites[name] = rw
                members[name] = rw.manifest
                written += [f"{name}/{p}" for p in rw.written]
        except BaseException:
            store.delete([join_component(node, p) for p in written])
            pending.end(store, node, write_id)
            raise
        commit_snapshot(
            store,
            node,
            expected=state,
            members=members,
            changed=set(todo),
            attrs=state.attrs,
            write_id=write_id,
            written=written,
            registered=True,
        )
        for name in todo:
            _after(rewrites[name], report.shard_size, lines[name])
    if only is not None:
        return []
    children = commit.child_nodes(store, node)
    keep = set(state.groups) | {n for n in state.others if n not in state.groups}
    for name in children:
        if name not in state.members and name not in keep:
            report.nodes.append(
                NodeReport(
                    store.display(join_component(node, name)),
                    "?",
                    "skipped",
                    "not a member of the dataset snapshot of its group (a leftover that "
                    "readers of the dataset ignore)",
                )
            )
    return [n for n in children if n in keep]


def _snapshot_parent(store: Store, node: str) -> str | None:
    """The group above ``node`` if its snapshot lists ``node`` as a member array."""
    if not node:
        return None
    parent, _, name = node.rpartition("/")
    raw = commit.read(store, parent).raw
    snap = raw.get("snapshot") if raw is not None else None
    members = snap.get("members") if isinstance(snap, dict) else None
    if isinstance(members, dict) and isinstance(members.get(name), dict):
        if members[name].get("kind") == "array":
            return parent
    return None


def _visit(store: Store, node: str, report: CompactReport) -> None:
    base = commit.read(store, node)
    if base.raw is None:
        return
    try:
        kind = kinds.get(base.kind, f"node {store.display(node)!r}")
    except NotImplementedError as e:  # a kind of a newer arrayds: left as it is
        report.nodes.append(NodeReport(store.display(node), str(base.kind), "skipped", str(e)))
        return
    if kind.children:
        if isinstance(base.raw.get("snapshot"), dict):
            children = _compact_dataset(store, node, report)
        else:
            children = commit.child_nodes(store, node)
        for child in children:
            _visit(store, join_component(node, child), report)
        return
    _compact_node(store, base, kind, report)


def compact(
    url: str | os.PathLike[str],
    component: str | None = None,
    *,
    shard_size: int | str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    dry_run: bool = False,
    min_small_files: int = 2,
    tiered: bool = False,
) -> CompactReport:
    """Compact the node ``component`` of the dataset at ``url`` and every node below it.

    Each node that :func:`fragmentation` finds fragmented has its live data copied
    (byte for byte, nothing decoded) into new shards of about ``shard_size`` stored
    bytes (default :data:`DEFAULT_SHARD_SIZE`, 64 MiB; an int or a string such as
    ``"64MiB"``), and one atomic commit replaces its manifest by one naming only those
    shards; entries nothing could select any more are gone. Reads return exactly what
    they returned before. The member arrays of a group carrying an xarray snapshot are
    committed together by one commit of the group's snapshot.

    If another writer commits to a node after compaction read it, compaction raises
    :class:`arrayds.CommitConflictError`, removes the shards it wrote and changes
    nothing of that node (nodes compacted before stay compacted; run it again).
    A reader sees the node before or after, never a mix. The old shard files are not
    removed (older versions and open readers use them): ``arrayds gc`` removes them
    once no manifest names them. ``dry_run`` measures and reports, writing nothing.
    ``min_small_files``: how many small files make a node fragmented (2; the
    automatic compaction of ``to_arrayrecord(..., compact=True)`` uses
    :data:`AUTO_COMPACT_FILES`). ``tiered``: instead, merge only the newest small
    shards of each array and records node where they fill a tier
    (:func:`tail_to_merge`; what appends run in their own commit, ``compact="tiered"``).

    ``FileNotFoundError`` if there is no dataset at ``url`` (or no node
    ``component``); ``ValueError`` for a bad ``component`` or ``shard_size`` (not
    positive), ``TypeError`` for a ``shard_size`` that is not a size.

    >>> import arrayds
    >>> url = "memory://doc-compact-records"
    >>> for i in range(4):
    ...     _ = arrayds.to_arrayrecord([b"a", b"b"], url, mode="a")
    >>> compact(url, dry_run=True).nodes[0].line()
    'would compact memory://doc-compact-records: 4 files (...), 4 entries: 4 of 4 ...'
    >>> r = compact(url, shard_size="1MiB")
    >>> r.nodes[0].after.files, arrayds.open(url).data_source()[:]
    (1, [b'a', b'b', b'a', b'b', b'a', b'b', b'a', b'b'])
    """
    size = parse_shard_size(shard_size)
    if not isinstance(min_small_files, int) or isinstance(min_small_files, bool):
        raise TypeError(f"min_small_files must be an int, got {min_small_files!r}")
    if min_small_files < 2:
        raise ValueError(f"min_small_files must be at least 2, got {min_small_files}")
    store, node = open_root(url, storage_options, component)
    report = CompactReport(
        store.display(node),
        bool(dry_run),
        size,
        min_small_files=min_small_files,
        tiered=bool(tiered),
    )
    parent = _snapshot_parent(store, node)
    if parent is not None:
        _compact_dataset(store, parent, report, only={node.rpartition("/")[2]})
    else:
        _visit(store, node, report)
    return report
