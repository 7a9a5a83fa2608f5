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
4. create the missing groups above the node (:func:`ensure_parents`) and replace the
   manifest with one conditional put (:meth:`Store.put_if_match` on the version read in
   step 1): the compare-and-swap. The same put keeps the replaced head as the version
   file of its generation (its ``keep``: locally a hard link made under the lock) and
   makes the names of the files the new manifest adds durable before the new one is
   visible (its ``flush``). If another writer committed in between, the put is
   refused: a write whose changes commute (an append) starts again at step 1, up to
   ``retries`` times; any other write raises :class:`CommitConflictError`;
5. after the commit, best effort: ``after`` (a kind's own follow-up, e.g. the xarray
   roll forward), then remove what only the replaced manifest used (``replaces``).

An append passes ``merge`` (:func:`arrayds.nodes.merge.tiered`): a hook run on what
``build`` made in step 3 that may merge the newest small shards into one (the tiered
merge), so the append and its merge are one compare-and-swap, one version. A refused
put removes the merged shard; a retry merges again from its fresh read.

A write that commits again with the same write id (a dask task retried after its
worker was lost once the commit had landed) finds its own commit and returns it.

>>> from arrayds.storage import new_store
>>> st = new_store("memory://commit-doc")
>>> m = commit(st, "g", lambda base: {"format": "arrayds", "format_version": 1,
...                                 "kind": "group", "attrs": {}}, write_id="w1")
>>> m["generation"], read(st, "g").commit
(1, 'w1')
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import cached_property
from typing import Any

from ..abc.store import ABSENT, Keep, Store, Version
from ..errors import CommitConflictError, CorruptionError, PreconditionFailedError
from . import history as log
from . import pending, retry
from .history import Extend
from .names import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    dump_json,
    is_reserved_name,
    join_component,
    new_write_id,
    parse_json,
)

__all__ = [
    "NEWEST",
    "Extend",
    "Merge",
    "Merged",
    "NodeVersion",
    "check_parents",
    "child_nodes",
    "commit",
    "ensure_parents",
    "forget_history",
    "is_node_file",
    "landed_in",
    "manifest_key",
    "materialize",
    "put_if_newer",
    "read",
    "referenced_files",
    "replace",
    "remove_replaced",
    "upgrade",
    "versions",
]

Check = Callable[["NodeVersion"], None]
Build = Callable[["NodeVersion"], "Mapping[str, Any] | Extend"]
After = Callable[["NodeVersion", dict[str, Any]], None]


@dataclass(frozen=True)
class Merged:
    """What a ``merge`` hook of :func:`commit` made of the manifest ``build`` gave."""

    manifest: dict[str, Any] | Extend
    """The manifest to commit instead (its newest small shards merged), or the
    :class:`Extend` of the base that makes it."""
    written: list[str]
    """The merged shard files it wrote (relative to the node): removed if the commit
    fails before its put or the put is refused (a put of unknown outcome keeps them,
    as it keeps the write's own files: ``arrayds gc``)."""
    gone: list[str]
    """Files the write itself added that no version names once it commits (the
    appended shards merged away): removed once the put landed."""
    markers: tuple[str, ...] = ()
    """The write ids the merged files are named after, whose pending markers (in the
    committed node, :func:`arrayds.nodes.pending.begin`) the commit ends once its
    outcome is known."""


Merge = Callable[["NodeVersion", "Mapping[str, Any] | Extend"], "Merged | None"]


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
    head: dict[str, Any] | None
    """The manifest as stored (format 2: its shard lists are logs, :mod:`.log`), or
    ``None`` if the node has none."""
    version: Version
    data: bytes | None = None
    """The stored bytes of ``head`` (kept as the version's copy by the next commit)."""

    @property
    def exists(self) -> bool:
        return self.head is not None

    @cached_property
    def raw(self) -> dict[str, Any] | None:
        """The manifest (JSON object) with every shard list complete, or ``None``."""
        if self.head is None:
            return None
        return log.resolve(self.store, self.node, self.head, self.what)

    @cached_property
    def lazy_raw(self) -> dict[str, Any] | None:
        """:attr:`raw` with the node's own shard list, if a log with segments, as an
        :class:`arrayds.nodes.history.ShardLog` (its segments load when used)."""
        if self.head is None:
            return None
        if "raw" in self.__dict__:  # resolved already: nothing to save
            return self.raw
        return log.resolve(self.store, self.node, self.head, self.what, lazy=True)

    @property
    def kind(self) -> str | None:
        kind = self.head.get("kind") if self.head is not None else None
        return kind if isinstance(kind, str) else None

    @property
    def generation(self) -> int:
        """The manifest's generation (0 when there is none or it is not a count)."""
        return generation_of(self.head)

    @property
    def commit(self) -> str | None:
        c = self.head.get("commit") if self.head is not None else None
        return c if isinstance(c, str) else None

    @property
    def format_version(self) -> int:
        """The format version the node is stored in (0 for none)."""
        v = self.head.get("format_version") if self.head is not None else None
        return v if isinstance(v, int) and not isinstance(v, bool) else 0

    @property
    def time(self) -> datetime | None:
        """When this version was committed (``None`` before format 2)."""
        return log.parse_time(self.head.get("time")) if self.head is not None else None

    @property
    def stamp(self) -> tuple[int, str] | None:
        """(generation, commit), or ``None`` for a missing node: what a write that
        planned from this read expects to find at its commit."""
        return None if self.head is None else (self.generation, self.commit or "")

    @property
    def what(self) -> str:
        return self.store.display(self.node)


