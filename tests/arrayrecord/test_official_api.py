"""The official package's own test expectations, as interop tests.

Every call shape of the official ``array_record_module_test`` and
``array_record_data_source_test`` (cursor reads, ranges, lists, reader options, the
buffer-size keyword, data sources over lists, slices, file instructions, batches,
iteration order, ``repr``) runs here on files written by one implementation and read
by both; the answers must be the same. Where arrayds differs on purpose
(docs/arrayrecord.md), the test says so and checks both answers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import pickle
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fsspec
import numpy as np
import pytest
from array_record.python import array_record_data_source as official_ds

import arrayds

from .conftest import official
from .test_remote import CountingMemoryFS

WRITERS = ["ours", "official"]
DIGITS = [b"%d" % i for i in range(10)]


@dataclasses.dataclass
class FileInstruction:
    """What TFDS passes (tfds.core.utils.shard_utils.FileInstruction has these fields)."""

    filename: str | os.PathLike[str]
    skip: int
    take: int
    examples_in_shard: int


def write(writer: str, path: str, records: list[bytes], options: str = "") -> None:
    """Write with the official call shape (write() per record, close())."""
    cls = arrayds.ArrayRecordWriter if writer == "ours" else official.ArrayRecordWriter
    w = cls(path, options)
    assert w.ok() and w.is_open()
    for rec in records:
        w.write(rec)
    w.close()
    assert not w.is_open()


def readers(path: str, *args, **kwargs):
    """(ours, official) readers of ``path`` opened with the same arguments."""
    return arrayds.ArrayRecordReader(path, *args, **kwargs), official.ArrayRecordReader(
        path, *args, **kwargs
    )


@pytest.fixture(params=WRITERS)
def writer(request) -> str:
    return request.param


@pytest.fixture
def test_file(tmp_path) -> str:
    return str(tmp_path / "test.arecord")


@pytest.fixture
def digits(tmp_path, writer) -> list[Path]:
    """The official tests' two digit shards: b"0".."4" and b"5".."9"."""
    paths = [tmp_path / f"digits.array_record-0000{k}-of-00002" for k in range(2)]
    for k, p in enumerate(paths):
        write(writer, str(p), DIGITS[5 * k : 5 * k + 5])
    return paths


def both_sources(paths, **kwargs):
    return arrayds.ArrayRecordDataSource(paths, **kwargs), official_ds.ArrayRecordDataSource(
        paths, **kwargs
    )


# ------------------------------------------------------------------------ reader


def test_open_and_close(test_file, writer) -> None:
    write(writer, test_file, [])
    for r in readers(test_file):
        assert r.ok() and r.is_open()
        r.close()
        assert not r.is_open()


def test_bad_options(test_file, writer) -> None:
    write(writer, test_file, [b"x"])
    for cls in (arrayds.ArrayRecordWriter, official.ArrayRecordWriter):
        with pytest.raises(ValueError):
            cls(test_file + ".w", "blah")
    for cls in (arrayds.ArrayRecordReader, official.ArrayRecordReader):
        with pytest.raises(ValueError):
            cls(test_file, "blah")


def test_cursor_reads(test_file, writer) -> None:
    test_strs = [b"abc", b"def", b"ghi"]
    write(writer, test_file, test_strs)
    for r in readers(test_file, "readahead_buffer_size:0,max_parallelism:0"):
        assert r.num_records() == len(test_strs)
        assert r.record_index() == 0
        assert [r.read() for _ in test_strs] == test_strs
        with pytest.raises(IndexError):
            r.read()
        r.seek(0)
        assert r.record_index() == 0
        assert r.read() == test_strs[0]
        assert r.record_index() == 1
        r.seek(2)
        assert (r.read(), r.record_index()) == (test_strs[2], 3)
        r.close()


def test_non_unicode_and_file_reader_buffer_size(test_file, writer) -> None:
    b = b"F\xc3\xb8\xc3\xb6\x97\xc3\xa5r"
    write(writer, test_file, [b])
    for r in readers(test_file):
        assert r.read() == b
    for size in (2**10, 32768, 0):
        ours, theirs = readers(test_file, file_reader_buffer_size=size)
        assert ours.read() == theirs.read() == b
    ours, theirs = readers(test_file, "readahead_buffer_size:0", file_reader_buffer_size=1)
    assert ours.read([0]) == theirs.read([0]) == [b]


