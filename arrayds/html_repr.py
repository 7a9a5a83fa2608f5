"""What Jupyter shows of a dataset node: ``_repr_html_`` of arrays, groups, records
and ragged datasets, as plain HTML and inline SVG (no JavaScript).

* an array: a summary table and its **chunk map**, an SVG of the chunk grid of the
  last two axes drawn to scale (irregular chunks too), chunks some shard holds filled,
  chunks that read as ``fill_value`` empty, the shard boxes outlined in thick lines;
  axes of more than :data:`MAX_CELLS` chunks are drawn in cells of several chunks
  (shaded by the fraction written) and the picture says so;
* a group: a table and a collapsible tree (``<details>``) of the nodes below it, each
  with its kind, shape, dtype, dims, compression, stored size and generation;
* records and ragged datasets: a table and a bar of the shards, each as wide as the
  records (items) it holds.

Everything comes from manifests (and one listing of a node's kept versions): no
shard is read, and the work is bounded whatever the number of chunks or shards.
Every name and attribute is escaped.

>>> import arrayds
>>> a = arrayds.open_array("memory://doc-html", mode="w", shape=(6, 4), dtype="i2", chunks=2)
>>> a[:2] = 1
>>> page = a._repr_html_()
>>> page.count("class='arrayds-chunks'"), "2/6 chunks written" in page
(1, True)
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from .abc.store import Store
from .errors import CorruptionError
from .nodes import commit
from .nodes import history as log
from .nodes.read import read_pinned

__all__ = ["MAX_CELLS", "MAX_SHARD_BOXES", "MAX_TREE_NODES", "chunk_map", "node_html"]

MAX_CELLS = 50
"""The most cells drawn along one axis of a chunk map (more chunks: a cell holds several)."""
MAX_SHARD_BOXES = 200
"""The most shard boxes outlined in a chunk map (more: none, and the picture says so)."""
MAX_TREE_NODES = 100
"""The most nodes a group's tree shows (more: the tree says how many were left out)."""
MAX_BAR_SEGMENTS = 100
"""The most segments of a shard bar (more shards: a segment holds several)."""
_PAINT_LIMIT = 1 << 20
"""The most elementary cells painted for the exact fraction of chunks written."""

_WRITTEN = "#3d7cc9"
_GRID = "#a9b4c2"
_SHARD = "#14213d"
_FONT = "font-family:sans-serif;font-size:12px"
_STYLE = "font-family:sans-serif;font-size:13px;line-height:1.4"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _bytes(n: int | None) -> str:
    if n is None:
        return "?"
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if x < 1024 or unit == "TiB":
            return f"{int(x)} B" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{n} B"  # pragma: no cover


def _table(rows: Sequence[tuple[str, str]]) -> str:
    body = "".join(
        f"<tr><th style='text-align:left;padding:1px 8px 1px 0'>{_e(k)}</th>"
        f"<td style='text-align:left;padding:1px 0'>{_e(v)}</td></tr>"
        for k, v in rows
    )
    return f"<table class='arrayds-info'>{body}</table>"


def _page(title: str, where: str, table: str, picture: str, extra: str = "") -> str:
    head = f"<div><b>{_e(title)}</b> <code>{_e(where)}</code></div>"
    side = (
        f"<table><tr><td style='vertical-align:top'>{table}</td>"
        f"<td style='vertical-align:top;padding-left:16px'>{picture}</td></tr></table>"
    )
    return f"<div class='arrayds-repr' style='{_STYLE}'>{head}{side}{extra}</div>"


# ------------------------------------------------------------------ versions


def kept_versions(store: Store, node: str) -> int:
    """How many versions of ``node`` its history keeps, the current one included
    (one listing of its versions folder; 0 if there is no node).

    >>> import arrayds
    >>> g = arrayds.open("memory://doc-html-kept", mode="w")
    >>> g.attrs["a"] = 1
    >>> kept_versions(g.store, "")
    2
    """
    if not store.exists(commit.manifest_key(node)):
        return 0
    folder = f"{node}/{log.VERSIONS_DIR}" if node else log.VERSIONS_DIR
    return 1 + sum(log.version_of_key(k) is not None for k, _, _ in store.list(folder))


