"""Fixtures for the many-writer tests: ``where`` is a fresh dataset root (URL and
storage_options) on a local folder, a moto S3 server and a fake-gcs-server (one
server per session, on 127.0.0.1); ``bench`` is benchmarks/bench_writers.py, whose
``run`` the tests share."""

from __future__ import annotations

import importlib.util
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from conformance.servers import fake_gcs_bucket, load_helper, moto_bucket

BUCKET = "arrayds-writers"
BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_writers.py"

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


@pytest.fixture(scope="session")
def bench() -> Any:
    """benchmarks/bench_writers.py, imported from its file (benchmarks/ is no package)."""
    spec = importlib.util.spec_from_file_location("bench_writers", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_writers"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["bench_writers"]