def test_file_reader_buffer_size_is_checked(test_file) -> None:
    write("ours", test_file, [b"x"])
    # The official reader takes any C++ integer (-1, True); arrayds wants a byte count.
    for bad in (-1, True, 1.5, "32"):
        with pytest.raises(ValueError, match="file_reader_buffer_size"):
            arrayds.ArrayRecordReader(test_file, file_reader_buffer_size=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):  # keyword only, as the official **kwargs
        arrayds.ArrayRecordReader(test_file, "", None, None, 10)  # type: ignore[misc]
    assert arrayds.ArrayRecordReader(test_file, file_reader_buffer_size=None).read() == b"x"


def test_batch_read_and_read_all(test_file, writer) -> None:
    test_strs = [b"abc", b"def", b"ghi", b"kkk", b"..."]
    write(writer, test_file, test_strs)
    for r in readers(test_file):
        assert r.read_all() == test_strs
        assert r.read([1, 3, 0]) == [test_strs[i] for i in (1, 3, 0)]
        assert r.read([4, 4, 2]) == [test_strs[i] for i in (4, 4, 2)]


def test_read_range(test_file, writer) -> None:
    test_strs = [b"abc", b"def", b"ghi", b"kkk", b"..."]
    write(writer, test_file, test_strs)
    ours, theirs = readers(test_file)
    for r in (ours, theirs):
        with pytest.raises(IndexError):
            r.read(0, 100)
        with pytest.raises(IndexError):
            r.read(3, 2)
        assert r.read(0, -1) == test_strs[0:-1]
        assert r.read(-3, -1) == test_strs[-3:-1]
        assert r.read(1, 3) == test_strs[1:3]
        assert r.read(0, 5) == test_strs
    # On purpose (docs/arrayrecord.md): an empty range is empty, as test_strs[0:0].
    with pytest.raises(IndexError):
        theirs.read(0, 0)
    assert ours.read(0, 0) == [] == ours.read(5, 5)


def test_writer_options_string(test_file, writer) -> None:
    write(writer, test_file, [b"test123"], "group_size:42")
    ours, theirs = readers(test_file)
    expected = (
        "group_size:42,transpose:false,pad_to_block_boundary:false,zstd:3,"
        "window_log:20,max_parallelism:1"
    )
    assert ours.writer_options_string() == theirs.writer_options_string() == expected


def test_offloaded_index_needs_no_footer_prefetch(test_file, writer) -> None:
    write(writer, test_file, [b"a", b"b"])
    for cls in (arrayds.ArrayRecordReader, official.ArrayRecordReader):
        for opts in (
            "index_storage_option:offloaded",
            "index_storage_option:offloaded,footer_prefetch_bytes:64K",
            "index_storage_option:offloaded,footer_prefetch_bytes:auto",
        ):
            with pytest.raises(ValueError, match="footer_prefetch_bytes"):
                cls(test_file, opts)
        r = cls(test_file, "index_storage_option:offloaded,footer_prefetch_bytes:0")
        assert r.read([1, 0]) == [b"b", b"a"]
    with pytest.raises(ValueError, match="footer_prefetch_bytes"):
        arrayds.ArrayRecordDataSource(test_file, {"index_storage_option": "offloaded"})


# ---------------------------------------- remote reads (the official GCS test shapes)


@pytest.fixture
def big_remote(counting_fs, tmp_path, writer):
    """A >2 MiB uncompressed file (36 records of 64 KiB) on a request-counting fsspec
    filesystem, and a local copy for the official reader."""
    local = str(tmp_path / "shard-00000-of-00001")
    records = [b"record-%04d-" % i + b"x" * 65536 for i in range(36)]
    write(writer, local, records, "group_size:1,uncompressed")
    assert os.path.getsize(local) > 2 * 1024 * 1024
    counting_fs.put_file(local, "/bucket/shard-00000-of-00001")
    CountingMemoryFS.log.clear()
    return "countmem:///bucket/shard-00000-of-00001", local, records


@pytest.fixture
def counting_fs():
    CountingMemoryFS.store.clear()
    CountingMemoryFS.log.clear()
    return fsspec.filesystem("countmem")


def _requests() -> list[tuple]:
    return [e for e in CountingMemoryFS.log if e[0] in ("cat_file", "cat_ranges")]


