"""Files written here read with the official reader, and the other way round."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from array_record.python import array_record_module as official

from arrayds import _native

OPTIONS = [
    "uncompressed",
    "zstd:3",
    "brotli:6",
    "snappy",
    "group_size:7,zstd:1",
    "group_size:64,brotli:3,window_log:18",
    "group_size:5,snappy",
    "group_size:3,uncompressed,pad_to_block_boundary:true",
    "zstd:19,window_log:27,group_size:1000",
    "zstd:-3,group_size:2",
]


@pytest.fixture(scope="module")
def records() -> list[bytes]:
    rng = random.Random(1)
    out = [rng.randbytes(rng.randrange(0, 3000)) for _ in range(300)]
    out += [b"", b"z" * 200_000, rng.randbytes(70_000), b"tail"]
    return out


def needs(options: str) -> None:
    for codec in ("brotli", "snappy"):
        if codec in options and not _native.codecs()[codec]:
            pytest.fail(f"this build lacks {codec}; rebuild with its -dev package installed")


@pytest.mark.parametrize("options", OPTIONS)
def test_ours_read_by_official(options: str, records: list[bytes], tmp_path: Path) -> None:
    needs(options)
    path = str(tmp_path / "ours.ar")
    w = _native.Writer(path, options)
    w.write_many(records)
    w.close()
    r = official.ArrayRecordReader(path)
    try:
        assert r.num_records() == len(records)
        assert r.read_all() == records
        assert r.read([len(records) - 1, 0, 5]) == [records[-1], records[0], records[5]]
        assert r.writer_options_string() == _native.canonical_writer_options(options)
    finally:
        r.close()


@pytest.mark.parametrize("options", OPTIONS)
def test_official_read_by_ours(options: str, records: list[bytes], tmp_path: Path) -> None:
    needs(options)
    path = str(tmp_path / "theirs.ar")
    w = official.ArrayRecordWriter(path, options)
    for rec in records:
        w.write(rec)
    w.close()
    r = _native.Reader(path)
    assert r.read_range(0, r.num_records()) == records
    assert r.read_batch(list(range(len(records)))[::-7]) == records[::-7]
    if "uncompressed" in options:
        ours = _native.Writer(None, options)
        ours.write_many(records)
        ours.close()
        assert ours.getvalue() == Path(path).read_bytes()
