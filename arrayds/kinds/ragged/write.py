"""Writing ragged arrays: items cut into pieces along their variable axis, from a
list (shards written in parallel) or a dask bag (one task per partition) plus one
commit task.

>>> import numpy as np
>>> ra = write_ragged([np.zeros((2, n)) for n in (3, 1)], "memory://doc-ragged-write-mod")
>>> ra.shapes
[(2, 3), (2, 1)]
"""

from __future__ import annotations

import errno
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from ...dask.graph import bag_writes, commit_after, run, write_bag
from ...errors import CommitConflictError
from ...nodes import commit as node_commit
from ...nodes import history, pending
from ...nodes import registry as kinds
from ...nodes.history import resolve
from ...nodes.merge import tiered as merge_tiered
from ...nodes.names import (
    SHARD_DIR,
    check_json_value,
    join_component,
    new_write_id,
    shard_name,
)
from ...nodes.options import DEFAULT_COMPRESSION, check_compression, writer_options
from ...nodes.read import locate
from ...nodes.retry import APPEND_RETRIES, check_retries
from ...nodes.shards import write_shard
from ...storage.base import BaseStore as Store
from ..array.tensor import check_dtype, encode_chunk

if TYPE_CHECKING:
    import dask.bag
    from dask.delayed import Delayed
from .handle import RaggedArray, is_int
from .manifest import KIND, PIECE_BYTES, SHARD_BYTES, RaggedManifest, RaggedShard, count_pieces

__all__ = [
    "PIECE_BYTES",
    "SHARD_BYTES",
    "RaggedArray",
    "RaggedManifest",
    "RaggedShard",
    "write_ragged",
]
_MODES = ("w-", "w", "a")


# ------------------------------------------------------------------ writing


def _parse_bytes(v: Any, what: str) -> int:
    if is_int(v) and not isinstance(v, bool):
        if v <= 0:
            raise ValueError(f"{what} must be positive, got {v!r}")
        return int(v)
    if isinstance(v, str):
        units = {
            "": 1,
            "b": 1,
            "kb": 10**3,
            "mb": 10**6,
            "gb": 10**9,
            "kib": 1 << 10,
            "mib": 1 << 20,
            "gib": 1 << 30,
            "k": 1 << 10,
            "m": 1 << 20,
            "g": 1 << 30,
        }
        mt = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", v)
        if mt and mt.group(2).lower() in units:
            n = int(float(mt.group(1)) * units[mt.group(2).lower()])
            if n > 0:
                return n
    raise ValueError(f"{what} must be a positive int or a size such as '64MiB', got {v!r}")


@dataclass(frozen=True)
class _Layout:
    dtype: np.dtype
    ndim: int
    axis: int
    piece_len: int

    def check(self, x: Any, where: str) -> np.ndarray:
        """An item as an array, or ValueError/TypeError naming it."""
        arr = np.asarray(x)
        if arr.dtype.kind == "O":
            raise TypeError(f"{where}: object arrays cannot be stored (expected {self.dtype})")
        if arr.ndim != self.ndim or arr.dtype != self.dtype:
            raise ValueError(
                f"{where} has ndim {arr.ndim} and dtype {arr.dtype}; every item of a ragged "
                f"array must have ndim {self.ndim} and dtype {self.dtype}"
            )
        return arr


