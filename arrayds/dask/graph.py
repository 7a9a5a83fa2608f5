"""Generic dask graph helpers for writes: block keys, joint optimization, and the
fusion of source tasks into the task that consumes them (:func:`write_graph`).

Nothing here knows arrays or shards: a write hands :func:`write_graph` a layer of its
own tasks (keyed by strings) on top of the dask collections it reads. A task whose
function is marked with :func:`streams_blocks` (``(function, job, block keys)``) gets
its blocks as an iterator that makes each block when it is taken
(:func:`stream_blocks`), so such a task never holds all its blocks at once.
:mod:`arrayds.kinds.array.dask` (arrays) and :mod:`arrayds.xarray` (datasets, trees) build
their shard and commit tasks on these. :func:`write_bag` is the graph of a write of a
dask bag (records, ragged arrays): one shard task per partition, then one commit.

>>> import dask.array as da
>>> from dask.local import get_sync
>>> x = da.arange(6, chunks=2)
>>> y, keys = block_keys(x)
>>> g = write_graph([y], "w", {"total": (sum, list(keys))})
>>> int(sum(get_sync(g, "total")))
15
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from ..progress import compute

__all__ = [
    "Fused",
    "bag_writes",
    "block_keys",
    "commit_after",
    "flatten_keys",
    "fuse",
    "joint_graph",
    "run",
    "run_fused",
    "stream_blocks",
    "streams_blocks",
    "write_bag",
    "write_graph",
]

STREAMS = "__arrayds_streams_blocks__"
"""The attribute :func:`streams_blocks` sets on a task function."""

F = TypeVar("F", bound=Callable[..., Any])


def streams_blocks(func: F) -> F:
    """Mark ``func(job, blocks)`` as a task that takes its blocks (the task tuple
    ``(func, job, block keys)``) as an iterator: once :func:`write_graph` fused the
    blocks' tasks into it, each block is made when ``func`` takes it and dropped once
    taken.

    >>> @streams_blocks
    ... def total(job, blocks):
    ...     return sum(blocks)
    >>> getattr(total, STREAMS)
    True
    """
    setattr(func, STREAMS, True)
    return func


def block_keys(x: Any, optimize: bool = True) -> tuple[Any, np.ndarray]:
    """The optimized collection (``x`` itself with ``optimize=False``) and its block
    keys as an object array shaped like the block grid (collection protocol only:
    works with array query planning too)."""
    import dask

    (y,) = dask.optimize(x) if optimize else (x,)
    keys = np.empty(y.numblocks, dtype=object)
    raw = y.__dask_keys__()
    if not y.numblocks and isinstance(raw, list):  # 0-d: [(name,)]
        raw = raw[0]
    flat = list(flatten_keys(raw, len(y.numblocks)))
    for i, k in enumerate(flat):
        keys.flat[i] = k
    return y, keys


def flatten_keys(keys: Any, depth: int) -> Iterator[Any]:
    """The keys of a collection's nested ``__dask_keys__`` lists, ``depth`` levels
    deep, in C order.

    >>> list(flatten_keys([[("x", 0, 0), ("x", 0, 1)]], 2))
    [('x', 0, 0), ('x', 0, 1)]
    """
    if depth == 0:
        yield keys
        return
    for k in keys:
        yield from flatten_keys(k, depth - 1)


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
        if not all(k in g for k in flatten_keys(x.__dask_keys__(), len(x.numblocks) or 1)):
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
        stream = spec if isinstance(spec, tuple) and getattr(spec[0], STREAMS, False) else None
        fused[k] = fuse(tasks[k], inner, Task, TaskRef, stream) if inner else tasks[k]
    if not common:
        return HighLevelGraph({name: fused}, {name: set()})
    src_name = name + "-shared"
    return HighLevelGraph({src_name: common, name: fused}, {src_name: set(), name: {src_name}})


class Fused:
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
        return (Fused, (self.steps, self.inputs, self.stream, self.keep))


def run_fused(fused: Fused, *values: Any) -> Any:
    """Run the inner tasks of a fused shard task; return the shard task's result.
    (dask's own ``Task.fuse`` orders the inner graph with ``dask.order`` on every
    run, a third of the CPU of a shard of 1024 small blocks.)"""
    cache = dict(zip(fused.inputs, values, strict=True))
    if fused.stream is not None:
        func, job, keys = fused.stream
        return func(job, stream_blocks(fused, cache, keys))
    node = None
    for node, done in fused.steps:
        cache[node.key] = node(cache)
        for k in done:
            del cache[k]
    assert node is not None
    return cache[node.key]


def stream_blocks(fused: Fused, cache: dict[Any, Any], keys: list[Any]) -> Iterator[Any]:
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


def fuse(
    root: Any, inner: list[Any], task_cls: Any, ref_cls: Any, stream: tuple[Any, ...] | None = None
) -> Any:
    """One task with the key of ``root`` running ``inner`` (tasks only ``root`` needs,
    directly or not) and then ``root``; its dependencies are the outer keys any of
    them needs. ``stream``: ``root``'s own task tuple ``(function, job, block keys)``
    (a :func:`streams_blocks` function), whose blocks are then made one by one as the
    function takes them (in the order of the keys)."""
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
    fused = Fused(steps, tuple(outer))
    if stream is not None:
        # blocks still needed after the writer took them: inputs of inner tasks, and
        # keys listed twice
        keep = {d for k in order[:-1] for d in nodes[k].dependencies} & set(stream[2])
        keep |= {k for k, n in Counter(stream[2]).items() if n > 1}
        fused = Fused(steps, tuple(outer), stream, frozenset(keep))
    return task_cls(
        root.key,
        run_fused,
        fused,
        *(ref_cls(d) for d in outer),
        _data_producer=any(t.data_producer for t in nodes.values()),
    )


def run(obj: Any, progress: bool, scheduler: Any = None) -> Any:
    """Compute ``obj`` under the shared progress rule (:mod:`arrayds.progress`): a bar
    only on a terminal; dask's ProgressBar locally, distributed's under a Client.
    ``scheduler``: as ``dask.compute``'s (``None``: dask's default for ``obj``)."""

    return compute(obj, progress=progress, scheduler=scheduler)


def commit_after(
    writes: Sequence[Any],
    commit: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    key: str,
    compute: bool = True,
    progress: bool = False,
    scheduler: Any = None,
) -> Any:
    """One commit task ``commit(results, *args)`` keyed ``key``, where ``results`` is the
    list of the results of the ``dask.delayed.Delayed`` values ``writes`` in their
    order; computed (:func:`run`) and its result returned, or with ``compute=False`` the
    ``Delayed`` of the commit. The commit runs only once every write succeeded.

    >>> import dask
    >>> writes = [dask.delayed(len)(s) for s in ("ab", "c")]
    >>> commit_after(writes, sum, (), key="c", progress=False)
    3
    >>> commit_after(writes, sum, (), key="c", compute=False).key
    'c'
    """
    from dask.delayed import delayed

    committed = delayed(commit, pure=False)(list(writes), *args, dask_key_name=key)
    if not compute:
        return committed
    return run(committed, progress, scheduler)


def bag_writes(
    bag: Any, write_partition: Callable[..., Any], args: tuple[Any, ...], *, name: str
) -> tuple[list[Any], Any]:
    """The partition tasks of :func:`write_bag` without its commit: the
    ``dask.delayed.Delayed`` of task ``(name, k)``, ``write_partition(items, k, *args)``
    on the items of partition ``k`` (fused with the bag's own tasks), in partition
    order, and the bag's scheduler (for a writer that commits through tasks of its
    own, such as a records write of many partitions).

    >>> import dask.bag as db
    >>> def part(items, k):
    ...     return (k, sum(items))
    >>> writes, _ = bag_writes(db.from_sequence(range(4), npartitions=2), part, (), name="w")
    >>> [w.compute(scheduler="sync") for w in writes]
    [(0, 1), (1, 5)]
    """
    import dask.bag as db
    from dask.base import get_scheduler
    from dask.highlevelgraph import HighLevelGraph

    total = bag.npartitions
    layer = {(name, k): (write_partition, (bag.name, k), k, *args) for k in range(total)}
    graph = HighLevelGraph.from_collections(name, layer, dependencies=[bag])
    writes = db.Bag(graph, name, total).to_delayed(optimize_graph=True)
    return writes, get_scheduler(collections=[bag])


def write_bag(
    bag: Any,
    write_partition: Callable[..., Any],
    args: tuple[Any, ...],
    commit: Callable[..., Any],
    commit_args: tuple[Any, ...],
    *,
    name: str,
    commit_key: str,
    compute: bool = True,
    progress: bool = False,
) -> Any:
    """The write of the dask bag ``bag``: task ``(name, k)`` runs
    ``write_partition(items, k, *args)`` on the items of partition ``k`` (fused with the
    bag's own tasks, so it is one task per partition and a partition never travels
    between workers), then one commit task (:func:`commit_after`) gets the list of their
    results in partition order. Runs on the bag's scheduler; with ``compute=False``
    returns the ``dask.delayed.Delayed`` of the commit, else the commit's result. A
    failing partition fails the write before the commit runs.

    >>> import dask, dask.bag as db
    >>> bag = db.from_sequence(range(6), npartitions=3).map(lambda i: i * 10)
    >>> def part(items, k):
    ...     return (k, sum(items))
    >>> with dask.config.set(scheduler="sync"):
    ...     write_bag(bag, part, (), list, (), name="w", commit_key="c")
    [(0, 10), (1, 50), (2, 90)]
    """
    writes, scheduler = bag_writes(bag, write_partition, args, name=name)
    return commit_after(
        writes,
        commit,
        commit_args,
        key=commit_key,
        compute=compute,
        progress=progress,
        scheduler=scheduler,
    )
