"""Fixtures for the many-writer tests: ``where`` is a fresh dataset root (URL and
storage_options) on a local folder, a moto S3 server and a fake-gcs-server (one
server per session, on 127.0.0.1)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from conformance.servers import fake_gcs_bucket, load_helper, moto_bucket

BUCKET = "arrayds-writers"

# before anything imports gcsfs (see tests/gcs/gcsserver.py: GCSFS_ENV)
load_helper("gcs", "gcsserver").apply_gcsfs_env()


@pytest.fixture(scope="session")
def writers_s3():
    with moto_bucket(BUCKET) as server:
        yield server


@pytest.fixture(scope="session")
def writers_gcs():
    return fake_gcs_bucket(BUCKET)


@pytest.fixture(params=["local", "s3", "gcs"])
def where(request, tmp_path) -> tuple[str, dict[str, Any] | None]:
    name = f"w-{uuid.uuid4().hex[:8]}"
    if request.param == "local":
        return str(tmp_path / name), None
    server = request.getfixturevalue(f"writers_{request.param}")
    scheme = "s3" if request.param == "s3" else "gs"
    return f"{scheme}://{BUCKET}/{name}", server.storage_options()
