"""Forged files with valid checksums and absurd sizes (tests/engine/forge.py) raise
CorruptionError naming the file and the chunk, on every read path, with little work
(CPU time and peak memory: tests/engine/work.py) and without allocating what the file
claims (docs/spec.md, "Bounds")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import arrayds
from arrayds import _native

from .forge import BLOCK, FORGERIES, ZSTD_OPTIONS, forge, simple_data, zstd_data, zstd_rle
from .work import bounded

CorruptionError = _native.CorruptionError


def native_paths(path: str, data: bytes) -> dict[str, object]:
    """Every way the native reader opens and reads a file; each value is a callable."""

    def remote() -> object:
        size = len(data)
        fo = _native.Reader.footer_offset(data[-BLOCK:], size, path)
        r = _native.Reader.from_footer(size, fo, data[fo : size - BLOCK], path)
        spans = [(a, data[a:b]) for a, b in r.chunk_spans(range(r.num_records()))]
        return r.decode_spans(range(r.num_records()), spans)

    def opened(**kw: object):  # noqa: ANN202
        def run() -> object:
            r = _native.Reader(path, **kw)
            n = r.num_records()
            r.writer_options_string()
            r.read(0)
            r.read_range(0, n)
            r.read_batch([0])
            bufs = [bytearray(10) for _ in range(n)]
            return r.read_into(list(range(n)), bufs)

        return run

    def from_bytes() -> object:
        r = _native.Reader.from_bytes(data, path)
        return r.read_range(0, r.num_records())

    return {
        "mmap": opened(mmap=True),
        "pread": opened(mmap=False),
        "from_bytes": from_bytes,
        "remote": remote,
    }


def python_paths(path: str) -> dict[str, object]:
    def reader(how: str):  # noqa: ANN202
        def run() -> object:
            r = arrayds.ArrayRecordReader(path)
            if how == "read_i":
                return r.read(0)
            if how == "read_list":
                return r.read([0])
            if how == "iter":
                return list(r)
            if how == "getitem":
                return r[np.array([0])]
            return r.read_all()

        return run

    def data_source() -> object:
        return arrayds.ArrayRecordDataSource(path)[0]

    paths = {
        f"reader.{h}": reader(h) for h in ("read_i", "read_all", "read_list", "iter", "getitem")
    }
    paths["data_source"] = data_source
    return paths


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_forgery_is_corruption(name: str, tmp_path: Path) -> None:
    data, offset = FORGERIES[name]
    path = str(tmp_path / f"{name}.array_record")
    Path(path).write_bytes(data)
    paths = {**native_paths(path, data), **python_paths(path)}
    for how, run in paths.items():
        with bounded(how), pytest.raises(CorruptionError) as info:
            run()  # type: ignore[operator]
        message = str(info.value)
        assert path in message, (how, message)
        assert f"(at byte {offset})" in message, (how, message)


def test_valid_zstd_bomb_at_the_codec_ratio_reads() -> None:
    """The densest zstd frame (4 bytes per 128 KiB) is valid data, not a forgery: the
    ratio allowed is zstd's own maximum."""
    n = 48
    size = n << 17
    data = forge([(zstd_data([size], zstd_rle(n, 7), size), 1, size, size)], options=ZSTD_OPTIONS)
    r = _native.Reader.from_bytes(data, "bomb.ar")
    assert r.read(0) == b"\x07" * size


def test_uncompressed_chunk_cannot_decode_to_more_than_it_stores() -> None:
    """An uncompressed file whose footer claims one byte more than a chunk stores is
    refused at open (no codec can make bytes out of nothing); a claim the stored bytes
    could hold but the values section does not is refused at the read."""
    rec = b"x" * 100
    stored = len(simple_data([rec]))
    data = forge([(simple_data([rec]), 1, stored + 1, stored + 1)])
    with pytest.raises(CorruptionError, match=rf"u\.ar: .* {stored + 1} bytes.*\(at byte 64\)"):
        _native.Reader.from_bytes(data, "u.ar")
    r = _native.Reader.from_bytes(forge([(simple_data([rec]), 1, 101, 101)]), "u.ar")
    with pytest.raises(CorruptionError, match=r"u\.ar: .*decoded_data_size is 101.*\(at byte 64\)"):
        r.read(0)


_LIMITED = r"""
import json, resource, sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from engine.forge import FORGERIES
from engine.test_forged import native_paths, python_paths
from arrayds import _native

tmp = Path(sys.argv[2])
paths = {}
for name, (data, _) in FORGERIES.items():
    p = str(tmp / (name + ".array_record"))
    Path(p).write_bytes(data)
    paths[name] = (p, data)

def vm() -> int:
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise AssertionError

# Warm up every path first (threads, their stacks and malloc arenas), then allow
# only 256 MiB of address space more than that.
for name, (p, data) in paths.items():
    for run in {**native_paths(p, data), **python_paths(p)}.values():
        try:
            run()
        except Exception:
            pass
limit = vm() + (256 << 20)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
out = {}
for name, (p, data) in paths.items():
    for how, run in {**native_paths(p, data), **python_paths(p)}.items():
        try:
            run()
            out[name + "/" + how] = "no error"
        except _native.CorruptionError:
            out[name + "/" + how] = "CorruptionError"
        except BaseException as e:
            out[name + "/" + how] = type(e).__name__ + ": " + str(e)[:200]
print(json.dumps(out))
"""


@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""), reason="ASan reserves terabytes")
def test_no_large_allocation(tmp_path: Path) -> None:
    """Every forgery on every path under RLIMIT_AS (256 MiB above the warmed-up
    process): a reader that allocated what the file claims would get MemoryError."""
    tests = str(Path(__file__).resolve().parents[1])
    r = subprocess.run(
        [sys.executable, "-c", _LIMITED, tests, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    results = json.loads(r.stdout.splitlines()[-1])
    bad = {k: v for k, v in results.items() if v != "CorruptionError"}
    assert not bad, bad
    assert len(results) == len(FORGERIES) * 10
