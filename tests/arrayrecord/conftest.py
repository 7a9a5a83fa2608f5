"""Shared helpers for the ArrayRecord tests: the official package and record makers."""

from __future__ import annotations

import numpy as np
import pytest
from array_record.python import array_record_module as official


def make_records(size: int, count: int, seed: int = 0) -> list[bytes]:
    """``count`` deterministic records of ``size`` bytes: half random, half repetitive
    text, so that compression has something to do but cannot erase everything."""
    rng = np.random.default_rng(seed)
    half = size // 2
    out = []
    for i in range(count):
        noise = rng.integers(0, 256, size=half, dtype=np.uint8).tobytes()
        text = (b"rec%d-" % i) * (size // 4 + 1)
        out.append((noise + text)[:size])
    return out


def official_write(path: str, records: list[bytes], options: str) -> None:
    w = official.ArrayRecordWriter(path, options)
    for rec in records:
        w.write(rec)
    w.close()


def official_read_all(path: str) -> list[bytes]:
    r = official.ArrayRecordReader(path)
    try:
        return list(r.read_all())
    finally:
        r.close()


@pytest.fixture
def tmp_file(tmp_path):
    """A fresh file path in the test's temporary directory."""
    counter = iter(range(10**6))

    def make(suffix: str = ".array_record") -> str:
        return str(tmp_path / f"f{next(counter)}{suffix}")

    return make
