"""Footer, postscript and chunk-section rules on hand-built files (spec 7.1, 9.2-9.4).

`build()` is a minimal writer for small files (everything before the postscript fits
in the first 64 KiB block) that lets a test put arbitrary protobuf bytes in the
footer and postscript. It is checked against a golden file first.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from arrayds import _native

from .conftest import FILES, golden_path
from .forge import BLOCK, block_header, chunk, padding, varint

MAGIC = 0x71930E704FDAE05E


def simple_data(records: list[bytes], sizes: bytes | None = None, tail: bytes = b"") -> bytes:
    if sizes is None:
        sizes = b"".join(varint(len(r)) for r in records)
    return b"\x00" + varint(len(sizes)) + sizes + b"".join(records) + tail


def msg_metadata(num_chunks: int, num_records: int, options: bytes, extra: bytes = b"") -> bytes:
    inner = (
        b"\x08\x01\x10"
        + varint(num_chunks)
        + b"\x18"
        + varint(num_records)
        + b"\x22"
        + varint(len(options))
        + options
        + extra
    )
    return b"\x0a" + varint(len(inner)) + inner


def msg_entry(offset: int, dds: int, n: int) -> bytes:
    return b"\x08" + varint(offset) + b"\x10" + varint(dds) + b"\x18" + varint(n)


def build(
    groups: list[list[bytes]],
    options: bytes = b"group_size:1,transpose:false,pad_to_block_boundary:false,uncompressed,"
    b"max_parallelism:1",
    footer_records=None,
    postscript: bytes | None = None,
    data_override=None,
) -> bytes:
    """footer_records(entries) -> list of footer records; data_override(k, records) ->
    chunk data for data chunk k."""
    out = bytearray(block_header(0, 64) + chunk(b"s", b"", 0, 0))
    entries = []
    for k, group in enumerate(groups):
        data = data_override(k, group) if data_override else simple_data(group)
        dds = sum(map(len, group))
        entries.append((len(out), dds, len(group)))
        out += chunk(b"r", data, len(group), dds)
    footer_offset = len(out)
    if footer_records is None:
        records = [msg_metadata(len(groups), sum(map(len, groups)), options)]
        records += [msg_entry(*e) for e in entries]
    else:
        records = footer_records(entries)
    out += chunk(b"r", simple_data(records), len(records), sum(map(len, records)))
    out += padding(len(out))
    ps = (
        postscript
        if postscript is not None
        else b"\x08" + varint(footer_offset) + b"\x10" + varint(MAGIC)
    )
    ps_chunk = chunk(b"r", simple_data([ps] * 3), 3, 3 * len(ps))
    out += block_header(0, 24 + len(ps_chunk)) + ps_chunk
    out += padding(len(out))
    assert len(out) == 2 * BLOCK
    return bytes(out)


def records_of(data: bytes, name: str = "hand.ar") -> list[bytes]:
    r = _native.Reader.from_bytes(data, name)
    return r.read_range(0, r.num_records())


def text(i: int) -> bytes:
    return (f"record-{i}" * ((i % 7) + 1)).encode()


def test_builder_reproduces_a_golden_file() -> None:
    entry = next(f for f in FILES if f["file"] == "gs1_uncompressed.array_record")
    assert build([[text(i)] for i in range(10)]) == Path(golden_path(entry)).read_bytes()


def test_footer_parsing_is_tolerant() -> None:
    """Unknown fields of every wire type are skipped, fields come in any order, a
    repeated scalar keeps the last value, a repeated sub-message merges."""
    opts = b"hello, not the canonical string"

    def footer(entries):
        meta_inner = (
            b"\x22"
            + varint(len(opts))
            + opts  # writer_options first
            + b"\x18\x63"  # num_records 99 ...
            + b"\x78\x05"  # unknown varint field 15
            + b"\x10\x02\x08\x01"  # num_chunks, version
            + b"\x18\x03"  # ... then 3: the last one wins
            + b"\x4a\x03abc"  # unknown length-delimited field 9
            + b"\x51"
            + bytes(8)  # unknown fixed64 field 10
            + b"\x5d"
            + bytes(4)  # unknown fixed32 field 11
        )
        meta = b"\x12\x01x" + b"\x0a" + varint(len(meta_inner)) + meta_inner
        e0, e1 = entries
        entry0 = b"\x18" + varint(e0[2]) + b"\x10" + varint(e0[1]) + b"\x08" + varint(e0[0])
        entry1 = msg_entry(*e1) + b"\xa0\x06\x07"  # unknown field 100
        return [meta, entry0, entry1]

    data = build([[b"a", b"bb"], [b"c"]], footer_records=footer)
    r = _native.Reader.from_bytes(data)
    assert r.writer_options_string() == opts.decode()
    assert r.read_range(0, 3) == [b"a", b"bb", b"c"]
    assert r.group_size() == 2


def test_missing_writer_options_is_none() -> None:
    def footer(entries):
        return [b"\x0a\x06\x08\x01\x10\x01\x18\x01", msg_entry(*entries[0])]

    r = _native.Reader.from_bytes(build([[b"x"]], footer_records=footer))
    assert r.writer_options_string() is None
    assert r.read(0) == b"x"


def expect_corrupt(data: bytes, message: str) -> None:
    with pytest.raises(_native.CorruptionError, match=message):
        records_of(data)


@pytest.mark.parametrize(
    "meta,message",
    [
        (b"\x0a\x06\x08\x02\x10\x01\x18\x01", "Unrecognized version number 2"),
        (b"\x12\x00", "array_record_metadata is missing"),
        (b"\x0a\x06\x08\x01\x10\x02\x18\x01", "says 2 chunks, but the footer has 1"),
        (b"\x0a\x06\x08\x01\x10\x01\x18\x05", "hold 1 records, but the footer metadata says 5"),
        (b"\x0a\x07\x08\x01\x10\x01\x18\x01", "RiegeliFooterMetadata: not a valid message"),
    ],
)
def test_bad_metadata(meta: bytes, message: str) -> None:
    expect_corrupt(build([[b"x"]], footer_records=lambda e: [meta, msg_entry(*e[0])]), message)


def test_entry_without_offset() -> None:
    def footer(entries):
        return [msg_metadata(1, 1, b"g"), b"\x10\x01\x18\x01"]

    expect_corrupt(build([[b"x"]], footer_records=footer), "entry 0 has no chunk_offset")


@pytest.mark.parametrize(
    "counts,message",
    [
        ([1, 2, 2], "entry 1 says its chunk holds 2 records, but the group size is 1"),
        ([2, 3], "entry 1 says its chunk holds 3 records, but the group size is 2"),
        ([3, 2, 2], "entry 1 says its chunk holds 2 records, but the group size is 3"),
    ],
)
def test_group_sizes_must_match(counts: list[int], message: str) -> None:
    groups = [[b"r%d" % k] * n for k, n in enumerate(counts)]
    expect_corrupt(build(groups), message)


def test_offsets_must_increase() -> None:
    def footer(entries):
        (a, b) = entries
        return [msg_metadata(2, 2, b"g"), msg_entry(*b), msg_entry(*a)]

    expect_corrupt(
        build([[b"x"], [b"y"]], footer_records=footer), "chunk_offset .* is not a chunk position"
    )


def test_entry_disagreeing_with_its_chunk() -> None:
    def footer(entries):
        off, dds, n = entries[0]
        return [msg_metadata(1, 1, b"g"), msg_entry(off, dds + 1, n)]

    data = build([[b"x"]], footer_records=footer)
    r = _native.Reader.from_bytes(data, "hand.ar")  # opens: checked when the chunk is read
    with pytest.raises(
        _native.CorruptionError,
        match="holds 1 records and 1 bytes, but the footer says 1 records and 2",
    ):
        r.read(0)


@pytest.mark.parametrize(
    "postscript,message",
    [
        (b"\x08\x40", "missing footer_offset or wrong magic"),
        (b"\x10" + varint(MAGIC), "missing footer_offset or wrong magic"),
        (b"\x08\x40\x10\x05", "missing footer_offset or wrong magic"),
        (b"\x08" + varint(70000) + b"\x10" + varint(MAGIC), "footer_offset 70000"),
        (b"\x08\x05\x10" + varint(MAGIC), "footer_offset 5"),
    ],
)
def test_bad_postscript(postscript: bytes, message: str) -> None:
    expect_corrupt(build([[b"x"]], postscript=postscript), message)


def test_sizes_section_rules() -> None:
    """Overlong varints are accepted (up to 10 bytes); 11 bytes, leftover bytes in
    either section, and sizes that disagree with decoded_data_size are not."""
    ok = build([[b"hello"]], data_override=lambda k, g: simple_data(g, sizes=b"\x85\x80\x00"))
    assert records_of(ok) == [b"hello"]
    ten = b"\x85" + b"\x80" * 8 + b"\x00"
    assert records_of(
        build([[b"hello"]], data_override=lambda k, g: simple_data(g, sizes=ten))
    ) == [b"hello"]
    bad = {
        "11-byte varint": simple_data([b"hello"], sizes=b"\x85" + b"\x80" * 9 + b"\x00"),
        "extra size byte": simple_data([b"hello"], sizes=b"\x05\x00"),
        "extra value byte": simple_data([b"hello"], tail=b"!"),
        "short sizes": simple_data([b"hello"], sizes=b""),
        "sizes too big": simple_data([b"hello"], sizes=b"\x06"),
        "unknown compression": b"\x07" + simple_data([b"hello"])[1:],
        "sizes_len too big": b"\x00\x7f\x05hello",
    }
    for label, payload in bad.items():
        data = build([[b"hello"]], data_override=lambda k, g, p=payload: p)
        with pytest.raises(_native.CorruptionError, match=r"hand.ar: .*chunk at 64"):
            records_of(data)
            pytest.fail(label)