def generation_of(raw: Mapping[str, Any] | None) -> int:
    """The ``generation`` of a manifest (0 for none or a value that is not a count)."""
    g = raw.get("generation") if raw is not None else None
    return g if isinstance(g, int) and not isinstance(g, bool) and g >= 0 else 0


def read(
    store: Store, node: str, *, version: int | None = None, as_of: datetime | None = None
) -> NodeVersion:
    """The manifest of ``node`` and its version; with ``version`` (a generation) or
    ``as_of`` (the newest version committed at or before that time), that version of
    the node's history (:func:`versions`): ``ValueError`` naming the versions kept if
    it is not one of them. A manifest that is not a JSON object raises
    :class:`arrayds.CorruptionError` naming the node."""
    data, tag = store.get_versioned(manifest_key(node))
    head = None if data is None else parse_json(data, store.display(node))
    cur = NodeVersion(store, node, head, tag if data is not None else ABSENT, data)
    if version is None and as_of is None:
        return cur
    return _read_version(cur, version, as_of)


_HISTORIC = ("historic version",)
"""The storage version of a version read from the history: no commit starts from it."""


def _version_head(store: Store, node: str, generation: int) -> dict[str, Any] | None:
    data = store.get(_key(node, log.version_key(generation)))
    if data is None:
        return None
    head = parse_json(data, f"{store.display(node)} (version {generation})")
    if generation_of(head) != generation:
        raise CorruptionError(
            f"{store.display(node)}: the history file of version {generation} holds "
            f"generation {head.get('generation')!r}"
        )
    return head


def versions(store: Store, node: str) -> list[log.VersionInfo]:
    """The versions of ``node`` that its history keeps, oldest first, the current one
    last (empty if there is no node). Format 1 nodes keep only their current state.

    >>> from arrayds.storage import new_store
    >>> st = new_store("memory://commit-versions-doc")
    >>> for i in range(3):
    ...     _ = commit(st, "", lambda b: {"format": "arrayds", "kind": "group",
    ...                                   "attrs": {"i": i}}, write_id=f"w{i}")
    >>> [(v.generation, v.commit, v.current) for v in versions(st, "")]
    [(1, 'w0', False), (2, 'w1', False), (3, 'w2', True)]
    >>> read(st, "", version=2).raw["attrs"]
    {'i': 1}
    """
    cur = read(store, node)
    if not cur.exists:
        return []
    out = []
    for g in _kept_generations(store, cur):
        head = _version_head(store, node, g)
        if head is not None:
            out.append(
                log.VersionInfo(
                    g,
                    NodeVersion(store, node, head, _HISTORIC).commit,
                    log.parse_time(head.get("time")),
                    False,
                )
            )
    out.append(log.VersionInfo(cur.generation, cur.commit, cur.time, True))
    return out


def _history_from(head: Mapping[str, Any] | None) -> int:
    """The first generation of the node's history (0: all it keeps)."""
    g = head.get(log.HISTORY_FROM) if head is not None else None
    return g if isinstance(g, int) and not isinstance(g, bool) and g > 0 else 0


RECENT = "recent"
"""The head's field of the write ids of its latest commits (docs/spec.md 12.2)."""

RECENT_COMMITS = 64
"""How many write ids of its latest commits a head keeps (``recent``, newest first):
what recognises a commit whose reply was lost (:func:`_landed`) however the node
changed after it, as long as fewer commits followed it than this."""


def recent_commits(head: Mapping[str, Any] | None) -> list[str]:
    """The write ids of the latest commits ``head`` keeps (``[]`` if none or not a
    list of strings: the field is informational, docs/spec.md 12.2)."""
    got = head.get(RECENT) if head is not None else None
    if not isinstance(got, list) or not all(isinstance(w, str) for w in got):
        return []
    return got[:RECENT_COMMITS]


def landed_in(head: Mapping[str, Any] | None, write_id: str) -> bool:
    """Whether ``head`` is the commit of the write ``write_id`` or names it among its
    latest commits (:func:`recent_commits`): that write landed, and a run of it again
    (a dask task re-run after its worker was lost) must commit nothing.

    >>> landed_in({"commit": "w2", "recent": ["w2", "w1"]}, "w1"), landed_in(None, "w1")
    (True, False)
    """
    return head is not None and (head.get("commit") == write_id or write_id in recent_commits(head))


def _kept_generations(store: Store, cur: NodeVersion) -> list[int]:
    """The generations the history files of ``cur``'s node keep, below its own and
    not before its history starts (a file a slow writer kept from before a replacing
    write is not part of it)."""
    since = _history_from(cur.head)
    keys = store.list(_key(cur.node, log.VERSIONS_DIR))
    gens = {log.version_of_key(k) for k, _, _ in keys}
    return sorted(g for g in gens if g is not None and since <= g < cur.generation)


