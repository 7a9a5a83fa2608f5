"""The reader and writer API: overloads, indexing, errors, lifecycle, threads, pickling."""

from __future__ import annotations

import errno
import pickle
import threading

import numpy as np
import pytest

import arrayds
from arrayds import _native

from . import golden
from .conftest import make_records, official

N = 50


@pytest.fixture
def small(tmp_file) -> tuple[str, list[bytes]]:
    records = make_records(40, N, seed=7)
    path = tmp_file()
    with arrayds.ArrayRecordWriter(path, "group_size:4,zstd:1") as w:
        w.write_many(records)
    return path, records


# ------------------------------------------------------------------ reading


def test_read_overloads(small) -> None:
    path, rec = small
    r = arrayds.ArrayRecordReader(path)
    assert r.read() == rec[0]
    assert r.read() == rec[1]
    assert r.record_index() == 2
    r.seek(N - 1)
    assert r.read() == rec[-1]
    assert r.read(3) == rec[3]
    assert r.read(-2) == rec[-2]
    assert r.read(np.int64(5)) == rec[5]
    assert r.read([7, 3, 7]) == [rec[7], rec[3], rec[7]]
    assert r.read((1, 2)) == [rec[1], rec[2]]
    assert r.read(np.array([9, 0], dtype=np.uint32)) == [rec[9], rec[0]]
    assert r.read([]) == []
    assert r.read(2, 6) == rec[2:6]
    assert r.read(-3, -1) == rec[-3:-1]
    assert r.read(-2, N) == rec[-2:]
    assert r.read(4, 4) == []
    assert r.read(N, N) == []
    assert r.read_all() == rec


def test_python_indexing(small) -> None:
    path, rec = small
    r = arrayds.ArrayRecordReader(path)
    assert r[0] == rec[0]
    assert r[-1] == rec[-1]
    assert r[np.int32(4)] == rec[4]
    assert r[5:9] == rec[5:9]
    assert r[::7] == rec[::7]
    assert r[::-1] == rec[::-1]
    assert r[40:10:-3] == rec[40:10:-3]
    assert r[10:5] == []
    assert r[[1, -1, 1]] == [rec[1], rec[-1], rec[1]]
    assert r[np.array([3, 2, 1])] == [rec[3], rec[2], rec[1]]
    mask = np.zeros(N, dtype=bool)
    mask[[4, 8]] = True
    assert r[mask] == [rec[4], rec[8]]
    assert list(r) == rec
    assert len(r) == N == r.num_records()


@pytest.mark.parametrize(
    "call",
    [
        lambda r: r[N],
        lambda r: r[-N - 1],
        lambda r: r.read(N),
        lambda r: r.read(-N - 1),
        lambda r: r.read([0, N]),
        lambda r: r.read([-N - 1]),
        lambda r: r[np.array([N], dtype=np.uint64)],
        lambda r: r[np.array([2**63 + 5], dtype=np.uint64)],
        lambda r: r.read(0, N + 1),
        lambda r: r.read(-N - 1, 2),
        lambda r: r.read(5, 3),
        lambda r: r[np.zeros(N - 1, dtype=bool)],
    ],
)
def test_out_of_range_is_index_error(small, call) -> None:
    path, _ = small
    r = arrayds.ArrayRecordReader(path)
    with pytest.raises(IndexError, match="out of range|boolean mask"):
        call(r)


def test_cursor_past_end_is_index_error(small) -> None:
    path, _ = small
    r = arrayds.ArrayRecordReader(path)
    r.seek(N + 10)  # like a file, seeking past the end is allowed
    with pytest.raises(IndexError, match=f"num_records: {N}"):
        r.read()
    with pytest.raises(ValueError, match="negative seek"):
        r.seek(-1)


@pytest.mark.parametrize("key", ["1", 1.5, None, b"x", [1.5], np.array([[1, 2]]), {1}])
def test_bad_index_types(small, key) -> None:
    path, _ = small
    r = arrayds.ArrayRecordReader(path)
    with pytest.raises(TypeError):
        r[key]
    with pytest.raises(TypeError):
        r.read(key)


def test_read_argument_count(small) -> None:
    r = arrayds.ArrayRecordReader(small[0])
    with pytest.raises(TypeError, match="at most 2"):
        r.read(1, 2, 3)


