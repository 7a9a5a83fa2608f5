"""``arrayds verify``: :func:`verify` checks every shard that any manifest names.

It walks every manifest under a URL (:func:`arrayds.tools.walk.walk`) and checks every
shard file each node's kind names (:attr:`arrayds.nodes.registry.NodeKind.shards`): the
file exists, its size is the one recorded, its footer and index are consistent, every
chunk's checksums hold (every record is read and decoded by the engine) and the
record counts agree with the manifest. Each kind adds its own checks
(:attr:`~arrayds.nodes.registry.NodeKind.verify_extra`): every array chunk is a ``.npy``
record of the dtype and shape its grid position needs (:func:`array_checks`), every
ragged piece matches its shard's index (:func:`ragged_checks`). A manifest that names
the same shard (or the same records of one shard) twice is damage too. Each problem
names the shard file and the chunk or record position.

>>> import arrayds, numpy as np
>>> a = arrayds.open_array("memory://doc-verify", mode="w", shape=(6,), dtype="i2", chunks=2)
>>> a[:] = np.arange(6)
>>> report = verify("memory://doc-verify")
>>> report.ok, report.shards, report.records
(True, 1, 3)
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from ..abc.store import Store
from ..errors import CorruptionError
from ..files.arrayrecord import ArrayRecordReader
from ..kinds.array.tensor import decode_chunk
from ..nodes import commit
from ..nodes import registry as kinds
from ..nodes.names import join_component
from ..progress import bar as progress_bar
from ..storage.coalesce import coalesce_options
from .describe import format_bytes
from .walk import open_root, walk

__all__ = ["Problem", "VerifyReport", "array_checks", "ragged_checks", "verify"]

_BATCH_BYTES = 32 << 20
"""Records are read in batches of about this many decoded bytes."""


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
    """What :func:`verify` checked and found. ``ok`` is ``not problems``; ``version``
    is the version (generation) of the node verified with ``version=`` / ``as_of=``
    (``None``: its current state)."""

    url: str
    nodes: int = 0
    shards: int = 0
    records: int = 0
    bytes: int = 0
    seconds: float = 0.0
    problems: list[Problem] = field(default_factory=list)
    version: int | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "version": self.version,
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
        at = f"version {self.version}: " if self.version is not None else ""
        head = at + (
            f"{self.nodes} nodes, {self.shards} shards, {self.records} records, "
            f"{format_bytes(self.bytes)} checked in {self.seconds:.2f} s "
            f"({format_bytes(rate)}/s)"
        )
        if self.ok:
            return head + ": no problems"
        return head + f": {len(self.problems)} problem{'s' if len(self.problems) != 1 else ''}"


# ------------------------------------------------------- the kinds' own checks


def _chunk_of(e: Any, r: int) -> tuple[int, ...] | None:
    """The grid coordinates of record ``r`` of a shard if chunk run ``e`` holds it."""
    rel = r - e.offset
    if not 0 <= rel < e.records:
        return None
    box = tuple(b - a for a, b in zip(e.start, e.stop, strict=False))
    return tuple(int(c) + a for c, a in zip(np.unravel_index(rel, box), e.start, strict=False))


def _selected(m: Any, entry: Any, coord: tuple[int, ...], r: int) -> bool:
    """Whether reads of chunk ``coord`` select record ``r`` of ``entry`` (no newer
    entry hides it)."""
    e, rec = m.table.locate_one(coord)
    return e >= 0 and rec == r and m.shards[e].path == entry.path


def _hidden_shape(raw: bytes, dtype: np.dtype, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape a hidden record's ``.npy`` header gives, if it is of ``dtype`` and
    fits inside ``shape`` (the chunk as it was when written), else ``shape`` (so the
    decode names what is wrong). Reads only the header: no allocation of its size."""
    try:
        fp = io.BytesIO(raw)
        fmt = np.lib.format
        major, _minor = fmt.read_magic(fp)
        read_header = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
        got, _fortran, descr = read_header(fp)
    except Exception:  # noqa: BLE001 - not a .npy header: the decode names it
        return shape
    ok = (
        descr == dtype
        and len(got) == len(shape)
        and all(0 <= g <= s for g, s in zip(got, shape, strict=True))
    )
    return tuple(got) if ok else shape


def _span(a: int, b: int) -> str:
    return f"record {a}" if b - a == 1 else f"records {a}..{b - 1}"