def _read_version(cur: NodeVersion, version: int | None, as_of: datetime | None) -> NodeVersion:
    """Version ``version`` (or the newest at or before ``as_of``) of the node ``cur``
    is the head of (see :func:`read`)."""
    store, node = cur.store, cur.node
    if not cur.exists:
        return cur
    if version is not None and as_of is not None:
        raise ValueError(f"{cur.what}: give version= or as_of=, not both")
    if version is not None:
        if not isinstance(version, int) or isinstance(version, bool):
            raise TypeError(f"{cur.what}: version must be an int, got {version!r}")
        if version == cur.generation:
            return cur
        kept = _history_from(cur.head) <= version < cur.generation and version > 0
        head = _version_head(store, node, version) if kept else None
        if head is None:
            raise ValueError(f"{cur.what}: no version {version}; {_kept_phrase(cur)}")
        return NodeVersion(store, node, head, _HISTORIC)
    if not isinstance(as_of, datetime):
        raise TypeError(f"{cur.what}: as_of must be a datetime, got {as_of!r}")
    when = as_of if as_of.tzinfo is not None else as_of.replace(tzinfo=timezone.utc)
    if cur.time is None or cur.time <= when:
        return cur
    for g in reversed(_kept_generations(store, cur)):
        head = _version_head(store, node, g)
        t = log.parse_time(head.get("time")) if head is not None else None
        if head is not None and t is not None and t <= when:
            return NodeVersion(store, node, head, _HISTORIC)
    raise ValueError(
        f"{cur.what}: no version was committed at or before {when.isoformat()}; {_kept_phrase(cur)}"
    )


def _kept_phrase(cur: NodeVersion) -> str:
    vs = versions(cur.store, cur.node)
    if len(vs) == 1:
        return f"the history keeps only the current version {vs[0].generation}"
    listed = ", ".join(str(v.generation) for v in vs[:3])
    if len(vs) > 6:
        listed += ", ..., " + ", ".join(str(v.generation) for v in vs[-3:])
    elif len(vs) > 3:
        listed = ", ".join(str(v.generation) for v in vs)
    first, last = vs[0], vs[-1]
    return (
        f"the versions kept are {listed} ({len(vs)} versions, committed "
        f"{_when(first.time)} to {_when(last.time)})"
    )


def _when(t: datetime | None) -> str:
    return t.isoformat(timespec="seconds") if t is not None else "before format 2"


def referenced_files(manifest: Mapping[str, Any]) -> set[str]:
    """The files (``/``-separated, relative to the node) a manifest names: its
    ``shards`` and those of a group snapshot's members (``<member>/...``). Every node
    kind lists its files as ``{"shards": [{"path": ...}, ...]}``.

    >>> sorted(referenced_files({"shards": [{"path": "c/a-0.array_record"}],
    ...     "snapshot": {"members": {"x": {"shards": [{"path": "c/b-0.array_record"}]}}}}))
    ['c/a-0.array_record', 'x/c/b-0.array_record']
    """
    return set().union(*_file_runs(manifest))


def _file_runs(manifest: Mapping[str, Any], prefix: str = "") -> Iterator[set[str]]:
    """The files of :func:`referenced_files`, a run at a time: a stored shard list
    (:class:`arrayds.nodes.history.ShardLog`) one segment at a time, read and dropped
    (a list of a million entries is never in memory at once), any other list whole."""
    shards = manifest.get("shards")
    runs: Iterable[Any] = ()
    if isinstance(shards, log.ShardLog):
        runs = (
            shards.load(k, cache=False) if k < shards.nsegments else shards.tail
            for k in range(shards.nsegments + 1)
        )
    elif isinstance(shards, (list, log.Appended)):
        runs = [shards]
    for entries in runs:
        yield {
            prefix + s["path"]
            for s in entries
            if isinstance(s, dict) and isinstance(s.get("path"), str)
        }
    snap = manifest.get("snapshot")
    members = snap.get("members") if isinstance(snap, dict) else None
    if isinstance(members, dict):
        for name, member in members.items():
            if isinstance(name, str) and isinstance(member, dict):
                yield from _file_runs(member, f"{prefix}{name}/")


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


def _remove(store: Store, node: str, files: Iterable[str]) -> None:
    """Remove ``files`` (relative to the node), best effort: leftovers are orphans,
    which no reader sees and ``arrayds gc`` removes."""
    try:
        store.delete(sorted(_key(node, p) for p in files))
    except Exception:  # noqa: BLE001 - best effort
        pass


def _drop_merged(store: Store, node: str, merged: Merged) -> None:
    """Remove the files of a merge that will not be committed, then its markers."""
    _remove(store, node, merged.written)
    for wid in merged.markers:
        pending.end(store, node, wid)