# ------------------------------------------------------------------ chunk maps


def _edges(n: int, cap: int) -> np.ndarray:
    """Chunk indices where the cells of an axis of ``n`` chunks start, and ``n``."""
    k = max(1, math.ceil(n / cap))
    return np.unique(np.append(np.arange(0, n, k, dtype=np.int64), n))


def _written(m: Any, edges: list[np.ndarray]) -> tuple[np.ndarray, bool]:
    """Chunks written per cell (cells: ``edges`` along every axis), and whether the
    count is exact: the union of the shard boxes painted on the intervals their
    bounds and the edges make; a table too fragmented for that adds the boxes' overlap
    with each cell instead (exact for boxes that do not overlap; clipped at full)."""
    table = m.table
    shape = [len(e) - 1 for e in edges]
    if not len(table):
        return np.zeros(shape), True
    starts, stops = table.starts, table.stops
    bounds = [
        np.unique(
            np.concatenate([e, np.clip(starts[:, d], 0, e[-1]), np.clip(stops[:, d], 0, e[-1])])
        )
        for d, e in enumerate(edges)
    ]
    if math.prod(len(b) - 1 for b in bounds) <= _PAINT_LIMIT:
        cover = np.zeros([len(b) - 1 for b in bounds], dtype=np.float64)
        lo = [np.searchsorted(b, starts[:, d]) for d, b in enumerate(bounds)]
        hi = [np.searchsorted(b, stops[:, d]) for d, b in enumerate(bounds)]
        for i in range(len(table)):
            cover[tuple(slice(int(lo[d][i]), int(hi[d][i])) for d in range(len(bounds)))] = 1
        for d, b in enumerate(bounds):
            w = np.diff(b).astype(np.float64)
            cover = cover * w.reshape([-1 if j == d else 1 for j in range(len(bounds))])
            cover = np.add.reduceat(cover, np.searchsorted(b, edges[d][:-1]), axis=d)
        return cover, True
    many = [d for d, n in enumerate(shape) if n > 1]  # the axes drawn: two at most
    count = np.zeros([shape[d] for d in many])
    for a in range(0, len(table), 1 << 14):
        s, t = starts[a : a + (1 << 14)], stops[a : a + (1 << 14)]
        ov = [
            np.clip(
                np.minimum(t[:, d : d + 1], e[1:]) - np.maximum(s[:, d : d + 1], e[:-1]), 0, None
            ).astype(np.float64)
            for d, e in enumerate(edges)
        ]
        weight = np.ones(len(s))
        for d, n in enumerate(shape):
            if n == 1:
                weight = weight * ov[d][:, 0]
        if len(many) == 2:
            count += (ov[many[0]] * weight[:, None]).T @ ov[many[1]]
        elif many:
            count += (ov[many[0]] * weight[:, None]).sum(axis=0)
        else:
            count += weight.sum()
    return count.reshape(shape), False


def _px(grid_axis: Any, chunk_edges: np.ndarray, size: float) -> np.ndarray:
    """Pixel positions (0..size) of chunk boundaries ``chunk_edges``, to scale."""
    n = grid_axis.nchunks
    inner = chunk_edges[chunk_edges < n]
    off = grid_axis.offset_of(inner).astype(np.float64)
    if chunk_edges[-1] == n:
        off = np.append(off, grid_axis.length)
    return off * (size / max(grid_axis.length, 1))


def _side(length: int, longest: int, full: float, least: float) -> float:
    return max(least, full * length / max(longest, 1))


