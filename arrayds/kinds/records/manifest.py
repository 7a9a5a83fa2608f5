"""The manifest of a records dataset: its serializer, group size, compression and
shard list (docs/spec.md, "Records datasets").

>>> from arrayds import records
>>> from arrayds.nodes.read import read_node
>>> from arrayds.storage import get_store
>>> _ = records.write_records([b"a", b"b", b"c"], "memory://doc-records-manifest")
>>> m = read_node(get_store("memory://doc-records-manifest"), "")
>>> m.kind, [s.num_records for s in m.shards]
('records', [3])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import CorruptionError
from ...files.data_source import SourceShard
from ...nodes import commit as node_commit
from ...nodes.history import ShardLog, segment
from ...nodes.names import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    is_reserved_name,
)
from ...nodes.read import check_version_args, locate
from ...storage.base import BaseStore as Store

if TYPE_CHECKING:
    pass

KIND = "records"


# ----------------------------------------------------------------------- manifest


_new_info = object.__new__


@dataclass(frozen=True)
class ShardInfo:
    """One shard of a records dataset, as the manifest lists it.

    Serialized as ``{"path", "records", "bytes", "data_bytes", "options"}``.
    """

    path: str
    """File name, relative to the dataset's node folder."""
    num_records: int
    file_size: int = 0
    """Size of the shard file in bytes."""
    data_bytes: int = 0
    """Total size of the encoded records, before compression."""
    options: str = ""
    """Canonical ArrayRecord writer options of the file."""

    @property
    def name(self) -> str:
        return self.path

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "records": self.num_records,
            "bytes": self.file_size,
            "data_bytes": self.data_bytes,
            "options": self.options,
        }

    @classmethod
    def from_json(cls, obj: Any, where: str) -> ShardInfo:
        try:
            path = obj["path"]
            n = obj["records"]
        except (KeyError, TypeError):
            raise CorruptionError(
                f"{where}: a records shard entry lacks 'path'/'records': {obj!r}"
            ) from None
        if (
            type(n) is int
            and n >= 0
            and type(path) is str
            and path[:1].isalnum()
            and path.isascii()
            and "/" not in path
            and "\\" not in path
            and path != MANIFEST
        ):
            # one segment that starts with an ASCII letter or digit: no empty, ".",
            # ".." or reserved name (all but the manifest's own start otherwise)
            size, data, options = (
                obj.get("bytes", 0),
                obj.get("data_bytes", 0),
                obj.get("options", ""),
            )
            if type(size) is int and type(data) is int and type(options) is str:
                info = _new_info(cls)  # the checked fields, set without five setattr calls
                info.__dict__.update(
                    path=path, num_records=n, file_size=size, data_bytes=data, options=options
                )
                return info
        if (
            not isinstance(path, str)
            or not path
            or "/" in path
            or "\\" in path
            or path in (".", "..")
            or is_reserved_name(path)
            or not isinstance(n, int)
            or isinstance(n, bool)
            or n < 0
        ):
            raise CorruptionError(f"{where}: invalid records shard entry {obj!r}")
        return cls(
            path,
            n,
            int(obj.get("bytes", 0)),
            int(obj.get("data_bytes", 0)),
            str(obj.get("options", "")),
        )


class LazyShards(Sequence["ShardInfo"]):
    """The shards of a records manifest, parsed and checked when first used: opening a
    dataset decodes its head and checks its fields, and a dataset grown by many appends
    (a shard list that many tiers keep) opens in about the time of a fresh one. A
    damaged entry, or entries that do not add up to ``total`` (the manifest's
    ``num_records``), raise :class:`CorruptionError` at the first use of the list
    (a read, ``shards``), before any shard is opened.

    >>> lst = LazyShards([{"path": "a", "records": 2}], 2, "doc")
    >>> len(lst), lst[0].num_records
    (1, 2)
    """

    __slots__ = ("_parsed", "_raw", "_total", "_where")

    def __init__(self, raw: Sequence[Any], total: int | None, where: str) -> None:
        self._raw = raw
        self._total = total
        self._where = where
        self._parsed: list[ShardInfo] | None = None

    def _shards(self) -> list[ShardInfo]:
        if self._parsed is None:
            shards = [ShardInfo.from_json(s, self._where) for s in self._raw]
            _check_total(shards, self._total, self._where)
            self._parsed = shards
        return self._parsed

    def __len__(self) -> int:
        return len(self._raw)

    def pages(self, store: Store, node: str) -> RecordPages | None:
        """The list as pages of segments, if it is stored in segments and not parsed
        whole yet (a read then loads only the segments it needs)."""
        raw = self._raw
        if self._parsed is not None or not isinstance(raw, ShardLog):
            return None
        return RecordPages(store, node, raw, self._total, self._where)

    def __getitem__(self, i: Any) -> Any:
        return self._shards()[i]

    def __iter__(self) -> Any:
        return iter(self._shards())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (LazyShards, list)):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"LazyShards({len(self)} shards)"


