"""HighwayHash-64 (Google's HighwayHash library) against every vector of spec section 6.3,
for every implementation the CPU can run (the library's AVX2 and SSE4.1 code, and its
portable code compiled into the engine)."""

from __future__ import annotations

import random

import pytest

from arrayds import _native

TEST_KEY = (0x0706050403020100, 0x0F0E0D0C0B0A0908, 0x1716151413121110, 0x1F1E1D1C1B1A1918)
SIG_HEADER = bytes(8) + bytes.fromhex("e19f13c0e9b1c372") + b"s" + bytes(7) + bytes(8)
GS1000_HEADER = (
    bytes.fromhex("7f00000000000000")
    + bytes.fromhex("559df13106f4685f")
    + bytes.fromhex("7205000000000000")
    + bytes.fromhex("7800000000000000")
)

VECTORS = [
    (b"", None, 0x72C3B1E9C0139FE1),
    (bytes(8) + b"\x40" + bytes(7), None, 0x3F4A880DD170AF83),
    (SIG_HEADER, None, 0xA9E187923CC2BA91),
    (b"\x00\x01\x08record-0", None, 0xD1B523D1B2C2A028),
    (bytes(8) + b"\x6c" + bytes(7), None, 0xEA5AD98A202E81BC),
    (GS1000_HEADER, None, 0xC5A2EA904387DBED),
    (b"\x00", None, 0x2CD57BC47907559D),
    (bytes([0, 1, 2]), None, 0x3BBB8DA470C80319),
    (bytes(range(7)), None, 0x81D00CB703E09F52),
    (bytes(range(33)), None, 0xEC2F920014EAA741),
    (bytes(range(100)), None, 0xE809487465A44F74),
    (b"", TEST_KEY, 0x907A56DE22C26E53),
    (bytes(range(33)), TEST_KEY, 0x2C90F73CA03181FC),
]


TARGETS = _native._highway_hash_targets()


@pytest.fixture(params=["chosen", *TARGETS])
def implementation(request: pytest.FixtureRequest):
    old = _native._highway_hash_force_target("" if request.param == "chosen" else request.param)
    yield request.param
    _native._highway_hash_force_target(old)


def test_targets_and_choice() -> None:
    assert TARGETS[-1] == "Portable"
    assert _native.highway_hash_implementation() in TARGETS
    old = _native._highway_hash_force_target("Portable")
    try:
        assert _native.highway_hash_implementation() == "Portable"
        assert _native._highway_hash_force_target("Portable") == "Portable"
    finally:
        _native._highway_hash_force_target(old)
    with pytest.raises(ValueError, match="no HighwayHash implementation 'MMX'"):
        _native._highway_hash_force_target("MMX")


@pytest.mark.parametrize("data,key,expected", VECTORS)
def test_vectors(implementation: str, data: bytes, key, expected: int) -> None:
    assert _native.highway_hash(data, key) == expected


def test_vector_6_read_from_golden_file(implementation: str) -> None:
    """Vector 6: the 127 data bytes of gs1000_few_uncompressed's chunk at 64."""
    from .conftest import GOLDEN_DIR

    raw = (GOLDEN_DIR / "gs1000_few_uncompressed.array_record").read_bytes()
    assert _native.highway_hash(raw[104:231]) == 0x5F68F40631F19D55


def test_implementations_agree() -> None:
    rng = random.Random(7)
    sizes = list(range(0, 130)) + [255, 256, 1000, 4095, 65536, 65537, 1 << 20]
    data = [rng.randbytes(n) for n in sizes]
    results = {}
    for target in TARGETS:
        old = _native._highway_hash_force_target(target)
        try:
            results[target] = [_native.highway_hash(d) for d in data]
        finally:
            _native._highway_hash_force_target(old)
    chosen = [_native.highway_hash(d) for d in data]
    for target in TARGETS:
        assert results[target] == chosen, target


def test_pieces_hash_like_their_concatenation(implementation: str, tmp_path) -> None:
    """A chunk whose data crosses block boundaries is hashed in pieces (HighwayHashCat): a
    file with a 200 KiB record is written and read back, and a flipped byte in its second
    block is caught."""
    data = random.Random(3).randbytes(200_000)
    path = tmp_path / "big.array_record"
    w = _native.Writer(str(path), "group_size:1,uncompressed")
    w.write(data)
    w.close()
    assert _native.Reader(str(path)).read(0) == data
    raw = bytearray(path.read_bytes())
    raw[70_000] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(_native.CorruptionError, match="chunk data hash mismatch"):
        _native.Reader(str(path)).read(0)


def test_accepts_buffers() -> None:
    import numpy as np

    data = bytes(range(100))
    expected = 0xE809487465A44F74
    assert _native.highway_hash(bytearray(data)) == expected
    assert _native.highway_hash(memoryview(data)) == expected
    assert _native.highway_hash(np.frombuffer(data, dtype=np.uint8)) == expected
    with pytest.raises(TypeError):
        _native.highway_hash("text")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        _native.highway_hash(b"", (1, 2, 3))
