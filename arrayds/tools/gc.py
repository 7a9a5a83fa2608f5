"""``arrayds gc``: :func:`collect_garbage` expires old versions and removes the shard
files no retained version references.

Shard files are left behind by failed or killed writes, or stay referenced only by
versions of the history that have expired (format 2 keeps every commit as a version:
:func:`arrayds.versions`). A write that is still running has uploaded shards (and
manifest segments) its commit has not referenced yet: they are named after its write
id, and the write keeps a pending marker in its node until its commit's outcome is
known (:mod:`arrayds.nodes.pending`). gc lists the files first, then the markers, then
reads the manifests, and never removes a file of a write whose marker is there, so it
runs safely beside writers, also with ``min_age=0``. Only names the shard grammar
produces are removed, and only in folders a node owns: its own folder, and the folder
its kind keeps its shards in (:attr:`arrayds.nodes.registry.NodeKind.shard_folder`).
Everything goes through the Store protocol (``list``, ``delete``) and
:func:`arrayds.nodes.commit.read`.

>>> import arrayds, numpy as np
>>> _ = arrayds.to_arrayrecord(np.arange(4), "memory://doc-gc0", chunks=2)
>>> collect_garbage("memory://doc-gc0", min_age=0).referenced
1
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from ..abc.store import Store
from ..errors import CorruptionError
from ..nodes import commit, pending
from ..nodes import history as log
from ..nodes import registry as kinds
from ..nodes.names import FORMAT, FORMAT_VERSION, MANIFEST, parse_shard_name
from .walk import open_root

__all__ = ["DEFAULT_RETENTION", "GcReport", "collect_garbage", "is_shard_name"]

DEFAULT_RETENTION = 7 * 24 * 3600.0
"""Seconds a replaced version is kept when neither ``keep_versions`` nor
``older_than`` is given (7 days, Delta Lake VACUUM's default retention)."""


@dataclass
class GcReport:
    """What :func:`collect_garbage` removed (or, with ``dry_run``, would remove)."""

    url: str
    dry_run: bool
    min_age: float
    referenced: int = 0
    removed: list[str] = field(default_factory=list)
    removed_bytes: int = 0
    kept_young: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    under_way: list[str] = field(default_factory=list)
    """Unreferenced files kept because the write they belong to is under way (its
    pending marker is there: :mod:`arrayds.nodes.pending`)."""
    abandoned: list[str] = field(default_factory=list)
    """The markers of writes older than ``max_write_age`` (crashed writers), removed
    (or that a dry run would remove); their files are removed as any orphan."""
    max_write_age: float = pending.MAX_WRITE_AGE
    keep_versions: int | None = None
    older_than: float | None = None
    """The retention applied (seconds; ``None`` with ``keep_versions`` alone)."""
    versions_kept: int = 0
    """Versions retained, the current ones included, over all nodes."""
    expired: list[str] = field(default_factory=list)
    """The version files removed (or that a dry run would remove): expired versions."""
    expired_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "dry_run": self.dry_run,
            "min_age_seconds": self.min_age,
            "keep_versions": self.keep_versions,
            "older_than_seconds": self.older_than,
            "referenced": self.referenced,
            "versions_kept": self.versions_kept,
            "expired": self.expired,
            "expired_bytes": self.expired_bytes,
            "removed": self.removed,
            "removed_bytes": self.removed_bytes,
            "kept_young": self.kept_young,
            "protected": self.protected,
            "max_write_age_seconds": self.max_write_age,
            "under_way": self.under_way,
            "abandoned": self.abandoned,
        }


@dataclass
class _Scan:
    """What the manifests under a root keep: the node folders and their kinds, every
    file a retained version references (shards and manifest segments), the version
    files of expired versions, the folders whose manifests cannot be read."""

    nodes: dict[str, kinds.NodeKind] = field(default_factory=dict)
    referenced: set[str] = field(default_factory=set)
    segments: set[str] = field(default_factory=set)
    expired: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    versions_kept: int = 0


# Besides shard names (arrayds.nodes.names.parse_shard_name: docs/spec.md 6.1,
# spec-ragged.md and spec-records.md "Shard files", and their temporary names
# "<shard name>.<12 hex>.tmp"), gc removes the temporary manifests of local commits,
# ".arrayds.json.<12 hex>.tmp", from a node's own folder.
_MANIFEST_TMP = re.compile(rf"\.{re.escape(MANIFEST)}\.[0-9a-f]{{12}}\.tmp")