class RecordPages:
    """The shard files of a records dataset whose list is stored in segments, as
    pages for :class:`arrayds.files.data_source.ArrayRecordDataSource` (a
    :class:`arrayds.files.data_source.ShardPages`): each reference of the head a page
    (a segment; an index: a page of pages, one per segment), then the tail. A page's
    records come from its reference's ``records`` (a reference without one: what it
    stands for is loaded to count them); a read loads the indexes and segments its
    record indices lie in, each checked against its reference (a disagreeing one is a
    :class:`CorruptionError` naming it). Pickles as the head's references and the
    tail.

    >>> from arrayds.nodes.history import encode
    >>> from arrayds.storage import new_store
    >>> st = new_store("memory://doc-record-pages")
    >>> entries = [{"path": f"s{i}", "records": 2} for i in range(100)]
    >>> head, _ = encode(st, "", {"kind": "records", "shards": entries}, None)
    >>> pg = RecordPages(st, "", ShardLog(st, "", head["shards"], "doc"), 200, "doc")
    >>> pg.records, pg.files, pg.page(0)[99].stop
    ([200, 0], [100, 0], 2)
    """

    def __init__(self, store: Store, node: str, log: ShardLog, total: int | None, where: str):
        self._store, self._node, self._log, self._where_node = store, node, log, where
        refs = log.refs
        self.files: list[int] = [r["count"] if _count(r) else self._files_of(i)
                                 for i, r in enumerate(refs)] + [len(log.tail)]  # fmt: skip
        self.records: list[int] = [
            r["records"] if _count(r) and _is_n(r.get("records")) else self._records_of(i)
            for i, r in enumerate(refs)
        ] + [_sum(log.tail, where)]
        if total is not None and total != sum(self.records):
            raise CorruptionError(
                f"{where}: the manifest says num_records={total} but its shards hold "
                f"{sum(self.records)}"
            )
        self.where = store.url_of(node, "x")

    def _entries(self, ref: Any) -> list[Any]:
        return segment(self._store, self._node, ref, self._where_node)

    def _files_of(self, i: int) -> int:
        return sum(len(self._entries(r)) for r in self._log.held(i))

    def _records_of(self, i: int) -> int:
        return sum(
            r["records"]
            if _count(r) and _is_n(r.get("records"))
            else _sum(self._entries(r), self._where_node)
            for r in self._log.held(i)
        )

    def shards_of(self, entries: Sequence[Any]) -> list[SourceShard]:
        """The files of the manifest entries ``entries``, in order."""
        store, node = self._store, self._node
        size_of = (lambda s: None) if store.local else (lambda s: s.file_size or None)
        return [
            SourceShard(store.url_of(node, s.name), 0, s.num_records, size_of(s))
            for s in (ShardInfo.from_json(e, self._where_node) for e in entries)
        ]

    def entry(self, k: int) -> ShardInfo:
        """Shard ``k`` of the list, found by binary search on the references' counts
        (:meth:`arrayds.nodes.history.ShardLog.holding_entries`): only the index and
        the segment that hold it are loaded."""
        log = self._log
        seg, before, _ = log.holding_entries(np.array([k], dtype=np.int64))
        return ShardInfo.from_json(log.part(int(seg[0]))[k - int(before[0])], self._where_node)

    def page(self, p: int) -> list[SourceShard] | SegmentPages:
        log = self._log
        if p == len(log.refs):
            return self.shards_of(log.tail)
        if "refs" in log.refs[p]:
            return SegmentPages(self, log.held(p))
        return self.shards_of(self._entries(log.refs[p]))

    def listed(self) -> dict[str, Any]:
        """The stored list: the head's references and its tail (segments and indexes
        never change, so these name the list)."""
        return {"segments": self._log.refs, "tail": self._log.tail}

    def __reduce__(self) -> tuple[Any, ...]:
        stored = self.listed()
        return (_pages, (self._store, self._node, stored, sum(self.records), self._where_node))


class SegmentPages:
    """The segments of one index of a records dataset's list as pages (the page of
    pages :meth:`RecordPages.page` gives for an index): their files and records from
    their references, each loaded when a read first needs it."""

    def __init__(self, pages: RecordPages, refs: list[dict[str, Any]]) -> None:
        self._pages, self._refs = pages, refs
        self.files: list[int] = [r["count"] for r in refs]
        self.records: list[int] = [
            r["records"] if _is_n(r.get("records")) else _sum(pages._entries(r), pages.where)
            for r in refs
        ]
        self.where = pages.where

    def page(self, q: int) -> list[SourceShard]:
        return self._pages.shards_of(self._pages._entries(self._refs[q]))


def _pages(store: Store, node: str, stored: Any, total: int, where: str) -> RecordPages:
    return RecordPages(store, node, ShardLog(store, node, stored, where), total, where)


def _is_n(x: Any) -> bool:
    return type(x) is int and x >= 0


def _count(ref: Any) -> bool:
    return isinstance(ref, dict) and _is_n(ref.get("count"))


def _sum(entries: Sequence[Any], where: str) -> int:
    return sum(ShardInfo.from_json(e, where).num_records for e in entries)


def _check_total(shards: Sequence[ShardInfo], total: Any, where: str) -> None:
    if total is not None and total != sum(s.num_records for s in shards):
        raise CorruptionError(
            f"{where}: the manifest says num_records={total} but its shards hold "
            f"{sum(s.num_records for s in shards)}"
        )


