"""The store conformance suite (:class:`conformance.store.StoreTests`) on GCS
(fake-gcs-server on loopback, through gcsfs): versions are object generations,
``put_if_match`` an upload with ``ifGenerationMatch``."""

from __future__ import annotations

import pytest
from conformance.store import ProcessRaceTests, StoreTests

from arrayds.storage import FsspecStore, new_store


class TestGCSStore(StoreTests, ProcessRaceTests):
    @pytest.fixture
    def store(self, gcs_url, gcs_opts):
        st = new_store(gcs_url, gcs_opts)
        assert type(st) is FsspecStore
        return st