def _discard(store: Store, node: str, written: Iterable[str], write_id: str) -> None:
    """Remove the files a failed write added, except any that the node's manifest now
    references, its shard files and the segment and index files of its lists (never
    delete committed data); nothing at all if the node's head names ``write_id``
    among its latest commits (:func:`recent_commits`: the write landed, and this is a
    re-run of it that failed, say its check after other writers committed). Best
    effort: leftovers are orphans, which no reader sees and ``arrayds gc`` removes."""
    written = set(written)
    if not written:
        return
    try:
        now = read(store, node)
        if landed_in(now.head, write_id):
            return
        keep = referenced_files(now.raw) if now.raw is not None else set()
        if now.head is not None:
            keep |= log.log_files(store, node, now.head)
        store.delete(sorted(_key(node, p) for p in written - keep))
    except Exception:  # noqa: BLE001 - best effort
        pass


NEWEST = 2
"""The format version new nodes are written in (docs/spec.md); a node keeps the version
it has until :func:`upgrade`."""


@dataclass
class _Staged:
    """A next manifest ready for its compare-and-swap."""

    head: dict[str, Any]
    data: bytes
    new: dict[str, Any] | None
    """The logical manifest, if the build gave it whole (else it is the head's)."""
    segments: list[str]
    """The segment files written for the head (removed if its put is refused)."""
    added: set[str]
    """The shard files the new manifest names that the old one did not."""
    fresh: bool = False
    """Whether it replaces the node with files of its own write only (an
    :class:`Extend` with ``fresh``)."""

    def manifest(self, store: Store, node: str) -> dict[str, Any]:
        if self.new is not None:
            return self.new
        return log.resolve(store, node, self.head, store.display(node))


def materialize(base: NodeVersion, change: Extend) -> dict[str, Any]:
    """The whole manifest an :class:`Extend` of ``base`` makes (its shard list read).

    >>> from arrayds.storage import new_store
    >>> st = new_store("memory://commit-materialize-doc")
    >>> _ = commit(st, "", lambda b: {"kind": "records", "shards": [{"path": "a"}]},
    ...            write_id="w1")
    >>> materialize(read(st, ""), Extend({"n": 2}, [{"path": "b"}]))["shards"]
    [{'path': 'a'}, {'path': 'b'}]
    """
    old = base.raw or {}
    shards = old.get("shards")
    kept = shards if isinstance(shards, list) and not change.fresh else []
    if change.fresh:
        old = {}
    if change.drop:
        if set(change.drop) != {""}:  # a list with no segments: all of it is the tail
            raise ValueError(f"{base.what}: entries dropped from segments of a plain list")
        gone = set(change.drop[""])
        kept = [e for i, e in enumerate(kept) if i not in gone]
    segs = [e for r in change.segments for e in log.segment(base.store, base.node, r, base.what)]
    return {**old, **change.fields, "shards": [*kept, *segs, *change.shards]}


def _stage(
    store: Store,
    node: str,
    base: NodeVersion,
    change: Mapping[str, Any] | Extend,
    *,
    format_version: int,
    generation: int,
    write_id: str,
    fresh: bool = False,
    files_id: str | None = None,
) -> _Staged:
    """Encode the next manifest of ``node`` (``change``: whole, or an :class:`Extend`
    of ``base``) in ``format_version``, with its ``generation`` and ``commit``; new
    segments are named after ``files_id`` (default ``write_id``), a write id whose
    pending marker is held."""
    files_id = files_id or write_id
    if isinstance(change, Extend) and (
        format_version < 2 or (base.exists and base.format_version < 2)
    ):
        change = materialize(base, change)
    stamp: dict[str, Any] = {
        "format_version": format_version,
        "generation": generation,
        "commit": write_id,
        RECENT: [write_id, *recent_commits(base.head)][:RECENT_COMMITS],
    }
    if format_version >= 2:
        stamp["time"] = log.now()
        since = generation if fresh else _history_from(base.head)
        if since:
            stamp[log.HISTORY_FROM] = since
    if isinstance(change, Extend):
        head, segments = log.extend(store, node, change, base.head or {}, files_id)
        head.update(stamp)
        _version_of_indexes(head)
        added = {s["path"] for s in change.shards if isinstance(s.get("path"), str)}
        return _Staged(head, dump_json(head), None, segments, added, change.fresh)
    new = {**change, **stamp}
    if format_version >= 2:
        lists: dict[str, list[Any]] = {}
        head, segments = log.encode(store, node, new, base.head, lambda: base.raw, lists, files_id)
        _version_of_indexes(head)
        added = {
            f"{where}/{e['path']}" if where else e["path"]
            for where, entries in lists.items()
            for e in entries
            if isinstance(e, dict) and isinstance(e.get("path"), str)
        }
    else:
        head, segments = log.plain(new), []
        added = referenced_files(head) - (referenced_files(base.raw) if base.raw else set())
    return _Staged(head, dump_json(head), new, segments, added)


def _version_of_indexes(head: dict[str, Any]) -> None:
    """A head one of whose shard lists has an index is stored in format version
    :data:`arrayds.nodes.history.INDEXED_VERSION` (at least): a release that does
    not know indexes then refuses it by its version, rather than taking an index for
    a damaged segment (docs/spec.md 14.3.2)."""
    if log.has_index(head):
        head["format_version"] = max(head["format_version"], log.INDEXED_VERSION)


