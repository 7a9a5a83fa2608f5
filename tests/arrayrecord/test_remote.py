"""Remote files through fsspec (memory://): byte-range reads, whole-object writes."""

from __future__ import annotations

import pickle
import threading

import fsspec
import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem

import arrayds

from .conftest import make_records, official_read_all, official_write


class CountingMemoryFS(MemoryFileSystem):
    """An in-memory filesystem (its own store) that records every read request."""

    protocol = "countmem"
    store: dict = {}  # noqa: RUF012 - separate from memory:// on purpose
    pseudo_dirs = [""]  # noqa: RUF012
    log: list = []  # noqa: RUF012

    @classmethod
    def _strip_protocol(cls, path):
        if path.startswith("countmem://"):
            path = path[len("countmem://") :]
        return super()._strip_protocol(path)

    # cat_ranges is implemented with cat_file: log only the outer call (per thread, so
    # that readers in several threads are counted right)
    inside = threading.local()

    def cat_file(self, path, start=None, end=None, **kwargs):
        if not getattr(CountingMemoryFS.inside, "cat_ranges", False):
            CountingMemoryFS.log.append(("cat_file", path, start, end))
        return super().cat_file(path, start=start, end=end, **kwargs)

    def cat_ranges(self, paths, starts, ends, **kwargs):
        CountingMemoryFS.log.append(("cat_ranges", list(zip(starts, ends, strict=True))))
        CountingMemoryFS.inside.cat_ranges = True
        try:
            return super().cat_ranges(paths, starts, ends, **kwargs)
        finally:
            CountingMemoryFS.inside.cat_ranges = False

    def pipe_file(self, path, value, **kwargs):
        CountingMemoryFS.log.append(("pipe_file", path, len(value)))
        return super().pipe_file(path, value, **kwargs)


fsspec.register_implementation("countmem", CountingMemoryFS, clobber=True)


@pytest.fixture
def memfs():
    fs = fsspec.filesystem("memory")
    root = f"/arrayds-test-{np.random.default_rng().integers(1 << 62)}"
    fs.mkdir(root)
    yield fs, root
    fs.rm(root, recursive=True)


@pytest.fixture
def counting():
    CountingMemoryFS.store.clear()
    CountingMemoryFS.log.clear()
    return CountingMemoryFS.log


def test_write_remote_read_remote_and_official(memfs, tmp_file) -> None:
    fs, root = memfs
    records = make_records(900, 500, seed=2)
    url = f"memory://{root}/a.array_record"
    with arrayds.ArrayRecordWriter(url, "group_size:3,brotli:2") as w:
        w.write_many(records)
        assert not fs.exists(f"{root}/a.array_record")  # nothing before close()
    data = fs.cat_file(f"{root}/a.array_record")
    assert len(data) % 65536 == 0
    local = tmp_file()
    with open(local, "wb") as f:
        f.write(data)
    assert official_read_all(local) == records
    r = arrayds.ArrayRecordReader(url)
    assert len(r) == 500
    assert r.writer_options_string() == w.options_string()
    assert r.group_size() == 3
    assert r[7] == records[7]
    assert r[-1] == records[-1]
    assert r.read([499, 0, 250]) == [records[499], records[0], records[250]]
    assert r.read(10, 20) == records[10:20]
    assert r[::50] == records[::50]
    assert r.read_all() == records
    assert list(r) == records
    r.seek(498)
    assert r.read() == records[498]
    clone = pickle.loads(pickle.dumps(r))
    assert clone[5] == records[5]
    r.close()
    with pytest.raises(ValueError, match="is closed"):
        r[0]


def test_official_file_uploaded_reads_remotely(memfs, tmp_file) -> None:
    fs, root = memfs
    records = make_records(200_000, 4) + make_records(10, 100)
    local = tmp_file()
    official_write(local, records, "group_size:2,zstd:3")
    fs.put_file(local, f"{root}/b.array_record")
    r = arrayds.ArrayRecordReader(f"memory://{root}/b.array_record")
    assert r.read_all() == records
    assert r[[103, 1]] == [records[103], records[1]]


