"""The manifest of a ragged array: dtype, item ndim, the variable axis, piece length
and shard list with item ranges (docs/spec.md, "Ragged arrays").

>>> import numpy as np, arrayds
>>> ra = arrayds.ragged.write_ragged([np.zeros(3), np.zeros(5)], "memory://doc-ragged-manifest")
>>> ra.manifest.kind, [(s.start, s.stop) for s in ra.manifest.shards]
('ragged', [(0, 2)])
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import CorruptionError
from ...nodes.history import ShardLog
from ...nodes.names import (
    FORMAT,
    FORMAT_VERSION,
    is_reserved_name,
)
from ...nodes.options import DEFAULT_COMPRESSION
from ..array.tensor import check_dtype

if TYPE_CHECKING:
    pass

KIND = "ragged"
PIECE_BYTES = 1 << 20
"""Target uncompressed bytes of one piece when ``piece_len`` is not given (1 MiB)."""
SHARD_BYTES = 64 << 20
"""Target uncompressed bytes of one shard file when ``shard_size`` is not given."""


# ------------------------------------------------------------------ manifest


@dataclass(frozen=True)
class RaggedShard:
    """One shard file: items ``[start, stop)`` as ``records - 1`` piece records, then
    the index record (the items' shapes)."""

    path: str
    start: int
    stop: int
    records: int
    bytes: int | None = None

    @property
    def items(self) -> int:
        return self.stop - self.start

    @property
    def index_record(self) -> int:
        return self.records - 1

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "path": self.path,
            "items": [self.start, self.stop],
            "records": self.records,
        }
        if self.bytes is not None:
            d["bytes"] = self.bytes
        return d

    def shifted(self, by: int) -> RaggedShard:
        return RaggedShard(self.path, self.start + by, self.stop + by, self.records, self.bytes)


