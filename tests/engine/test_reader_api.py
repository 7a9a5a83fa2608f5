"""Reader behaviour: indices, batches, ranges, closing, threads, the chunk cache."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from arrayds import _native


@pytest.fixture(scope="module")
def records() -> list[bytes]:
    return [(b"%d-" % i) * (i % 13) for i in range(1000)]


@pytest.fixture(scope="module", params=["group_size:1", "group_size:16", "group_size:1000"])
def path(request: pytest.FixtureRequest, records: list[bytes], tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("api") / "f.ar"
    w = _native.Writer(str(p), request.param)
    w.write_many(records)
    w.close()
    return str(p)


def test_indices(path: str, records: list[bytes]) -> None:
    r = _native.Reader(path)
    n = len(records)
    for bad in (-1, n, n + 5, 2**63):
        with pytest.raises(IndexError, match=f"out of range for {n} records in .*f.ar"):
            r.read(bad) if bad < 2**63 else r.read_batch([bad])
        with pytest.raises(IndexError):
            r.read_batch([0, bad])
    with pytest.raises(IndexError):
        r.read_range(5, 4)
    with pytest.raises(IndexError):
        r.read_range(0, n + 1)
    assert r.read_range(7, 7) == []
    assert r.read_batch([]) == []
    with pytest.raises(TypeError):
        r.read_batch([1.5])
    with pytest.raises(TypeError):
        r.read_batch(["1"])


def test_batches(path: str, records: list[bytes]) -> None:
    r = _native.Reader(path)
    idx = [999, 0, 0, 17, 500, 17, 998]
    expected = [records[i] for i in idx]
    assert r.read_batch(idx) == expected
    assert r.read_batch(tuple(idx)) == expected
    for dtype in (np.int8, np.int16, np.int32, np.int64, np.uint16, np.uint32, np.uint64, np.intp):
        small = [i for i in idx if i < np.iinfo(dtype).max]
        assert r.read_batch(np.array(small, dtype=dtype)) == [records[i] for i in small]
    strided = np.arange(0, 1000, dtype=np.int64)[::-37]
    assert r.read_batch(strided) == [records[i] for i in strided]
    with pytest.raises(IndexError):
        r.read_batch(np.array([-1], dtype=np.int64))
    assert r.read_range(0, 1000) == records
    assert r.read_range(990, 1000) == records[990:]


def test_close(path: str, records: list[bytes]) -> None:
    r = _native.Reader(path)
    assert r.is_open()
    r.close()
    r.close()
    assert not r.is_open()
    assert r.num_records() == len(records)  # metadata still answers
    for call in (
        lambda: r.read(0),
        lambda: r.read_batch([0]),
        lambda: r.read_range(0, 1),
        lambda: r.chunk_spans([0]),
    ):
        with pytest.raises(ValueError, match="is closed"):
            call()


def test_many_threads_share_one_reader(path: str, records: list[bytes]) -> None:
    r = _native.Reader(path)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(50):
                idx = rng.integers(0, len(records), size=int(rng.integers(1, 40)))
                if r.read_batch(idx) != [records[i] for i in idx]:
                    raise AssertionError("wrong records")
                i = int(idx[0])
                if r.read(i) != records[i]:
                    raise AssertionError("wrong record")
                a = int(rng.integers(0, len(records)))
                if r.read_range(a, min(a + 50, len(records))) != records[a : a + 50]:
                    raise AssertionError("wrong range")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_close_while_other_threads_read(path: str, records: list[bytes]) -> None:
    """close() during reads: in-flight reads finish, later ones raise ValueError."""
    r = _native.Reader(path)
    started = threading.Barrier(5)
    errors: list[BaseException] = []
    closed_seen: list[bool] = []

    def work() -> None:
        started.wait()
        for _ in range(10_000):
            try:
                got = r.read_range(0, 200)
            except ValueError as e:
                closed_seen.append("is closed" in str(e))
                return
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
                return
            if got != records[:200]:
                errors.append(AssertionError("wrong records"))
                return

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    started.wait()
    r.close()
    for t in threads:
        t.join()
    assert errors == []
    assert closed_seen == [True] * 4


def test_max_parallelism_zero_reads_the_same(path: str, records: list[bytes]) -> None:
    r = _native.Reader(path, "max_parallelism:0")
    assert r.read_batch(list(range(999, -1, -1))) == records[::-1]


def test_writer_threads_serialised(tmp_path: Path) -> None:
    """Concurrent write() calls from threads all land (order between threads is free)."""
    w = _native.Writer(None, "group_size:4")

    def work(k: int) -> None:
        for i in range(500):
            w.write(b"%d:%d" % (k, i))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    w.close()
    r = _native.Reader.from_bytes(w.getvalue())
    got = r.read_range(0, r.num_records())
    assert sorted(got) == sorted(b"%d:%d" % (k, i) for k in range(4) for i in range(500))
    for k in range(4):
        mine = [x for x in got if x.startswith(b"%d:" % k)]
        assert mine == [b"%d:%d" % (k, i) for i in range(500)]