def test_remote_open_is_one_request(big_remote) -> None:
    url, local, records = big_remote
    opts = "readahead_buffer_size:0,max_parallelism:0"
    for prefetch, tail, count in ((None, 1 << 20, 1), ("512K", 512 << 10, 1), ("64K", 65536, 2)):
        CountingMemoryFS.log.clear()
        options = opts if prefetch is None else f"footer_prefetch_bytes:{prefetch},{opts}"
        r = arrayds.ArrayRecordReader(url, options, file_reader_buffer_size=32768)
        assert r.num_records() == len(records) == official.ArrayRecordReader(local).num_records()
        r.close()
        reqs = _requests()
        assert len(reqs) == count, reqs
        _, _, start, end = reqs[0]
        assert end - start in (tail, tail + 1)  # + 1: the size check of a known size
    with pytest.raises(ValueError, match="footer_prefetch_bytes"):
        arrayds.ArrayRecordReader(url, f"index_storage_option:offloaded,{opts}")
    r = arrayds.ArrayRecordReader(
        url, "readahead_buffer_size:16M,max_parallelism:1", file_reader_buffer_size=32768
    )
    assert r.read([0, 17, 35]) == [records[0], records[17], records[35]]
    assert r.read([0, 17, 35]) == official.ArrayRecordReader(local).read([0, 17, 35])


def test_remote_concurrent_readers(big_remote) -> None:
    url, _, records = big_remote
    n = len(records)

    def worker(idx: int) -> list[bytes]:
        r = arrayds.ArrayRecordReader(url, "readahead_buffer_size:16M,max_parallelism:1")
        assert r.num_records() == n
        fetched = r.read([0, idx % n, n - 1])
        r.close()
        return fetched

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(worker, range(32)))
    for idx, fetched in enumerate(results):
        assert fetched == [records[0], records[idx % n], records[-1]]
    assert len(_requests()) == 64  # one to open, one to read, as the official test counts


def test_file_reader_buffer_size_sets_the_remote_read_size(counting_fs, tmp_path, writer) -> None:
    local = str(tmp_path / "small-records")
    records = [b"r%05d-" % i * 20 for i in range(3000)]  # 140 B records, one per chunk
    write(writer, local, records, "group_size:1,uncompressed")
    counting_fs.put_file(local, "/b/small")
    url = "countmem:///b/small"
    theirs = official.ArrayRecordReader(local, file_reader_buffer_size=65536)
    expected = [theirs.read() for _ in range(1000)]
    assert expected == records[:1000]

    exact = arrayds.ArrayRecordReader(url)
    CountingMemoryFS.log.clear()
    assert [exact.read() for _ in range(1000)] == expected
    assert len(_requests()) == 1000  # the default fetches exactly each chunk

    buffered = arrayds.ArrayRecordReader(url, file_reader_buffer_size=65536)
    CountingMemoryFS.log.clear()
    assert [buffered.read() for _ in range(1000)] == expected
    reqs = _requests()
    # 1000 records of ~163 file bytes: ~163 KB in ranges of 64 KiB -> 3 requests
    assert 2 <= len(reqs) <= 4, reqs
    assert all(end - begin >= 65536 for _, ranges in reqs for begin, end in ranges)

    # Random reads, batches, slices, iteration and reads across the window's edge
    # give the official answers.
    rng = np.random.default_rng(0)
    for _ in range(20):
        picks = rng.integers(0, len(records), size=int(rng.integers(1, 40))).tolist()
        assert buffered.read(picks) == theirs.read(picks)
    assert buffered[2990:] == records[2990:]  # the last range stops at the file's end
    assert buffered.read(395, 405) == theirs.read(395, 405)
    assert list(buffered) == theirs.read_all()
    clone = pickle.loads(pickle.dumps(buffered))
    CountingMemoryFS.log.clear()
    assert [clone[i] for i in range(100, 300)] == records[100:300]
    assert len(_requests()) == 1  # the copy keeps the buffer size
    buffered.close()
    with pytest.raises(ValueError, match="closed"):
        buffered.read([0])


# ----------------------------------------------------------------- data source


def test_len_iteration_and_orders(digits) -> None:
    for src in both_sources(digits):
        assert len(src) == 10
        assert list(src) == DIGITS
        assert [src[i] for i in [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]] == DIGITS[::-1]
        order = [3, 0, 5, 9, 2, 1, 4, 7, 8, 6]
        assert [src[i] for i in order] == [DIGITS[i] for i in order]
        assert src.__getitems__(order) == [DIGITS[i] for i in order]
        assert src.__getitems__(np.array(order[:4])) == [DIGITS[i] for i in order[:4]]


