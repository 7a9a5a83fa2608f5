"""Writing records datasets: from a list or a dask bag (one shard per partition, one
task each, plus one commit task); appends add shards under a new write id. A dask
write of more than :data:`arrayds.nodes.history.SEGMENT_LIMIT` partitions has tasks
write its manifest entries as segments, and its commit receives their references only
(docs/spec.md 14.4.1; :func:`commit_segments`).

>>> ds = write_records([{"i": i} for i in range(4)], "memory://doc-records-write-mod", num_shards=2)
>>> len(ds), ds.num_shards
(4, 2)
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import islice
from typing import TYPE_CHECKING, Any

import numpy as np

from ...dask.graph import bag_writes, commit_after, run
from ...errors import CommitConflictError
from ...files.reader import ArrayRecordReader
from ...nodes import commit as node_commit
from ...nodes import history, pending
from ...nodes.merge import tiered
from ...nodes.names import (
    shard_name,
    shard_stem,
)
from ...nodes.options import DEFAULT_COMPRESSION, WriterOptions
from ...nodes.read import locate
from ...nodes.retry import APPEND_RETRIES, check_retries
from ...nodes.shards import shard_writer
from ...storage.base import BaseStore as Store
from . import serializers as _ser
from .serializers import Serializer, SerializerSpec

if TYPE_CHECKING:
    import dask.bag
    from dask.delayed import Delayed
from .handle import RecordsDataset
from .manifest import RecordsManifest, ShardInfo, head_attrs, head_count, head_serializer

__all__ = [
    "RecordsDataset",
    "ShardInfo",
    "write_from_sources",
    "write_records",
]
_ENCODE_BATCH = 4096
_MODES = ("w-", "w", "a")


def _write_stream(
    store: Store,
    node: str,
    name: str,
    batches: Iterable[list[bytes]],
    options: str,
    defer_sync: bool = False,
):
    """Write one immutable shard from batches of records -> (writer options, count, size),
    through :func:`arrayds.nodes.shards.shard_writer` (each batch goes to the engine in
    one call; ``defer_sync`` as there)."""
    count = 0
    key = _key(node, name)
    with shard_writer(store, key, options, defer_sync=defer_sync) as w:
        for batch in batches:
            count += w.write_many(batch)
    return w.options_string(), count, store.size(key)


# ------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class WritePlan:
    """Everything a shard-writing task needs (picklable): made by :func:`prepare_write`,
    followed by :func:`write_records_shard` and :func:`commit_shards` (the dask writers here
    and the Beam ones of :mod:`arrayds.beam`)."""

    store: Store
    node: str
    write_id: str
    stem: str
    total: int
    writer: WriterOptions
    serializer: Serializer | None  # None: auto, decided per partition
    retries: int = APPEND_RETRIES  # of an append's commit (arrayds.nodes.retry)
    tiered: bool = True  # an append's commit runs the tiered merge (compact="tiered")

    @property
    def where(self) -> str:
        return self.store.display(self.node)

    @property
    def options(self) -> str:
        """The engine's writer options of every shard of this write."""
        return self.writer.engine()


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


