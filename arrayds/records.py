"""Records datasets: sequences of objects stored as plain ArrayRecord shards.

A records dataset is a node of kind ``"records"`` (docs/spec.md, "Records datasets"):
a manifest naming the serializer, the group size, the compression and every shard
with its record count, plus the shard files themselves, named the way TFDS and Grain
expect (``<name>-<write id>.array_record-00000-of-00008``).  Opening reads the manifest
only.  Shards are immutable: appending (``mode="a"``) adds new shards under a new
write id and commits a new manifest atomically; replacing (``mode="w"``) commits a
manifest that lists only new shards.

* :func:`write_records` — a ``dask.bag.Bag`` (one shard per partition, one task each,
  plus one commit task) or a list (``num_shards`` shards).  ``compute=False`` returns
  a ``dask.delayed.Delayed``.  ``arrayds.to_arrayrecord`` dispatches here.
* :func:`read_records` — a ``dask.bag.Bag`` with one partition per shard, in order,
  decoded with the stored serializer.  ``arrayds.from_arrayrecord`` dispatches here.
* :func:`open_records` — a :class:`RecordsDataset` handle (counts, shard paths,
  ``to_bag()``, ``data_source()``).
* :func:`data_source` — an :class:`arrayds.ArrayRecordDataSource` with global random
  access across the shards (``ArrayRecordDataSource(url)`` does the same through the
  resolver registered here).

Example:
    >>> import os, tempfile, numpy as np
    >>> from arrayds import records
    >>> url = os.path.join(tempfile.mkdtemp(), "train")
    >>> items = [{"id": i, "x": np.full(3, i, dtype=np.float32)} for i in range(10)]
    >>> ds = records.write_records(items, url, num_shards=2)
    >>> ds
    RecordsDataset(..., 10 records in 2 shards, serializer='msgpack')
    >>> records.read_records(url).compute(scheduler="sync")[3]["x"]
    array([3., 3., 3.], dtype=float32)
    >>> src = records.data_source(url, decode=True)
    >>> len(src), src[7]["id"]
    (10, 7)
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np

from . import serializers as _ser
from .arrayrecord import (
    ArrayRecordDataSource,
    ArrayRecordReader,
    ResolvedSource,
    SourceShard,
)
from .coalesce import coalesce_options
from .errors import CorruptionError
from .manifest import FORMAT, FORMAT_VERSION
from .node import Pin, check_version_args
from .nodes import commit as node_commit
from .nodes import kinds, log
from .retry import APPEND_RETRIES, check_retries
from .serializers import Serializer, SerializerSpec
from .storage import get_store
from .store import (
    MANIFEST,
    Store,
    check_component,
    is_reserved_name,
    new_write_id,
    node_shard_reader,
    shard_writer,
)

if TYPE_CHECKING:  # pragma: no cover
    import dask.bag
    from dask.delayed import Delayed

__all__ = [
    "RecordsDataset",
    "ShardInfo",
    "data_source",
    "is_records",
    "open_records",
    "read_records",
    "write_from_sources",
    "write_records",
]

KIND = "records"
_ENCODE_BATCH = 4096
_MODES = ("w-", "w", "a")


# ----------------------------------------------------------------- storage helpers


def _locate(
    url: str, component: str | None, storage_options: Mapping[str, Any] | None
) -> tuple[Store, str]:
    """-> (store of the dataset root, node name inside it)."""
    if isinstance(url, os.PathLike):
        url = os.fspath(url)
    if not isinstance(url, str):
        raise TypeError(f"a records dataset URL must be a str or path, got {type(url).__name__}")
    return get_store(url, storage_options), check_component(component)


def _write_stream(
    store: Store,
    node: str,
    name: str,
    batches: Iterable[list[bytes]],
    options: str,
    defer_sync: bool = False,
):
    """Write one immutable shard from batches of records -> (writer options, count, size),
    through :func:`arrayds.store.shard_writer` (each batch goes to the engine in
    one call; ``defer_sync`` as there)."""
    count = 0
    key = f"{node}/{name}" if node else name
    with shard_writer(store, key, options, defer_sync=defer_sync) as w:
        for batch in batches:
            count += w.write_many(batch)
    return w.options_string(), count, store.size(key)


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

    def __init__(self, raw: list[Any], total: int | None, where: str) -> None:
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
        if not isinstance(ser, str) or not isinstance(raw_shards, list):
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


def _load(
    url: str,
    component: str | None,
    storage_options: Mapping[str, Any] | None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> tuple[Store, str, RecordsManifest]:
    store, node = _locate(url, component, storage_options)
    check_version_args(version, as_of, "r", f"records dataset {store.display(node)}")
    man = node_commit.read(store, node, version=version, as_of=as_of).raw
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
        store, node = _locate(url, component, storage_options)
        man = node_commit.read(store, node).raw
    except (OSError, ValueError):
        return False
    return man is not None and man.get("kind") == KIND


# ------------------------------------------------------------------------- writing


def _writer_options(compression: str, group_size: int) -> str:
    if not isinstance(group_size, int) or isinstance(group_size, bool) or group_size < 1:
        raise ValueError(f"group_size must be a positive integer, got {group_size!r}")
    if not isinstance(compression, str):
        raise TypeError(f"compression must be a str such as 'zstd:3', got {compression!r}")
    keys = [p.split(":", 1)[0].strip() for p in compression.split(",") if p.strip()]
    if "group_size" in keys:
        raise ValueError("give the group size with group_size=, not inside compression=")
    return ",".join(p for p in (f"group_size:{group_size}", compression.strip()) if p)


def _shard_stem(store: Store, node: str, write_id: str) -> str:
    base = (node or store.root).rstrip("/").replace("\\", "/").rsplit("/", 1)[-1]
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", base).strip("._") or "records"
    return f"{base}-{write_id}"


def _shard_name(stem: str, index: int, total: int) -> str:
    return f"{stem}.array_record-{index:05d}-of-{total:05d}"


@dataclass(frozen=True)
class WritePlan:
    """Everything a shard-writing task needs (picklable): made by :func:`prepare_write`,
    followed by :func:`write_shard` and :func:`commit_shards` (the dask writers here
    and the Beam ones of :mod:`arrayds.beam`)."""

    store: Store
    node: str
    write_id: str
    stem: str
    total: int
    options: str
    serializer: Serializer | None  # None: auto, decided per partition
    retries: int = APPEND_RETRIES  # of an append's commit (arrayds.retry)

    @property
    def where(self) -> str:
        return self.store.display(self.node)


def _encode_items(
    items: Iterable[Any], ser: Serializer, partition: int, where: str
) -> Iterable[list[bytes]]:
    """Yield batches of encoded records; TypeError naming partition and item index."""
    encode = ser.encode
    it = iter(items)
    index = 0
    raw = ser is _ser.RAW
    while True:
        batch = list(islice(it, _ENCODE_BATCH))
        if not batch:
            return
        if raw:  # bytes-like items go to the writer as they are (no copy)
            for k, obj in enumerate(batch):
                if not isinstance(obj, bytes | bytearray | memoryview):
                    index += k
                    try:
                        encode(obj)
                    except TypeError as exc:
                        raise TypeError(
                            f"records dataset {where}: item {index} of partition {partition} "
                            f"cannot be encoded with the 'raw' serializer: {exc}"
                        ) from exc
            index += len(batch)
            yield batch
            continue
        out: list[bytes] = []
        try:
            for obj in batch:
                out.append(encode(obj))
                index += 1
        except (TypeError, ValueError, OverflowError, AttributeError) as exc:
            raise TypeError(
                f"records dataset {where}: item {index} of partition {partition} cannot be "
                f"encoded with the {ser.name!r} serializer: {exc}"
            ) from exc
        yield out


def write_shard(
    items: Iterable[Any], partition: int, plan: WritePlan, *, defer_sync: bool = False
) -> dict[str, Any]:
    """Task: encode one partition and write it as shard ``partition`` -> its result
    for :func:`commit_shards` (the building block of every records writer: dask here,
    Apache Beam in :mod:`arrayds.beam`; example under :func:`commit_shards`).
    ``defer_sync``: :func:`commit_shards` runs next in this process (see
    :func:`arrayds.store.shard_writer`)."""
    ser = plan.serializer
    if ser is None:
        items = list(items)
        ser = _ser.choose_auto(items)
        chosen: str | None = ser.name if items else None
    else:
        chosen = ser.name
    name = _shard_name(plan.stem, partition, plan.total)
    nbytes = 0

    def batches() -> Iterable[list[bytes]]:
        nonlocal nbytes
        for batch in _encode_items(items, ser, partition, plan.where):
            nbytes += sum(map(len, batch))
            yield batch

    options, count, size = _write_stream(
        plan.store, plan.node, name, batches(), plan.options, defer_sync
    )
    return {"shard": ShardInfo(name, count, size, nbytes, options), "serializer": chosen}


def _reencode_as_msgpack(plan: WritePlan, info: ShardInfo) -> ShardInfo:
    """Rewrite a raw-encoded shard of a mixed ``auto`` write as msgpack (rare path)."""
    st = plan.store
    so = None if st.local else st.storage_options
    with ArrayRecordReader(st.url_of(plan.node, info.name), storage_options=so) as r:
        recs = r.read_all()
    encoded = [_ser.MSGPACK.encode(b) for b in recs]
    options, count, size = _write_stream(st, plan.node, info.name, [encoded], plan.options)
    return ShardInfo(info.name, count, size, sum(map(len, encoded)), options)


def commit_shards(
    results: list[dict[str, Any]],
    plan: WritePlan,
    mode: str,
    compression: str,
    group_size: int,
    attrs: dict[str, Any] | None,
    expected_serializer: str | None,
) -> dict[str, Any]:
    """Task: check the node again, resolve ``auto``, write the manifest atomically.

    ``results``: the :func:`write_shard` results of the shards that succeeded, in
    dataset order; the one compare-and-swap commit of every records writer.

    Example:
        >>> import os, tempfile
        >>> from arrayds import records
        >>> url = os.path.join(tempfile.mkdtemp(), "r")
        >>> plan, expected = records.prepare_write(url, None, "w-", "", 1, "auto", None, 2)
        >>> results = [records.write_shard(p, k, plan) for k, p in enumerate([[b"a"], [b"b"]])]
        >>> man = records.commit_shards(results, plan, "w-", "", 1, None, expected)
        >>> man["serializer"], records.open_records(url).data_source()[1]
        ('raw', b'b')
    """
    shards = [r["shard"] for r in results]
    if expected_serializer is not None:
        ser_name = expected_serializer
    else:
        chosen = {r["serializer"] for r in results if r["serializer"] is not None}
        if len(chosen) > 1:
            # auto chose raw for some partitions (all bytes) and msgpack for others:
            # re-encode the raw ones so the whole dataset has one serializer
            ser_name = "msgpack"
            shards = [
                _reencode_as_msgpack(plan, s) if r["serializer"] == "raw" else s
                for s, r in zip(shards, results, strict=True)
            ]
        else:
            ser_name = chosen.pop() if chosen else "msgpack"
    return _commit_manifest(plan, shards, ser_name, mode, compression, group_size, attrs)


def _commit_manifest(
    plan: WritePlan,
    shards: list[ShardInfo],
    ser_name: str,
    mode: str,
    compression: str,
    group_size: int,
    attrs: dict[str, Any] | None,
) -> dict[str, Any]:
    """Commit the manifest that lists ``shards`` (:func:`arrayds.nodes.commit.commit`):
    ``"w-"`` refuses an existing node, ``"a"`` appends to the current dataset (same
    serializer; retried on a lost race), ``"w"`` replaces the node and removes what
    only the old one used. A refused commit removes the shards."""
    where = plan.where

    def check(base: node_commit.NodeVersion) -> None:
        if base.head is None:
            return
        if mode == "w-":
            raise FileExistsError(f"records dataset {where} already exists (mode='w-')")
        if mode == "a":
            old = head_serializer(base.head, where)
            if old != ser_name:
                raise ValueError(
                    f"records dataset {where} now uses the {old!r} serializer; "
                    f"cannot append records encoded with {ser_name!r}"
                )

    def build(base: node_commit.NodeVersion) -> dict[str, Any] | node_commit.Extend:
        if mode == "a" and base.head is not None:
            head = base.head
            fields: dict[str, Any] = {
                "num_records": _count(head, where) + sum(s.num_records for s in shards)
            }
            if attrs:
                fields["attrs"] = {**_attrs(head, where), **attrs}
            return node_commit.Extend(fields, [s.to_json() for s in shards])
        man = RecordsManifest(ser_name, group_size, compression, shards, dict(attrs or {}))
        return man.to_json()

    return node_commit.commit(
        plan.store,
        plan.node,
        build,
        write_id=plan.write_id,
        check=check,
        written=[s.path for s in shards],
        retries=plan.retries if mode == "a" else 0,
        replaces=mode == "w",
        what=f"records dataset {where!r}",
    )


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


def _count(head: Mapping[str, Any], where: str) -> int:
    n = head.get("num_records")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise CorruptionError(f"{where}: manifest field 'num_records' has a bad value {n!r}")
    return n


def _attrs(head: Mapping[str, Any], where: str) -> dict[str, Any]:
    attrs = head.get("attrs", {})
    if not isinstance(attrs, dict):
        raise CorruptionError(f"{where}: manifest field 'attrs' must be an object")
    return attrs


def prepare_write(
    url: str,
    component: str | None,
    mode: str,
    compression: str,
    group_size: int,
    serializer: SerializerSpec,
    storage_options: Mapping[str, Any] | None,
    total: int,
) -> tuple[WritePlan, str | None]:
    """Check a write (mode, parents, serializer) before any shard is written -> (the plan
    of ``total`` shards :func:`write_shard` follows, the serializer name the commit
    expects or ``None`` for ``auto``); ``FileExistsError`` for ``mode="w-"`` on an
    existing node (example under :func:`commit_shards`)."""
    store, node = _locate(url, component, storage_options)
    return plan_write(store, node, mode, compression, group_size, serializer, total)


def plan_write(
    store: Store,
    node: str,
    mode: str,
    compression: str,
    group_size: int,
    serializer: SerializerSpec,
    total: int,
    retries: int = APPEND_RETRIES,
) -> tuple[WritePlan, str | None]:
    """:func:`prepare_write` at ``node`` of ``store``; ``retries``: of an append's
    commit that lost a race (:mod:`arrayds.retry`)."""
    if mode not in _MODES:
        raise ValueError(
            f"mode must be one of {', '.join(map(repr, _MODES))} for records, got {mode!r}"
        )
    where = store.display(node)
    retries = check_retries(retries, f"records dataset {where!r}")
    options = _writer_options(compression, group_size)
    ser = _ser.resolve_for_write(serializer)
    node_commit.check_parents(store, node)
    current = node_commit.read(store, node).head
    expected: str | None = None
    if current is not None:
        if mode == "w-":
            raise FileExistsError(
                f"{where} already exists (mode='w-'); use mode='w' to replace it or 'a' to append"
            )
        if mode == "a":
            old = head_serializer(current, where)
            if ser is None:
                ser = _ser.resolve_for_read(old, allow_pickle=old == "pickle", where=where)
            elif ser.name != old:
                raise ValueError(
                    f"records dataset {where} uses the {old!r} serializer; "
                    f"cannot append with {ser.name!r}"
                )
    if ser is not None:
        expected = ser.name
    write_id = new_write_id()
    stem = _shard_stem(store, node, write_id)
    return WritePlan(store, node, write_id, stem, total, options, ser, retries), expected


def write_records(
    data: dask.bag.Bag | Sequence[Any],
    url: str,
    component: str | None = None,
    *,
    mode: str = "w-",
    compression: str = "zstd:3",
    group_size: int = 1,
    serializer: SerializerSpec = "auto",
    num_shards: int | None = None,
    attrs: Mapping[str, Any] | None = None,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    progress: bool = False,
    retries: int = APPEND_RETRIES,
) -> RecordsDataset | Delayed:
    """Write a bag (one shard per partition) or a list (``num_shards`` shards).

    Each shard is written by its own task; one final task commits the manifest, so
    nothing is visible until every shard succeeded.  ``mode``: ``"w-"`` create
    (``FileExistsError`` if present), ``"w"`` replace, ``"a"`` append new shards (the
    serializer must match the dataset's; ``retries``: how often an append that lost a
    commit race to another writer commits again after that writer's records, with a
    bounded random backoff, :mod:`arrayds.retry`).  ``serializer``: ``"auto"`` (raw for bytes,
    msgpack otherwise), ``"raw"``, ``"msgpack"``, ``"json"``, ``"pickle"``, a registered
    name, a :class:`arrayds.serializers.Serializer` or an ``(encode, decode)`` pair.
    An item the serializer cannot encode is a ``TypeError`` naming the partition and
    the item index, and nothing is committed.

    Returns a :class:`RecordsDataset`, or with ``compute=False`` a
    ``dask.delayed.Delayed`` whose result is the committed manifest (a dict, as stored:
    :func:`arrayds.nodes.log.resolve` gives the entries of a long shard list).

    Example:
        >>> import os, tempfile, dask.bag as db
        >>> from arrayds import records
        >>> url = os.path.join(tempfile.mkdtemp(), "words")
        >>> bag = db.from_sequence([b"a", b"b", b"c", b"d"], npartitions=2)
        >>> records.write_records(bag, url).serializer
        'raw'
        >>> records.write_records([b"e"], url, mode="a").num_shards
        3
        >>> records.read_records(url).compute(scheduler="sync")
        [b'a', b'b', b'c', b'd', b'e']
    """
    store, node = _locate(url, component, storage_options)
    return write(
        data,
        store,
        node,
        mode=mode,
        compression=compression,
        group_size=group_size,
        serializer=serializer,
        num_shards=num_shards,
        attrs=attrs,
        compute=compute,
        progress=progress,
        retries=retries,
    )


def write(
    data: dask.bag.Bag | Sequence[Any],
    store: Store,
    node: str,
    *,
    mode: str = "w-",
    compression: str = "zstd:3",
    group_size: int = 1,
    serializer: SerializerSpec = "auto",
    num_shards: int | None = None,
    attrs: Mapping[str, Any] | None = None,
    compute: bool = True,
    progress: bool = False,
    retries: int = APPEND_RETRIES,
) -> RecordsDataset | Delayed:
    """:func:`write_records` at ``node`` of ``store`` (the entry of both it and
    ``to_arrayrecord``).

    >>> from arrayds.storage import get_store
    >>> write([b"a", b"b"], get_store("memory://doc-records-write"), "r").num_records
    2
    """
    import dask.bag as db
    from dask.delayed import delayed
    from dask.highlevelgraph import HighLevelGraph

    if num_shards is not None and (
        not isinstance(num_shards, int) or isinstance(num_shards, bool) or num_shards < 1
    ):
        raise ValueError(f"num_shards must be a positive integer, got {num_shards!r}")
    is_bag = _is_bag(data)
    if is_bag:
        if num_shards is not None and num_shards != data.npartitions:
            data = data.repartition(npartitions=num_shards)
        total = data.npartitions
    elif isinstance(data, Sequence) and not isinstance(data, str | bytes | bytearray):
        items = list(data)
        total = num_shards or 1
        if serializer == "auto" and mode != "a":
            serializer = _ser.choose_auto(items)
    else:
        raise TypeError(
            f"write_records needs a dask.bag.Bag or a list of records, got {type(data).__name__}"
        )
    plan, expected = plan_write(
        store, node, mode, compression, group_size, serializer, total, retries
    )
    token = plan.stem
    if not is_bag and total == 1 and compute and not progress:
        # one shard of records already in memory: its task and the commit task run
        # here, as a graph of two tasks would (a small append costs no scheduler)
        results = [write_shard(items, 0, plan, defer_sync=True)]
        man = commit_shards(
            results, plan, mode, compression, group_size, dict(attrs) if attrs else None, expected
        )
        return RecordsDataset._from_manifest(plan.store, plan.node, man)
    if is_bag:
        from dask.base import get_scheduler

        # One task per partition that computes the partition and writes its shard
        # (fused with the bag's own tasks, so partitions never travel between workers).
        wname = f"write-records-{token}"
        layer = {(wname, k): (write_shard, (data.name, k), k, plan) for k in range(total)}
        graph = HighLevelGraph.from_collections(wname, layer, dependencies=[data])
        writes = db.Bag(graph, wname, total).to_delayed(optimize_graph=True)
        scheduler = get_scheduler(collections=[data])
    else:
        bounds = [len(items) * k // total for k in range(total + 1)]
        writes = [
            delayed(write_shard, pure=False)(
                delayed(
                    items[bounds[k] : bounds[k + 1]], name=f"records-{token}-{k}", traverse=False
                ),
                k,
                plan,
                dask_key_name=f"write-records-{token}-{k}",
            )
            for k in range(total)
        ]
        scheduler = None
    return _finish(
        writes, plan, mode, compression, group_size, attrs, expected, compute, scheduler, progress
    )


def _finish(
    writes: list[Any],
    plan: WritePlan,
    mode: str,
    compression: str,
    group_size: int,
    attrs: Mapping[str, Any] | None,
    expected: str | None,
    compute: bool,
    scheduler: Any,
    progress: bool,
) -> RecordsDataset | Delayed:
    """Add the commit task after the shard tasks; compute it unless ``compute=False``."""
    from dask.delayed import delayed

    committed = delayed(commit_shards, pure=False)(
        writes,
        plan,
        mode,
        compression,
        group_size,
        dict(attrs) if attrs else None,
        expected,
        dask_key_name=f"commit-records-{plan.stem}",
    )
    if not compute:
        return committed
    from .progress import compute as _compute  # a bar only on a terminal (issue 6)

    man = _compute(committed, progress=progress, scheduler=scheduler)
    return RecordsDataset._from_manifest(plan.store, plan.node, man)


def _write_from_source(source: Any, args: tuple[Any, ...], partition: int, plan: WritePlan):
    """Task: stream the items ``source(*args)`` yields into shard ``partition``."""
    return write_shard(source(*args), partition, plan)


def write_from_sources(
    sources: Sequence[tuple[Any, tuple[Any, ...]]],
    url: str,
    component: str | None = None,
    *,
    mode: str = "w-",
    compression: str = "zstd:3",
    group_size: int = 1,
    serializer: SerializerSpec = "raw",
    attrs: Mapping[str, Any] | None = None,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    progress: bool = False,
    scheduler: Any = None,
) -> RecordsDataset | Delayed:
    """Write shard ``k`` from the iterable ``sources[k][0](*sources[k][1])``, streaming.

    One task per source (it produces and writes its items in constant memory) plus
    one commit task; the building block of :mod:`arrayds.convert`.  ``serializer`` is
    ``"raw"`` by default; with ``"auto"`` each task materializes its items to choose.

    Example:
        >>> import os, tempfile
        >>> from arrayds import records
        >>> url = os.path.join(tempfile.mkdtemp(), "squares")
        >>> ds = records.write_from_sources(
        ...     [(range, (0, 3)), (range, (3, 5))], url, serializer="msgpack"
        ... )
        >>> [s.num_records for s in ds.shards], list(ds.data_source(decode=True))
        ([3, 2], [0, 1, 2, 3, 4])
    """
    from dask.delayed import delayed

    sources = list(sources)
    if not sources:
        raise ValueError("write_from_sources needs at least one source")
    plan, expected = prepare_write(
        url, component, mode, compression, group_size, serializer, storage_options, len(sources)
    )
    writes = [
        delayed(_write_from_source, pure=False)(
            fn, tuple(args), k, plan, dask_key_name=f"write-records-{plan.stem}-{k}"
        )
        for k, (fn, args) in enumerate(sources)
    ]
    return _finish(
        writes, plan, mode, compression, group_size, attrs, expected, compute, scheduler, progress
    )


def _is_bag(obj: Any) -> bool:
    try:
        import dask.bag as db
    except ImportError:  # pragma: no cover - dask is an extra
        return False
    return isinstance(obj, db.Bag)


# ------------------------------------------------------------------------- reading


def _read_shard(
    store: Store, node: str, name: str, expected: int, decode: Any, size: int = 0
) -> list[Any]:
    """Task: every record of one shard, decoded (one batched engine read); ``size``:
    the file's byte size from the manifest (0: not recorded)."""
    # every record is read: a shard of at most max_size comes in one GET (footer too)
    whole = 0 < size <= coalesce_options().max_size
    reader = node_shard_reader(store, node, name, size or None, whole=whole)
    n = reader.num_records()
    if n != expected:
        raise CorruptionError(
            f"records shard {store.url_of(node, name)} holds {n} records, the manifest of "
            f"{store.display(node)} says {expected}"
        )
    recs = reader.read_all()
    if decode is None:
        return recs
    return [decode(b) for b in recs]


