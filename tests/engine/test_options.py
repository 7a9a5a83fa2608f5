"""Writer/reader option strings, checked against the official writer (spec 12.1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from array_record.python import array_record_module as official

from arrayds import _native

VALID = [
    "",
    "default",
    "zstd",
    "zstd:3",
    "group_size:1",
    "uncompressed",
    "brotli",
    "snappy",
    "brotli:9,window_log:18",
    "brotli:9,window_log:auto",
    "zstd,window_log:auto",
    "zstd:0",
    "zstd:-5",
    "snappy:2",
    "transpose_bucket_size:1B",
    "transpose_bucket_size:1k",
    "transpose_bucket_size:1.5k",
    "transpose:false",
    "group_size:+5",
    "group_size: 7 ",
    "uncompressed:",
    "zstd:",
    "brotli:",
    "pad_to_block_boundary:",
    "pad_to_block_boundary:true",
    ",,group_size:3,,",
    ",default",
    "default,zstd",
    "window_log:25",
    "window_log:25,brotli",
    "window_log:31",
    "max_parallelism:auto",
    "max_parallelism:4",
    "saturation_delay_ms:5",
    "zstd:-131072",
    "group_size:2147483647",
    "zstd:+3",
    "zstd: 3",
    "max_parallelism: 2",
    "group_size:65536,zstd:19,window_log:27,pad_to_block_boundary:false",
]

INVALID = [
    ("transpose_bucket_size:1b", "transpose_bucket_size"),
    ("group_size:-5", "group_size"),
    ("group_size:0", "group_size"),
    ("group_size", "group_size"),
    ("uncompressed:1", "uncompressed"),
    ("pad_to_block_boundary:TRUE", "pad_to_block_boundary"),
    ("zstd,default", "default"),
    ("zstd,zstd", "zstd"),
    ("zstd,brotli", "brotli"),
    ("window_log:31,brotli", "window_log"),
    ("max_parallelism:0", "max_parallelism"),
    ("foo", "foo"),
    ("Group_size:1", "Group_size"),
    ("window_log:9", "window_log"),
    ("window_log:32", "window_log"),
    ("uncompressed,window_log:20", "window_log"),
    ("window_log:20,snappy", "snappy"),
    ("zstd:23", "zstd"),
    ("zstd:-131073", "zstd"),
    ("brotli:12", "brotli"),
    ("snappy:0", "snappy"),
    ("group_size:2147483648", "group_size"),
    ("group_size:0x10", "group_size"),
    ("group_size:1e3", "group_size"),
    (" zstd", "zstd"),
    ("saturation_delay_ms:0", "saturation"),
    ("transpose_bucket_size:0", "transpose_bucket_size"),
]


def official_string(tmp_path: Path, options: str) -> str:
    path = str(tmp_path / "o.ar")
    w = official.ArrayRecordWriter(path, options)
    w.close()
    r = official.ArrayRecordReader(path)
    try:
        return r.writer_options_string()
    finally:
        r.close()


@pytest.mark.parametrize("options", VALID)
def test_canonical_string_matches_official(options: str, tmp_path: Path) -> None:
    ours = _native.canonical_writer_options(options)
    assert ours == official_string(tmp_path, options)
    assert _native.Writer(None, options).options_string() == ours


@pytest.mark.parametrize("options,key", INVALID)
def test_invalid_options_are_value_errors_naming_the_key(
    options: str, key: str, tmp_path: Path
) -> None:
    with pytest.raises(ValueError) as ours:
        _native.canonical_writer_options(options)
    assert key in str(ours.value)
    with pytest.raises(ValueError):
        _native.Writer(None, options)
    with pytest.raises(ValueError) as theirs:
        official.ArrayRecordWriter(str(tmp_path / "x.ar"), options)
    assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("options", ["transpose", "transpose:", "transpose:true"])
def test_transpose_is_rejected(options: str) -> None:
    with pytest.raises(ValueError, match="Option transpose: transposed chunks are not supported"):
        _native.Writer(None, options)


def test_reader_options(tmp_path: Path) -> None:
    w = _native.Writer(str(tmp_path / "r.ar"))
    w.write(b"x")
    w.close()
    good = [
        "",
        "readahead_buffer_size:0",
        "readahead_buffer_size:16M",
        "readahead_buffer_size:auto",
        "max_parallelism:0",
        "max_parallelism:auto",
        "max_parallelism:3",
        "index_storage_option:in_memory",
        "index_storage_option:offloaded,footer_prefetch_bytes:0",
        "index_storage_option:",
        "footer_prefetch_bytes:1M",
        "footer_prefetch_bytes:0",
    ]
    for opts in good:
        _native.check_reader_options(opts)
        assert _native.Reader(str(tmp_path / "r.ar"), opts).read(0) == b"x"
    bad = [
        ("readahead_buffer_size:2G", "readahead_buffer_size"),
        ("max_parallelism:-1", "max_parallelism"),
        ("index_storage_options:in_memory", "index_storage_options"),
        ("index_storage_option:disk", "index_storage_option"),
        ("group_size:1", "group_size"),
        ("readahead_buffer_size=0", "readahead_buffer_size=0"),
    ]
    for opts, key in bad:
        with pytest.raises(ValueError, match=key):
            _native.check_reader_options(opts)
        with pytest.raises(ValueError, match=key):
            _native.Reader(str(tmp_path / "r.ar"), opts)
