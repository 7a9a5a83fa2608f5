"""Fixtures for the xarray tests: a moto S3 server on loopback (one per session,
from tests/s3/s3server.py) for the S3 variant of the conformance suite."""

from __future__ import annotations

import pytest
from conformance.servers import load_helper, moto_bucket

BUCKET = "arrayds-xr-conformance"


@pytest.fixture(scope="session")
def xr_s3():
    """A running moto server with the conformance bucket."""
    with moto_bucket(BUCKET) as server:
        yield server


@pytest.fixture
def conformance_s3(request, xr_s3):
    """Points the S3 conformance class at the server."""
    request.cls.bucket = BUCKET
    request.cls.storage_options = xr_s3.storage_options()


@pytest.fixture
def s3_proxy(xr_s3):
    """A counting proxy in front of the server (no added latency)."""
    from arrayds.nodes import shards as store_mod

    p = load_helper("s3", "s3server").LatencyProxy(("127.0.0.1", xr_s3.port), latency=0.0).start()
    store_mod.clear_reader_cache()
    yield p
    p.stop()
    store_mod.clear_reader_cache()


@pytest.fixture
def no_roll_forward(monkeypatch):
    """A crash right after a DataTree write's commit point: the root manifest is
    written, no other manifest is brought up to date, nothing is cleaned up; returns
    the exception raised there."""
    import arrayds.xarray.tree as xtree

    class Crash(BaseException):
        pass

    def crash(store, node, doc):
        raise Crash

    monkeypatch.setattr(xtree, "roll_forward", crash)
    return Crash
