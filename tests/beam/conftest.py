"""The Beam tests need the [beam] extra (the S3 one is tests/s3/test_s3_beam.py, next
to the moto server fixtures)."""

from __future__ import annotations

import pytest

pytest.importorskip("apache_beam", reason="the Beam tests need apache-beam (arrayds[beam])")