def test_single_path_and_context_manager(digits) -> None:
    for cls in (arrayds.ArrayRecordDataSource, official_ds.ArrayRecordDataSource):
        with cls(digits[0]) as src:
            assert [src[x] for x in range(5)] == DIGITS[:5]
        assert src[4] == DIGITS[4]  # both reopen after the with block
        assert [cls(str(digits[1]))[x] for x in range(5)] == DIGITS[5:]


def test_string_read_instructions(digits) -> None:
    paths = [f"{digits[0]}[0:3]", f"{digits[1]}[2:4]"]
    ours, theirs = both_sources(paths)
    assert len(ours) == len(theirs) == 5
    assert [ours[x] for x in range(5)] == [theirs[x] for x in range(5)]
    assert list(ours) == list(theirs) == [b"0", b"1", b"2", b"7", b"8"]


def test_file_instructions(digits) -> None:
    fis = [
        FileInstruction(os.fspath(digits[0]), skip=2, take=1, examples_in_shard=3),
        FileInstruction(os.fspath(digits[1]), skip=2, take=2, examples_in_shard=99),
    ]
    ours, theirs = both_sources(fis)
    assert len(ours) == len(theirs) == 3
    assert [ours[x] for x in range(3)] == [theirs[x] for x in range(3)] == [b"2", b"7", b"8"]
    assert ours.__getitems__([2, 0]) == theirs.__getitems__([2, 0])
    assert list(ours) == list(theirs)
    assert repr(ours) == repr(theirs)
    # One instruction on its own, a PathLike filename, numpy integers.
    one = FileInstruction(digits[1], np.int64(1), np.int64(3), 5)
    ours, theirs = both_sources(one)
    assert list(ours) == list(theirs) == DIGITS[6:9]


def test_instructions_select_the_official_records(tmp_path, writer) -> None:
    # The official reader-index/position expectations, through the records they select.
    files = []
    for k, n in enumerate([2, 5, 11]):
        p = str(tmp_path / f"file_{k + 1}")
        write(writer, p, [b"f%d-%d" % (k, i) for i in range(n)])
        files.append(p)
    fis = [
        FileInstruction(files[0], skip=0, take=2, examples_in_shard=2),
        FileInstruction(files[1], skip=2, take=3, examples_in_shard=99),
        FileInstruction(files[2], skip=10, take=1, examples_in_shard=99),
    ]
    ours, theirs = both_sources(fis)
    assert len(ours) == len(theirs) == 6
    assert [ours[i] for i in range(6)] == [theirs[i] for i in range(6)]
    assert [ours[i] for i in range(6)] == [b"f0-0", b"f0-1", b"f1-2", b"f1-3", b"f1-4", b"f2-10"]


def test_mixed_lists_zero_take_and_take_all(tmp_path, writer) -> None:
    files = []
    for k, n in enumerate([4, 0, 7]):
        p = tmp_path / f"m{k}.ar"
        write(writer, str(p), [b"m%d-%d" % (k, i) for i in range(n)])
        files.append(p)
    a, empty, c = files
    missing = str(tmp_path / "never-written.ar")
    mixed = [
        str(a),
        FileInstruction(os.fspath(c), 1, 0, 7),  # zero take: selects nothing
        FileInstruction(missing, 0, 0, 0),  # never opened, as in the official source
        Path(c),
        f"{a}[1:3]",
        FileInstruction(os.fspath(c), 5, 2, 7),
        empty,
        FileInstruction(os.fspath(a), 0, 4, 4),
    ]
    ours, theirs = both_sources(mixed)
    assert len(ours) == len(theirs) == 4 + 7 + 2 + 2 + 4
    assert list(ours) == list(theirs)
    every = list(range(len(ours)))
    assert ours.__getitems__(every[::-1]) == theirs.__getitems__(every[::-1])
    assert [ours[i] for i in every] == [theirs[i] for i in every]
    assert repr(ours) == repr(theirs)

    # take=-1 is TFDS' "all after skip": the official source cannot take it (its
    # length goes negative); it selects what TFDS resolves it to, skip..end of file.
    take_all = FileInstruction(os.fspath(c), 3, -1, 7)
    with pytest.raises(ValueError):
        len(official_ds.ArrayRecordDataSource(take_all))
    resolved = official_ds.ArrayRecordDataSource(FileInstruction(os.fspath(c), 3, 4, 7))
    got = arrayds.ArrayRecordDataSource([take_all, FileInstruction(os.fspath(c), 7, -1, 7)])
    assert list(got) == list(resolved) == [b"m2-3", b"m2-4", b"m2-5", b"m2-6"]
    assert repr(got) != repr(resolved)  # the path appears twice in got

    only_zero = arrayds.ArrayRecordDataSource([FileInstruction(missing, 0, 0, 0)])
    assert len(only_zero) == 0 and list(only_zero) == [] and only_zero[[]] == []


