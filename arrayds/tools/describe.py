"""``arrayds info``: :func:`describe` summarises every node of a dataset.

It reads manifests only (plus, for ragged arrays, each shard's small index record)
and returns a JSON-ready summary of every node: kind, shape, dtype, chunk grid, shard
count, bytes stored vs logical, compression ratio, record counts. Each kind gives its
own fields (:attr:`arrayds.nodes.registry.NodeKind.describe`, the ``describe_<kind>``
functions here) and its lines of the tree (``info_text``, the ``<kind>_text``
functions); :func:`node_text` and :func:`totals_text` are what the CLI prints.

>>> import arrayds, numpy as np
>>> a = arrayds.open_array("memory://doc-describe0", mode="w", shape=(6,), dtype="i2",
...                        chunks=2)
>>> a[:] = np.arange(6)
>>> describe("memory://doc-describe0")["nodes"][0]["grid"]
[3]
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..abc.store import Store
from ..errors import CorruptionError
from ..nodes import commit
from ..nodes import registry as kinds
from ..nodes.merge import format_bytes
from ..nodes.names import join_component
from .walk import Item, open_root, walk

__all__ = [
    "array_text",
    "describe",
    "describe_array",
    "describe_group",
    "describe_ragged",
    "describe_records",
    "format_bytes",
    "group_text",
    "node_text",
    "ragged_text",
    "records_text",
    "stored_bytes",
    "totals_text",
]


def stored_bytes(store: Store, node: str, sizes: Mapping[str, int | None]) -> int | None:
    """The bytes of the files ``sizes`` names ({path in ``node``: recorded size or
    ``None``}); unrecorded sizes are asked of the store; ``None`` if one is missing."""
    total = 0
    for rel, n in sizes.items():
        if n is None:
            try:
                n = store.size(join_component(node, rel))
            except (OSError, ValueError):
                return None
        total += n
    return total


# ------------------------------------------------------- the kinds' own fields


def describe_group(store: Store, node: str, m: Any) -> dict[str, Any]:
    """A group's fields: its attribute names, the variables of its xarray snapshot."""
    out: dict[str, Any] = {"attrs": sorted(m.attrs)}
    snap = m.extra.get("snapshot")
    if isinstance(snap, dict) and isinstance(snap.get("members"), dict):
        out["dataset_variables"] = sorted(snap["members"])
    return out


def describe_array(store: Store, node: str, m: Any) -> dict[str, Any]:
    """An array's fields: shape, dtype, chunking, grid, chunks written, shards, sizes."""
    grid = m.grid
    sizes: dict[str, int | None] = {e.path: e.bytes for e in m.shards}
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
        "bytes_stored": stored_bytes(store, node, sizes),
        "bytes_logical": int(math.prod(m.shape)) * m.dtype.itemsize,
    }


def describe_records(store: Store, node: str, m: Any) -> dict[str, Any]:
    """A records dataset's fields: record and shard counts, serializer, sizes."""
    return {
        "records": m.num_records,
        "shards": len(m.shards),
        "serializer": m.serializer,
        "compression": m.compression,
        "group_size": m.group_size,
        "attrs": sorted(m.attrs),
        "generation": m.generation,
        "bytes_stored": sum(s.file_size for s in m.shards),
        "bytes_logical": sum(s.data_bytes for s in m.shards),
    }


def describe_ragged(store: Store, node: str, m: Any) -> dict[str, Any]:
    """A ragged array's fields: items, dtype, variable axis, pieces, shards, sizes
    (the logical size reads each shard's index record)."""
    from ..kinds.ragged.handle import RaggedArray

    ra = RaggedArray(store, node, m, "r")
    try:
        logical: int | None = ra.nbytes
    except (OSError, CorruptionError):
        logical = None
    return {
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
        "bytes_stored": stored_bytes(store, node, {s.path: s.bytes for s in m.shards}),
        "bytes_logical": logical,
    }


# ------------------------------------------------------- the kinds' own lines


def _ratio(info: Mapping[str, Any]) -> str:
    stored, logical = info.get("bytes_stored"), info.get("bytes_logical")
    if stored is None and logical is None:
        return ""
    text = f"stored {format_bytes(stored)} of {format_bytes(logical)} logical"
    if info.get("ratio") is not None:
        text += f" (ratio {info['ratio']:.2f})"
    return text


def _shards(n: int) -> str:
    return f"{n} shard{'s' if n != 1 else ''}"


def group_text(n: Mapping[str, Any]) -> tuple[str, list[str]]:
    """A group's line of the tree."""
    extra = ""
    if n.get("dataset_variables"):
        extra = f" (dataset: {', '.join(n['dataset_variables'])})"
    return f"group{extra}", []


def array_text(n: Mapping[str, Any]) -> tuple[str, list[str]]:
    """An array's lines of the tree."""
    head = f"array {tuple(n['shape'])} {n['dtype_name']}"
    chunks = tuple(n["chunks"]) if n.get("regular_chunks") else "irregular"
    details = [
        f"chunks {chunks}, grid {tuple(n['grid'])}, {n['nchunks_written']}/{n['nchunks']} "
        f"chunks written, {_shards(n['shards'])}, {n['compression']}",
        _ratio(n),
    ]
    if n.get("dims"):
        details.insert(1, f"dims {tuple(n['dims'])}")
    return head, [d for d in details if d]


def records_text(n: Mapping[str, Any]) -> tuple[str, list[str]]:
    """A records dataset's lines of the tree."""
    details = [
        f"{_shards(n['shards'])}, serializer {n['serializer']}, {n['compression']}, "
        f"group_size {n['group_size']}",
        _ratio(n),
    ]
    return f"records {n['records']} records", [d for d in details if d]


