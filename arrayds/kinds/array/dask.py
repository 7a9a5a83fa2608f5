"""Dask arrays <-> array nodes (docs/guide.md, Arrays).

Writing (:func:`write_array`) builds a graph of

* one task per shard: it receives its dask blocks (a box of the block grid, C order),
  checks their shapes, encodes each as one ``.npy`` record and writes the shard file
  under a name unique to this write, then returns the shard's manifest entry;
* one commit task depending on all shard tasks: it checks that nobody committed to
  the node since the graph was built, then writes the new manifest atomically.

No locks: tasks share nothing but the file system, shard names never collide, and a
retried task rewrites its own shard. Nothing is visible before the commit.

Reading (:func:`array_to_dask`) is ``dask.array.from_array`` over
:class:`ArraySource`, a small picklable object that reads a box of chunks with one
batched engine read per shard. Block boundaries are stored chunk boundaries (or whole
multiples of them), so no chunk is read by two tasks. The name is deterministic:
``from-arrayrecord-<token(url, node, generation, commit, chunks)>``.

>>> import arrayds, dask.array as da
>>> x = da.arange(12, chunks=5).reshape(3, 4)
>>> arrayds.to_arrayrecord(x, "memory://doc-dask", mode="w").chunks
((1, 1, 1), (4,))
>>> y = arrayds.from_arrayrecord("memory://doc-dask")
>>> y.chunks, int(y.sum().compute())
(((1, 1, 1), (4,)), 66)
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...dask.graph import block_keys, run, streams_blocks, write_graph
from ...errors import CommitConflictError
from ...nodes import commit, history, pending
from ...nodes.merge import tiered as tiered_merge
from ...nodes.names import SHARD_DIR, join_component, shard_name
from ...nodes.options import DEFAULT_COMPRESSION, check_compression, writer_options
from ...nodes.read import read_node
from ...nodes.retry import APPEND_RETRIES, check_retries
from ...nodes.shards import write_shard
from ...storage import get_store
from ...storage.base import BaseStore as Store
from .grid import AxisGrid, ChunkGrid
from .handle import Array, rebase_append, rebase_base
from .manifest import ArrayManifest, ShardColumns, ShardEntry, ShardList
from .tensor import check_dtype, encode_chunk

__all__ = [
    "AUTO_SHARD_BYTES",
    "ArrayWritePlan",
    "group_blocks",
    "plan_array_write",
    "shard_tasks",
    "write_array",
    "write_shards_now",
    "write_plan_graph",
]

AUTO_SHARD_BYTES = 16 << 20
"""Default shard target: a block this large is its own shard; smaller blocks are
grouped up to this size."""

# ------------------------------------------------------------------- grouping


def _parse_size(shard_size: Any, what: str) -> int:
    if isinstance(shard_size, (int, np.integer)) and not isinstance(shard_size, bool):
        n = int(shard_size)
    elif isinstance(shard_size, str):
        from dask.utils import parse_bytes

        try:
            n = int(parse_bytes(shard_size))
        except (ValueError, KeyError):
            raise ValueError(
                f"{what}: shard_size {shard_size!r} is not a size such as '128MiB'"
            ) from None
    else:
        raise TypeError(f"{what}: shard_size must be an int or a string such as '128MiB'")
    if n < 1:
        raise ValueError(f"{what}: shard_size must be positive, got {shard_size!r}")
    return n


def group_blocks(
    numblocks: Sequence[int],
    chunks: Sequence[Sequence[int]],
    itemsize: int,
    shard_size: Any = None,
    what: str = "array",
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Group the block grid into shard boxes ``(start, stop)`` (block coordinates).

    Each shard must be a box of blocks (docs/spec.md: a shard covers a box of the
    chunk grid), so neighbouring blocks are packed along the last axes first: whole
    rows of the last axis, then whole planes, ... up to the target size (``shard_size``
    or 16 MiB), never splitting a block. With the default, a block of 16 MiB or more
    is its own shard. The largest block of the grid is the unit, so no shard exceeds
    the target unless a single block does.

    >>> group_blocks((4, 8), ((1,) * 4, (1,) * 8), 1 << 20)  # 1 MiB blocks
    [((0, 0), (2, 8)), ((2, 0), (4, 8))]
    >>> group_blocks((2, 2), ((1, 1), (1, 1)), 16 << 20)  # 16 MiB blocks
    [((0, 0), (1, 1)), ((0, 1), (1, 2)), ((1, 0), (2, 1)), ((1, 1), (2, 2))]
    """
    if any(n == 0 for n in numblocks):
        return []
    g = box_step(numblocks, chunks, itemsize, shard_size, what)
    boxes = []
    for start in itertools.product(*(range(0, n, s) for n, s in zip(numblocks, g, strict=False))):
        stop = tuple(min(a + s, n) for a, s, n in zip(start, g, numblocks, strict=False))
        boxes.append((tuple(start), stop))
    return boxes


