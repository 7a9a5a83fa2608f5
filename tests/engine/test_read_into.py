"""Reader.read_into: records decoded into caller-provided writable buffers."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from arrayds import _native

CorruptionError = _native.CorruptionError


def make_records(n: int = 300) -> list[bytes]:
    rng = np.random.default_rng(5)
    return [rng.integers(0, 7, size=(i * 37) % 1500, dtype=np.uint8).tobytes() for i in range(n)]


RECORDS = make_records()
OPTIONS = ["group_size:1", "group_size:1,uncompressed", "group_size:7,zstd:1", "group_size:300"]


@pytest.fixture(scope="module", params=OPTIONS)
def path(request: pytest.FixtureRequest, tmp_path_factory) -> str:
    p = tmp_path_factory.mktemp("into") / "f.ar"
    w = _native.Writer(str(p), request.param)
    w.write_many(RECORDS)
    w.close()
    return str(p)


def empty_like(i: int, skip: int = 0) -> np.ndarray:
    return np.full(len(RECORDS[i]) - skip, 0xEE, dtype=np.uint8)


def test_equal_to_read_batch(path: str) -> None:
    r = _native.Reader(path)
    idx = [299, 0, 5, 5, 150, 1, 298, 7]
    bufs = [empty_like(i) for i in idx]
    assert r.read_into(idx, bufs) is None
    assert [b.tobytes() for b in bufs] == r.read_batch(idx)
    # every record, as a numpy index array, with bytearrays and memoryviews
    allidx = np.arange(len(RECORDS), dtype=np.int32)
    out = [
        bytearray(len(x)) if i % 2 else memoryview(bytearray(len(x))) for i, x in enumerate(RECORDS)
    ]
    r.read_into(allidx, out)
    assert [bytes(b) for b in out] == RECORDS
    r.read_into([], [])


def test_prefix_shared_and_per_record(path: str) -> None:
    r = _native.Reader(path)
    idx = [i for i in range(len(RECORDS)) if len(RECORDS[i]) >= 4][:40]
    bufs = [empty_like(i, 4) for i in idx]
    r.read_into(idx, bufs, [RECORDS[i][:4] for i in idx])
    assert [b.tobytes() for b in bufs] == [RECORDS[i][4:] for i in idx]
    # one shared prefix: records 0 and 300/37-multiples are empty; use records with a common start
    same = [i for i in idx if RECORDS[i][:1] == RECORDS[idx[0]][:1]]
    bufs = [empty_like(i, 1) for i in same]
    r.read_into(same, bufs, RECORDS[same[0]][:1])
    assert [b.tobytes() for b in bufs] == [RECORDS[i][1:] for i in same]
    with pytest.raises(ValueError, match=r"record \d+ does not start with the expected 4-byte"):
        r.read_into([idx[0]], [empty_like(idx[0], 4)], b"\xff\xff\xff\xff")


def test_strided_and_multidimensional_destinations(path: str) -> None:
    r = _native.Reader(path)
    i = 27  # 999 bytes
    n = len(RECORDS[i])
    assert n == 999
    want = np.frombuffer(RECORDS[i], dtype=np.uint8)
    big = np.zeros((9, 3 * 111 * 2), dtype=np.uint8)
    box = big[::1, 1::2][:, :111]  # (9, 111), non-contiguous rows and columns
    r.read_into([i], [box])
    assert box.tobytes() == RECORDS[i]
    assert big[:, 0::2].sum() == 0  # nothing written outside the box
    # elements larger than a byte, negative strides
    j = 4
    assert len(RECORDS[j]) == 148
    u2 = np.zeros((2, 74), dtype="<u2")[:, ::2][::-1]  # (2, 37), strided, reversed rows
    r.read_into([j], [u2])
    assert np.ascontiguousarray(u2).tobytes() == RECORDS[j]
    # a 0-d destination
    k = next(k for k, x in enumerate(RECORDS) if len(x) == 8)
    scalar = np.zeros((), dtype="<f8")
    r.read_into([k], [scalar])
    assert scalar.tobytes() == RECORDS[k]
    assert want.size == n == box.size


def test_wrong_size_names_record_and_sizes(path: str) -> None:
    r = _native.Reader(path)
    for bad in (np.empty(998, np.uint8), np.empty(1000, np.uint8), np.empty(999, np.uint16)):
        with pytest.raises(ValueError, match=r"f\.ar: record 27 has 999 bytes, but buffer 1 holds"):
            r.read_into([0, 27], [empty_like(0), bad])
    with pytest.raises(ValueError, match=r"after a 3-byte prefix \(expected 1001 bytes\)"):
        r.read_into([27], [np.empty(998, np.uint8)], b"abc")
    # a wrong buffer writes nothing
    ok = empty_like(5)
    with pytest.raises(ValueError):
        r.read_into([5, 27], [ok, np.empty(3, np.uint8)])
    assert (ok == 0xEE).all()
    with pytest.raises(ValueError, match="2 indices but 1 buffers"):
        r.read_into([0, 1], [empty_like(0)])
    with pytest.raises(ValueError, match="2 indices but 3 prefixes"):
        r.read_into([0, 1], [empty_like(0), empty_like(1)], [b"", b"", b""])


def test_readonly_and_non_buffers(path: str) -> None:
    r = _native.Reader(path)
    ro = np.zeros(999, np.uint8)
    ro.flags.writeable = False
    with pytest.raises(TypeError, match=r"buffer 0 \(for record 27\) is read-only"):
        r.read_into([27], [ro])
    with pytest.raises(TypeError, match="is read-only"):
        r.read_into([27], [bytes(999)])
    with pytest.raises(TypeError, match="must be a writable buffer .* not 'str'"):
        r.read_into([27], ["x" * 999])
    with pytest.raises(TypeError, match="not 'list'"):
        r.read_into([27], [[0] * 999])


def test_out_of_range_and_closed(path: str) -> None:
    r = _native.Reader(path)
    n = len(RECORDS)
    for bad in (-1, n, n + 10):
        with pytest.raises(IndexError, match=f"record index {bad} is out of range for {n} records"):
            r.read_into([0, bad], [empty_like(0), np.empty(1, np.uint8)])
    r.close()
    with pytest.raises(ValueError, match="is closed"):
        r.read_into([0], [empty_like(0)])


def test_damaged_record_is_corruption(tmp_path: Path) -> None:
    for options in ("group_size:1", "group_size:4"):
        w = _native.Writer(None, options)
        w.write_many(RECORDS[:20])
        w.close()
        data = bytearray(w.getvalue())
        good = _native.Reader.from_bytes(bytes(data))
        # flip a byte inside the data of chunk 3 (after its 40-byte header)
        spans = good.chunk_spans([12])
        begin = spans[0][0]
        data[begin + 60] ^= 0x40
        r = _native.Reader.from_bytes(bytes(data), "bad.ar")
        with pytest.raises(CorruptionError, match=r"^bad\.ar: .*hash mismatch.*\(at byte \d+\)"):
            r.read_into([12], [empty_like(12)])
        with pytest.raises(CorruptionError):
            r.read_into([12], [empty_like(12, 2)], RECORDS[12][:2])
        # the other records still read
        b = empty_like(0 if options == "group_size:4" else 1)
        r.read_into([0 if options == "group_size:4" else 1], [b])


def test_index_only_reader_with_spans(path: str) -> None:
    data = Path(path).read_bytes()
    size = len(data)
    off = _native.Reader.footer_offset(data[-65536:], size)
    r = _native.Reader.from_footer(size, off, data[off : size - 65536], "remote.ar")
    idx = [3, 200, 3]
    with pytest.raises(ValueError, match="holds only the index"):
        r.read_into(idx, [empty_like(i) for i in idx])
    spans = [(b, data[b:e]) for b, e in r.chunk_spans(idx)]
    bufs = [empty_like(i) for i in idx]
    r.read_into(idx, bufs, None, spans)
    assert [b.tobytes() for b in bufs] == [RECORDS[i] for i in idx]
    with pytest.raises(ValueError, match="do not cover"):
        r.read_into(idx, [empty_like(i) for i in idx], None, spans[:1] if len(spans) > 1 else [])


def test_threads_share_a_reader(path: str) -> None:
    r = _native.Reader(path)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        rng = np.random.default_rng(seed)
        try:
            for _ in range(20):
                idx = rng.integers(0, len(RECORDS), size=16)
                bufs = [empty_like(int(i)) for i in idx]
                r.read_into(idx, bufs)
                assert [b.tobytes() for b in bufs] == [RECORDS[int(i)] for i in idx]
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


_POOL_CHECK = """
import numpy as np
from arrayds import _native

