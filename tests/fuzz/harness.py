"""The body of the reader fuzz target, shared by the fuzzer (fuzz_reader.py, run by
``make fuzz`` on an instrumented build) and the corpus replay (test_corpus.py, run by
``make test`` on the normal build).

An ArrayRecord file is at least two 64 KiB blocks, mostly zero padding; a fuzz input
is the file with each block's trailing zeros cut off (``compact``/``expand``), so the
corpus stays small and the fuzzer mutates bytes that matter:

    byte 0       bits 0-3: the number of 64 KiB blocks (at most 8); bits 4-6 h: the
                 file is 7*h bytes shorter than those blocks (sizes that are not a
                 multiple of 64 KiB); bit 7: keep the hashes as they are (else they
                 are recomputed, see below)
    3 bytes/block  little-endian: how many leading bytes of that block follow
    then         those bytes, block after block (zeros where the input runs out)

Unless bit 7 is set, ``expand`` then recomputes every hash it can find (``reseal``:
block headers, and the chunks met walking from the first chunk and the postscript's),
as a forger would: a mutated size then reaches the code that must bound it instead of
stopping at a hash mismatch.

``run`` opens the file every way the engine can (bytes, mmap, pread, the remote
footer path) and reads it every way (read, read_range, read_batch, chunk_spans +
decode_spans, read_into). A file either reads or raises ``CorruptionError``; the
only other exception allowed is ``NotImplementedError`` for what arrayds documents it
does not read (transposed chunks, a codec missing from the build).
"""

from __future__ import annotations

import os
from types import ModuleType

BLOCK = 65536
MAX_BLOCKS = 8
MAX_READ = 64  # records read per call: bounds the time per input