def _keep_version(base: NodeVersion, format_version: int) -> Keep | None:
    """What the commit replacing the head ``base`` keeps of it in the node's history
    (:class:`Keep` for :meth:`Store.put_if_match`): the bytes of a committed head
    under its generation's version file, so racing writers keep the same bytes."""
    if format_version < 2 or base.format_version < 2 or base.data is None:
        return None
    return Keep(_key(base.node, log.version_key(base.generation)), base.data)


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
    format_version: int | None = None,
    merge: Merge | None = None,
    registered: bool = False,
) -> dict[str, Any]:
    """Commit the next manifest of ``node`` (see the module docstring); returns it.

    ``build(base)`` returns the new manifest from the current one (``base``), or an
    :class:`Extend` of it (a write that only adds shards: its cost then does not grow
    with the node's history); ``check(base)`` raises if the node is not as the write
    expects; ``written``: the files (relative to the node) the write added, removed if
    the write fails; ``retries``: how often a refused conditional put is retried from
    a fresh read (only for writes that commute, such as appends); ``parents``: create
    the missing groups above the node; ``replaces``: after the commit, remove what only
    the old manifest used (:func:`remove_replaced`) and the node's history (a replaced
    node starts a new one), and with ``clear`` also every other file of those folders
    of the node (a create replacing a node: its uncommitted leftovers go too);
    ``after(base, new)``: a follow-up run once the commit landed, whose failure is the
    caller's to report; ``format_version``: store the node in this format version
    (default: the one it has, :data:`NEWEST` for a new node); ``merge(base, change)``:
    run on each attempt's ``build`` result, it may return a :class:`Merged` manifest
    to commit instead (the tiered merge of an append, :func:`arrayds.nodes.merge.tiered`):
    its ``written`` files are removed if that attempt fails before its put or its put
    is refused (a retry merges again from its fresh read), its ``gone`` files once
    the put landed.

    The pending marker of ``write_id`` in ``node`` (:mod:`arrayds.nodes.pending`: gc
    keeps every file named after a write id whose marker is there) is put by the
    write before it wrote its first file (``registered``), else here before the
    first segment; it is removed once the outcome is known: when this returns or
    raises, except after a put of unknown outcome (it then expires).

    Returns the committed manifest; for an :class:`Extend`, as stored (its shard
    lists may be logs: :func:`arrayds.nodes.history.resolve` gives their entries). A
    write that landed already (a dask task re-run after its worker was lost: the
    node's head names ``write_id`` among its :data:`RECENT_COMMITS` latest commits)
    commits nothing again and returns the node's current manifest, whatever other
    writers committed after it; a failed write never removes a file the node's
    current head names (:func:`_discard`). A ``registered`` write whose marker is
    gone ended before (committed, however many commits ago, or refused with its files
    removed): it commits nothing and raises :class:`CommitConflictError` unless a
    version of the node is its commit (:func:`_ended`).
    """
    if not isinstance(retries, int) or isinstance(retries, bool) or retries < 0:
        raise ValueError(f"retries must be a count (an int >= 0), got {retries!r}")
    written = tuple(written)
    clear = tuple(clear)
    label = what or f"node {store.display(node)!r}"
    if not registered:
        pending.begin(store, node, write_id)
    elif not store.exists(pending.marker_key(node, write_id)):
        return _ended(store, node, write_id, label)
    known = [True]  # whether the outcome is known (else the marker is left to expire)
    try:
        return _commit(
            store, node, build, write_id, check, written, retries, parents, replaces,
            clear, after, label, format_version, merge, known,
        )  # fmt: skip
    finally:
        if known[0]:
            pending.end(store, node, write_id)


def _ended(store: Store, node: str, write_id: str, label: str) -> dict[str, Any]:
    """The commit of a registered write whose pending marker is gone: an earlier run
    of it ended already (a dask task run again after its first run committed, or
    after it was refused and removed the write's files; or the marker expired and gc
    may have removed them). Nothing is committed again: if a version of the node is
    that write's commit, the node's current manifest is returned, else
    :class:`CommitConflictError` is raised; no file is removed either way."""
    cur = read(store, node)
    if landed_in(cur.head, write_id) or any(v.commit == write_id for v in versions(store, node)):
        if cur.raw is not None:
            return cur.raw
    raise CommitConflictError(
        f"{label}: write {write_id} ended before this commit (an earlier run of it was "
        f"refused, or its marker expired after {pending.MAX_WRITE_AGE / 86400:g} days "
        f"and arrayds gc may have removed its files): nothing is committed; write again"
    )