n = 3 << 20
first = np.frombuffer(_native.pooled_buffer(n), dtype=np.uint8)
assert first.flags.writeable and first.size == n and first.ctypes.data % 64 == 0
first[:] = 7
address = first.ctypes.data
idle = _native._buffer_pool_idle_bytes()
del first  # the block goes back to the pool
assert _native._buffer_pool_idle_bytes() >= idle + n
again = np.frombuffer(_native.pooled_buffer(n - 100), dtype=np.uint8)  # n..2n fits
assert again.ctypes.data == address, "the idle block was not reused"
del again
# never more than 128 MiB idle, and blocks over 64 MiB are not kept
held = [_native.pooled_buffer(20 << 20) for _ in range(10)]
del held
assert _native._buffer_pool_idle_bytes() <= 128 << 20
before = _native._buffer_pool_idle_bytes()
huge = _native.pooled_buffer(65 << 20)
del huge
assert _native._buffer_pool_idle_bytes() <= before
assert len(_native.pooled_buffer(0)) == 0
try:
    _native.pooled_buffer(-1)
except TypeError:
    pass
else:
    raise AssertionError("a negative size was accepted")
"""


def test_pooled_buffers_are_reused_and_bounded() -> None:
    # in a fresh interpreter: the pool is process-wide, and in the suite, blocks left
    # idle by earlier tests or taken by their lingering threads decide which block a
    # request gets
    done = subprocess.run(
        [sys.executable, "-c", _POOL_CHECK], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr


def test_read_into_a_pooled_buffer(path: str) -> None:
    r = _native.Reader(path)
    buf = np.frombuffer(_native.pooled_buffer(len(RECORDS[27])), dtype=np.uint8)
    r.read_into([27], [buf])
    assert buf.tobytes() == RECORDS[27]
