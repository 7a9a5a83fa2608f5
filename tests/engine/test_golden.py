"""Every golden file decodes exactly as MANIFEST.json says, through every read path."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

from arrayds import _native

from .conftest import BLOCK, FILES, READABLE, golden_path, ids, length_prefixed_sha256


def test_manifest_records_regenerate(golden_records: dict[str, list[bytes]]) -> None:
    for f in FILES:
        records = golden_records[f["file"]]
        assert [len(r) for r in records] == f["record_lengths"]
        assert length_prefixed_sha256(records) == f["length_prefixed_sha256"]


@pytest.mark.parametrize("mmap", [True, False], ids=["mmap", "pread"])
@pytest.mark.parametrize("entry", READABLE, ids=ids(READABLE))
def test_read_exactly(
    entry: dict[str, Any], golden_records: dict[str, list[bytes]], mmap: bool
) -> None:
    expected = golden_records[entry["file"]]
    r = _native.Reader(golden_path(entry), mmap=mmap)
    assert r.is_mapped() == mmap
    n = entry["num_records"]
    assert r.num_records() == n
    assert r.writer_options_string() == entry["writer_options_string"]
    s = entry["structure"]
    assert r.group_size() == (s["group_size_from_first_footer_entry"] if n else 0)
    assert r.num_chunks() == s["metadata"]["num_chunks"]
    assert r.file_size() == entry["file_size"]
    assert r.read_range(0, n) == expected
    assert [r.read(i) for i in range(n)] == expected
    order = list(range(n))[::-1]
    assert r.read_batch(order) == [expected[i] for i in order]
    assert r.read_batch(np.array(order, dtype=np.int64)) == [expected[i] for i in order]
    if "record_sha256" in entry:
        got = [hashlib.sha256(x).hexdigest() for x in r.read_range(0, n)]
        assert got == entry["record_sha256"]
    r.close()


@pytest.mark.parametrize("entry", READABLE, ids=ids(READABLE))
def test_from_bytes(entry: dict[str, Any], golden_records: dict[str, list[bytes]]) -> None:
    data = open(golden_path(entry), "rb").read()
    for buf in (data, bytearray(data), memoryview(data), np.frombuffer(data, dtype=np.uint8)):
        r = _native.Reader.from_bytes(buf, entry["file"])
        assert r.read_range(0, r.num_records()) == golden_records[entry["file"]]
        assert r.name() == entry["file"]


@pytest.mark.parametrize("entry", READABLE, ids=ids(READABLE))
def test_remote_path(entry: dict[str, Any], golden_records: dict[str, list[bytes]]) -> None:
    """footer_offset + from_footer + chunk_spans + decode_spans, as fsspec would drive it."""
    data = open(golden_path(entry), "rb").read()
    size = len(data)
    s = entry["structure"]
    fo = _native.Reader.footer_offset(data[-BLOCK:], size, entry["file"])
    assert fo == s["footer_offset"]
    r = _native.Reader.from_footer(size, fo, data[fo : size - BLOCK], entry["file"])
    n = r.num_records()
    assert n == entry["num_records"]
    expected = golden_records[entry["file"]]
    g = max(1, r.group_size())
    # Each chunk's span starts at its offset in the manifest.
    starts = [r.chunk_spans([k * g])[0][0] for k in range(r.num_chunks())]
    assert starts == s["data_chunk_offsets"]
    indices = list(range(n))[::-1] + list(range(0, n, 3))
    spans = r.chunk_spans(indices)
    assert all(b < e <= fo for b, e in spans)
    parts = [(b, data[b:e]) for b, e in spans]
    assert r.decode_spans(indices, parts) == [expected[i] for i in indices]
    for call in (lambda: r.read(0), lambda: r.read_batch([]), lambda: r.read_range(0, 0)):
        with pytest.raises(ValueError, match="from_footer"):
            call()
    assert r.decode_spans([], []) == []


def test_transposed_file_opens_but_records_fail() -> None:
    path = golden_path(next(f for f in FILES if f["file"].startswith("transposed")))
    r = _native.Reader(path)
    assert r.num_records() == 3
    for call in (lambda: r.read(0), lambda: r.read_batch([1, 2]), lambda: r.read_range(0, 3)):
        with pytest.raises(
            NotImplementedError, match=r"transposed.array_record: transposed chunk .* at offset \d+"
        ):
            call()


def test_structure_of_pad_to_block_boundary(golden_records: dict[str, list[bytes]]) -> None:
    entry = next(f for f in FILES if f["file"] == "pad_to_block_boundary.array_record")
    r = _native.Reader(golden_path(entry))
    assert [r.chunk_spans([i])[0][0] for i in range(3)] == [64, 65536, 131072]
    assert r.read_batch([2, 0, 1, 1]) == [golden_records[entry["file"]][i] for i in (2, 0, 1, 1)]