def is_shard_name(rel: str, kind: kinds.NodeKind) -> bool:
    """Whether ``rel`` (a file path relative to the folder of a node of ``kind``) is
    a name that an arrayds write produces there: a records shard (also Beam's
    per-bundle names) or a temporary manifest in the node's folder, an array or
    ragged shard in the kind's shard folder.

    >>> array = kinds.get("array")
    >>> is_shard_name("c/" + "ab" * 12 + "-0.array_record", array), is_shard_name("c/x", array)
    (True, False)
    """
    if _MANIFEST_TMP.fullmatch(rel):
        return True
    name = parse_shard_name(rel)
    return name is not None and name.folder in ("", kind.shard_folder)


def _parent(key: str) -> str:
    return key.rpartition("/")[0]


def _owned_candidate(key: str, nodes: Mapping[str, kinds.NodeKind]) -> bool:
    """Whether ``key`` is a shard-grammar name in a folder that a node owns: its own
    folder or its kind's shard folder."""
    head, _, name = key.rpartition("/")
    kind = nodes.get(head)
    if kind is not None:
        return is_shard_name(name, kind)
    parent, _, folder = head.rpartition("/")
    if not head:
        return False
    kind = nodes.get(parent)
    return kind is not None and is_shard_name(f"{folder}/{name}", kind)


@dataclass(frozen=True)
class _Retention:
    keep_versions: int | None
    older_than: float | None
    now: datetime


def _kept_versions(
    store: Store, folder: str, cur: commit.NodeVersion, gens: list[int], rule: _Retention
) -> tuple[list[commit.NodeVersion], list[int]]:
    """The retained versions of ``folder`` other than the current one ``cur`` (its
    history files: generations ``gens``), newest first, and the expired generations.
    Versions expire oldest first: walking from the newest, a version is kept while it
    is among the newest ``keep_versions`` (the current one counts) or was replaced
    (the next version committed) less than ``older_than`` seconds ago; the first one
    that is neither expires with every older one."""
    kept: list[commit.NodeVersion] = []
    replaced_at = cur.time
    cutoff = None if rule.older_than is None else rule.now - timedelta(seconds=rule.older_than)
    older = sorted((g for g in gens if g < cur.generation), reverse=True)
    for i, g in enumerate(older):
        by_count = rule.keep_versions is not None and i + 1 < rule.keep_versions
        by_age = cutoff is not None and (replaced_at is None or replaced_at > cutoff)
        if not (by_count or by_age):
            return kept, older[i:]
        nv = commit.read(store, folder, version=g)
        kept.append(nv)
        replaced_at = nv.time
    return kept, []


def _scan(store: Store, keys: list[str], rule: _Retention) -> _Scan:
    """Read every node's manifest and its retained versions (see :class:`_Scan`)."""
    scan = _Scan()
    history: dict[str, list[int]] = {}
    for key in keys:
        node = _node_of(key, log.VERSIONS_DIR)
        g = log.version_of_key(key) if node is not None else None
        if node is not None and g is not None:
            history.setdefault(node, []).append(g)
    for key in keys:
        if key.rpartition("/")[2] != MANIFEST:
            continue
        folder = _parent(key)
        try:
            base = commit.read(store, folder)
            raw = base.raw
            if raw is not None:
                kept, expired = _kept_versions(store, folder, base, history.get(folder, []), rule)
        except (CorruptionError, OSError, ValueError, UnicodeDecodeError):
            scan.protected.append(folder)
            continue
        if raw is None:  # removed since the listing
            continue
        try:
            kind = kinds.get(raw.get("kind"))
        except NotImplementedError:
            kind = None
        if raw.get("format") != FORMAT or kind is None:
            scan.protected.append(folder)
            continue
        version = raw.get("format_version")
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise NotImplementedError(
                f"{store.url_of(key)}: dataset format version {version} is newer than this "
                f"arrayds supports ({FORMAT_VERSION}); upgrade arrayds to collect its garbage "
                f"(nothing was removed)"
            )
        refs: set[str] = set()
        try:
            for nv in (base, *kept):
                assert nv.head is not None and nv.raw is not None
                refs |= commit.referenced_files(nv.raw) | log.log_files(store, folder, nv.head)
        except (CorruptionError, OSError, ValueError, UnicodeDecodeError):
            scan.protected.append(folder)
            continue
        scan.nodes[folder] = kind
        scan.versions_kept += 1 + len(kept)
        scan.referenced |= {_join(folder, rel) for rel in refs}
        scan.expired += [_join(folder, log.version_key(g)) for g in expired]
    return scan


