"""The store conformance suite (:class:`conformance.store.StoreTests`) on S3 (moto on
loopback, through s3fs): versions are ETags, ``put_if_match`` a PUT with ``If-Match``
/ ``If-None-Match``."""

from __future__ import annotations

import pytest
from conformance.store import ProcessRaceTests, StoreTests

from arrayds.storage import FsspecStore, new_store


class TestS3Store(StoreTests, ProcessRaceTests):
    @pytest.fixture
    def store(self, s3_url, s3_opts):
        st = new_store(s3_url, s3_opts)
        assert type(st) is FsspecStore
        return st
