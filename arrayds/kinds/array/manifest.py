"""Node manifests (the JSON documents of docs/spec.md) and the shard table.

* :class:`GroupManifest`, :class:`ArrayManifest` — parsed, validated manifests with
  ``to_json()``; :func:`parse_node` turns any manifest dict into one (later kinds
  are parsed by their record in :mod:`arrayds.nodes.registry`).
* :class:`ShardTable` — the shard entries of an array as numpy arrays, with the
  vectorized chunk -> (shard entry, record) lookup :meth:`ShardTable.locate`.
* :func:`encode_fill_value` / :func:`decode_fill_value` — JSON-safe fill values that
  round-trip NaN, infinities, complex numbers, NaT and raw bytes.
* :func:`check_compression` — validates the per-array compression string.

>>> m = ArrayManifest.new((4, 6), "<f4", ((2, 2), (3, 3)), fill_value=float("nan"))
>>> js = m.to_json()
>>> js["chunks"], js["fill_value"]
([[[2, 2]], [[3, 2]]], 'NaN')
>>> ArrayManifest.from_json(js, "doc").shape
(4, 6)
"""

from __future__ import annotations

import base64
import bisect
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any

import numpy as np

from ...errors import CommitConflictError, CorruptionError
from ...nodes.history import Appended, ShardLog
from ...nodes.names import (
    FORMAT,
    FORMAT_VERSION,
    MANIFEST,
    check_attrs,
    is_reserved_name,
    require_field,
)
from ...nodes.options import DEFAULT_COMPRESSION, check_compression
from .grid import AxisGrid, ChunkGrid
from .tensor import check_dtype

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "ArrayManifest",
    "CommitConflictError",
    "ShardEntry",
    "ShardList",
    "ShardTable",
    "check_attrs",
    "check_compression",
    "decode_fill_value",
    "encode_fill_value",
]


# ------------------------------------------------------------------ compression

MAX_CHUNK_BYTES = (1 << 32) - (1 << 16)
"""The most data bytes one chunk may hold: its record (the data and a ``.npy`` header
of well under 64 KiB) must fit in one ArrayRecord chunk, which the engine caps at
4 GiB (docs/spec.md, "Bounds"). A manifest whose grid or ``chunk_shape`` exceeds it
is refused when it is opened, before anything of that size is allocated."""


def _largest_chunk_error(dtype: np.dtype, shape: Sequence[int]) -> str | None:
    """Why a chunk of this shape cannot be stored, or None if it can."""
    nbytes = math.prod(int(n) for n in shape) * dtype.itemsize
    if nbytes <= MAX_CHUNK_BYTES:
        return None
    return (
        f"a chunk of shape {tuple(shape)} and dtype {dtype.str} holds {nbytes} bytes, more "
        f"than the {MAX_CHUNK_BYTES} one chunk may hold (docs/spec.md, Bounds)"
    )


# ------------------------------------------------------------------ fill values


def _enc_float(x: float) -> float | str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return float(x)


def _dec_float(v: Any) -> float:
    if isinstance(v, str):
        m = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
        if v not in m:
            raise ValueError(f"bad float {v!r}")
        return m[v]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"bad float {v!r}")
    return float(v)


def make_fill_value(value: Any, dtype: np.dtype, name: str = "array") -> np.ndarray:
    """A user fill value -> a 0-d array of ``dtype``. ``None`` and the default ``0``
    mean all-zero bytes (``b""`` for ``S``, ``""`` for ``U``, the epoch for
    datetime64)."""
    if value is None or (
        isinstance(value, (int, np.integer))
        and not isinstance(value, (bool, np.bool_))
        and value == 0
        and dtype.kind in "SUVMm"
    ):
        return np.zeros((), dtype=dtype)
    if (
        dtype.kind in "iu"
        and isinstance(value, (int, np.integer))
        and not isinstance(value, (bool, np.bool_))
    ):
        info = np.iinfo(dtype)
        if not info.min <= int(value) <= info.max:  # numpy would wrap a numpy integer
            raise ValueError(  # around (and a Python int too before numpy 2)
                f"{name}: fill_value {value!r} cannot be stored as dtype {dtype.str} "
                f"(out of its range {info.min}..{info.max})"
            )
    try:
        arr = np.array(value)
        if dtype.kind in "Mm" and arr.dtype.kind in "iu":
            return np.array(int(value), dtype=np.int64).view(dtype).reshape(())
        out = np.array(value, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as e:
        raise ValueError(
            f"{name}: fill_value {value!r} cannot be stored as dtype {dtype.str} ({e})"
        ) from None
    if out.shape != ():
        raise ValueError(f"{name}: fill_value must be a scalar, got shape {out.shape}")
    if dtype.kind in "iu" and arr.dtype.kind == "f" and not float(value).is_integer():
        raise ValueError(f"{name}: fill_value {value!r} is not an integer (dtype {dtype.str})")
    return out


def encode_fill_value(fill: np.ndarray) -> Any:
    """A 0-d array -> its JSON form (docs/spec.md section 5).

    >>> encode_fill_value(np.array(complex(1, float("inf"))))
    [1.0, 'Infinity']
    >>> encode_fill_value(np.array("NaT", dtype="M8[s]")), encode_fill_value(np.array(b"ab", "S3"))
    ('NaT', 'YWIA')
    """
    dt = fill.dtype
    v = fill[()]
    k = dt.kind
    if k == "b":
        return bool(v)
    if k in "iu":
        return int(v)
    if k == "f":
        return _enc_float(float(v))
    if k == "c":
        return [_enc_float(float(v.real)), _enc_float(float(v.imag))]
    if k in "Mm":
        if np.isnat(v):
            return "NaT"
        return int(fill.view(np.int64))
    if k == "U":
        return str(v)
    # S, V: the raw bytes of the item
    return base64.b64encode(fill.tobytes()).decode("ascii")


def decode_fill_value(value: Any, dtype: np.dtype) -> np.ndarray:
    """The JSON form -> a 0-d array of ``dtype`` (ValueError if it does not fit)."""
    k = dtype.kind
    if k == "b":
        if not isinstance(value, bool):
            raise ValueError(f"expected true/false, got {value!r}")
        return np.array(value, dtype=dtype)
    if k in "iu":
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {value!r}")
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise ValueError(f"{value} does not fit {dtype.str}")
        return np.array(value, dtype=dtype)
    if k == "f":
        return np.array(_dec_float(value), dtype=dtype)
    if k == "c":
        if not isinstance(value, list) or len(value) != 2:
            raise ValueError(f"expected [real, imag], got {value!r}")
        return np.array(complex(_dec_float(value[0]), _dec_float(value[1])), dtype=dtype)
    if k in "Mm":
        if value == "NaT":
            return np.array("NaT", dtype=dtype)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer or 'NaT', got {value!r}")
        return np.array(value, dtype=np.int64).view(dtype).reshape(())
    if k == "U":
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {value!r}")
        return np.array(value, dtype=dtype)
    if not isinstance(value, str):
        raise ValueError(f"expected base64 text, got {value!r}")
    raw = base64.b64decode(value.encode("ascii"), validate=True)
    if len(raw) != dtype.itemsize:
        raise ValueError(f"{len(raw)} bytes, expected {dtype.itemsize}")
    return np.frombuffer(raw, dtype=dtype).reshape(()).copy()


# ------------------------------------------------------------------ shard table


@dataclass(frozen=True)
class ShardEntry:
    """One entry of an array's ``shards`` list: the box ``[start, stop)`` of chunk
    coordinates stored in ``path`` (relative to the node folder) as records
    ``offset ..`` in C order of the box."""

    path: str
    start: tuple[int, ...]
    stop: tuple[int, ...]
    offset: int = 0
    bytes: int | None = None

    @property
    def records(self) -> int:
        return math.prod(b - a for a, b in zip(self.start, self.stop, strict=False))

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "path": self.path,
            "start": list(self.start),
            "stop": list(self.stop),
            "records": self.records,
        }
        if self.offset:
            d["offset"] = self.offset
        if self.bytes is not None:
            d["bytes"] = self.bytes
        return d

    def shifted(self, axis: int, by: int) -> ShardEntry:
        start = list(self.start)
        stop = list(self.stop)
        start[axis] += by
        stop[axis] += by
        return replace(self, start=tuple(start), stop=tuple(stop))

    def contains_box(self, start: Sequence[int], stop: Sequence[int]) -> bool:
        return all(
            a <= s and t <= b
            for a, b, s, t in zip(self.start, self.stop, start, stop, strict=False)
        )


