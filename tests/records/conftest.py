"""Shared fixtures for the records-dataset tests."""

from __future__ import annotations

import struct

import dask
import numpy as np
import pytest
import tfrecord.writer


@pytest.fixture(autouse=True)
def _threaded_bags(request):
    """Bags default to a process pool; most tests use threads to stay fast (tests
    whose name says "processes" keep dask's default)."""
    if "processes" in request.node.name:
        yield
        return
    with dask.config.set(scheduler="threads"):
        yield


def write_independent_tfrecord(path, records) -> None:
    """TFRecord framing written with the independent `tfrecord` package's helpers."""
    w = tfrecord.writer.TFRecordWriter(str(path))
    for r in records:
        length = struct.pack("<Q", len(r))
        w.file.write(length)
        w.file.write(w.masked_crc(length))
        w.file.write(r)
        w.file.write(w.masked_crc(r))
    w.close()


def example(i: int) -> dict:
    """A JSON-like training example with numpy features."""
    rng = np.random.default_rng(i)
    return {
        "id": i,
        "text": f"example {i}",
        "tokens": rng.integers(0, 30_000, size=int(rng.integers(1, 20)), dtype=np.int32),
        "image": rng.random((2, 3), dtype=np.float32),
        "label": bool(i % 2),
        "meta": {"source": "synthetic", "weights": [0.5, float(i)]},
    }


def assert_example_equal(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        if isinstance(a[k], np.ndarray):
            assert b[k].dtype == a[k].dtype and b[k].shape == a[k].shape
            np.testing.assert_array_equal(a[k], b[k])
        else:
            assert a[k] == b[k]


@pytest.fixture
def examples():
    return [example(i) for i in range(200)]
