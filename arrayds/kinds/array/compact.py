"""Compaction of an array: which chunks are live, and their copy into new shards.

The contracts (:class:`~arrayds.nodes.merge.Usage`, :class:`~arrayds.nodes.merge.Rewrite`)
and the drivers (the tiered merge, ``arrayds compact``) are :mod:`arrayds.nodes.merge`'s
and :mod:`arrayds.tools.compact`'s; records are copied byte for byte.

>>> import arrayds, numpy as np
>>> from arrayds.storage import get_store
>>> a = arrayds.open_array("memory://doc-ck", mode="w", shape=(0,), dtype="i4", chunks=1)
>>> for i in range(6):
...     _ = a.append(np.array([i], "i4"), compact=False)
>>> st = get_store("memory://doc-ck")
>>> rw = compact_array(st, "", a.manifest, shard_size=1 << 20, write_id="0" * 24, written=[])
>>> len(a.manifest.shards), len(rw.manifest.shards), rw.written
(6, 1, ['c/000000000000000000000000-0.array_record'])
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import CorruptionError
from ...nodes.merge import Box, FileUse, Rewrite, TooFragmentedError, Usage, in_parallel, sized_file
from ...nodes.names import SHARD_DIR, join_component, shard_name
from ...nodes.options import writer_options
from ...nodes.shards import node_shard_reader, read_shard_records, write_shard
from ...storage.base import BaseStore as Store
from .manifest import ArrayManifest, ShardEntry

CELL_LIMIT = 1 << 24
"""The most cells (products of the intervals the entries' boundaries cut each axis
into) an array's liveness map may have; more is :class:`TooFragmentedError`."""

NPY_HEADER = 128
"""About the size of a record's ``.npy`` header (docs/spec.md 6.3)."""

_READ_BATCH_BYTES = 64 << 20
"""About how many decompressed bytes one batched read of old records brings in."""


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


def usage(m: ArrayManifest, sizes: Mapping[str, int] | None) -> Usage:
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
    files = [
        FileUse(p, sized_file(p, recorded[p], sizes), records[p], live_per[p]) for p in records
    ]
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
    record = NPY_HEADER + math.prod(m.chunk_shape) * m.dtype.itemsize
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
            used = np.unique(pids).tolist()
            groups = [np.flatnonzero(pids == pid) for pid in used]
            needs = {table.paths[p]: table.sizes.get(table.paths[p]) for p in used}

            def read(
                where: np.ndarray, pids: Any = pids, rec: Any = rec, needs: Any = needs
            ) -> list[bytes]:
                relpath = table.paths[int(pids[where[0]])]
                return read_old(store, node, relpath, rec[where], needs, what)

            for where, got in zip(groups, in_parallel(read, groups, store), strict=True):
                for k, data in zip(where.tolist(), got, strict=True):
                    out[k] = data
            yield from out  # type: ignore[misc]


def read_old(
    store: Store,
    node: str,
    relpath: str,
    recs: Any,
    sizes: Mapping[str, int | None],
    what: str,
) -> list[bytes]:
    """Records ``recs`` of the old shard ``relpath`` (one batched read), named errors;
    ``sizes``: the recorded sizes of the shards the same batch reads (their footers
    are prefetched together)."""
    try:
        reader = node_shard_reader(store, node, relpath, sizes.get(relpath), sizes)
        n = len(reader)
        top = int(np.max(recs)) if len(recs) else -1
        if top >= n:
            raise CorruptionError(
                f"{what}: shard {relpath!r} has {n} records, but the manifest needs record {top}"
            )
        return read_shard_records(reader, recs)
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
        relpath = shard_name(write_id, n, folder=SHARD_DIR)
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


# ------------------------------------------------------------------ tails


def tail_sizes(m: ArrayManifest) -> list[int]:
    per = math.prod(m.chunk_shape) * m.dtype.itemsize
    return [e.records * per for e in m.shards]
