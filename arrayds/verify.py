"""Looking after a dataset: :func:`describe` (``arrayds info``), :func:`verify`
(``arrayds verify``) and :func:`collect_garbage` (``arrayds gc``).

* :func:`describe` reads manifests only (plus, for ragged arrays, each shard's small
  index record) and returns a JSON-ready summary of every node: kind, shape, dtype,
  chunk grid, shard count, bytes stored vs logical, compression ratio, record counts.
* :func:`verify` walks every manifest under a URL and checks every shard it names:
  the file exists, its footer and index are consistent, every chunk's checksums
  hold (every record is read and decoded by the engine), the record counts agree
  with the manifest, every array chunk is a ``.npy`` record of the dtype and shape
  its grid position needs, and every ragged piece matches its shard's index. A
  manifest that names the same shard (or the same records of one shard) twice is
  damage too. Each problem names the shard file and the chunk or record position.
* :func:`collect_garbage` removes ``.array_record`` files under the URL that no
  manifest references (left behind by failed or killed writes, or by replaced
  data). Files younger than ``min_age`` are kept, because a write that is still
  running has uploaded shards its commit has not referenced yet.

>>> import arrayds, numpy as np
>>> a = arrayds.open_array("memory://doc-verify", mode="w", shape=(6,), dtype="i2", chunks=2)
>>> a[:] = np.arange(6)
>>> report = verify("memory://doc-verify")
>>> report.ok, report.shards, report.records
(True, 1, 3)
>>> describe("memory://doc-verify")["nodes"][0]["grid"]
[3]
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import re
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import progress as _progress
from .arrayrecord import ArrayRecordReader, CorruptionError
from .manifest import (
    FORMAT,
    FORMAT_VERSION,
    ArrayManifest,
    GroupManifest,
    ShardEntry,
    parse_node,
)
from .nodes.commit import referenced_files as manifest_shard_paths
from .storage import get_store
from .store import (
    MANIFEST,
    SHARD_DIR,
    Store,
    check_component,
    join_component,
)
from .tensor import decode_chunk

__all__ = [
    "GcReport",
    "Problem",
    "VerifyReport",
    "collect_garbage",
    "describe",
    "format_bytes",
    "verify",
]

_BATCH_BYTES = 32 << 20
"""Records are read in batches of about this many decoded bytes."""


def format_bytes(n: float | None) -> str:
    """``1536 -> '1.5 KiB'`` (``None`` -> ``'?'``).

    >>> format_bytes(1536), format_bytes(10), format_bytes(None)
    ('1.5 KiB', '10 B', '?')
    """
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


# ---------------------------------------------------------------- walking


@dataclass
class _Node:
    """One manifest met while walking: ``node`` is its path from the root, ``raw``
    the JSON (None if unreadable), ``parsed`` the manifest object or the error."""

    node: str
    raw: dict[str, Any] | None
    parsed: Any
    source: str = ""  # "" for the node's own manifest, else "snapshot of <group>"


def _walk(store: Store, node: str) -> Iterator[_Node]:
    """Every node at or below ``node`` (depth first, sorted), plus the member
    manifests held in group snapshots (xarray datasets)."""
    what = f"node {store.display(node)!r}"
    try:
        raw = store.read_manifest(node)
    except (CorruptionError, OSError) as e:
        yield _Node(node, None, e)
        return
    if raw is None:
        return
    try:
        parsed = parse_node(raw, what)
    except (CorruptionError, NotImplementedError, ValueError) as e:
        yield _Node(node, raw, e)
        return
    yield _Node(node, raw, parsed)
    if isinstance(parsed, GroupManifest):
        snap = raw.get("snapshot")
        if isinstance(snap, dict) and isinstance(snap.get("members"), dict):
            for name, member in sorted(snap["members"].items()):
                child = join_component(node, name)
                source = f"snapshot in {store.display(node)!r}"
                try:
                    m = parse_node(member, f"{source}, member {name!r}")
                except (CorruptionError, NotImplementedError, ValueError) as e:
                    yield _Node(child, member, e, source)
                    continue
                yield _Node(child, member, m, source)
        for child in store.child_nodes(node):
            yield from _walk(store, join_component(node, child))


def _open_root(url: Any, storage_options: Mapping[str, Any] | None, component: str | None):
    store = get_store(os.fspath(url), storage_options)
    node = check_component(component)
    if store.read_manifest(node) is None:
        where = repr(store.url) + (f" (component {node!r})" if node else "")
        raise FileNotFoundError(
            2,
            f"no arrayds dataset at {where}: {store.url_of(node, MANIFEST)} does not exist",
            store.display(node),
        )
    return store, node


# ---------------------------------------------------------------- describe


def _records_kind(m: Any) -> str:
    return getattr(m, "kind", type(m).__name__)


def _array_info(store: Store, node: str, m: ArrayManifest) -> dict[str, Any]:
    grid = m.grid
    sizes: dict[str, int | None] = {}
    for e in m.shards:
        sizes[e.path] = e.bytes
    stored = _sizes_or_stat(store, node, sizes)
    logical = int(math.prod(m.shape)) * m.dtype.itemsize
    regular = all(
        len(ax.runs) <= 1
        or (len(ax.runs) == 2 and ax.runs[1][1] == 1 and ax.runs[1][0] < ax.runs[0][0])
        for ax in grid.axes
    )
    return {
        "shape": list(m.shape),
        "dtype": m.dtype.str,
        "dtype_name": str(m.dtype),
        "chunks": list(m.chunk_shape),
        "regular_chunks": regular,
        "grid": list(grid.grid_shape),
        "nchunks": grid.nchunks,
        "nchunks_written": m.table.covered_count(grid.grid_shape),
        "shards": len(sizes),
        "compression": m.compression,
        "fill_value": m.to_json()["fill_value"],
        "dims": None if m.dims is None else list(m.dims),
        "attrs": sorted(m.attrs),
        "generation": m.generation,
        "bytes_stored": stored,
        "bytes_logical": logical,
    }


def _sizes_or_stat(store: Store, node: str, sizes: Mapping[str, int | None]) -> int | None:
    total = 0
    for rel, n in sizes.items():
        if n is None:
            try:
                n = int(store.fs.size(store.path(node, rel)))
            except (OSError, ValueError):
                return None
        total += n
    return total


def _node_info(store: Store, item: _Node) -> dict[str, Any]:
    m = item.parsed
    out: dict[str, Any] = {"path": "/" + item.node, "kind": _records_kind(m)}
    if isinstance(m, BaseException):
        out["kind"] = "unreadable"
        out["error"] = f"{type(m).__name__}: {m}"
        return out
    if isinstance(m, GroupManifest):
        out["attrs"] = sorted(m.attrs)
        snap = (item.raw or {}).get("snapshot")
        if isinstance(snap, dict) and isinstance(snap.get("members"), dict):
            out["dataset_variables"] = sorted(snap["members"])
        return out
    if isinstance(m, ArrayManifest):
        out.update(_array_info(store, item.node, m))
        return out
    if out["kind"] == "records":
        stored = sum(s.file_size for s in m.shards)
        logical = sum(s.data_bytes for s in m.shards)
        out.update(
            {
                "records": m.num_records,
                "shards": len(m.shards),
                "serializer": m.serializer,
                "compression": m.compression,
                "group_size": m.group_size,
                "attrs": sorted(m.attrs),
                "generation": m.generation,
                "bytes_stored": stored,
                "bytes_logical": logical,
            }
        )
        return out
    if out["kind"] == "ragged":
        from .ragged import RaggedArray

        ra = RaggedArray(store, item.node, m, "r")
        sizes = {s.path: s.bytes for s in m.shards}
        try:
            logical: int | None = ra.nbytes
        except (OSError, CorruptionError):
            logical = None
        out.update(
            {
                "items": m.count,
                "dtype": m.dtype.str,
                "dtype_name": str(m.dtype),
                "ndim": m.ndim,
                "axis": m.axis,
                "piece_len": m.piece_len,
                "shards": len(m.shards),
                "compression": m.compression,
                "attrs": sorted(m.attrs),
                "generation": m.generation,
                "bytes_stored": _sizes_or_stat(store, item.node, sizes),
                "bytes_logical": logical,
            }
        )
        return out
    return out  # pragma: no cover - parse_node knows only the kinds above


def describe(
    url: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    component: str | None = None,
) -> dict[str, Any]:
    """A JSON-ready summary of the dataset at ``url`` (``arrayds info --json``).

    ``{"url", "nodes": [...], "totals": {...}}``; each node has ``path`` and
    ``kind`` and, per kind, shape/dtype/chunks/grid/shards (arrays), records/shards/
    serializer (records), items/shards (ragged), with ``bytes_stored``,
    ``bytes_logical`` and ``ratio`` (logical / stored). Reads manifests only (and
    ragged shard indexes, for their logical size).

    >>> import arrayds, numpy as np
    >>> a = arrayds.open_array("memory://doc-describe", mode="w", shape=(4, 4), dtype="f8",
    ...                        chunks=2)
    >>> a[:2] = 1
    >>> n = describe("memory://doc-describe")["nodes"][0]
    >>> n["kind"], n["shape"], n["nchunks"], n["nchunks_written"], n["shards"]
    ('array', [4, 4], 4, 2, 1)
    """
    store, node = _open_root(url, storage_options, component)
    nodes = []
    seen_snap = set()
    for item in _walk(store, node):
        if item.source:
            seen_snap.add(item.node)
            continue  # members of snapshots are also nodes of their own
        info = _node_info(store, item)
        depth = len([p for p in item.node[len(node) :].split("/") if p])
        info["depth"] = depth
        stored, logical = info.get("bytes_stored"), info.get("bytes_logical")
        if stored and logical is not None:
            info["ratio"] = float(f"{logical / stored:.4g}")
        nodes.append(info)
    stored_all = [n.get("bytes_stored") for n in nodes if "bytes_stored" in n]
    logical_all = [n.get("bytes_logical") for n in nodes if "bytes_logical" in n]
    totals: dict[str, Any] = {
        "nodes": len(nodes),
        "arrays": sum(n["kind"] == "array" for n in nodes),
        "records_sets": sum(n["kind"] == "records" for n in nodes),
        "ragged": sum(n["kind"] == "ragged" for n in nodes),
        "groups": sum(n["kind"] == "group" for n in nodes),
        "shards": sum(int(n.get("shards", 0)) for n in nodes),
        "records": sum(int(n.get("records", 0)) for n in nodes),
        "bytes_stored": None if None in stored_all else sum(stored_all),
        "bytes_logical": None if None in logical_all else sum(logical_all),
    }
    if totals["bytes_stored"] and totals["bytes_logical"] is not None:
        totals["ratio"] = float(f"{totals['bytes_logical'] / totals['bytes_stored']:.4g}")
    return {"url": store.display(node), "nodes": nodes, "totals": totals}


# ------------------------------------------------------------------ verify


@dataclass(frozen=True)
class Problem:
    """One thing wrong: the shard (or manifest) URL, where in it, and what."""

    url: str
    where: str
    message: str
    node: str = ""

    def __str__(self) -> str:
        return f"{self.url}: {self.where}: {self.message}"

    def to_json(self) -> dict[str, str]:
        return {
            "url": self.url,
            "node": "/" + self.node,
            "where": self.where,
            "message": self.message,
        }


@dataclass
class VerifyReport:
    """What :func:`verify` checked and found. ``ok`` is ``not problems``."""

    url: str
    nodes: int = 0
    shards: int = 0
    records: int = 0
    bytes: int = 0
    seconds: float = 0.0
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "ok": self.ok,
            "nodes": self.nodes,
            "shards": self.shards,
            "records": self.records,
            "bytes": self.bytes,
            "seconds": round(self.seconds, 3),
            "problems": [p.to_json() for p in self.problems],
        }

    def summary(self) -> str:
        rate = self.bytes / self.seconds if self.seconds > 0 else 0.0
        head = (
            f"{self.nodes} nodes, {self.shards} shards, {self.records} records, "
            f"{format_bytes(self.bytes)} checked in {self.seconds:.2f} s "
            f"({format_bytes(rate)}/s)"
        )
        if self.ok:
            return head + ": no problems"
        return head + f": {len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}"


@dataclass
class _ShardJob:
    node: str
    rel: str
    url: str
    kind: str
    arrays: list[tuple[ArrayManifest, ShardEntry]] = field(default_factory=list)
    records: int | None = None  # records sets: the exact count
    ragged: list[tuple[Any, Any]] = field(default_factory=list)  # (RaggedManifest, shard)
    sizes: set[int] = field(default_factory=set)  # byte sizes the manifests record


def _duplicates_array(m: ArrayManifest) -> list[str]:
    """Entries that claim the same records of the same file."""
    out = []
    by_path: dict[str, list[tuple[int, int, int]]] = {}
    for i, e in enumerate(m.shards):
        by_path.setdefault(e.path, []).append((e.offset, e.offset + e.records, i))
    for path, spans in by_path.items():
        spans.sort()
        for (a0, a1, i), (b0, b1, j) in zip(spans, spans[1:], strict=False):
            if b0 < a1:
                lo, hi = max(a0, b0), min(a1, b1) - 1
                out.append(
                    f"the manifest names shard {path!r} twice: entries {min(i, j)} and "
                    f"{max(i, j)} both claim its records {lo}..{hi}"
                )
    return out


def _duplicates_paths(paths: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for i, p in enumerate(paths):
        if p in seen:
            out.append(f"the manifest names shard {p!r} twice (entries {seen[p]} and {i})")
        else:
            seen[p] = i
    return out


def _plan(store: Store, node: str) -> tuple[dict[tuple[str, str], _ShardJob], list[Problem], int]:
    jobs: dict[tuple[str, str], _ShardJob] = {}
    problems: list[Problem] = []
    nodes = 0

    def job(n: str, rel: str, kind: str) -> _ShardJob:
        key = (n, rel)
        j = jobs.get(key)
        if j is None:
            j = jobs[key] = _ShardJob(n, rel, store.url_of(n, rel), kind)
        return j

    for item in _walk(store, node):
        murl = store.url_of(item.node, MANIFEST)
        where = "manifest" if not item.source else f"manifest ({item.source})"
        if not item.source:
            nodes += 1
        m = item.parsed
        if isinstance(m, BaseException):
            problems.append(Problem(murl, where, f"{type(m).__name__}: {m}", item.node))
            continue
        kind = _records_kind(m)
        if isinstance(m, ArrayManifest):
            for msg in _duplicates_array(m):
                problems.append(Problem(murl, where, msg, item.node))
            for e in m.shards:
                j = job(item.node, e.path, "array")
                if e.bytes is not None:
                    j.sizes.add(e.bytes)
                if (m, e) not in j.arrays:
                    j.arrays.append((m, e))
        elif kind == "records":
            for msg in _duplicates_paths([s.path for s in m.shards]):
                problems.append(Problem(murl, where, msg, item.node))
            for s in m.shards:
                j = job(item.node, s.path, "records")
                if s.file_size:  # 0: not recorded
                    j.sizes.add(s.file_size)
                if j.records is not None and j.records != s.num_records:
                    problems.append(
                        Problem(
                            murl,
                            where,
                            f"shard {s.path!r} is listed with {j.records} and with "
                            f"{s.num_records} records",
                            item.node,
                        )
                    )
                j.records = s.num_records
        elif kind == "ragged":
            for msg in _duplicates_paths([s.path for s in m.shards]):
                problems.append(Problem(murl, where, msg, item.node))
            for s in m.shards:
                j = job(item.node, s.path, "ragged")
                j.ragged.append((m, s))
                if s.bytes is not None:
                    j.sizes.add(s.bytes)
    return jobs, problems, nodes


def _read_batches(
    reader: ArrayRecordReader, n: int, job: _ShardJob, problems: list[Problem]
) -> Iterator[tuple[int, list[bytes | None]]]:
    """Yield (first record, records) for all records of the shard; a damaged chunk
    becomes one Problem and ``None`` for each of its records."""
    g = max(1, reader.group_size())
    count = g
    pos = 0
    while pos < n:
        end = min(n, pos + count)
        try:
            batch: list[bytes | None] = list(reader.read(pos, end))
        except CorruptionError:
            batch = []
            for a in range(pos, end, g):
                b = min(end, a + g)
                try:
                    batch.extend(reader.read(a, b))
                except CorruptionError as e:
                    problems.append(
                        Problem(job.url, _position(job, a, b, g), _short(e, job), job.node)
                    )
                    batch.extend([None] * (b - a))
        got = [r for r in batch if r is not None]
        per = max(1, sum(map(len, got)) // max(1, len(got)))
        count = max(g, min(1 << 16, _BATCH_BYTES // per))
        count -= count % g
        yield pos, batch
        pos = end


def _short(e: BaseException, job: _ShardJob | None = None) -> str:
    """The message of ``e`` without the file name (the Problem names the file)."""
    text = str(e)
    if job is not None:
        for name in {job.url, job.url.split("://", 1)[-1]}:
            text = text.replace(f"{name}: ", "")
    return f"{type(e).__name__}: {text}" if not isinstance(e, CorruptionError) else text


def _position(job: _ShardJob, a: int, b: int, g: int) -> str:
    """Where records ``a..b-1`` (one engine chunk of group size ``g``) are: array
    chunk coordinates, record numbers, ragged pieces."""
    span = f"record {a}" if b - a == 1 else f"records {a}..{b - 1}"
    for _m, e in job.arrays:
        rel = a - e.offset
        if 0 <= rel < e.records:
            box = tuple(y - x for x, y in zip(e.start, e.stop, strict=False))
            coord = tuple(
                int(c) + x for c, x in zip(np.unravel_index(rel, box), e.start, strict=False)
            )
            return f"chunk {coord} ({span})"
    if job.kind == "ragged":
        return f"piece {span}"
    if job.kind == "records" and g > 1:
        return f"chunk {a // g} ({span})"
    return span


def _check_array_record(
    raw: bytes, r: int, job: _ShardJob, problems: list[Problem], owners: list[Any]
) -> None:
    for m, e in owners:
        rel = r - e.offset
        if not 0 <= rel < e.records:
            continue
        box = tuple(b - a for a, b in zip(e.start, e.stop, strict=False))
        coord = tuple(int(c) + a for c, a in zip(np.unravel_index(rel, box), e.start, strict=False))
        shape = m.grid.chunk_shape(coord)
        try:
            decode_chunk(raw, m.dtype, shape, f"record {r}")
        except CorruptionError as err:
            problems.append(
                Problem(
                    job.url, f"chunk {coord} (record {r})", str(err).split(": ", 1)[-1], job.node
                )
            )


def _check_shard(job: _ShardJob, store: Store) -> tuple[int, int, list[Problem]]:
    """Check one shard file -> (records read, bytes of the file, problems)."""
    problems: list[Problem] = []
    opts = None if store.local else store.storage_options
    missing = [Problem(job.url, "file", "missing: the shard file does not exist", job.node)]
    # the real size first (on object stores one HEAD; the reader then opens with it:
    # one GET); a file that opens is then checked against the sizes the manifests
    # record (one that does not open is reported as that, once)
    p = store.path(job.node, job.rel)
    try:
        size = os.path.getsize(p) if store.local else int(store.fs.size(p))
    except FileNotFoundError:
        return 0, 0, missing
    except OSError as e:
        return 0, 0, [Problem(job.url, "file", f"cannot open: {_short(e, job)}", job.node)]
    try:
        reader = ArrayRecordReader(
            job.url, storage_options=opts, file_size=None if store.local else size
        )
    except FileNotFoundError:
        return 0, 0, missing
    except (CorruptionError, NotImplementedError) as e:
        return 0, 0, [Problem(job.url, "file", _short(e, job), job.node)]
    except OSError as e:
        return 0, 0, [Problem(job.url, "file", f"cannot open: {_short(e, job)}", job.node)]
    try:
        n = len(reader)
        for said in sorted(job.sizes - {size}):
            problems.append(
                Problem(job.url, "file", f"has {size} bytes, the manifest says {said}", job.node)
            )
        # record counts against the manifest
        if job.kind == "records" and job.records is not None and n != job.records:
            problems.append(
                Problem(
                    job.url,
                    "index",
                    f"holds {n} records, the manifest says {job.records}",
                    job.node,
                )
            )
        need = max((e.offset + e.records for _, e in job.arrays), default=0)
        if n < need:
            problems.append(
                Problem(
                    job.url,
                    "index",
                    f"holds {n} records, the manifest needs records up to {need - 1}",
                    job.node,
                )
            )
        for _m, s in job.ragged:
            if n != s.records:
                problems.append(
                    Problem(
                        job.url,
                        "index",
                        f"holds {n} records, the manifest says {s.records}",
                        job.node,
                    )
                )
        ragged_index = None
        if job.ragged and n >= 1:
            ragged_index = _ragged_pieces(reader, n, job, problems)
        read = 0
        for first, batch in _read_batches(reader, n, job, problems):
            read += len(batch)
            for k, raw in enumerate(batch):
                if raw is None:
                    continue
                r = first + k
                if job.arrays:
                    _check_array_record(raw, r, job, problems, job.arrays)
                if ragged_index is not None and r in ragged_index:
                    dtype, shape = ragged_index[r]
                    try:
                        decode_chunk(raw, dtype, shape, f"record {r}")
                    except CorruptionError as err:
                        problems.append(
                            Problem(
                                job.url,
                                f"piece (record {r})",
                                str(err).split(": ", 1)[-1],
                                job.node,
                            )
                        )
        return read, size, problems
    finally:
        reader.close()


def _ragged_pieces(
    reader: ArrayRecordReader, n: int, job: _ShardJob, problems: list[Problem]
) -> dict[int, tuple[np.dtype, tuple[int, ...]]] | None:
    """Expected (dtype, shape) of every piece record, from the shard's index record."""
    m, s = job.ragged[-1]
    last = n - 1
    try:
        (raw,) = reader.read([last])
        shapes = np.asarray(decode_chunk(raw, np.dtype("<i8"), (s.items, m.ndim), "index"))
    except CorruptionError as e:
        problems.append(Problem(job.url, f"index record (record {last})", _short(e, job), job.node))
        return None
    if (shapes < 0).any():
        problems.append(
            Problem(job.url, f"index record (record {last})", "negative item length", job.node)
        )
        return None
    out: dict[int, tuple[np.dtype, tuple[int, ...]]] = {}
    r = 0
    for shape in shapes.tolist():
        length = shape[m.axis]
        k = 0
        while True:
            piece = list(shape)
            piece[m.axis] = min(m.piece_len, length - k)
            out[r] = (m.dtype, tuple(piece))
            r += 1
            k += m.piece_len
            if k >= length:
                break
    if r != last:
        problems.append(
            Problem(
                job.url,
                f"index record (record {last})",
                f"the item shapes need {r} piece records, the shard holds {last}",
                job.node,
            )
        )
        return None
    return out