_PLAIN_PATH = re.compile(r"(?:[A-Za-z0-9][A-Za-z0-9_.\-]*/)*[A-Za-z0-9][A-Za-z0-9_.\-]*")
"""Paths of the form every writer uses (``c/<write id>-0.array_record``): segments
that start with a letter or digit, so none is empty, ``.``, ``..`` or a reserved name
but ``arrayds.json`` (checked apart)."""


def _check_rel_path(p: Any, what: str) -> str:
    if isinstance(p, str) and _PLAIN_PATH.fullmatch(p) and MANIFEST not in p:
        return p  # the common case, decided by one match
    if not isinstance(p, str) or not p:
        raise ValueError(f"shard path {p!r} must be a non-empty string")
    if p.startswith("/") or "\\" in p or "\x00" in p or "://" in p:
        raise ValueError(f"shard path {p!r} must be relative to the node folder")
    for seg in p.split("/"):
        if seg in ("", ".", ".."):
            raise ValueError(f"shard path {p!r} must stay inside the node folder")
        if is_reserved_name(seg):
            raise ValueError(f"shard path {p!r} uses the reserved name {seg!r}")
    return p


class ShardList(Sequence[ShardEntry]):
    """The shard entries of an array, parsed and validated when first used (a long
    history then costs nothing to open or to append to; a damaged entry is still a
    :class:`CorruptionError` before any chunk is read). ``extended(new)`` is the list
    with ``new`` appended, without parsing the entries before them; for a list stored
    in segments (a :class:`arrayds.nodes.history.ShardLog`), ``hiding(new)`` is the
    list with ``new`` appended and the entries ``new`` hides dropped, parsing only the
    segments whose box meets ``new``.

    >>> grid = ChunkGrid.from_chunks(((1, 1),))
    >>> lst = ShardList([{"path": "c/a", "start": [0], "stop": [1]}], grid, "doc")
    >>> more = lst.extended([ShardEntry("c/b", (1,), (2,))])
    >>> len(more), [e.path for e in more]
    (2, ['c/a', 'c/b'])
    """

    __slots__ = ("_drop", "_extra", "_grid", "_parsed", "_raw", "_segments", "_what")

    def __init__(
        self,
        raw: Sequence[Any],
        grid: ChunkGrid,
        what: str,
        extra: Sequence[ShardEntry] = (),
    ) -> None:
        self._raw = raw
        self._grid = grid
        self._what = what
        self._extra = list(extra)
        self._parsed: list[ShardEntry] | None = None
        self._segments: dict[int, Sequence[ShardEntry]] = {}
        """Parsed segments of a ShardLog by number (-1: its tail)."""
        self._drop: dict[int, frozenset[int]] = {}
        """Positions of the stored entries this list leaves out, by segment (-1: tail)."""

    def _segment(self, k: int) -> Sequence[ShardEntry]:
        """Segment ``k`` of the stored log parsed (-1: the tail), without the dropped:
        as :class:`ShardColumns` when its entries have the form writers give them."""
        got = self._segments.get(k)
        if got is None:
            raw = self._raw
            assert isinstance(raw, ShardLog)
            stored = raw.tail if k < 0 else raw.load(k)
            grid = self._grid
            got = _plain_entries(stored, grid.ndim, grid.grid_shape)
            if got is None:
                got = _parse_shards(stored, grid, self._what)
            self._segments[k] = got
        drop = self._drop.get(k)
        if not drop:
            return got
        if isinstance(got, ShardColumns):
            return got.without(drop)
        return [e for i, e in enumerate(got) if i not in drop]

    def _entries(self) -> list[ShardEntry]:
        if self._parsed is None:
            raw = self._raw
            if isinstance(raw, ShardLog):
                out: list[ShardEntry] = []
                for k in [*range(raw.nsegments), -1]:
                    out += self._segment(k)
                self._parsed = out + self._extra
            else:
                self._parsed = _parse_shards(raw, self._grid, self._what) + self._extra
        return self._parsed

    def __len__(self) -> int:
        dropped = sum(len(d) for d in self._drop.values())
        return len(self._raw) - dropped + len(self._extra)

    def __getitem__(self, i: Any) -> Any:
        return self._entries()[i]

    def __iter__(self) -> Any:
        return iter(self._entries())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (ShardList, list)):
            return list(self) == list(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"ShardList({len(self)} entries)"

    def _derived(self, extra: list[ShardEntry], drop: dict[int, frozenset[int]]) -> ShardList:
        out = ShardList(self._raw, self._grid, self._what, extra)
        out._segments = self._segments
        out._drop = drop
        return out

    def extended(self, new: Sequence[ShardEntry]) -> ShardList:
        """This list with ``new`` appended (nothing parsed that was not already)."""
        out = self._derived([*self._extra, *new], self._drop)
        if self._parsed is not None:
            out._parsed = [*self._parsed, *new]
        return out

    def hiding(self, new: Sequence[ShardEntry]) -> ShardList | None:
        """This list without the entries some box of ``new`` holds whole, then ``new``
        (what a region write makes), parsing only the segments whose box meets a box
        of ``new``; ``None`` unless the list is stored in segments and not parsed."""
        raw = self._raw
        if self._parsed is not None or not isinstance(raw, ShardLog) or not new:
            return None
        ndim = len(new[0].start)
        lo = [min(n.start[d] for n in new) for d in range(ndim)]
        hi = [max(n.stop[d] for n in new) - 1 for d in range(ndim)]
        drop = dict(self._drop)
        for k in [*raw.meeting(lo, hi), -1]:
            got = self._segments.get(k)
            if got is None:
                self._segment(k)
                got = self._segments[k]
            gone = {
                i for i, e in enumerate(got) if any(n.contains_box(e.start, e.stop) for n in new)
            }
            if gone:
                drop[k] = drop.get(k, frozenset()) | gone
        extra = [e for e in self._extra if not any(n.contains_box(e.start, e.stop) for n in new)]
        return self._derived([*extra, *new], drop)

    def stored_change(self, base: Any) -> tuple[dict[str, list[int]], list[ShardEntry]] | None:
        """How this list follows from the stored shard log ``base`` (the head's
        ``shards`` value): the positions it drops, by segment path (``""``: the tail),
        and the entries it appends; ``None`` unless it was derived (:meth:`extended`,
        :meth:`hiding`) from exactly that log."""
        raw = self._raw
        if (
            not isinstance(raw, ShardLog)
            or not isinstance(base, dict)
            or base.get("segments") != raw.refs
            or base.get("tail") != raw.tail
        ):
            return None
        drop = {
            raw.segment_ref(k)["path"] if k >= 0 else "": sorted(pos)
            for k, pos in self._drop.items()
        }
        return drop, list(self._extra)

    def stored_positions(
        self,
        lo: Sequence[int],
        hi: Sequence[int],
        pick: Callable[[ShardColumns], np.ndarray],
    ) -> dict[str, list[int]]:
        """Of this list as it is stored (not derived): the positions of the entries
        ``pick`` selects (a boolean per entry of the columns it is given), by the path
        of the segment that holds them (``""``: the tail or a plain list), among the
        segments that may hold a chunk of the box ``lo`` .. ``hi`` (both included):
        what an :class:`arrayds.nodes.history.Extend`'s ``drop`` names. One segment
        is parsed at a time and none is kept, so a region as large as the array
        costs one segment of memory (plus the positions).

        >>> grid = ChunkGrid.from_chunks(((1, 1, 1),))
        >>> lst = ShardList([{"path": f"c/{i}", "start": [i], "stop": [i + 1]}
        ...                  for i in range(3)], grid, "doc")
        >>> lst.stored_positions([1], [2], lambda cols: cols.starts[:, 0] >= 1)
        {'': [1, 2]}
        """
        raw = self._raw
        if self._extra or self._drop:
            raise ValueError(f"{self._what}: positions of a derived shard list")
        grid = self._grid
        parts: Iterable[tuple[str, Sequence[Any]]] = [("", raw)]
        if isinstance(raw, ShardLog):
            parts = (
                ("", raw.tail) if k < 0 else (raw.segment_ref(k)["path"], raw.load(k, False))
                for k in [*raw.meeting(lo, hi), -1]
            )
        out: dict[str, list[int]] = {}
        for path, stored in parts:
            got = _plain_entries(stored, grid.ndim, grid.grid_shape)
            cols = ShardColumns.of(
                got if got is not None else _parse_shards(stored, grid, self._what), grid.ndim
            )
            picked = np.flatnonzero(pick(cols)).tolist() if len(cols) else []
            if picked:
                out[path] = picked
        return out

    def selection(self, lo: Sequence[int], hi: Sequence[int]) -> tuple[Any, ...] | None:
        """For a list stored as a :class:`arrayds.nodes.history.ShardLog` of several
        segments: the key of the part of it that may hold a chunk of the box ``lo`` ..
        ``hi`` (both included), for :meth:`entries_of`. ``None`` when the list is
        parsed already or the part would be every segment."""
        raw = self._raw
        if self._parsed is not None or not isinstance(raw, ShardLog):
            return None
        ks = raw.meeting(lo, hi)
        if len(ks) == raw.nsegments:
            return None
        return (*ks, -len(self._extra) - 1)

    def entries_of(self, key: tuple[Any, ...]) -> ShardColumns:
        """The entries of the part :meth:`selection` named, in order: those of its
        segments, the tail, the entries added since. The last of them that holds a
        chunk of the box is the last of the whole list that does."""
        parts = [self._segment(k) for k in [*key[:-1], -1]]
        return ShardColumns.joined([*parts, self._extra[: -key[-1] - 1]], self._grid.ndim)

    @property
    def extent(self) -> tuple[int, ...]:
        """A chunk-grid shape every entry's box lies within (known without parsing)."""
        ext = list(self._grid.grid_shape)
        for e in self._extra:
            ext = [max(a, b) for a, b in zip(ext, e.stop, strict=False)]
        return tuple(ext)

    def stored(self) -> dict[str, Any] | None:
        """The shard log this list is, as the head stores it (``{"segments", "tail"}``:
        what a pickle carries, so a process that unpickles it loads only the segments
        it reads), or ``None`` if it is not a stored log as it was read."""
        raw = self._raw
        if not isinstance(raw, ShardLog) or self._extra or self._drop:
            return None
        return {"segments": raw.refs, "tail": raw.tail}

    def extension(self) -> tuple[Sequence[Any], list[Any], list[int]] | None:
        """How this list follows from the stored entries as they were read: those
        entries (a :class:`arrayds.nodes.history.ShardLog` or a list, unparsed), the
        JSON of the entries added since (:meth:`extended`, :meth:`hiding`) and the
        positions of the stored entries it leaves out (:meth:`hiding`): what an
        :class:`arrayds.nodes.history.Appended` of the list is made of. ``None`` if
        it leaves out entries of a list not stored in segments.

        >>> grid = ChunkGrid.from_chunks(((1, 1),))
        >>> lst = ShardList([{"path": "c/a", "start": [0], "stop": [1]}], grid, "doc")
        >>> lst.extended([ShardEntry("c/b", (1,), (2,))]).extension()[1:]
        ([{'path': 'c/b', 'start': [1], 'stop': [2], 'records': 1}], [])
        """
        raw = self._raw
        drop: list[int] = []
        if self._drop:
            if not isinstance(raw, ShardLog):
                return None
            for k, gone in self._drop.items():
                first = raw.first_entry(raw.nsegments if k < 0 else k)
                drop += [first + p for p in gone]
        return raw, [e.to_json() for e in self._extra], sorted(drop)

    def paths(self) -> Iterator[list[str]]:
        """The file paths of the entries, one stored segment at a time (each loaded
        and dropped; a list not stored in segments at once): what removes the files
        of a replaced list without holding it whole.

        >>> grid = ChunkGrid.from_chunks(((1, 1),))
        >>> list(ShardList([{"path": "c/a", "start": [0], "stop": [1]}], grid, "doc").paths())
        [['c/a']]
        """
        raw = self._raw
        if not isinstance(raw, ShardLog) or self._extra or self._drop:
            yield [e.path for e in self]
            return
        for k in [*range(raw.nsegments), -1]:
            stored = raw.tail if k < 0 else raw.load(k, cache=False)
            yield [e["path"] for e in stored if isinstance(e, dict) and "path" in e]

    def json(self) -> list[Any]:
        """The entries as manifest JSON (the stored ones as they were read)."""
        raw = self._raw
        if self._drop and isinstance(raw, ShardLog):
            kept: list[Any] = []
            for k in [*range(raw.nsegments), -1]:
                gone = self._drop.get(k, frozenset())
                stored = raw.tail if k < 0 else raw.load(k)
                kept += [e for i, e in enumerate(stored) if i not in gone]
            return [*kept, *(e.to_json() for e in self._extra)]
        return [*raw, *(e.to_json() for e in self._extra)]


class ShardColumns(Sequence[ShardEntry]):
    """Shard entries kept as columns (their paths, boxes as ``(n, ndim)`` arrays,
    offsets and byte sizes), as a parsed segment is: a :class:`ShardTable` is built
    from the arrays without an object per entry, and an entry is made when asked for.

    >>> cols = ShardColumns.of([ShardEntry("c/a", (0,), (2,)), ShardEntry("c/b", (2,), (3,))])
    >>> len(cols), cols[1], cols.stops.tolist()
    (2, ShardEntry(path='c/b', start=(2,), stop=(3,), offset=0, bytes=None), [[2], [3]])
    """

    __slots__ = ("offsets", "paths", "sizes", "starts", "stops")

    def __init__(
        self,
        paths: list[str],
        starts: np.ndarray,
        stops: np.ndarray,
        offsets: np.ndarray,
        sizes: list[int | None],
    ) -> None:
        self.paths = paths
        self.starts = starts
        self.stops = stops
        self.offsets = offsets
        self.sizes = sizes

    @classmethod
    def of(cls, entries: Sequence[ShardEntry], ndim: int | None = None) -> ShardColumns:
        """``entries`` as columns (``ndim``: their boxes' rank, needed when there are none)."""
        if isinstance(entries, ShardColumns):
            return entries
        n = len(entries)
        nd = len(entries[0].start) if entries else (ndim or 0)
        return cls(
            [e.path for e in entries],
            np.array([e.start for e in entries], dtype=np.int64).reshape(n, nd),
            np.array([e.stop for e in entries], dtype=np.int64).reshape(n, nd),
            np.array([e.offset for e in entries], dtype=np.int64),
            [e.bytes for e in entries],
        )

    @classmethod
    def joined(cls, parts: Sequence[Sequence[ShardEntry]], ndim: int) -> ShardColumns:
        """The entries of ``parts``, one after another, as columns."""
        cols = [cls.of(p, ndim) for p in parts]
        return cls(
            [p for c in cols for p in c.paths],
            np.concatenate([c.starts for c in cols]) if cols else np.zeros((0, ndim), np.int64),
            np.concatenate([c.stops for c in cols]) if cols else np.zeros((0, ndim), np.int64),
            np.concatenate([c.offsets for c in cols]) if cols else np.zeros(0, np.int64),
            [b for c in cols for b in c.sizes],
        )

    def without(self, gone: frozenset[int]) -> ShardColumns:
        """These entries but those at the positions ``gone``."""
        keep = np.ones(len(self.paths), dtype=bool)
        keep[list(gone)] = False
        idx = np.flatnonzero(keep).tolist()
        return ShardColumns(
            [self.paths[i] for i in idx],
            self.starts[keep],
            self.stops[keep],
            self.offsets[keep],
            [self.sizes[i] for i in idx],
        )

    def __len__(self) -> int:
        return len(self.paths)

    def _entry(self, i: int) -> ShardEntry:
        entry = _new_entry(ShardEntry)
        entry.__dict__.update(
            path=self.paths[i],
            start=tuple(self.starts[i].tolist()),
            stop=tuple(self.stops[i].tolist()),
            offset=int(self.offsets[i]),
            bytes=self.sizes[i],
        )
        return entry

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._entry(k) for k in range(*i.indices(len(self)))]
        n = len(self.paths)
        if not -n <= i < n:
            raise IndexError(i)
        return self._entry(i % n)

    def __iter__(self) -> Iterator[ShardEntry]:
        return (self._entry(i) for i in range(len(self.paths)))


