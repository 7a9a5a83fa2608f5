"""The manifest of a ragged array: dtype, item ndim, the variable axis, piece length
and shard list with item ranges (docs/spec.md, "Ragged arrays").

>>> import numpy as np, arrayds
>>> ra = arrayds.ragged.write_ragged([np.zeros(3), np.zeros(5)], "memory://doc-ragged-manifest")
>>> ra.manifest.kind, [(s.start, s.stop) for s in ra.manifest.shards]
('ragged', [(0, 2)])
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import CorruptionError
from ...nodes.names import (
    FORMAT,
    FORMAT_VERSION,
    is_reserved_name,
)
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


@dataclass
class RaggedManifest:
    """The manifest of a ragged node (docs/spec.md, "Ragged arrays")."""

    dtype: np.dtype
    ndim: int
    axis: int
    piece_len: int
    compression: str = "zstd:3"
    attrs: dict[str, Any] = field(default_factory=dict)
    shards: list[RaggedShard] = field(default_factory=list)
    generation: int = 0
    commit: str = ""

    kind = KIND

    @property
    def count(self) -> int:
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
        if not isinstance(raw, list):
            raise bad("'shards' must be a list")
        shards: list[RaggedShard] = []
        expect = 0
        for i, e in enumerate(raw):
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
        count = d.get("count", expect)
        if count != expect:
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


def count_pieces(lengths: np.ndarray, piece_len: int) -> np.ndarray:
    """Pieces per item: ceil(length / piece_len), at least one."""
    return np.maximum(1, -(-lengths // piece_len))