def _first_layout(first: Any, axis: int | None, piece_len: int | None, where: str) -> _Layout:
    arr = np.asarray(first)
    try:
        dt = check_dtype(arr.dtype, where)
    except ValueError as e:
        raise TypeError(str(e)) from None
    if arr.ndim == 0:
        raise ValueError(f"{where} is 0-d; ragged items need at least one dimension")
    if axis is None:
        # the longest axis of the first item (ties: the last of them)
        ax = max(range(arr.ndim), key=lambda d: (arr.shape[d], d))
    else:
        if not is_int(axis) or not -arr.ndim <= axis < arr.ndim:
            raise ValueError(f"axis {axis!r} is out of range for items with {arr.ndim} dimensions")
        ax = int(axis) % arr.ndim
    if piece_len is None:
        row = math.prod(s for d, s in enumerate(arr.shape) if d != ax) * dt.itemsize
        plen = max(1, PIECE_BYTES // max(1, row))
    else:
        if not is_int(piece_len) or piece_len < 1:
            raise ValueError(f"piece_len must be a positive int, got {piece_len!r}")
        plen = int(piece_len)
    return _Layout(dt, arr.ndim, ax, plen)


def _item_records(arr: np.ndarray, lay: _Layout) -> Iterator[np.ndarray]:
    n = arr.shape[lay.axis]
    if n == 0:
        yield encode_chunk(arr, lay.dtype)
        return
    sl: list[Any] = [slice(None)] * lay.ndim
    for a in range(0, n, lay.piece_len):
        sl[lay.axis] = slice(a, a + lay.piece_len)
        yield encode_chunk(arr[tuple(sl)], lay.dtype)


@dataclass(frozen=True)
class _WritePlan:
    store: Store
    node: str
    write_id: str
    layout: _Layout | None
    options: str
    shard_bytes: int


def _write_items(
    items: Iterable[Any], plan: _WritePlan, part: int, lay: _Layout | None = None
) -> list[dict[str, Any]]:
    """Task: write the items of one partition as one or more shards (split at
    ``shard_bytes``) -> their entries (item counts local to the partition)."""
    lay = lay or plan.layout
    assert lay is not None
    out: list[dict[str, Any]] = []
    batch: list[np.ndarray] = []
    size = 0
    local = 0

    def flush() -> None:
        nonlocal batch, size
        if not batch:
            return
        relpath = shard_name(plan.write_id, part, len(out), folder=SHARD_DIR)
        shapes = np.array([a.shape for a in batch], dtype=np.int64).reshape(len(batch), lay.ndim)
        npieces = int(count_pieces(shapes[:, lay.axis], lay.piece_len).sum())

        def records() -> Iterator[np.ndarray]:
            for a in batch:
                yield from _item_records(a, lay)
            yield encode_chunk(shapes, np.dtype("<i8"))

        nbytes = write_shard(
            plan.store, join_component(plan.node, relpath), records(), plan.options
        )
        out.append({"path": relpath, "items": len(batch), "records": npieces + 1, "bytes": nbytes})
        batch, size = [], 0

    for x in items:
        where = f"ragged item {local}" + (f" of partition {part}" if part >= 0 else "")
        arr = lay.check(x, where)
        if batch and size + arr.nbytes > plan.shard_bytes:
            flush()
        batch.append(arr)
        size += arr.nbytes
        local += 1
    flush()
    return out


def _write_partition(items: Iterable[Any], part: int, plan: _WritePlan) -> dict[str, Any]:
    """Bag task: the items of one partition -> its shard entries."""
    return {"shards": _write_items(items, plan, part), "part": part}


def _commit(
    results: list[list[dict[str, Any]]] | list[dict[str, Any]],
    plan: _WritePlan,
    mode: str,
    compression: str,
    attrs: Mapping[str, Any] | None,
    base: tuple[int, str] | None,
    tiered: bool = False,
    retries: int = 0,
) -> dict[str, Any]:
    """Task: assign item ranges in partition order and commit the manifest
    (:func:`arrayds.nodes.commit.commit`) if the node is still as the write found it
    (``base``: its stamp then, ``None`` if it had none); else the shards are removed
    and nothing of the write is visible. ``tiered`` (an append, ``compact="tiered"``):
    the tiered merge of the newest small shards runs inside this commit
    (:func:`arrayds.nodes.merge.tiered`: one version). ``retries`` (an append): a
    ragged array another writer committed to since is appended to after its items
    instead (its shards hold whole items: only their ranges move), and a refused put
    is tried again so, from a fresh read, up to ``retries`` times
    (:mod:`arrayds.nodes.retry`)."""
    store, node = plan.store, plan.node
    where = store.display(node)
    lay = plan.layout
    assert lay is not None
    entries: list[RaggedShard] = []
    pos = 0
    for r in results:
        for e in r["shards"] if isinstance(r, dict) else r:
            entries.append(RaggedShard(e["path"], pos, pos + e["items"], e["records"], e["bytes"]))
            pos += e["items"]

    rebase = mode == "a" and retries > 0

    def check(now: node_commit.NodeVersion) -> None:
        if now.stamp == base:
            return
        if rebase and now.kind == KIND:
            cur = RaggedManifest.from_json(now.lazy_raw or {}, f"ragged array {where!r}")
            if (cur.dtype, cur.ndim, cur.axis, cur.piece_len) == (
                lay.dtype,
                lay.ndim,
                lay.axis,
                lay.piece_len,
            ):
                return
        _refuse(mode, now, where)

    def build(now: node_commit.NodeVersion) -> dict[str, Any] | node_commit.Extend:
        if mode == "a" and now.exists:
            # an append adds entries after the stored ones, whose item count the head
            # holds: no segment of a long list is read (docs/spec.md 14.4)
            old = RaggedManifest.from_json(now.lazy_raw or {}, f"ragged array {where!r}")
            n0 = old.count
            return node_commit.Extend(
                {"count": n0 + pos, "attrs": {**old.attrs, **dict(attrs or {})}},
                [e.shifted(n0).to_json() for e in entries],
            )
        else:
            man = RaggedManifest(
                lay.dtype,
                lay.ndim,
                lay.axis,
                lay.piece_len,
                compression,
                dict(attrs or {}),
                entries,
            )
        return man.to_json()

    written = [e.path for e in entries]
    return node_commit.commit(
        store,
        node,
        build,
        write_id=plan.write_id,
        check=check,
        written=written,
        retries=retries if rebase else 0,
        replaces=mode == "w",
        what=f"ragged array {where!r}",
        merge=merge_tiered(store, node, written) if tiered and mode == "a" else None,
        registered=True,
    )


def is_bag(obj: Any) -> bool:
    try:
        import dask.bag as db
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, db.Bag)


