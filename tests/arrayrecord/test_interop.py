"""Interoperability with the official array_record package, both ways.

Every codec x group size {1, 2, 1000} x record size {0 B, 1 B, 1 KiB, 200 KiB} x count
{0, 1, a few thousand} (a few thousand only for small records, a dozen for 200 KiB).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayds

from . import golden
from .conftest import make_records, official, official_read_all, official_write

CODECS = ["uncompressed", "zstd", "brotli", "snappy"]
GROUP_SIZES = [1, 2, 1000]
SIZE_COUNTS = [
    (0, 0),
    (0, 1),
    (0, 3000),
    (1, 1),
    (1, 3000),
    (1024, 1),
    (1024, 3000),
    (200 * 1024, 1),
    (200 * 1024, 12),
]
CASES = [
    pytest.param(codec, gs, size, count, id=f"{codec}-gs{gs}-{size}B-x{count}")
    for codec in CODECS
    for gs in GROUP_SIZES
    for size, count in SIZE_COUNTS
]


def _options(codec: str, gs: int) -> str:
    return f"group_size:{gs},{codec}"


def _sha(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def test_build_has_every_codec() -> None:
    assert arrayds.codecs() == {"uncompressed": True, "zstd": True, "brotli": True, "snappy": True}


@pytest.mark.parametrize(("codec", "gs", "size", "count"), CASES)
def test_ours_to_official(tmp_file, codec: str, gs: int, size: int, count: int) -> None:
    records = make_records(size, count, seed=size + count)
    path = tmp_file()
    with arrayds.ArrayRecordWriter(path, _options(codec, gs)) as w:
        assert w.write_many(records) == count
    assert official_read_all(path) == records
    r = official.ArrayRecordReader(path)
    assert r.num_records() == count
    assert r.writer_options_string() == w.options_string()
    if count:
        assert r.read([count - 1, 0]) == [records[-1], records[0]]
    r.close()
    if codec == "uncompressed":
        other = tmp_file()
        official_write(other, records, _options(codec, gs))
        assert _sha(path) == _sha(other), "uncompressed output differs from the official bytes"


@pytest.mark.parametrize(("codec", "gs", "size", "count"), CASES)
def test_official_to_ours(tmp_file, codec: str, gs: int, size: int, count: int) -> None:
    records = make_records(size, count, seed=size * 3 + count)
    path = tmp_file()
    official_write(path, records, _options(codec, gs))
    with arrayds.ArrayRecordReader(path) as r:
        assert len(r) == count
        assert r.read_all() == records
        assert list(r) == records
        if count:
            picks = [count - 1, 0, count // 2, count // 2]
            assert r.read(picks) == [records[i] for i in picks]
            assert r[count // 2] == records[count // 2]
    src = arrayds.ArrayRecordDataSource(path)
    assert len(src) == count
    if count:
        assert src[-1] == records[-1]


@pytest.mark.parametrize(
    "name",
    [n for n in golden.names() if "uncompressed" in golden.manifest()[n]["options"]],
)
def test_uncompressed_golden_files_reproduced_byte_for_byte(tmp_file, name: str) -> None:
    entry = golden.manifest()[name]
    path = tmp_file()
    with arrayds.ArrayRecordWriter(path, entry["options"]) as w:
        w.write_many(list(golden.records(name)))
    assert _sha(path) == entry["file_sha256"]


def test_pad_to_block_boundary_reproduced(tmp_file) -> None:
    # Uncompressed variant of the padded golden layout, checked against the wheel.
    records = [golden.text(i) for i in range(3)]
    ours, theirs = tmp_file(), tmp_file()
    opts = "group_size:1,uncompressed,pad_to_block_boundary:true"
    with arrayds.ArrayRecordWriter(ours, opts) as w:
        w.write_many(records)
    official_write(theirs, records, opts)
    assert _sha(ours) == _sha(theirs)


def test_write_one_by_one_equals_write_many(tmp_file) -> None:
    records = make_records(100, 500)
    a, b = tmp_file(), tmp_file()
    with arrayds.ArrayRecordWriter(a, "group_size:7,uncompressed") as w:
        for rec in records:
            w.write(rec)
    with arrayds.ArrayRecordWriter(b, "group_size:7,uncompressed") as w:
        w.write_many(iter(records))  # a generator goes in batches
    assert _sha(a) == _sha(b)
    assert official_read_all(a) == records


def test_bytes_like_records(tmp_file) -> None:
    import numpy as np

    path = tmp_file()
    arr = np.arange(10, dtype=np.int32)
    with arrayds.ArrayRecordWriter(path) as w:
        w.write(b"bytes")
        w.write(bytearray(b"bytearray"))
        w.write(memoryview(b"memoryview"))
        w.write(arr)
        w.write_many([bytearray(b"x"), memoryview(b"y"), arr[::-1].copy()])
    assert official_read_all(path) == [
        b"bytes",
        b"bytearray",
        b"memoryview",
        arr.tobytes(),
        b"x",
        b"y",
        arr[::-1].tobytes(),
    ]


_codec_options = st.sampled_from(
    ["uncompressed", "zstd", "zstd:1", "zstd:-5", "zstd:19", "brotli:0", "brotli", "snappy"]
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    records=st.lists(st.binary(max_size=3000), max_size=60),
    group_size=st.integers(1, 70),
    codec=_codec_options,
    pad=st.booleans(),
    direction=st.sampled_from(["ours->official", "official->ours"]),
)
def test_property_random_records_round_trip(
    tmp_path_factory, records, group_size, codec, pad, direction
) -> None:
    path = str(tmp_path_factory.mktemp("prop") / "p.array_record")
    opts = f"group_size:{group_size},{codec},pad_to_block_boundary:{str(pad).lower()}"
    if direction == "ours->official":
        with arrayds.ArrayRecordWriter(path, opts) as w:
            w.write_many(records)
        assert official_read_all(path) == records
    else:
        official_write(path, records, opts)
    with arrayds.ArrayRecordReader(path) as r:
        assert r.read_all() == records
        assert list(r) == records
        if records:
            idx = list(range(len(records)))[::-2]
            assert r.read(idx) == [records[i] for i in idx]
