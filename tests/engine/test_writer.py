"""The writer: byte-identical uncompressed output, options, inputs, lifecycle."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from arrayds import _native

from .conftest import READABLE, UNCOMPRESSED, golden_path, ids


def write_file(path: str | None, records: list[Any], options: str = "") -> _native.Writer:
    w = _native.Writer(path, options)
    for r in records:
        w.write(r)
    w.close()
    return w


@pytest.mark.parametrize("entry", UNCOMPRESSED, ids=ids(UNCOMPRESSED))
def test_uncompressed_is_byte_identical(
    entry: dict[str, Any], golden_records: dict[str, list[bytes]], tmp_path: Path
) -> None:
    """Spec 10.3: with `uncompressed`, the official bytes exactly."""
    records = golden_records[entry["file"]]
    golden = Path(golden_path(entry)).read_bytes()
    path = tmp_path / "out.array_record"
    write_file(str(path), records, entry["options"])
    assert path.read_bytes() == golden
    w = _native.Writer(None, entry["options"])
    assert w.write_many(iter(records)) == len(records)
    w.close()
    assert w.getvalue() == golden


@pytest.mark.parametrize("entry", READABLE, ids=ids(READABLE))
def test_rewrite_any_options_reads_back(
    entry: dict[str, Any], golden_records: dict[str, list[bytes]]
) -> None:
    records = golden_records[entry["file"]]
    w = write_file(None, records, entry["options"])
    assert w.options_string() == entry["writer_options_string"]
    r = _native.Reader.from_bytes(w.getvalue())
    assert r.read_range(0, r.num_records()) == records
    assert r.writer_options_string() == entry["writer_options_string"]


def test_parallel_encoding_gives_identical_bytes() -> None:
    rng = np.random.default_rng(3)
    records = [
        rng.integers(0, 20, size=int(rng.integers(0, 5000)), dtype=np.uint8).tobytes()
        for _ in range(3000)
    ]
    outputs = set()
    for opts in ("max_parallelism:1", "max_parallelism:2", "max_parallelism:8", ""):
        w = _native.Writer(None, "group_size:3,zstd:5," + opts if opts else "group_size:3,zstd:5")
        w.write_many(records)
        w.close()
        outputs.add(w.getvalue())
    assert len(outputs) == 1
    r = _native.Reader.from_bytes(outputs.pop())
    assert r.read_range(0, 3000) == records


def test_accepts_buffers_rejects_str(tmp_path: Path) -> None:
    arr = np.arange(12, dtype=np.int32).reshape(3, 4)
    noncontig = arr[:, ::2]
    records = [b"a", bytearray(b"bc"), memoryview(b"def"), arr, noncontig, np.float64(2.5)]
    w = _native.Writer(None, "uncompressed")
    for r in records:
        w.write(r)
    with pytest.raises(TypeError, match="not str"):
        w.write("text")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="'int'"):
        w.write(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not str"):
        w.write_many([b"ok", "text", b"never"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="record 1 .*not 'int'"):
        w.write_many((b"ok", 5))  # type: ignore[arg-type]
    assert w.num_records() == len(records)  # a list/tuple with a bad item writes nothing
    with pytest.raises(TypeError, match="not str"):
        w.write_many(iter([b"ok", "text"]))  # type: ignore[list-item]
    assert w.num_records() == len(records)  # ... and neither does the batch of an iterator
    w.write_many(x for x in [b"ok"])
    w.close()
    r = _native.Reader.from_bytes(w.getvalue())
    assert r.read_range(0, r.num_records()) == [
        b"a",
        b"bc",
        b"def",
        arr.tobytes(),
        np.ascontiguousarray(noncontig).tobytes(),
        np.float64(2.5).tobytes(),
        b"ok",
    ]


def test_write_from_inside_write_many_is_an_error_not_a_deadlock() -> None:
    w = _native.Writer(None, "uncompressed")

    def records():
        yield b"first"
        w.write(b"nested")
        yield b"second"

    with pytest.raises(RuntimeError, match="already busy"):
        w.write_many(records())
    w.write(b"after")
    w.close()
    r = _native.Reader.from_bytes(w.getvalue())
    assert r.read_range(0, r.num_records()) == [b"after"]  # the failed batch is dropped


def test_engine_works_in_forked_children(tmp_path: Path) -> None:
    """The shared thread pool is rebuilt in a child forked after the parent used it."""
    import multiprocessing

    records = [b"%d" % i * 50 for i in range(2000)]
    w = _native.Writer(str(tmp_path / "parent.ar"), "group_size:10")
    w.write_many(records)
    w.close()
    r = _native.Reader(str(tmp_path / "parent.ar"))
    assert r.read_batch(list(range(0, 2000, 7))) == records[::7]  # the pool is running

    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        results = pool.starmap(_child_work, [(str(tmp_path), k) for k in range(4)])
    assert results == [True] * 4


def _child_work(directory: str, k: int) -> bool:
    records = [b"%d" % i * 50 for i in range(2000)]
    r = _native.Reader(os.path.join(directory, "parent.ar"))
    ok = r.read_batch(list(range(1999, -1, -3))) == records[::-1][::3]
    w = _native.Writer(os.path.join(directory, f"child{k}.ar"), "group_size:3")
    w.write_many(records)
    w.close()
    r2 = _native.Reader(os.path.join(directory, f"child{k}.ar"))
    return ok and r2.read_range(0, 2000) == records


def test_lifecycle(tmp_path: Path) -> None:
    w = _native.Writer(None)
    assert w.is_open()
    with pytest.raises(ValueError, match="after close"):
        w.getvalue()
    w.write(b"x")
    w.close()
    w.close()  # idempotent
    assert not w.is_open()
    assert w.num_records() == 1
    for call in (lambda: w.write(b"y"), lambda: w.write_many([b"y"])):
        with pytest.raises(ValueError, match="is closed"):
            call()
    assert w.getvalue() == w.getvalue()
    f = _native.Writer(str(tmp_path / "f.ar"))
    f.close()
    with pytest.raises(ValueError, match="in-memory"):
        f.getvalue()
    assert os.path.getsize(tmp_path / "f.ar") == 131072


def test_open_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        _native.Writer(str(tmp_path / "missing" / "f.ar"))
    assert info.value.filename == str(tmp_path / "missing" / "f.ar")
    with pytest.raises(IsADirectoryError):
        _native.Writer(str(tmp_path))
    w = _native.Writer(tmp_path / "pathlike.ar")  # os.PathLike
    w.close()


def test_unclosed_writer_is_finished_when_collected(tmp_path: Path) -> None:
    path = tmp_path / "gc.ar"
    w = _native.Writer(str(path), "uncompressed")
    w.write(b"kept")
    del w
    assert _native.Reader(str(path)).read_range(0, 1) == [b"kept"]


def test_large_record_and_many_groups() -> None:
    big = os.urandom(3 << 20)
    records = [big, b"", b"small"] * 3
    built = _native.codecs()
    for opts in ("uncompressed", "zstd:1", "brotli:1", "snappy", "group_size:4,zstd"):
        if not built.get(opts.split(":")[0], True):
            continue  # codec not in this build (make test requires all: test_environment)
        w = _native.Writer(None, opts)
        w.write_many(records)
        w.close()
        r = _native.Reader.from_bytes(w.getvalue())
        assert r.read_batch([0, 4, 8, 2, 5]) == [big, b"", b"small", b"small", b"small"]


@pytest.mark.parametrize(
    "options,group",
    [
        ("group_size:1,zstd:3", 1),
        ("group_size:1,uncompressed", 1),
        ("group_size:1,snappy", 1),
        ("group_size:1,brotli:1", 1),
        ("group_size:70,zstd:3", 70),
        ("group_size:70,uncompressed", 70),
    ],
)
def test_chunk_data_split_by_a_block_header_at_every_offset(options: str, group: int) -> None:
    """Chunk 1 starts a little before the block boundary at 65536, so its compression
    byte, varints and sections are cut by the block header at every possible place."""
    if not all(_native.codecs()[c] for c in ("brotli", "snappy")):
        pytest.fail("this build lacks brotli or snappy")
    rng = np.random.default_rng(5)
    filler = [b"f"] * (group - 1)
    second = [bytes([65 + k % 26]) * (200 + k) for k in range(group)]
    starts = set()
    for first_size in range(65150, 65500):
        first = rng.integers(0, 256, size=first_size, dtype=np.uint8).tobytes()
        records = [first, *filler, *second]
        w = _native.Writer(None, options)
        w.write_many(records)
        w.close()
        r = _native.Reader.from_bytes(w.getvalue(), f"size {first_size}")
        assert r.read_range(0, len(records)) == records
        starts.add(r.chunk_spans([group])[0][0])
    assert set(range(65536 - 50, 65536)) <= starts
