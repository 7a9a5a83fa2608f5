"""Dask arrays <-> array nodes (API.md section 3, arrays).

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

import itertools
import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..array import Array, stack_entries
from ..dataset import _read_node, _remove_node_contents, check_parents, ensure_parents
from ..grid import AxisGrid, ChunkGrid
from ..manifest import (
    ArrayManifest,
    CommitConflictError,
    ShardEntry,
    check_compression,
    writer_options,
)
from ..storage import get_store
from ..store import SHARD_DIR, SHARD_SUFFIX, Store, new_write_id
from ..tensor import check_dtype, encode_chunk

__all__ = [
    "AUTO_SHARD_BYTES",
    "ArraySource",
    "array_to_dask",
    "group_blocks",
    "joint_graph",
    "read_chunks",
    "write_array",
    "write_graph",
]

AUTO_SHARD_BYTES = 16 << 20
"""Default shard target: a block this large is its own shard; smaller blocks are
grouped up to this size."""

ZERO_COPY_BLOCKS = False
"""Kept for compatibility; no effect. A dask block that is exactly one stored chunk is
always decoded by the engine into a new writable buffer and returned without a copy."""


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
    ndim = len(numblocks)
    if any(n == 0 for n in numblocks):
        return []
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
    boxes = []
    for start in itertools.product(*(range(0, n, s) for n, s in zip(numblocks, g, strict=False))):
        stop = tuple(min(a + s, n) for a, s, n in zip(start, g, numblocks, strict=False))
        boxes.append((tuple(start), stop))
    return boxes


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
    """What the commit task needs besides the shard entries."""

    __slots__ = ("url", "storage_options", "node", "mode", "base", "expected", "write_id")

    def __init__(self, **kw: Any) -> None:
        for k in self.__slots__:
            setattr(self, k, kw[k])

    def __reduce__(self) -> tuple[Any, ...]:
        return (_make_job, (CommitJob, {k: getattr(self, k) for k in self.__slots__}))


def _make_job(cls: Any, kw: dict[str, Any]) -> Any:
    return cls(**kw)


def _write_shard_task(job: ShardJob, blocks: Iterable[Any]) -> dict[str, Any]:
    """Encode a box of blocks (C order; a list, or an iterator that makes each block
    when it is taken) as one shard; return its manifest entry."""
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

    nbytes = store.write_shard(job.node, job.relpath, records(), job.options)
    return ShardEntry(job.relpath, tuple(job.start), tuple(job.stop), 0, nbytes).to_json()


def _refuse_committed_shard(store: Store, job: ShardJob) -> None:
    """Shards are immutable: a shard task may rewrite its file only while no manifest
    references it (a retried task after a lost worker). Computing the same
    ``compute=False`` write again after it committed would overwrite committed data."""
    if not store.exists(job.node, job.relpath):
        return
    cur = _read_node(store, job.node)
    if isinstance(cur, ArrayManifest) and any(e.path == job.relpath for e in cur.shards):
        raise RuntimeError(
            f"{job.what}: this write already committed shard {job.relpath!r}; a write "
            f"computes once (call to_arrayrecord again to write the data again)"
        )


def _commit_task(job: CommitJob, entries: list[dict[str, Any]]) -> Array:
    """Check the node is as the graph expects, then write the manifest (atomic)."""
    store = get_store(job.url, job.storage_options)
    node, mode, expected = job.node, job.mode, job.expected
    what = f"array {store.display(node)!r}"
    m = ArrayManifest.from_json(job.base, what)
    new = [
        ShardEntry(e["path"], tuple(e["start"]), tuple(e["stop"]), 0, e.get("bytes"))
        for e in entries
    ]
    cur = _read_node(store, node)
    if mode == "w-" and cur is not None:
        raise FileExistsError(
            f"{what} was created by another writer while this write ran (mode 'w-'); "
            f"nothing of this write is visible"
        )
    if expected is not None:
        if not isinstance(cur, ArrayManifest) or (cur.generation, cur.commit) != tuple(expected):
            got = getattr(cur, "generation", None)
            raise CommitConflictError(
                f"{what}: another writer committed (generation {got}) after this write "
                f"started from generation {expected[0]}; nothing of this write is visible"
            )
    if mode in ("w", "w-"):
        ensure_parents(store, node)
    gen = (cur.generation + 1) if cur is not None else 1
    final = m.with_(shards=stack_entries(m.shards, new), generation=gen, commit=job.write_id)
    store.write_manifest(node, final.to_json())
    if mode == "w" and cur is not None:
        keep = frozenset(e.path for e in new)
        _remove_node_contents(store, node, cur, only_listed_shards=True, keep=keep)
    return Array(store, node, final, "r")


# ---------------------------------------------------------------------- write


def _block_keys(x: Any, optimize: bool = True) -> tuple[Any, np.ndarray]:
    """The optimized collection (``x`` itself with ``optimize=False``) and its block
    keys as an object array shaped like the block grid (collection protocol only:
    works with array query planning too)."""
    import dask

    (y,) = dask.optimize(x) if optimize else (x,)
    keys = np.empty(y.numblocks, dtype=object)
    raw = y.__dask_keys__()
    if not y.numblocks and isinstance(raw, list):  # 0-d: [(name,)]
        raw = raw[0]
    flat = list(_flatten(raw, len(y.numblocks)))
    for i, k in enumerate(flat):
        keys.flat[i] = k
    return y, keys


def _flatten(keys: Any, depth: int) -> Any:
    if depth == 0:
        yield keys
        return
    for k in keys:
        yield from _flatten(k, depth - 1)


def joint_graph(xs: Sequence[Any]) -> dict[Any, Any] | None:
    """The graph of the collections ``xs`` optimized together (as ``dask.compute(*xs)``
    would), keeping their output keys; ``None`` when dask cannot do that here (the
    output keys changed, e.g. under array query planning). ``dask.optimize(*xs)``
    optimizes each collection on its own, which copies an input several of them share
    into each (computed once per collection).

    >>> import dask.array as da
    >>> x = da.ones(4, chunks=2)
    >>> g = joint_graph([x, x * 2])
    >>> sorted({k[0].split("-")[0] for k in g})  # x's blocks once, used by both
    ['mul', 'ones_like']
    """
    try:
        from dask.base import collections_to_expr

        g = dict(collections_to_expr(list(xs), True).optimize().__dask_graph__())
    except Exception:  # noqa: BLE001 - a later dask without this internal (dask.base,
        return None  # not documented; in dask >= 2025.4, the floor): optimize one by one
    for x in xs:
        if not all(k in g for k in _flatten(x.__dask_keys__(), len(x.numblocks) or 1)):
            return None
    return g


def write_graph(
    ys: Sequence[Any], name: str, layer: dict[Any, Any], source: Mapping[Any, Any] | None = None
) -> Any:
    """The graph of a write: the tasks of ``layer`` (shard tasks and a commit, keyed by
    strings) on top of the graphs of the collections ``ys`` (``None`` entries are
    skipped), with every source task fused into the one ``layer`` task that needs it.

    A source task whose result only one shard task needs (directly or through other
    such tasks) runs inside that shard task, so on a cluster a shard's blocks are
    computed where they are written and no block travels between workers. A source
    task needed by two or more shard tasks (a shared input: a big array passed by
    reference, a rechunk's split piece feeding two shards, a reduction) stays a task
    of its own, computed once; the shard tasks depend on it. So a write of generated
    data is one task per shard plus the commit. Works with dask's legacy tuple tasks,
    its task spec and array query planning (only the collection protocol is used).
    ``source``: the source graph to use instead of the graphs of ``ys``
    (:func:`joint_graph`).

    >>> import dask.array as da
    >>> from dask.local import get_sync
    >>> x = da.ones(4, chunks=2)  # two blocks, both needed by task "s" only
    >>> g = write_graph([x], "w", {"s": (sum, x.__dask_keys__())})
    >>> list(dict(g)), get_sync(g, "s").tolist()
    (['s'], [2.0, 2.0])
    """
    # dask's task spec is private and has no public counterpart: dask >= 2025.1 has all
    # of it used here (Task's _data_producer), and the floor is tested (make test-floors)
    from dask._task_spec import Task, TaskRef, convert_legacy_graph
    from dask.highlevelgraph import HighLevelGraph

    src: dict[Any, Any] = dict(source) if source is not None else {}
    for y in ys if source is None else ():
        if y is not None:
            src.update(y.__dask_graph__())
    if not src:
        return HighLevelGraph({name: layer}, {name: set()})
    tasks = convert_legacy_graph({**src, **layer})
    shared = object()
    owner: dict[Any, Any] = {}
    roots = [k for k in layer if k in tasks]
    for root in roots:
        stack = [d for d in tasks[root].dependencies if d in src and d not in layer]
        while stack:
            k = stack.pop()
            o = owner.get(k)
            if o is root or o is shared:
                continue  # seen from this root, or already marked shared with its inputs
            owner[k] = root if o is None else shared
            stack.extend(d for d in tasks[k].dependencies if d in src)
    owned: dict[Any, list[Any]] = {}
    common: dict[Any, Any] = {}
    for k, o in owner.items():
        if o is shared:
            common[k] = tasks[k]
        else:
            owned.setdefault(o, []).append(tasks[k])
    fused: dict[Any, Any] = {}
    for k in layer:
        inner = owned.get(k)
        spec = layer[k]
        stream = spec if isinstance(spec, tuple) and spec[0] is _write_shard_task else None
        fused[k] = _fuse(tasks[k], inner, Task, TaskRef, stream) if inner else tasks[k]
    if not common:
        return HighLevelGraph({name: fused}, {name: set()})
    src_name = name + "-shared"
    return HighLevelGraph({src_name: common, name: fused}, {src_name: set(), name: {src_name}})


class _Fused:
    """The inner tasks of a fused shard task in execution order (depth first from the
    shard task, so a block is made right before it is needed), each with the keys it
    is the last user of; ``inputs``: the keys of the outer dependencies. ``stream``:
    for a shard write, ``(function, job, block keys)``: the function gets its blocks
    as an iterator that makes each one when the writer takes it (and drops it once
    taken), so a shard task never holds all its blocks at once; ``keep``: the block
    keys an inner task still needs after the writer took them."""

    __slots__ = ("steps", "inputs", "stream", "keep")

    def __init__(
        self,
        steps: list[tuple[Any, tuple[Any, ...]]],
        inputs: tuple[Any, ...],
        stream: tuple[Any, Any, list[Any]] | None = None,
        keep: frozenset[Any] = frozenset(),
    ) -> None:
        self.steps = steps
        self.inputs = inputs
        self.stream = stream
        self.keep = keep

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Fused, (self.steps, self.inputs, self.stream, self.keep))


def _run_fused(fused: _Fused, *values: Any) -> Any:
    """Run the inner tasks of a fused shard task; return the shard task's result.
    (dask's own ``Task.fuse`` orders the inner graph with ``dask.order`` on every
    run, a third of the CPU of a shard of 1024 small blocks.)"""
    cache = dict(zip(fused.inputs, values, strict=True))
    if fused.stream is not None:
        func, job, keys = fused.stream
        return func(job, _stream_blocks(fused, cache, keys))
    node = None
    for node, done in fused.steps:
        cache[node.key] = node(cache)
        for k in done:
            del cache[k]
    assert node is not None
    return cache[node.key]


def _stream_blocks(fused: _Fused, cache: dict[Any, Any], keys: list[Any]) -> Iterator[Any]:
    """The blocks ``keys`` of a streaming fused task, each made (with what it needs)
    when it is asked for and forgotten once handed over."""
    steps = iter(fused.steps[:-1])  # the last step is the shard task itself
    for key in keys:
        while key not in cache:
            node, done = next(steps)
            cache[node.key] = node(cache)
            for k in done:
                del cache[k]
        yield cache[key] if key in fused.keep else cache.pop(key)


def _fuse(
    root: Any, inner: list[Any], task_cls: Any, ref_cls: Any, stream: tuple[Any, ...] | None = None
) -> Any:
    """One task with the key of ``root`` running ``inner`` (tasks only ``root`` needs,
    directly or not) and then ``root``; its dependencies are the outer keys any of
    them needs. ``stream``: ``root``'s own task tuple ``(_write_shard_task, job,
    block keys)``, whose blocks are then made one by one as the writer takes them
    (in the order of the keys)."""
    nodes = {t.key: t for t in inner}
    nodes[root.key] = root
    order: list[Any] = []
    state: dict[Any, bool] = {}  # False: children pushed; True: placed in order
    stack = [root.key]
    while stack:
        k = stack[-1]
        if k not in state:
            state[k] = False
            deps = reversed(stream[2]) if stream is not None and k == root.key else None
            deps = nodes[k].dependencies if deps is None else deps
            stack.extend(d for d in deps if d in nodes and d not in state)
        else:
            stack.pop()
            if not state[k]:
                state[k] = True
                order.append(k)
    outer = sorted({d for t in nodes.values() for d in t.dependencies if d not in nodes}, key=str)
    last: dict[Any, int] = {}
    for i, k in enumerate(order):
        for d in nodes[k].dependencies:
            last[d] = i
    done: list[list[Any]] = [[] for _ in order]
    for d, i in last.items():
        done[i].append(d)
    steps = [(nodes[k], tuple(done[i])) for i, k in enumerate(order)]
    fused = _Fused(steps, tuple(outer))
    if stream is not None:
        # blocks still needed after the writer took them: inputs of inner tasks, and
        # keys listed twice
        keep = {d for k in order[:-1] for d in nodes[k].dependencies} & set(stream[2])
        keep |= {k for k, n in Counter(stream[2]).items() if n > 1}
        fused = _Fused(steps, tuple(outer), stream, frozenset(keep))
    return task_cls(
        root.key,
        _run_fused,
        fused,
        *(ref_cls(d) for d in outer),
        _data_producer=any(t.data_producer for t in nodes.values()),
    )


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


def write_array(
    x: Any,
    store: Store,
    node: str,
    *,
    mode: str = "w-",
    compression: str = "zstd:3",
    shard_size: Any = None,
    region: Any = None,
    attrs: Mapping[str, Any] | None = None,
    dims: Sequence[str] | None = None,
    fill_value: Any = 0,
    compute: bool = True,
    progress: bool = False,
) -> Any:
    """Write the dask array ``x`` to the array node ``node`` (see
    :func:`arrayds.to_arrayrecord`). Returns the committed :class:`Array` or, with
    ``compute=False``, a ``dask.delayed.Delayed`` that writes and commits."""

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
    cur = _read_node(store, node)
    eff = mode
    if mode == "a" and cur is None:
        eff = "w-"
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
        check_parents(store, node)
    if region is not None and eff != "r+":
        raise ValueError(f"{what}: region= needs mode 'r+' (got mode {mode!r})")

    offset: tuple[int, ...]
    expected: tuple[int, str] | None = None
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
        offset = (0,) * x.ndim
    else:
        assert isinstance(cur, ArrayManifest)
        old = cur
        expected = (old.generation, old.commit)
        if x.ndim != old.ndim:
            raise ValueError(
                f"{what}: data has {x.ndim} dimensions, the array has {old.ndim} (shape "
                f"{old.shape})"
            )
        if dtype != old.dtype and not np.can_cast(dtype, old.dtype, "same_kind"):
            raise ValueError(
                f"{what}: data of dtype {dtype} cannot be written to an array of dtype "
                f"{old.dtype} (expected {old.dtype.str} or a dtype of the same kind)"
            )
        if dims is not None and tuple(dims) != old.dims:
            raise ValueError(f"{what}: dims {tuple(dims)} differ from the stored {old.dims}")
        new_attrs = old.attrs if attrs is None else {**old.attrs, **dict(attrs)}
        if eff == "a":
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
        dtype = old.dtype

    write_id = new_write_id()
    from dask.delayed import Delayed

    name = f"arrayds-write-{write_id}"
    layer: dict[Any, Any] = {}
    y, shard_keys = shard_tasks(
        x,
        store,
        node,
        write_id,
        offset,
        dtype,
        writer_options(base.compression),
        shard_size,
        what,
        f"arrayds-shard-{write_id}",
        layer,
    )
    commit_key = f"arrayds-commit-{write_id}"
    cjob = CommitJob(
        url=store.url,
        storage_options=store.storage_options,
        node=node,
        mode=eff,
        base=base.to_json(),
        expected=expected,
        write_id=write_id,
    )
    layer[commit_key] = (_commit_task, cjob, shard_keys)
    commit = Delayed(commit_key, write_graph([y], name, layer), layer=name)
    if not compute:
        return commit
    return run(commit, progress)


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
    y, keys = _block_keys(x, optimize)
    out = []
    for n, (bstart, bstop) in enumerate(boxes):
        box = tuple(slice(a, b) for a, b in zip(bstart, bstop, strict=True))
        job = ShardJob(
            url=store.url,
            storage_options=store.storage_options,
            node=node,
            relpath=f"{SHARD_DIR}/{write_id}-{n}{SHARD_SUFFIX}",
            options=options,
            dtype=dtype.str,
            box_sizes=[list(x.chunks[d][sl.start : sl.stop]) for d, sl in enumerate(box)],
            start=[a + o for a, o in zip(bstart, offset, strict=True)],
            stop=[b + o for b, o in zip(bstop, offset, strict=True)],
            what=what,
        )
        key = f"{key_prefix}-{n}"
        layer[key] = (_write_shard_task, job, list(keys[box + (Ellipsis,)].reshape(-1)))
        out.append(key)
    return y, out


def run(obj: Any, progress: bool) -> Any:
    """Compute ``obj`` under the shared progress rule (:mod:`arrayds.progress`): a bar
    only on a terminal; dask's ProgressBar locally, distributed's under a Client."""
    from ..progress import compute

    return compute(obj, progress=progress)


# ----------------------------------------------------------------------- read


class ArraySource:
    """What ``dask.array.from_array`` slices: reads a box of whole chunks with one
    batched engine read per shard. Pickles as the array's URL plus its manifest
    snapshot; a worker process rebuilds it once and reuses its cached shard readers.
    """

    __slots__ = ("_a", "shape", "dtype", "ndim")

    def __init__(self, a: Array) -> None:
        self._a = a
        self.shape = a.shape
        self.dtype = a.dtype
        self.ndim = a.ndim

    def __getitem__(self, key: tuple[slice, ...]) -> np.ndarray:
        return self._a._read_block(key, zero_copy=ZERO_COPY_BLOCKS)

    def __dask_tokenize__(self) -> tuple[Any, ...]:
        a = self._a
        return ("arrayds", a.store.canonical_url, a.path, a.generation, a.manifest.commit)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ArraySource, (self._a,))

    def __repr__(self) -> str:
        return f"ArraySource({self._a!r})"


def _snap(bounds: np.ndarray, stored: np.ndarray) -> np.ndarray:
    idx = np.searchsorted(stored, bounds, side="right") - 1
    return np.unique(np.concatenate([[stored[0]], stored[idx], [stored[-1]]]))


def read_chunks(a: Array, chunks: Any = None) -> tuple[tuple[int, ...], ...]:
    """The dask chunks for reading ``a``: the stored grid (``None``), one block per
    shard box (``"shards"``), ``"auto"`` (dask's size target, snapped to whole
    stored chunks) or an explicit spec whose boundaries must be stored chunk
    boundaries (``ValueError`` naming the expected boundaries otherwise)."""
    grid = a.grid
    what = a._what
    if chunks is None:
        return grid.chunks
    if any(ax.length == 0 for ax in grid.axes):
        return grid.chunks
    if isinstance(chunks, str) and chunks == "shards":
        out = []
        table = a.manifest.table
        for d, ax in enumerate(grid.axes):
            cb = np.unique(np.concatenate([table.starts[:, d], table.stops[:, d], [0, ax.nchunks]]))
            eb = np.unique(np.concatenate([ax.offset_of(cb[cb < ax.nchunks]), [ax.length]]))
            out.append(tuple(int(s) for s in np.diff(eb)))
        return tuple(out)
    from dask.array.core import normalize_chunks

    if isinstance(chunks, str) and chunks == "auto":
        req = normalize_chunks(
            "auto", a.shape, dtype=a.dtype, previous_chunks=tuple(max(1, c) for c in a.chunk_shape)
        )
        out = []
        for ax, cs in zip(grid.axes, req, strict=False):
            bounds = np.concatenate([[0], np.cumsum(cs)])
            eb = _snap(bounds, ax.boundaries())
            out.append(tuple(int(s) for s in np.diff(eb)))
        return tuple(out)
    req = normalize_chunks(chunks, a.shape, dtype=a.dtype)
    for d, (ax, cs) in enumerate(zip(grid.axes, req, strict=False)):
        bounds = np.cumsum(cs)[:-1]
        for b in bounds.tolist():
            if not ax.is_boundary(int(b)):
                c = int(ax.chunk_of(np.array(b)))
                lo = int(ax.offset_of(np.array(c)))
                hi = lo + int(ax.size_of(np.array(c)))
                raise ValueError(
                    f"{what}: chunks={chunks!r} puts a block boundary at {b} on axis {d}, inside "
                    f"the stored chunk [{lo}, {hi}); blocks must be whole multiples of the stored "
                    f"chunks {a.chunk_shape} (boundaries such as {lo} or {hi})"
                )
    return tuple(tuple(int(s) for s in cs) for cs in req)


def array_to_dask(a: Array, chunks: Any = None, name: str | None = None) -> Any:
    """A ``dask.array.Array`` over ``a`` (public ``from_array`` only, so it works
    with and without array query planning)."""
    import dask.array as da
    from dask.base import tokenize

    dchunks = read_chunks(a, chunks)
    src = ArraySource(a)
    if name is None:
        name = "from-arrayrecord-" + tokenize(src, dchunks)
    return da.from_array(
        src,
        chunks=dchunks,
        name=name,
        lock=False,
        asarray=False,
        fancy=False,
        inline_array=False,
        meta=np.empty((0,) * a.ndim, dtype=a.dtype),
    )