def ragged_text(n: Mapping[str, Any]) -> tuple[str, list[str]]:
    """A ragged array's lines of the tree."""
    head = f"ragged {n['items']} items, ndim {n['ndim']} {n['dtype_name']}"
    details = [
        f"variable axis {n['axis']}, pieces of {n['piece_len']}, {_shards(n['shards'])}, "
        f"{n['compression']}",
        _ratio(n),
    ]
    return head, [d for d in details if d]


def node_text(info: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(headline, detail lines) of one node of :func:`describe` in ``arrayds info``'s
    tree, as its kind writes them (``<kind> error`` for an unreadable manifest).

    >>> node_text({"kind": "group", "path": "/"})
    ('group', [])
    """
    try:
        kind = kinds.get(info["kind"])
    except NotImplementedError:
        kind = None
    if kind is None or kind.info_text is None:
        return f"<{info['kind']}> {info.get('error', '')}", []
    return kind.info_text(info)


def _counted() -> list[kinds.NodeKind]:
    """The kinds counted in the totals: kinds of nodes first, those that hold nodes
    (groups) last."""
    return sorted((k for k in kinds.all_kinds() if k.totals), key=lambda k: k.children)


def totals_text(t: Mapping[str, Any]) -> str:
    """The total line of ``arrayds info`` from :func:`describe`'s ``totals``."""
    ratio = f", ratio {t['ratio']:.2f}" if t.get("ratio") is not None else ""
    records = f", {t['records']} records" if t.get("records") else ""
    counts = ", ".join(f"{t.get(k.totals, 0)} {k.plural}" for k in _counted())
    return (
        f"total: {t['nodes']} nodes ({counts}), {t['shards']} shards{records}; "
        f"stored {format_bytes(t['bytes_stored'])} of {format_bytes(t['bytes_logical'])} "
        f"logical{ratio}"
    )


# ------------------------------------------------------------------ describe


def _node_info(store: Store, item: Item) -> dict[str, Any]:
    out: dict[str, Any] = {"path": "/" + item.node}
    if item.kind is None:
        m = item.parsed
        out["kind"] = "unreadable"
        out["error"] = f"{type(m).__name__}: {m}"
        return out
    out["kind"] = item.kind.name
    if item.kind.describe is not None:
        out.update(item.kind.describe(store, item.node, item.parsed))
    return out


def describe(
    url: str | os.PathLike[str],
    *,
    storage_options: Mapping[str, Any] | None = None,
    component: str | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> dict[str, Any]:
    """A JSON-ready summary of the dataset at ``url`` (``arrayds info --json``).

    ``{"url", "version", "nodes": [...], "totals": {...}}``; each node has ``path``
    and ``kind`` and, per kind, shape/dtype/chunks/grid/shards (arrays), records/
    shards/serializer (records), items/shards (ragged), with ``bytes_stored``,
    ``bytes_logical`` and ``ratio`` (logical / stored). Reads manifests only (and
    ragged shard indexes, for their logical size).

    ``version=N`` (a generation of the node ``url`` + ``component``, see
    :func:`arrayds.versions`) or ``as_of=`` (a datetime: the newest version committed
    at or before it; naive means UTC) describe the dataset as it was then, as
    :func:`arrayds.open` reads it (the nodes below as of the moment the version stands
    for; :func:`arrayds.tools.walk.walk`); ``"version"`` is then the generation
    described (``None`` for the current state). A version that is not kept is a
    ``ValueError`` naming the versions kept.

    >>> import arrayds, numpy as np
    >>> a = arrayds.open_array("memory://doc-describe", mode="w", shape=(4, 4), dtype="f8",
    ...                        chunks=2)
    >>> a[:2] = 1
    >>> n = describe("memory://doc-describe")["nodes"][0]
    >>> n["kind"], n["shape"], n["nchunks"], n["nchunks_written"], n["shards"]
    ('array', [4, 4], 4, 2, 1)
    >>> old = describe("memory://doc-describe", version=1)
    >>> old["version"], old["nodes"][0]["nchunks_written"]
    (1, 0)
    """
    store, node = open_root(url, storage_options, component, version=version, as_of=as_of)
    pinned = version is not None or as_of is not None
    nodes = []
    at: int | None = None
    for item in walk(store, node, version=version, as_of=as_of):
        if pinned and at is None and item.node == node and isinstance(item.raw, dict):
            at = commit.generation_of(item.raw)
        if item.source:
            continue  # members of snapshots are also nodes of their own
        info = _node_info(store, item)
        info["depth"] = len([p for p in item.node[len(node) :].split("/") if p])
        stored, logical = info.get("bytes_stored"), info.get("bytes_logical")
        if stored and logical is not None:
            info["ratio"] = float(f"{logical / stored:.4g}")
        nodes.append(info)
    stored_all = [n.get("bytes_stored") for n in nodes if "bytes_stored" in n]
    logical_all = [n.get("bytes_logical") for n in nodes if "bytes_logical" in n]
    totals: dict[str, Any] = {"nodes": len(nodes)}
    for k in _counted():
        totals[k.totals] = sum(n["kind"] == k.name for n in nodes)
    totals.update(
        {
            "shards": sum(int(n.get("shards", 0)) for n in nodes),
            "records": sum(int(n.get("records", 0)) for n in nodes),
            "bytes_stored": None if None in stored_all else sum(stored_all),
            "bytes_logical": None if None in logical_all else sum(logical_all),
        }
    )
    if totals["bytes_stored"] and totals["bytes_logical"] is not None:
        totals["ratio"] = float(f"{totals['bytes_logical'] / totals['bytes_stored']:.4g}")
    return {"url": store.display(node), "version": at, "nodes": nodes, "totals": totals}