LAZY_ENTRIES = 32
"""Arrays with more shard entries than a head keeps inline parse them when first used,
not when opened (fewer are checked at once, as before)."""


class ShardTable:
    """The shard entries of an array as numpy arrays, for vectorized lookups.

    ``locate(coords)`` answers, for K chunk coordinates at once, which entry holds
    each chunk (the last entry whose box contains it; -1 for none) and the record
    index inside that entry's file. Nothing is stored per chunk: the boxes'
    boundaries cut each axis into at most 2S+1 intervals, and a *cell table* gives the
    visible entry of each product of intervals (built once, by painting the boxes
    oldest first). A lookup is then one ``searchsorted`` per axis. For histories so
    fragmented that the cell table would exceed ``CELL_LIMIT`` cells, lookups scan
    the entries instead (O(K x S') with S' the entries meeting the query's bounding
    box, newest first, in bounded memory).

    >>> t = ShardTable([ShardEntry("c/a", (0, 0), (2, 2)), ShardEntry("c/b", (1, 1), (2, 3))], 2)
    >>> e, r = t.locate(np.array([[0, 0], [1, 1], [1, 2], [3, 3]]))
    >>> e.tolist(), r.tolist()
    ([0, 1, 1, -1], [0, 0, 1, -1])
    """

    _BLOCK = 1 << 22  # K x S booleans per step of the scan
    CELL_LIMIT = 1 << 22

    def __init__(self, entries: Sequence[ShardEntry], ndim: int) -> None:
        cols = entries if isinstance(entries, ShardColumns) else None
        self.entries: Sequence[ShardEntry] = entries if cols is not None else list(entries)
        self.ndim = ndim
        if cols is None:
            cols = ShardColumns.of(self.entries, ndim)
        s = len(cols)
        self.starts = cols.starts
        self.stops = cols.stops
        self.offsets = cols.offsets
        ext = self.stops - self.starts
        # C-order strides of each box, in records
        strides = np.ones((s, ndim), dtype=np.int64)
        for d in range(ndim - 2, -1, -1):
            strides[:, d] = strides[:, d + 1] * ext[:, d + 1]
        self.strides = strides
        paths: dict[str, int] = {}
        self.path_ids = np.array(
            [paths.setdefault(p, len(paths)) for p in cols.paths], dtype=np.int64
        )
        self.paths = list(paths)
        # every shard file -> its byte size where the manifest records it, else None
        # (opens on object stores then need no size request)
        self.sizes: dict[str, int | None] = dict.fromkeys(self.paths)
        for p, b in zip(cols.paths, cols.sizes, strict=True):
            if b:
                self.sizes[p] = b
        self._cells: np.ndarray | None = None
        self._bounds: list[np.ndarray] = []
        self._bounds_l: list[list[int]] = []
        self._cells_built = False
        self._records: dict[str, int] | None = None

    def __len__(self) -> int:
        return len(self.entries)

    def records_in(self, path: str) -> int:
        """How many records the entries place in shard file ``path``."""
        return self.records_per_path().get(path, 0)

    def records_per_path(self) -> dict[str, int]:
        """How many records the entries place in each shard file they name."""
        if self._records is None:
            per_entry = np.prod(self.stops - self.starts, axis=1)
            sums = np.bincount(self.path_ids, weights=per_entry, minlength=len(self.paths))
            self._records = dict(zip(self.paths, sums.astype(np.int64).tolist(), strict=True))
        return self._records

    # -- the cell table

    def _build_cells(self) -> None:
        self._cells_built = True
        if not self.entries:
            return
        bounds = [
            np.unique(np.concatenate([self.starts[:, d], self.stops[:, d]]))
            for d in range(self.ndim)
        ]
        if math.prod(len(b) - 1 for b in bounds) > self.CELL_LIMIT:
            return
        cells = np.full([len(b) - 1 for b in bounds], -1, dtype=np.int64)
        lo = [np.searchsorted(b, self.starts[:, d]) for d, b in enumerate(bounds)]
        hi = [np.searchsorted(b, self.stops[:, d]) for d, b in enumerate(bounds)]
        # a cell shows the newest entry that covers it: the greatest index, so boxes
        # are painted in any order, the one-cell boxes all at once
        ids = np.arange(len(self.entries), dtype=np.int64)
        one = np.ones(len(ids), dtype=bool)
        for lo_d, hi_d in zip(lo, hi, strict=True):
            one &= hi_d - lo_d == 1
        if self.ndim == 0:  # one cell, which every entry covers
            cells[()] = ids[-1]
        elif one.any():
            np.maximum.at(cells, tuple(lo_d[one] for lo_d in lo), ids[one])
        for i in np.flatnonzero(~one).tolist():
            view = cells[tuple(slice(int(lo[d][i]), int(hi[d][i])) for d in range(self.ndim))]
            np.maximum(view, i, out=view)
        self._bounds = bounds
        self._bounds_l = [b.tolist() for b in bounds]
        self._cells = cells

    def locate(self, coords: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """coords: (K, ndim) int64 -> (entry index or -1, record index or -1)."""
        coords = np.asarray(coords, dtype=np.int64)
        if coords.ndim != 2:
            coords = coords.reshape(-1, self.ndim) if self.ndim else coords.reshape(1, 0)
        k = coords.shape[0]
        if k == 0 or not self.entries:
            return np.full(k, -1, dtype=np.int64), np.full(k, -1, dtype=np.int64)
        if not self._cells_built:
            self._build_cells()
        if self._cells is not None:
            if k == 1:
                return self._locate_one(coords[0].tolist())
            entry = self._locate_cells(coords)
        else:
            entry = self._locate_scan(coords)
        record = np.full(k, -1, dtype=np.int64)
        found = entry >= 0
        if found.all():
            rel = coords - self.starts[entry]
            record = self.offsets[entry] + np.einsum("ij,ij->i", rel, self.strides[entry])
        elif found.any():
            e = entry[found]
            rel = coords[found] - self.starts[e]
            record[found] = self.offsets[e] + np.einsum("ij,ij->i", rel, self.strides[e])
        return entry, record

    def locate_one(self, c: Sequence[int]) -> tuple[int, int]:
        """(entry, record) of one chunk coordinate given as ints; (-1, -1) if none."""
        if not self.entries:
            return -1, -1
        if not self._cells_built:
            self._build_cells()
        if self._cells is None:
            e, r = self.locate(np.array([list(c)], dtype=np.int64).reshape(1, self.ndim))
            return int(e[0]), int(r[0])
        idx = []
        for x, b in zip(c, self._bounds_l, strict=True):
            i = bisect.bisect_right(b, x) - 1
            if i < 0 or i >= len(b) - 1:
                return -1, -1
            idx.append(i)
        e = int(self._cells[tuple(idx)])
        if e < 0:
            return -1, -1
        entry = self.entries[e]
        rec = 0
        for x, a, b in zip(c, entry.start, entry.stop, strict=True):
            rec = rec * (b - a) + (x - a)
        return e, entry.offset + rec

    def _locate_one(self, c: list[int]) -> tuple[np.ndarray, np.ndarray]:
        e, r = self.locate_one(c)
        return np.array([e], dtype=np.int64), np.array([r], dtype=np.int64)

    def _locate_cells(self, coords: np.ndarray) -> np.ndarray:
        assert self._cells is not None
        k = coords.shape[0]
        if self.ndim == 0:
            return np.full(k, int(self._cells[()]), dtype=np.int64)
        valid = np.ones(k, dtype=bool)
        idx = []
        for d, b in enumerate(self._bounds):
            i = np.searchsorted(b, coords[:, d], side="right") - 1
            valid &= (i >= 0) & (i < len(b) - 1)
            idx.append(np.minimum(np.maximum(i, 0), len(b) - 2))
        entry = self._cells[tuple(idx)]
        if not valid.all():
            entry = np.where(valid, entry, -1)
        return entry

    def _locate_scan(self, coords: np.ndarray) -> np.ndarray:
        k = coords.shape[0]
        entry = np.full(k, -1, dtype=np.int64)
        if self.ndim:
            lo = coords.min(axis=0)
            hi = coords.max(axis=0)
            meets = np.all((self.starts <= hi) & (self.stops > lo), axis=1)
            cand = np.flatnonzero(meets)
        else:
            cand = np.arange(len(self.entries))
        if cand.size:
            step = max(1, self._BLOCK // max(k, 1))
            todo = np.ones(k, dtype=bool)
            # newest entries first: the first hit wins
            for hi_i in range(cand.size, 0, -step):
                blk = cand[max(0, hi_i - step) : hi_i][::-1]
                rows = np.flatnonzero(todo)
                c = coords[rows]
                inside = np.ones((rows.size, blk.size), dtype=bool)
                for d in range(self.ndim):
                    cd = c[:, d : d + 1]
                    inside &= (cd >= self.starts[blk, d]) & (cd < self.stops[blk, d])
                hit = inside.any(axis=1)
                first = inside.argmax(axis=1)
                entry[rows[hit]] = blk[first[hit]]
                todo[rows[hit]] = False
                if not todo.any():
                    break
        return entry

    def covered_count(self, grid_shape: Sequence[int]) -> int:
        """How many chunks of the grid some entry covers (the union of the boxes),
        exact and independent of the grid size (from the cell table)."""
        if not self.entries:
            return 0
        if self.ndim == 0:
            return 1
        if not self._cells_built:
            self._build_cells()
        if self._cells is None:
            # too fragmented for a cell table: the sum of the boxes bounds the union
            return min(math.prod(grid_shape), int(np.prod(self.stops - self.starts, axis=1).sum()))
        vol = np.ones(self._cells.shape, dtype=np.float64)
        for w in np.ix_(*[np.diff(b) for b in self._bounds]):
            vol = vol * w
        return int(round(float(vol[self._cells >= 0].sum())))


@dataclass
class ArrayManifest:
    """An array node (docs/spec.md section 4). ``grid`` is the chunk grid, ``fill``
    a 0-d array of ``dtype``, ``shards`` the entries in commit order."""

    dtype: np.dtype
    grid: ChunkGrid
    fill: np.ndarray
    compression: str = DEFAULT_COMPRESSION
    dims: tuple[str, ...] | None = None
    attrs: dict[str, Any] = field(default_factory=dict)
    shards: Sequence[ShardEntry] = field(default_factory=list)
    chunk_shape: tuple[int, ...] = ()
    generation: int = 0
    commit: str = ""
    _table: ShardTable | None = field(default=None, repr=False, compare=False)
    _partial: dict[Any, ShardTable] = field(default_factory=dict, repr=False, compare=False)
    _sizes: dict[str, int | None] = field(default_factory=dict, repr=False, compare=False)
    """The byte size of each shard file of the tables :meth:`table_for` built."""
    _records: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    """The records those tables place in each of their shard files (the most any did)."""

    kind = "array"

    @property
    def shape(self) -> tuple[int, ...]:
        return self.grid.shape

    @property
    def ndim(self) -> int:
        return self.grid.ndim

    @property
    def table(self) -> ShardTable:
        """The shard table of every entry (a long list stored in segments is read
        whole: :meth:`table_for` reads only what a box needs)."""
        if self._table is None:
            self._table = ShardTable(self.shards, self.ndim)
        return self._table

    PARTIAL_ENTRIES = 1 << 18
    """How many entries the tables of parts of a long shard list that
    :meth:`table_for` keeps may hold in all (the least recently used go first)."""

    def table_for(self, lo: Sequence[int], hi: Sequence[int]) -> ShardTable:
        """A shard table that locates every chunk of the box ``lo`` .. ``hi`` (both
        included) as :attr:`table` does: :attr:`table` itself if it is built or the
        list is short, else a table of only the entries of the segments that meet
        the box (:meth:`ShardList.selection`; kept for the next reads, up to
        :data:`PARTIAL_ENTRIES` entries in all). Its entry numbers are its own: use
        its ``entries``, ``paths`` and ``path_ids``."""
        if self._table is None and isinstance(self.shards, ShardList):
            key = self.shards.selection(lo, hi)
            if key is not None:
                cache = self._partial
                t = cache.pop(key, None)
                if t is None:
                    t = ShardTable(self.shards.entries_of(key), self.ndim)
                    self._sizes.update(t.sizes)  # facts of immutable files: kept
                    known = self._records
                    for path, n in t.records_per_path().items():
                        if n > known.get(path, 0):
                            known[path] = n
                    held = sum(len(x) for x in cache.values()) + len(t)
                    while cache and held > self.PARTIAL_ENTRIES:
                        held -= len(cache.pop(next(iter(cache))))
                cache[key] = t  # the most recently used last
                return t
        return self.table

    def shard_sizes(self) -> dict[str, int | None]:
        """The byte size of each shard file the manifest records (``None``: not
        recorded), of every file if the whole table is built, else of those of the
        tables :meth:`table_for` built (opening a shard needs its own size only)."""
        if self._table is not None or not self._sizes:
            return self.table.sizes
        return self._sizes

    def shard_records(self, path: str) -> int:
        """How many records the entries place in shard file ``path`` (of the tables
        built, as :meth:`shard_sizes`: a read may see fewer than the file holds when
        its entries span segments it did not need)."""
        if self._table is not None or not self._sizes:
            return self.table.records_in(path)
        return self._records.get(path, 0)

    @classmethod
    def new(
        cls,
        shape: Sequence[int],
        dtype: Any,
        chunks: Sequence[Sequence[int]],
        *,
        fill_value: Any = 0,
        compression: str = DEFAULT_COMPRESSION,
        dims: Sequence[str] | None = None,
        attrs: Mapping[str, Any] | None = None,
        name: str = "array",
    ) -> ArrayManifest:
        """A new empty array (no shards) after validating every argument.
        ``chunks`` are dask-style per-axis lengths (see :func:`grid.normalize_chunks`)."""
        dt = check_dtype(dtype, name)
        shape = tuple(int(n) for n in shape)
        if any(n < 0 for n in shape):
            raise ValueError(f"{name}: shape {shape} has a negative length")
        grid = ChunkGrid.from_chunks(chunks)
        if grid.shape != shape:
            raise ValueError(f"{name}: chunks {tuple(chunks)} do not match shape {shape}")
        too_big = _largest_chunk_error(
            dt, [max((r[0] for r in a.runs), default=0) for a in grid.axes]
        )
        if too_big:
            raise ValueError(f"{name}: {too_big}; choose smaller chunks")
        m = cls(
            dtype=dt,
            grid=grid,
            fill=make_fill_value(fill_value, dt, name),
            compression=check_compression(compression, name),
            dims=_check_dims(dims, len(shape), name),
            attrs=check_attrs(attrs, name),
            chunk_shape=tuple(max((max(c) if c else 0), 0) for c in chunks),
        )
        return m

    def with_(self, **changes: Any) -> ArrayManifest:
        """A copy with some fields replaced (the shard table is rebuilt lazily)."""
        changes.setdefault("_table", None)
        changes.setdefault("_partial", {})
        changes.setdefault("_sizes", {})
        changes.setdefault("_records", {})
        return replace(self, **changes)

    def committed(self, generation: int, commit: str) -> ArrayManifest:
        """This manifest as committed at ``generation`` by ``commit`` (its shard table
        kept: the entries are the same)."""
        return replace(self, generation=generation, commit=commit)

    def to_json(self) -> dict[str, Any]:
        shards = self.shards
        entries = shards.json() if isinstance(shards, ShardList) else [e.to_json() for e in shards]
        return {**self.header_json(), "shards": entries}

    def header_json(self) -> dict[str, Any]:
        """Every field of :meth:`to_json` but the shard entries (what a commit that
        only adds entries writes, :class:`arrayds.nodes.history.Extend`)."""
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "kind": "array",
            "generation": self.generation,
            "commit": self.commit,
            "shape": list(self.shape),
            "dtype": self.dtype.str,
            "chunks": self.grid.runs(),
            "chunk_shape": list(self.chunk_shape),
            "fill_value": encode_fill_value(self.fill),
            "compression": self.compression,
            "dims": None if self.dims is None else list(self.dims),
            "attrs": self.attrs,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], what: str) -> ArrayManifest:
        """Parse and validate; any violation is a :class:`CorruptionError`."""
        shape = require_field(d, "shape", list, what)
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape):
            raise CorruptionError(f"{what}: manifest shape {shape!r} must be non-negative ints")
        ndim = len(shape)
        try:
            dtype = check_dtype(require_field(d, "dtype", str, what), what)
        except (TypeError, ValueError) as e:
            raise CorruptionError(f"{what}: manifest dtype: {e}") from None
        runs = require_field(d, "chunks", list, what)
        try:
            if len(runs) != ndim:
                raise ValueError(f"{len(runs)} axes, expected {ndim}")
            axes = []
            for r in runs:
                if not isinstance(r, list) or not all(
                    isinstance(p, list)
                    and len(p) == 2
                    and all(isinstance(x, int) and not isinstance(x, bool) for x in p)
                    for p in r
                ):
                    raise ValueError(f"bad run list {r!r}")
                axes.append(AxisGrid(r))
            grid = ChunkGrid(axes)
            if grid.shape != tuple(shape):
                raise ValueError(f"the runs cover {grid.shape}, expected {tuple(shape)}")
        except ValueError as e:
            raise CorruptionError(f"{what}: manifest chunks: {e}") from None
        try:
            fill = decode_fill_value(d.get("fill_value", 0), dtype)
        except (ValueError, TypeError) as e:
            raise CorruptionError(f"{what}: manifest fill_value: {e}") from None
        compression = d.get("compression", "zstd:3")
        if not isinstance(compression, str):
            raise CorruptionError(f"{what}: manifest compression {compression!r} is not a string")
        dims = d.get("dims")
        if dims is not None and (
            not isinstance(dims, list)
            or len(dims) != ndim
            or not all(isinstance(x, str) for x in dims)
        ):
            raise CorruptionError(f"{what}: manifest dims {dims!r} must be {ndim} names or null")
        attrs = d.get("attrs", {})
        if not isinstance(attrs, dict):
            raise CorruptionError(f"{what}: manifest attrs must be an object")
        gen = d.get("generation", 0)
        if not isinstance(gen, int) or isinstance(gen, bool) or gen < 0:
            raise CorruptionError(f"{what}: manifest generation {gen!r} is not a count")
        chunk_shape = d.get("chunk_shape")
        if chunk_shape is None:
            chunk_shape = [ax.nominal() for ax in grid.axes]
        if (
            not isinstance(chunk_shape, list)
            or len(chunk_shape) != ndim
            or not all(isinstance(x, int) and x >= 0 for x in chunk_shape)
        ):
            raise CorruptionError(f"{what}: manifest chunk_shape {chunk_shape!r} is invalid")
        for field_name, cshape in (
            ("chunks", [max((r[0] for r in a.runs), default=0) for a in grid.axes]),
            ("chunk_shape", chunk_shape),
        ):
            too_big = _largest_chunk_error(dtype, cshape)
            if too_big:
                raise CorruptionError(f"{what}: manifest {field_name}: {too_big}")
        raw_shards = d.get("shards")
        shards: Sequence[ShardEntry]
        if isinstance(raw_shards, Appended) and not raw_shards.drop and not raw_shards.segments:
            # a list a commit extended: the stored entries stay as they were read
            added = _parse_shards(raw_shards.added, grid, what)
            shards = ShardList(raw_shards.before, grid, what, added)
        elif isinstance(raw_shards, (ShardLog, Appended)):
            shards = ShardList(raw_shards, grid, what)
        else:
            raw_shards = require_field(d, "shards", list, what)
            shards = (
                ShardList(raw_shards, grid, what)
                if len(raw_shards) > LAZY_ENTRIES
                else _parse_shards(raw_shards, grid, what)
            )
        return cls(
            dtype=dtype,
            grid=grid,
            fill=fill,
            compression=compression,
            dims=None if dims is None else tuple(dims),
            attrs=dict(attrs),
            shards=shards,
            chunk_shape=tuple(chunk_shape),
            generation=gen,
            commit=str(d.get("commit", "")),
        )


