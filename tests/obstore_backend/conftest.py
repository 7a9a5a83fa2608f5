"""The moto server of the obstore backend's tests: one bucket, :data:`BUCKET`, for
the session (every test writes under a fresh uuid prefix)."""

from __future__ import annotations

import pytest
from conformance.servers import moto_bucket

BUCKET = "arrayds-obstore-t"


@pytest.fixture(scope="session")
def s3():
    with moto_bucket(BUCKET) as server:
        yield server