def _add_with_overhead(begin: int, n: int) -> int:  # spec 4.3, as block_layout.h
    return begin + n + 24 * ((n + (begin + BLOCK - 24 - 1) % BLOCK) // (BLOCK - 24))


def _chunk_end(begin: int, data_size: int, num_records: int) -> int:
    raw_end = _add_with_overhead(begin, 40 + data_size)
    p = begin + num_records
    r = p % BLOCK
    min_end = p if r == 0 or r > 24 else p + 25 - r
    return max(raw_end, min_end)


def _logical(size: int, pos: int, n: int) -> list[tuple[int, int]] | None:
    """The file ranges of n logical bytes from chunk position pos (None past the end)."""
    out = []
    while n > 0:
        if pos % BLOCK == 0:
            pos += 24
        k = min(n, BLOCK - pos % BLOCK)
        if pos + k > size:
            return None
        out.append((pos, pos + k))
        pos += k
        n -= k
    return out


def _reseal_chunk(f: bytearray, begin: int, hh) -> int | None:  # noqa: ANN001
    """Recomputes the hashes of the chunk at begin; returns where the next begins."""
    head = _logical(len(f), begin, 40)
    if head is None:
        return None
    h = bytearray(b"".join(f[a:b] for a, b in head))
    data_size = int.from_bytes(h[8:16], "little")
    num_records = int.from_bytes(h[24:32], "little") >> 8
    data = _logical(len(f), _add_with_overhead(begin, 40), data_size)
    if data is None:
        return None
    h[16:24] = hh(b"".join(f[a:b] for a, b in data)).to_bytes(8, "little")
    h[0:8] = hh(bytes(h[8:40])).to_bytes(8, "little")
    k = 0
    for a, b in head:
        f[a:b] = h[k : k + b - a]
        k += b - a
    return _chunk_end(begin, data_size, num_records)


def reseal(file: bytes, hh) -> bytes:  # noqa: ANN001
    """file with the hashes of its block headers and of the chunks walked from 64 and
    from the postscript position recomputed (hh: the engine's highway_hash)."""
    f = bytearray(file)
    starts = [64]
    if len(f) >= 2 * BLOCK:
        starts.append(len(f) - len(f) % BLOCK - BLOCK)
    for begin in starts:
        for _ in range(4096):
            end = _reseal_chunk(f, begin, hh)
            if end is None or end <= begin or end >= len(f):
                break
            begin = end
    for p in range(0, len(f) - 23, BLOCK):
        f[p : p + 8] = hh(bytes(f[p + 8 : p + 24])).to_bytes(8, "little")
    return bytes(f)


def expand(data: bytes, hh=None) -> bytes:  # noqa: ANN001
    """The file a fuzz input stands for (hh: the hash to reseal it with, see above)."""
    if not data:
        return b""
    blocks = min(data[0] & 15, MAX_BLOCKS)
    pos = 1 + 3 * blocks
    out = bytearray()
    for k in range(blocks):
        kept = min(int.from_bytes(data[1 + 3 * k : 4 + 3 * k].ljust(3, b"\0"), "little"), BLOCK)
        part = data[pos : pos + kept]
        pos += kept
        out += part + bytes(BLOCK - len(part))
    cut = 7 * ((data[0] >> 4) & 7)
    file = bytes(out[: max(len(out) - cut, 0)])
    return file if hh is None or data[0] & 0x80 else reseal(file, hh)


def compact(file: bytes) -> bytes:
    """The fuzz input standing for a file (a multiple of 64 KiB, at most 8 blocks)."""
    blocks = len(file) // BLOCK
    assert len(file) == blocks * BLOCK and blocks <= MAX_BLOCKS
    parts = [file[k * BLOCK : (k + 1) * BLOCK].rstrip(b"\0") for k in range(blocks)]
    return bytes([blocks]) + b"".join(len(p).to_bytes(3, "little") for p in parts) + b"".join(parts)


def _allowed(e: BaseException, native: ModuleType) -> bool:
    if isinstance(e, native.CorruptionError):
        return True
    return isinstance(e, NotImplementedError) and (
        "transposed chunk" in str(e) or "codec is not available" in str(e)
    )


def _read_everything(r, file: bytes) -> None:  # noqa: ANN001
    n = r.num_records()
    r.num_chunks(), r.group_size(), r.writer_options_string()
    if n == 0:
        return
    r.read(0)
    r.read(n - 1)
    m = min(n, MAX_READ)
    records = r.read_range(0, m)
    assert len(records) == m
    assert r.read_batch([m - 1, 0, m - 1]) == [records[-1], records[0], records[-1]]
    idx = list(range(m))
    spans = [(a, file[a:b]) for a, b in r.chunk_spans(idx)]
    assert r.decode_spans(idx, spans) == records
    bufs = [bytearray(len(rec)) for rec in records]
    r.read_into(idx, bufs)
    assert [bytes(b) for b in bufs] == records


def _remote(native: ModuleType, file: bytes, name: str) -> None:
    size = len(file)
    fo = native.Reader.footer_offset(file[-BLOCK:], size, name)
    r = native.Reader.from_footer(size, fo, file[fo : size - BLOCK], name)
    n = r.num_records()
    if n:
        idx = list(range(min(n, MAX_READ)))
        spans = [(a, file[a:b]) for a, b in r.chunk_spans(idx)]
        records = r.decode_spans(idx, spans)
        bufs = [bytearray(len(rec)) for rec in records]
        r.read_into(idx, bufs, spans=spans)
        assert [bytes(b) for b in bufs] == records


def run(native: ModuleType, data: bytes, scratch: str) -> None:
    """Feeds one fuzz input to every open and read path; raises (AssertionError or the
    unexpected exception) when the engine misbehaves. `scratch` is a file path the
    file may be written to (best on a tmpfs)."""
    file = expand(data, native.highway_hash)
    with open(scratch, "wb") as f:
        f.write(file)

    def opened() -> list:
        return [
            lambda: native.Reader.from_bytes(file, scratch),
            lambda: native.Reader(scratch, mmap=True),
            lambda: native.Reader(scratch, mmap=False),
        ]

    for open_ in opened():
        try:
            r = open_()
        except BaseException as e:
            if _allowed(e, native):
                continue
            raise
        try:
            _read_everything(r, file)
        except BaseException as e:
            if not _allowed(e, native):
                raise
        finally:
            r.close()
    if len(file) >= 2 * BLOCK and len(file) % BLOCK == 0:
        try:
            _remote(native, file, scratch)
        except BaseException as e:
            if not _allowed(e, native):
                raise
    os.truncate(scratch, 0)