def _parse_shards(raw: Sequence[Any], grid: ChunkGrid, what: str) -> list[ShardEntry]:
    ndim = grid.ndim
    gshape = grid.grid_shape
    plain = _plain_entries(raw, ndim, gshape)
    if plain is not None:
        return list(plain)
    out = []
    for i, e in enumerate(raw):
        entry = _plain_entry(e, ndim, gshape)
        out.append(entry if entry is not None else _parse_entry(i, e, ndim, gshape, what))
    return out


_new_entry = object.__new__

_PLAIN_PATHS = re.compile(rf"(?:{_PLAIN_PATH.pattern})(?:\n(?:{_PLAIN_PATH.pattern}))*")
"""Plain paths joined by newlines (which no plain path holds)."""


def _plain_entries(raw: Sequence[Any], ndim: int, gshape: tuple[int, ...]) -> ShardColumns | None:
    """The entries of ``raw`` as columns if every one has the form :func:`_plain_entry`
    accepts, checked a column at a time (a segment of 1024 entries in a fraction of
    the time of one entry at a time); ``None`` if any has not, for the entry-by-entry
    parse to name it."""
    n = len(raw)
    if n < 8 or any(type(e) is not dict for e in raw):
        return None
    try:
        paths = [e["path"] for e in raw]
        starts = [e["start"] for e in raw]
        stops = [e["stop"] for e in raw]
    except KeyError:
        return None
    offsets = [e.get("offset", 0) for e in raw]
    sizes = [e.get("bytes") for e in raw]
    records = [e.get("records") for e in raw]
    if (
        set(map(type, paths)) != {str}
        or set(map(type, starts)) != {list}
        or set(map(type, stops)) != {list}
        or not set(map(type, offsets)) <= {int}
        or not set(map(type, sizes)) <= {int, type(None)}
        or not set(map(type, records)) <= {int, type(None)}
        or any(len(b) != ndim for b in starts)
        or any(len(b) != ndim for b in stops)
        or not set(map(type, chain.from_iterable(starts))) <= {int}
        or not set(map(type, chain.from_iterable(stops))) <= {int}
    ):
        return None
    joined = "\n".join(paths)
    if not _PLAIN_PATHS.fullmatch(joined) or MANIFEST in joined:
        return None
    try:
        lo = np.array(starts, dtype=np.int64).reshape(n, ndim)
        hi = np.array(stops, dtype=np.int64).reshape(n, ndim)
        off = np.array(offsets, dtype=np.int64)
        held = np.prod(hi - lo, axis=1)
    except OverflowError:
        return None
    if not (
        np.all((lo >= 0) & (lo < hi) & (hi <= np.array(gshape, dtype=np.int64)))
        and np.all(off >= 0)
        and all(b is None or b >= 0 for b in sizes)
        and all(r is None or r == h for r, h in zip(records, held.tolist(), strict=True))
    ):
        return None
    return ShardColumns(paths, lo, hi, off, sizes)