def chunk_map(m: Any, *, size: float = 240, cells: int = MAX_CELLS, dims: Any = None) -> str:
    """The chunk map of an array manifest (``ArrayManifest``) as an inline SVG, with
    a one-line legend: the last two axes to scale, ``size`` pixels along the longer,
    at most ``cells`` cells per axis.

    >>> from arrayds.kinds.array.manifest import ArrayManifest
    >>> svg = chunk_map(ArrayManifest.new((1000, 1000), "u1", ((1,) * 1000, (1,) * 1000)))
    >>> svg.count("<line"), "20 × 20 chunks" in svg
    (102, True)
    """
    if not size > 0 or not isinstance(cells, int) or cells < 1:
        raise ValueError(f"chunk_map: size must be > 0 and cells an int >= 1, got {size}, {cells}")
    grid = m.grid
    if m.ndim == 0:
        return "<div><i>a scalar: one chunk</i></div>"
    if grid.nchunks == 0:
        return f"<div><i>empty: shape {_e(m.shape)}</i></div>"
    shown = list(range(max(0, m.ndim - 2), m.ndim))
    edges = [
        _edges(ax.nchunks, cells) if d in shown else np.array([0, ax.nchunks], dtype=np.int64)
        for d, ax in enumerate(grid.axes)
    ]
    written, exact = _written(m, edges)
    per_cell = np.ones(written.shape)
    for d, e in enumerate(edges):
        w = np.diff(e).astype(np.float64)
        per_cell = per_cell * w.reshape([-1 if j == d else 1 for j in range(m.ndim)])
    frac = np.clip(written / per_cell, 0, 1)
    lead = tuple(range(len(edges) - len(shown)))
    frac = frac.reshape([len(e) - 1 for e in edges])
    frac = frac.reshape(frac.shape[len(lead) :]) if lead else frac
    if frac.ndim == 1:
        frac = frac.reshape(1, -1)
    xs_ax = grid.axes[shown[-1]]
    ys_ax = grid.axes[shown[0]] if len(shown) == 2 else None
    longest = max(xs_ax.length, ys_ax.length if ys_ax is not None else 0)
    w = _side(xs_ax.length, longest, size, 40)
    h = _side(ys_ax.length, longest, size, 24) if ys_ax is not None else 28.0
    xs = _px(xs_ax, edges[shown[-1]], w)
    ys = _px(ys_ax, edges[shown[0]], h) if ys_ax is not None else np.array([0.0, h])
    pad, right, below = 6, 70, 34
    out = []
    for r in range(frac.shape[0]):  # one rect per run of equal shade along a row
        row = np.round(frac[r], 2)
        c = 0
        while c < row.size:
            c2 = c
            while c2 + 1 < row.size and row[c2 + 1] == row[c]:
                c2 += 1
            if row[c] > 0:
                op = 1.0 if row[c] >= 1 else 0.25 + 0.6 * float(row[c])
                out.append(
                    f"<rect class='written' x='{pad + xs[c]:.1f}' y='{pad + ys[r]:.1f}' "
                    f"width='{xs[c2 + 1] - xs[c]:.1f}' height='{ys[r + 1] - ys[r]:.1f}' "
                    f"fill='{_WRITTEN}' fill-opacity='{op:.2f}'/>"
                )
            c = c2 + 1
    for x in xs:
        out.append(
            f"<line x1='{pad + x:.1f}' y1='{pad}' x2='{pad + x:.1f}' y2='{pad + h:.1f}' "
            f"stroke='{_GRID}' stroke-width='1'/>"
        )
    for y in ys:
        out.append(
            f"<line x1='{pad}' y1='{pad + y:.1f}' x2='{pad + w:.1f}' y2='{pad + y:.1f}' "
            f"stroke='{_GRID}' stroke-width='1'/>"
        )
    notes = []
    out.extend(_shard_boxes(m, shown, w, h, pad, notes))
    out.append(
        f"<rect x='{pad}' y='{pad}' width='{w:.1f}' height='{h:.1f}' fill='none' "
        f"stroke='{_SHARD}' stroke-width='1.5'/>"
    )
    names = list(dims) if dims else [None] * m.ndim
    label = f"{names[shown[-1]]}: " if names[shown[-1]] else ""
    out.append(
        f"<text x='{pad + w / 2:.1f}' y='{pad + h + 16:.1f}' text-anchor='middle' "
        f"style='{_FONT}'>{_e(label)}{xs_ax.length}</text>"
    )
    if ys_ax is not None:
        label = f"{names[shown[0]]}: " if names[shown[0]] else ""
        cx, cy = pad + w + 14, pad + h / 2
        out.append(
            f"<text x='{cx:.1f}' y='{cy:.1f}' text-anchor='middle' "
            f"transform='rotate(90 {cx:.1f} {cy:.1f})' style='{_FONT}'>"
            f"{_e(label)}{ys_ax.length}</text>"
        )
    k = [int(np.max(np.diff(edges[d]))) for d in shown]
    if max(k) > 1:
        notes.append(
            f"1 cell = up to {' × '.join(map(str, k))} chunks (shaded by the part written)"
        )
    if lead:
        dims_txt = ", ".join(str(names[d]) if names[d] else f"axis {d}" for d in lead)
        counts = " × ".join(str(grid.axes[d].nchunks) for d in lead)
        notes.append(f"over {counts} chunks along {dims_txt}: shaded by the part written")
    if not exact:
        notes.append("shading approximate: the shard table is fragmented")
    svg = (
        f"<svg xmlns='http://www.w3.org/2000/svg' class='arrayds-chunks' "
        f"width='{w + pad + right:.0f}' height='{h + pad + below:.0f}' "
        f"style='background:white'>{''.join(out)}</svg>"
    )
    partly = bool(((frac > 0) & (frac < 1)).any())
    return svg + _legend(notes, partly)