@dataclass(frozen=True)
class _Request:
    """A checked ragged write, before any shard is written (:func:`_check_write`)."""

    store: Store
    node: str
    mode: str
    compression: str
    shard_bytes: int
    attrs: dict[str, Any] | None
    old: RaggedManifest | None
    """The ragged array appended to (``mode="a"`` on an existing one)."""
    base: tuple[int, str] | None
    """The node's stamp when the write started (what its commit expects)."""
    write_id: str
    """The write's id; its pending marker is put before its first shard (:meth:`begin`)."""
    tiered: bool = True
    """An append's commit runs the tiered merge (``compact="tiered"``)."""
    retries: int = APPEND_RETRIES
    """How often an append's commit that lost a race is tried again (``retries=``)."""

    @property
    def where(self) -> str:
        return self.store.display(self.node)

    def layout(self, first: Any, axis: int | None, piece_len: int | None) -> _Layout:
        """The layout of the items: the stored one when appending (``first`` checked
        against it), else read from the first item."""
        old = self.old
        if old is not None:
            lay = _Layout(old.dtype, old.ndim, old.axis, old.piece_len)
            if first is not None:
                lay.check(first, "ragged item 0")
            return lay
        return _first_layout(first, axis, piece_len, "ragged item 0")

    def plan(self, lay: _Layout, shard_bytes: int) -> _WritePlan:
        options = writer_options(self.compression if self.old is None else self.old.compression)
        return _WritePlan(self.store, self.node, self.write_id, lay, options, shard_bytes)

    def commit_args(self, plan: _WritePlan) -> tuple[Any, ...]:
        """The arguments of :func:`_commit` after the shard results."""
        return (
            plan, self.mode, self.compression, self.attrs, self.base, self.tiered, self.retries,
        )  # fmt: skip

    def begin(self) -> None:
        """Put the write's pending marker (:func:`arrayds.nodes.pending.begin`): the
        checks passed and the first shard comes next (gc keeps its shards)."""
        pending.begin(self.store, self.node, self.write_id)

    @property
    def commit_key(self) -> str:
        return f"commit-ragged-{self.write_id}"