def test_empty_file(tmp_file) -> None:
    path = tmp_file()
    arrayds.ArrayRecordWriter(path).close()
    r = arrayds.ArrayRecordReader(path)
    assert len(r) == 0
    assert r.read_all() == [] == list(r) == r[:] == r.read(0, 0) == r.read([])
    with pytest.raises(IndexError):
        r[0]
    with pytest.raises(IndexError):
        r.read()


def test_big_records_and_group_sizes_iterate(tmp_file) -> None:
    # Iteration sizes its batches from the records it sees; check big and tiny ones.
    records = make_records(300_000, 5) + make_records(3, 20_000) + make_records(70_000, 3)
    path = tmp_file()
    with arrayds.ArrayRecordWriter(path, "group_size:3,snappy") as w:
        w.write_many(records)
    assert list(arrayds.ArrayRecordReader(path)) == records
    opts = "readahead_buffer_size:0"
    assert list(arrayds.ArrayRecordReader(path, opts)) == records
    assert list(arrayds.ArrayRecordReader(path, {"max_parallelism": "0"})) == records


def test_iteration_can_stop_early(small) -> None:
    path, rec = small
    r = arrayds.ArrayRecordReader(path)
    it = iter(r)
    assert [next(it) for _ in range(3)] == rec[:3]
    it.close()
    r.close()


# ------------------------------------------------------------------ options


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ("foo:1", "foo"),
        ("group_size:1,bogus", "bogus"),
        ("zstd:23", "zstd"),
        ("zstd:abc", "zstd"),
        ("brotli:12", "brotli"),
        ("snappy:3", "snappy"),
        ("uncompressed:1", "uncompressed"),
        ("group_size:0", "group_size"),
        ("group_size:1e3", "group_size"),
        ("group_size", "group_size"),
        ("zstd,brotli", "brotli"),
        ("snappy,uncompressed", "uncompressed"),
        ("uncompressed,window_log:20", "window_log"),
        ("zstd,window_log:9", "window_log"),
        ("group_size:1,group_size:2", "group_size"),
        ("zstd,default", "default"),
        ("transpose", "transpose"),
        ("transpose:true", "transpose"),
        ("pad_to_block_boundary:maybe", "pad_to_block_boundary"),
    ],
)
def test_bad_writer_options(tmp_file, options: str, key: str) -> None:
    path = tmp_file()
    with pytest.raises(ValueError, match=key):
        arrayds.ArrayRecordWriter(path, options)
    with pytest.raises(ValueError, match=key):
        _native.canonical_writer_options(options)


@pytest.mark.parametrize(
    "options",
    [
        "",
        "default",
        "zstd",
        "group_size:1",
        ",,group_size:3,,",
        "group_size: 12",
        "uncompressed",
        "brotli",
        "brotli:9,window_log:18",
        "snappy",
        "zstd:0",
        "zstd:-7,window_log:auto",
        "transpose:false",
        "pad_to_block_boundary",
        "pad_to_block_boundary:true,group_size:5",
        "max_parallelism:4",
        "max_parallelism:auto,saturation_delay_ms:3",
    ],
)
def test_canonical_writer_options_match_official(tmp_file, options: str) -> None:
    ours, theirs = tmp_file(), tmp_file()
    w = arrayds.ArrayRecordWriter(ours, options)
    w.write(b"x")
    w.close()
    ow = official.ArrayRecordWriter(theirs, options)
    ow.write(b"x")
    ow.close()
    expected = official.ArrayRecordReader(theirs).writer_options_string()
    assert w.options_string() == expected
    assert arrayds.ArrayRecordReader(ours).writer_options_string() == expected