def verify(
    url: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    component: str | None = None,
    progress: bool = False,
    threads: int | None = None,
) -> VerifyReport:
    """Check every shard of every manifest under ``url`` (see the module docstring).

    Shards are checked ``threads`` at a time (default: 2 x cores, at most 16); the
    engine decodes each batch of chunks in parallel. ``progress=True`` shows a bar
    (on a terminal). Returns a :class:`VerifyReport`; nothing raises for damage
    found, only for a URL that holds no dataset (``FileNotFoundError``).

    >>> import arrayds, numpy as np
    >>> _ = arrayds.to_arrayrecord(np.arange(10), "memory://doc-verify2", chunks=5)
    >>> verify("memory://doc-verify2").summary()  # doctest: +ELLIPSIS
    '1 nodes, 1 shards, 2 records, ... checked in ... s (...): no problems'
    """
    t0 = time.perf_counter()
    store, node = _open_root(url, storage_options, component)
    jobs, problems, nodes = _plan(store, node)
    report = VerifyReport(store.display(node), nodes=nodes, shards=len(jobs))
    workers = threads or min(16, 2 * (os.cpu_count() or 1))
    ordered = [jobs[k] for k in sorted(jobs)]
    found: dict[tuple[str, str], list[Problem]] = {}
    with (
        _progress.bar(len(ordered), "verify", progress, unit="shard") as pb,
        ThreadPoolExecutor(max(1, workers), thread_name_prefix="arrayds-verify") as pool,
    ):
        futures = {(j.node, j.rel): pool.submit(_check_shard, j, store) for j in ordered}
        for key, fut in futures.items():
            nrec, nbytes, probs = fut.result()
            report.records += nrec
            report.bytes += nbytes
            found[key] = probs
            pb.update(1)
    for key in sorted(found):
        problems.extend(found[key])
    report.problems = problems
    report.seconds = time.perf_counter() - t0
    return report


