"""Compaction of one node, per kind: what is live, and the rewrite of it into new shards.

:mod:`arrayds.tools.compact` drives compaction (the walk, the rule, the commit); this
module holds what differs between kinds, for the kinds' records
(:attr:`arrayds.nodes.kinds.NodeKind.compact`):

* :func:`usage` — per shard file: its size and how many of its bytes a reader can
  still select (array chunks hidden by newer entries are dead; records and ragged
  shards are live as a whole);
* :func:`compact_array`, :func:`compact_records`, :func:`compact_ragged` — write the
  live data of a node into new shards of about ``shard_size`` stored bytes and return
  the manifest that names them (:class:`Rewrite`). They never commit: the caller
  does, with one compare-and-swap (a plain node) or one group snapshot commit.

Records are copied byte for byte (the chunk records of arrays, the encoded records of
records datasets, the pieces of ragged arrays): nothing is decoded, so what a reader
gets is the same bytes; only the files and the manifest's entries change.

>>> import arrayds, numpy as np
>>> from arrayds.storage import get_store
>>> a = arrayds.open_array("memory://doc-ck", mode="w", shape=(0,), dtype="i4", chunks=1)
>>> for i in range(6):
...     _ = a.append(np.array([i], "i4"))
>>> st = get_store("memory://doc-ck")
>>> rw = compact_array(st, "", a.manifest, shard_size=1 << 20, write_id="0" * 24, written=[])
>>> len(a.manifest.shards), len(rw.manifest.shards), rw.written
(6, 1, ['c/000000000000000000000000-0.array_record'])
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import CorruptionError
from ..manifest import ArrayManifest, ShardEntry, writer_options
from ..ragged import RaggedManifest, RaggedShard
from ..records import RecordsManifest, ShardInfo, plan_write
from ..records import write_shard as write_records_shard
from ..store import (
    IO_THREADS,
    SHARD_DIR,
    SHARD_SUFFIX,
    Store,
    io_pool,
    join_component,
    node_shard_reader,
    read_records,
    write_shard,
)
from ..tensor import decode_chunk, encode_chunk

__all__ = [
    "CELL_LIMIT",
    "FileUse",
    "Rewrite",
    "TooFragmentedError",
    "Usage",
    "compact_array",
    "compact_ragged",
    "compact_records",
    "compact_tail",
    "entry_sizes",
    "usage",
    "whole_files",
]

CELL_LIMIT = 1 << 24
"""The most cells (products of the intervals the entries' boundaries cut each axis
into) an array's liveness map may have; more is :class:`TooFragmentedError`."""

_NPY_HEADER = 128
"""About the size of a record's ``.npy`` header (docs/spec.md 6.3)."""

_READ_BATCH_BYTES = 64 << 20
"""About how many decompressed bytes one batched read of old records brings in."""


class TooFragmentedError(ValueError):
    """An array whose entries cut its chunk grid into more than :data:`CELL_LIMIT`
    cells: its liveness is not mapped (compaction skips it)."""


@dataclass(frozen=True)
class FileUse:
    """One shard file of a node: its size and its live part."""

    path: str
    bytes: int | None
    """The file's size (``None``: neither the manifest nor the caller knows it)."""
    records: int
    live_records: int


@dataclass(frozen=True)
class Usage:
    """What :func:`usage` measured of a node's manifest."""

    files: list[FileUse]
    entries: int
    live_entries: int


@dataclass
class Rewrite:
    """A node's live data rewritten into new shards (not committed yet)."""

    manifest: Any
    """The node's next manifest object (its kind's), naming only the new shards."""
    written: list[str] = field(default_factory=list)
    """The new shard files, relative to the node."""
    bytes_written: int = 0


def _sized(path: str, recorded: int | None, sizes: Mapping[str, int] | None) -> int | None:
    if recorded:
        return recorded
    if sizes is not None and path in sizes:
        return sizes[path]
    return recorded


# ------------------------------------------------------------------ arrays