def _shard_boxes(
    m: Any, shown: list[int], w: float, h: float, pad: float, notes: list[str]
) -> Iterator[str]:
    """Thick outlines of the shard boxes (distinct in the axes drawn)."""
    table = m.table
    if not len(table):
        return
    cols = shown
    boxes = np.unique(np.concatenate([table.starts[:, cols], table.stops[:, cols]], axis=1), axis=0)
    if len(boxes) > MAX_SHARD_BOXES:
        notes.append(f"{len(table)} shard boxes: too many to outline")
        return
    grid = m.grid
    xa = grid.axes[shown[-1]]
    ya = grid.axes[shown[0]] if len(shown) == 2 else None
    n = len(shown)
    x0 = _to_px(xa, boxes[:, n - 1], w)
    x1 = _to_px(xa, boxes[:, 2 * n - 1], w)
    if ya is not None:
        y0, y1 = _to_px(ya, boxes[:, 0], h), _to_px(ya, boxes[:, n], h)
    else:
        y0, y1 = np.zeros(len(boxes)), np.full(len(boxes), h)
    for a, b, c, d in zip(x0, x1, y0, y1, strict=True):
        yield (
            f"<rect class='shard' x='{pad + a:.1f}' y='{pad + c:.1f}' width='{b - a:.1f}' "
            f"height='{d - c:.1f}' fill='none' stroke='{_SHARD}' stroke-width='2.5'/>"
        )


def _to_px(ax: Any, chunk: np.ndarray, size: float) -> np.ndarray:
    chunk = np.clip(chunk, 0, ax.nchunks)
    inner = chunk < ax.nchunks
    off = np.full(chunk.shape, float(ax.length))
    off[inner] = ax.offset_of(chunk[inner])
    return off * (size / max(ax.length, 1))


def _swatch(fill: str, stroke: str, width: float = 1, opacity: float = 1) -> str:
    return (
        f"<svg width='14' height='12' style='vertical-align:middle'><rect x='1' y='1' "
        f"width='12' height='10' fill='{fill}' fill-opacity='{opacity}' stroke='{stroke}' "
        f"stroke-width='{width}'/></svg>"
    )


def _legend(notes: list[str], partly: bool) -> str:
    items = [
        f"{_swatch(_WRITTEN, _GRID)} written",
        f"{_swatch(_WRITTEN, _GRID, opacity=0.55)} partly written" if partly else "",
        f"{_swatch('white', _GRID)} fill value",
        f"{_swatch('none', _SHARD, 2.5)} shard",
    ]
    more = "".join(f"<div class='arrayds-note'>{_e(n)}</div>" for n in notes)
    return (
        f"<div style='font-size:12px;color:#333'>{' &nbsp; '.join(i for i in items if i)}"
        f"{more}</div>"
    )


