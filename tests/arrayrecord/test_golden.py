"""Every golden file (written by the official wheel) decodes exactly per MANIFEST.json."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import arrayds

from . import golden

READABLE = [n for n in golden.names() if n != "transposed.array_record"]


def test_manifest_and_data_are_complete() -> None:
    entries = golden.manifest()
    assert len(entries) == 24
    for name, entry in entries.items():
        data = golden.path(name).read_bytes()
        assert len(data) == entry["file_size"], name
        assert hashlib.sha256(data).hexdigest() == entry["file_sha256"], name


@pytest.mark.parametrize("name", READABLE)
def test_golden_file_reads_exactly(name: str) -> None:
    entry = golden.manifest()[name]
    expected = list(golden.records(name))
    n = entry["num_records"]
    with arrayds.ArrayRecordReader(golden.path(name)) as r:
        assert r.num_records() == n == len(r)
        assert r.writer_options_string() == entry["writer_options_string"]
        assert r.group_size() == entry["structure"]["group_size_from_first_footer_entry"]
        everything = r.read_all()
        assert [len(x) for x in everything] == entry["record_lengths"]
        assert golden.length_prefixed_sha256(everything) == entry["length_prefixed_sha256"]
        if "record_sha256" in entry:
            assert [hashlib.sha256(x).hexdigest() for x in everything] == entry["record_sha256"]
        # Every access path gives the same records.
        assert list(r) == expected
        assert [r[i] for i in range(n)] == expected
        assert [r.read(i) for i in range(n)] == expected
        assert r.read(list(range(n))[::-1]) == expected[::-1]
        assert r[np.arange(n)] == expected
        assert r[::3] == expected[::3]
        if n:
            assert r.read(0, n) == expected
            assert r[-1] == expected[-1]
            r.seek(0)
            assert [r.read() for _ in range(n)] == expected
            assert r.record_index() == n


@pytest.mark.parametrize("name", READABLE)
def test_golden_file_through_data_source(name: str) -> None:
    expected = list(golden.records(name))
    src = arrayds.ArrayRecordDataSource(str(golden.path(name)))
    assert len(src) == len(expected)
    assert list(src) == expected
    if expected:
        idx = np.random.default_rng(0).integers(0, len(expected), size=50)
        assert src[idx] == [expected[i] for i in idx]
        assert [src[int(i)] for i in idx] == [expected[i] for i in idx]


def test_all_golden_files_as_one_source() -> None:
    paths = [str(golden.path(n)) for n in READABLE]
    expected = [rec for n in READABLE for rec in golden.records(n)]
    src = arrayds.ArrayRecordDataSource(paths)
    assert len(src) == len(expected)
    idx = np.random.default_rng(1).permutation(len(expected))
    assert src.__getitems__(idx) == [expected[i] for i in idx]
    assert [src[int(i)] for i in idx[:300]] == [expected[i] for i in idx[:300]]
    assert list(src) == expected


def test_default_and_zstd3_are_byte_identical() -> None:
    # README: default options are exactly group_size:1,zstd:3 (a sanity check of the data).
    a = golden.path("default.array_record").read_bytes()
    b = golden.path("gs1_zstd3.array_record").read_bytes()
    assert a == b
