"""The reader keywords a dataset's shard cache uses: ``whole_file=`` and
``get_ranges=`` (the byte ranges fetched through the caller's function), on a remote
file in ``memory://``."""

from __future__ import annotations

import uuid

import fsspec
import pytest

import arrayds


@pytest.fixture
def remote_file():
    url = f"memory://reader-kw-{uuid.uuid4().hex}/f.array_record"
    with arrayds.ArrayRecordWriter(url, "group_size:1") as w:
        w.write_many(b"record %03d" % i for i in range(50))
    yield url, fsspec.filesystem("memory").size(url)
    fsspec.filesystem("memory").rm(url)


def test_get_ranges_fetches_every_chunk_the_reads_need(remote_file):
    url, size = remote_file
    fs = fsspec.filesystem("memory")
    asked: list[list[tuple[int, int]]] = []

    def get_ranges(ranges):
        asked.append(list(ranges))
        return [fs.cat_file(url, start=b, end=e) for b, e in ranges]

    r = arrayds.ArrayRecordReader(url, file_size=size, get_ranges=get_ranges)
    assert r.read([3, 40]) == [b"record 003", b"record 040"]
    assert asked and all(0 <= b < e <= size for call in asked for b, e in call)


def test_whole_file_serves_the_first_read_without_a_request(remote_file):
    url, size = remote_file
    calls = []

    def get_ranges(ranges):
        calls.append(ranges)
        raise AssertionError("no request expected")

    r = arrayds.ArrayRecordReader(url, file_size=size, whole_file=True, get_ranges=get_ranges)
    assert r.holds_whole_file
    assert r.read(list(range(50)))[49] == b"record 049"
    assert not calls and not r.holds_whole_file  # kept for the first read only


def test_a_get_ranges_that_is_not_callable_is_refused(remote_file):
    url, size = remote_file
    with pytest.raises(TypeError, match="get_ranges must be callable, got int"):
        arrayds.ArrayRecordReader(url, file_size=size, get_ranges=3)


def test_a_short_range_from_get_ranges_is_corruption_not_wrong_data(remote_file):
    url, size = remote_file
    fs = fsspec.filesystem("memory")

    def short(ranges):
        return [fs.cat_file(url, start=b, end=e)[:-1] for b, e in ranges]

    r = arrayds.ArrayRecordReader(url, file_size=size, get_ranges=short)
    with pytest.raises(arrayds.CorruptionError):
        r.read([7])
