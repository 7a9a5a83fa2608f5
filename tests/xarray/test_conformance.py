"""xarray's own backend round-trip suite, run against arrayds.

``xarray.tests.test_backends.CFEncodedBase`` (with ``DatasetIOBase``) is the base
class every xarray backend (netCDF4, h5netcdf, scipy, zarr) runs against itself.
Here it is subclassed for arrayds on local folders, ``memory://`` and S3 (moto on
loopback): the hooks are implemented (``save`` = ``arrayds.to_arrayrecord``,
``open`` = ``xr.open_dataset(engine="arrayds")``, ``create_store`` = the writable
data store :class:`arrayds.xarray.datastore.ArrayDSWritableStore`), the test methods
are inherited unchanged, and the few that do not apply are skipped or replaced below
with the reason, as xarray's ``ZarrBase`` does. The fixtures come from
``xarray.tests.conftest`` (``pytest_plugins`` in tests/conftest.py). docs/xarray.md
has the status table (arrayds vs xarray's zarr backend on the same xarray).
"""

from __future__ import annotations

import contextlib
import os
import uuid

import pytest

xr = pytest.importorskip("xarray")
test_backends = pytest.importorskip("xarray.tests.test_backends")

import arrayds  # noqa: E402
from arrayds.xarray.datastore import ArrayDSWritableStore  # noqa: E402

CFEncodedBase = test_backends.CFEncodedBase
create_tmp_file = test_backends.create_tmp_file


class ArrayDSBase(CFEncodedBase):
    """The hooks; ``url_of(path)`` maps the local temporary path a test made to the
    URL of the store under test (so tests that call ``save``/``open`` on a path of
    their own run on that store too)."""

    engine = "arrayds"
    storage_options: dict | None = None

    def url_of(self, path: str) -> str:
        return os.fspath(path)

    @contextlib.contextmanager
    def create_target(self):
        with create_tmp_file() as path:
            yield self.url_of(path)

    @contextlib.contextmanager
    def create_store(self):
        with self.create_target() as url:
            yield ArrayDSWritableStore.open(url, mode="w", storage_options=self.storage_options)

    def save(self, dataset, path, **kwargs):  # type: ignore[override]
        kwargs.setdefault("mode", "w")
        return arrayds.to_arrayrecord(
            dataset, self.url_of(path), storage_options=self.storage_options, **kwargs
        )

    @contextlib.contextmanager
    def open(self, path, **kwargs):
        if self.storage_options is not None:
            kwargs.setdefault("backend_kwargs", {})["storage_options"] = self.storage_options
        with xr.open_dataset(self.url_of(path), engine="arrayds", **kwargs) as ds:
            yield ds

    @contextlib.contextmanager
    def roundtrip(self, data, save_kwargs=None, open_kwargs=None, allow_cleanup_failure=False):
        with self.create_target() as url:
            self.save(data, url, **(save_kwargs or {}))
            with self.open(url, **(open_kwargs or {})) as ds:
                yield ds

    @contextlib.contextmanager
    def roundtrip_append(
        self, data, save_kwargs=None, open_kwargs=None, allow_cleanup_failure=False
    ):
        with self.create_target() as url:
            for i, key in enumerate(data.variables):
                self.save(data[[key]], url, mode="a" if i else "w", **(save_kwargs or {}))
            with self.open(url, **(open_kwargs or {})) as ds:
                yield ds

    # -- overrides, for the same store properties as xarray's ZarrBase

    def test_encoding_unlimited_dims(self) -> None:
        """Replaces xarray's test, which its zarr backend skips too: arrayds, like
        zarr, has no unlimited dimensions because every dimension can grow. An
        ``unlimited_dims`` encoding is accepted and not kept, and the data round-trip
        and grow along that dimension."""
        ds = xr.Dataset({"x": ("y", [float(i) for i in range(10)])})
        ds.encoding = {"unlimited_dims": ["y"]}
        with self.create_target() as url:
            self.save(ds, url)
            with self.open(url) as actual:
                assert "unlimited_dims" not in actual.encoding
                xr.testing.assert_equal(ds, actual)
            self.save(ds.isel(y=slice(0, 2)), url, mode="a", append_dim="y")
            with self.open(url) as actual:
                assert actual.sizes["y"] == 12
                xr.testing.assert_equal(xr.concat([ds, ds.isel(y=slice(0, 2))], "y"), actual.load())

    @pytest.mark.asyncio
    async def test_load_async(self) -> None:
        await super().test_load_async()


class TestArrayDSLocal(ArrayDSBase):
    """Local folders."""


class TestArrayDSMemory(ArrayDSBase):
    """fsspec's ``memory://`` file system."""

    def url_of(self, path: str) -> str:
        path = os.fspath(path)
        return path if path.startswith("memory://") else "memory://" + path


S3_SUBSET = frozenset(
    {
        "test_write_store",
        "test_roundtrip_test_data",
        "test_load",
        "test_load_async",
        "test_pickle",
        "test_append_write",
        "test_append_overwrite_values",
        "test_append_with_invalid_dim_raises",
        "test_roundtrip_unsigned",
        "test_roundtrip_string_encoded_characters",
        "test_roundtrip_object_dtype",
        "test_encoding_kwarg",
        "test_orthogonal_indexing",
    }
)
"""The inherited tests the S3 variant runs by default: each write and read path
once (store writes, appends, lazy and async loads, pickling, encodings, indexing).
All of them pass on S3 too (``ARRAYDS_XR_S3_FULL=1`` runs them, about 150 s on
moto, against 15 s for this subset); the rest differ from the local run only in
the bytes they encode, not in how they reach the store."""


@pytest.mark.usefixtures("conformance_s3")
class TestArrayDSS3(ArrayDSBase):
    """S3 on moto (loopback); ``conformance_s3`` sets the bucket and options."""

    @pytest.fixture(autouse=True)
    def _subset(self, request):
        name = request.node.originalname
        if name not in S3_SUBSET and not os.environ.get("ARRAYDS_XR_S3_FULL"):
            pytest.skip("S3 runs a subset (tests/xarray/test_conformance.py S3_SUBSET)")

    bucket: str = ""

    def url_of(self, path: str) -> str:
        path = os.fspath(path)
        if path.startswith("s3://"):
            return path
        return f"s3://{self.bucket}/{uuid.uuid5(uuid.NAMESPACE_URL, path).hex}"