def _check_write(
    store: Store,
    node: str,
    mode: str,
    compression: str,
    piece_len: int | None,
    axis: int | None,
    shard_size: int | str | None,
    attrs: Mapping[str, Any] | None,
    retries: int = APPEND_RETRIES,
) -> _Request:
    """Check a ragged write against its arguments and the node (before any shard is
    written): mode, compression, attrs, ``retries``, the groups above, and for
    ``"w-"``/``"a"`` the node itself."""
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {_MODES} for a ragged array, got {mode!r}")
    where = store.display(node)
    retries = check_retries(retries, f"ragged array {where!r}")
    compression = check_compression(compression, f"ragged array {where!r}")
    shard_bytes = SHARD_BYTES if shard_size is None else _parse_bytes(shard_size, "shard_size")
    if attrs is not None:
        if not isinstance(attrs, Mapping):
            raise TypeError(f"ragged array {where!r}: attrs must be a mapping")
        check_json_value(dict(attrs), f"ragged array {where!r}")
    node_commit.check_parents(store, node)
    base = node_commit.read(store, node)
    current = base.lazy_raw  # a long list's segments stay unread (an append needs none)
    old: RaggedManifest | None = None
    if current is not None:
        if mode == "w-":
            raise FileExistsError(
                errno.EEXIST,
                f"{where!r} already exists (mode 'w-'); use mode 'w' to replace it or 'a' "
                f"to append",
                where,
            )
        if mode == "a":
            if current.get("kind") != KIND:
                raise ValueError(
                    f"cannot append ragged items to {where!r}: it is a {current.get('kind')!r} node"
                )
            old = RaggedManifest.from_json(current, f"ragged array {where!r}")
            if axis is not None and (int(axis) % old.ndim) != old.axis:
                raise ValueError(
                    f"ragged array {where!r} is stored in pieces along axis {old.axis}; cannot "
                    f"append with axis={axis}"
                )
            if piece_len is not None and piece_len != old.piece_len:
                raise ValueError(
                    f"ragged array {where!r} has piece_len {old.piece_len}; cannot append with "
                    f"piece_len={piece_len}"
                )
    return _Request(
        store,
        node,
        mode,
        compression,
        shard_bytes,
        dict(attrs) if attrs else None,
        old,
        base.stamp,
        new_write_id(),
        retries=retries,
    )


def _write_bag(
    data: dask.bag.Bag,
    req: _Request,
    axis: int | None,
    piece_len: int | None,
    first: Any,
    compute: bool,
    progress: bool,
) -> RaggedArray | Delayed:
    """A bag: one shard-writing task per partition (fused with the bag's own tasks),
    then the commit task."""
    if req.old is None:
        # the layout (dtype, ndim, axis, piece_len) comes from the first item:
        # compute partitions until one has an item (usually just the first)
        first = first if first is not None else _first_item(data)
        if first is None:
            raise ValueError(f"ragged array {req.where!r}: the bag has no items")
    lay = req.layout(None if req.old is not None else first, axis, piece_len)
    plan = req.plan(lay, req.shard_bytes)
    req.begin()
    if data.npartitions > history.SEGMENT_LIMIT:
        with pending.computing(req.store, req.node, req.write_id, compute):
            writes, scheduler = bag_writes(
                data, _write_partition, (plan,), name=f"write-ragged-{req.write_id}"
            )
            committed = _segments_graph(writes, req, plan)
            man = run(committed, progress, scheduler) if compute else committed
        return _opened(req, man) if compute else man
    with pending.computing(req.store, req.node, req.write_id, compute):
        man = write_bag(
            data,
            _write_partition,
            (plan,),
            _commit,
            req.commit_args(plan),
            name=f"write-ragged-{req.write_id}",
            commit_key=req.commit_key,
            compute=compute,
            progress=progress,
        )
    if not compute:
        return man
    return _opened(req, man)


def _run_items(results: Sequence[Mapping[str, Any]]) -> int:
    """Task: the number of items a run of partitions wrote (their :func:`_write_partition`
    results): what the segment tasks after it start their items at."""
    return sum(e["items"] for r in results for e in r["shards"])