def _plain_entry(e: Any, ndim: int, gshape: tuple[int, ...]) -> ShardEntry | None:
    """The entry ``e`` if it has the form every writer gives (plain ints, a plain
    path, a box inside the grid, a ``records`` count that matches it), checked with
    few operations and built without the frozen dataclass's setattr calls; ``None``
    for anything else, which :func:`_parse_entry` checks and names."""
    if type(e) is not dict:
        return None
    path, start, stop = e.get("path"), e.get("start"), e.get("stop")
    offset, nbytes, records = e.get("offset", 0), e.get("bytes"), e.get("records")
    if not (
        type(path) is str
        and type(start) is list
        and type(stop) is list
        and len(start) == ndim == len(stop)
        and type(offset) is int
        and offset >= 0
        and (nbytes is None or (type(nbytes) is int and nbytes >= 0))
        and _PLAIN_PATH.fullmatch(path)
        and MANIFEST not in path
    ):
        return None
    held = 1
    for a, b, n in zip(start, stop, gshape, strict=False):
        if type(a) is not int or type(b) is not int or not 0 <= a < b <= n:
            return None
        held *= b - a
    if records is not None and (type(records) is not int or records != held):
        return None
    entry = _new_entry(ShardEntry)
    entry.__dict__.update(
        path=path, start=tuple(start), stop=tuple(stop), offset=offset, bytes=nbytes
    )
    return entry