def _retention(keep_versions: Any, older_than: Any) -> _Retention:
    """The checked retention rule (see :func:`collect_garbage`)."""
    if keep_versions is not None and (
        not isinstance(keep_versions, int) or isinstance(keep_versions, bool) or keep_versions < 0
    ):
        raise ValueError(f"keep_versions must be an int >= 0, got {keep_versions!r}")
    if isinstance(older_than, timedelta):
        older_than = older_than.total_seconds()
    if older_than is not None:
        if isinstance(older_than, bool) or not isinstance(older_than, (int, float)):
            raise TypeError(f"older_than must be seconds or a timedelta, got {older_than!r}")
        if not older_than >= 0:
            raise ValueError(f"older_than must be >= 0 seconds, got {older_than!r}")
        older_than = float(older_than)
    if keep_versions is None and older_than is None:
        older_than = DEFAULT_RETENTION
    return _Retention(keep_versions, older_than, datetime.now(timezone.utc))


def collect_garbage(
    url: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    dry_run: bool = False,
    min_age: float = 24 * 3600,
    keep_versions: int | None = None,
    older_than: float | timedelta | None = None,
    max_write_age: float | timedelta = pending.MAX_WRITE_AGE,
) -> GcReport:
    """Expire old versions and remove the shard files under ``url`` that no retained
    version references.

    **Versions** (format 2 nodes keep every commit: :func:`arrayds.versions`). The
    current version is always kept. Another version is kept if it is among the
    newest ``keep_versions`` versions of its node (the current one counts, so 1 keeps
    only it) or was replaced less than ``older_than`` ago (seconds or a
    ``timedelta``; a version's age counts from the commit of the version after it,
    the moment it stopped being current, as Delta Lake counts a removed file's age
    from the commit that removed it). With neither given, versions replaced less than
    7 days ago are kept (:data:`DEFAULT_RETENTION`, Delta Lake VACUUM's default: a
    reader that opened the dataset before a commit, or a job that pins a version for
    reproducibility, keeps reading for a week); ``older_than=0`` with no
    ``keep_versions`` keeps only the current versions. Versions expire oldest first:
    the versions kept are always the newest ones. An expired version's file
    (``_arrayds/versions/<generation>.json``) is removed, then every manifest
    segment (``_arrayds/log/*``) and shard file that no kept version names; reading
    an expired version is a ``ValueError`` naming the versions kept.

    **Files.** Every manifest under ``url`` is read (group snapshots included) with
    its kept versions. A file is removed only if its name is one an arrayds write
    produces in that place
    (docs/spec.md 6.1: ``c/<write id>-<n>.array_record`` of an array or ragged node,
    ``<stem>.array_record-<i>-of-<n>`` in a records node's folder, and the temporary
    files of killed local writes), no manifest names it, the write it is named after
    is not under way, and it is older than ``min_age`` seconds. Other files are never
    touched, wherever they are.

    **Writes under way.** A write keeps a pending marker
    (``_arrayds/writes/<write id>.json``, docs/spec.md 15) in its node from before its
    first file until its commit's outcome is known. gc lists the files, then the
    markers, then reads the manifests, and keeps every file of a write whose marker
    it found (``under_way``): a write's files are safe from gc however long it runs or
    retries, and ``min_age=0`` is safe beside running writers of this release.
    ``min_age`` (default 24 hours) is kept as a margin for writers of older releases,
    which put no markers. A marker older than ``max_write_age`` (seconds or a
    ``timedelta``, default :data:`arrayds.nodes.pending.MAX_WRITE_AGE`, 7 days) is
    taken for one a crashed writer left: it is removed (``abandoned``) and the files
    of its write are then orphans like any other.
    Shards below a manifest that cannot be parsed (or of a kind this arrayds does not
    know) are never removed (``protected``); a manifest of a newer format version is
    a ``NotImplementedError`` and nothing is removed. ``dry_run`` only reports
    (``expired``: the version files, ``removed``: the other files).

    >>> import arrayds, numpy as np
    >>> _ = arrayds.to_arrayrecord(np.arange(4), "memory://doc-gc", chunks=2)
    >>> _ = arrayds.to_arrayrecord(np.arange(4) * 2, "memory://doc-gc", mode="w", chunks=2)
    >>> collect_garbage("memory://doc-gc", min_age=0).removed
    []
    >>> a = arrayds.open_array("memory://doc-gc", mode="r+")
    >>> a[:] = [7, 7, 7, 7]  # version 2 replaces the shard: version 1 still needs it
    >>> r = collect_garbage("memory://doc-gc", min_age=0, older_than=0)
    >>> len(r.expired), len(r.removed), arrayds.versions("memory://doc-gc")[0].generation
    (1, 1, 3)
    """
    rule = _retention(keep_versions, older_than)
    if isinstance(max_write_age, timedelta):
        max_write_age = max_write_age.total_seconds()
    if isinstance(max_write_age, bool) or not isinstance(max_write_age, (int, float)):
        raise TypeError(f"max_write_age must be seconds or a timedelta, got {max_write_age!r}")
    if not max_write_age >= 0:
        raise ValueError(f"max_write_age must be >= 0 seconds, got {max_write_age!r}")
    store, _node = open_root(url, storage_options, None)
    report = GcReport(
        store.url,
        dry_run,
        float(min_age),
        keep_versions=rule.keep_versions,
        older_than=rule.older_than,
        max_write_age=float(max_write_age),
    )
    # the order is what makes it safe beside writers (arrayds.nodes.pending): the
    # files, then the markers of the writes under way, then the manifests
    files = store.list("")
    keys = [key for key, _size, _mt in files]
    writes = pending.live(store, _node_folders(keys), float(max_write_age))
    scan = _scan(store, keys, rule)
    referenced = scan.referenced
    report.referenced = len(referenced - {k for k in referenced if _is_segment(k)})
    report.protected = [store.url_of(p) for p in scan.protected]
    report.versions_kept = scan.versions_kept
    sizes = {key: size for key, size, _mt in files}
    report.expired = [store.url_of(k) for k in scan.expired]
    report.expired_bytes = sum(sizes.get(k, 0) for k in scan.expired)
    now = time.time()
    doomed: list[str] = list(scan.expired)
    nodes, protected = scan.nodes, scan.protected
    for key, size, mt in sorted(files):
        if key in referenced or not (_owned_candidate(key, nodes) or _is_segment_of(key, nodes)):
            continue
        if any(not p or key.startswith(p + "/") for p in protected):
            continue
        shown = store.url_of(key)
        if _under_way(key, writes):
            report.under_way.append(shown)
            continue
        if min_age > 0 and (mt is None or now - mt < min_age):
            report.kept_young.append(shown)
            continue
        doomed.append(key)
        report.removed.append(shown)
        report.removed_bytes += size
    report.abandoned = [store.url_of(k) for k in writes.expired]
    if not dry_run and doomed:
        # the version files first: a reader never finds a version whose files are gone
        store.delete(scan.expired)
        store.delete(doomed[len(scan.expired) :])
    if not dry_run:
        store.delete(writes.expired)  # after their files
    return report


