"""Bounds on what a manifest, a ragged index record or a ``.npy`` header may claim
(docs/spec.md, "Bounds"): absurd sizes are a CorruptionError when the node is opened
or the record decoded, never an allocation of what they claim."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

import arrayds
import arrayds.ragged as rg
from arrayds import CorruptionError
from arrayds.kinds.array.manifest import MAX_CHUNK_BYTES, ArrayManifest
from arrayds.kinds.array.tensor import MAX_HEADER_BYTES, decode_chunk, encode_chunk
from arrayds.nodes import commit
from arrayds.storage import new_store

from .work import bounded


def _rewrite_manifest(url: str, name: str, change) -> None:  # noqa: ANN001
    st = new_store(url)
    raw = commit.read(st, name).raw
    change(raw)
    raw["generation"] += 1
    commit.replace(st, name, raw)


def _bounded_open(url: str, name: str):  # noqa: ANN202
    with bounded(f"open {name}"):
        return arrayds.open_array(url, name)


@pytest.mark.parametrize(
    "change,field",
    [
        # one chunk of 10^12 int32 elements along one axis
        (lambda d: d.update(shape=[10**12], chunks=[[[10**12, 1]]], shards=[]), "chunks"),
        # 10^6 x 10^6 elements: each axis is modest, the chunk is not
        (
            lambda d: d.update(
                shape=[10**6, 10**6], chunks=[[[10**6, 1]], [[10**6, 1]]], shards=[]
            ),
            "chunks",
        ),
        (lambda d: d.update(chunk_shape=[10**9, 10**9]), "chunk_shape"),
    ],
)
def test_manifest_with_a_huge_chunk_is_refused_at_open(tmp_path: Path, change, field) -> None:  # noqa: ANN001
    url = str(tmp_path / "ds")
    a = arrayds.open_array(url, "x", mode="w", shape=(8, 6), dtype="i4", chunks=(4, 3))
    a[...] = np.arange(48, dtype="i4").reshape(8, 6)

    def edit(d: dict) -> None:
        change(d)
        if field == "chunks":
            d.pop("chunk_shape", None)

    _rewrite_manifest(url, "x", edit)
    with pytest.raises(
        CorruptionError, match=rf"manifest {field}: a chunk of shape .* bytes, more"
    ):
        _bounded_open(url, "x")


def test_the_largest_allowed_chunk_opens(tmp_path: Path) -> None:
    """The bound is the engine's chunk cap, not less: a manifest at it opens (nothing
    is allocated; the array has no shards)."""
    n = MAX_CHUNK_BYTES // 4
    m = ArrayManifest.new((n,), "<i4", ((n,),))
    assert ArrayManifest.from_json(m.to_json(), "x").shape == (n,)
    with pytest.raises(ValueError, match="choose smaller chunks"):
        ArrayManifest.new((n + 1,), "<i4", ((n + 1,),))


def test_creating_an_array_with_a_huge_chunk_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="more than the .* one chunk may hold"):
        arrayds.open_array(
            str(tmp_path / "ds"),
            "x",
            mode="w",
            shape=(10**6, 10**6),
            dtype="f8",
            chunks=(10**6, 10**6),
        )


def _forge_ragged_index(url: str, name: str, shapes: list[list[int]]) -> None:
    """Rewrites the shard of a one-shard ragged array with another index record."""
    node = Path(url) / name
    (shard,) = [p for p in node.rglob("*.array_record")]
    r = arrayds.ArrayRecordReader(str(shard))
    records = r.read_all()
    options = r.writer_options_string()
    r.close()
    records[-1] = bytes(encode_chunk(np.array(shapes, dtype="<i8")))
    with arrayds.ArrayRecordWriter(str(shard), options=options) as w:
        w.write_many(records)

    def drop_sizes(d: dict) -> None:
        for e in d["shards"]:
            e.pop("bytes", None)

    _rewrite_manifest(url, name, drop_sizes)


def test_ragged_piece_counts_cannot_overflow(tmp_path: Path) -> None:
    """Lengths of 2^63 - 1 whose piece counts wrap around int64 to the shard's real
    count used to pass the check, and item 2 then read records at negative offsets."""
    url = str(tmp_path / "ds")
    rg.write_ragged([np.arange(n, dtype="i2") for n in (1, 1, 1)], url, "r", piece_len=1)
    big = 2**63 - 1
    _forge_ragged_index(url, "r", [[big], [big], [5]])
    ra = rg.open_ragged(url, "r")
    with bounded("ra[2]"), pytest.raises(CorruptionError, match="needs more pieces than the 3"):
        ra[2]


def test_ragged_piece_larger_than_a_chunk_is_refused(tmp_path: Path) -> None:
    """An item whose other axes claim 10^12 elements: refused from the index, before
    pad() allocates items x longest x 10^12."""
    url = str(tmp_path / "ds")
    rg.write_ragged([np.zeros((2, 3), dtype="f4")] * 2, url, "r", piece_len=2)
    _forge_ragged_index(url, "r", [[10**12, 3], [2, 3]])
    ra = rg.open_ragged(url, "r")
    for read in (lambda: ra[0], lambda: ra.pad(2), lambda: ra.shapes):
        with bounded(read), pytest.raises(CorruptionError, match="makes pieces of more than"):
            read()


def test_npy_header_longer_than_numpy_allows() -> None:
    rec = bytearray(b"\x93NUMPY\x02\x00" + struct.pack("<I", MAX_HEADER_BYTES + 1))
    rec += b" " * (MAX_HEADER_BYTES + 1) + b"\0" * 8
    with pytest.raises(CorruptionError, match="longer than the 10000 allowed"):
        decode_chunk(bytes(rec), np.dtype("<i8"), (1,), "chunk (0,)")


def test_npy_header_with_a_huge_shape_is_a_mismatch() -> None:
    """The shape in a record's header is compared with the manifest's, never used to
    allocate."""
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (1000000000000, 1000000000000), }"
    h = header.encode().ljust(64 - 10 - 1) + b"\n"
    rec = b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + b"\0" * 8
    with pytest.raises(CorruptionError, match=r"shape \(1000000000000, 1000000000000\), expected"):
        decode_chunk(rec, np.dtype("<i8"), (1,), "chunk (0,)")