# ------------------------------------------------------------------ shard bars


def shard_bar(counts: Sequence[int], what: str, *, width: float = 420) -> str:
    """An SVG bar of shards, each as wide as its ``counts`` (records or items), in
    order; more than :data:`MAX_BAR_SEGMENTS` shards are drawn in segments of several.

    >>> shard_bar([5, 5, 10], "records").count("<rect class='shard'")
    3
    """
    c = np.asarray(counts, dtype=np.float64)
    if c.ndim != 1 or (c < 0).any() or not width > 0:
        raise ValueError("shard_bar: counts must be non-negative numbers and width > 0")
    if c.size == 0:
        return "<div><i>no shards</i></div>"
    k = max(1, math.ceil(c.size / MAX_BAR_SEGMENTS))
    seg = np.add.reduceat(c, np.arange(0, c.size, k))
    total = float(seg.sum())
    widths = seg / total * width if total else np.full(seg.size, width / seg.size)
    x = np.concatenate([[0.0], np.cumsum(widths)])
    h, pad = 24, 4
    out = []
    for i, (a, b) in enumerate(zip(x[:-1], x[1:], strict=True)):
        fill = _WRITTEN if i % 2 == 0 else "#7fb0e6"
        first = i * k
        last = min(c.size, first + k) - 1
        name = f"shard {first}" if k == 1 else f"shards {first}–{last}"
        out.append(
            f"<rect class='shard' x='{pad + a:.2f}' y='{pad}' width='{b - a:.2f}' "
            f"height='{h}' fill='{fill}' stroke='white' stroke-width='0.5'>"
            f"<title>{_e(name)}: {int(seg[i])} {_e(what)}</title></rect>"
        )
    out.append(
        f"<rect x='{pad}' y='{pad}' width='{width:.0f}' height='{h}' fill='none' "
        f"stroke='{_SHARD}' stroke-width='1'/>"
    )
    svg = (
        f"<svg xmlns='http://www.w3.org/2000/svg' class='arrayds-shards' "
        f"width='{width + 2 * pad:.0f}' height='{h + 2 * pad}' style='background:white'>"
        f"{''.join(out)}</svg>"
    )
    note = (
        f"{c.size} shards, {_e(what)} per shard: min {int(c.min())}, median "
        f"{int(np.median(c))}, max {int(c.max())}"
    )
    if k > 1:
        note += f"; 1 segment = {k} shards"
    return f"{svg}<div class='arrayds-note' style='font-size:12px;color:#333'>{note}</div>"


# ------------------------------------------------------------------ the kinds


def _stored(sizes: Any) -> int | None:
    """The sum of recorded shard sizes, ``None`` if one is not recorded."""
    sizes = list(sizes)
    return None if None in sizes else sum(sizes)


def _array_rows(m: Any) -> list[tuple[str, str]]:
    written = m.table.covered_count(m.grid.grid_shape)
    sizes = {e.path: e.bytes for e in m.shards}
    stored = _stored(sizes.values())
    logical = math.prod(m.shape) * m.dtype.itemsize
    regular = all(
        len(ax.runs) <= 1
        or (len(ax.runs) == 2 and ax.runs[1][1] == 1 and ax.runs[1][0] < ax.runs[0][0])
        for ax in m.grid.axes
    )
    chunks = str(m.chunk_shape) if regular else "irregular"
    rows = [
        ("Shape", str(m.shape)),
        ("Dtype", str(m.dtype)),
        ("Dims", ", ".join(m.dims) if m.dims else "—"),
        ("Chunks", chunks),
        ("Chunk grid", " × ".join(map(str, m.grid.grid_shape)) or "()"),
        ("Written", f"{written}/{m.grid.nchunks} chunks written"),
        ("Shards", f"{len(sizes)} files, {len(m.shards)} boxes"),
        ("Fill value", repr(m.fill[()])),
        ("Compression", m.compression),
        ("Bytes", f"{_bytes(logical)} logical, {_bytes(stored)} stored"),
        ("Generation", str(m.generation)),
    ]
    if m.attrs:
        rows.append(("Attributes", ", ".join(sorted(m.attrs))))
    return rows


