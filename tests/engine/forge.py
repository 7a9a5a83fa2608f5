"""Forged ArrayRecord files: every checksum valid, some size absurd.

The HighwayHash key of Riegeli is public, so a hash proves a file was not damaged by
accident, never that it was not forged. Each forgery below is a complete two-block file
whose hashes are recomputed with the engine's own ``highway_hash``; only the sizes lie.
``FORGERIES`` maps a name to ``(file bytes, the chunk offset the error must name)``.
The fuzz corpus (tests/fuzz/corpus) is seeded with these too.

zstd frames are written by hand (a raw block, or run-length blocks of 128 KiB that
cost 4 bytes each: the densest zstd can be), so no compressor is needed.
"""

from __future__ import annotations

import struct

from arrayds import _native

BLOCK = 65536
MAGIC = 0x71930E704FDAE05E
hh = _native.highway_hash
OPTIONS = b"group_size:1,transpose:false,pad_to_block_boundary:false,uncompressed,max_parallelism:1"
ZSTD_OPTIONS = b"group_size:1,transpose:false,pad_to_block_boundary:false,zstd:3,max_parallelism:1"


def varint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def chunk(kind: bytes, data: bytes, n: int, dds: int) -> bytes:
    """A chunk header (with both hashes) followed by its data."""
    fields = struct.pack("<QQQQ", len(data), hh(data), kind[0] | (n << 8), dds)
    return struct.pack("<Q", hh(fields)) + fields + data


def block_header(prev: int, nxt: int) -> bytes:
    fields = struct.pack("<QQ", prev, nxt)
    return struct.pack("<Q", hh(fields)) + fields


def padding(pos: int) -> bytes:
    """A padding chunk from pos (not near a block end) to the next block boundary."""
    return chunk(b"p", bytes(BLOCK - pos % BLOCK - 40), 0, 0)


def simple_data(records: list[bytes], sizes: bytes | None = None) -> bytes:
    """Data of an uncompressed simple chunk; `sizes` replaces the sizes section."""
    if sizes is None:
        sizes = b"".join(varint(len(r)) for r in records)
    return b"\x00" + varint(len(sizes)) + sizes + b"".join(records)


def zstd_raw(data: bytes) -> bytes:
    """A zstd frame holding data in one raw block (window 128 KiB, no content size)."""
    assert len(data) <= 1 << 17
    return (
        struct.pack("<IB", 0xFD2FB528, 0)
        + b"\x38"
        + (len(data) << 3 | 1).to_bytes(3, "little")
        + data
    )


def zstd_rle(blocks: int, byte: int = 0) -> bytes:
    """A zstd frame of `blocks` run-length blocks of 128 KiB each (4 bytes per block)."""
    body = b"".join(
        ((1 << 17) << 3 | 2 | (k == blocks - 1)).to_bytes(3, "little") + bytes([byte])
        for k in range(blocks)
    )
    return struct.pack("<IB", 0xFD2FB528, 0) + b"\x38" + body


def zstd_data(sizes: list[int], values_frame: bytes, values_len: int) -> bytes:
    """Data of a zstd simple chunk: the sizes in a raw-block frame, then `values_frame`
    announced as `values_len` bytes."""
    plain = b"".join(varint(s) for s in sizes)
    sizes_stream = varint(len(plain)) + zstd_raw(plain)
    return b"z" + varint(len(sizes_stream)) + sizes_stream + varint(values_len) + values_frame


def msg_metadata(num_chunks: int, num_records: int, options: bytes) -> bytes:
    inner = (
        b"\x08\x01\x10"
        + varint(num_chunks)
        + b"\x18"
        + varint(num_records)
        + b"\x22"
        + varint(len(options))
        + options
    )
    return b"\x0a" + varint(len(inner)) + inner


def msg_entry(offset: int, dds: int, n: int) -> bytes:
    return b"\x08" + varint(offset) + b"\x10" + varint(dds) + b"\x18" + varint(n)


