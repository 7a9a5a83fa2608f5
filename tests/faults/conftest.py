"""Fixtures: moto (S3) and fake-gcs-server, each behind a :class:`proxy.FaultProxy`.

``backend`` is parametrised over ``"s3"`` and ``"gs"``; ``faulty`` is a
:class:`Faulty`: the proxy (no faults until a test sets its schedule), a fresh dataset
URL in the shared bucket and the ``storage_options`` that go through the proxy.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import pytest
from conformance.servers import fake_gcs_bucket, load_helper

from arrayds.nodes import shards as store_mod

from .proxy import FaultProxy

load_helper("gcs", "gcsserver").apply_gcsfs_env()

BUCKET = "arrayds-faults"


@dataclass
class Faulty:
    """A dataset root behind a fault proxy."""

    proxy: FaultProxy
    url: str
    opts: dict[str, Any]
    """``storage_options`` through the proxy."""
    direct: dict[str, Any]
    """``storage_options`` straight to the server (what is really stored)."""


@pytest.fixture(scope="session")
def s3_server() -> Any:
    pytest.importorskip("s3fs", reason="the S3 fault tests need s3fs")
    pytest.importorskip("moto.server", reason="the S3 fault tests need moto[server]")
    server = load_helper("s3", "s3server").start_moto()
    import s3fs

    s3fs.S3FileSystem(**server.storage_options()).mkdir(BUCKET)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def gcs_server() -> Any:
    return fake_gcs_bucket(BUCKET)


@pytest.fixture(params=["s3", "gs"])
def backend(request) -> str:
    return str(request.param)


@pytest.fixture
def faulty(request, backend: str) -> Any:
    server = request.getfixturevalue("s3_server" if backend == "s3" else "gcs_server")
    name = request.node.name.replace("[", "-").replace("]", "")[:40]
    url = f"{backend}://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}"
    store_mod.clear_reader_cache()
    with FaultProxy(server.endpoint_url) as proxy:
        if backend == "s3":
            opts = server.storage_options(proxy.url)
        else:
            opts = dict(server.storage_options(), endpoint_url=proxy.url)
        yield Faulty(proxy, url, opts, server.storage_options())
    store_mod.clear_reader_cache()