def _records_rows(m: Any) -> list[tuple[str, str]]:
    stored = sum(s.file_size for s in m.shards)
    logical = sum(s.data_bytes for s in m.shards)
    rows = [
        ("Records", str(m.num_records)),
        ("Shards", str(len(m.shards))),
        ("Serializer", m.serializer),
        ("Compression", m.compression),
        ("Group size", str(m.group_size)),
        ("Bytes", f"{_bytes(logical)} encoded, {_bytes(stored)} stored"),
        ("Generation", str(m.generation)),
    ]
    if m.attrs:
        rows.append(("Attributes", ", ".join(sorted(m.attrs))))
    return rows


def _ragged_rows(m: Any) -> list[tuple[str, str]]:
    stored = _stored(s.bytes for s in m.shards)
    rows = [
        ("Items", str(m.count)),
        ("Dtype", str(m.dtype)),
        ("Item ndim", str(m.ndim)),
        ("Variable axis", str(m.axis)),
        ("Piece length", str(m.piece_len)),
        ("Pieces", str(sum(s.records - 1 for s in m.shards))),
        ("Shards", str(len(m.shards))),
        ("Compression", m.compression),
        ("Bytes", f"{_bytes(stored)} stored"),
        ("Generation", str(m.generation)),
    ]
    if m.attrs:
        rows.append(("Attributes", ", ".join(sorted(m.attrs))))
    return rows


def _body(m: Any, small: bool = False) -> tuple[list[Any], str]:
    """(table rows, picture) of one node by its kind."""
    kind = getattr(m, "kind", None)
    if kind == "array":
        size, cells = (160, 16) if small else (240, MAX_CELLS)
        return _array_rows(m), chunk_map(m, size=size, cells=cells, dims=m.dims)
    if kind == "records":
        return _records_rows(m), shard_bar([s.num_records for s in m.shards], "records")
    if kind == "ragged":
        return _ragged_rows(m), shard_bar([s.items for s in m.shards], "items")
    attrs = getattr(m, "attrs", {}) or {}
    rows = [("Generation", str(getattr(m, "generation", "?")))]
    if attrs:
        rows.append(("Attributes", ", ".join(sorted(attrs))))
    return rows, ""


_TITLES = {
    "array": "arrayds.Array",
    "group": "arrayds.Group",
    "records": "arrayds.RecordsDataset",
    "ragged": "arrayds.RaggedArray",
}


def node_html(
    store: Store,
    node: str,
    m: Any,
    *,
    mode: str | None = None,
    version: int | None = None,
    children_as_of: datetime | None = None,
) -> str:
    """The HTML Jupyter shows of the node ``node`` whose parsed manifest is ``m``
    (an array, group, records or ragged manifest); ``version``: the version the handle
    was opened at (``children_as_of``: the moment a group's children are read as of).

    >>> import arrayds
    >>> g = arrayds.open("memory://doc-html-node", mode="w")
    >>> _ = g.create_array("x<script>", shape=(4,), dtype="f4", chunks=2)
    >>> page = g._repr_html_()
    >>> "<script>" in page, "x&lt;script&gt;" in page
    (False, True)
    """
    kind = getattr(m, "kind", None)
    if not isinstance(kind, str):
        raise TypeError(f"node_html: expected a parsed node manifest, got {type(m).__name__}")
    rows, picture = _body(m)
    rows = list(rows)
    kept = kept_versions(store, node)
    rows.append(("Versions kept", str(kept)))
    if version is not None:
        rows.append(("Opened at", f"version {version}"))
    if mode is not None:
        rows.append(("Mode", mode))
    where = store.display(node)
    if kind == "group":
        tree = _tree(store, node, children_as_of)
        return _page(_TITLES[kind], where, _table(rows), "", tree)
    return _page(_TITLES.get(kind, f"arrayds {kind}"), where, _table(rows), picture)


