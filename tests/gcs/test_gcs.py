"""Datasets on a real GCS-compatible server (fake-gcs-server on loopback, through gcsfs).

:class:`TestGCS` runs the object-store conformance suite
(:class:`conformance.objectstore.ObjectStoreConformance`: round trips, appends,
conditional commits, missing buckets, killed writers, dask.distributed) on GCS, where
a manifest commit is an upload with an ``ifGenerationMatch`` precondition. The
GCS-only test below it: an upload the client resends after a lost reply is not a
conflict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conformance.objectstore import ObjectStoreConformance, group

from arrayds.nodes import commit
from arrayds.storage import gcs as gcs_requests
from arrayds.storage import new_store
from arrayds.storage.base import BaseStore as Store


class TestGCS(ObjectStoreConformance):
    """The object-store suite on fake-gcs-server (fixtures in conftest.py)."""

    @pytest.fixture
    def store_url(self, gcs_url: str) -> str:
        return gcs_url

    @pytest.fixture
    def store_opts(self, gcs_opts: dict) -> dict:
        return gcs_opts

    @pytest.fixture
    def store_fs(self, gcs_fs: Any) -> Any:
        return gcs_fs

    def after_version_read(
        self, monkeypatch: pytest.MonkeyPatch, store: Store, action: Callable[[Any, str], None]
    ) -> None:
        """GCS committers GET the manifest and its object generation in one request
        (``arrayds.storage.gcs.gcs_read``): run ``action`` after it, found or not."""
        real_read = gcs_requests.gcs_read

        def read_then_act(fs: Any, path: str) -> tuple[bytes | None, str | None]:
            try:
                return real_read(fs, path)
            finally:
                action(fs, path)

        monkeypatch.setattr(gcs_requests, "gcs_read", read_then_act)


# ------------------------------------------------------------------- commits


def test_a_commit_retried_after_a_lost_reply_is_not_a_conflict(gcs_url, gcs_opts, monkeypatch):
    """The client resends an upload that had landed (its reply was lost): the server
    refuses the resend (the generation moved on); the commit still succeeds."""
    store = new_store(gcs_url, gcs_opts)
    commit.commit(store, "n", lambda base: group(1), write_id="first")
    real_put = gcs_requests.gcs_put
    refused: list[BaseException] = []

    def put_twice(fs, path, data, gen):
        real_put(fs, path, data, gen)
        try:
            real_put(fs, path, data, gen)
        except FileExistsError as e:  # HTTP 412 from the server
            refused.append(e)
            raise

    monkeypatch.setattr(gcs_requests, "gcs_put", put_twice)
    commit.commit(store, "n", lambda base: group(2, done=True), write_id="second")
    assert len(refused) == 1
    assert commit.read(store, "n").raw["attrs"] == {"done": True}