class RecordsDataset:
    """An open records dataset: its manifest, shards and readers.

    ``len(ds)`` is the number of records; nothing but the manifest is read to open
    it.  ``ds.shard_paths`` are the shard files in order (give them to Grain or the
    official ``ArrayRecordDataSource``); ``ds.to_bag()`` and ``ds.data_source()``
    read it. ``version=N`` / ``as_of=`` (a datetime; naive means UTC) open that
    version of the dataset's history (:func:`arrayds.versions`): a ``ValueError``
    names the versions kept if it is not one of them.

    Example:
        >>> import os, tempfile
        >>> from arrayds import records
        >>> url = os.path.join(tempfile.mkdtemp(), "r")
        >>> _ = records.write_records([{"a": 1}, {"a": 2}], url)
        >>> ds = records.open_records(url)
        >>> len(ds), ds.serializer, [os.path.basename(p)[-21:] for p in ds.shard_paths]
        (2, 'msgpack', ['record-00000-of-00001'])
    """

    def __init__(
        self,
        url: str,
        component: str | None = None,
        *,
        storage_options: Mapping[str, Any] | None = None,
        allow_pickle: bool = False,
        serializer: SerializerSpec | None = None,
        version: int | None = None,
        as_of: datetime | None = None,
    ) -> None:
        store, node, man = _load(url, component, storage_options, version, as_of)
        self._init(store, node, man)
        self._allow_pickle = allow_pickle
        self._override = serializer
        if version is not None or as_of is not None:
            self._pin = Pin(man.generation, None)

    @classmethod
    def _from_manifest(cls, store: Store, node: str, man: dict[str, Any]) -> RecordsDataset:
        """The dataset a write just committed (its manifest ``man`` is parsed when it
        is first used: a write's cost does not grow with the dataset)."""
        self = cls._from_parsed(store, node, None)
        self._raw = man
        return self

    @classmethod
    def _from_parsed(cls, store: Store, node: str, man: RecordsManifest | None) -> RecordsDataset:
        self = cls.__new__(cls)
        self._init(store, node, man)
        self._allow_pickle = False
        self._override = None
        return self

    _pin: Pin | None = None
    """Set on a dataset opened at a version of its history."""

    @property
    def version(self) -> int | None:
        """The version (generation) this dataset was opened at with ``version=`` or
        ``as_of=``, ``None`` for its current state."""
        return self._pin.generation if self._pin is not None else None

    def _init(self, store: Store, node: str, man: RecordsManifest | None) -> None:
        self._store = store
        self._node = node
        self.url = store.display(node)
        self._parsed = man
        self._raw: dict[str, Any] | None = None

    @property
    def _manifest(self) -> RecordsManifest:
        if self._parsed is None:
            # the manifest a commit returned, its shard list possibly still a log
            raw = log.resolve(self._store, self._node, self._raw or {}, self.url)
            self._parsed = RecordsManifest.from_json(raw, self.url)
        return self._parsed

    @property
    def serializer(self) -> str:
        """Name of the stored serializer."""
        return self._manifest.serializer

    @property
    def compression(self) -> str:
        return self._manifest.compression

    @property
    def group_size(self) -> int:
        return self._manifest.group_size

    @property
    def attrs(self) -> dict[str, Any]:
        return self._manifest.attrs

    @property
    def shards(self) -> list[ShardInfo]:
        return list(self._manifest.shards)

    @property
    def num_shards(self) -> int:
        return len(self._manifest.shards)

    @property
    def num_records(self) -> int:
        return self._manifest.num_records

    def __len__(self) -> int:
        return self._manifest.num_records

    @property
    def shard_paths(self) -> list[str]:
        """Full paths/URLs of the shard files, in dataset order."""
        return [self._store.url_of(self._node, s.name) for s in self._manifest.shards]

    def decoder(self) -> Serializer:
        """The serializer that decodes this dataset's records (pickle gate applied)."""
        return _ser.resolve_for_read(
            self.serializer,
            override=self._override,
            allow_pickle=self._allow_pickle,
            where=self.url,
        )

    def to_bag(self, *, decode: bool = True) -> dask.bag.Bag:
        """A ``dask.bag.Bag``, one partition (one task) per shard, in order."""
        import dask.bag as db
        from dask.base import tokenize
        from dask.highlevelgraph import HighLevelGraph

        dec = self.decoder().decode if decode else None
        shards = self._manifest.shards
        name = "read-records-" + tokenize(
            self._store.canonical_url,
            self._node,
            [(s.name, s.num_records) for s in shards],
            self.serializer,
            decode,
        )
        dsk = {
            (name, k): (
                _read_shard,
                self._store,
                self._node,
                s.name,
                s.num_records,
                dec,
                s.file_size,
            )
            for k, s in enumerate(shards)
        }
        graph = HighLevelGraph.from_collections(name, dsk, dependencies=[])
        return db.Bag(graph, name, len(shards))

    def data_source(
        self,
        *,
        decode: bool = False,
        reader_options: Mapping[str, str] | str | None = None,
    ) -> ArrayRecordDataSource:
        """Random access across all shards (see :func:`data_source`)."""
        return ArrayRecordDataSource(
            self.url,
            reader_options,
            storage_options=self._store.storage_options or None,
            decode=decode,
            allow_pickle=self._allow_pickle,
            serializer=self._override,
            version=self.version,
        )

    def __getitem__(self, key: Any) -> Any:
        """Decoded record(s) by global index: an int, a slice, a list or an array.

        Example:
            >>> import os, tempfile
            >>> from arrayds import records
            >>> ds = records.write_records(
            ...     [{"i": i} for i in range(5)], os.path.join(tempfile.mkdtemp(), "r")
            ... )
            >>> ds[3], ds[[4, 0]]
            ({'i': 3}, [{'i': 4}, {'i': 0}])
        """
        src = self.__dict__.get("_decoded")
        if src is None:
            src = self._decoded = self.data_source(decode=True)
        return src[key]

    def __iter__(self) -> Any:
        """Decoded records in order, shard by shard (sequential reads)."""
        return iter(self.data_source(decode=True))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_decoded", None)
        return state

    def __repr__(self) -> str:
        return (
            f"RecordsDataset({self.url!r}, {self.num_records} records in "
            f"{self.num_shards} shards, serializer={self.serializer!r})"
        )

    def _repr_html_(self) -> str:
        """A summary table and a bar of the shards (:mod:`arrayds.html_repr`)."""
        from .html_repr import node_html

        return node_html(self._store, self._node, self._manifest, version=self.version)