# ------------------------------------------------------------------ group trees


def _summary(m: Any) -> str:
    kind = getattr(m, "kind", "node")
    if kind == "array":
        dims = f" ({', '.join(m.dims)})" if m.dims else ""
        written = m.table.covered_count(m.grid.grid_shape)
        stored = _stored({e.path: e.bytes for e in m.shards}.values())
        return (
            f"array {m.shape}{dims} {m.dtype} · {written}/{m.grid.nchunks} chunks written · "
            f"{m.compression} · {_bytes(stored)} · gen {m.generation}"
        )
    if kind == "records":
        stored = sum(s.file_size for s in m.shards)
        return (
            f"records · {m.num_records} records · {len(m.shards)} shards · {m.compression} · "
            f"{_bytes(stored)} · gen {m.generation}"
        )
    if kind == "ragged":
        stored = _stored(s.bytes for s in m.shards)
        return (
            f"ragged · {m.count} items · {m.dtype} ndim {m.ndim} · {m.compression} · "
            f"{_bytes(stored)} · gen {m.generation}"
        )
    return f"{kind} · gen {getattr(m, 'generation', '?')}"


class _Budget:
    def __init__(self, n: int) -> None:
        self.left = n
        self.cut = 0


def _tree(store: Store, node: str, as_of: datetime | None) -> str:
    budget = _Budget(MAX_TREE_NODES)
    inner = _children(store, node, as_of, budget, 0)
    cut = (
        f"<div class='arrayds-note'><i>{budget.cut} more nodes not shown (the tree shows "
        f"{MAX_TREE_NODES})</i></div>"
        if budget.cut
        else ""
    )
    return (
        f"<details open class='arrayds-tree'><summary><b>/</b> members</summary>{inner}"
        f"</details>{cut}"
    )


def _children(store: Store, node: str, as_of: datetime | None, budget: _Budget, depth: int) -> str:
    names = commit.child_nodes(store, node)
    items = []
    for i, name in enumerate(names):
        if budget.left <= 0:
            budget.cut += len(names) - i
            break
        budget.left -= 1
        child = f"{node}/{name}" if node else name
        items.append(f"<li>{_tree_node(store, child, name, as_of, budget, depth)}</li>")
    if not items and not names:
        return "<div style='margin-left:1.2em'><i>no members</i></div>"
    return f"<ul style='list-style:none;margin:0;padding-left:1.2em'>{''.join(items)}</ul>"


def _tree_node(
    store: Store, node: str, name: str, as_of: datetime | None, budget: _Budget, depth: int
) -> str:
    try:
        m, _pin = read_pinned(store, node, as_of=as_of)
    except ValueError:  # no version of it at that moment: created later
        return f"<span><b>{_e(name)}</b> <i>(created later)</i></span>"
    except (CorruptionError, OSError) as e:
        return f"<span><b>{_e(name)}</b> <i>unreadable: {_e(type(e).__name__)}: {_e(e)}</i></span>"
    if m is None:
        return f"<span><b>{_e(name)}</b> <i>(gone)</i></span>"
    if getattr(m, "kind", None) == "group":
        attrs = f" · attrs {', '.join(sorted(m.attrs))}" if m.attrs else ""
        inner = _children(store, node, as_of, budget, depth + 1)
        opened = " open" if depth == 0 else ""
        return (
            f"<details{opened}><summary><b>{_e(name)}</b> group · gen {m.generation}"
            f"{_e(attrs)}</summary>{inner}</details>"
        )
    rows, picture = _body(m, small=True)
    return (
        f"<details><summary><b>{_e(name)}</b> {_e(_summary(m))}</summary>"
        f"<table><tr><td style='vertical-align:top'>{_table(rows)}</td>"
        f"<td style='vertical-align:top;padding-left:12px'>{picture}</td></tr></table></details>"
    )