def _starts(counts: Sequence[int], n0: int) -> list[int]:
    """Task: the first item of each run of partitions, from the runs' item counts
    (:func:`_run_items`) and the item count ``n0`` of the array appended to (0 for a new
    one): one number per :data:`arrayds.nodes.history.SEGMENT_LIMIT` partitions."""
    out = [n0]
    for c in counts[:-1]:
        out.append(out[-1] + c)
    return out


def _write_segment(
    results: Sequence[Mapping[str, Any]], plan: _WritePlan, starts: Sequence[int], k: int
) -> list[dict[str, Any]]:
    """Task: the shard entries of run ``k`` of partitions (their :func:`_write_partition`
    results), their items from ``starts[k]`` on, written as segments once the shards'
    names are durable; returns their references, all the commit receives of them
    (:func:`_commit_segments`)."""
    entries: list[dict[str, Any]] = []
    pos = int(starts[k])
    for r in results:
        for e in r["shards"]:
            shard = RaggedShard(e["path"], pos, pos + e["items"], e["records"], e["bytes"])
            entries.append(shard.to_json())
            pos += e["items"]
    st = plan.store
    st.flush([join_component(plan.node, e["path"]) for e in entries])
    return history.write_segments(st, plan.node, entries, plan.write_id)


def _segments_graph(writes: Sequence[Any], req: _Request, plan: _WritePlan) -> Any:
    """The commit of the partition tasks ``writes`` (more than
    :data:`arrayds.nodes.history.SEGMENT_LIMIT`) over runs of that many consecutive
    ones, so the commit holds a reference per segment and never the entries:
    ``ragged-items-<id>-<k>`` counts run ``k``'s items (:func:`_run_items`), one task
    ``ragged-starts-<id>`` turns the counts into each run's first item
    (:func:`_starts`), ``ragged-segment-<id>-<k>`` writes run ``k``'s entries as
    segments (:func:`_write_segment`) and the commit task receives their references
    (:func:`_commit_segments`)."""
    from dask.delayed import delayed

    step, wid = history.SEGMENT_LIMIT, req.write_id
    runs = [list(writes[i : i + step]) for i in range(0, len(writes), step)]
    counts = [
        delayed(_run_items, pure=False)(r, dask_key_name=f"ragged-items-{wid}-{k}")
        for k, r in enumerate(runs)
    ]
    n0 = req.old.count if req.old is not None else 0
    starts = delayed(_starts, pure=False)(counts, n0, dask_key_name=f"ragged-starts-{wid}")
    segments = [
        delayed(_write_segment, pure=False)(
            r, plan, starts, k, dask_key_name=f"ragged-segment-{wid}-{k}"
        )
        for k, r in enumerate(runs)
    ]
    return delayed(_commit_segments, pure=False)(
        segments, plan, req.mode, req.compression, req.attrs, req.base, n0,
        dask_key_name=req.commit_key,
    )  # fmt: skip


def _commit_segments(
    segments: Sequence[Sequence[Mapping[str, Any]]],
    plan: _WritePlan,
    mode: str,
    compression: str,
    attrs: Mapping[str, Any] | None,
    base: tuple[int, str] | None,
    n0: int,
) -> dict[str, Any]:
    """Task: commit a write whose entries the tasks wrote as segments
    (:func:`_write_segment`; ``segments``: their references in dataset order, their
    items from ``n0`` on, the item count of the array appended to). The segments hold
    their items' ranges, so the commit needs the node as the write found it
    (``base``): another writer's commit since (even an append) refuses it, unlike an
    append of few partitions (whose ranges move), and a refused commit removes the
    segments and the shards they list: nothing is visible. A commit task run again
    after its first run landed returns the node's head and commits nothing. No tiered
    merge runs."""
    store, node = plan.store, plan.node
    where = store.display(node)
    lay = plan.layout
    assert lay is not None
    refs = [ref for seg in segments for ref in seg]
    added = sum(r["items"][1] - r["items"][0] for r in refs)
    head = node_commit.read(store, node).head
    if node_commit.landed_in(head, plan.write_id):
        return head  # committed by an earlier run of this task: not twice

    def check(now: node_commit.NodeVersion) -> None:
        if now.stamp == base:
            return
        _refuse(mode, now, where)

    def build(now: node_commit.NodeVersion) -> node_commit.Extend:
        if mode == "a" and now.exists:
            old = RaggedManifest.from_json(now.lazy_raw or {}, f"ragged array {where!r}")
            fields = {"count": n0 + added, "attrs": {**old.attrs, **dict(attrs or {})}}
            return node_commit.Extend(fields, [], segments=refs)
        man = RaggedManifest(
            lay.dtype, lay.ndim, lay.axis, lay.piece_len, compression, dict(attrs or {}), []
        )
        header = {**man.to_json(), "count": added}
        del header["shards"]
        return node_commit.Extend(header, [], segments=refs, fresh=mode == "w")

    try:
        return node_commit.commit(
            store,
            node,
            build,
            write_id=plan.write_id,
            check=check,
            written=[],
            replaces=mode == "w",
            what=f"ragged array {where!r}",
            registered=True,
        )
    except (FileExistsError, CommitConflictError):
        _remove_written(plan, refs)
        raise