def open_records(
    url: str,
    component: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    allow_pickle: bool = False,
    serializer: SerializerSpec | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> RecordsDataset:
    """Open a records dataset (reads the manifest only); ``version=`` / ``as_of=``:
    a version of its history (see :class:`RecordsDataset`).

    Example:
        >>> import os, tempfile
        >>> from arrayds import records
        >>> url = os.path.join(tempfile.mkdtemp(), "r")
        >>> _ = records.write_records([b"x"] * 5, url, num_shards=2)
        >>> ds = records.open_records(url)
        >>> len(ds), [s.num_records for s in ds.shards]
        (5, [2, 3])
        >>> _ = records.write_records([b"y"] * 2, url, mode="a")
        >>> len(records.open_records(url, version=1)), len(records.open_records(url))
        (5, 7)
    """
    return RecordsDataset(
        url,
        component,
        storage_options=storage_options,
        allow_pickle=allow_pickle,
        serializer=serializer,
        version=version,
        as_of=as_of,
    )


def read_records(
    url: str,
    component: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    allow_pickle: bool = False,
    serializer: SerializerSpec | None = None,
    decode: bool = True,
    version: int | None = None,
    as_of: datetime | None = None,
) -> dask.bag.Bag:
    """A ``dask.bag.Bag`` of a records dataset: one partition per shard, order preserved.

    Items are decoded with the stored serializer (``decode=False``: the stored bytes).
    A dataset written with ``pickle`` needs ``allow_pickle=True``; one written with an
    unregistered ``(encode, decode)`` pair needs ``serializer=`` that pair.
    ``version=`` / ``as_of=``: a version of the dataset's history.

    Example:
        >>> import os, tempfile
        >>> from arrayds import records
        >>> url = os.path.join(tempfile.mkdtemp(), "r")
        >>> _ = records.write_records([[1, 2], [3]], url, serializer="json", num_shards=2)
        >>> bag = records.read_records(url)
        >>> bag.npartitions, bag.compute(scheduler="sync")
        (2, [[1, 2], [3]])
    """
    ds = open_records(
        url,
        component,
        storage_options=storage_options,
        allow_pickle=allow_pickle,
        serializer=serializer,
        version=version,
        as_of=as_of,
    )
    return ds.to_bag(decode=decode)


def data_source(
    url: str,
    *,
    decode: bool = False,
    allow_pickle: bool = False,
    serializer: SerializerSpec | None = None,
    reader_options: Mapping[str, str] | str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> ArrayRecordDataSource:
    """Global random access over a records dataset's shards.

    The same object as ``arrayds.ArrayRecordDataSource(url, decode=...)``; use this
    function to pass ``allow_pickle=True`` (pickle datasets) or the ``serializer=``
    pair of a dataset written with unregistered callables.  Record counts come from
    the manifest, so no shard is opened until it is read. ``version=`` / ``as_of=``:
    a version of the dataset's history.

    Example:
        >>> import os, tempfile
        >>> from arrayds import records
        >>> url = os.path.join(tempfile.mkdtemp(), "r")
        >>> _ = records.write_records([{"i": i} for i in range(6)], url, num_shards=3)
        >>> src = records.data_source(url, decode=True)
        >>> len(src), src[4], [x["i"] for x in src[[5, 0]]]
        (6, {'i': 4}, [5, 0])
    """
    ds = open_records(
        url,
        storage_options=storage_options,
        allow_pickle=allow_pickle,
        serializer=serializer,
        version=version,
        as_of=as_of,
    )
    return ds.data_source(decode=decode, reader_options=reader_options)


# ------------------------------------------------- ArrayRecordDataSource resolver


class _RefusedDecoder:
    """Stands in for a decoder this process may not use (pickle without consent).
    ``ArrayRecordDataSource(decode=True)`` raises its ``refusal`` at once; with
    ``decode=False`` the stored bytes stay readable."""

    def __init__(self, refusal: str) -> None:
        self.refusal = refusal

    def __call__(self, data: bytes) -> Any:
        raise ValueError(self.refusal)


def _data_source(
    store: Store,
    node: str,
    m: RecordsManifest,
    *,
    allow_pickle: bool,
    serializer: SerializerSpec | None,
) -> ResolvedSource:
    """``ArrayRecordDataSource(url)`` on a records dataset: its shards and decoder."""
    where = store.display(node)
    shards = [
        # object stores: the recorded size spares each shard open a HEAD request
        SourceShard(
            store.url_of(node, s.name),
            0,
            s.num_records,
            None if store.local else s.file_size or None,
        )
        for s in m.shards
    ]
    try:
        ser = _ser.resolve_for_read(
            m.serializer, override=serializer, allow_pickle=allow_pickle, where=where
        )
        decoder: Any = ser.decode
    except ValueError as exc:
        decoder = _RefusedDecoder(
            f"{exc} (ArrayRecordDataSource(url, decode=True) takes allow_pickle= and "
            "serializer= too)"
        )
    if not shards:
        raise ValueError(f"records dataset {where} has no shards yet")
    return ResolvedSource(shards, decoder)


def _node_handle(store: Store, node: str, man: RecordsManifest, mode: str) -> RecordsDataset:
    """``arrayds.open`` / ``Group[name]`` on a records node."""
    return RecordsDataset._from_parsed(store, node, man)


# ------------------------------------------------------- to_arrayrecord / from_arrayrecord


def _is_records_input(x: Any) -> bool:
    """A dask bag, or a list/tuple of records (bytes or objects). A list made only
    of numpy arrays is a ragged array (another kind), not records."""
    bag = sys.modules.get("dask.bag")
    if bag is not None and isinstance(x, bag.Bag):
        return True
    if isinstance(x, (list, tuple)):
        return not (x and all(isinstance(i, np.ndarray) for i in x))
    return False


def _write_input(
    data: Any,
    store: Store,
    node: str,
    *,
    shard_size: Any = None,
    region: Any = None,
    dims: Any = None,
    **options: Any,
) -> Any:
    """``to_arrayrecord`` of records (a bag or a list)."""
    what = f"records dataset {store.display(node)!r}"
    for key, value in (("shard_size", shard_size), ("region", region), ("dims", dims)):
        if value is not None:
            raise ValueError(f"{what}: {key}= applies to arrays, not records")
    return write(data, store, node, **options)


_READ_KEYS = ("allow_pickle", "serializer", "decode")


def _to_dask(store: Store, node: str, m: Any, *, chunks: Any, name: Any, **kwargs: Any) -> Any:
    """``from_arrayrecord`` of a records dataset: a bag (see :func:`read_records`)."""
    what = f"records dataset {store.display(node)!r}"
    if chunks is not None or name is not None:
        raise ValueError(f"{what}: chunks= and name= apply to arrays")
    kinds.no_extra_keywords(what, {k: v for k, v in kwargs.items() if k not in _READ_KEYS})
    # the manifest read (which may be a version of the history), not the URL again
    ds = RecordsDataset._from_parsed(store, node, m)
    ds._allow_pickle = bool(kwargs.get("allow_pickle", False))
    ds._override = kwargs.get("serializer")
    return ds.to_bag(decode=kwargs.get("decode", True))


def _shard_refs(m: RecordsManifest) -> list[kinds.ShardRef]:
    """The shard files of a records dataset, with their record counts and sizes."""
    return [
        kinds.ShardRef(s.path, records=s.num_records, size=s.file_size or None) for s in m.shards
    ]


kinds.register(
    kinds.NodeKind(
        KIND,
        parse=RecordsManifest.from_json,
        open=_node_handle,
        to_dask=_to_dask,
        data_source=_data_source,
        shard_folder=None,
        shards=_shard_refs,
        describe=kinds.lazy("arrayds.tools.describe", "describe_records"),
        info_text=kinds.lazy("arrayds.tools.describe", "records_text"),
        cat=kinds.lazy("arrayds.tools.cat", "cat_records"),
        compact=kinds.lazy("arrayds.tools.compact", "compact_records"),
        totals="records_sets",
        plural="record sets",
        phrase="a records dataset",
    )
)
kinds.register_writer(kinds.Writer("records", _is_records_input, _write_input, KIND))