def _commit(
    store: Store,
    node: str,
    build: Build,
    write_id: str,
    check: Check | None,
    written: tuple[str, ...],
    retries: int,
    parents: bool,
    replaces: bool,
    clear: tuple[str, ...],
    after: After | None,
    label: str,
    format_version: int | None,
    merge: Merge | None,
    known: list[bool],
) -> dict[str, Any]:
    """The attempts of :func:`commit` (its arguments); ``known[0]`` is ``False`` while
    a put is under way (an error then leaves its outcome unknown)."""
    attempt = 0
    while True:
        base = read(store, node)
        if landed_in(base.head, write_id) and base.raw is not None:
            # this write committed already (a retried task whose first run landed,
            # perhaps with other commits after it): nothing is committed again
            return base.raw
        fv = format_version or (base.format_version if base.exists else NEWEST) or NEWEST
        merged: Merged | None = None
        try:
            if fv > FORMAT_VERSION:
                raise NotImplementedError(
                    f"{label}: dataset format version {fv} is newer than this arrayds "
                    f"supports ({FORMAT_VERSION}); upgrade arrayds to write to it"
                )
            if check is not None:
                check(base)
            change = build(base)
            if merge is not None:
                merged = merge(base, change)
                if merged is not None:
                    change = merged.manifest
            gen = base.generation + 1
            if not isinstance(change, Extend):
                gen = max(gen, generation_of(change))
            staged = _stage(
                store,
                node,
                base,
                change,
                format_version=fv,
                generation=gen,
                write_id=write_id,
                fresh=replaces,
            )
        except BaseException:
            if merged is not None:
                _drop_merged(store, node, merged)
            _discard(store, node, written, write_id)
            raise
        if parents and node:
            ensure_parents(store, node)
        known[0] = False
        refused = _put(store, node, base, staged, fv, label)
        known[0] = True
        if refused is not None and _landed(store, node, staged.head, write_id, staged.added):
            refused = None  # it landed; its reply was lost and the client's retry refused
        if refused is not None:
            store.delete(_key(node, p) for p in staged.segments)
            if merged is not None:  # merged from a base that is gone: a retry merges anew
                _drop_merged(store, node, merged)
            if attempt < retries:
                attempt += 1
                retry.backoff(attempt)  # bounded, counted (arrayds.nodes.retry)
                continue
            _discard(store, node, written, write_id)
            raise _conflict(label, base, refused) from None
        if merged is not None:
            _remove(store, node, merged.gone)
            for wid in merged.markers:
                pending.end(store, node, wid)
        if after is not None:
            after(base, staged.manifest(store, node))
        if replaces and base.exists and base.lazy_raw is not None:
            fresh = staged.fresh and base.kind != "group" and not clear
            new = None if fresh else staged.manifest(store, node)
            remove_replaced(
                store,
                node,
                base.lazy_raw,
                new,
                folders=clear,
                written_by=write_id if fresh else None,
            )
            _forget_history(store, node, staged.head)
        # an Extend commit returns its head as stored: resolving its segments here would
        # read the whole history back on every append (log.resolve gives the entries)
        return staged.new if staged.new is not None else staged.head


def _put(
    store: Store,
    node: str,
    base: NodeVersion,
    staged: _Staged,
    format_version: int,
    label: str,
) -> PreconditionFailedError | None:
    """The compare-and-swap of the head, which also keeps the head ``base`` in the
    node's history (:func:`_keep_version`) and makes the names of the new shard files
    durable before the new head is visible (the segments were written with ``put``,
    durable on return). Returns ``None`` if it landed, else the store's refusal (a
    refusal may still be this put's own retry: see :func:`_landed`).

    A put that fails otherwise (the store client gave up on transient errors) may or
    may not have landed: if a read shows it did, it is a success; else the error is
    raised with a note saying what state the node is in."""
    try:
        store.put_if_match(
            manifest_key(node),
            staged.data,
            base.version,
            keep=_keep_version(base, format_version),
            flush=[_key(node, p) for p in sorted(staged.added)],
        )
    except PreconditionFailedError as e:
        return e
    except Exception as e:
        write_id = str(staged.head.get("commit", ""))
        try:
            landed = _landed(store, node, staged.head, write_id, staged.added)
        except Exception:  # noqa: BLE001 - the store is still failing: say so
            e.add_note(
                f"{label}: the commit's outcome is unknown (the store failed during its "
                f"conditional put and on the read after it): it is either whole (its "
                f"manifest carries commit {write_id!r}) or not visible at all; its files "
                f"are kept (arrayds gc removes them if it did not land)"
            )
            raise
        if landed:
            return None
        e.add_note(
            f"{label}: not committed: the node is as before this write (its files are "
            f"kept until arrayds gc; the write may be retried)"
        )
        raise
    return None


def _landed(
    store: Store,
    node: str,
    head: Mapping[str, Any],
    write_id: str,
    added: Iterable[str] = (),
) -> bool:
    """Whether the head staged as ``head`` by the write ``write_id`` is committed: it
    is the node's head now, or one of the latest commits the head names (``recent``,
    :data:`RECENT_COMMITS`), or a later commit kept it as the version of its
    generation, or (that version file removed meanwhile by ``arrayds gc``) the node
    names one of the new files ``added`` this write wrote, which no other write can
    know of unless this one committed. A conditional put whose reply was lost is
    retried by the store client; the retry is refused (the object changed: by this
    very put), so a refusal is checked here before it is taken for a conflict."""
    if not write_id:
        return False
    what = store.display(node)
    data = store.get(manifest_key(node))  # the bytes only: no version token is needed
    now = parse_json(data, what) if data is not None else None
    if now is None:
        return False
    if landed_in(now, write_id):
        return True
    gen = generation_of(head)
    if generation_of(now) <= gen or gen < 1:
        return False
    kept = store.get(_key(node, log.version_key(gen)))
    if kept is None:  # removed by gc; later commits still name this write's new files
        # (unless a later merge rewrote them all: then this says "not landed"). Only the
        # files named after this write count: ``added`` also holds files of other
        # writes that this write's head lists anew (a merge re-encodes its base's
        # entries), which the node names whether or not this write landed.
        mine = {p for p in added if _named_after(p, write_id)}
        current = read(store, node).raw if mine else None
        return current is not None and bool(mine & referenced_files(current))
    try:
        return parse_json(kept, what).get("commit") == write_id
    except CorruptionError:
        return False


