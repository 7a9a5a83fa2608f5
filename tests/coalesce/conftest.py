"""The S3 fixtures of tests/s3 (moto on loopback, the counting proxy)."""

from tests.s3.conftest import BUCKET, proxy, s3, s3_fs, s3_opts, s3_url  # noqa: F401