def _remove_written(plan: _WritePlan, refs: Sequence[Mapping[str, Any]]) -> None:
    """Remove the segments ``refs`` and the shards they list (read a segment at a time:
    never gathered whole) of a write whose commit was refused, unless a version of the
    node names the write (a commit task run again long after its first run landed).
    Best effort: a leftover is an orphan (no reader sees it; ``arrayds gc`` removes
    it)."""
    st, node = plan.store, plan.node
    try:
        if any(v.commit == plan.write_id for v in node_commit.versions(st, node)):
            return
        log = history.ShardLog(st, node, {"segments": list(refs), "tail": []}, "ragged write")
        for k in range(log.nsegments):
            st.delete([join_component(node, e["path"]) for e in log.part(k)])
        st.delete([f"{node}/{r['path']}" if node else r["path"] for r in refs])
    except Exception:  # noqa: BLE001 - best effort
        return


def _write_list(
    data: Any, req: _Request, axis: int | None, piece_len: int | None, compute: bool
) -> RaggedArray | Delayed:
    """A list: items packed into shards of about ``shard_bytes`` in order, written in
    threads (or as delayed tasks with ``compute=False``), then committed."""
    from dask.delayed import delayed

    where = req.where
    if isinstance(data, np.ndarray) and data.dtype.kind != "O":
        data = list(data)
    if not isinstance(data, (list, tuple)):
        raise TypeError(
            f"ragged array {where!r}: expected a list of numpy arrays or a dask bag of them, "
            f"got {type(data).__name__}"
        )
    if not data and req.old is None:
        raise ValueError(f"ragged array {where!r}: no items to write")
    items = list(data)
    lay = req.layout(items[0] if items else None, axis, piece_len)
    arrays = [lay.check(x, f"ragged item {i}") for i, x in enumerate(items)]
    # group items into shards of about shard_bytes, in order
    groups: list[list[np.ndarray]] = []
    size = 0
    for a in arrays:
        if not groups or (groups[-1] and size + a.nbytes > req.shard_bytes):
            groups.append([])
            size = 0
        groups[-1].append(a)
        size += a.nbytes
    plan = req.plan(lay, 1 << 62)
    req.begin()
    if not compute:
        writes = [
            delayed(_write_items, pure=False)(
                delayed(g, traverse=False),
                plan,
                k,
                dask_key_name=f"write-ragged-{req.write_id}-{k}",
            )
            for k, g in enumerate(groups)
        ]
        return commit_after(
            writes, _commit, req.commit_args(plan), key=req.commit_key, compute=False
        )
    with pending.uploading(req.store, req.node, req.write_id):
        if len(groups) <= 1:
            results = [_write_items(g, plan, k) for k, g in enumerate(groups)]
        else:
            with ThreadPoolExecutor(min(len(groups), max(2, os.cpu_count() or 1))) as ex:
                futures = [ex.submit(_write_items, g, plan, k) for k, g in enumerate(groups)]
                try:
                    results = [f.result() for f in futures]
                except BaseException:
                    for f in futures:
                        f.cancel()
                    raise
    return _opened(req, _commit(results, *req.commit_args(plan)))