def _parse_entry(i: int, e: Any, ndim: int, gshape: tuple[int, ...], what: str) -> ShardEntry:
    """Shard entry ``i``, checked field by field: a :class:`CorruptionError` naming
    what is wrong with it."""
    try:
        if not isinstance(e, dict):
            raise ValueError("not an object")
        path = _check_rel_path(e.get("path"), what)
        start, stop = e.get("start"), e.get("stop")
        if not (isinstance(start, list) and isinstance(stop, list)):
            raise ValueError("start/stop must be lists")
        if len(start) != ndim or len(stop) != ndim:
            raise ValueError(f"start/stop must have {ndim} entries")
        for a, b, n in zip(start, stop, gshape, strict=False):
            if not (isinstance(a, int) and isinstance(b, int)) or not 0 <= a < b <= n:
                raise ValueError(f"box {start}..{stop} is not inside the chunk grid {gshape}")
        offset = e.get("offset", 0)
        if not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset {offset!r}")
        nbytes = e.get("bytes")
        if nbytes is not None and (not isinstance(nbytes, int) or nbytes < 0):
            raise ValueError(f"bytes {nbytes!r}")
        entry = ShardEntry(path, tuple(start), tuple(stop), offset, nbytes)
        records = e.get("records")
        if records is not None:
            held = 1
            for a, b in zip(start, stop, strict=True):
                held *= b - a
            if records != held:
                raise ValueError(f"records {records!r}, but the box holds {held} chunks")
    except ValueError as err:
        raise CorruptionError(f"{what}: manifest shard entry {i}: {err}") from None
    return entry


def _check_dims(dims: Sequence[str] | None, ndim: int, name: str) -> tuple[str, ...] | None:
    if dims is None:
        return None
    if isinstance(dims, str) or not all(isinstance(x, str) for x in dims):
        raise TypeError(f"{name}: dims must be a sequence of str, got {dims!r}")
    dims = tuple(dims)
    if len(dims) != ndim:
        raise ValueError(f"{name}: dims {dims} must name each of the {ndim} axes")
    return dims