def _on_one_path(a: str, b: str) -> bool:
    """Whether the folders ``a`` and ``b`` are the same or one is below the other."""
    return not a or not b or a == b or a.startswith(b + "/") or b.startswith(a + "/")


def _node_folders(keys: list[str]) -> set[str]:
    """The folders that hold a manifest among ``keys`` and every folder above them:
    where the writers of the nodes found keep their markers (a snapshot's write keeps
    its marker in its group, above the member arrays whose files it writes)."""
    out: set[str] = set()
    for key in keys:
        folder, _, name = key.rpartition("/")
        if name != MANIFEST:
            continue
        parts = folder.split("/") if folder else []
        out |= {"/".join(parts[:i]) for i in range(len(parts) + 1)}
    return out


def _under_way(key: str, writes: pending.Live) -> bool:
    """Whether ``key`` belongs to a write whose marker ``writes`` found: a file named
    after its write id, or a local commit's temporary manifest in a folder on the path
    of the node of a marker (a commit holds its marker while it stages and puts its
    manifest, creates the missing groups above its node and rolls the members of a
    group snapshot forward below it)."""
    if _MANIFEST_TMP.fullmatch(key.rpartition("/")[2]):
        folder = _parent(key)
        return any(_on_one_path(folder, f) for f in writes.folders)
    parts = key.split("/")
    for n in (3, 2, 1):  # <node>/_arrayds/log/<segment>, <node>/c/<shard>, <node>/<shard>
        wid = pending.write_id_of("/".join(parts[-n:])) if len(parts) >= n else None
        if wid is not None:
            return wid in writes.ids
    return False


def _join(folder: str, rel: str) -> str:
    """The key of ``rel`` (a path a manifest names) inside the node ``folder``."""
    return f"{folder}/{rel}" if folder else rel


def _node_of(key: str, meta_folder: str) -> str | None:
    """The node whose ``meta_folder`` (``_arrayds/log``, ``_arrayds/versions``) holds
    the file ``key`` directly, or ``None``."""
    folder, _, name = key.rpartition("/")
    if not name.endswith(".json"):
        return None
    if folder == meta_folder:
        return ""
    if folder.endswith("/" + meta_folder):
        return folder[: -len(meta_folder) - 1]
    return None


def _is_segment(key: str) -> bool:
    return _node_of(key, log.LOG_DIR) is not None


def _is_segment_of(key: str, nodes: Mapping[str, kinds.NodeKind]) -> bool:
    """Whether ``key`` is a manifest segment file (``<node>/_arrayds/log/<id>.json``)
    of a node under the root."""
    node = _node_of(key, log.LOG_DIR)
    return node is not None and node in nodes
