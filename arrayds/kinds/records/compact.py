"""Compaction of a records dataset: its shards' records copied byte for byte into
shards of about ``shard_size`` bytes.

>>> from arrayds import records
>>> from arrayds.nodes.read import read_node
>>> from arrayds.storage import get_store
>>> _ = records.write_records([b"x"] * 8, "memory://doc-rc", num_shards=4)
>>> m = read_node(get_store("memory://doc-rc"), "")
>>> rw = compact_records(get_store("memory://doc-rc"), "", m, shard_size=1 << 20,
...                      write_id="0" * 24, written=[])
>>> len(m.shards), len(rw.manifest.shards)
(4, 1)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace

from ...nodes.merge import FileUse, Rewrite, Usage, in_parallel, sized_file
from ...nodes.names import join_component, shard_name
from ...nodes.options import WriterOptions
from ...storage.base import BaseStore as Store
from ..array.compact import read_old
from .manifest import RecordsManifest, ShardInfo
from .write import plan_write, write_records_shard

# ------------------------------------------------------------------ records


def usage(m: RecordsManifest, sizes: Mapping[str, int] | None) -> Usage:
    files = [
        FileUse(
            s.path, sized_file(s.path, s.file_size or None, sizes), s.num_records, s.num_records
        )
        for s in m.shards
    ]
    return Usage(files, len(files), sum(1 for s in m.shards if s.num_records))


def cut_runs(
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


def copy_ranges(
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
    needs = {path: sizes.get(path) for path, _a, _b, _per in ranges}  # what the copy opens

    def read(task: tuple[str, int, int]) -> list[bytes]:
        path, a, b = task
        return read_old(store, node, path, list(range(a, b)), needs, what)

    for got in in_parallel(read, tasks, store):
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
    return copy_ranges(store, node, ranges, sizes, what)


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
    groups = cut_runs(runs, shard_size)
    options = WriterOptions(m.compression, m.group_size)
    plan, _ = plan_write(store, node, "w", options, "raw", len(groups), write_id=write_id)
    infos: list[ShardInfo] = []
    for k, group in enumerate(groups):
        name = shard_name(plan.stem, k, total=plan.total)
        written.append(name)
        info = write_records_shard(
            _copy_records(store, node, m.shards, group, what), k, plan, defer_sync=True
        )
        if info["shard"].path != name:  # pragma: no cover - the records writer's names
            raise AssertionError(f"{what}: shard written as {info['shard'].path!r}")
        infos.append(info["shard"])
    new = replace(m, shards=infos)
    return Rewrite(new, list(written), sum(s.file_size for s in infos))


def tail_sizes(m: RecordsManifest) -> list[int]:
    return [s.data_bytes or s.file_size for s in m.shards]
