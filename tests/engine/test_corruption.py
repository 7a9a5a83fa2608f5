"""Damaged files raise CorruptionError (an OSError) naming the file and the position."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from arrayds import _native

from .conftest import BLOCK, FILES, golden_path

CorruptionError = _native.CorruptionError


def golden(name: str) -> bytes:
    entry = next(f for f in FILES if f["file"] == name)
    return Path(golden_path(entry)).read_bytes()


def flip(data: bytes, pos: int) -> bytes:
    b = bytearray(data)
    b[pos] ^= 0x40
    return bytes(b)


def read_all(data: bytes, name: str = "bad.ar") -> list[bytes]:
    r = _native.Reader.from_bytes(data, name)
    return r.read_range(0, r.num_records())


def test_is_an_oserror() -> None:
    assert issubclass(CorruptionError, OSError)
    assert CorruptionError.__module__ == "arrayds._native"


# gs1000_few_uncompressed (spec 14): data chunk at 64 (header 64..103, data 104..230),
# footer at 231, postscript at 65536.
@pytest.mark.parametrize(
    "pos,message",
    [
        (1, "missing file signature"),
        (30, "missing file signature"),
        (66, "chunk header hash mismatch"),
        (72, "chunk header hash mismatch"),
        (150, "chunk data hash mismatch"),
        (240, "chunk header hash mismatch"),
        (300, "chunk data hash mismatch"),
        (65536 + 3, "block header hash mismatch"),
        (65536 + 20, "block header hash mismatch"),
        (65536 + 30, "chunk header hash mismatch"),
        (65536 + 90, "chunk data hash mismatch"),
    ],
)
def test_flipped_byte(pos: int, message: str, tmp_path: Path) -> None:
    data = flip(golden("gs1000_few_uncompressed.array_record"), pos)
    path = tmp_path / "flipped.array_record"
    path.write_bytes(data)
    with pytest.raises(CorruptionError, match=message) as info:
        read_all(data, "flipped.array_record")
    assert "flipped.array_record: " in str(info.value)
    assert "(at byte " in str(info.value)

    def from_file() -> None:
        r = _native.Reader(str(path))
        r.read_range(0, r.num_records())

    with pytest.raises(CorruptionError, match=message) as info:
        from_file()
    assert str(info.value).startswith(str(path) + ": ")


def test_flip_in_padding_is_not_read() -> None:
    """Padding chunks are skipped, never read (like the official reader)."""
    data = golden("gs1000_few_uncompressed.array_record")
    assert len(read_all(flip(data, 1000))) == 5


def test_block_header_inside_a_chunk() -> None:
    data = golden("big_record_uncompressed.array_record")
    r = _native.Reader.from_bytes(flip(data, 131072 + 10), "big.ar")
    assert r.read(0) == _native.Reader.from_bytes(data).read(0)
    with pytest.raises(CorruptionError, match=r"big.ar: block header hash mismatch .*131072"):
        r.read(1)


@pytest.mark.parametrize("cut", [0, 100, 65535, 65536, 131071, 131072 + 1])
def test_truncated_or_extended(cut: int) -> None:
    data = golden("default.array_record")
    bad = data[:cut] if cut <= len(data) else data + b"\0" * (cut - len(data))
    with pytest.raises(CorruptionError, match=r"bad.ar: .*(at byte \d+)"):
        read_all(bad)


def test_appended_block_of_zeros() -> None:
    data = golden("default.array_record") + bytes(BLOCK)
    with pytest.raises(CorruptionError, match="block header hash mismatch .*131072"):
        read_all(data)


def test_not_an_array_record_file(tmp_path: Path) -> None:
    path = tmp_path / "text.txt"
    path.write_bytes(b"hello\n" * 50000)
    with pytest.raises(CorruptionError, match="text.txt: not"):
        _native.Reader(str(path))
    with pytest.raises(FileNotFoundError):
        _native.Reader(str(tmp_path / "nope.ar"))


def reseal(data: bytearray, chunk: int) -> None:
    """Recomputes the hashes of the uncompressed chunk at `chunk` (header not split)."""
    size = struct.unpack_from("<Q", data, chunk + 8)[0]
    struct.pack_into(
        "<Q", data, chunk + 16, _native.highway_hash(bytes(data[chunk + 40 : chunk + 40 + size]))
    )
    struct.pack_into("<Q", data, chunk, _native.highway_hash(bytes(data[chunk + 8 : chunk + 40])))


def test_footer_inconsistent_with_chunks() -> None:
    """Valid hashes, wrong facts: a footer entry claims 5 records; the file has 4."""
    data = bytearray(golden("gs2_uncompressed.array_record"))
    # Footer entries are 08 <offset> 10 <dds> 18 <n>: patch entry 0's n from 2 to 3.
    r = _native.Reader.from_bytes(bytes(data))
    footer = r.chunk_spans([6])[0][1]  # the last chunk's span ends at the footer
    body = footer + 40
    entry0 = bytes(data).index(b"\x08\x40\x10", body)
    assert data[entry0 + 5] == 2  # 08 40 10 <dds> 18 02
    data[entry0 + 5] = 3
    reseal(data, footer)
    with pytest.raises(CorruptionError, match="footer entry .* group size|footer entries hold"):
        _native.Reader.from_bytes(bytes(data), "gs2.ar")


def test_chunk_header_disagrees_with_footer() -> None:
    data = bytearray(golden("gs1_uncompressed.array_record"))
    # Chunk 0 at 64 holds "record-0": make its header claim 2 records (sizes section
    # then fails), with valid hashes.
    struct.pack_into("<Q", data, 88, ord("r") | (2 << 8))
    reseal(data, 64)
    r = _native.Reader.from_bytes(bytes(data), "gs1.ar")
    with pytest.raises(CorruptionError, match="gs1.ar: the chunk at 64 holds 2 records"):
        r.read(0)
    assert r.read(1) == b"record-1record-1"
