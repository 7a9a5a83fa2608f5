"""Compaction of a ragged array: its pieces and index records copied into shards of
about ``shard_size`` bytes.

>>> import numpy as np, arrayds
>>> from arrayds.storage import get_store
>>> url = "memory://doc-ragged-compact"
>>> ra = arrayds.ragged.write_ragged([np.arange(n) for n in (2, 3, 4)], url, shard_size=1)
>>> rw = compact_ragged(get_store(url), "", ra.manifest, shard_size=1 << 20,
...                     write_id="0" * 24, written=[])
>>> len(ra.manifest.shards), len(rw.manifest.shards)
(3, 1)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ...nodes.merge import UNWEIGHED, FileUse, Rewrite, Usage, in_parallel, sized_file
from ...nodes.names import SHARD_DIR, join_component, shard_name
from ...nodes.options import writer_options
from ...nodes.shards import write_shard
from ...storage.base import BaseStore as Store
from ..array.compact import NPY_HEADER, read_old
from ..array.tensor import decode_chunk, encode_chunk
from ..records.compact import copy_ranges, cut_runs
from .manifest import RaggedManifest, RaggedShard

# ------------------------------------------------------------------ ragged


def usage(m: RaggedManifest, sizes: Mapping[str, int] | None) -> Usage:
    files = [
        FileUse(s.path, sized_file(s.path, s.bytes, sizes), s.records, s.records) for s in m.shards
    ]
    return Usage(files, len(files), len(files))


def _ragged_index(store: Store, node: str, m: RaggedManifest, k: int, what: str) -> np.ndarray:
    """The item shapes of shard ``k`` (its index record)."""
    sh = m.shards[k]
    reader_n = sh.records
    (raw,) = read_old(store, node, sh.path, [reader_n - 1], {sh.path: sh.bytes}, what)
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
        in_parallel(lambda k: _ragged_index(store, node, m, k, what), range(len(m.shards)), store)
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
        raw = shapes[k].prod(axis=1) * m.dtype.itemsize + NPY_HEADER * pieces[k]
        for j, n in enumerate(pieces[k].tolist()):
            runs.append((len(units), 1, min(per * n, float(raw[j])) if per else float(raw[j])))
            units.append((k, j))
    groups = cut_runs(runs, shard_size)
    sizes = {s.path: s.bytes for s in m.shards}
    entries = []
    start = 0
    total = 0
    for n, group in enumerate(groups):
        items = [units[src] for src, _a, _b in group]
        relpath = shard_name(write_id, 0, n, folder=SHARD_DIR)
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
            yield from copy_ranges(store, node, ranges, sizes, what)
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


def tail_sizes(m: RaggedManifest) -> list[int]:
    # a ragged shard records only its stored bytes (pieces compress alike, so their
    # ratios are those of the payloads)
    return [UNWEIGHED if s.bytes is None else s.bytes for s in m.shards]
