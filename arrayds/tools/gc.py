"""``arrayds gc``: :func:`collect_garbage` removes shard files no manifest references.

They are left behind by failed or killed writes, or by replaced data. Files younger
than ``min_age`` are kept, because a write that is still running has uploaded shards
its commit has not referenced yet. Only names the shard grammar produces are removed,
and only in folders a node owns: its own folder, and the folder its kind keeps its
shards in (:attr:`arrayds.nodes.kinds.NodeKind.shard_folder`). Everything goes through
the Store protocol (``list``, ``delete``) and :func:`arrayds.nodes.commit.read`.

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
from typing import Any

from ..abc.store import Store
from ..errors import CorruptionError
from ..manifest import FORMAT, FORMAT_VERSION
from ..nodes import commit, kinds
from ..store import MANIFEST, join_component
from .walk import open_root

__all__ = ["GcReport", "collect_garbage", "is_shard_name"]


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

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "dry_run": self.dry_run,
            "min_age_seconds": self.min_age,
            "referenced": self.referenced,
            "removed": self.removed,
            "removed_bytes": self.removed_bytes,
            "kept_young": self.kept_young,
            "protected": self.protected,
        }


# Shard names as the writers produce them (docs/spec.md 6.1, spec-ragged.md and
# spec-records.md "Shard files"), and the temporary names of local writes: a shard
# being written is "<shard name>.<12 hex>.tmp", a manifest ".arrayds.json.<12 hex>.tmp".
_WRITE_ID = r"[0-9a-f]{24}"
_NUM = r"(?:0|[1-9][0-9]*)"
_TMP = r"(?:\.[0-9a-f]{12}\.tmp)?"
_NODE_FOLDER_NAMES = re.compile(
    rf"[A-Za-z0-9_.-]+-{_WRITE_ID}(?:-[0-9a-f]{{12}})?"  # Beam: one per bundle attempt
    rf"\.array_record-[0-9]{{5,}}-of-[0-9]{{5,}}{_TMP}"
    rf"|\.{re.escape(MANIFEST)}\.[0-9a-f]{{12}}\.tmp"
)
_SHARD_FOLDER_NAMES = re.compile(rf"{_WRITE_ID}-{_NUM}(?:-{_NUM})?\.array_record{_TMP}")


def is_shard_name(rel: str, kind: kinds.NodeKind) -> bool:
    """Whether ``rel`` (a file path relative to the folder of a node of ``kind``) is
    a name that an arrayds write produces there: a records shard (also Beam's
    per-bundle names) or a temporary manifest in the node's folder, an array or
    ragged shard in the kind's shard folder.

    >>> array = kinds.get("array")
    >>> is_shard_name("c/" + "ab" * 12 + "-0.array_record", array), is_shard_name("c/x", array)
    (True, False)
    """
    parts = rel.split("/")
    if len(parts) == 1:
        return _NODE_FOLDER_NAMES.fullmatch(parts[0]) is not None
    return (
        len(parts) == 2
        and kind.shard_folder is not None
        and parts[0] == kind.shard_folder
        and _SHARD_FOLDER_NAMES.fullmatch(parts[1]) is not None
    )


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


def _nodes(store: Store, keys: list[str]) -> tuple[dict[str, kinds.NodeKind], set[str], list[str]]:
    """({node folder: kind}, every key a manifest references, the folders whose
    manifest cannot be read or is of an unknown kind)."""
    nodes: dict[str, kinds.NodeKind] = {}
    referenced: set[str] = set()
    protected: list[str] = []
    for key in keys:
        if key.rpartition("/")[2] != MANIFEST:
            continue
        folder = _parent(key)
        try:
            raw = commit.read(store, folder).raw
        except (CorruptionError, OSError, ValueError, UnicodeDecodeError):
            protected.append(folder)
            continue
        if raw is None:  # removed since the listing
            continue
        try:
            kind = kinds.get(raw.get("kind"))
        except NotImplementedError:
            kind = None
        if raw.get("format") != FORMAT or kind is None:
            protected.append(folder)
            continue
        version = raw.get("format_version")
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise NotImplementedError(
                f"{store.url_of(key)}: dataset format version {version} is newer than this "
                f"arrayds supports ({FORMAT_VERSION}); upgrade arrayds to collect its garbage "
                f"(nothing was removed)"
            )
        nodes[folder] = kind
        referenced |= {join_component(folder, rel) for rel in commit.referenced_files(raw)}
    return nodes, referenced, protected


def collect_garbage(
    url: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    dry_run: bool = False,
    min_age: float = 24 * 3600,
) -> GcReport:
    """Remove the shard files under ``url`` that no manifest references.

    Every manifest under ``url`` is read (group snapshots included). A file is
    removed only if its name is one an arrayds write produces in that place
    (docs/spec.md 6.1: ``c/<write id>-<n>.array_record`` of an array or ragged node,
    ``<stem>.array_record-<i>-of-<n>`` in a records node's folder, and the temporary
    files of killed local writes), no manifest names it, and it is older than
    ``min_age`` seconds (default 24 hours: a write that is still running has uploaded
    shards that its commit will reference only at the end — use ``min_age=0`` only
    when no write is running). Other files are never touched, wherever they are.
    Shards below a manifest that cannot be parsed (or of a kind this arrayds does not
    know) are never removed (``protected``); a manifest of a newer format version is
    a ``NotImplementedError`` and nothing is removed. ``dry_run`` only reports.

    >>> import arrayds, numpy as np
    >>> _ = arrayds.to_arrayrecord(np.arange(4), "memory://doc-gc", chunks=2)
    >>> _ = arrayds.to_arrayrecord(np.arange(4) * 2, "memory://doc-gc", mode="w", chunks=2)
    >>> collect_garbage("memory://doc-gc", min_age=0).removed
    []
    """
    store, _node = open_root(url, storage_options, None)
    report = GcReport(store.url, dry_run, float(min_age))
    files = store.list("")
    nodes, referenced, protected = _nodes(store, [key for key, _size, _mt in files])
    report.referenced = len(referenced)
    report.protected = [store.url_of(p) for p in protected]
    now = time.time()
    doomed: list[str] = []
    for key, size, mt in sorted(files):
        if key in referenced or not _owned_candidate(key, nodes):
            continue
        if any(not p or key.startswith(p + "/") for p in protected):
            continue
        shown = store.url_of(key)
        if min_age > 0 and (mt is None or now - mt < min_age):
            report.kept_young.append(shown)
            continue
        doomed.append(key)
        report.removed.append(shown)
        report.removed_bytes += size
    if not dry_run and doomed:
        store.delete(doomed)
    return report