def test_remote_reads_fetch_only_needed_chunks(counting, tmp_file) -> None:
    records = make_records(1000, 3000, seed=4)
    local = tmp_file()
    official_write(local, records, "group_size:1,zstd:3")
    fs = fsspec.filesystem("countmem")
    fs.put_file(local, "/data/c.array_record")
    size = fs.size("/data/c.array_record")
    counting.clear()
    r = arrayds.ArrayRecordReader("countmem:///data/c.array_record")
    opening = [e for e in counting if e[0] in ("cat_file", "cat_ranges")]
    assert 1 <= len(opening) <= 2, opening  # the tail, and the footer if not in it
    assert all(e[0] == "cat_file" for e in opening)
    counting.clear()
    assert r[1234] == records[1234]
    assert len(counting) == 1 and counting[0][0] == "cat_ranges"
    ((begin, end),) = counting[0][1]
    assert 0 < end - begin < 2000  # one ~1 KiB chunk, not the file
    counting.clear()
    assert r[[5, 2999, 6]] == [records[5], records[2999], records[6]]
    assert len(counting) == 1 and len(counting[0][1]) == 2  # chunks 5 and 6 are merged
    fetched = sum(e - b for b, e in counting[0][1])
    assert fetched < 6000 < size


def test_remote_open_errors(memfs) -> None:
    fs, root = memfs
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        arrayds.ArrayRecordReader(f"memory://{root}/nothing-here.array_record")
    fs.pipe_file(f"{root}/small.bin", b"x" * 100)
    with pytest.raises(arrayds.CorruptionError, match="small.bin"):
        arrayds.ArrayRecordReader(f"memory://{root}/small.bin")
    fs.pipe_file(f"{root}/zeros.bin", bytes(131072))
    with pytest.raises(arrayds.CorruptionError, match="zeros.bin"):
        arrayds.ArrayRecordReader(f"memory://{root}/zeros.bin")


def test_remote_data_source_with_glob(memfs) -> None:
    fs, root = memfs
    expected = []
    for k in range(3):
        recs = [b"%d:%d" % (k, i) for i in range(10 + k)]
        expected.extend(recs)
        with arrayds.ArrayRecordWriter(f"memory://{root}/part-{k}.array_record") as w:
            w.write_many(recs)
    src = arrayds.ArrayRecordDataSource(f"memory://{root}/part-*.array_record")
    assert src.paths == [f"memory://{root}/part-{k}.array_record" for k in range(3)]
    assert len(src) == len(expected)
    assert list(src) == expected
    assert src[[0, 32, 12]] == [expected[0], expected[32], expected[12]]
    assert src[-1] == expected[-1]
    clone = pickle.loads(pickle.dumps(src))
    assert clone[11] == expected[11]
    with pytest.raises(FileNotFoundError):
        arrayds.ArrayRecordDataSource(f"memory://{root}/nope-*.array_record")


def test_file_url_is_local(tmp_path) -> None:
    url = f"file://{tmp_path}/d.array_record"
    with arrayds.ArrayRecordWriter(url) as w:
        w.write(b"local")
    assert (tmp_path / "d.array_record").stat().st_size == 131072
    assert arrayds.ArrayRecordReader(url)[0] == b"local"
    assert arrayds.ArrayRecordDataSource(url)[0] == b"local"


class RefusingMemoryFS(MemoryFileSystem):
    """An in-memory filesystem that refuses whole-object writes (like a read-only bucket)."""

    protocol = "refusemem"
    store: dict = {}  # noqa: RUF012
    pseudo_dirs = [""]  # noqa: RUF012

    @classmethod
    def _strip_protocol(cls, path):
        if path.startswith("refusemem://"):
            path = path[len("refusemem://") :]
        return super()._strip_protocol(path)

    def pipe_file(self, path, value, **kwargs):
        raise PermissionError(13, "read-only bucket", path)


fsspec.register_implementation("refusemem", RefusingMemoryFS, clobber=True)


def test_remote_upload_failure_is_reported_at_close() -> None:
    w = arrayds.ArrayRecordWriter("refusemem:///bucket/x.array_record")
    w.write(b"data")
    with pytest.raises(PermissionError, match="read-only"):
        w.close()
    assert not w.ok() and not w.is_open()
    w.close()  # repeated close does not try again
    assert not fsspec.filesystem("refusemem").exists("/bucket/x.array_record")


def test_unknown_protocol() -> None:
    with pytest.raises(ValueError, match="nosuchproto"):
        arrayds.ArrayRecordWriter("nosuchproto://bucket/x.array_record")
    with pytest.raises(ValueError, match="nosuchproto"):
        arrayds.ArrayRecordReader("nosuchproto://bucket/x.array_record")


def test_failed_with_block_uploads_nothing(memfs) -> None:
    fs, root = memfs
    url = f"memory://{root}/failed.array_record"
    with pytest.raises(RuntimeError, match="boom"):
        with arrayds.ArrayRecordWriter(url) as w:
            w.write(b"partial")
            raise RuntimeError("boom")
    assert not fs.exists(f"{root}/failed.array_record")
