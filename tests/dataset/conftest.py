"""Fixtures for the dataset-layer tests: a dataset URL on each store kind."""

from __future__ import annotations

import uuid

import fsspec
import pytest

from arrayds import store as store_mod


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
