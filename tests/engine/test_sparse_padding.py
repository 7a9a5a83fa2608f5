"""Local files leave the format's zero padding as holes (sparse files):
the bytes read back are those of a densely written file, the official reader reads
them, and the allocated size shrinks by the whole filesystem blocks of padding."""

from __future__ import annotations

import os
import random
import threading
from pathlib import Path

import fsspec
import numpy as np
import pytest
from array_record.python import array_record_module as official

import arrayds
from arrayds import _native

BLOCK = 65536

CASES = {
    # a tiny file: signature, one chunk, footer, padding to 64 KiB, postscript, padding
    "one small record": ("zstd:3", [b"x" * 100]),
    # a padding chunk after every data chunk
    "padded chunks": (
        "group_size:1,uncompressed,pad_to_block_boundary:true",
        [random.Random(1).randbytes(1000 + 700 * k) for k in range(20)],
    ),
    # chunk padding (spec 4.4): 5,000 empty records compress to a few bytes
    "many empty records": ("group_size:5000,zstd:3", [b""] * 5000),
    # records across block headers, a zero run ending in the middle of a block
    "big records": (
        "group_size:2,uncompressed",
        [random.Random(2).randbytes(150_000), b"", random.Random(3).randbytes(70_001)],
    ),
}


def hole_unit(folder: Path) -> int:
    """The filesystem block size of ``folder`` when it keeps holes, else skip."""
    probe = folder / "hole-probe"
    with open(probe, "wb") as f:
        f.seek(1 << 20)
        f.write(b"1")
    st = os.stat(probe)
    probe.unlink()
    if st.st_blocks * 512 >= 1 << 20:
        pytest.skip(f"the filesystem of {folder} does not keep holes (a 1 MiB gap was allocated)")
    return st.st_blksize


def dense_bytes(options: str, records: list[bytes]) -> bytes:
    """The file as the in-memory writer makes it: every padding zero written."""
    w = _native.Writer(None, options)
    for r in records:
        w.write(r)
    w.close()
    return bytes(w.getvalue())


def write_file(path: Path, options: str, records: list[bytes]) -> None:
    with arrayds.ArrayRecordWriter(path, options) as w:
        for r in records:
            w.write(r)


def units_with_data(data: bytes, unit: int) -> int:
    """How many ``unit``-byte blocks of ``data`` hold a byte that is not zero."""
    arr = np.frombuffer(data, dtype=np.uint8)
    padded = np.zeros(-(-len(arr) // unit) * unit, dtype=np.uint8)
    padded[: len(arr)] = arr
    return int(np.count_nonzero(padded.reshape(-1, unit).any(axis=1)))


@pytest.mark.parametrize("case", list(CASES))
def test_sparse_file_equals_dense_and_reads_with_official_reader(tmp_path: Path, case: str):
    options, records = CASES[case]
    path = tmp_path / "sparse.array_record"
    write_file(path, options, records)
    dense = dense_bytes(options, records)
    assert path.read_bytes() == dense
    assert len(dense) % BLOCK == 0
    reader = official.ArrayRecordReader(str(path))
    assert reader.read_all() == records
    reader.close()
    assert arrayds.ArrayRecordReader(path).read_all() == records


@pytest.mark.parametrize("case", list(CASES))
def test_sparse_file_allocates_only_blocks_with_data(tmp_path: Path, case: str):
    unit = hole_unit(tmp_path)
    options, records = CASES[case]
    sparse = tmp_path / "sparse.array_record"
    write_file(sparse, options, records)
    dense_path = tmp_path / "dense.array_record"
    dense = dense_bytes(options, records)
    dense_path.write_bytes(dense)
    os.sync()  # delayed allocation: count what the filesystem really allocated
    dense_alloc = os.stat(dense_path).st_blocks * 512
    sparse_alloc = os.stat(sparse).st_blocks * 512
    assert dense_alloc >= len(dense)
    # Every block holding a non-zero byte is written; the zero blocks of padding are
    # not (the records here have no zero blocks of their own). An extent tree block
    # or two of the filesystem's own may come on top.
    expected = units_with_data(dense, unit) * unit
    assert expected <= sparse_alloc <= expected + 2 * unit, (sparse_alloc, expected)
    assert dense_alloc - sparse_alloc >= dense_alloc - expected - 2 * unit


def test_tiny_file_takes_two_filesystem_blocks(tmp_path: Path):
    unit = hole_unit(tmp_path)
    path = tmp_path / "tiny.array_record"
    write_file(path, "", [b"tiny"])
    st = os.stat(path)
    assert st.st_size == 2 * BLOCK  # the format's size is unchanged
    # block 0: signature, chunk, footer, padding header; block at 64 KiB: postscript
    assert st.st_blocks * 512 == 2 * unit


def test_one_row_append_shard_is_small_on_disk(tmp_path: Path):
    unit = hole_unit(tmp_path)
    url = tmp_path / "a.ads"
    a = arrayds.open_array(url, mode="w", shape=(0, 128), dtype="f8", chunks=(1, 128))
    for k in range(3):
        a.append(np.full((1, 128), k + 0.5))
    shards = sorted(url.rglob("*.array_record"))
    assert len(shards) == 3
    for s in shards:
        st = os.stat(s)
        assert st.st_size >= 2 * BLOCK
        assert st.st_blocks * 512 <= 2 * unit + 4096, s
    np.testing.assert_array_equal(arrayds.open_array(url)[:, 0], [0.5, 1.5, 2.5])


def test_fifo_is_written_densely(tmp_path: Path):
    """A path that cannot seek (a FIFO) gets every byte, zeros included."""
    options, records = CASES["padded chunks"]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = bytearray()

    def drain():
        with open(fifo, "rb") as f:
            while chunk := f.read(1 << 16):
                got.extend(chunk)

    t = threading.Thread(target=drain)
    t.start()
    write_file(fifo, options, records)
    t.join(timeout=30)
    assert not t.is_alive()
    assert bytes(got) == dense_bytes(options, records)


def test_object_store_write_is_dense_and_unchanged(tmp_path: Path):
    """fsspec writes (here the memory filesystem) get the same bytes as before."""
    options, records = CASES["padded chunks"]
    url = "memory://sparse-test/padded.array_record"
    write_file(url, options, records)
    try:
        assert fsspec.filesystem("memory").cat_file(url) == dense_bytes(options, records)
    finally:
        fsspec.filesystem("memory").rm(url)