def write_records_shard(
    items: Iterable[Any], partition: int, plan: WritePlan, *, defer_sync: bool = False
) -> dict[str, Any]:
    """Task: encode one partition and write it as shard ``partition`` -> its result
    for :func:`commit_shards` (the building block of every records writer: dask here,
    Apache Beam in :mod:`arrayds.beam`; example under :func:`commit_shards`).
    ``defer_sync``: :func:`commit_shards` runs next in this process (see
    :func:`arrayds.nodes.shards.shard_writer`)."""
    ser = plan.serializer
    if ser is None:
        items = list(items)
        ser = _ser.choose_auto(items)
        chosen: str | None = ser.name if items else None
    else:
        chosen = ser.name
    name = shard_name(plan.stem, partition, total=plan.total)
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
    attrs: dict[str, Any] | None,
    expected_serializer: str | None,
) -> dict[str, Any]:
    """Task: check the node again, resolve ``auto``, write the manifest atomically.

    ``results``: the :func:`write_records_shard` results of the shards that succeeded, in
    dataset order; the one compare-and-swap commit of every records writer.

    Example:
        >>> import os, tempfile
        >>> from arrayds.kinds.records import write as records
        >>> url = os.path.join(tempfile.mkdtemp(), "r")
        >>> from arrayds.nodes.options import WriterOptions
        >>> opts = WriterOptions("", group_size=1)
        >>> plan, expected = records.prepare_write(url, None, "w-", opts, "auto", None, 2)
        >>> parts = [[b"a"], [b"b"]]
        >>> results = [records.write_records_shard(p, k, plan) for k, p in enumerate(parts)]
        >>> man = records.commit_shards(results, plan, "w-", None, expected)
        >>> from arrayds.records import open_records
        >>> man["serializer"], open_records(url).data_source()[1]
        ('raw', b'b')
    """
    if expected_serializer is not None:
        ser_name = expected_serializer
    else:
        ser_name = decide_serializer([chosen_serializers(results)])
    return _commit_manifest(plan, _settled(plan, results, ser_name), ser_name, mode, attrs)