def array_checks(
    reader: Any, n: int, entries: list[tuple[Any, kinds.ShardRef]]
) -> kinds.ShardCheck:
    """An array's checks of one shard: every record that a chunk run of ``entries``
    claims is a ``.npy`` chunk of the array's dtype and of the shape its grid
    position needs; damaged engine chunks are named by array chunk coordinates.

    A record that a newer entry hides (reads never select it) may hold the chunk as
    it was when written: an edge chunk that later appends completed, kept in a shard
    that a tiered merge made while the chunk was partial. Such a record must be a
    ``.npy`` chunk of the array's dtype no larger than its grid position on any axis."""

    def record(r: int, raw: bytes) -> Iterator[tuple[str, str]]:
        for m, ref in entries:
            coord = _chunk_of(ref.entry, r)
            if coord is None:
                continue
            shape = m.grid.chunk_shape(coord)
            try:
                if not _selected(m, ref.entry, coord, r):
                    shape = _hidden_shape(raw, m.dtype, shape)
                decode_chunk(raw, m.dtype, shape, f"record {r}")
            except CorruptionError as err:
                yield f"chunk {coord} (record {r})", str(err).split(": ", 1)[-1]

    def where(a: int, b: int, g: int) -> str:
        for _m, ref in entries:
            coord = _chunk_of(ref.entry, a)
            if coord is not None:
                return f"chunk {coord} ({_span(a, b)})"
        return _span(a, b)

    return kinds.ShardCheck(record=record, where=where)


def _piece_shapes(m: Any, shapes: np.ndarray) -> dict[int, tuple[int, ...]]:
    """The shape of every piece record of a ragged shard, from its items' shapes."""
    out: dict[int, tuple[int, ...]] = {}
    r = 0
    for shape in shapes.tolist():
        length = shape[m.axis]
        k = 0
        while True:
            piece = list(shape)
            piece[m.axis] = min(m.piece_len, length - k)
            out[r] = tuple(piece)
            r += 1
            k += m.piece_len
            if k >= length:
                break
    return out


def ragged_checks(
    reader: Any, n: int, entries: list[tuple[Any, kinds.ShardRef]]
) -> kinds.ShardCheck:
    """A ragged array's checks of one shard: its last record is an index of the
    items' shapes, every other record is the piece of the shape that index needs;
    damaged engine chunks are named as pieces."""
    check = kinds.ShardCheck(where=lambda a, b, g: f"piece {_span(a, b)}")
    if n < 1:
        return check
    m, ref = entries[-1]
    last = n - 1
    at = f"index record (record {last})"
    try:
        (raw,) = reader.read([last])
        shapes = np.asarray(decode_chunk(raw, np.dtype("<i8"), (ref.entry.items, m.ndim), "index"))
    except CorruptionError as e:
        check.problems.append((at, str(e)))
        return check
    if (shapes < 0).any():
        check.problems.append((at, "negative item length"))
        return check
    pieces = _piece_shapes(m, shapes)
    if len(pieces) != last:
        check.problems.append(
            (at, f"the item shapes need {len(pieces)} piece records, the shard holds {last}")
        )
        return check

    def record(r: int, data: bytes) -> Iterable[tuple[str, str]]:
        if r not in pieces:
            return ()
        try:
            decode_chunk(data, m.dtype, pieces[r], f"record {r}")
        except CorruptionError as err:
            return [(f"piece (record {r})", str(err).split(": ", 1)[-1])]
        return ()

    check.record = record
    return check


# ------------------------------------------------------------------ planning


@dataclass
class _ShardJob:
    """One shard file to check and every manifest entry that names it."""

    node: str
    rel: str
    url: str
    kind: kinds.NodeKind
    entries: list[tuple[Any, kinds.ShardRef]] = field(default_factory=list)
    records: int | None = None  # the first exact record count recorded

    @property
    def sizes(self) -> set[int]:
        """The byte sizes the manifests record."""
        return {ref.size for _m, ref in self.entries if ref.size}

    @property
    def need(self) -> int:
        """The records the chunk runs claim at least."""
        return max((ref.span[1] for _m, ref in self.entries if ref.span), default=0)


def _duplicates(refs: list[kinds.ShardRef]) -> list[str]:
    """Entries that name the same file twice (or claim the same records of it)."""
    out = []
    first: dict[str, int] = {}
    spans: dict[str, list[tuple[int, int, int]]] = {}
    for i, ref in enumerate(refs):
        if ref.span is not None:
            spans.setdefault(ref.path, []).append((*ref.span, i))
        elif ref.path in first:
            out.append(
                f"the manifest names shard {ref.path!r} twice (entries {first[ref.path]} and {i})"
            )
        else:
            first[ref.path] = i
    for path, found in spans.items():
        found.sort()
        for (a0, a1, i), (b0, b1, j) in zip(found, found[1:], strict=False):
            if b0 < a1:
                lo, hi = max(a0, b0), min(a1, b1) - 1
                out.append(
                    f"the manifest names shard {path!r} twice: entries {min(i, j)} and "
                    f"{max(i, j)} both claim its records {lo}..{hi}"
                )
    return out


