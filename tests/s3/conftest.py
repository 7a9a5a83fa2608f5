"""Fixtures: one moto S3 server per test session on 127.0.0.1 (in a child process:
s3server.spawn_moto), used through s3fs.

``s3`` is the running server (:class:`s3server.MotoS3`), ``s3_opts`` the
``storage_options`` for it, ``s3_url`` a fresh ``s3://`` dataset root per test in
the shared bucket, and ``proxy`` a :class:`s3server.LatencyProxy` (no added latency)
that counts the requests a read makes.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from arrayds import ArrayRecordDataSource, ArrayRecordWriter
from arrayds.nodes import shards as store_mod

from .s3server import LatencyProxy, MotoS3, spawn_moto

BUCKET = "arrayds-test"


@pytest.fixture(scope="session")
def s3() -> MotoS3:
    pytest.importorskip("s3fs", reason="the S3 tests need s3fs (pip install arrayds[s3])")
    pytest.importorskip("moto.server", reason="the S3 tests need moto[server]")
    server = spawn_moto()
    import s3fs

    fs = s3fs.S3FileSystem(**server.storage_options())
    fs.mkdir(BUCKET)
    yield server
    server.stop()


@pytest.fixture
def s3_opts(s3: MotoS3) -> dict:
    return s3.storage_options()


@pytest.fixture
def s3_fs(s3_opts):
    import s3fs

    return s3fs.S3FileSystem(**s3_opts)


@pytest.fixture
def s3_url(request) -> str:
    name = request.node.name.replace("[", "-").replace("]", "")[:40]
    return f"s3://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def proxy(s3: MotoS3):
    """A counting proxy in front of the server; the reader cache starts empty."""
    p = LatencyProxy(("127.0.0.1", s3.port), latency=0.0).start()
    store_mod.clear_reader_cache()
    yield p
    p.stop()
    store_mod.clear_reader_cache()


def plain_files(
    s3: Any,
    url: str,
    opts: dict[str, Any],
    proxy: Any,
    backend: str,
    recs: list[bytes],
    shards: int,
) -> ArrayRecordDataSource:
    """``recs`` written as ``shards`` plain ArrayRecord files under ``url``, opened as
    one data source (a glob: no file sizes known) through ``proxy`` with ``backend``."""
    for k in range(shards):
        part = recs[k * (len(recs) // shards) : (k + 1) * (len(recs) // shards)]
        with ArrayRecordWriter(f"{url}/part-{k}.array_record", storage_options=opts) as w:
            w.write_many(part)
    so = {**s3.storage_options(proxy.url), "backend": backend}
    return ArrayRecordDataSource(f"{url}/part-*.array_record", storage_options=so)