# ---------------------------------------------------------------------- gc


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


def _listing(store: Store) -> list[tuple[str, int, float | None]]:
    """(path, size, modification time or None) of every file under the root."""
    out: list[tuple[str, int, float | None]] = []
    if store.local:
        for folder, _dirs, files in os.walk(store.root):
            for f in files:
                p = os.path.join(folder, f)
                try:
                    st = os.stat(p)
                except FileNotFoundError:
                    continue
                out.append((p, st.st_size, st.st_mtime))
        return out
    store.fs.invalidate_cache(store.root)
    try:
        found = store.fs.find(store.root, detail=True)
    finally:
        store.fs.invalidate_cache(store.root)
    for p, info in found.items():
        if info.get("type", "file") != "file":
            continue
        out.append((p, int(info.get("size") or 0), _mtime(info)))
    return out


def _mtime(info: Mapping[str, Any]) -> float | None:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created", "modified"):
        v = info.get(key)
        if v is None:
            continue
        if isinstance(v, (int, float)):
            return float(v)
        ts = getattr(v, "timestamp", None)
        if callable(ts):
            return float(ts())
        try:
            from datetime import datetime

            return datetime.fromisoformat(str(v).replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
    return None


# Shard names as the writers produce them (docs/spec.md 6.1, spec-ragged.md and
# spec-records.md "Shard files"), and the temporary names of local writes: a shard
# being written is "<shard name>.<12 hex>.tmp", a manifest ".arrayds.json.<12 hex>.tmp".
# gc removes nothing else, and only in the folders a node owns: records shards and
# temporary manifests in the node's folder, array and ragged shards in its c/ folder.
_WRITE_ID = r"[0-9a-f]{24}"
_NUM = r"(?:0|[1-9][0-9]*)"
_TMP = r"(?:\.[0-9a-f]{12}\.tmp)?"
_NODE_FOLDER_NAMES = re.compile(
    rf"[A-Za-z0-9_.-]+-{_WRITE_ID}(?:-[0-9a-f]{{12}})?"  # Beam: one per bundle attempt
    rf"\.array_record-[0-9]{{5,}}-of-[0-9]{{5,}}{_TMP}"
    rf"|\.{re.escape(MANIFEST)}\.[0-9a-f]{{12}}\.tmp"
)
_SHARD_FOLDER_NAMES = re.compile(rf"{_WRITE_ID}-{_NUM}(?:-{_NUM})?\.array_record{_TMP}")
_SHARD_FOLDER_KINDS = ("array", "ragged")
"""Node kinds whose c/ folder holds their shards (a group's c/ is a child node)."""
_KNOWN_KINDS = ("group", *_SHARD_FOLDER_KINDS, "records")


def _is_candidate(rel: str, kind: str) -> bool:
    """Whether ``rel`` (a file path relative to the folder of a node of ``kind``) is
    a name that an arrayds write produces there."""
    parts = rel.split("/")
    if len(parts) == 1:
        return _NODE_FOLDER_NAMES.fullmatch(parts[0]) is not None
    return (
        len(parts) == 2
        and parts[0] == SHARD_DIR
        and kind in _SHARD_FOLDER_KINDS
        and _SHARD_FOLDER_NAMES.fullmatch(parts[1]) is not None
    )


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
    store, _node = _open_root(url, storage_options, None)
    report = GcReport(store.url, dry_run, float(min_age))
    files = _listing(store)
    sep = os.sep if store.local else "/"
    dirname = os.path.dirname if store.local else posixpath.dirname

    def join(folder: str, rel: str) -> str:
        if store.local:
            return os.path.normpath(os.path.join(folder, *rel.split("/")))
        return posixpath.normpath(posixpath.join(folder, rel))

    referenced: set[str] = set()
    protected: list[str] = []
    nodes: dict[str, str] = {}  # node folder -> kind
    for path, _size, _mt in files:
        if os.path.basename(path) != MANIFEST:
            continue
        folder = dirname(path)
        try:
            if store.local:
                with open(path, "rb") as f:
                    data = f.read()
            else:
                data = store.fs.cat_file(path)
            raw = json.loads(data.decode("utf8"))
            if not isinstance(raw, dict):
                raise ValueError("not an object")
        except (OSError, ValueError, UnicodeDecodeError):
            protected.append(folder)
            continue
        version = raw.get("format_version")
        if raw.get("format") != FORMAT or raw.get("kind") not in _KNOWN_KINDS:
            protected.append(folder)
            continue
        if isinstance(version, int) and version > FORMAT_VERSION:
            shown = path if store.local else store.fs.unstrip_protocol(path)
            raise NotImplementedError(
                f"{shown}: dataset format version {version} is newer than this arrayds supports "
                f"({FORMAT_VERSION}); upgrade arrayds to collect its garbage (nothing was removed)"
            )
        nodes[folder] = raw["kind"]
        referenced |= {join(folder, rel) for rel in manifest_shard_paths(raw)}
    report.referenced = len(referenced)
    report.protected = [(p if store.local else store.fs.unstrip_protocol(p)) for p in protected]
    now = time.time()
    doomed: list[str] = []
    for path, size, mt in sorted(files):
        if path in referenced or not _owned_candidate(path, nodes, sep):
            continue
        if any(path.startswith(p.rstrip(sep) + sep) for p in protected):
            continue
        shown = path if store.local else store.fs.unstrip_protocol(path)
        if min_age > 0 and (mt is None or now - mt < min_age):
            report.kept_young.append(shown)
            continue
        doomed.append(path)
        report.removed.append(shown)
        report.removed_bytes += size
    if not dry_run and doomed:
        if store.local:
            for p in doomed:
                try:
                    os.unlink(p)
                except FileNotFoundError:
                    pass
        else:
            store.fs.rm(doomed)
            store.fs.invalidate_cache(store.root)
    return report


def _owned_candidate(path: str, nodes: Mapping[str, str], sep: str) -> bool:
    """Whether ``path`` is a shard-grammar name in a folder that a node owns: its own
    folder or (array, ragged) its c/ folder."""
    head, _, name = path.rpartition(sep)
    kind = nodes.get(head)
    if kind is not None:
        return _is_candidate(name, kind)
    parent, _, folder = head.rpartition(sep)
    kind = nodes.get(parent)
    return kind is not None and folder == SHARD_DIR and _is_candidate(f"{folder}/{name}", kind)