@dataclass
class _Plan:
    """What :func:`_plan` found: the shard files to check, the problems of the
    manifests themselves, the number of nodes and the generation of the node walked
    from (``None`` unless a version was asked for)."""

    jobs: dict[tuple[str, str], _ShardJob]
    problems: list[Problem]
    nodes: int
    version: int | None


def _plan(
    store: Store, node: str, version: int | None = None, as_of: datetime | None = None
) -> _Plan:
    """The shard files to check of ``node`` and below (at ``version`` / ``as_of``:
    those that version names, :func:`arrayds.tools.walk.walk`)."""
    jobs: dict[tuple[str, str], _ShardJob] = {}
    problems: list[Problem] = []
    nodes = 0
    at: int | None = None
    pinned = version is not None or as_of is not None
    for item in walk(store, node, version=version, as_of=as_of):
        if pinned and at is None and item.node == node and isinstance(item.raw, dict):
            at = commit.generation_of(item.raw)
        murl = store.url_of(commit.manifest_key(item.node))
        where = "manifest" if not item.source else f"manifest ({item.source})"
        if not item.source:
            nodes += 1
        if item.kind is None:
            m = item.parsed
            problems.append(Problem(murl, where, f"{type(m).__name__}: {m}", item.node))
            continue
        if item.kind.shards is None:
            continue
        refs = item.kind.shards(item.parsed)
        problems.extend(Problem(murl, where, msg, item.node) for msg in _duplicates(refs))
        for ref in refs:
            key = (item.node, ref.path)
            job = jobs.get(key)
            if job is None:
                url = store.url_of(join_component(item.node, ref.path))
                job = jobs[key] = _ShardJob(item.node, ref.path, url, item.kind)
            if ref.records is not None:
                if job.records is not None and job.records != ref.records:
                    problems.append(
                        Problem(
                            murl,
                            where,
                            f"shard {ref.path!r} is listed with {job.records} and with "
                            f"{ref.records} records",
                            item.node,
                        )
                    )
                job.records = ref.records if job.records is None else job.records
            if (item.parsed, ref) not in job.entries:
                job.entries.append((item.parsed, ref))
    return _Plan(jobs, problems, nodes, at)


# ------------------------------------------------------------------ checking


def _unnamed(text: str, job: _ShardJob) -> str:
    """``text`` without the file name (the Problem names the file)."""
    for name in {job.url, job.url.split("://", 1)[-1]}:
        text = text.replace(f"{name}: ", "")
    return text


def _short(e: BaseException, job: _ShardJob) -> str:
    """The message of ``e`` without the file name."""
    text = _unnamed(str(e), job)
    return f"{type(e).__name__}: {text}" if not isinstance(e, CorruptionError) else text


def _position(check: kinds.ShardCheck, a: int, b: int, g: int) -> str:
    """Where records ``a..b-1`` (one engine chunk of group size ``g``) are."""
    if check.where is not None:
        return check.where(a, b, g)
    return f"chunk {a // g} ({_span(a, b)})" if g > 1 else _span(a, b)