def _is_count(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


PARTS_CACHED = 64
"""The most parsed segments a :class:`RaggedShardLog` keeps (the raw ones are kept by
:func:`arrayds.nodes.history.segment`'s cache)."""


class RaggedShardLog(Sequence[RaggedShard]):
    """The shard entries of a ragged manifest whose list is stored in segments
    (:class:`arrayds.nodes.history.ShardLog`), parsed as reads need them: :meth:`locate`
    finds the shards of some items by binary search on the segment references'
    ``items`` summaries and loads only the segments that hold them (references
    without one: the whole list, as before them), ``shards[k]`` the segment of entry
    ``k``; iterating or slicing parses the whole list. Each segment is checked when
    loaded: against its reference (:func:`arrayds.nodes.history.segment`), and its
    entries as :func:`parse_entries` checks them, from where the segment before it
    ends; damage is a :class:`arrayds.CorruptionError` naming the segment.

    >>> from arrayds.nodes.history import encode
    >>> from arrayds.storage import new_store
    >>> st = new_store("memory://doc-ragged-shard-log")
    >>> es = [{"path": f"c/{i}", "items": [2 * i, 2 * i + 2], "records": 3} for i in range(3000)]
    >>> head, _ = encode(st, "", {"kind": "ragged", "shards": es}, None)
    >>> sl = RaggedShardLog(ShardLog(st, "", head["shards"], "doc"), 6000, "doc")
    >>> len(sl), sl.items, sl.locate(np.array([5, 4001])).tolist(), sl[2000].start
    (3000, 6000, [2, 2000], 4000)
    """

    def __init__(self, log: ShardLog, count: int | None, what: str) -> None:
        self.log = log
        self._count = count
        self._what = what
        self._end: int | None = None
        self._all: list[RaggedShard] | None = None
        self._starts: np.ndarray | None = None
        self._parts: OrderedDict[int, tuple[list[RaggedShard], np.ndarray]] = OrderedDict()
        self._lock = threading.Lock()

    def _bad(self, where: str = "") -> Callable[[str], CorruptionError]:
        return lambda msg: CorruptionError(f"{self._what}: ragged manifest{where}: {msg}")

    def _check_count(self, end: int) -> None:
        if self._count is not None and end != self._count:
            raise self._bad()(
                f"count {self._count!r} disagrees with the shards, which hold {end} items"
            )

    def entries(self) -> list[RaggedShard]:
        """Every entry, parsed and checked (each segment loaded once)."""
        if self._all is None:
            shards, end = parse_entries(self.log.entries(), 0, 0, self._bad())
            self._check_count(end)
            self._all = shards
        return self._all

    @property
    def items(self) -> int:
        """The number of items (the manifest's ``count``; without one, found from the
        list: its tail, or every segment if their references have no ``items``)."""
        if self._count is None:
            if self._all is None and self._tail() is not None and self._end is not None:
                self._count = self._end
            else:
                self._count = self.entries()[-1].stop if len(self) else 0
        return self._count

    def _tail(self) -> tuple[list[RaggedShard], np.ndarray] | None:
        """The tail parsed from where the last segment ends, its end checked against
        the manifest's ``count`` (``None``: a reference has no ``items``)."""
        seg, entry0, item0 = self.log.holding_entries(np.array([len(self)], dtype=np.int64))
        if item0 is None:
            return None
        return self._part(int(seg[0]), int(entry0[0]), int(item0[0]))

    def _part(self, k: int, entry0: int, item0: int) -> tuple[list[RaggedShard], np.ndarray]:
        """Segment ``k`` (``nsegments``: the tail), whose first entry is entry
        ``entry0`` of the list and first item ``item0``, parsed and checked, and the
        first item of each of its entries."""
        with self._lock:
            got = self._parts.get(k)
            if got is not None:
                self._parts.move_to_end(k)
                return got
        log = self.log
        tail = k == log.nsegments
        where = "" if tail else f": manifest segment {log.segment_ref(k).get('path')!r}"
        shards, end = parse_entries(log.part(k), entry0, item0, self._bad(where))
        if tail:
            self._end = end
            self._check_count(end)
        got = (shards, np.array([s.start for s in shards], dtype=np.int64))
        with self._lock:
            self._parts[k] = got
            while len(self._parts) > PARTS_CACHED:
                self._parts.popitem(last=False)
        return got

    def locate(self, items: np.ndarray) -> np.ndarray:
        """The shard (its number in the list) of each of ``items`` (valid item
        numbers), loading only the segments that hold them."""
        found = self.log.holding_items(items) if self._all is None else None
        if found is None:
            if self._starts is None:
                self._starts = np.array([s.start for s in self.entries()], dtype=np.int64)
            return np.searchsorted(self._starts, items, side="right") - 1
        self._tail()  # the list's end checked against the manifest's count
        seg, entry0, item0 = found
        out = np.empty(items.size, dtype=np.int64)
        for k in np.unique(seg).tolist():
            sel = np.flatnonzero(seg == k)
            j = int(sel[0])
            shards, starts = self._part(k, int(entry0[j]), int(item0[j]))
            local = np.searchsorted(starts, items[sel], side="right") - 1
            if (local < 0).any() or not shards or (items[sel] >= shards[-1].stop).any():
                raise self._bad()(f"no shard entry holds item {int(items[sel][0])}")
            out[sel] = entry0[j] + local
        return out

    def __len__(self) -> int:
        return len(self.log)

    def __getitem__(self, i: Any) -> Any:
        if self._all is not None or not isinstance(i, (int, np.integer)):
            return self.entries()[i]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"shard entry {i} is out of range for {n} entries")
        i = int(i) % n
        seg, entry0, item0 = self.log.holding_entries(np.array([i], dtype=np.int64))
        if item0 is None:
            return self.entries()[i]
        return self._part(int(seg[0]), int(entry0[0]), int(item0[0]))[0][i - int(entry0[0])]

    def __iter__(self) -> Iterator[RaggedShard]:
        return iter(self.entries())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (RaggedShardLog, list)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RaggedShardLog({len(self)} shards)"

    def stored(self) -> dict[str, Any]:
        """The list as its head stores it (references and tail), to rebuild it from."""
        return {"segments": self.log.refs, "tail": self.log.tail}


class RaggedWindow(list):  # type: ignore[type-arg]
    """The newest entries (JSON) of a ragged array's shard list, whose items start at
    ``first``: what the tiered merge of an append weighs
    (:attr:`arrayds.nodes.registry.NodeKind.window`), so it parses only them. An
    object in memory, never stored JSON: a stored manifest's items start at 0.

    >>> w = RaggedWindow([{"path": "c/a", "items": [7, 9], "records": 3}], first=7)
    >>> m = RaggedManifest.from_json({"dtype": "<f4", "ndim": 1, "axis": 0,
    ...     "piece_len": 4, "shards": w}, "doc")
    >>> m.shards[0].start, m.count
    (7, 9)
    """

    def __init__(self, entries: Sequence[Any], first: int) -> None:
        super().__init__(entries)
        self.first = first


