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


def _serving(url: str, asked: list | None = None):
    """A get_ranges over the memory file ``url`` (ranges cut at its end), recording
    each call's ranges in ``asked``."""
    fs = fsspec.filesystem("memory")

    def get_ranges(ranges):
        if asked is not None:
            asked.append(list(ranges))
        return [fs.cat_file(url, start=b, end=e) for b, e in ranges]

    return get_ranges


def test_get_ranges_opens_and_reads_the_file(remote_file):
    url, size = remote_file
    asked: list[list[tuple[int, int]]] = []
    r = arrayds.ArrayRecordReader(url, file_size=size, get_ranges=_serving(url, asked))
    # the open: the tail, one byte past the claimed end (a longer file would show it)
    assert len(asked) == 1 and len(asked[0]) == 1 and asked[0][0][1] == size + 1
    assert r.read([3, 40]) == [b"record 003", b"record 040"]
    assert len(asked) == 2 and all(0 <= b < e <= size for b, e in asked[1])


def test_get_ranges_needs_no_file_system(remote_file):
    """With ``get_ranges`` and ``file_size`` every byte comes through the function: a
    URL whose protocol fsspec does not know opens and reads."""
    url, size = remote_file
    with pytest.raises(ValueError, match="Protocol not known"):
        arrayds.ArrayRecordReader("nosuchfs://bucket/f.array_record", file_size=size)
    r = arrayds.ArrayRecordReader(
        "nosuchfs://bucket/f.array_record", file_size=size, get_ranges=_serving(url)
    )
    assert r[49] == b"record 049" and list(r)[:2] == [b"record 000", b"record 001"]


def test_get_ranges_with_a_footer_past_the_tail():
    """A footer longer than the tail fetched at the open: it is a second range of the
    function, and a short one is corruption."""
    url = f"memory://reader-kw-{uuid.uuid4().hex}/big.array_record"
    with arrayds.ArrayRecordWriter(url, "group_size:1,uncompressed") as w:
        w.write_many(b"%d" % i for i in range(20000))  # a footer of some 100s of KiB
    size = fsspec.filesystem("memory").size(url)
    try:
        asked: list[list[tuple[int, int]]] = []
        opts = "footer_prefetch_bytes:64K"
        r = arrayds.ArrayRecordReader(url, opts, file_size=size, get_ranges=_serving(url, asked))
        assert len(asked) == 2 and asked[1][0][1] == size - 65536  # the footer, apart
        assert r[12345] == b"12345"
        calls: list[list[tuple[int, int]]] = []
        serve = _serving(url, calls)

        def short_footer(ranges):  # the tail whole, the footer one byte short
            got = serve(ranges)
            return got if len(calls) == 1 else [g[:-1] for g in got]

        with pytest.raises(arrayds.CorruptionError, match="the footer"):
            arrayds.ArrayRecordReader(url, opts, file_size=size, get_ranges=short_footer)
    finally:
        fsspec.filesystem("memory").rm(url)


def test_whole_file_serves_the_first_read_without_a_request(remote_file):
    url, size = remote_file
    asked: list[list[tuple[int, int]]] = []
    r = arrayds.ArrayRecordReader(
        url, file_size=size, whole_file=True, get_ranges=_serving(url, asked)
    )
    assert asked == [[(0, size + 1)]]  # the whole file, footer included, in one range
    assert r.holds_whole_file
    assert r.read(list(range(50)))[49] == b"record 049"
    assert len(asked) == 1 and not r.holds_whole_file  # kept for the first read only


def test_a_get_ranges_that_is_not_callable_is_refused(remote_file):
    url, size = remote_file
    with pytest.raises(TypeError, match="get_ranges must be callable, got int"):
        arrayds.ArrayRecordReader(url, file_size=size, get_ranges=3)


@pytest.mark.parametrize("cut", [1, 1000, "all"])
def test_a_short_range_from_get_ranges_is_corruption_not_wrong_data(remote_file, cut):
    url, size = remote_file
    serve = _serving(url)
    short = {"on": False}

    def get_ranges(ranges):
        got = serve(ranges)
        if not short["on"]:
            return got
        return [b"" if cut == "all" else g[:-cut] for g in got]

    r = arrayds.ArrayRecordReader(url, file_size=size, get_ranges=get_ranges)
    short["on"] = True
    with pytest.raises(arrayds.CorruptionError, match="asked for bytes"):
        r.read([7])
    # at the open: the tail's length tells the file's size, or that it has none of it
    with pytest.raises(arrayds.CorruptionError, match="expected to have"):
        arrayds.ArrayRecordReader(url, file_size=size, get_ranges=get_ranges)


def test_a_longer_file_than_file_size_is_corruption(remote_file):
    url, size = remote_file
    with pytest.raises(arrayds.CorruptionError, match="more than that"):
        arrayds.ArrayRecordReader(url, file_size=size - 1, get_ranges=_serving(url))
