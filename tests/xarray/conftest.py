"""Fixtures for the xarray tests: a moto S3 server on loopback (one per session,
from tests/s3/s3server.py) for the S3 variant of the conformance suite."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

BUCKET = "arrayds-xr-conformance"


def _s3server():
    path = pathlib.Path(__file__).parents[1] / "s3" / "s3server.py"
    spec = importlib.util.spec_from_file_location("arrayds_tests_s3server", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="session")
def xr_s3():
    """A running moto server with the conformance bucket."""
    pytest.importorskip("s3fs", reason="the S3 tests need s3fs (pip install arrayds[s3])")
    pytest.importorskip("moto.server", reason="the S3 tests need moto[server]")
    server = _s3server().start_moto()
    import s3fs

    s3fs.S3FileSystem(**server.storage_options()).mkdir(BUCKET)
    yield server
    server.stop()


@pytest.fixture
def conformance_s3(request, xr_s3):
    """Points the S3 conformance class at the server."""
    request.cls.bucket = BUCKET
    request.cls.storage_options = xr_s3.storage_options()


@pytest.fixture
def s3_proxy(xr_s3):
    """A counting proxy in front of the server (no added latency)."""
    from arrayds import store as store_mod

    p = _s3server().LatencyProxy(("127.0.0.1", xr_s3.port), latency=0.0).start()
    store_mod.clear_reader_cache()
    yield p
    p.stop()
    store_mod.clear_reader_cache()
