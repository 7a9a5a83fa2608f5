"""S3 fixtures for the coalesced-read tests: the counting proxy and options of
tests/s3, with this folder's own moto server (a child process, s3server.spawn_moto)
and bucket."""

from __future__ import annotations

import uuid

import pytest

from tests.s3.conftest import proxy, s3_fs, s3_opts  # noqa: F401
from tests.s3.s3server import MotoS3, spawn_moto

BUCKET = "arrayds-coalesce"


@pytest.fixture(scope="session")
def s3() -> MotoS3:
    pytest.importorskip("s3fs", reason="the S3 tests need s3fs (pip install arrayds[s3])")
    pytest.importorskip("moto.server", reason="the S3 tests need moto[server]")
    server = spawn_moto()
    import s3fs

    s3fs.S3FileSystem(**server.storage_options()).makedirs(BUCKET, exist_ok=True)
    yield server
    server.stop()


@pytest.fixture
def s3_url(request) -> str:
    name = request.node.name.replace("[", "-").replace("]", "")[:40]
    return f"s3://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}"
