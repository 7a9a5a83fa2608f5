"""Datasets whose variables have long shard lists (stored in segments, docs/spec.md
14.3): opening one with xarray reads the manifests' heads only, whether a member's
list comes from its own manifest or from the group's snapshot (a roll forward
pending), and a read loads the one segment its chunks lie in. Real writes on local
folders, ``SEGMENT_LIMIT`` made small."""

from __future__ import annotations

import os

import dask.array as da
import numpy as np
import pytest
import xarray as xr

import arrayds
from arrayds.nodes import history as log

LIMIT = 8
N = 12 * LIMIT


@pytest.fixture(autouse=True)
def _small_segments(monkeypatch):
    monkeypatch.setattr(log, "SEGMENT_LIMIT", LIMIT)


def _dataset(n: int, start: int = 0) -> xr.Dataset:
    return xr.Dataset({"v": (("t",), da.arange(start, start + n, chunks=1))})


def _loaded() -> int:
    """How many segments and indexes this process has parsed since the last clear."""
    return len(log._cache)


def test_an_open_reads_heads_and_a_read_one_segment(tmp_path):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(_dataset(N), url, shard_size=1)
    log.clear_cache()
    got = xr.open_dataset(url, engine="arrayds")
    assert got.sizes["t"] == N and _loaded() == 0
    assert int(got.v[5 * LIMIT + 1]) == 5 * LIMIT + 1
    assert _loaded() == 1
    np.testing.assert_array_equal(got.v.values, np.arange(N))


def test_the_snapshot_copy_of_a_pending_roll_forward_is_read_lazily_too(tmp_path):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(_dataset(N), url, shard_size=1)
    own = os.path.join(url, "v", "arrayds.json")
    old = open(own, "rb").read()
    arrayds.to_arrayrecord(
        _dataset(N, N), url, mode="a", append_dim="t", shard_size=1, compact=False
    )
    with open(own, "wb") as f:  # a writer killed right after its commit point
        f.write(old)
    log.clear_cache()
    got = xr.open_dataset(url, engine="arrayds")
    assert got.sizes["t"] == 2 * N and _loaded() == 0  # the snapshot's copy, unread
    assert int(got.v[N + 3]) == N + 3
    assert _loaded() == 1
    np.testing.assert_array_equal(got.v.values, np.arange(2 * N))
    assert arrayds.open_array(url, "v").shape == (N,)  # its own manifest: the old one