def _named_after(rel: str, write_id: str) -> bool:
    """Whether the file ``rel`` (relative to a node, perhaps through a member's folder)
    is a shard named after ``write_id`` (:func:`arrayds.nodes.pending.write_id_of`).

    >>> _named_after("x/c/0661702927ec82393c249537-0.array_record", "0661702927ec82393c249537")
    True
    >>> _named_after("c/0661702927ec82393c249537-0.array_record", "0661702927ec82393c24953f")
    False
    """
    parts = rel.split("/")
    return any(pending.write_id_of("/".join(parts[-n:])) == write_id for n in (2, 1))


def upgrade(store: Store, node: str, summary: Sequence[str] = ("records",)) -> bool:
    """Store ``node`` in the newest format version (:data:`NEWEST`), one commit of the
    same manifest; returns whether it changed anything (``False``: already newest).
    Readers of an older arrayds then get a clear "newer format" error: upgrade only
    once every reader of the dataset runs this release. A node in the newest version
    whose shard list has segments written before segment summaries (references
    without one of the keys ``summary``, those its kind reads by:
    :func:`arrayds.nodes.history.needs_index`) gets its list written anew with them,
    the same entries (older releases read it as before).

    >>> from arrayds.storage import new_store
    >>> st = new_store("memory://commit-upgrade-doc")
    >>> _ = commit(st, "", lambda b: {"format": "arrayds", "kind": "group", "attrs": {}},
    ...            write_id="w1", format_version=1)
    >>> read(st, "").format_version, upgrade(st, ""), read(st, "").format_version
    (1, True, 2)
    """
    base = read(store, node)
    if not base.exists:
        raise FileNotFoundError(f"no arrayds node at {base.what}")
    reindex = base.head is not None and log.needs_index(base.head, summary)
    if base.format_version >= NEWEST and not reindex:
        return False

    def same(b: NodeVersion) -> dict[str, Any]:
        raw = b.raw or {}
        if reindex and isinstance(raw.get("shards"), list):
            return {**raw, "shards": log.Fresh(raw["shards"])}
        return raw

    commit(
        store,
        node,
        same,
        write_id=new_write_id(),
        parents=False,
        format_version=NEWEST,
        check=lambda b: _same(b, base),
    )
    return True


def _same(now: NodeVersion, planned: NodeVersion) -> None:
    if now.stamp != planned.stamp:
        raise CommitConflictError(
            f"{planned.what}: another writer committed while it was "
            f"being upgraded; nothing was changed"
        )


def forget_history(store: Store, node: str) -> None:
    """Remove the history of ``node`` (its kept versions and the segments its current
    head does not name): a node replaced whole (mode ``"w"``) starts a new history.
    Best effort; ``arrayds gc`` removes what is left."""
    head = read(store, node).head
    _forget_history(store, node, head or {})


