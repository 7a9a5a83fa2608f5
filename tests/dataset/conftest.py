"""Fixtures for the dataset-layer tests: a dataset URL on each store kind."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import fsspec
import pytest

from arrayds.nodes import shards as store_mod

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_with_query_planning(script: str) -> str:
    """Run ``script`` in a fresh interpreter with dask's array query planning on
    (it is chosen at import); assert it succeeded and return what it printed."""
    env = dict(os.environ, DASK_ARRAY__QUERY_PLANNING="True")
    proc = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.fixture(params=["local", "memory"])
def url(request, tmp_path):
    """A fresh dataset URL: a local folder or a memory:// root (removed after)."""
    if request.param == "local":
        yield str(tmp_path / "ds")
        return
    root = f"memory://test-{uuid.uuid4().hex}"
    yield root
    fs = fsspec.filesystem("memory")
    path = root[len("memory://") :]
    if fs.exists(path):
        fs.rm(path, recursive=True)


@pytest.fixture
def local_url(tmp_path):
    return str(tmp_path / "ds")


@pytest.fixture
def stats():
    """Engine-read counters of the store layer, zeroed, with a fresh reader cache."""
    store_mod.clear_reader_cache()
    store_mod.reset_io_stats()
    return store_mod.io_stats