def _read_batches(
    reader: ArrayRecordReader,
    n: int,
    job: _ShardJob,
    check: kinds.ShardCheck,
    problems: list[Problem],
) -> Iterator[tuple[int, list[bytes | None]]]:
    """Yield (first record, records) for all records of the shard; a damaged chunk
    becomes one Problem and ``None`` for each of its records."""
    g = max(1, reader.group_size())
    # a reader that holds its whole (small) file reads it in one batch, no request
    count = n if reader.holds_whole_file else g
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
                        Problem(job.url, _position(check, a, b, g), _short(e, job), job.node)
                    )
                    batch.extend([None] * (b - a))
        got = [r for r in batch if r is not None]
        per = max(1, sum(map(len, got)) // max(1, len(got)))
        count = max(g, min(1 << 16, _BATCH_BYTES // per))
        count -= count % g
        yield pos, batch
        pos = end


def _open_shard(
    job: _ShardJob, store: Store
) -> tuple[ArrayRecordReader | None, int, list[Problem]]:
    """(reader, file size, problems): the real size first (on object stores one HEAD;
    the reader then opens with it: one GET, of the whole file when it is at most the
    coalescing ``max_size``, :mod:`arrayds.storage.coalesce`); no reader if the file does not
    open."""
    missing = [Problem(job.url, "file", "missing: the shard file does not exist", job.node)]
    try:
        size = store.size(join_component(job.node, job.rel))
    except FileNotFoundError:
        return None, 0, missing
    except OSError as e:
        return None, 0, [Problem(job.url, "file", f"cannot open: {_short(e, job)}", job.node)]
    opts = None if store.local else store.storage_options
    try:
        reader = ArrayRecordReader(
            job.url,
            storage_options=opts,
            file_size=None if store.local else size,
            whole_file=not store.local and size <= coalesce_options().max_size,
        )
    except FileNotFoundError:
        return None, 0, missing
    except (CorruptionError, NotImplementedError) as e:
        return None, 0, [Problem(job.url, "file", _short(e, job), job.node)]
    except OSError as e:
        return None, 0, [Problem(job.url, "file", f"cannot open: {_short(e, job)}", job.node)]
    return reader, size, []


def _count_problems(job: _ShardJob, n: int, size: int) -> list[Problem]:
    """The file's size and record count against what the manifests record."""
    out = [
        Problem(job.url, "file", f"has {size} bytes, the manifest says {said}", job.node)
        for said in sorted(job.sizes - {size})
    ]
    for said in sorted({ref.records for _m, ref in job.entries if ref.records is not None}):
        if n != said:
            out.append(
                Problem(job.url, "index", f"holds {n} records, the manifest says {said}", job.node)
            )
    if n < job.need:
        out.append(
            Problem(
                job.url,
                "index",
                f"holds {n} records, the manifest needs records up to {job.need - 1}",
                job.node,
            )
        )
    return out


def _check_shard(job: _ShardJob, store: Store) -> tuple[int, int, list[Problem]]:
    """Check one shard file -> (records read, bytes of the file, problems)."""
    reader, size, problems = _open_shard(job, store)
    if reader is None:
        return 0, 0, problems
    try:
        n = len(reader)
        problems.extend(_count_problems(job, n, size))
        extra = job.kind.verify_extra
        check = kinds.ShardCheck() if extra is None else extra(reader, n, job.entries)
        problems.extend(
            Problem(job.url, w, _unnamed(msg, job), job.node) for w, msg in check.problems
        )
        read = 0
        for first, batch in _read_batches(reader, n, job, check, problems):
            read += len(batch)
            if check.record is None:
                continue
            for k, raw in enumerate(batch):
                if raw is not None:
                    for w, msg in check.record(first + k, raw):
                        problems.append(Problem(job.url, w, msg, job.node))
        return read, size, problems
    finally:
        reader.close()


def verify(
    url: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    component: str | None = None,
    progress: bool = False,
    threads: int | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> VerifyReport:
    """Check every shard of every manifest under ``url`` (see the module docstring).

    ``version=N`` (a generation of the node ``url`` + ``component``, see
    :func:`arrayds.versions`) or ``as_of=`` (a datetime: the newest version committed
    at or before it; naive means UTC): check the shards that version names, and below
    it those of each node as :func:`arrayds.open` reads it at that version (as of the
    moment the version stands for). An old version's shards exist until ``arrayds
    gc`` expires the version. A version that is not kept is a ``ValueError`` naming
    the versions kept; the report's ``version`` is the generation checked.

    Shards are checked ``threads`` at a time (default: 2 x cores, at most 16); the
    engine decodes each batch of chunks in parallel. ``progress=True`` shows a bar
    (on a terminal). Returns a :class:`VerifyReport`; nothing raises for damage
    found, only for a URL that holds no dataset (``FileNotFoundError``).

    >>> import arrayds, numpy as np
    >>> _ = arrayds.to_arrayrecord(np.arange(10), "memory://doc-verify2", chunks=5)
    >>> verify("memory://doc-verify2").summary()  # doctest: +ELLIPSIS
    '1 nodes, 1 shards, 2 records, ... checked in ... s (...): no problems'
    >>> _ = arrayds.to_arrayrecord(np.arange(4), "memory://doc-verify2", mode="a", chunks=5)
    >>> old = verify("memory://doc-verify2", version=1)
    >>> old.version, old.shards, old.ok
    (1, 1, True)
    """
    t0 = time.perf_counter()
    store, node = open_root(url, storage_options, component, version=version, as_of=as_of)
    plan = _plan(store, node, version, as_of)
    jobs, problems = plan.jobs, plan.problems
    report = VerifyReport(
        store.display(node), nodes=plan.nodes, shards=len(jobs), version=plan.version
    )
    workers = threads or min(16, 2 * (os.cpu_count() or 1))
    ordered = [jobs[k] for k in sorted(jobs)]
    found: dict[tuple[str, str], list[Problem]] = {}
    with (
        progress_bar(len(ordered), "verify", progress, unit="shard") as pb,
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
