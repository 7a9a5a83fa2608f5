"""Fixtures for the tools tests: a fresh dataset URL on a local folder, memory:// and
S3 (the moto server of tests/s3/s3server.py, one per session)."""

from __future__ import annotations

import uuid

import fsspec
import pytest
from conformance.servers import moto_bucket

BUCKET = "arrayds-tools"


@pytest.fixture(scope="session")
def tools_s3():
    """A running moto server with the bucket of these tests."""
    with moto_bucket(BUCKET) as server:
        yield server


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