def box_step(
    numblocks: Sequence[int],
    chunks: Sequence[Sequence[int]],
    itemsize: int,
    shard_size: Any = None,
    what: str = "array",
) -> list[int]:
    """The extent in blocks of each shard box :func:`group_blocks` makes (the last
    box of an axis may be shorter): the boxes tile the block grid from its origin.

    >>> box_step((4, 8), ((1,) * 4, (1,) * 8), 1 << 20)  # 1 MiB blocks
    [2, 8]
    """
    ndim = len(numblocks)
    target = AUTO_SHARD_BYTES if shard_size is None else _parse_size(shard_size, what)
    block = itemsize * math.prod(max(c) if c else 0 for c in chunks)
    g = [1] * ndim
    if block < target and ndim:
        budget = max(1, target // max(block, 1))
        for d in range(ndim - 1, -1, -1):
            g[d] = min(numblocks[d], budget)
            if g[d] < numblocks[d]:
                break
            budget //= max(numblocks[d], 1)
            if budget <= 1:
                break
    return g


# ---------------------------------------------------------------------- tasks


class ShardJob:
    """What one shard task needs besides its blocks (one plain object, so graph
    construction and pickling stay cheap)."""

    __slots__ = ("url", "storage_options", "node", "relpath", "options", "dtype",
                 "box_sizes", "start", "stop", "what")  # fmt: skip

    def __init__(self, **kw: Any) -> None:
        for k in self.__slots__:
            setattr(self, k, kw[k])

    def __reduce__(self) -> tuple[Any, ...]:
        return (_make_job, (ShardJob, {k: getattr(self, k) for k in self.__slots__}))


class CommitJob:
    """What the commit task needs besides the shard entries: ``base`` is the header
    of the manifest the write makes (no entries: the commit reads the stored list it
    changes, never the graph); ``hide`` (a region write, mode ``"r+"``) is the box of
    shards the write tiles: its first and stop chunk and the extent of each box
    (:func:`box_step`), which decides the stored entries it hides."""

    __slots__ = ("url", "storage_options", "node", "mode", "base", "expected", "write_id",
                 "tiered", "retries", "first", "attrs", "hide")  # fmt: skip

    def __init__(self, **kw: Any) -> None:
        for k in self.__slots__:
            setattr(self, k, kw[k])

    def __reduce__(self) -> tuple[Any, ...]:
        return (_make_job, (CommitJob, {k: getattr(self, k) for k in self.__slots__}))


def _make_job(cls: Any, kw: dict[str, Any]) -> Any:
    return cls(**kw)


@streams_blocks
def _write_shard_task(
    job: ShardJob, blocks: Iterable[Any], defer_sync: bool = False
) -> dict[str, Any]:
    """Encode a box of blocks (C order; a list, or an iterator that makes each block
    when it is taken) as one shard; return its manifest entry. ``defer_sync``: the
    caller commits the shard in this process (:func:`arrayds.nodes.shards.shard_writer`)."""
    store = get_store(job.url, job.storage_options)
    dtype = np.dtype(job.dtype)
    what = job.what
    _refuse_committed_shard(store, job)
    shapes = list(itertools.product(*job.box_sizes))
    coords = itertools.product(*(range(a, b) for a, b in zip(job.start, job.stop, strict=True)))

    def records() -> Iterator[np.ndarray]:
        # encoded one at a time as the writer takes them (in batches of at most
        # 64 MiB), so the shard's encoded chunks never exist all at once
        for blk, shape, coord in zip(blocks, shapes, coords, strict=True):
            arr = np.asarray(blk)
            if arr.shape != tuple(shape):
                raise ValueError(
                    f"{what}: the dask block for chunk {coord} has shape {arr.shape}, but "
                    f"the array's chunks say {tuple(shape)} (a map_blocks with wrong chunks=?)"
                )
            if arr.dtype != dtype and not np.can_cast(arr.dtype, dtype, "same_kind"):
                raise ValueError(
                    f"{what}: the dask block for chunk {coord} has dtype {arr.dtype}, "
                    f"expected {dtype} (the dask array's dtype)"
                )
            yield encode_chunk(arr, dtype)

    nbytes = write_shard(
        store,
        join_component(job.node, job.relpath),
        records(),
        job.options,
        defer_sync=defer_sync,
    )
    return ShardEntry(job.relpath, tuple(job.start), tuple(job.stop), 0, nbytes).to_json()


def _refuse_committed_shard(store: Store, job: ShardJob) -> None:
    """Shards are immutable: a shard task may rewrite its file only while no manifest
    references it (a retried task after a lost worker). Computing the same
    ``compute=False`` write again after it committed would overwrite committed data."""
    if not store.exists(job.node, job.relpath):
        return
    cur = commit.read(store, job.node)
    if cur.kind == "array" and _names_shard(cur, job):
        raise RuntimeError(
            f"{job.what}: this write already committed shard {job.relpath!r}; a write "
            f"computes once (call to_arrayrecord again to write the data again)"
        )


def _names_shard(cur: commit.NodeVersion, job: ShardJob) -> bool:
    """Whether the array ``cur`` names the shard of ``job``: of a list stored in
    segments, only those whose box meets the shard's box or lies after it along axis 0
    (where a rebased append moved it) are read, one at a time."""
    raw = cur.lazy_raw or {}
    shards = raw.get("shards")
    if not isinstance(shards, history.ShardLog):
        return job.relpath in commit.referenced_files(raw)
    hi = [2**62, *(b - 1 for b in job.stop[1:])]
    for k in [*shards.meeting(job.start, hi), -1]:
        entries = shards.tail if k < 0 else shards.load(k, cache=False)
        if job.relpath in commit.referenced_files({"shards": entries}):
            return True
    return False


def _commit_task(job: CommitJob, entries: list[dict[str, Any]]) -> Array:
    """Commit the written shards whose entries the shard tasks returned (a write of
    at most :data:`SEGMENT_LIMIT` shards): :func:`_commit_write`. An append
    (``job.tiered``: ``compact="tiered"``) runs the tiered merge of the newest small
    shards inside this commit (:func:`arrayds.nodes.merge.tiered`: one version)."""
    return _commit_write(job, [_entry(e) for e in entries], [])


def _commit_segments_task(job: CommitJob, refs: list[dict[str, Any]]) -> Array:
    """The commit of a write of more than :data:`SEGMENT_LIMIT` shards: its entries
    come as the references of segments the workers wrote (:func:`_segment_task`), so
    the commit task holds a reference per :data:`SEGMENT_LIMIT` shards, never the
    entries (:func:`_commit_write`). No tiered merge runs; the shards of a write
    whose commit fails stay until ``arrayds gc``."""
    return _commit_write(job, [], refs)


def _commit_write(job: CommitJob, new: list[ShardEntry], refs: list[dict[str, Any]]) -> Array:
    """Commit a dask write (:func:`arrayds.nodes.commit.commit`): the node must be as
    the graph expects (mode ``"w-"``: still missing; ``"a"``/``"r+"``: the generation
    the write planned from), else nothing of the write is visible and its shards are
    removed. The new entries are the segments ``refs`` then ``new``, committed as an
    :class:`arrayds.nodes.history.Extend`, so no list the node stores is loaded whole:
    mode ``"w"`` replaces the node (``fresh``: the replaced files are removed one
    segment at a time), an append adds after the stored entries, and a region write
    (``"r+"``) drops the stored entries a box it wrote holds whole, parsing only the
    segments that meet the region (:meth:`ShardList.stored_positions`).

    An append with ``job.retries`` (``retries=``, :mod:`arrayds.nodes.retry`) whose
    array another writer committed to since the plan goes after that writer's rows
    instead (:func:`_rebased_header`: its shards hold whole chunks, so only their
    entries move, a segment at a time; nothing is written again), and a refused put
    is tried again so, from a fresh read, up to ``job.retries`` times."""
    store = get_store(job.url, job.storage_options)
    node, mode = job.node, job.mode
    what = f"array {store.display(node)!r}"
    m = ArrayManifest.from_json({**job.base, "shards": []}, what)
    rebase, stamp, check = _commit_check(job, what)

    def build(base: commit.NodeVersion) -> Any:
        if rebase and not (base.kind == "array" and base.stamp == stamp):
            cur, shift = _rebased_header(base, m, job.first, job.attrs, what)
            moved = []
            for ref in refs:  # one segment's entries in memory at a time
                entries = [
                    _entry(e).shifted(0, shift).to_json()
                    for e in history.segment(store, node, ref, what)
                ]
                moved += history.write_segments(store, node, entries, job.write_id)
            added = [e.shifted(0, shift).to_json() for e in new]
            return commit.Extend(cur.header_json(), added, segments=moved)
        added = [e.to_json() for e in new]
        if job.hide is None:
            return commit.Extend(m.header_json(), added, segments=refs, fresh=mode == "w")
        start, stop, _step = job.hide
        stored = ShardList((base.lazy_raw or {}).get("shards") or [], m.grid, what)
        drop = stored.stored_positions(
            start, [b - 1 for b in stop], functools.partial(_hidden, job.hide)
        )
        return commit.Extend(m.header_json(), added, drop=drop, segments=refs)

    written = [e.path for e in new]
    merge = tiered_merge(store, node, written) if job.tiered and mode == "a" and new else None
    raw = commit.commit(
        store,
        node,
        build,
        write_id=job.write_id,
        check=check,
        written=[*written, *(r["path"] for r in refs)],
        retries=job.retries if rebase else 0,
        parents=mode in ("w", "w-"),
        replaces=mode == "w",
        what=what,
        merge=merge,
        registered=True,
    )
    got = history.resolve(store, node, raw, what, lazy=True)
    return Array(store, node, ArrayManifest.from_json(got, what), "r")


def _hidden(hide: Sequence[Sequence[int]], cols: ShardColumns) -> np.ndarray:
    """Which entries of ``cols`` a region write that tiles the chunks ``start`` ..
    ``stop`` with boxes of ``step`` chunks (``hide``) hides: those inside the region
    whose first and last chunk fall in the same box (one new box holds them whole)."""
    start, stop, step = (np.asarray(v, dtype=np.int64) for v in hide)
    lo, hi = cols.starts, cols.stops
    inside = np.all((lo >= start) & (hi <= stop), axis=1)
    return inside & np.all((lo - start) // step == (hi - 1 - start) // step, axis=1)


def _entry(e: Mapping[str, Any]) -> ShardEntry:
    """The entry a shard task returned."""
    return ShardEntry(e["path"], tuple(e["start"]), tuple(e["stop"]), 0, e.get("bytes"))


def _commit_check(
    job: CommitJob, what: str
) -> tuple[bool, tuple[int, str] | None, Callable[[commit.NodeVersion], None]]:
    """Of a commit task: whether it rebases an append that lost a race, the stamp of
    the manifest it planned from, and the check of the node it commits on (mode
    ``"w-"``: still missing; else the planned generation unless it rebases)."""
    mode, expected = job.mode, job.expected
    rebase = mode == "a" and job.retries > 0
    stamp = None if expected is None else (expected[0], expected[1] or "")

    def check(base: commit.NodeVersion) -> None:
        if mode == "w-" and base.exists:
            raise FileExistsError(
                f"{what} was created by another writer while this write ran (mode 'w-'); "
                f"nothing of this write is visible"
            )
        if expected is not None and not rebase and (base.kind != "array" or base.stamp != stamp):
            got = base.generation if base.exists else None
            raise CommitConflictError(
                f"{what}: another writer committed (generation {got}) after this write "
                f"started from generation {expected[0]}; nothing of this write is visible "
                f"(an append retries after the other writer's rows with retries=N)"
            )

    return rebase, stamp, check


def _segment_task(job: CommitJob, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Write the manifest entries of a run of at most :data:`SEGMENT_LIMIT` shards as
    one segment (:func:`arrayds.nodes.history.write_segments`) once the shards' names
    are durable; return its reference, all the commit task receives of them."""
    store = get_store(job.url, job.storage_options)
    store.flush([join_component(job.node, e["path"]) for e in entries])
    [ref] = history.write_segments(store, job.node, entries, job.write_id)
    return ref


def _rebased_header(
    base: commit.NodeVersion, planned: ArrayManifest, first: int, attrs: Any, what: str
) -> tuple[ArrayManifest, int]:
    """The header of an append planned as ``planned`` (grown along axis 0 by the chunks
    from index ``first`` on) placed after the rows of the array as another writer left
    it (``base``), as :func:`arrayds.kinds.array.handle.rebase_append` places it, with
    no entry loaded; and how many chunks along axis 0 the appended entries move."""
    cur = rebase_base(base, what)
    grown, _ = rebase_append(cur.with_(shards=[]), planned, 0, first, [], what, attrs)
    return grown, cur.grid.axes[0].nchunks - first


# ---------------------------------------------------------------------- write


def normalize_region(
    region: Any, m: ArrayManifest, shape: tuple[int, ...], what: str
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A region (tuple of slices) -> chunk-coordinate box, checking alignment."""
    ndim = m.ndim
    if region is None:
        region = (slice(None),) * ndim
    if isinstance(region, slice):
        region = (region,)
    if not isinstance(region, tuple) or not all(isinstance(s, slice) for s in region):
        raise TypeError(f"{what}: region must be a tuple of slices, got {region!r}")
    if len(region) > ndim:
        raise ValueError(f"{what}: region {region} has more entries than the {ndim} axes")
    region = region + (slice(None),) * (ndim - len(region))
    c_start, c_stop, rshape = [], [], []
    for d, (s, ax) in enumerate(zip(region, m.grid.axes, strict=False)):
        a, b, step = s.indices(ax.length)
        if step != 1:
            raise ValueError(f"{what}: region slices need step 1, got {s} on axis {d}")
        b = max(a, b)
        for pos in (a, b):
            if not ax.is_boundary(pos):
                c = int(ax.chunk_of(np.array(pos)))
                lo = int(ax.offset_of(np.array(c)))
                hi = lo + int(ax.size_of(np.array(c)))
                raise ValueError(
                    f"{what}: region {region} is not aligned to the chunk grid: {pos} on axis "
                    f"{d} is inside the chunk [{lo}, {hi}); expected region boundaries at "
                    f"chunk boundaries such as {lo} or {hi}"
                )
        ca = int(ax.chunk_of(np.array(a))) if a < ax.length else ax.nchunks
        cb = int(ax.chunk_of(np.array(b))) if b < ax.length else ax.nchunks
        c_start.append(ca)
        c_stop.append(cb)
        rshape.append(b - a)
    if tuple(rshape) != tuple(shape):
        raise ValueError(
            f"{what}: data of shape {tuple(shape)} does not match region {region} of shape "
            f"{tuple(rshape)}"
        )
    return tuple(c_start), tuple(c_stop)


@dataclass
class ArrayWritePlan:
    """A validated array write (:func:`plan_array_write`): what its graph
    (:func:`write_plan_graph`) writes and what its commit expects."""

    x: Any
    """The dask array to write, rechunked to the stored grid where needed."""
    store: Store
    node: str
    mode: str
    """The effective mode: ``"w-"``, ``"w"``, ``"a"`` or ``"r+"`` (``"a"`` on a
    missing node is ``"w-"``)."""
    base: ArrayManifest
    """The manifest the write's shards are added to (new, or the current one with the
    new grid and attrs)."""
    offset: tuple[int, ...]
    """Chunk coordinates of the data's first chunk in the stored grid."""
    dtype: np.dtype
    expected: tuple[int, str] | None
    """The (generation, commit) the node must still have at the commit, if any."""
    what: str
    attrs: Mapping[str, Any] | None = None
    """The attributes the write sets (over the stored ones)."""


def write_array(
    x: Any,
    store: Store,
    node: str,
    *,
    shard_size: Any = None,
    compute: bool = True,
    progress: bool = False,
    compact: bool | str = "tiered",
    retries: int = APPEND_RETRIES,
    **plan: Any,
) -> Any:
    """Write the dask array ``x`` to the array node ``node`` (see
    :func:`arrayds.to_arrayrecord`; ``plan``: the keywords of :func:`plan_array_write`,
    ``mode``, ``compression``, ``region``, ``attrs``, ``dims``, ``fill_value``;
    ``compact="tiered"``: an append's commit merges the newest small shards by tiers;
    ``retries``: how often an append whose commit lost the race to another writer's
    is placed after that writer's rows and committed again, :mod:`arrayds.nodes.retry`).
    Returns the committed :class:`Array` or, with ``compute=False``, a
    ``dask.delayed.Delayed`` that writes and commits.

    Two steps: :func:`plan_array_write` checks the arguments against the node,
    :func:`write_plan_graph` builds the graph (shard tasks and the commit).

    >>> import arrayds, dask.array as da
    >>> st = arrayds.open("memory://doc-write-array", mode="w").store
    >>> write_array(da.ones(5, chunks=2), st, "x").chunks
    ((2, 2, 1),)
    """
    retries = check_retries(retries, f"array {store.display(node)!r}")
    planned = plan_array_write(x, store, node, **plan)
    write_id = pending.begin(store, node)  # before any shard: gc keeps them
    commit_task = write_plan_graph(
        planned, shard_size, tiered=compact == "tiered", retries=retries, write_id=write_id
    )
    if not compute:
        return commit_task
    with pending.computing(store, node, write_id, compute):
        return run(commit_task, progress)


def plan_array_write(
    x: Any,
    store: Store,
    node: str,
    *,
    mode: str = "w-",
    compression: str = DEFAULT_COMPRESSION,
    region: Any = None,
    attrs: Mapping[str, Any] | None = None,
    dims: Sequence[str] | None = None,
    fill_value: Any = 0,
) -> ArrayWritePlan:
    """Check a write of the dask array ``x`` to ``node`` (arguments of
    :func:`write_array`) against what is stored, before anything is written; returns
    its plan. Errors: ``FileExistsError`` (mode ``"w-"``), ``FileNotFoundError``
    (``"a"``/``"r+"`` on a missing array), ``ValueError`` for data that does not fit
    the stored array, a region not on chunk boundaries or a non-group parent.

    >>> import arrayds, dask.array as da
    >>> st = arrayds.open("memory://doc-plan-write", mode="w").store
    >>> p = plan_array_write(da.ones((4, 3), chunks=2), st, "x")
    >>> p.mode, p.offset, p.base.grid.chunks
    ('w-', (0, 0), ((2, 2), (2, 1)))
    """
    what = f"array {store.display(node)!r}"
    if mode not in ("w-", "w", "a", "r+"):
        raise ValueError(f"{what}: mode must be one of 'w-', 'w', 'a', 'r+', got {mode!r}")
    dtype = check_dtype(x.dtype, what)
    if any(math.isnan(n) for c in x.chunks for n in c):
        raise ValueError(
            f"{what}: the dask array has unknown chunk sizes; call compute_chunk_sizes()"
        )
    if any(0 in c for c in x.chunks if len(c) > 1):
        x = x.rechunk(tuple(tuple(s for s in c if s) or (0,) for c in x.chunks))
    cur = read_node(store, node)
    eff = "w-" if mode == "a" and cur is None else mode
    if mode == "w-" and cur is not None:
        raise FileExistsError(
            f"{store.display(node)!r} already exists (mode 'w-' never replaces; use mode 'w' to "
            f"replace it, 'a' to append or 'r+' with region= to overwrite part of it)"
        )
    if eff in ("a", "r+"):
        if cur is None:
            raise FileNotFoundError(
                f"{what} does not exist (mode {mode!r} needs an existing array)"
            )
        if not isinstance(cur, ArrayManifest):
            raise ValueError(f"{store.display(node)!r} is a {cur.kind} node, not an array")
    if eff in ("w", "w-"):
        commit.check_parents(store, node)
    if region is not None and eff != "r+":
        raise ValueError(f"{what}: region= needs mode 'r+' (got mode {mode!r})")
    if eff in ("w", "w-"):
        comp = check_compression(compression, what)
        base = ArrayManifest.new(
            x.shape,
            dtype,
            x.chunks,
            fill_value=fill_value,
            compression=comp,
            dims=dims,
            attrs=attrs,
            name=what,
        )
        return ArrayWritePlan(x, store, node, eff, base, (0,) * x.ndim, dtype, None, what, attrs)
    assert isinstance(cur, ArrayManifest)
    return _plan_update(x, store, node, eff, cur, dtype, region, attrs, dims, what)


def _plan_update(
    x: Any,
    store: Store,
    node: str,
    mode: str,
    old: ArrayManifest,
    dtype: np.dtype,
    region: Any,
    attrs: Mapping[str, Any] | None,
    dims: Sequence[str] | None,
    what: str,
) -> ArrayWritePlan:
    """The plan of an append (``"a"``) or region overwrite (``"r+"``) of ``old``."""
    if x.ndim != old.ndim:
        raise ValueError(
            f"{what}: data has {x.ndim} dimensions, the array has {old.ndim} (shape {old.shape})"
        )
    if dtype != old.dtype and not np.can_cast(dtype, old.dtype, "same_kind"):
        raise ValueError(
            f"{what}: data of dtype {dtype} cannot be written to an array of dtype "
            f"{old.dtype} (expected {old.dtype.str} or a dtype of the same kind)"
        )
    if dims is not None and tuple(dims) != old.dims:
        raise ValueError(f"{what}: dims {tuple(dims)} differ from the stored {old.dims}")
    new_attrs = old.attrs if attrs is None else {**old.attrs, **dict(attrs)}
    offset: tuple[int, ...]
    if mode == "a":
        if old.ndim == 0:
            raise ValueError(f"{what}: cannot append to a 0-d array")
        if x.shape[1:] != old.shape[1:]:
            raise ValueError(
                f"{what}: cannot append data of shape {x.shape} along axis 0: expected "
                f"shape (n, {', '.join(map(str, old.shape[1:]))}) to match {old.shape}"
            )
        want = (x.chunks[0],) + old.grid.chunks[1:]
        if tuple(x.chunks) != want:
            x = x.rechunk(want)
        ax0 = old.grid.axes[0]
        offset = (ax0.nchunks,) + (0,) * (old.ndim - 1)
        added = AxisGrid.from_sizes([c for c in x.chunks[0] if c])
        grid = ChunkGrid((ax0.concat(added),) + tuple(old.grid.axes[1:]))
        base = old.with_(grid=grid, attrs=new_attrs)
    else:
        c_start, c_stop = normalize_region(region, old, x.shape, what)
        want = tuple(
            ax.sub(a, b).sizes() or (0,)
            for ax, a, b in zip(old.grid.axes, c_start, c_stop, strict=False)
        )
        if tuple(x.chunks) != want:
            x = x.rechunk(want)
        offset = c_start
        base = old.with_(attrs=new_attrs)
    expected = (old.generation, old.commit)
    return ArrayWritePlan(x, store, node, mode, base, offset, old.dtype, expected, what, attrs)


def write_plan_graph(
    plan: ArrayWritePlan,
    shard_size: Any = None,
    *,
    tiered: bool = True,
    retries: int = APPEND_RETRIES,
    write_id: str | None = None,
) -> Any:
    """The ``dask.delayed.Delayed`` of a planned write: one task per shard
    (:func:`shard_tasks`), one commit task on top of them, the source tasks fused into
    the shard tasks (:func:`arrayds.dask.graph.write_graph`). Nothing runs yet.
    ``tiered``: an append's commit runs the tiered merge; ``retries``: how often an
    append's commit that lost a race is placed after the other writer's rows and tried
    again (as :func:`write_array`'s). ``write_id``: the write's id, whose pending
    marker (:func:`arrayds.nodes.pending.begin`) is put; else a new one is put here.

    >>> import arrayds, dask.array as da
    >>> st = arrayds.open("memory://doc-plan-graph", mode="w").store
    >>> d = write_plan_graph(plan_array_write(da.ones(4, chunks=2), st, "x"))
    >>> d.compute().shape
    (4,)
    """
    from dask.delayed import Delayed

    store = plan.store
    write_id = write_id or pending.begin(store, plan.node)  # before any shard: gc keeps them
    name = f"arrayds-write-{write_id}"
    layer: dict[Any, Any] = {}
    y, shard_keys = shard_tasks(
        plan.x,
        store,
        plan.node,
        write_id,
        plan.offset,
        plan.dtype,
        writer_options(plan.base.compression),
        shard_size,
        plan.what,
        f"arrayds-shard-{write_id}",
        layer,
    )
    commit_key = f"arrayds-commit-{write_id}"
    hide = None
    if plan.mode == "r+" and shard_keys:
        x = plan.x
        step = box_step(x.numblocks, x.chunks, plan.dtype.itemsize, shard_size, plan.what)
        stop = [o + n for o, n in zip(plan.offset, x.numblocks, strict=True)]
        hide = (list(plan.offset), stop, step)
    cjob = CommitJob(
        url=store.url,
        storage_options=store.storage_options,
        node=plan.node,
        mode=plan.mode,
        base=plan.base.header_json(),
        expected=plan.expected,
        write_id=write_id,
        tiered=tiered,
        retries=check_retries(retries, plan.what),
        first=plan.offset[0] if plan.offset else 0,
        attrs=None if plan.attrs is None else dict(plan.attrs),
        hide=hide,
    )
    if len(shard_keys) > history.SEGMENT_LIMIT:
        # the workers write the entries as segments and the commit receives their
        # references only
        seg_keys = []
        for i in range(0, len(shard_keys), history.SEGMENT_LIMIT):
            seg_keys.append(f"arrayds-segment-{write_id}-{len(seg_keys)}")
            layer[seg_keys[-1]] = (
                _segment_task,
                cjob,
                shard_keys[i : i + history.SEGMENT_LIMIT],
            )
        layer[commit_key] = (_commit_segments_task, cjob, seg_keys)
    else:
        layer[commit_key] = (_commit_task, cjob, shard_keys)
    return Delayed(commit_key, write_graph([y], name, layer), layer=name)


def _shard_job(
    store: Store,
    node: str,
    write_id: str,
    n: int,
    options: str,
    dtype: np.dtype,
    chunks: Sequence[Sequence[int]],
    bstart: Sequence[int],
    bstop: Sequence[int],
    offset: Sequence[int],
    what: str,
) -> ShardJob:
    """The job of shard ``n`` (``c/<write_id>-<n>``): the blocks ``[bstart, bstop)``
    of a grid chunked by ``chunks``, placed at chunk ``offset`` of the stored grid."""
    return ShardJob(
        url=store.url,
        storage_options=store.storage_options,
        node=node,
        relpath=shard_name(write_id, n, folder=SHARD_DIR),
        options=options,
        dtype=dtype.str,
        box_sizes=[
            list(chunks[d][a:b]) for d, (a, b) in enumerate(zip(bstart, bstop, strict=True))
        ],
        start=[a + o for a, o in zip(bstart, offset, strict=True)],
        stop=[b + o for b, o in zip(bstop, offset, strict=True)],
        what=what,
    )


def shard_tasks(
    x: Any,
    store: Store,
    node: str,
    write_id: str,
    offset: Sequence[int],
    dtype: np.dtype,
    options: str,
    shard_size: int | str | None,
    what: str,
    key_prefix: str,
    layer: dict[Any, Any],
    optimize: bool = True,
) -> tuple[Any, list[str]]:
    """Add one task per shard file of ``x`` to ``layer``, without a commit: the blocks
    grouped by :func:`group_blocks`, each shard named ``c/<write_id>-<n>`` under
    ``node`` and placed at chunk ``offset`` of the stored grid. Returns the optimized
    collection the tasks depend on (``None`` when nothing is written) and the task
    keys ``<key_prefix>-<n>``, whose results are the shards' manifest entries. Array
    writes (:func:`write_array`) and xarray dataset writes share it; each adds its own
    commit task. ``optimize=False``: ``x`` is already optimized (the xarray writer
    optimizes all variables together, so an input they share stays one task).
    """
    boxes = group_blocks(x.numblocks, x.chunks, dtype.itemsize, shard_size, what)
    if not boxes or not x.size:
        return None, []
    y, keys = block_keys(x, optimize)
    out = []
    for n, (bstart, bstop) in enumerate(boxes):
        box = tuple(slice(a, b) for a, b in zip(bstart, bstop, strict=True))
        job = _shard_job(
            store, node, write_id, n, options, dtype, x.chunks, bstart, bstop, offset, what
        )
        key = f"{key_prefix}-{n}"
        layer[key] = (_write_shard_task, job, list(keys[box + (Ellipsis,)].reshape(-1)))
        out.append(key)
    return y, out


def write_shards_now(
    values: np.ndarray,
    chunks: Sequence[Sequence[int]],
    store: Store,
    node: str,
    write_id: str,
    offset: Sequence[int],
    dtype: np.dtype,
    options: str,
    shard_size: int | str | None,
    what: str,
    first: int = 0,
) -> list[Callable[[], dict[str, Any]]]:
    """The shard writes :func:`shard_tasks` would add for the in-memory ``values``
    chunked by ``chunks``, as calls to run in the caller (no graph: a small write
    costs no scheduler), which then commits them itself: their data is synced in the
    background until that commit (``defer_sync``). Each returns its shard's manifest
    entry; the shards are numbered from ``first``."""
    numblocks = tuple(len(c) for c in chunks)
    boxes = group_blocks(numblocks, chunks, dtype.itemsize, shard_size, what)
    if not boxes or not values.size:
        return []
    bounds = [np.concatenate([[0], np.cumsum(c)]).astype(int).tolist() for c in chunks]
    calls = []
    for n, (bstart, bstop) in enumerate(boxes, start=first):
        job = _shard_job(
            store, node, write_id, n, options, dtype, chunks, bstart, bstop, offset, what
        )
        blocks = (
            values[tuple(slice(bounds[d][i], bounds[d][i + 1]) for d, i in enumerate(idx))]
            for idx in itertools.product(*(range(a, b) for a, b in zip(bstart, bstop, strict=True)))
        )
        calls.append(functools.partial(_write_shard_task, job, blocks, defer_sync=True))
    return calls


# ----------------------------------------------------------------------- read
