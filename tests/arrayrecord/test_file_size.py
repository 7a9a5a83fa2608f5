"""ArrayRecordReader(..., file_size=N): a remote file opens without a size request,
and a file of another size is a CorruptionError naming it (never wrong data)."""

from __future__ import annotations

import os

import fsspec
import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import arrayds
from arrayds import CorruptionError


class SizeCountingFS(MemoryFileSystem):
    """An in-memory file system (its own store) that logs size lookups and reads."""

    protocol = "sizecountmem"
    store: dict = {}  # noqa: RUF012 - separate from memory:// on purpose
    pseudo_dirs = [""]  # noqa: RUF012
    log: list = []  # noqa: RUF012

    @classmethod
    def _strip_protocol(cls, path):
        if path.startswith("sizecountmem://"):
            path = path[len("sizecountmem://") :]
        return super()._strip_protocol(path)

    def info(self, path, **kwargs):
        SizeCountingFS.log.append(("info", path))
        return super().info(path, **kwargs)

    def cat_file(self, path, start=None, end=None, **kwargs):
        SizeCountingFS.log.append(("cat_file", start, end))
        return super().cat_file(path, start=start, end=end, **kwargs)


fsspec.register_implementation("sizecountmem", SizeCountingFS, clobber=True)

# incompressible, about 210 KB: the 128 KiB tail starts inside the file
RECORDS = [np.random.default_rng(i).bytes(700) for i in range(300)]


@pytest.fixture
def remote():
    """(url, bytes of a valid file) on the counting file system; log cleared."""
    fs = fsspec.filesystem("sizecountmem")
    path = f"/f-{os.urandom(6).hex()}.array_record"
    with arrayds.ArrayRecordWriter(f"sizecountmem://{path}", "group_size:4,zstd:1") as w:
        w.write_many(RECORDS)
    raw = fs.cat_file(path)
    SizeCountingFS.log.clear()
    yield f"sizecountmem://{path}", raw
    fs.rm(path)


def test_known_size_opens_with_one_ranged_read_and_no_size_request(remote):
    url, raw = remote
    assert len(raw) > 128 << 10
    r = arrayds.ArrayRecordReader(url, "footer_prefetch_bytes:128K", file_size=len(raw))
    assert not [e for e in SizeCountingFS.log if e[0] == "info"]
    reads = [e for e in SizeCountingFS.log if e[0] == "cat_file"]
    # one tail read, one byte past the claimed end (so a longer file shows)
    assert reads == [("cat_file", len(raw) - (128 << 10), len(raw) + 1)]
    assert r.read_all() == RECORDS
    # without the size: a size request, then the same tail
    SizeCountingFS.log.clear()
    r2 = arrayds.ArrayRecordReader(url, "footer_prefetch_bytes:128K")
    assert [e[0] for e in SizeCountingFS.log] == ["info", "cat_file"]
    assert r2.read([0, 299]) == [RECORDS[0], RECORDS[299]]


@pytest.mark.parametrize("delta", [1, -1, 4096, -4096, 1 << 20])
def test_wrong_size_is_corruption_naming_the_file(remote, delta):
    url, raw = remote
    with pytest.raises(CorruptionError, match=r"expected to have \d+ bytes") as info:
        arrayds.ArrayRecordReader(url, file_size=len(raw) + delta)
    assert url in str(info.value)
    real = str(len(raw)) if delta > 0 else "more than that"
    assert real in str(info.value)


@pytest.mark.parametrize("cut", [10, 40_000])
def test_file_shorter_than_said_is_corruption(remote, cut):
    """The object was replaced by a shorter one (a truncated upload)."""
    url, raw = remote
    fs = fsspec.filesystem("sizecountmem")
    fs.pipe_file(url, raw[:-cut])
    with pytest.raises(CorruptionError, match=f"file has {len(raw) - cut}") as info:
        arrayds.ArrayRecordReader(url, file_size=len(raw))
    assert url in str(info.value)


def test_file_longer_than_said_is_corruption(remote):
    url, raw = remote
    fsspec.filesystem("sizecountmem").pipe_file(url, raw + b"\0" * 100)
    with pytest.raises(CorruptionError, match="but the file has more than that"):
        arrayds.ArrayRecordReader(url, file_size=len(raw))


def test_size_below_one_block_and_missing_file(remote):
    url, raw = remote
    with pytest.raises(CorruptionError, match="at least 65536 bytes"):
        arrayds.ArrayRecordReader(url, file_size=1000)
    with pytest.raises(FileNotFoundError):
        arrayds.ArrayRecordReader(url + ".missing", file_size=len(raw))


def test_local_file_size_is_checked(tmp_path):
    path = str(tmp_path / "a.array_record")
    with arrayds.ArrayRecordWriter(path) as w:
        w.write_many(RECORDS[:5])
    size = os.path.getsize(path)
    assert arrayds.ArrayRecordReader(path, file_size=size).read_all() == RECORDS[:5]
    with pytest.raises(CorruptionError, match=f"expected to have {size + 1} bytes") as info:
        arrayds.ArrayRecordReader(path, file_size=size + 1)
    assert path in str(info.value)


@pytest.mark.parametrize("bad", [-1, 1.5, "100", True])
def test_file_size_must_be_a_count(remote, bad):
    url, _raw = remote
    with pytest.raises(ValueError, match="file_size must be a non-negative int"):
        arrayds.ArrayRecordReader(url, file_size=bad)