def _opened(req: _Request, man: dict[str, Any]) -> RaggedArray:
    """The handle of the manifest a commit returned (for an append, as stored: its
    segments unread)."""
    doc = resolve(req.store, req.node, man, req.where, lazy=True)
    return RaggedArray(req.store, req.node, RaggedManifest.from_json(doc, req.where))


def write(
    data: Sequence[np.ndarray] | dask.bag.Bag,
    store: Store,
    node: str,
    *,
    mode: str = "w-",
    compression: str = DEFAULT_COMPRESSION,
    piece_len: int | None = None,
    axis: int | None = None,
    shard_size: int | str | None = None,
    attrs: Mapping[str, Any] | None = None,
    compute: bool = True,
    progress: bool = False,
    first: Any = None,
    compact: bool | str = "tiered",
    retries: int = APPEND_RETRIES,
) -> RaggedArray | Delayed:
    """:func:`write_ragged` at ``node`` of ``store`` (the entry of both it and
    ``to_arrayrecord``); ``first``: a bag's first item when the caller read it
    already; ``compact``: ``"tiered"`` (an append's commit merges the newest small
    shards by tiers) or not (``True``/``False``: the caller's affair); ``retries``: as
    :func:`write_ragged`'s.

    >>> import numpy as np
    >>> from arrayds.storage import get_store
    >>> len(write([np.zeros(3), np.zeros(5)], get_store("memory://doc-ragged-write"), "x"))
    2
    """
    req = _check_write(store, node, mode, compression, piece_len, axis, shard_size, attrs, retries)
    if compact != "tiered":
        req = replace(req, tiered=False)
    if is_bag(data):
        return _write_bag(data, req, axis, piece_len, first, compute, progress)
    return _write_list(data, req, axis, piece_len, compute)


def _refuse(mode: str, now: node_commit.NodeVersion, where: str) -> NoReturn:
    """The error of a ragged write whose node changed while it ran: ``"w-"`` over a
    node that exists now, else a conflict (nothing of the write is visible)."""
    if mode == "w-" and now.exists:
        raise FileExistsError(
            errno.EEXIST, f"{where} already exists (mode 'w-' never replaces)", where
        )
    raise CommitConflictError(
        f"ragged array {where!r}: another writer committed while this write ran; nothing "
        f"of this write is visible"
    )


def write_ragged(
    data: Sequence[np.ndarray] | dask.bag.Bag,
    url: str | os.PathLike[str],
    component: str | None = None,
    *,
    mode: str = "w-",
    compression: str = DEFAULT_COMPRESSION,
    piece_len: int | None = None,
    axis: int | None = None,
    shard_size: int | str | None = None,
    attrs: Mapping[str, Any] | None = None,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    progress: bool = False,
    retries: int = APPEND_RETRIES,
) -> RaggedArray | Delayed:
    """Write numpy arrays of one dtype and ndim but different shapes as a ragged array.

    ``data``: a list (or tuple) of arrays, or a ``dask.bag.Bag`` of arrays. Items are
    cut into pieces of ``piece_len`` elements along ``axis``. Defaults: ``axis`` is
    the longest axis of the first item (ties: the last), ``piece_len`` makes a piece
    of the first item about :data:`PIECE_BYTES` (1 MiB) uncompressed. Items are packed
    into shard files of about ``shard_size`` bytes (default :data:`SHARD_BYTES`,
    64 MiB) in order, never splitting an item; a bag writes each partition as its
    own shard(s). Shards are written in parallel (threads for a list, one task per
    partition for a bag); one final commit makes them visible together (a bag of more
    than :data:`arrayds.nodes.history.SEGMENT_LIMIT` partitions: its tasks write the
    shard entries as segments and the commit receives only their references,
    docs/spec.md 14.4.1).

    ``mode``: ``"w-"`` create (``FileExistsError`` if the node exists), ``"w"``
    replace, ``"a"`` append items (dtype, ndim and axis must match the stored ones;
    ``piece_len`` is the stored one). An item whose ndim or dtype differs from the
    first is a ``ValueError`` naming it, and nothing is committed. ``retries``: how
    often an append that lost a commit race to another writer commits again after
    that writer's items, with a bounded random backoff (:mod:`arrayds.nodes.retry`;
    ``0`` raises :class:`arrayds.errors.CommitConflictError` at once; a count below 0
    or not an integer is a ``ValueError``; an append of a bag written as segments is
    not moved: its commit raises :class:`arrayds.errors.CommitConflictError`).

    With ``compute=False`` returns a ``dask.delayed.Delayed`` that writes and commits
    (its result is the manifest dict). A bag written to a new node has its first
    partition computed once up front to read the layout (dtype, ndim, axis,
    piece_len) from its first item.

    >>> import numpy as np, arrayds.ragged as rg
    >>> ra = rg.write_ragged([np.zeros((2, 10), "f4"), np.zeros((2, 4), "f4")],
    ...                      "memory://doc-write-ragged", piece_len=3)
    >>> ra.axis, ra.piece_len, ra.nshards
    (1, 3, 1)
    """
    store, node = locate(url, component, storage_options, "a ragged array")
    return write(
        data,
        store,
        node,
        mode=mode,
        compression=compression,
        piece_len=piece_len,
        axis=axis,
        shard_size=shard_size,
        attrs=attrs,
        compute=compute,
        progress=progress,
        retries=retries,
    )