def _cells(m: ArrayManifest) -> tuple[list[np.ndarray], np.ndarray]:
    """(bounds per axis, cells): the entries' boundaries cut each axis of the chunk
    grid into intervals; ``cells`` holds, for each product of intervals, the index of
    the entry a reader selects there (the last one covering it), or -1 (fill)."""
    entries = m.shards
    nd = m.ndim
    if nd == 0:
        return [], np.array(len(entries) - 1, dtype=np.int64)
    if not entries:
        return [np.zeros(1, np.int64)] * nd, np.full((0,) * nd, -1, dtype=np.int64)
    starts = np.array([e.start for e in entries], dtype=np.int64).reshape(len(entries), nd)
    stops = np.array([e.stop for e in entries], dtype=np.int64).reshape(len(entries), nd)
    bounds = [np.unique(np.concatenate([starts[:, d], stops[:, d]])) for d in range(nd)]
    ncells = math.prod(len(b) - 1 for b in bounds)
    if ncells > CELL_LIMIT:
        raise TooFragmentedError(
            f"its {len(entries)} entries cut the chunk grid into {ncells} cells (more than "
            f"{CELL_LIMIT})"
        )
    cells = np.full([len(b) - 1 for b in bounds], -1, dtype=np.int64)
    lo = [np.searchsorted(b, starts[:, d]) for d, b in enumerate(bounds)]
    hi = [np.searchsorted(b, stops[:, d]) for d, b in enumerate(bounds)]
    for i in range(len(entries)):
        cells[tuple(slice(int(lo[d][i]), int(hi[d][i])) for d in range(nd))] = i
    return bounds, cells


def _volumes(bounds: list[np.ndarray]) -> np.ndarray:
    """Chunks per cell."""
    vol = np.ones([len(b) - 1 for b in bounds], dtype=np.int64)
    for w in np.ix_(*[np.diff(b) for b in bounds]):
        vol = vol * w
    return vol


def _array_files(m: ArrayManifest) -> dict[str, int]:
    """Records per shard file (the end of the last record range an entry claims)."""
    out: dict[str, int] = {}
    for e in m.shards:
        out[e.path] = max(out.get(e.path, 0), e.offset + e.records)
    return out


def _array_usage(m: ArrayManifest, sizes: Mapping[str, int] | None) -> Usage:
    bounds, cells = _cells(m)
    n = len(m.shards)
    if m.ndim == 0:
        live = np.zeros(n, dtype=np.int64)
        if n:
            live[n - 1] = 1
    else:
        mask = cells >= 0
        live = np.bincount(cells[mask], weights=_volumes(bounds)[mask], minlength=n)
        live = live.astype(np.int64)
    records = _array_files(m)
    live_per: dict[str, int] = dict.fromkeys(records, 0)
    recorded: dict[str, int | None] = {}
    for e, k in zip(m.shards, live.tolist(), strict=True):
        live_per[e.path] += int(k)
        recorded[e.path] = recorded.get(e.path) or e.bytes
    files = [FileUse(p, _sized(p, recorded[p], sizes), records[p], live_per[p]) for p in records]
    return Usage(files, n, int(np.count_nonzero(live)))


def _live_boxes(m: ArrayManifest) -> list[tuple[tuple[int, ...], tuple[int, ...], float]]:
    """The chunks some entry covers, as disjoint boxes (start, stop) of the chunk grid
    in C order of their first chunk, each with the estimated stored bytes per chunk
    (from the files its chunks come from)."""
    bounds, cells = _cells(m)
    files = _array_files(m)
    sizes = {e.path: e.bytes for e in m.shards if e.bytes}
    # a record's stored size: its file's size over its records, at most the record
    # itself (an ArrayRecord file takes at least 128 KiB, so a file of one small
    # record says little about the record)
    record = _NPY_HEADER + math.prod(m.chunk_shape) * m.dtype.itemsize
    per_entry = np.array(
        [
            min(sizes[e.path] / max(files[e.path], 1), record) if sizes.get(e.path) else record
            for e in m.shards
        ]
        or [0.0]
    )
    if m.ndim == 0:
        return [((), (), float(per_entry[-1]))] if m.shards else []
    free = cells >= 0
    vol = _volumes(bounds)
    shape = free.shape
    nd = m.ndim
    out = []
    for flat in np.flatnonzero(free).tolist():
        idx = np.unravel_index(flat, shape)
        if not free[idx]:
            continue
        start = [int(i) for i in idx]
        stop = [i + 1 for i in start]
        for d in reversed(range(nd)):
            while stop[d] < shape[d]:
                sl = tuple(
                    slice(stop[k], stop[k] + 1) if k == d else slice(start[k], stop[k])
                    for k in range(nd)
                )
                if not free[sl].all():
                    break
                stop[d] += 1
        box = tuple(slice(a, b) for a, b in zip(start, stop, strict=True))
        free[box] = False
        chunks = int(vol[box].sum())
        est = float((vol[box] * per_entry[cells[box]]).sum()) / max(chunks, 1)
        out.append(
            (
                tuple(int(bounds[d][start[d]]) for d in range(nd)),
                tuple(int(bounds[d][stop[d]]) for d in range(nd)),
                est,
            )
        )
    return out


