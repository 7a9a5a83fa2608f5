"""Fixtures for the tools tests: a fresh dataset URL on a local folder, memory:// and
S3 (the moto server of tests/s3/s3server.py, one per session)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys
import uuid

import fsspec
import pytest

BUCKET = "arrayds-tools"


def _s3server():
    name = "arrayds_tests_s3server"
    if name in sys.modules:
        return sys.modules[name]
    path = pathlib.Path(__file__).parents[1] / "s3" / "s3server.py"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def tools_s3():
    """A running moto server with the bucket of these tests."""
    pytest.importorskip("s3fs", reason="the S3 tests need s3fs (pip install arrayds[s3])")
    pytest.importorskip("moto.server", reason="the S3 tests need moto[server]")
    server = _s3server().start_moto()
    import s3fs

    s3fs.S3FileSystem(**server.storage_options()).mkdir(BUCKET)
    yield server
    server.stop()


class Where:
    """A dataset URL and its storage options (``None`` off S3)."""

    def __init__(self, url: str, storage_options: dict | None = None) -> None:
        self.url = url
        self.so = storage_options


@pytest.fixture(params=["local", "memory", "s3"])
def where(request, tmp_path):
    """A fresh dataset root on each store kind."""
    if request.param == "local":
        yield Where(str(tmp_path / "ds"))
        return
    if request.param == "memory":
        root = f"memory://compact-{uuid.uuid4().hex}"
        yield Where(root)
        fs = fsspec.filesystem("memory")
        if fs.exists(root[len("memory://") :]):
            fs.rm(root[len("memory://") :], recursive=True)
        return
    server = request.getfixturevalue("tools_s3")
    yield Where(f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}", server.storage_options())
