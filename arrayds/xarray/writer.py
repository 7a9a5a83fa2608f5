"""Writing xarray datasets: ``arrayds.to_arrayrecord(ds, url, ...)`` (docs/xarray.md).

A dataset becomes a group node with one array node per variable (docs/spec.md,
"Xarray datasets"). Variables are CF-encoded by xarray's own encoder (times ->
numbers with ``units``/``calendar``; ``_FillValue``, ``scale_factor``/``add_offset``
and ``dtype`` from ``encoding``), so what is stored is what netCDF or zarr would
store. Every dask block becomes one chunk: one task writes each shard, for every
variable, and **one** commit task makes the whole dataset visible at once (see
:mod:`arrayds.xarray.state`). Modes:

* ``"w-"`` create (``FileExistsError`` if the node exists), ``"w"`` replace;
* ``"a"`` add or overwrite variables, or with ``append_dim=`` append along that
  dimension (variables without it are overwritten, as xarray's zarr writer does);
* ``"r+"`` (or ``"a"``) with ``region={dim: slice}`` overwrite a chunk-aligned region
  of existing variables.

Appending or writing a region re-uses the stored CF encoding of each variable;
mismatched dimensions, dimension lengths, dtypes or variable sets are a
``ValueError`` raised before anything is written (docs/xarray.md, "Appends and
regions: the rules"). An encoding that would not round-trip (an integer ``dtype``
too narrow for the values, ``_Unsigned`` without a fill value) is a ``ValueError``
naming the variable and the key; a variable whose dtype cannot be stored is a
``TypeError`` (or xarray's ``ValueError``) naming it.

>>> import numpy as np, pandas as pd, xarray as xr, arrayds
>>> ds = xr.Dataset({"t": (("time", "x"), np.zeros((2, 3), "f4"))},
...                 coords={"time": pd.date_range("2000-01-01", periods=2)})
>>> _ = arrayds.to_arrayrecord(ds, "memory://doc-writer", mode="w")
>>> more = ds.assign_coords(time=pd.date_range("2000-01-03", periods=2))
>>> _ = arrayds.to_arrayrecord(more, "memory://doc-writer", mode="a", append_dim="time")
>>> xr.open_dataset("memory://doc-writer", engine="arrayds").sizes["time"]
4
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from ..dask.graph import joint_graph, run, write_graph
from ..errors import CommitConflictError
from ..kinds.array.dask import normalize_region, shard_tasks, write_shards_now
from ..kinds.array.grid import AxisGrid, ChunkGrid, normalize_chunks
from ..kinds.array.handle import stack_entries
from ..kinds.array.manifest import ArrayManifest, ShardEntry
from ..kinds.array.tensor import check_dtype
from ..kinds.group import Group, GroupManifest
from ..nodes import history, pending
from ..nodes.merge import tiered
from ..nodes.names import check_component, join_component
from ..nodes.options import DEFAULT_COMPRESSION, check_compression, writer_options
from ..nodes.registry import parse_node
from ..nodes.retry import APPEND_RETRIES, check_retries
from ..storage import get_store
from ..storage.base import BaseStore as Store
from .attrs import decode_attrs, encode_attrs
from .backend import INTERNAL
from .state import (
    DatasetState,
    Snapshot,
    commit_snapshot,
    read_state,
    run_all,
)

__all__ = [
    "DATAARRAY_NAME",
    "DATAARRAY_VARIABLE",
    "ENCODING_KEYS",
    "CommitJob",
    "VariablePlan",
    "WritePlan",
    "commit_graph",
    "plan_encoded",
    "store_encoded",
    "write_dataset",
]

DATAARRAY_VARIABLE = "__xarray_dataarray_variable__"
DATAARRAY_NAME = "__xarray_dataarray_name__"
NONE_NAME = "__values__"
"""The stored name of a variable named ``None`` (xarray's netCDF convention)."""

CF_RELATED = (
    "bounds",
    "grid_mapping",
    "climatology",
    "geometry",
    "node_coordinates",
    "node_count",
    "part_node_count",
    "interior_ring",
    "cell_measures",
    "formula_terms",
)

ENCODING_KEYS = frozenset(
    {
        # CF encodings, applied by xarray's encoder
        "dtype",
        "_FillValue",
        "missing_value",
        "scale_factor",
        "add_offset",
        "units",
        "calendar",
        "coordinates",
        "_Unsigned",
        "_Encoding",
        "char_dim_name",
        # CF references xarray keeps in encoding (written as attributes)
        *CF_RELATED,
        # storage
        "chunks",
        "compression",
        "preferred_chunks",
    }
)
"""Keys accepted in ``encoding=`` (others are a ``ValueError``). Of the keys already
on ``var.encoding`` (e.g. from netCDF or zarr) these are kept and applied by xarray's
CF encoder; the others only say how another format stored the bytes (``zlib``,
``compressors``, ``endian``, ...) and are ignored: they change no value."""

_CF_FROM_STORE = (
    "dtype",
    "_FillValue",
    "missing_value",
    "scale_factor",
    "add_offset",
    "_Unsigned",
    "_Encoding",
)
_TIME_KEYS = ("units", "calendar")


def _is_dask(x: Any) -> bool:
    try:
        import dask.array as da
    except ImportError:  # pragma: no cover
        return False
    return isinstance(x, da.Array)


def _as_dataset(data: Any) -> Any:
    import xarray as xr

    if isinstance(data, xr.Dataset):
        return data
    if data.name is None:
        return data.to_dataset(name=DATAARRAY_VARIABLE)
    if data.name in data.coords:
        ds = data.to_dataset(name=DATAARRAY_VARIABLE)
        ds.attrs[DATAARRAY_NAME] = data.name
        return ds
    return data.to_dataset()


def variable_name(name: Hashable, what: str) -> str:
    """The node name of variable ``name``; the errors are xarray's for netCDF names
    (``TypeError`` for a non-str name, ``ValueError`` for an empty one); ``None``
    (a ``Dataset`` key xarray allows) is stored as ``__values__``, as netCDF does."""
    if name is None:
        return NONE_NAME
    if not isinstance(name, str):
        raise TypeError(
            f"{what}: invalid name {name!r} for DataArray or Dataset key: must be either a "
            f"string or None for serialization to arrayds"
        )
    if not name:
        raise ValueError(
            f"{what}: invalid name {name!r} for DataArray or Dataset key: string must be "
            f"length 1 or greater for serialization to arrayds"
        )
    try:
        node = check_component(name, f"{what}: variable")
    except ValueError as e:
        raise ValueError(str(e)) from None
    if "/" in node or not node:
        raise ValueError(f"{what}: variable name {name!r} cannot be a node name ('/' or empty)")
    return node


def check_encoding(encoding: Any, ds: Any, what: str) -> dict[str, dict[str, Any]]:
    """``encoding=`` checked as xarray's writers check it: a name that is not a
    variable is a ``KeyError``, a value that is not a dict or a key arrayds does not
    apply a ``ValueError`` (each naming the variable)."""
    if encoding is None:
        return {}
    if not isinstance(encoding, Mapping):
        raise TypeError(f"{what}: encoding must be a dict of variable name -> dict")
    out = {}
    for name, enc in encoding.items():
        if name not in ds.variables:
            raise KeyError(
                f"{what}: encoding names variable {name!r}, which is not in the dataset "
                f"(variables: {sorted(map(str, ds.variables))})"
            )
        if not isinstance(enc, Mapping):
            raise ValueError(
                f"{what}: encoding[{name!r}] must be castable to a dictionary of encoding "
                f"keys, got {enc!r}"
            )
        bad = sorted(set(enc) - ENCODING_KEYS)
        if bad:
            raise ValueError(
                f"{what}: unexpected encoding keys {bad} for variable {name!r} (supported: "
                f"{sorted(ENCODING_KEYS)})"
            )
        out[name] = dict(enc)
    return out


def _storable(name: str, var: Any, what: str) -> tuple[Any, np.dtype, str | None]:
    """The encoded variable's data in a storable dtype -> (data, dtype, vlen)."""
    data = var.data
    dt = var.dtype
    vlen = None
    if dt.kind in "OT":  # object (vlen) strings, numpy 2 StringDType
        values = np.asarray(var.values)
        if dt.kind == "T":  # missing values (na_object) are written as "", as zarr does
            import pandas as pd

            values = values.astype(object)
            values[pd.isnull(values)] = ""
        flat = values.reshape(-1).tolist()
        if all(isinstance(v, str) for v in flat):
            data = np.array(flat, dtype=str).reshape(values.shape) if flat else values.astype("U1")
            vlen = "str"
        elif all(isinstance(v, bytes) for v in flat):
            data = (
                np.array(flat, dtype=bytes).reshape(values.shape) if flat else values.astype("S1")
            )
            vlen = "bytes"
        else:
            kinds = sorted({type(v).__name__ for v in flat})
            raise TypeError(
                f"{what}: variable {name!r} has dtype object holding {kinds}; only numeric, "
                f"bool, datetime/timedelta and string data can be stored"
            )
        dt = data.dtype
    try:
        dt = check_dtype(dt, f"{what}: variable {name!r}")
    except (TypeError, ValueError) as e:
        raise TypeError(str(e)) from None
    if not _is_dask(data):
        data = np.asarray(data)
    return data, dt, vlen


def _to_dask(
    data: Any,
    chunks: Any,
    what: str,
    dims: tuple[Hashable, ...] = (),
    dim_chunks: Mapping[Hashable, tuple[int, ...]] | None = None,
) -> Any:
    """``data`` as a dask array: dask data keeps its blocks (rechunked to ``chunks``
    if given); numpy data is chunked by ``chunks``, else along each dimension like
    the dataset's dask variables (so coordinates line up with the data for later
    appends and region writes), else automatically (about 4 MiB chunks)."""
    import dask.array as da
    from dask.array.core import normalize_chunks as dask_normalize

    if _is_dask(data):
        if chunks is not None:
            data = data.rechunk(chunks)
        return data
    arr = np.asarray(data)
    norm = None
    if chunks is not None:
        try:
            norm = normalize_chunks(chunks, arr.shape, arr.dtype.itemsize, what)
        except (TypeError, ValueError):
            norm = None
    if norm is None:
        known = dim_chunks or {}
        spec = (
            tuple(
                known[d] if d in known and sum(known[d]) == n else "auto"
                for d, n in zip(dims, arr.shape, strict=True)
            )
            if dims
            else "auto"
        )
        norm = tuple(
            tuple(int(c) for c in cs)
            for cs in dask_normalize(spec, arr.shape, limit=4 << 20, dtype=arr.dtype)
        )
    return da.from_array(arr, chunks=norm, name=False)


class VariablePlan(NamedTuple):
    """One checked variable of a dataset write: what its shard tasks write."""

    name: str
    """The variable's node name."""
    array: Any
    """The data, a dask array in the chunks it is stored in."""
    member: str
    """The variable's node."""
    offset: tuple[int, ...]
    """The chunk index of the data's first block in the stored grid."""
    base: ArrayManifest
    """The variable's manifest before the new shards are added."""
    index: int
    """The variable's position in the dataset (names its tasks)."""
    values: np.ndarray | None = None
    """The data in memory (numpy), shaped as ``array``, or ``None`` (dask data)."""
    kind: str = "full"
    """``"full"`` (written whole), ``"append"`` or ``"region"``."""


class WritePlan:
    """The checked arrays of one dataset write: ``plans`` the :class:`VariablePlan`
    of each variable, ``bases`` the base manifests by name (their shard lists are the
    stored ones, unparsed: the commit appends to them), ``remove_files``
    the shard files the commit makes unreferenced (member -> paths, or the member's
    shard list as read)."""

    def __init__(
        self,
        plans: list[VariablePlan],
        bases: dict[str, ArrayManifest],
        remove_files: dict[str, Sequence[Any]],
    ) -> None:
        self.plans = plans
        self.bases = bases
        self.remove_files = remove_files


def plan_shard_tasks(
    plan: VariablePlan,
    store: Store,
    write_id: str,
    shard_size: Any,
    what: str,
    key: str,
    layer: dict[Any, Any],
    joint: Any,
) -> tuple[Any, list[Any]]:
    """The shard tasks (added to ``layer``, named after ``key``) that write one
    planned variable; ``joint`` is the graph all variables were optimized in
    together (or ``None``)."""
    return shard_tasks(
        plan.array,
        store,
        plan.member,
        write_id,
        plan.offset,
        plan.base.dtype,
        writer_options(plan.base.compression),
        shard_size,
        f"{what} variable {plan.name!r}",
        key,
        layer,
        optimize=joint is None,
    )


def commit_graph(
    store: Store,
    node: str,
    plans: Sequence[tuple[str, VariablePlan, str]],
    *,
    write_id: str,
    shard_size: Any,
    name: str,
    commit_task: Callable[[Any, list[list[dict[str, Any]]]], Any],
    job: Any,
    compute: bool = True,
    progress: bool = False,
    segments: bool = False,
) -> Any:
    """Write the shards of ``plans`` (``(task key suffix, plan, what)``), then run
    ``commit_task(job, results)`` once, where ``results[i]`` are the shard entries of
    ``plans[i]``: one dask graph (layer ``arrayds-xr-<name>-<write id>``). The
    variables are optimized together, so a dask input several of them share stays
    one task (optimized one by one, each would fuse its own copy of it); each
    block-producing task is fused into the one shard task that needs it
    (:func:`arrayds.kinds.array.dask.write_graph`). ``job`` is one opaque object, so dask
    never looks inside it for keys. Returns the written :class:`arrayds.Group` at
    ``node``, or with ``compute=False`` the ``dask.delayed.Delayed`` that writes and
    commits.

    ``segments``: a variable of more than :data:`arrayds.nodes.history.SEGMENT_LIMIT`
    shards written whole or appended has its entries written as manifest segments by
    tasks (:func:`_segment_task`), and its ``results[i]`` are their references; the
    commit task finds those variables (their member nodes) in ``job.segmented``."""
    job.segmented = set()
    if compute and not progress and _in_memory(plans):
        # small in-memory data: the shard writes and the commit run here, as the graph
        # would run them (no graph to build, optimize and schedule for one small step)
        calls = [
            write_shards_now(
                p.values,  # type: ignore[arg-type]
                p.array.chunks,
                store,
                p.member,
                write_id,
                p.offset,
                p.base.dtype,
                writer_options(p.base.compression),
                shard_size,
                f"{what} variable {p.name!r}",
            )
            for _s, p, what in plans
        ]
        with pending.uploading(store, node, write_id):
            done = run_all([c for cs in calls for c in cs])
        results, i = [], 0
        for cs in calls:
            results.append(done[i : i + len(cs)])
            i += len(cs)
        return _group(store, node, commit_task(job, results))
    from dask.delayed import Delayed

    layer_name = f"arrayds-xr-{name}-{write_id}"
    commit_key = f"arrayds-xr-{name}-commit-{write_id}"
    layer: dict[Any, Any] = {}
    ys = []
    keys = []
    joint = joint_graph([p.array for _s, p, _w in plans])
    segmented: set[str] = set()
    for suffix, plan, what in plans:
        key = f"arrayds-xr-shard-{write_id}-{suffix}"
        y, k = plan_shard_tasks(plan, store, write_id, shard_size, what, key, layer, joint)
        ys.append(y)
        k = list(k)
        if segments and plan.kind != "region" and len(k) > history.SEGMENT_LIMIT:
            # the workers write the entries as segments (in the member and each group
            # up to ``node``: each stores its copy of the list) and the commit
            # receives their references only
            segmented.add(plan.member)
            seg = SegmentJob(
                store.url, store.storage_options, copy_nodes(node, plan.member), write_id
            )
            seg_keys = []
            for i in range(0, len(k), history.SEGMENT_LIMIT):
                seg_keys.append(f"arrayds-xr-segment-{write_id}-{suffix}-{len(seg_keys)}")
                layer[seg_keys[-1]] = (_segment_task, seg, k[i : i + history.SEGMENT_LIMIT])
            k = seg_keys
        keys.append(k)
    job.segmented = segmented
    layer[commit_key] = (commit_task, job, keys)
    delayed = Delayed(commit_key, write_graph(ys, layer_name, layer, joint), layer=layer_name)
    if not compute:
        return delayed
    with pending.computing(store, node, write_id, compute):
        return _group(store, node, run(delayed, progress))


IN_MEMORY_BYTES = 64 << 20
"""Writes of in-memory (numpy) data up to this size run without a dask graph."""


def _in_memory(plans: Sequence[tuple[str, VariablePlan, str]]) -> bool:
    """Whether every variable of ``plans`` is in memory and all of them are small."""
    if not all(p.values is not None for _s, p, _w in plans):
        return False
    return sum(p.values.nbytes for _s, p, _w in plans) <= IN_MEMORY_BYTES  # type: ignore[union-attr]


def _group(store: Store, node: str, doc: Mapping[str, Any]) -> Any:
    """The written :class:`arrayds.Group` at ``node``: the group manifest the write
    committed (``doc``), not read back."""

    return Group(store, node, GroupManifest.from_json(doc, f"group {store.display(node)!r}"))


def new_shards(entries: Iterable[Mapping[str, Any]]) -> list[ShardEntry]:
    """The shard entries that shard tasks returned, as manifest entries."""
    return [
        ShardEntry(e["path"], tuple(e["start"]), tuple(e["stop"]), 0, e.get("bytes"))
        for e in entries
    ]


class CommitJob:
    """Everything a commit task of :func:`commit_graph` needs besides the shard
    entries, as attributes (one opaque object, so dask never looks inside it for
    keys)."""

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


class SegmentJob(NamedTuple):
    """Where a :func:`_segment_task` writes: a copy of the segment in each of
    ``nodes`` (the member, then every group from the member's up to the committing
    node: each stores its copy of the member's list in its own folder)."""

    url: str
    storage_options: Any
    nodes: tuple[str, ...]
    write_id: str


def copy_nodes(node: str, member: str) -> tuple[str, ...]:
    """The nodes that store a copy of the shard list of ``member``, a member of a
    group at or below ``node`` that one commit at ``node`` writes: the member, its
    group and every group above it up to ``node`` (a DataTree commit lists the
    subgroups, and their members' lists, in its root's snapshot: docs/spec.md 10.4).

    >>> copy_nodes("t", "t/a/b/v")
    ('t/a/b/v', 't/a/b', 't/a', 't')
    """
    out = [member]
    while out[-1] != node:
        out.append(out[-1].rpartition("/")[0])
    return tuple(out)


def _segment_task(job: SegmentJob, entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Write the manifest entries of a run of at most
    :data:`arrayds.nodes.history.SEGMENT_LIMIT` shards of one variable as a segment
    of each node that stores its list (``job.nodes``), once the shards' names are
    durable; returns their references (node -> reference), all the commit task
    receives."""
    store = get_store(job.url, job.storage_options)
    store.flush([join_component(job.nodes[0], e["path"]) for e in entries])
    return _write_copies(store, job.nodes, entries, job.write_id)


def _write_copies(
    store: Store, nodes: Iterable[str], entries: list[dict[str, Any]], write_id: str
) -> dict[str, Any]:
    """``entries`` written as a segment of each of ``nodes``: node -> its reference."""
    refs = {}
    for at in nodes:
        [refs[at]] = history.write_segments(store, at, entries, write_id)
    return refs


def _moved_segments(
    store: Store,
    job: CommitJob,
    name: str,
    pairs: Sequence[Mapping[str, Any]],
    axis: int,
    by: int,
) -> list[dict[str, Any]]:
    """The segments ``pairs`` (node -> reference) of variable ``name`` written again
    with their entries moved ``by`` chunks along ``axis`` (an append placed after
    another writer's), one segment in memory at a time."""
    member = join_component(job.node, name)
    what = f"dataset {store.display(job.node)!r} variable {name!r}"
    out = []
    for pair in pairs:
        stored = history.segment(store, member, pair[member], what, cache=False)
        moved = [e.shifted(axis, by).to_json() for e in new_shards(stored)]
        out.append(_write_copies(store, pair, moved, job.write_id))
    return out


def segment_files(node: str, pairs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The segment files (relative to ``node``, the committing node) of the
    references ``pairs`` (node -> reference): what a failed commit removes.

    >>> segment_files("t", [{"t/v": {"path": "s1"}, "t": {"path": "s2"}}])
    ['v/s1', 's2']
    """
    start = len(node) + 1 if node else 0
    return [f"{at[start:]}/{p[at]['path']}" if at != node else p[at]["path"]
            for p in pairs for at in p]  # fmt: skip


def _commit_task(job: CommitJob, results: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """The one commit of the whole dataset (after every shard task succeeded);
    ``results[i]`` are the shard entries of variable ``job.names[i]``. An append
    along ``job.append_dim`` with ``job.retries`` is placed after what other writers
    committed meanwhile (:func:`_rebased`) instead of failing."""
    store = get_store(job.url, job.storage_options)
    node, expected = job.node, job.expected
    by_name = dict(zip(job.names, results, strict=True))
    members: dict[str, ArrayManifest] = {n: expected.members[n] for n in job.keep}
    appended: dict[str, int] = {}
    segments = {
        n: by_name.get(n, []) for n in job.names if join_component(node, n) in job.segmented
    }
    for name, base in job.bases.items():
        if name in segments:  # written whole or appended: nothing stored is hidden
            members[name], count = base, len(base.shards)
        else:
            members[name], count = _stacked(base, new_shards(by_name.get(name, [])))
        if count is not None:
            appended[name] = count
    written = [
        *(f"{n}/{e['path']}" for n, entries in by_name.items() if n not in segments
          for e in entries),
        *(f for pairs in segments.values() for f in segment_files(node, pairs)),
    ]  # fmt: skip
    merge = None
    if job.tiered and set(appended) - set(segments):
        # an append: the members it grew merge their newest small shards in this commit
        files = {n: [e["path"] for e in by_name.get(n, [])] for n in appended if n not in segments}
        merge = tiered(store, node, files)
    rebase = None
    if job.retries and job.append_dim is not None:
        rebase = functools.partial(_rebased, job, by_name, f"dataset {store.display(node)!r}")
    return commit_snapshot(
        store,
        node,
        expected=expected,
        members=members,
        changed=set(job.bases),
        attrs=job.attrs,
        write_id=job.write_id,
        written=written,
        remove_children=job.remove_children,
        remove_files=job.remove_files,
        fresh=job.fresh,
        appended=appended,
        segments=segments,
        merge=merge,
        rebase=rebase,
        retries=job.retries,
        registered=True,
    )


def _stacked(base: ArrayManifest, new: list[ShardEntry]) -> tuple[ArrayManifest, int | None]:
    """``base`` with the shard entries ``new`` stacked on its own, and how many
    entries come before them if they hide none of those (an append), else ``None``."""
    shards = stack_entries(base.shards, new)
    if new and len(shards) == len(base.shards) + len(new):  # nothing hidden: an append
        return base.with_(shards=shards), len(base.shards)
    return base.with_(shards=shards), None


_ENCODING_ATTRS = (*_CF_FROM_STORE, *_TIME_KEYS, INTERNAL)
"""The attributes of a stored variable that say how its values are encoded: data
appended to it was encoded with them."""


def _rebased(
    job: CommitJob, by_name: Mapping[str, list[dict[str, Any]]], what: str, state: DatasetState
) -> Snapshot:
    """The snapshot of an append along ``job.append_dim`` (planned from
    ``job.expected``, its shard entries ``by_name``) placed after what the dataset
    holds now (``state``, read anew): each variable it grows keeps the stored
    manifest with the appended chunks after its own, moved along that dimension (the
    shards hold whole chunks: nothing is written again); the variables it writes
    whole are written as planned; the other stored variables stay. The global
    attributes are the stored ones updated with the append's.
    :class:`arrayds.CommitConflictError` where the append no longer fits: the dataset
    removed, or a variable it grows replaced by one of other dimensions, dtype,
    chunks across the append dimension or encoding, or a variable along that
    dimension added by another writer (the dataset would have variables of different
    lengths)."""
    dim = job.append_dim
    if state.kind != "group":
        raise CommitConflictError(
            f"{what} was removed or replaced by a {state.kind or 'missing'} node while this "
            f"append ran; nothing of this write is visible"
        )
    members = {n: m for n, m in state.members.items() if n not in job.bases}
    extra = sorted(n for n, m in members.items() if dim in (m.dims or ()))
    if extra:
        raise CommitConflictError(
            f"{what}: another writer added variables {extra} along {dim!r} while this "
            f"append ran, which it does not extend; nothing of this write is visible"
        )
    appended: dict[str, int] = {}
    segments: dict[str, Sequence[Mapping[str, Any]]] = {}
    store = get_store(job.url, job.storage_options)
    for name, base in job.bases.items():
        seg = join_component(job.node, name) in job.segmented
        new = [] if seg else new_shards(by_name.get(name, []))
        old, cur = job.expected.members.get(name), state.members.get(name)
        if old is None or dim not in (base.dims or ()):  # written whole, as planned
            grown, count = (base, len(base.shards)) if seg else _stacked(base, new)
            if seg:
                segments[name] = by_name.get(name, [])
        else:
            axis = list(base.dims or ()).index(dim)
            if cur is None or not _same_layout(cur, old, axis):
                raise CommitConflictError(
                    f"{what}: variable {name!r} was replaced by another writer (now "
                    f"{'missing' if cur is None else _layout(cur)}, was {_layout(old)}) "
                    f"while this append ran; nothing of this write is visible"
                )
            first = old.grid.axes[axis].nchunks
            ax = base.grid.axes[axis]
            axes = list(cur.grid.axes)
            axes[axis] = axes[axis].concat(ax.sub(first, ax.nchunks))
            by = cur.grid.axes[axis].nchunks - first
            header = cur.with_(grid=ChunkGrid(axes), attrs=base.attrs)
            if seg:
                pairs = by_name.get(name, [])
                grown, count = header, len(cur.shards)
                segments[name] = _moved_segments(store, job, name, pairs, axis, by)
            else:
                moved = [e.shifted(axis, by) for e in new]
                grown, count = _stacked(header, moved)
        members[name] = grown
        if count is not None:
            appended[name] = count
    lengths: dict[str, set[int]] = {}
    for m in members.values():
        for d, n in zip(m.dims or (), m.shape, strict=False):
            lengths.setdefault(d, set()).add(n)
    differ = sorted(d for d, ns in lengths.items() if len(ns) > 1)
    if differ:
        raise CommitConflictError(
            f"{what}: another writer changed the length of {differ} while this append "
            f"ran; nothing of this write is visible"
        )
    return Snapshot(state, members, {**state.attrs, **job.own_attrs}, appended, segments)


def _same_layout(cur: ArrayManifest, old: ArrayManifest, axis: int) -> bool:
    """Whether chunks planned for ``old`` along ``axis`` fit ``cur``: the same
    dimensions, dtype, chunks on every other axis and encoding."""
    return (
        cur.dims == old.dims
        and cur.dtype == old.dtype
        and cur.ndim == old.ndim
        and all(cur.grid.axes[d] == old.grid.axes[d] for d in range(cur.ndim) if d != axis)
        and all(cur.attrs.get(k) == old.attrs.get(k) for k in _ENCODING_ATTRS)
    )


def _layout(m: ArrayManifest) -> str:
    """What :func:`_same_layout` compares, in words."""
    enc = {k: m.attrs[k] for k in _ENCODING_ATTRS if k in m.attrs}
    return f"dims {m.dims}, dtype {m.dtype}, chunks {m.grid.chunks}, encoding {enc}"


def _decoded_dtype(name: str, m: ArrayManifest) -> np.dtype:
    """The dtype a stored variable has after CF decoding (what users see)."""
    from xarray import Variable, conventions

    attrs = decode_attrs(m.attrs)
    internal = attrs.pop(INTERNAL, None) or {}
    if isinstance(internal, dict) and internal.get("strings"):
        return np.dtype(object)
    dims = m.dims or tuple(f"dim_{i}" for i in range(m.ndim))
    var = Variable(dims, np.zeros((0,) * m.ndim, dtype=m.dtype), attrs)
    return conventions.decode_cf_variable(name, var).dtype


def _compatible(new: np.dtype, old: np.dtype) -> bool:
    """Can data of (decoded) dtype ``new`` go into a variable that decodes to ``old``?"""
    if new == old:
        return True
    strings = "OSU"
    if new.kind in strings and old.kind in strings:
        return True
    if new.kind in "Mm" or old.kind in "Mm":
        return new.kind == old.kind
    if new.kind in "OSU" or old.kind in "OSU":
        return False
    return bool(np.can_cast(new, old, "safe"))


def _stored_encoding(m: ArrayManifest, var: Any) -> dict[str, Any]:
    """The CF encoding a stored variable was written with (for appends/regions)."""
    attrs = decode_attrs(m.attrs)
    internal = attrs.get(INTERNAL) or {}
    enc: dict[str, Any] = {k: attrs[k] for k in _CF_FROM_STORE if k in attrs}
    if not (isinstance(internal, dict) and internal.get("strings")):
        enc["dtype"] = m.dtype
    if var.dtype.kind in "Mm":
        enc.update({k: attrs[k] for k in _TIME_KEYS if k in attrs})
    return enc


def stored_dimensions(members: Mapping[str, ArrayManifest]) -> dict[str, int]:
    """Dimension name -> length of the stored variables."""
    dims: dict[str, int] = {}
    for m in members.values():
        for d, n in zip(m.dims or (), m.shape, strict=False):
            dims.setdefault(d, n)
    return dims


def _check_dimension_sizes(
    ds: Any, existing: Mapping[str, ArrayManifest], append_dim: Hashable | None, what: str
) -> None:
    """Mode ``"a"``: every dimension the data shares with the stored dataset keeps its
    length (but ``append_dim``), as xarray's writable stores require; the
    ``ValueError`` has their wording."""
    stored = stored_dimensions(existing)
    for dim, n in ds.sizes.items():
        if dim == append_dim or dim not in stored:
            continue
        if n != stored[dim]:
            users = sorted(str(k) for k, v in ds.variables.items() if dim in v.dims)
            raise ValueError(
                f"{what} variable {users[0]!r}: Unable to update size for existing "
                f"dimension {dim!r} ({n} != "
                f"{stored[dim]}): mode 'a' adds or overwrites variables of the stored "
                f"dimension lengths (append_dim= grows one); nothing was written"
            )


def write_dataset(
    data: Any,
    store: Store,
    node: str,
    *,
    mode: str = "w-",
    compression: str = DEFAULT_COMPRESSION,
    shard_size: Any = None,
    region: Mapping[Hashable, slice] | None = None,
    attrs: Mapping[str, Any] | None = None,
    dims: Any = None,
    serializer: str = "auto",
    group_size: int = 1,
    compute: bool = True,
    progress: bool = False,
    append_dim: Hashable | None = None,
    encoding: Mapping[Hashable, Mapping[str, Any]] | None = None,
    compact: bool | str = "tiered",
    retries: int = APPEND_RETRIES,
) -> Any:
    """Write an ``xarray.Dataset`` or ``DataArray`` to the group ``node`` of ``store``
    (see the module docstring; ``arrayds.to_arrayrecord`` dispatches here;
    ``compact="tiered"``: an append's commit merges the members' newest small shards
    by tiers; ``retries``: how often an ``append_dim=`` append whose commit lost the
    race to another writer's is placed after what that writer committed and tried
    again, :mod:`arrayds.nodes.retry`; other writes raise
    :class:`arrayds.CommitConflictError` at once). Returns the written
    :class:`arrayds.Group`, or with ``compute=False`` a ``dask.delayed.Delayed`` that
    writes and commits.

    >>> import numpy as np, xarray as xr, arrayds
    >>> row = xr.Dataset({"v": ("t", [1.0])}, coords={"t": [0]})
    >>> _ = arrayds.to_arrayrecord(row, "memory://doc-retries", mode="w")
    >>> pending = arrayds.to_arrayrecord(row, "memory://doc-retries", mode="a",
    ...                                  append_dim="t", compute=False)
    >>> _ = arrayds.to_arrayrecord(row, "memory://doc-retries", mode="a", append_dim="t")
    >>> _ = pending.compute()  # placed after the other writer's row
    >>> xr.open_dataset("memory://doc-retries", engine="arrayds").sizes["t"]
    3
    """
    what = f"dataset {store.display(node)!r}"
    retries = check_retries(retries, what)
    ds = _as_dataset(data)
    _check_arguments(mode, region, append_dim, dims, serializer, group_size, what)
    compression = check_compression(compression, what)
    user_enc = check_encoding(encoding, ds, what)
    names = {k: variable_name(k, what) for k in ds.variables}
    state = read_state(store, node)
    existing, region_d, appending = _check_against_stored(
        ds, state, names, mode, region, append_dim, store.display(node), what
    )
    ds2, kinds = _apply_stored_encodings(
        ds, names, user_enc, existing, region_d, appending, append_dim, what
    )
    variables, gattrs = encode_dataset(ds2, what)
    plan = plan_encoded(
        store,
        node,
        variables,
        state=state,
        mode=mode,
        names=names,
        kinds=kinds,
        explicit_chunks={names[k] for k, e in user_enc.items() if "chunks" in e},
        dim_chunks=dask_dim_chunks(ds),
        region=region_d,
        append_dim=append_dim,
        compression=compression,
    )
    return store_encoded(
        store,
        node,
        plan,
        gattrs,
        state=state,
        mode=mode,
        shard_size=shard_size,
        attrs=attrs,
        compute=compute,
        progress=progress,
        compact=compact,
        append_dim=append_dim if appending else None,
        retries=retries,
    )


def _check_arguments(
    mode: str,
    region: Any,
    append_dim: Hashable | None,
    dims: Any,
    serializer: str,
    group_size: int,
    what: str,
) -> None:
    """The arguments of :func:`write_dataset` that need no stored state."""
    if dims is not None:
        raise ValueError(f"{what}: dims= is for arrays; xarray variables carry their own dims")
    if serializer not in ("auto", None) or group_size != 1:
        raise ValueError(f"{what}: serializer= and group_size= apply to records, not xarray")
    if mode not in ("w-", "w", "a", "r+"):
        raise ValueError(f"{what}: mode must be one of 'w-', 'w', 'a', 'r+', got {mode!r}")
    if region is not None and append_dim is not None:
        raise ValueError(f"{what}: give either region= or append_dim=, not both")
    if append_dim is not None and mode != "a":
        raise ValueError(f"{what}: append_dim= needs mode 'a' (got {mode!r})")
    if region is not None:
        if mode not in ("r+", "a"):
            raise ValueError(f"{what}: region= needs mode 'r+' (or 'a'), got {mode!r}")
        if not isinstance(region, Mapping):
            raise TypeError(
                f"{what}: for xarray data, region= is a dict of dimension name -> slice, got "
                f"{region!r}"
            )
    if mode == "r+" and region is None:
        raise ValueError(f"{what}: mode 'r+' overwrites a region: pass region={{dim: slice}}")


def _check_against_stored(
    ds: Any,
    state: Any,
    names: Mapping[Hashable, str],
    mode: str,
    region: Mapping[Hashable, slice] | None,
    append_dim: Hashable | None,
    shown: str,
    what: str,
) -> tuple[dict[str, ArrayManifest], dict[str, slice], bool]:
    """The mode, ``append_dim`` and ``region`` against the stored dataset ``state``:
    returns the stored variables the write builds on, the region (dimension name ->
    slice) and whether the write appends."""
    if state.exists and mode == "w-":
        raise FileExistsError(
            errno.EEXIST,
            f"{what} already exists (mode 'w-'); use mode 'w' to replace it, 'a' to add "
            f"variables or append_dim= to append",
            shown,
        )
    if state.exists and state.kind != "group" and mode != "w":
        raise ValueError(f"{what} is a {state.kind!r} node, not a dataset (group of arrays)")
    if not state.exists and region is not None:
        raise FileNotFoundError(errno.ENOENT, f"{what} does not exist (region= needs it)", what)
    existing: dict[str, ArrayManifest] = dict(state.members) if mode != "w" else {}
    appending = append_dim is not None and bool(existing)
    if appending:
        if append_dim not in ds.dims:
            raise ValueError(
                f"{what}: append_dim {append_dim!r} is not a dimension of the data "
                f"(dimensions: {sorted(map(str, ds.dims))})"
            )
        if not any(m.dims and append_dim in m.dims for m in existing.values()):
            raise ValueError(
                f"{what}: append_dim {append_dim!r} is not a dimension of the stored dataset"
            )
    region_d: dict[str, slice] = {}
    for dim, sl in (region or {}).items():
        if dim not in ds.dims:
            raise ValueError(f"{what}: region dimension {dim!r} is not in the data")
        if not isinstance(sl, slice):
            raise TypeError(f"{what}: region[{dim!r}] must be a slice, got {sl!r}")
        region_d[str(dim)] = sl
    if existing and not region_d:
        _check_dimension_sizes(ds, existing, append_dim if appending else None, what)
    if appending:
        written = set(names.values())
        for n, m in existing.items():
            if m.dims and append_dim in m.dims and n not in written:
                raise ValueError(
                    f"{what}: variable {n!r} has the append dimension {append_dim!r} but is "
                    f"not in the data: appending without it would leave the variables of "
                    f"different lengths along {append_dim!r}; nothing was written"
                )
    return existing, region_d, appending


def _apply_stored_encodings(
    ds: Any,
    names: Mapping[Hashable, str],
    user_enc: Mapping[Hashable, Mapping[str, Any]],
    existing: Mapping[str, ArrayManifest],
    region_d: Mapping[str, slice],
    appending: bool,
    append_dim: Hashable | None,
    what: str,
) -> tuple[Any, dict[str, str]]:
    """A shallow copy of ``ds`` whose variables carry the encoding they are written
    with (the stored one for appends and regions, else their own and the user's),
    and the kind of write of each variable (``"full"``, ``"append"``, ``"region"``)."""
    ds2 = ds.copy(deep=False)
    kinds: dict[str, str] = {}
    for key, var in ds2.variables.items():
        name = names[key]
        enc_user = user_enc.get(key, {})
        if region_d:
            if not set(var.dims) & set(region_d):
                raise ValueError(
                    f"{what}: variable {name!r} has none of the region dimensions "
                    f"{sorted(region_d)}; drop it from the dataset before writing a region"
                )
            kinds[name] = "region"
        elif appending and append_dim in var.dims:
            kinds[name] = "append"
        else:
            kinds[name] = "full"
        if kinds[name] == "full":
            var.encoding = {k: v for k, v in var.encoding.items() if k in ENCODING_KEYS}
            var.encoding.update(enc_user)
            continue
        if name not in existing:
            raise ValueError(
                f"{what}: variable {name!r} is not in the stored dataset; cannot "
                f"{'append to' if kinds[name] == 'append' else 'write a region of'} it"
            )
        if enc_user:
            raise ValueError(
                f"{what}: variable {name!r} already exists; its encoding is fixed "
                f"(remove it from encoding=)"
            )
        old_dt = _decoded_dtype(name, existing[name])
        if not _compatible(var.dtype, old_dt):
            raise ValueError(
                f"{what} variable {name!r}: dtype {var.dtype} does not match the stored "
                f"variable's {old_dt}; nothing was written"
            )
        enc = _stored_encoding(existing[name], var)
        var.encoding = enc
        var.attrs = {k: v for k, v in var.attrs.items() if k not in enc}
    return ds2, kinds


def dask_dim_chunks(ds: Any) -> dict[Hashable, tuple[int, ...]]:
    """Dimension -> the chunks of the first dask variable of ``ds`` along it (numpy
    variables are chunked alike, so coordinates line up with the data)."""
    dim_chunks: dict[Hashable, tuple[int, ...]] = {}
    for var in ds.variables.values():
        if var.chunks is not None:
            for d, c in zip(var.dims, var.chunks, strict=True):
                dim_chunks.setdefault(d, tuple(c))
    return dim_chunks


def check_fits(key: Hashable, var: Any, what: str) -> None:
    """An integer ``dtype`` encoding of numeric in-memory data: every finite value,
    after ``add_offset``/``scale_factor``, must lie in the range of that dtype (or
    its unsigned twin with ``_Unsigned``). xarray's encoder would wrap it around (300
    as int8 reads back as 44): a ``ValueError`` naming the variable and the key
    instead. Dask data is not scanned (that would compute it twice)."""
    enc = var.encoding
    if enc.get("_Unsigned") is not None and all(
        enc.get(k) is None for k in ("_FillValue", "missing_value")
    ):
        # xarray's encoder applies _Unsigned only together with a fill value; alone,
        # it is dropped and 255 reads back as -1
        raise ValueError(
            f"{what} variable {key!r}: encoding '_Unsigned' needs a '_FillValue' (or "
            f"'missing_value') for xarray's CF encoder to apply it; nothing was written"
        )
    if enc.get("dtype") is None or _is_dask(var.data) or var.dtype.kind not in "iuf":
        return
    dt = np.dtype(enc["dtype"])
    if dt.kind not in "iu":
        return
    x = np.asarray(var.values, dtype="f8")
    x = x[np.isfinite(x)]
    if x.size == 0:
        return
    y = (x - float(enc.get("add_offset", 0.0))) / float(enc.get("scale_factor", 1.0))
    unsigned = str(enc.get("_Unsigned", "")).lower() == "true"
    info = np.iinfo(np.dtype(f"u{dt.itemsize}") if unsigned and dt.kind == "i" else dt)
    lo, hi = float(np.min(y)), float(np.max(y))
    if lo < info.min - 0.5 or hi > info.max + 0.5:
        raise ValueError(
            f"{what} variable {key!r}: values from {x.min()} to {x.max()} do not fit "
            f"encoding 'dtype' {dt}{' with _Unsigned' if unsigned else ''} (range "
            f"{info.min}..{info.max} after add_offset/scale_factor); they would wrap around. "
            f"Nothing was written"
        )


def encode_dataset(ds: Any, what: str) -> tuple[dict[Hashable, Any], dict[str, Any]]:
    """CF-encode the variables and attributes of ``ds`` as xarray's writable CF data
    stores do (``cf_encoder``: coordinates, times, masks, packing, ``_Unsigned``,
    character arrays; then object arrays to a storable dtype). Errors name the
    variable."""
    from xarray import conventions

    try:
        from xarray.backends.common import ensure_dtype_not_object
    except ImportError:  # older xarray: it lived in xarray.conventions
        from xarray.conventions import ensure_dtype_not_object  # type: ignore[no-redef]

    variables, gattrs = conventions.encode_dataset_coordinates(ds)
    out: dict[Hashable, Any] = {}
    for key, var in variables.items():
        check_fits(key, var, what)
        try:
            enc = conventions.encode_cf_variable(var, name=key)
            out[key] = encode_strings(ensure_dtype_not_object(enc, name=key), key)
        except (ValueError, TypeError, OverflowError, NotImplementedError) as e:
            if hasattr(e, "add_note"):  # Python >= 3.11
                e.add_note(f"{what}: raised while encoding variable {key!r}")
            raise
    return out, dict(gattrs)


def encode_strings(var: Any, name: Hashable = None) -> Any:
    """The string encodings of netCDF-4, which arrayds stores as netCDF-4 does:
    ``dtype="S1"`` makes a character array (a trailing ``string<N>`` or
    ``char_dim_name`` dimension) and str values UTF-8 (or ``_Encoding``) bytes;
    without it, str and bytes are stored as they are (variable-length)."""
    from xarray.coding import strings

    as_chars = var.encoding.get("dtype") in ("S1", np.dtype("S1"))
    var = strings.EncodedStringCoder(allows_unicode=True).encode(var, name=name)
    return strings.CharacterArrayCoder().encode(var, name=name) if as_chars else var


def store_encoded(
    store: Store,
    node: str,
    plan: WritePlan,
    gattrs: Mapping[str, Any],
    *,
    state: DatasetState,
    mode: str,
    shard_size: Any = None,
    attrs: Mapping[str, Any] | None = None,
    compute: bool = True,
    progress: bool = False,
    compact: bool | str = "tiered",
    append_dim: Hashable | None = None,
    retries: int = 0,
) -> Any:
    """Write the checked ``plan`` (:func:`plan_encoded`) and the global ``gattrs``
    (CF-encoded, plus ``attrs``) to the group ``node`` with one commit, planned from
    ``state`` (what :func:`read_state` returned before any check): one task graph of
    the shard tasks and the commit (:func:`commit_graph`). An append (mode ``"a"``,
    ``compact="tiered"``) runs the tiered merge of the members it grew inside that
    commit (:func:`arrayds.nodes.merge.tiered`: one version); an append along
    ``append_dim`` (the plan grows the stored variables along it) whose commit finds
    another writer's is placed after it, ``retries`` times at most
    (:func:`arrayds.xarray.state.commit_snapshot`'s ``rebase``). Returns the written
    :class:`arrayds.Group`, or with ``compute=False`` the ``dask.delayed.Delayed``
    that writes and commits."""
    what = f"dataset {store.display(node)!r}"
    existing = state.members if mode != "w" else {}
    written = set(plan.bases)
    own_attrs = encode_attrs(gattrs, what)
    if attrs:
        own_attrs.update(encode_attrs(dict(attrs), what))
    gattrs_json = own_attrs
    if mode != "w" and state.kind == "group":
        gattrs_json = {**state.attrs, **own_attrs}
    remove_files = dict(plan.remove_files)
    remove_children: list[str] = []
    if mode == "w" and state.exists:
        if state.kind == "group":
            remove_children = [n for n in (*state.children, *state.others) if n not in written]
        else:
            remove_files[""] = _shard_paths(state.root, what)
    # nothing was written so far: every check above raised before any task ran; the
    # pending marker comes before the first shard (gc keeps its files)
    write_id = pending.begin(store, node)
    job = CommitJob(
        url=store.url,
        storage_options=store.storage_options,
        node=node,
        expected=state,
        bases=plan.bases,
        keep=[n for n in existing if n not in written],
        attrs=gattrs_json,
        write_id=write_id,
        remove_children=remove_children,
        fresh=mode == "w",
        remove_files=remove_files,
        names=[p.name for p in plan.plans],
        tiered=mode == "a" and compact == "tiered",
        append_dim=append_dim if mode == "a" else None,
        retries=retries if mode == "a" and append_dim is not None else 0,
        own_attrs=own_attrs,
    )
    return commit_graph(
        store,
        node,
        [(str(p.index), p, what) for p in plan.plans],
        write_id=write_id,
        shard_size=shard_size,
        name="write",
        commit_task=_commit_task,
        job=job,
        compute=compute,
        progress=progress,
        segments=True,
    )


def _shard_paths(raw: Mapping[str, Any] | None, what: str) -> list[str]:
    """The shard files of the (non-group) node manifest ``raw`` that a mode ``"w"``
    dataset write replaces (none if it cannot be read: cleanup only)."""
    try:
        old_node = parse_node(raw, what)  # type: ignore[arg-type]
        return sorted({e.path for e in getattr(old_node, "shards", [])})
    except Exception:  # noqa: BLE001 - cleanup only
        return []


def _keeps_history(state: DatasetState, mode: str) -> bool:
    """Whether the replaced files of a rewritten member stay: the versions of a
    format 2 group (its snapshots) still reference them, until ``arrayds gc`` expires
    those versions. Mode ``"w"`` replaces the dataset (its history goes too)."""
    fv = state.root.get("format_version") if state.root is not None else None
    return mode != "w" and isinstance(fv, int) and fv >= 2


def plan_encoded(
    store: Store,
    node: str,
    variables: Mapping[Hashable, Any],
    *,
    state: DatasetState,
    mode: str,
    names: Mapping[Hashable, str],
    kinds: Mapping[str, str],
    explicit_chunks: Iterable[str] = (),
    dim_chunks: Mapping[Hashable, tuple[int, ...]] | None = None,
    region: Mapping[str, slice] | None = None,
    append_dim: Hashable | None = None,
    compression: str = DEFAULT_COMPRESSION,
) -> WritePlan:
    """The checked :class:`WritePlan` of writing the CF-encoded ``variables`` to the
    group ``node`` (the validation/plan step of :func:`store_encoded`; a DataTree
    write, :mod:`arrayds.xarray.tree`, commits the plans of all its groups at once).
    ``kinds[name]`` is ``"full"``, ``"append"`` (along ``append_dim``) or ``"region"``
    (``region``: dimension -> slice). Every check raises before any shard is
    written."""
    what = f"dataset {store.display(node)!r}"
    explicit_chunks = set(explicit_chunks)
    existing: dict[str, ArrayManifest] = dict(state.members) if mode != "w" else {}
    bases: dict[str, ArrayManifest] = {}
    remove_files: dict[str, Sequence[Any]] = {}
    plans = []
    for idx, (key, enc) in enumerate(variables.items()):
        name = names[key]
        vwhat = f"{what} variable {name!r}"
        data, dtype, vlen = _storable(name, enc, what)
        if _is_dask(data) and any(c != c for cs in data.chunks for c in cs):  # NaN sizes
            raise ValueError(
                f"{vwhat}: the dask array has unknown chunk sizes; call "
                f"compute_chunk_sizes() (or .chunk()) before writing"
            )
        vattrs = encode_attrs(enc.attrs, vwhat)
        if vlen:
            vattrs[INTERNAL] = {"strings": vlen}
        kind = kinds[name]
        values = None if _is_dask(data) else np.asarray(data)
        if kind == "full":
            x, offset, base = _plan_full(
                enc,
                data,
                dtype,
                vattrs,
                name in explicit_chunks,
                dim_chunks or {},
                compression,
                vwhat,
            )
            if name in state.members and not _keeps_history(state, mode):
                # its list as read: the commit removes its files a segment at a time
                remove_files[name] = state.members[name].shards
        else:
            old = existing[name]
            _check_stored_dtype(enc, dtype, old, vwhat)
            x = _to_dask(data, None, vwhat)
            if x.dtype != old.dtype:
                x = x.astype(old.dtype)
                values = None if values is None else values.astype(old.dtype)
            if kind == "append":
                x, offset, base = _plan_append(
                    enc, x, old, vattrs, append_dim, _is_dask(data), vwhat
                )
            else:
                x, offset, base = _plan_region(enc, x, old, dict(region or {}), vwhat)
        member = join_component(node, name)
        plans.append(VariablePlan(name, x, member, offset, base, idx, values, kind))
        bases[name] = base
    return WritePlan(plans, bases, remove_files)


def _plan_full(
    enc: Any,
    data: Any,
    dtype: np.dtype,
    vattrs: dict[str, Any],
    explicit: bool,
    dim_chunks: Mapping[Hashable, tuple[int, ...]],
    compression: str,
    vwhat: str,
) -> tuple[Any, tuple[int, ...], ArrayManifest]:
    """A variable written whole: its dask array, chunk offset and new manifest."""
    chunks_enc = enc.encoding.get("chunks")
    x = _to_dask(
        data,
        chunks_enc if (explicit or not _is_dask(data)) else None,
        vwhat,
        tuple(enc.dims),
        dim_chunks,
    )
    fill = enc.attrs.get("_FillValue", 0)
    comp = check_compression(enc.encoding.get("compression", compression), vwhat)
    kw: dict[str, Any] = {"compression": comp, "dims": enc.dims, "attrs": vattrs, "name": vwhat}
    try:
        base = ArrayManifest.new(x.shape, dtype, x.chunks, fill_value=fill, **kw)
    except ValueError:
        base = ArrayManifest.new(x.shape, dtype, x.chunks, **kw)
    return x, (0,) * x.ndim, base


def _check_stored_dtype(enc: Any, dtype: np.dtype, old: ArrayManifest, vwhat: str) -> None:
    """Data appended to, or written into a region of, the stored variable ``old``
    has its dimensions and a dtype that fits its stored one."""
    if tuple(enc.dims) != tuple(old.dims or ()):
        raise ValueError(
            f"{vwhat}: dimensions {tuple(enc.dims)} do not match the stored "
            f"{old.dims}; nothing was written"
        )
    same = (
        dtype == old.dtype
        or (
            dtype.kind == old.dtype.kind
            and dtype.kind in "SU"
            and dtype.itemsize <= old.dtype.itemsize
        )
        or (dtype.kind not in "SU" and np.can_cast(dtype, old.dtype, "safe"))
    )
    if not same and dtype.kind in "SU" and dtype.kind == old.dtype.kind:
        per = 4 if old.dtype.kind == "U" else 1
        width, need = old.dtype.itemsize // per, dtype.itemsize // per
        raise ValueError(
            f"{vwhat}: strings of up to {need} "
            f"characters do not fit the stored width of {width} (fixed-width storage); "
            f"rewrite the variable (mode 'a' without append_dim) to widen it; nothing "
            f"was written"
        )
    if not same:
        raise ValueError(
            f"{vwhat}: dtype {dtype} (after CF encoding) does not match the stored "
            f"{old.dtype}; nothing was written"
        )


def _plan_append(
    enc: Any,
    x: Any,
    old: ArrayManifest,
    vattrs: dict[str, Any],
    append_dim: Hashable | None,
    was_dask: bool,
    vwhat: str,
) -> tuple[Any, tuple[int, ...], ArrayManifest]:
    """Data appended along ``append_dim`` to the stored variable ``old``: the data
    rechunked to the stored grid, its chunk offset and the grown manifest."""
    axis = list(enc.dims).index(append_dim)
    for d in range(old.ndim):
        if d != axis and x.shape[d] != old.shape[d]:
            raise ValueError(
                f"{vwhat}: cannot append data of shape {x.shape} along "
                f"{append_dim!r}: dimension {enc.dims[d]!r} has length "
                f"{x.shape[d]}, the stored one {old.shape[d]}; nothing was written"
            )
    along = (
        x.chunks[axis]
        if was_dask
        else AxisGrid.regular(x.shape[axis], max(1, old.chunk_shape[axis] or x.shape[axis])).sizes()
    )
    want = tuple(tuple(along) if d == axis else old.grid.chunks[d] for d in range(old.ndim))
    if tuple(x.chunks) != want:
        x = x.rechunk(want)
    ax = old.grid.axes[axis]
    offset = tuple(ax.nchunks if d == axis else 0 for d in range(old.ndim))
    added = AxisGrid.from_sizes([c for c in x.chunks[axis] if c])
    axes = list(old.grid.axes)
    axes[axis] = ax.concat(added)
    return x, offset, old.with_(grid=ChunkGrid(axes), attrs=vattrs)


def _plan_region(
    enc: Any, x: Any, old: ArrayManifest, region: Mapping[str, slice], vwhat: str
) -> tuple[Any, tuple[int, ...], ArrayManifest]:
    """Data written into a chunk-aligned ``region`` of the stored variable ``old``:
    the data in the stored chunks, its chunk offset and the manifest it changes."""
    reg = tuple(region.get(d, slice(None)) for d in enc.dims)
    c_start, c_stop = normalize_region(reg, old, x.shape, vwhat)
    want = tuple(
        ax.sub(a, b).sizes() or (0,)
        for ax, a, b in zip(old.grid.axes, c_start, c_stop, strict=True)
    )
    if tuple(x.chunks) != want:
        x = x.rechunk(want)
    return x, tuple(c_start), old