def chosen_serializers(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """Task: the serializers ``auto`` chose for the partitions whose
    :func:`write_records_shard` results are ``results`` (empty ones chose none),
    sorted: all a long write's serializer decision needs of them.

    >>> chosen_serializers([{"serializer": "raw"}, {"serializer": None}])
    ['raw']
    """
    return sorted({r["serializer"] for r in results if r["serializer"] is not None})


def decide_serializer(chosen: Sequence[Sequence[str]]) -> str:
    """Task: the serializer of an ``auto`` write whose groups of partitions chose
    ``chosen`` (:func:`chosen_serializers`): the one they all chose, ``"msgpack"`` if
    they chose several (the raw shards are then re-encoded, :func:`_settled`) or none.

    >>> decide_serializer([["raw"], []]), decide_serializer([["raw"], ["msgpack"]])
    ('raw', 'msgpack')
    """
    names = {n for c in chosen for n in c}
    return names.pop() if len(names) == 1 else "msgpack"


def _settled(
    plan: WritePlan, results: Sequence[Mapping[str, Any]], ser_name: str
) -> list[ShardInfo]:
    """The shards of ``results`` in the write's serializer ``ser_name``: an ``auto``
    write that chose raw for some partitions (all bytes) and msgpack for others
    re-encodes the raw ones, so the whole dataset has one serializer."""
    reencode = ser_name == "msgpack"
    return [
        _reencode_as_msgpack(plan, r["shard"])
        if reencode and r["serializer"] == "raw"
        else r["shard"]
        for r in results
    ]


def write_segment(
    results: Sequence[Mapping[str, Any]], plan: WritePlan, ser_name: str
) -> list[dict[str, Any]]:
    """Task: the entries of a run of at most :data:`arrayds.nodes.history.SEGMENT_LIMIT`
    consecutive partitions (their :func:`write_records_shard` results, raw shards
    re-encoded if the write's ``auto`` serializer ``ser_name`` says so) written as a
    segment, once the shards' names are durable; returns its references, all
    :func:`commit_segments` receives of them (example there)."""
    shards = _settled(plan, results, ser_name)
    st = plan.store
    st.flush([_key(plan.node, s.path) for s in shards])
    return history.write_segments(st, plan.node, [s.to_json() for s in shards], plan.write_id)


def commit_segments(
    segments: Sequence[Sequence[Mapping[str, Any]]],
    plan: WritePlan,
    mode: str,
    attrs: dict[str, Any] | None,
    ser_name: str,
) -> dict[str, Any]:
    """Task: :func:`commit_shards` of a write whose entries the tasks wrote as segments
    (:func:`write_segment`; ``segments``: their references, in dataset order), so the
    commit holds a reference per :data:`arrayds.nodes.history.SEGMENT_LIMIT` shards,
    never the entries; ``num_records`` is the sum of the references' ``records``. A
    commit refused (the node is not as the write expects, or another writer won the
    race) removes the segments and the shards, and nothing is visible; a commit task
    run again after its first run landed returns the node's head and commits nothing.
    No tiered merge runs.

    Example:
        >>> import os, tempfile
        >>> from arrayds.kinds.records import write as records
        >>> from arrayds.nodes.options import WriterOptions
        >>> url = os.path.join(tempfile.mkdtemp(), "r")
        >>> plan, _ = records.prepare_write(url, None, "w-", WriterOptions(""), "raw", None, 3)
        >>> res = [records.write_records_shard([b"%d" % k], k, plan) for k in range(3)]
        >>> refs = [records.write_segment(r, plan, "raw") for r in (res[:2], res[2:])]
        >>> man = records.commit_segments(refs, plan, "w-", None, "raw")
        >>> man["num_records"], [r["count"] for r in man["shards"]["segments"]]
        (3, [2, 1])
        >>> from arrayds.records import open_records
        >>> list(open_records(url).data_source())
        [b'0', b'1', b'2']
    """
    refs = [ref for seg in segments for ref in seg]
    head = node_commit.read(plan.store, plan.node).head
    if node_commit.landed_in(head, plan.write_id):
        return head  # committed by an earlier run of this task: not twice
    try:
        return _commit_manifest(plan, [], ser_name, mode, attrs, refs)
    except (FileExistsError, ValueError, CommitConflictError):
        # refused before its put, or its put refused: nothing of it is visible
        _remove_written(plan, refs)
        raise


def _key(node: str, name: str) -> str:
    return f"{node}/{name}" if node else name


def _remove_written(plan: WritePlan, refs: Sequence[Mapping[str, Any]]) -> None:
    """Remove the segments ``refs`` and the shards of a write whose commit was refused
    (the shards a run of names at a time: never listed whole), unless a version of the
    node names the write (a commit task run again long after its first run landed: its
    files are then data). Best effort: a leftover is an orphan (no reader sees it;
    ``arrayds gc`` removes it)."""
    st, node = plan.store, plan.node
    try:
        if any(v.commit == plan.write_id for v in node_commit.versions(st, node)):
            return
        st.delete([_key(node, r["path"]) for r in refs])
    except Exception:  # noqa: BLE001 - best effort
        return
    step = history.SEGMENT_LIMIT
    for lo in range(0, plan.total, step):
        keys = [
            _key(plan.node, shard_name(plan.stem, k, total=plan.total))
            for k in range(lo, min(lo + step, plan.total))
        ]
        try:
            st.delete(keys)
        except Exception:  # noqa: BLE001 - best effort
            return


def _commit_manifest(
    plan: WritePlan,
    shards: list[ShardInfo],
    ser_name: str,
    mode: str,
    attrs: dict[str, Any] | None,
    refs: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Commit the manifest that lists the segments ``refs`` (:func:`commit_segments`)
    then ``shards`` (:func:`arrayds.nodes.commit.commit`): ``"w-"`` refuses an
    existing node, ``"a"`` appends to the current dataset (same serializer; retried on
    a lost race after the other writer's records, and with ``plan.tiered`` and no
    ``refs`` the tiered merge of the newest small shards in the same commit,
    :func:`arrayds.nodes.merge.tiered`), ``"w"`` replaces the node and removes what
    only the old one used (with ``refs``: a ``fresh`` :class:`Extend`, the replaced
    files removed one segment at a time). A refused commit removes the shards it
    lists (and a merged one)."""
    where = plan.where
    written = [s.path for s in shards]  # the segments: commit_segments removes them
    added = sum(s.num_records for s in shards) + sum(r["records"] for r in refs)

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
            fields: dict[str, Any] = {"num_records": head_count(head, where) + added}
            if attrs:
                fields["attrs"] = {**head_attrs(head, where), **attrs}
            return node_commit.Extend(fields, [s.to_json() for s in shards], segments=refs)
        w = plan.writer
        man = RecordsManifest(ser_name, w.group_size, w.compression, shards, dict(attrs or {}))
        if not refs:
            return man.to_json()
        header = {**man.to_json(), "num_records": added}
        del header["shards"]
        return node_commit.Extend(header, [], segments=refs, fresh=mode == "w")

    return node_commit.commit(
        plan.store,
        plan.node,
        build,
        write_id=plan.write_id,
        check=check,
        written=written,
        registered=True,
        retries=plan.retries if mode == "a" else 0,
        replaces=mode == "w",
        what=f"records dataset {where!r}",
        merge=tiered(plan.store, plan.node, written)
        if mode == "a" and plan.tiered and not refs
        else None,
    )


def prepare_write(
    url: str,
    component: str | None,
    mode: str,
    writer: WriterOptions,
    serializer: SerializerSpec,
    storage_options: Mapping[str, Any] | None,
    total: int,
) -> tuple[WritePlan, str | None]:
    """Check a write (mode, parents, serializer) before any shard is written -> (the plan
    of ``total`` shards :func:`write_records_shard` follows, the serializer name the commit
    expects or ``None`` for ``auto``); ``FileExistsError`` for ``mode="w-"`` on an
    existing node (example under :func:`commit_shards`)."""
    store, node = locate(url, component, storage_options, "a records dataset")
    return plan_write(store, node, mode, writer, serializer, total)


def plan_write(
    store: Store,
    node: str,
    mode: str,
    writer: WriterOptions,
    serializer: SerializerSpec,
    total: int,
    retries: int = APPEND_RETRIES,
    write_id: str | None = None,
) -> tuple[WritePlan, str | None]:
    """:func:`prepare_write` at ``node`` of ``store``; ``retries``: of an append's
    commit that lost a race (:mod:`arrayds.nodes.retry`). Once the checks passed, the
    write's pending marker is put (:func:`arrayds.nodes.pending.begin`: gc keeps its
    shards; its commit removes it), unless ``write_id`` names a write that put it."""
    if mode not in _MODES:
        raise ValueError(
            f"mode must be one of {', '.join(map(repr, _MODES))} for records, got {mode!r}"
        )
    where = store.display(node)
    retries = check_retries(retries, f"records dataset {where!r}")
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
    write_id = write_id or pending.begin(store, node)
    stem = shard_stem(node or store.root, write_id)
    return WritePlan(store, node, write_id, stem, total, writer, ser, retries), expected


def write_records(
    data: dask.bag.Bag | Sequence[Any],
    url: str,
    component: str | None = None,
    *,
    mode: str = "w-",
    compression: str = DEFAULT_COMPRESSION,
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
    nothing is visible until every shard succeeded (a write of more than
    :data:`arrayds.nodes.history.SEGMENT_LIMIT` shards has tasks write the manifest
    entries as segments, and the commit receives only their references:
    :func:`commit_segments`).  ``mode``: ``"w-"`` create
    (``FileExistsError`` if present), ``"w"`` replace, ``"a"`` append new shards (the
    serializer must match the dataset's; ``retries``: how often an append that lost a
    commit race to another writer commits again after that writer's records, with a
    bounded random backoff, :mod:`arrayds.nodes.retry`).  ``serializer``: ``"auto"`` (raw for bytes,
    msgpack otherwise), ``"raw"``, ``"msgpack"``, ``"json"``, ``"pickle"``, a registered
    name, a :class:`arrayds.serializers.Serializer` or an ``(encode, decode)`` pair.
    An item the serializer cannot encode is a ``TypeError`` naming the partition and
    the item index, and nothing is committed.

    Returns a :class:`RecordsDataset`, or with ``compute=False`` a
    ``dask.delayed.Delayed`` whose result is the committed manifest (a dict, as stored:
    :func:`arrayds.nodes.history.resolve` gives the entries of a long shard list).

    Example:
        >>> import os, tempfile, dask.bag as db
        >>> from arrayds.kinds.records import write as records
        >>> url = os.path.join(tempfile.mkdtemp(), "words")
        >>> bag = db.from_sequence([b"a", b"b", b"c", b"d"], npartitions=2)
        >>> records.write_records(bag, url).serializer
        'raw'
        >>> records.write_records([b"e"], url, mode="a").num_shards
        3
        >>> from arrayds.records import read_records
        >>> read_records(url).compute(scheduler="sync")
        [b'a', b'b', b'c', b'd', b'e']
    """
    store, node = locate(url, component, storage_options, "a records dataset")
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
    compression: str = DEFAULT_COMPRESSION,
    group_size: int = 1,
    serializer: SerializerSpec = "auto",
    num_shards: int | None = None,
    attrs: Mapping[str, Any] | None = None,
    compute: bool = True,
    progress: bool = False,
    retries: int = APPEND_RETRIES,
    compact: bool | str = "tiered",
) -> RecordsDataset | Delayed:
    """:func:`write_records` at ``node`` of ``store`` (the entry of both it and
    ``to_arrayrecord``); ``compact``: ``"tiered"`` (an append's commit merges the
    newest small shards by tiers) or not (``True``/``False``: the caller's affair).

    >>> from arrayds.storage import get_store
    >>> write([b"a", b"b"], get_store("memory://doc-records-write"), "r").num_records
    2
    """
    from dask.delayed import delayed

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
    writer = WriterOptions(compression, group_size)
    plan, expected = plan_write(store, node, mode, writer, serializer, total, retries)
    if compact != "tiered":
        plan = replace(plan, tiered=False)
    token = plan.stem
    if not is_bag and total == 1 and compute and not progress:
        # one shard of records already in memory: its task and the commit task run
        # here, as a graph of two tasks would (a small append costs no scheduler)
        with pending.uploading(plan.store, plan.node, plan.write_id):
            results = [write_records_shard(items, 0, plan, defer_sync=True)]
        man = commit_shards(results, plan, mode, dict(attrs) if attrs else None, expected)
        return RecordsDataset.from_committed(plan.store, plan.node, man)
    if is_bag:
        # one task per partition that computes the partition and writes its shard
        return _finish(data, plan, mode, attrs, expected, compute, None, progress)
    bounds = [len(items) * k // total for k in range(total + 1)]
    writes = [
        delayed(write_records_shard, pure=False)(
            delayed(items[bounds[k] : bounds[k + 1]], name=f"records-{token}-{k}", traverse=False),
            k,
            plan,
            dask_key_name=f"write-records-{token}-{k}",
        )
        for k in range(total)
    ]
    return _finish(writes, plan, mode, attrs, expected, compute, None, progress)


def _finish(
    writes: dask.bag.Bag | list[Any],
    plan: WritePlan,
    mode: str,
    attrs: Mapping[str, Any] | None,
    expected: str | None,
    compute: bool,
    scheduler: Any,
    progress: bool,
) -> RecordsDataset | Delayed:
    """Add the commit task after the shard tasks ``writes`` (or a bag's partitions,
    each written as a shard by :func:`arrayds.dask.graph.write_bag` on the bag's
    scheduler); compute it unless ``compute=False``."""
    args = (plan, mode, dict(attrs) if attrs else None, expected)
    key = f"commit-records-{plan.stem}"
    with pending.computing(plan.store, plan.node, plan.write_id, compute):
        man = _graph(writes, plan, args, key, compute, scheduler, progress)
    return man if not compute else RecordsDataset.from_committed(plan.store, plan.node, man)


def _graph(
    writes: dask.bag.Bag | list[Any],
    plan: WritePlan,
    args: tuple[Any, ...],
    key: str,
    compute: bool,
    scheduler: Any,
    progress: bool,
) -> Any:
    """The shard tasks ``writes`` and the commit task after them (see :func:`_finish`):
    at most :data:`arrayds.nodes.history.SEGMENT_LIMIT` shards, one
    :func:`commit_shards` over their results; more, :func:`_segments_graph`."""
    if _is_bag(writes):
        writes, scheduler = bag_writes(
            writes, write_records_shard, (plan,), name=f"write-records-{plan.stem}"
        )
    if len(writes) <= history.SEGMENT_LIMIT:
        return commit_after(
            writes,
            commit_shards,
            args,
            key=key,
            compute=compute,
            progress=progress,
            scheduler=scheduler,
        )
    committed = _segments_graph(writes, plan, args, key)
    return run(committed, progress, scheduler) if compute else committed


def _segments_graph(writes: Sequence[Any], plan: WritePlan, args: tuple[Any, ...], key: str) -> Any:
    """The commit of the shard tasks ``writes`` (more than
    :data:`arrayds.nodes.history.SEGMENT_LIMIT`) as tasks over runs of that many
    consecutive ones: ``records-segment-<stem>-<k>`` writes run ``k``'s entries as a
    segment (:func:`write_segment`) and the commit task ``key`` receives their
    references (:func:`commit_segments`). An ``auto`` serializer is decided without
    gathering the results in one task: ``records-chosen-<stem>-<k>`` takes the
    serializers run ``k`` chose (:func:`chosen_serializers`), one task
    ``records-serializer-<stem>`` decides from those (:func:`decide_serializer`), and
    the segment tasks and the commit take the decision."""
    from dask.delayed import delayed

    _, mode, attrs, expected = args
    step, stem = history.SEGMENT_LIMIT, plan.stem
    runs = [list(writes[i : i + step]) for i in range(0, len(writes), step)]
    ser: Any = expected
    if expected is None:
        chosen = [
            delayed(chosen_serializers, pure=False)(r, dask_key_name=f"records-chosen-{stem}-{k}")
            for k, r in enumerate(runs)
        ]
        ser = delayed(decide_serializer, pure=False)(
            chosen, dask_key_name=f"records-serializer-{stem}"
        )
    segments = [
        delayed(write_segment, pure=False)(
            r, plan, ser, dask_key_name=f"records-segment-{stem}-{k}"
        )
        for k, r in enumerate(runs)
    ]
    return delayed(commit_segments, pure=False)(segments, plan, mode, attrs, ser, dask_key_name=key)


def _write_from_source(source: Any, args: tuple[Any, ...], partition: int, plan: WritePlan):
    """Task: stream the items ``source(*args)`` yields into shard ``partition``."""
    return write_records_shard(source(*args), partition, plan)


def write_from_sources(
    sources: Sequence[tuple[Any, tuple[Any, ...]]],
    url: str,
    component: str | None = None,
    *,
    mode: str = "w-",
    compression: str = DEFAULT_COMPRESSION,
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
    one commit task (for many sources, over segment tasks: :func:`write_records`); the
    building block of :mod:`arrayds.convert`.  ``serializer`` is
    ``"raw"`` by default; with ``"auto"`` each task materializes its items to choose.

    Example:
        >>> import os, tempfile
        >>> from arrayds.kinds.records import write as records
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
    writer = WriterOptions(compression, group_size)
    plan, expected = prepare_write(
        url, component, mode, writer, serializer, storage_options, len(sources)
    )
    writes = [
        delayed(_write_from_source, pure=False)(
            fn, tuple(args), k, plan, dask_key_name=f"write-records-{plan.stem}-{k}"
        )
        for k, (fn, args) in enumerate(sources)
    ]
    return _finish(writes, plan, mode, attrs, expected, compute, scheduler, progress)


def _is_bag(obj: Any) -> bool:
    try:
        import dask.bag as db
    except ImportError:  # pragma: no cover - dask is an extra
        return False
    return isinstance(obj, db.Bag)


# ------------------------------------------------------- to_arrayrecord / from_arrayrecord


def is_records_input(x: Any) -> bool:
    """A dask bag, or a list/tuple of records (bytes or objects). A list made only
    of numpy arrays is a ragged array (another kind), not records."""
    bag = sys.modules.get("dask.bag")
    if bag is not None and isinstance(x, bag.Bag):
        return True
    if isinstance(x, (list, tuple)):
        return not (x and all(isinstance(i, np.ndarray) for i in x))
    return False


def write_input(
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