def _forget_history(store: Store, node: str, head: Mapping[str, Any]) -> None:
    try:
        keep = log.log_files(store, node, head)
        if not keep:  # the markers of the writes under way stay (arrayds.nodes.pending)
            store.delete_prefix(_key(node, log.LOG_DIR))
            store.delete_prefix(_key(node, log.VERSIONS_DIR))
            return
        doomed = [
            k
            for k, _, _ in store.list(_key(node, log.META_DIR))
            if k[len(node) + 1 if node else 0 :] not in keep
            and not k.startswith(_key(node, pending.WRITES_DIR + "/"))
        ]
        store.delete(doomed)
    except Exception:  # noqa: BLE001 - best effort
        pass


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
    names of the files it adds are made durable before it is visible (the ``flush``
    of :meth:`Store.put_if_match`). An
    empty generation-1 group (a missing parent) over a group writes nothing: the goal
    is met.

    >>> from arrayds.storage import new_store
    >>> st = new_store("memory://commit-replace-doc")
    >>> replace(st, "", {"kind": "group", "generation": 3, "attrs": {"a": 1}})
    True
    >>> replace(st, "", {"kind": "group", "generation": 2})
    Traceback (most recent call last):
    ...
    arrayds.errors.CommitConflictError: memory://commit-replace-doc: another writer ...
    """
    base = read(store, node)
    cur = base.head.get("generation") if base.head is not None else None
    want = manifest.get("generation")
    counted = isinstance(cur, int) and not isinstance(cur, bool) and isinstance(want, int)
    if counted and want <= cur:
        if _is_empty_group(manifest) and base.kind == "group":
            return False
        raise CommitConflictError(
            f"{base.what}: another writer committed generation {cur} while "
            f"this write prepared generation {want}; nothing of this write is visible"
        )
    try:
        before = referenced_files(base.raw) if base.raw else set()
    except CorruptionError:  # a damaged node being repaired: flush every name
        before = set()
    added = [_key(node, p) for p in sorted(referenced_files(manifest) - before)]
    try:
        store.put_if_match(manifest_key(node), dump_json(manifest), base.version, flush=added)
    except PreconditionFailedError as e:
        if base.raw is None and _is_empty_group(manifest) and read(store, node).kind == "group":
            return False
        raise _conflict(f"{base.what}", base, e) from None
    return True


def put_if_newer(
    store: Store,
    node: str,
    manifest: Mapping[str, Any],
    tries: int = 8,
    files_id: str | None = None,
) -> bool:
    """Write ``manifest`` at ``node`` unless the manifest there has the same or a
    larger generation (compare-and-swap, retried while others race): the roll forward
    of members a group snapshot lists. Returns whether it wrote. The segments it
    writes are named after ``files_id``, a write whose pending marker is held (the
    commit of the group it runs in); without one, after a write id of its own whose
    marker it puts and removes."""
    want = generation_of(manifest)
    write_id = manifest.get("commit") if isinstance(manifest.get("commit"), str) else ""
    own = files_id is None
    files_id = files_id or pending.begin(store, node)
    try:
        for _ in range(tries):
            base = read(store, node)
            if base.exists and base.generation >= want:
                return False
            fv = base.format_version if base.exists else NEWEST
            staged = _stage(
                store,
                node,
                base,
                manifest,
                format_version=fv or NEWEST,
                generation=want,
                write_id=str(write_id),
                files_id=files_id,
            )
            refused = _put(store, node, base, staged, fv, store.display(node))
            if refused is None or _landed(store, node, staged.head, str(write_id)):
                return True
            store.delete(_key(node, p) for p in staged.segments)
        return False
    finally:
        if own:
            pending.end(store, node, files_id)


def _group_json() -> dict[str, Any]:
    """The manifest of an empty group (docs/spec.md: the parents of a node are groups)."""
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": "group",
        "generation": 0,
        "commit": "",
        "attrs": {},
    }


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
            doc = dict(
                _group_json(),
                format_version=NEWEST,
                generation=1,
                commit=new_write_id(),
                time=log.now(),
            )
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


def _in_use(store: Store, node: str) -> set[str]:
    """The files (relative to ``node``) its current version and the versions its
    history keeps reference."""
    cur = read(store, node)
    out = referenced_files(cur.raw) if cur.raw is not None else set()
    for g in _kept_generations(store, cur) if cur.exists else ():
        head = _version_head(store, node, g)
        raw = NodeVersion(store, node, head, _HISTORIC).raw if head is not None else None
        out |= referenced_files(raw) if raw is not None else set()
    return out


def child_nodes(store: Store, node: str) -> list[str]:
    """The names (sorted) of the folders directly below ``node`` that hold a manifest."""
    return [
        c
        for c in store.list_dir(node)
        if not is_reserved_name(c) and store.exists(manifest_key(join_component(node, c)))
    ]


def remove_replaced(
    store: Store,
    node: str,
    old: Mapping[str, Any],
    new: Mapping[str, Any] | None,
    *,
    folders: Iterable[str] = (),
    written_by: str | None = None,
) -> None:
    """After a commit replaced ``old`` with ``new`` at ``node``: remove the files only
    ``old`` referenced and, if ``old`` was a group, its child nodes that ``new`` does
    not use. ``old``'s stored shard lists are read one segment at a time (a manifest
    as :attr:`NodeVersion.lazy_raw` gives it: a list of a million entries is never in
    memory at once). ``written_by``: ``new`` names only files of that write (a fresh
    :class:`Extend`), which are kept without reading ``new``'s list (``new`` may then
    be ``None``). ``folders`` (relative to the node): also remove every other file
    below them that no version of the node references (files of writes that never
    committed), as ``arrayds gc`` does: never a file of a write under way (listed,
    then the pending markers, then the versions: :mod:`arrayds.nodes.pending`). Best
    effort: what is left is an orphan (no reader sees it; ``arrayds gc`` removes it).
    """
    try:
        keep = referenced_files(new) if new is not None else set()
        for files in _file_runs(old):
            # a forged old manifest may name any key: only plain files inside the node go
            doomed = {
                p
                for p in files - keep
                if is_node_file(p) and (written_by is None or pending.write_id_of(p) != written_by)
            }
            if doomed:
                store.delete(sorted(_key(node, p) for p in doomed))
        start = len(node) + 1 if node else 0
        listed = {k[start:] for f in folders for k, _, _ in store.list(_key(node, f))}
        if listed:
            running = pending.live(store, [node]).ids
            used = keep | _in_use(store, node)
            doomed = {p for p in listed - used if pending.write_id_of(p) not in running}
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
                store.delete([k for k, _, _ in store.list(folder) if k[start:] not in keep])
    except Exception:  # noqa: BLE001 - best effort
        pass
