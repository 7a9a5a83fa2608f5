"""The moto server of the obstore backend's tests: one bucket, :data:`BUCKET`, for
the session (every test writes under a fresh uuid prefix)."""

from __future__ import annotations

import pytest
from conformance.servers import load_helper, moto_bucket

from arrayds.nodes import shards as store_mod

BUCKET = "arrayds-obstore-t"


@pytest.fixture(scope="session")
def s3():
    with moto_bucket(BUCKET) as server:
        yield server


@pytest.fixture
def proxy(s3):
    """A counting proxy in front of the server; the reader cache starts empty."""
    p = load_helper("s3", "s3server").LatencyProxy(("127.0.0.1", s3.port), latency=0.0)
    p.start()
    store_mod.clear_reader_cache()
    yield p
    p.stop()
    store_mod.clear_reader_cache()