def test_bad_file_instructions(digits) -> None:
    f = os.fspath(digits[0])
    with pytest.raises(ValueError, match="skip"):
        arrayds.ArrayRecordDataSource(FileInstruction(f, -1, 2, 5))
    with pytest.raises(ValueError, match="take"):
        arrayds.ArrayRecordDataSource([FileInstruction(f, 0, -2, 5)])
    with pytest.raises(TypeError, match="skip must be an int"):
        arrayds.ArrayRecordDataSource(FileInstruction(f, 1.0, 2, 5))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="take must be an int"):
        arrayds.ArrayRecordDataSource(FileInstruction(f, 0, True, 5))
    with pytest.raises(TypeError, match="filename"):
        arrayds.ArrayRecordDataSource(FileInstruction(3, 0, 1, 5))  # type: ignore[arg-type]
    with pytest.raises(IndexError, match="cannot start at 9"):
        arrayds.ArrayRecordDataSource(FileInstruction(f, 9, -1, 5))
    past_end = arrayds.ArrayRecordDataSource(FileInstruction(f, 3, 5, 5))
    assert len(past_end) == 5  # counts come from the instruction, as in the official
    with pytest.raises(IndexError, match="fewer"):
        past_end[0]  # the file has 5 records, not 8: said when it is opened

    @dataclasses.dataclass
    class NoExamplesInShard:  # not a file instruction for either implementation
        filename: str
        skip: int
        take: int

    for cls, err in (
        (arrayds.ArrayRecordDataSource, TypeError),
        (official_ds.ArrayRecordDataSource, ValueError),
    ):
        with pytest.raises(err):
            cls([NoExamplesInShard(f, 0, 1)])
        with pytest.raises(err):
            cls(NoExamplesInShard(f, 0, 1))


def test_keys_out_of_range_and_empty_sequence(digits) -> None:
    ours, theirs = both_sources(digits)
    for key in (-11, 10, 99):
        with pytest.raises(IndexError):  # on purpose: a Python sequence's IndexError
            ours[key]
    for key in (-1, 10):
        with pytest.raises(ValueError):  # the official answer
            theirs[key]
    assert ours[-1] == theirs[9]  # negative keys count from the end here
    for cls in (arrayds.ArrayRecordDataSource, official_ds.ArrayRecordDataSource):
        with pytest.raises(ValueError):
            cls([])


def test_repr_is_the_official_one(digits) -> None:
    ours, theirs = both_sources(digits)
    assert re.fullmatch(r"ArrayRecordDataSource\(hash_of_paths=[\w]+\)", repr(ours))
    assert repr(ours) == repr(theirs)
    h = hashlib.sha1()
    for p in digits:
        h.update(os.fspath(p).encode())
    assert ours.hash_of_paths() == h.hexdigest()
    assert f"hash_of_paths={h.hexdigest()}" in str(ours)
    assert "2 files, 10 records" in str(ours)
    # the same paths however they are given: str, Path, slices, instructions, a glob
    glob = os.path.join(os.path.dirname(digits[0]), "digits.array_record-*")
    for spelled in (
        [str(p) for p in digits],
        [f"{digits[0]}[0:2]", FileInstruction(digits[1], 0, 5, 5)],
        glob,
    ):
        assert repr(arrayds.ArrayRecordDataSource(spelled)) == repr(theirs)
    assert repr(pickle.loads(pickle.dumps(ours))) == repr(theirs)
    assert repr(arrayds.ArrayRecordDataSource(digits[::-1])) != repr(theirs)