# ------------------------------------------------------- to/from_arrayrecord


def _is_array_item(x: Any) -> bool:
    return isinstance(x, np.ndarray) and x.dtype.kind != "O" and x.ndim >= 1


def is_ragged_list(data: Any) -> bool:
    """A non-empty list/tuple made only of numpy arrays (ndim >= 1)."""
    return (
        isinstance(data, (list, tuple))
        and bool(data)
        and all(isinstance(x, np.ndarray) for x in data)
        and any(_is_array_item(x) for x in data)
    )


def _first_of(part: Any) -> list[Any]:
    for item in part:
        return [item]
    return []


def _first_item(bag: Any) -> Any:
    # Each probe task returns at most one item: the partition itself stays on the
    # worker (shipping a whole partition to the client doubled the cost of
    # to_arrayrecord(bag) for large record partitions).
    for part in bag.map_partitions(_first_of).to_delayed():
        got = part.compute()
        if len(got):
            return got[0]
    return None


def api_writer(
    data: Any,
    store: Store,
    node: str,
    *,
    region: Any,
    dims: Any,
    serializer: str,
    group_size: int,
    **options: Any,
) -> Any:
    """``arrayds.to_arrayrecord`` for lists of numpy arrays and for bags. They are a
    ragged array (docs/ragged.md) unless the call asks for records — a
    ``serializer`` other than ``"auto"``, a ``group_size`` or ``num_shards`` — or the
    data is a bag whose first item is not a numpy array: then they go to records
    (:mod:`arrayds.records`), numpy arrays serialized like any other object."""
    first = None
    as_records = serializer not in ("auto", None) or group_size != 1 or "num_shards" in options
    if not as_records and is_bag(data):
        first = _first_item(data)
        as_records = not _is_array_item(first)
    if as_records:
        # a bag of other objects, or records options: the records writer's input
        extra = {"region": region, "dims": dims, "serializer": serializer}
        records = kinds.get_writer("records")
        return records.write(data, store, node, group_size=group_size, **extra, **options)
    where = f"ragged array {store.display(node)!r}"
    for key, value in (("region", region), ("dims", dims)):
        if value is not None:
            raise ValueError(f"{where}: {key}= applies to N-d arrays, not ragged arrays")
    unknown = sorted(set(options) - set(_RAGGED_WRITE_KEYS))
    if unknown:
        raise TypeError(f"{where}: unexpected keyword arguments {unknown} for a ragged array")
    return write(data, store, node, first=first, **options)


_RAGGED_WRITE_KEYS = (
    "mode",
    "compression",
    "shard_size",
    "attrs",
    "compute",
    "progress",
    "piece_len",
    "axis",
    "compact",
    "retries",
)
"""The keywords of ``to_arrayrecord`` that a ragged array write takes."""