Box = tuple[tuple[int, ...], tuple[int, ...]]


def _pack(
    boxes: Sequence[tuple[tuple[int, ...], tuple[int, ...], float]], budget: int
) -> list[list[Box]]:
    """Group boxes into shards of about ``budget`` estimated bytes, cutting a box
    (along its first axis longer than one chunk, then the next) where a shard fills."""
    shards: list[list[Box]] = []
    cur: list[Box] = []
    room = float(budget)
    stack = [(tuple(a), tuple(b), max(per, 1.0)) for a, b, per in reversed(boxes)]
    while stack:
        start, stop, per = stack.pop()
        size = math.prod(b - a for a, b in zip(start, stop, strict=True)) * per
        if size <= room:
            cur.append((start, stop))
            room -= size
            continue
        d = next((k for k in range(len(start)) if stop[k] - start[k] > 1), None)
        if d is None:  # one chunk larger than what is left
            if cur:
                shards.append(cur)
                cur, room = [], float(budget)
            cur.append((start, stop))
            room -= size
            continue
        row = size / (stop[d] - start[d])
        k = int(room // row) if room > 0 else 0
        if k >= 1:
            cut = start[d] + k
            stack.append((start[:d] + (cut,) + start[d + 1 :], stop, per))  # the rest
            stack.append((start, stop[:d] + (cut,) + stop[d + 1 :], per))  # fits: first
            continue
        if cur and row <= budget:
            shards.append(cur)
            cur, room = [], float(budget)
            stack.append((start, stop, per))
            continue
        for r in reversed(range(start[d], stop[d])):
            stack.append(
                (start[:d] + (r,) + start[d + 1 :], stop[:d] + (r + 1,) + stop[d + 1 :], per)
            )
    if cur:
        shards.append(cur)
    return shards


def _box_coords(start: tuple[int, ...], stop: tuple[int, ...]) -> np.ndarray:
    """The chunk coordinates of a box, in C order: (K, ndim)."""
    if not start:
        return np.zeros((1, 0), dtype=np.int64)
    ext = [b - a for a, b in zip(start, stop, strict=True)]
    grid = np.indices(ext, dtype=np.int64).reshape(len(ext), -1).T
    return grid + np.array(start, dtype=np.int64)


def _chunk_records(
    store: Store, node: str, m: ArrayManifest, boxes: list[Box], what: str
) -> Iterator[bytes]:
    """The records of the chunks of ``boxes`` (box after box, C order in each), read
    in batches from the old shards, as stored (nothing decoded)."""
    table = m.table
    record_bytes = max(1, math.prod(m.chunk_shape) * m.dtype.itemsize)
    batch = max(1, _READ_BATCH_BYTES // record_bytes)
    for start, stop in boxes:
        coords = _box_coords(start, stop)
        for a in range(0, len(coords), batch):
            part = coords[a : a + batch]
            entry, rec = table.locate(part)
            if (entry < 0).any():  # pragma: no cover - the boxes are covered by construction
                raise AssertionError(f"{what}: chunk without an entry in a live box")
            out: list[bytes | None] = [None] * len(part)
            pids = table.path_ids[entry]
            groups = [np.flatnonzero(pids == pid) for pid in np.unique(pids).tolist()]

            def read(where: np.ndarray, pids: Any = pids, rec: Any = rec) -> list[bytes]:
                relpath = table.paths[int(pids[where[0]])]
                return _read_old(store, node, relpath, rec[where], table.sizes, what)

            for where, got in zip(groups, _in_parallel(read, groups, store), strict=True):
                for k, data in zip(where.tolist(), got, strict=True):
                    out[k] = data
            yield from out  # type: ignore[misc]


def _in_parallel(fn: Callable[[Any], Any], args: Sequence[Any], store: Store) -> Iterator[Any]:
    """``fn(a)`` for each of ``args``, in order, run on :func:`arrayds.store.io_pool`
    with a bounded number in flight (reads of many small old shards, each a request on
    an object store, overlap). On a local store they run in the calling thread: the
    page cache or the disk answers a read at once, and the engine decodes a batch on
    its own threads already; handing reads to the pool cost more than they overlapped
    (the tiered merge of eight small shards: 1-2 ms of 8)."""
    if len(args) <= 1 or store.local:
        yield from (fn(a) for a in args)
        return
    pool = io_pool()
    window = 2 * IO_THREADS
    futures = [pool.submit(fn, a) for a in args[:window]]
    for i in range(len(args)):
        if i + window < len(args):
            futures.append(pool.submit(fn, args[i + window]))
        yield futures[i].result()
        futures[i] = None  # type: ignore[call-overload]


def _read_old(
    store: Store,
    node: str,
    relpath: str,
    recs: Any,
    sizes: Mapping[str, int | None],
    what: str,
) -> list[bytes]:
    """Records ``recs`` of the old shard ``relpath`` (one batched read), named errors."""
    try:
        reader = node_shard_reader(store, node, relpath, sizes.get(relpath), sizes)
        n = len(reader)
        top = int(np.max(recs)) if len(recs) else -1
        if top >= n:
            raise CorruptionError(
                f"{what}: shard {relpath!r} has {n} records, but the manifest needs record {top}"
            )
        return read_records(reader, recs)
    except FileNotFoundError:
        raise FileNotFoundError(
            2, f"{what}: shard {relpath!r} named by the manifest is missing", relpath
        ) from None


def compact_array(
    store: Store,
    node: str,
    m: ArrayManifest,
    *,
    shard_size: int,
    write_id: str,
    written: list[str],
) -> Rewrite:
    """Write the live chunks of the array ``m`` at ``node`` into new shards
    ``c/<write_id>-<n>.array_record`` of about ``shard_size`` stored bytes; returns
    the manifest whose entries name only them and select, for every chunk, the same
    record bytes as ``m`` (chunks no entry covers stay uncovered: fill). The paths are
    appended to ``written`` as each shard starts (the caller removes them if the
    write fails)."""
    what = f"array {store.display(node)!r}"
    plan = _pack(_live_boxes(m), shard_size)
    entries: list[ShardEntry] = []
    total = 0
    for n, boxes in enumerate(plan):
        relpath = f"{SHARD_DIR}/{write_id}-{n}{SHARD_SUFFIX}"
        written.append(relpath)
        nbytes = write_shard(
            store,
            join_component(node, relpath),
            _chunk_records(store, node, m, boxes, what),
            writer_options(m.compression),
            defer_sync=True,  # the rewrite's commit waits for it
        )
        total += nbytes
        offset = 0
        for start, stop in boxes:
            e = ShardEntry(relpath, start, stop, offset, nbytes)
            entries.append(e)
            offset += e.records
    return Rewrite(m.with_(shards=entries), list(written), total)


# ------------------------------------------------------------------ records


def _records_usage(m: RecordsManifest, sizes: Mapping[str, int] | None) -> Usage:
    files = [
        FileUse(s.path, _sized(s.path, s.file_size or None, sizes), s.num_records, s.num_records)
        for s in m.shards
    ]
    return Usage(files, len(files), sum(1 for s in m.shards if s.num_records))


def _cut_runs(
    runs: Sequence[tuple[int, int, float]], budget: int
) -> list[list[tuple[int, int, int]]]:
    """Group ``runs`` (source index, units, stored bytes per unit), in order, into
    groups of about ``budget`` bytes: each group a list of (source, first, end)."""
    groups: list[list[tuple[int, int, int]]] = []
    cur: list[tuple[int, int, int]] = []
    room = float(budget)
    for src, count, per in runs:
        per = max(per, 1.0)
        a = 0
        while a < count:
            k = min(count - a, int(room // per))
            if k < 1:
                if cur:
                    groups.append(cur)
                    cur, room = [], float(budget)
                    continue
                k = 1
            cur.append((src, a, a + k))
            room -= k * per
            a += k
    if cur:
        groups.append(cur)
    return groups


def _record_cost(store: Store, node: str, s: ShardInfo) -> float:
    """The estimated stored bytes of one record of shard ``s``: the file's size over
    its records (asked of the store if the manifest does not record it), at most the
    encoded record (files take at least 128 KiB)."""
    n = max(s.num_records, 1)
    size = s.file_size or store.size(join_component(node, s.path))
    per = size / n
    return min(per, s.data_bytes / n) if s.data_bytes else per


_TASK_BYTES = 8 << 20
"""About how many decompressed bytes one parallel read of old records brings in."""


def _copy_ranges(
    store: Store,
    node: str,
    ranges: Sequence[tuple[str, int, int, float]],
    sizes: Mapping[str, int | None],
    what: str,
) -> Iterator[bytes]:
    """The records ``[a, b)`` of the old shard files of ``ranges`` ((path, a, b,
    decompressed bytes per record)), in order, as stored: reads of about
    :data:`_TASK_BYTES`, several at once."""
    tasks: list[tuple[str, int, int]] = []
    for path, a, b, per in ranges:
        step = max(1, int(_TASK_BYTES // max(per, 1.0)))
        tasks += [(path, lo, min(b, lo + step)) for lo in range(a, b, step)]

    def read(task: tuple[str, int, int]) -> list[bytes]:
        path, a, b = task
        return _read_old(store, node, path, list(range(a, b)), sizes, what)

    for got in _in_parallel(read, tasks, store):
        yield from got


def _copy_records(
    store: Store,
    node: str,
    shards: Sequence[ShardInfo],
    group: list[tuple[int, int, int]],
    what: str,
) -> Iterator[bytes]:
    """The records of ``group`` ((source shard, first, end) runs), as stored."""
    sizes = {s.path: s.file_size or None for s in shards}
    ranges = []
    for src, a, b in group:
        s = shards[src]
        per = (s.data_bytes or s.file_size or 1) / max(s.num_records, 1)
        ranges.append((s.path, a, b, per))
    return _copy_ranges(store, node, ranges, sizes, what)


def compact_records(
    store: Store,
    node: str,
    m: RecordsManifest,
    *,
    shard_size: int,
    write_id: str,
    written: list[str],
) -> Rewrite:
    """Copy the records of the records dataset ``m`` at ``node``, in order, into new
    shards of about ``shard_size`` stored bytes, with the dataset's group size and
    compression (the serializer is unchanged: the encoded records are copied as they
    are). Returns the manifest naming only the new shards."""
    what = f"records dataset {store.display(node)!r}"
    runs = [
        (i, s.num_records, _record_cost(store, node, s))
        for i, s in enumerate(m.shards)
        if s.num_records
    ]
    groups = _cut_runs(runs, shard_size)
    plan, _ = plan_write(store, node, "w", m.compression, m.group_size, "raw", len(groups))
    plan = replace(plan, write_id=write_id, stem=plan.stem.replace(plan.write_id, write_id))
    infos: list[ShardInfo] = []
    for k, group in enumerate(groups):
        name = f"{plan.stem}.array_record-{k:05d}-of-{len(groups):05d}"
        written.append(name)
        info = write_records_shard(
            _copy_records(store, node, m.shards, group, what), k, plan, defer_sync=True
        )
        if info["shard"].path != name:  # pragma: no cover - the records writer's names
            raise AssertionError(f"{what}: shard written as {info['shard'].path!r}")
        infos.append(info["shard"])
    new = replace(m, shards=infos)
    return Rewrite(new, list(written), sum(s.file_size for s in infos))


# ------------------------------------------------------------------ ragged


def _ragged_usage(m: RaggedManifest, sizes: Mapping[str, int] | None) -> Usage:
    files = [
        FileUse(s.path, _sized(s.path, s.bytes, sizes), s.records, s.records) for s in m.shards
    ]
    return Usage(files, len(files), len(files))


def _ragged_index(store: Store, node: str, m: RaggedManifest, k: int, what: str) -> np.ndarray:
    """The item shapes of shard ``k`` (its index record)."""
    sh = m.shards[k]
    sizes = {s.path: s.bytes for s in m.shards}
    reader_n = sh.records
    (raw,) = _read_old(store, node, sh.path, [reader_n - 1], sizes, what)
    shapes = decode_chunk(raw, np.dtype("<i8"), (sh.items, m.ndim), f"{what}: index of {sh.path!r}")
    return np.array(shapes, dtype=np.int64)


def compact_ragged(
    store: Store,
    node: str,
    m: RaggedManifest,
    *,
    shard_size: int,
    write_id: str,
    written: list[str],
) -> Rewrite:
    """Copy the items of the ragged array ``m`` at ``node`` (their pieces, as stored),
    in order, into new shards ``c/<write_id>-0-<n>.array_record`` of about
    ``shard_size`` stored bytes, each with its index record. Returns the manifest
    naming only the new shards."""
    what = f"ragged array {store.display(node)!r}"
    shapes = list(
        _in_parallel(lambda k: _ragged_index(store, node, m, k, what), range(len(m.shards)), store)
    )
    pieces = [np.maximum(1, -(-s[:, m.axis] // m.piece_len)) for s in shapes]
    firsts = [np.concatenate([[0], np.cumsum(p)]) for p in pieces]
    piece_bytes = [  # decompressed bytes per piece record, on average
        float(s.prod(axis=1).sum()) * m.dtype.itemsize / max(int(p.sum()), 1)
        for s, p in zip(shapes, pieces, strict=True)
    ]
    # items are cut into groups by their pieces' estimated stored bytes
    runs: list[tuple[int, int, float]] = []
    units: list[tuple[int, int]] = []  # (shard, item) per unit
    for k, sh in enumerate(m.shards):
        per = (sh.bytes or 0) / max(sh.records, 1)
        raw = shapes[k].prod(axis=1) * m.dtype.itemsize + _NPY_HEADER * pieces[k]
        for j, n in enumerate(pieces[k].tolist()):
            runs.append((len(units), 1, min(per * n, float(raw[j])) if per else float(raw[j])))
            units.append((k, j))
    groups = _cut_runs(runs, shard_size)
    sizes = {s.path: s.bytes for s in m.shards}
    entries = []
    start = 0
    total = 0
    for n, group in enumerate(groups):
        items = [units[src] for src, _a, _b in group]
        relpath = f"{SHARD_DIR}/{write_id}-0-{n}{SHARD_SUFFIX}"
        written.append(relpath)
        index = np.concatenate([shapes[k][j : j + 1] for k, j in items]).reshape(-1, m.ndim)
        npieces = sum(int(pieces[k][j]) for k, j in items)

        ranges: list[tuple[str, int, int, float]] = []
        for k, j in items:  # consecutive items of one shard: one range of pieces
            a, b = int(firsts[k][j]), int(firsts[k][j + 1])
            if ranges and ranges[-1][0] == m.shards[k].path and ranges[-1][2] == a:
                ranges[-1] = (ranges[-1][0], ranges[-1][1], b, ranges[-1][3])
            else:
                ranges.append((m.shards[k].path, a, b, piece_bytes[k]))

        def records(
            ranges: list[tuple[str, int, int, float]] = ranges, index: np.ndarray = index
        ) -> Iterator[Any]:
            yield from _copy_ranges(store, node, ranges, sizes, what)
            yield encode_chunk(index, np.dtype("<i8"))

        nbytes = write_shard(
            store,
            join_component(node, relpath),
            records(),
            writer_options(m.compression),
            defer_sync=True,
        )
        total += nbytes
        entries.append(RaggedShard(relpath, start, start + len(items), npieces + 1, nbytes))
        start += len(items)
    return Rewrite(replace(m, shards=entries), list(written), total)


# ------------------------------------------------------------------ tails


def _array_tail_sizes(m: ArrayManifest) -> list[int]:
    per = math.prod(m.chunk_shape) * m.dtype.itemsize
    return [e.records * per for e in m.shards]


def _records_tail_sizes(m: RecordsManifest) -> list[int]:
    return [s.data_bytes or s.file_size for s in m.shards]


UNWEIGHED = 1 << 62
"""The size :func:`entry_sizes` gives an entry whose bytes its manifest does not
record: larger than any merge limit, so the tiered merge leaves it (compaction weighs
it by its file)."""


def _ragged_tail_sizes(m: RaggedManifest) -> list[int]:
    # a ragged shard records only its stored bytes (pieces compress alike, so their
    # ratios are those of the payloads)
    return [UNWEIGHED if s.bytes is None else s.bytes for s in m.shards]


_TAIL_SIZES: dict[str, Callable[[Any], list[int]]] = {
    "array": _array_tail_sizes,
    "records": _records_tail_sizes,
    "ragged": _ragged_tail_sizes,
}


def entry_sizes(manifest: Any) -> list[int] | None:
    """The payload of each entry of a parsed manifest's shard list in bytes (what the
    tiered merge of appended shards weighs: before compression for arrays and records,
    as stored for ragged arrays, whose manifests record no other size), or ``None``
    for a kind without shards to merge by tiers.

    >>> from arrayds.manifest import ArrayManifest, ShardEntry
    >>> m = ArrayManifest.new((4,), "f8", ((2, 2),)).with_(shards=[
    ...     ShardEntry("c/a", (0,), (2,)), ShardEntry("c/b", (1,), (2,))])
    >>> entry_sizes(m)
    [32, 16]
    """
    fn = _TAIL_SIZES.get(getattr(manifest, "kind", None))
    return None if fn is None else fn(manifest)


def whole_files(manifest: Any, n: int) -> int:
    """``n`` grown until the last ``n`` entries of the shard list hold every entry of
    the files they name (several entries of an array can share a file)."""
    entries = manifest.shards
    paths = {e.path for e in entries[len(entries) - n :]} if n else set()
    while n < len(entries) and entries[len(entries) - n - 1].path in paths:
        n += 1
    return n


def compact_tail(
    store: Store,
    node: str,
    manifest: Any,
    n: int,
    *,
    shard_size: int,
    write_id: str,
    written: list[str],
) -> Rewrite:
    """Rewrite only the last ``n`` entries of the shard list of an array, records or
    ragged manifest (their files whole, :func:`whole_files`) into new shards, as
    :func:`compact_array` / :func:`compact_records` / :func:`compact_ragged` rewrite
    a whole node; the entries before them stay as they are. The new entries take the
    place of the old ones at the end of the list, so what every read selects is
    unchanged: an array's newer entries still hide the older ones, a records dataset
    and a ragged array keep their order (a ragged array's new entries start at the
    first item of the old ones)."""
    entries = list(manifest.shards)
    keep, tail = entries[: len(entries) - n], entries[len(entries) - n :]
    rewrite = _TAIL_REWRITES.get(manifest.kind)
    if rewrite is None:
        raise ValueError(f"no tiered merging for {manifest.kind} nodes")
    rw = rewrite(
        store,
        node,
        _with_shards(manifest, tail),
        shard_size=shard_size,
        write_id=write_id,
        written=written,
    )
    new = list(rw.manifest.shards)
    if manifest.kind == "ragged" and tail:
        new = [e.shifted(tail[0].start) for e in new]
    rw.manifest = _with_shards(manifest, [*keep, *new])
    return rw


def _with_shards(manifest: Any, shards: list[Any]) -> Any:
    """A parsed manifest with another shard list."""
    if isinstance(manifest, ArrayManifest):
        return manifest.with_(shards=shards)
    return replace(manifest, shards=shards)


_TAIL_REWRITES: dict[str, Callable[..., Rewrite]] = {
    "array": compact_array,
    "records": compact_records,
    "ragged": compact_ragged,
}


# ------------------------------------------------------------------ dispatch


_USAGE = {"array": _array_usage, "records": _records_usage, "ragged": _ragged_usage}


def usage(manifest: Any, sizes: Mapping[str, int] | None = None) -> Usage:
    """The shard files of a parsed manifest (array, records or ragged) and their live
    parts; ``sizes``: file sizes (relative path -> bytes) the manifest does not record.
    ``ValueError`` for a kind without compaction; :class:`TooFragmentedError` for an
    array too fragmented to map.

    >>> from arrayds.manifest import ArrayManifest, ShardEntry
    >>> m = ArrayManifest.new((4,), "i1", ((2, 2),)).with_(shards=[
    ...     ShardEntry("c/a", (0,), (2,), 0, 100), ShardEntry("c/b", (1,), (2,), 0, 50)])
    >>> u = usage(m)
    >>> [(f.path, f.records, f.live_records) for f in u.files], u.live_entries
    ([('c/a', 2, 1), ('c/b', 1, 1)], 2)
    """
    fn = _USAGE.get(getattr(manifest, "kind", None))
    if fn is None:
        raise ValueError(f"no compaction for {type(manifest).__name__} manifests")
    return fn(manifest, sizes)