@dataclass
class RecordsManifest:
    """The manifest of a records node (docs/spec.md, "Records datasets")."""

    serializer: str
    group_size: int
    compression: str
    shards: Sequence[ShardInfo]
    attrs: dict[str, Any] = field(default_factory=dict)
    generation: int = 0
    commit: str = ""
    total: int | None = field(default=None, compare=False)
    """``num_records`` as the manifest states it (known before the shards are parsed)."""

    kind = KIND

    @property
    def num_records(self) -> int:
        if isinstance(self.shards, LazyShards) and self.total is not None:
            return self.total
        return sum(s.num_records for s in self.shards)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "kind": KIND,
            "generation": self.generation,
            "commit": self.commit,
            "attrs": self.attrs,
            "serializer": self.serializer,
            "group_size": self.group_size,
            "compression": self.compression,
            "num_records": self.num_records,
            "shards": [s.to_json() for s in self.shards],
        }

    @classmethod
    def from_json(cls, man: Mapping[str, Any], where: str) -> RecordsManifest:
        if man.get("kind") != KIND:
            raise ValueError(
                f"{where} is a {man.get('kind', 'unknown')!r} node, not a records dataset"
            )
        if man.get("format") != FORMAT:
            raise CorruptionError(f"{where}: not an arrayds manifest ({MANIFEST})")
        version = man.get("format_version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise CorruptionError(f"{where}: manifest format_version {version!r} is invalid")
        if version > FORMAT_VERSION:
            raise NotImplementedError(
                f"{where}: dataset format version {version} is newer than this arrayds "
                f"supports ({FORMAT_VERSION}); upgrade arrayds"
            )
        ser = man.get("serializer")
        raw_shards = man.get("shards")
        if not isinstance(ser, str) or not isinstance(raw_shards, (list, ShardLog)):
            raise CorruptionError(
                f"{where}: a records manifest needs a 'serializer' string and a 'shards' list"
            )
        total = man.get("num_records")
        if total is not None and (
            not isinstance(total, int) or isinstance(total, bool) or total < 0
        ):
            raise CorruptionError(f"{where}: bad num_records {total!r}")
        shards = LazyShards(raw_shards, total, where)
        group_size = man.get("group_size", 1)
        gen = man.get("generation", 0)
        attrs = man.get("attrs", {})
        if not isinstance(group_size, int) or group_size < 1:
            raise CorruptionError(f"{where}: bad group_size {group_size!r}")
        if not isinstance(gen, int) or gen < 0:
            raise CorruptionError(f"{where}: bad generation {gen!r}")
        if not isinstance(attrs, dict):
            raise CorruptionError(f"{where}: manifest field 'attrs' must be an object")
        return cls(
            ser,
            group_size,
            str(man.get("compression", "")),
            shards,
            dict(attrs),
            gen,
            str(man.get("commit", "")),
            total,
        )


def load_manifest(
    url: str,
    component: str | None,
    storage_options: Mapping[str, Any] | None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> tuple[Store, str, RecordsManifest]:
    store, node = locate(url, component, storage_options, "a records dataset")
    check_version_args(version, as_of, "r", f"records dataset {store.display(node)}")
    # the shard list as a ShardLog: the open reads the head only
    man = node_commit.read(store, node, version=version, as_of=as_of).lazy_raw
    where = store.display(node)
    if man is None:
        raise FileNotFoundError(f"no records dataset at {where} (no {MANIFEST})")
    return store, node, RecordsManifest.from_json(man, where)


def is_records(
    url: str, component: str | None = None, *, storage_options: Mapping[str, Any] | None = None
) -> bool:
    """True when ``url`` (+ ``component``) is a records dataset.

    Example:
        >>> import tempfile
        >>> from arrayds import records
        >>> records.is_records(tempfile.mkdtemp())
        False
    """
    try:
        store, node = locate(url, component, storage_options, "a records dataset")
        man = node_commit.read(store, node).raw
    except (OSError, ValueError):
        return False
    return man is not None and man.get("kind") == KIND


def head_serializer(head: Mapping[str, Any], where: str) -> str:
    """The serializer a records manifest names, read from its stored head alone (no
    shard entry is parsed): ``ValueError`` if the node is not a records dataset."""
    if head.get("kind") != KIND:
        raise ValueError(
            f"{where} is a {head.get('kind', 'unknown')!r} node, not a records dataset"
        )
    ser = head.get("serializer")
    if not isinstance(ser, str):
        raise CorruptionError(f"{where}: a records manifest needs a 'serializer' string")
    return ser


def head_count(head: Mapping[str, Any], where: str) -> int:
    n = head.get("num_records")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise CorruptionError(f"{where}: manifest field 'num_records' has a bad value {n!r}")
    return n


def head_attrs(head: Mapping[str, Any], where: str) -> dict[str, Any]:
    attrs = head.get("attrs", {})
    if not isinstance(attrs, dict):
        raise CorruptionError(f"{where}: manifest field 'attrs' must be an object")
    return attrs
