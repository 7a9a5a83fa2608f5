"""Fixtures for the versions tests: ``where`` is a fresh dataset root (URL and
storage_options) on a local folder, memory://, a moto S3 server and a fake-gcs-server
(one server per session, from tests/s3/s3server.py and tests/gcs/gcsserver.py, on
127.0.0.1)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from conformance.servers import fake_gcs_bucket, load_helper, moto_bucket

BUCKET = "arrayds-versions"


# before anything imports gcsfs (see tests/gcs/gcsserver.py: GCSFS_ENV)
load_helper("gcs", "gcsserver").apply_gcsfs_env()


@dataclass
class Where:
    """A dataset root: ``url`` and the ``so`` (storage_options) that reach it."""

    url: str
    so: dict[str, Any] | None = field(default=None)


@pytest.fixture(scope="session")
def versions_s3():
    with moto_bucket(BUCKET) as server:
        yield server


@pytest.fixture(scope="session")
def versions_gcs():
    return fake_gcs_bucket(BUCKET)


@pytest.fixture(params=["local", "memory", "s3", "gcs"])
def where(request, tmp_path) -> Where:
    name = f"{request.node.name[:30]}-{uuid.uuid4().hex[:8]}".replace("[", "-").replace("]", "")
    if request.param == "local":
        return Where(str(tmp_path / "ds"))
    if request.param == "memory":
        return Where(f"memory://versions-{name}")
    if request.param == "s3":
        server = request.getfixturevalue("versions_s3")
        return Where(f"s3://{BUCKET}/{name}", server.storage_options())
    server = request.getfixturevalue("versions_gcs")
    return Where(f"gs://{BUCKET}/{name}", server.storage_options())


@pytest.fixture(params=["local", "memory"])
def quick(request, tmp_path) -> Where:
    """A root on the stores without a server (for the many error-path tests)."""
    if request.param == "local":
        return Where(str(tmp_path / "ds"))
    return Where(f"memory://versions-{uuid.uuid4().hex}")