def forge(
    chunks: list[tuple[bytes, int, int, int]],
    *,
    options: bytes = OPTIONS,
    footer_dds: int | None = None,
    footer_n: int | None = None,
    postscript_dds: int | None = None,
) -> bytes:
    """A two-block file. chunks: (simple chunk data, num_records, header
    decoded_data_size, footer entry decoded_data_size) per data chunk; the footer's
    and the postscript's chunk headers may claim another decoded_data_size (or, for
    the footer, another record count)."""
    out = bytearray(block_header(0, 64) + chunk(b"s", b"", 0, 0))
    entries = []
    total = 0
    for data, n, dds, entry_dds in chunks:
        entries.append(msg_entry(len(out), entry_dds, n))
        out += chunk(b"r", data, n, dds)
        total += n
    footer_offset = len(out)
    records = [msg_metadata(len(chunks), total, options), *entries]
    out += chunk(
        b"r",
        simple_data(records),
        len(records) if footer_n is None else footer_n,
        sum(map(len, records)) if footer_dds is None else footer_dds,
    )
    out += padding(len(out))
    ps = b"\x08" + varint(footer_offset) + b"\x10" + varint(MAGIC)
    ps_records = [ps] * 3
    ps_chunk = chunk(
        b"r",
        simple_data(ps_records),
        3,
        3 * len(ps) if postscript_dds is None else postscript_dds,
    )
    out += block_header(0, 24 + len(ps_chunk)) + ps_chunk
    out += padding(len(out))
    assert len(out) == 2 * BLOCK
    return bytes(out)


RECORD = b"0123456789"
FOOTER = 64 + 40 + len(simple_data([RECORD]))  # where the footer chunk begins with one chunk


def _lying_dds(dds: int) -> bytes:
    return forge([(simple_data([RECORD]), 1, dds, dds)])


def _forgeries() -> dict[str, tuple[bytes, int]]:
    f: dict[str, tuple[bytes, int]] = {}
    for label, dds in [("2e40", 1 << 40), ("2e62", 1 << 62), ("2e64-1", (1 << 64) - 1)]:
        f[f"chunk_and_entry_dds_{label}"] = (_lying_dds(dds), 64)
    f["entry_dds_2e40"] = (forge([(simple_data([RECORD]), 1, len(RECORD), 1 << 40)]), 64)
    f["chunk_dds_2e40"] = (forge([(simple_data([RECORD]), 1, 1 << 40, len(RECORD))]), 64)
    # A record of 2^40 bytes declared the same in the sizes section, the chunk header
    # and the footer entry: uncompressed, and as a zstd chunk (the values frame then
    # decides), with one record per chunk and with two.
    big = 1 << 40
    f["record_2e40_uncompressed"] = (
        forge([(simple_data([RECORD], sizes=varint(big)), 1, big, big)]),
        64,
    )
    f["record_2e40_zstd"] = (
        forge([(zstd_data([big], zstd_rle(1), big), 1, big, big)], options=ZSTD_OPTIONS),
        64,
    )
    two = simple_data([RECORD, RECORD], sizes=varint(big) + varint(10))
    f["record_2e40_group2"] = (
        forge(
            [(two, 2, big + 10, big + 10)],
            options=OPTIONS.replace(b"group_size:1", b"group_size:2"),
        ),
        64,
    )
    # A 12-byte zstd frame expands to 384 KiB: claimed sizes that it cannot reach at
    # the densest zstd ratio are refused before anything is allocated, and a frame that
    # wants more than the size claimed stops there.
    claimed = 1 << 30
    f["zstd_ratio_beyond_codec"] = (
        forge(
            [(zstd_data([claimed], zstd_rle(3), claimed), 1, claimed, claimed)],
            options=ZSTD_OPTIONS,
        ),
        64,
    )
    # The footer names brotli (ratio 2^22 at open), the chunk is zstd (2^15): the
    # chunk's own codec bounds it once its header is read, before decoding.
    mid = 1 << 26
    f["zstd_chunk_in_brotli_file"] = (
        forge(
            [(zstd_data([mid], zstd_rle(3), mid), 1, mid, mid)],
            options=ZSTD_OPTIONS.replace(b"zstd:3", b"brotli:6"),
        ),
        64,
    )
    f["zstd_frame_wants_more"] = (
        forge([(zstd_data([1000], zstd_rle(3), 1000), 1, 1000, 1000)], options=ZSTD_OPTIONS),
        64,
    )
    f["footer_dds_2e40"] = (forge([(simple_data([RECORD]), 1, 10, 10)], footer_dds=1 << 40), FOOTER)
    f["footer_records_2e40"] = (
        forge([(simple_data([RECORD]), 1, 10, 10)], footer_n=1 << 40),
        FOOTER,
    )
    # Not a size, but the first thing the fuzzer found: writer options that are not
    # text raised UnicodeDecodeError (a ValueError) from writer_options_string().
    f["writer_options_not_utf8"] = (
        forge([(simple_data([RECORD]), 1, 10, 10)], options=b"zstd:3,\x9f\xff"),
        FOOTER,
    )
    f["postscript_dds_2e40"] = (
        forge([(simple_data([RECORD]), 1, 10, 10)], postscript_dds=1 << 40),
        BLOCK,
    )
    return f


FORGERIES = _forgeries()