def test_glob_equals_the_official_source_over_the_sorted_list(digits) -> None:
    glob = os.path.join(os.path.dirname(digits[0]), "digits.array_record-*-of-00002")
    ours = arrayds.ArrayRecordDataSource(glob)
    theirs = official_ds.ArrayRecordDataSource(sorted(str(p) for p in digits))
    assert list(ours) == list(theirs) == DIGITS
    assert ours.__getitems__([7, 2]) == theirs.__getitems__([7, 2])


def test_reader_options_dict(digits) -> None:
    # The official source adds readahead_buffer_size:0 itself and joins the dict.
    for opts in ({"max_parallelism": "0"}, {"footer_prefetch_bytes": "64K"}, None):
        ours, theirs = both_sources(digits, reader_options=opts)
        assert [ours[i] for i in range(10)] == [theirs[i] for i in range(10)] == DIGITS


def test_pickled_sources_read_the_same(digits) -> None:
    fis = [FileInstruction(digits[1], 1, 3, 5), f"{digits[0]}[1:4]"]
    ours, theirs = (pickle.loads(pickle.dumps(s)) for s in both_sources(fis))
    assert list(ours) == list(theirs) == DIGITS[6:9] + DIGITS[1:4]


def test_grain_checkpoint_of_the_official_source_restores_over_ours(digits) -> None:
    grain = pytest.importorskip("grain", reason="grain is part of the [ml] extra")

    def loader(src):
        sampler = grain.samplers.IndexSampler(
            num_records=len(src),
            shard_options=grain.sharding.NoSharding(),
            shuffle=True,
            num_epochs=1,
            seed=7,
        )
        return grain.DataLoader(data_source=src, sampler=sampler, worker_count=0)

    ours, theirs = both_sources(digits)
    it = iter(loader(theirs))
    head = [next(it) for _ in range(4)]
    state = it.get_state()
    rest = list(it)
    again = iter(loader(ours))
    again.set_state(state)  # Grain compares repr(data_source) with the checkpoint's
    assert list(again) == rest
    assert sorted(head + rest) == DIGITS
    other = arrayds.ArrayRecordDataSource(digits[::-1])  # same length, other files order
    moved = iter(loader(other))
    with pytest.raises(ValueError, match="DataSource in checkpoint"):
        moved.set_state(state)


# ------------------------------------------------ records datasets with consent


def test_pickle_dataset_through_the_one_class(tmp_path) -> None:
    from arrayds import records as records

    url = str(tmp_path / "pk")
    items = [{1, 2}, {3}, frozenset("ab")]
    ds = records.write_records(items, url, serializer="pickle", num_shards=2)
    with pytest.raises(ValueError, match="allow_pickle") as info:
        arrayds.ArrayRecordDataSource(url, decode=True)
    assert "ArrayRecordDataSource" in str(info.value)
    src = arrayds.ArrayRecordDataSource(url, decode=True, allow_pickle=True)
    assert [src[i] for i in range(3)] == items
    assert src[[2, 0]] == [items[2], items[0]] and list(src) == items
    assert pickle.loads(pickle.dumps(src))[1] == {3}
    # The same bytes through the official source, unpickled by hand.
    theirs = official_ds.ArrayRecordDataSource(ds.shard_paths)
    assert [pickle.loads(theirs[i]) for i in range(3)] == items
    assert repr(src) == repr(theirs)
    raw = arrayds.ArrayRecordDataSource(url, allow_pickle=True)  # decode=False: bytes
    assert raw[0] == theirs[0]
    with pytest.raises(ValueError, match="cannot replace"):
        arrayds.ArrayRecordDataSource(url, decode=True, allow_pickle=True, serializer="json")


def test_user_serializer_dataset_through_the_one_class(tmp_path) -> None:
    from arrayds import records as records

    url = str(tmp_path / "custom")
    pair = (lambda x: x[::-1].encode(), lambda b: b.decode()[::-1])
    records.write_records(["abc", "de"], url, serializer=pair)
    with pytest.raises(ValueError, match="serializer"):
        arrayds.ArrayRecordDataSource(url, decode=True)
    src = arrayds.ArrayRecordDataSource(url, decode=True, serializer=pair)
    assert list(src) == ["abc", "de"]
    assert arrayds.ArrayRecordDataSource(url)[0] == b"cba"
    with pytest.raises(ValueError, match="records dataset"):  # plain files hold bytes
        arrayds.ArrayRecordDataSource(
            records.open_records(url).shard_paths, decode=True, serializer=pair
        )
