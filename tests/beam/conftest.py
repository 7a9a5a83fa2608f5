"""Fixtures of the Beam tests: the moto S3 server of tests/s3 (one per session)."""

from __future__ import annotations

import pytest

pytest.importorskip("apache_beam", reason="the Beam tests need apache-beam (arrayds[beam])")

from s3.conftest import s3, s3_opts, s3_url  # noqa: E402, F401 - fixtures