@dataclass
class RaggedManifest:
    """The manifest of a ragged node (docs/spec.md, "Ragged arrays")."""

    dtype: np.dtype
    ndim: int
    axis: int
    piece_len: int
    compression: str = DEFAULT_COMPRESSION
    attrs: dict[str, Any] = field(default_factory=dict)
    shards: Sequence[RaggedShard] = field(default_factory=list)
    """The shard entries: a list, or a :class:`RaggedShardLog` (a list stored in
    segments, read as a read needs them)."""
    generation: int = 0
    commit: str = ""

    kind = KIND

    @property
    def count(self) -> int:
        if isinstance(self.shards, RaggedShardLog):
            return self.shards.items
        return self.shards[-1].stop if self.shards else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "kind": KIND,
            "generation": self.generation,
            "commit": self.commit,
            "dtype": self.dtype.str,
            "ndim": self.ndim,
            "axis": self.axis,
            "piece_len": self.piece_len,
            "compression": self.compression,
            "count": self.count,
            "attrs": self.attrs,
            "shards": [s.to_json() for s in self.shards],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], what: str) -> RaggedManifest:
        """Parse and validate; any violation is a :class:`arrayds.CorruptionError`."""

        def bad(msg: str) -> CorruptionError:
            return CorruptionError(f"{what}: ragged manifest: {msg}")

        try:
            dtype = check_dtype(d.get("dtype"), what)
        except (TypeError, ValueError) as e:
            raise bad(f"dtype: {e}") from None
        ndim, axis, piece_len = d.get("ndim"), d.get("axis"), d.get("piece_len")
        if not _is_count(ndim) or ndim < 1:
            raise bad(f"ndim {ndim!r} must be a positive integer")
        if not _is_count(axis) or axis >= ndim:
            raise bad(f"axis {axis!r} must be in 0..{ndim - 1}")
        if not _is_count(piece_len) or piece_len < 1:
            raise bad(f"piece_len {piece_len!r} must be a positive integer")
        compression = d.get("compression", "zstd:3")
        if not isinstance(compression, str):
            raise bad(f"compression {compression!r} is not a string")
        attrs = d.get("attrs", {})
        if not isinstance(attrs, dict):
            raise bad("attrs must be an object")
        gen = d.get("generation", 0)
        if not _is_count(gen):
            raise bad(f"generation {gen!r} is not a count")
        raw = d.get("shards")
        count = d.get("count")
        if count is not None and not _is_count(count):
            raise bad(f"count {count!r} is not a count")
        shards: Sequence[RaggedShard]
        if isinstance(raw, ShardLog):  # read lazily: segments load when a read needs them
            shards, expect = RaggedShardLog(raw, count, what), count
        elif isinstance(raw, RaggedWindow):  # the newest entries, in memory only
            shards, expect = parse_entries(raw, 0, raw.first, bad)
        elif isinstance(raw, list):
            shards, expect = parse_entries(raw, 0, 0, bad)
        else:
            raise bad("'shards' must be a list")
        if count is not None and count != expect:
            raise bad(f"count {count!r} disagrees with the shards, which hold {expect} items")
        return cls(
            dtype=dtype,
            ndim=ndim,
            axis=axis,
            piece_len=piece_len,
            compression=compression,
            attrs=dict(attrs),
            shards=shards,
            generation=gen,
            commit=str(d.get("commit", "")),
        )


def parse_entries(
    raw: Sequence[Any], first: int, expect: int, bad: Callable[[str], CorruptionError]
) -> tuple[list[RaggedShard], int]:
    """The shard entries ``raw`` (entry ``first`` of the list and on, whose items start
    at ``expect``), checked: each a relative path, items that follow on from the
    entry before, records enough for them. Returns them and the item they end at."""
    shards: list[RaggedShard] = []
    for i, e in enumerate(raw, first):
        if not isinstance(e, dict):
            raise bad(f"shard entry {i} is not an object")
        path = e.get("path")
        if (
            not isinstance(path, str)
            or not path
            or path.startswith("/")
            or "\\" in path
            or "://" in path
            or any(seg in ("", ".", "..") or is_reserved_name(seg) for seg in path.split("/"))
        ):
            raise bad(f"shard entry {i}: path {path!r} must be relative to the node folder")
        items = e.get("items")
        if (
            not isinstance(items, list)
            or len(items) != 2
            or not all(_is_count(x) for x in items)
            or items[0] != expect
            or items[1] <= items[0]
        ):
            raise bad(
                f"shard entry {i}: items {items!r} must be [start, stop) with start "
                f"{expect} (shards tile the items in order) and stop > start"
            )
        records = e.get("records")
        if not _is_count(records) or records < items[1] - items[0] + 1:
            raise bad(
                f"shard entry {i}: records {records!r} must count at least one piece per "
                f"item plus the index record"
            )
        nbytes = e.get("bytes")
        if nbytes is not None and not _is_count(nbytes):
            raise bad(f"shard entry {i}: bytes {nbytes!r}")
        shards.append(RaggedShard(path, items[0], items[1], records, nbytes))
        expect = items[1]
    return shards, expect


def count_pieces(lengths: np.ndarray, piece_len: int) -> np.ndarray:
    """Pieces per item: ceil(length / piece_len), at least one."""
    return np.maximum(1, -(-lengths // piece_len))