def test_writer_options_type(tmp_file) -> None:
    with pytest.raises(TypeError, match="options must be a str"):
        arrayds.ArrayRecordWriter(tmp_file(), {"group_size": "1"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ("readahead:1", "readahead"),
        ("readahead_buffer_size:2G", "readahead_buffer_size"),
        ("readahead_buffer_size:lots", "readahead_buffer_size"),
        ("max_parallelism:-1", "max_parallelism"),
        ("index_storage_option:disk", "index_storage_option"),
        ("max_parallelism:1,max_parallelism:2", "max_parallelism"),
        ({"group_size": "1"}, "group_size"),
    ],
)
def test_bad_reader_options(small, options, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        arrayds.ArrayRecordReader(small[0], options)
    with pytest.raises(ValueError, match=key):
        arrayds.ArrayRecordDataSource(small[0], options)


def test_reader_options_forms(small) -> None:
    path, rec = small
    for opts in (
        "readahead_buffer_size:0,max_parallelism:0",
        {"readahead_buffer_size": "16M", "max_parallelism": "auto"},
        {"readahead_buffer_size": 0},
        "index_storage_option:in_memory,footer_prefetch_bytes:0",
        None,
    ):
        assert arrayds.ArrayRecordReader(path, opts).read_all() == rec
    with pytest.raises(TypeError, match="dict of str"):
        arrayds.ArrayRecordReader(path, 5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a str"):
        arrayds.ArrayRecordReader(path, {"max_parallelism": 1.5})  # type: ignore[dict-item]


# ------------------------------------------------------------------ writer errors


def test_write_str_is_type_error(tmp_file) -> None:
    path = tmp_file()
    w = arrayds.ArrayRecordWriter(path)
    with pytest.raises(TypeError, match="str"):
        w.write("text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        w.write(123)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        w.write_many("abc")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        w.write_many(b"abc")
    with pytest.raises(TypeError):
        w.write_many(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        w.write_many([b"ok", "not ok"])  # type: ignore[list-item]
    assert w.ok()
    assert w.num_records() == 0  # a batch with a bad record writes nothing
    w.write(b"after the errors")
    w.close()
    assert official.ArrayRecordReader(path).read_all() == [b"after the errors"]


def test_writer_lifecycle(tmp_file) -> None:
    path = tmp_file()
    w = arrayds.ArrayRecordWriter(path, "group_size:2")
    assert w.is_open() and w.ok()
    assert "open" in repr(w) and path in repr(w)
    w.write(b"a")
    assert w.num_records() == 1
    w.close()
    w.close()  # idempotent
    assert not w.is_open() and not w.ok()
    assert "closed" in repr(w)
    for call in (lambda: w.write(b"b"), lambda: w.write_many([b"b"]), lambda: w.__enter__()):
        with pytest.raises(ValueError, match="is closed"):
            call()
    assert arrayds.ArrayRecordReader(path).read_all() == [b"a"]
    with pytest.raises(TypeError, match="pickle"):
        pickle.dumps(arrayds.ArrayRecordWriter(tmp_file()))


def test_writer_context_manager_closes(tmp_file) -> None:
    path = tmp_file()
    with arrayds.ArrayRecordWriter(path) as w:
        w.write(b"x")
    assert not w.is_open()
    assert arrayds.ArrayRecordReader(path).read_all() == [b"x"]


def test_failed_with_block_abandons_the_file(tmp_file) -> None:
    # A write that raised must not leave a file that reads as complete.
    path = tmp_file()
    with pytest.raises(RuntimeError, match="boom"):
        with arrayds.ArrayRecordWriter(path) as w:
            w.write_many([b"first", b"second"])
            raise RuntimeError("boom")
    assert not w.is_open() and not w.ok()
    with pytest.raises(arrayds.CorruptionError):
        arrayds.ArrayRecordReader(path)
    r = official.ArrayRecordReader(path)
    assert not r.ok() or r.num_records() == 0


def test_abort_and_garbage_collected_writer(tmp_file) -> None:
    import gc
    import warnings

    path = tmp_file()
    w = arrayds.ArrayRecordWriter(path)
    w.write(b"x")
    w.abort()
    w.abort()
    w.close()  # after abort: nothing more happens
    with pytest.raises(ValueError, match="is closed"):
        w.write(b"y")
    with pytest.raises(arrayds.CorruptionError):
        arrayds.ArrayRecordReader(path)
    path2 = tmp_file()
    w = arrayds.ArrayRecordWriter(path2)
    w.write_many([b"a"] * 10)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del w
        gc.collect()
    assert any(issubclass(c.category, ResourceWarning) for c in caught)
    with pytest.raises(arrayds.CorruptionError):
        arrayds.ArrayRecordReader(path2)


def test_writer_bad_paths(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        arrayds.ArrayRecordWriter(str(tmp_path / "no" / "such" / "dir.ar"))
    with pytest.raises(IsADirectoryError):
        arrayds.ArrayRecordWriter(str(tmp_path))
    with pytest.raises(TypeError, match="path"):
        arrayds.ArrayRecordWriter(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty"):
        arrayds.ArrayRecordWriter("")


def test_unclosed_file_does_not_open(tmp_file) -> None:
    path = tmp_file()
    w = arrayds.ArrayRecordWriter(path)
    w.write_many(make_records(1000, 200))
    # Not closed: no footer, so it must not read as a (shorter) valid file.
    with pytest.raises(arrayds.CorruptionError):
        arrayds.ArrayRecordReader(path)
    w.close()
    assert len(arrayds.ArrayRecordReader(path)) == 200


# ------------------------------------------------------------------ reader lifecycle


def test_reader_lifecycle(small) -> None:
    path, rec = small
    r = arrayds.ArrayRecordReader(path)
    assert r.is_open() and r.ok()
    assert repr(r) == f"ArrayRecordReader({path!r}, num_records={N}, open)"
    r.close()
    r.close()
    assert not r.is_open() and not r.ok()
    assert r.num_records() == N  # metadata still answers
    calls = [
        lambda: r.read(),
        lambda: r.read(0),
        lambda: r.read(-1),
        lambda: r.read([0]),
        lambda: r.read(0, 2),
        lambda: r.read(0, 0),
        lambda: r.read_all(),
        lambda: r[0],
        lambda: r[1:3],
        lambda: r[[1]],
        lambda: r[::2],
        lambda: iter(r),
        lambda: r.seek(0),
        lambda: r.writer_options_string(),
        lambda: r.group_size(),
        lambda: r.__enter__(),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="is closed"):
            call()
    with arrayds.ArrayRecordReader(path) as r2:
        assert r2[1] == rec[1]
    assert not r2.is_open()


def test_close_during_iteration(tmp_file) -> None:
    # Iteration decodes batches; close() takes effect at the next batch boundary.
    records = make_records(1000, 30_000)
    path = tmp_file()
    with arrayds.ArrayRecordWriter(path, "zstd:1") as w:
        w.write_many(records)
    r = arrayds.ArrayRecordReader(path, "readahead_buffer_size:64k")
    it = iter(r)
    assert next(it) == records[0]
    r.close()
    seen = 1
    with pytest.raises(ValueError, match="is closed"):
        for rec in it:
            assert rec == records[seen]
            seen += 1
    assert seen < len(records)


# ------------------------------------------------------------------ opening damaged files


def test_open_missing_file(tmp_path) -> None:
    missing = tmp_path / "missing.array_record"
    with pytest.raises(FileNotFoundError) as info:
        arrayds.ArrayRecordReader(missing)
    assert info.value.errno == errno.ENOENT
    assert str(missing) in str(info.value)
    with pytest.raises(FileNotFoundError):
        arrayds.ArrayRecordDataSource(str(missing))


def test_open_directory(tmp_path) -> None:
    with pytest.raises(OSError):
        arrayds.ArrayRecordReader(tmp_path)


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"hello world\n" * 100, id="text"),
        pytest.param(bytes(131072), id="zeros-128k"),
        pytest.param(np.random.default_rng(3).bytes(131072), id="random-128k"),
        pytest.param(golden.path("gs1_zstd3.array_record").read_bytes()[:65535], id="cut-65535"),
        pytest.param(golden.path("gs1_zstd3.array_record").read_bytes()[:65536], id="cut-65536"),
        pytest.param(golden.path("gs1_zstd3.array_record").read_bytes()[:-1], id="cut-1"),
        pytest.param(
            golden.path("many_small_gs1_uncompressed.array_record").read_bytes()[:131072],
            id="cut-to-block",
        ),
        pytest.param(golden.path("gs1_zstd3.array_record").read_bytes() + b"\0", id="extra-byte"),
        pytest.param(
            golden.path("gs1_zstd3.array_record").read_bytes() + bytes(65536), id="extra-block"
        ),
    ],
)
def test_open_raises_for_non_arrayrecord(tmp_file, content: bytes) -> None:
    path = tmp_file()
    with open(path, "wb") as f:
        f.write(content)
    with pytest.raises(arrayds.CorruptionError) as info:
        arrayds.ArrayRecordReader(path)
    assert path in str(info.value)
    assert isinstance(info.value, OSError)


def test_corruption_error_is_the_engines() -> None:
    assert arrayds.CorruptionError is _native.CorruptionError
    assert issubclass(arrayds.CorruptionError, OSError)


# ------------------------------------------------------------------ transposed files


def test_transposed_file_opens_but_does_not_decode() -> None:
    path = str(golden.path("transposed.array_record"))
    r = arrayds.ArrayRecordReader(path)
    assert r.num_records() == 3
    assert "transpose:true" in r.writer_options_string()
    for call in (lambda: r.read(0), lambda: r.read_all(), lambda: r[[1, 2]], lambda: list(r)):
        with pytest.raises(NotImplementedError, match="transposed.array_record"):
            call()
    src = arrayds.ArrayRecordDataSource(path)
    assert len(src) == 3
    with pytest.raises(NotImplementedError, match="transposed"):
        src[0]


# ------------------------------------------------------------------ threads, pickling


def test_eight_threads_share_one_reader(tmp_file) -> None:
    records = make_records(700, 3000, seed=11)
    path = tmp_file()
    with arrayds.ArrayRecordWriter(path, "group_size:3,zstd:3") as w:
        w.write_many(records)
    r = arrayds.ArrayRecordReader(path)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            barrier.wait()
            for _ in range(300):
                i = int(rng.integers(0, len(records)))
                assert r[i] == records[i]
                idx = rng.integers(0, len(records), size=17)
                assert r[idx] == [records[j] for j in idx]
            start = int(rng.integers(0, len(records) - 100))
            assert r.read(start, start + 100) == records[start : start + 100]
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_close_while_other_threads_read(tmp_file) -> None:
    records = make_records(500, 20_000)
    path = tmp_file()
    with arrayds.ArrayRecordWriter(path, "group_size:2") as w:
        w.write_many(records)
    r = arrayds.ArrayRecordReader(path)
    outcomes: list[str] = []
    started = threading.Barrier(4)

    def work() -> None:
        started.wait()
        try:
            for k in range(10_000):
                assert r[np.arange(k % 7, 20_000, 97)] == records[k % 7 :: 97]
                assert r[k] == records[k]
            outcomes.append("finished")
        except ValueError as e:
            outcomes.append("closed" if "is closed" in str(e) else repr(e))

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    started.wait()
    r.close()
    for t in threads:
        t.join()
    assert set(outcomes) <= {"closed", "finished"} and len(outcomes) == 3, outcomes


def test_reader_pickles_by_path(small) -> None:
    path, rec = small
    r = arrayds.ArrayRecordReader(path, "readahead_buffer_size:0")
    r.seek(5)
    r2 = pickle.loads(pickle.dumps(r))
    assert r2 is not r and r2.is_open()
    assert r2.read() == rec[5]
    assert r2[[1, 2]] == rec[1:3]
    r.close()
    r3 = pickle.loads(pickle.dumps(r))
    assert not r3.is_open()
    with pytest.raises(ValueError, match="is closed"):
        r3[0]


def test_write_many_of_a_generator_holds_a_bounded_batch(tmp_file) -> None:
    """A generator of large records reaches the engine in batches of at most 64 MiB
    (and 4096 records), so its records are never held all at once: when the 24th
    8 MiB record is made, at most a batch of the earlier ones is still alive."""
    import weakref

    from arrayds.files import arrayrecord as ar

    alive: list[weakref.ref] = []
    most = 0

    def records():
        nonlocal most
        for i in range(24):
            rec = np.full(8 << 20, i % 251, dtype=np.uint8)
            alive.append(weakref.ref(rec))
            most = max(most, sum(r() is not None for r in alive))
            yield rec

    path = tmp_file()
    with arrayds.ArrayRecordWriter(path, "uncompressed") as w:
        assert w.write_many(records()) == 24
    assert most <= ar._WRITE_BATCH_BYTES // (8 << 20) + 1, most
    r = arrayds.ArrayRecordReader(path)
    assert len(r) == 24
    assert r[23][:3] == bytes([23, 23, 23]) and len(r[17]) == 8 << 20
    r.close()
