"""``await ds.load_async()`` reads the chunks of all variables concurrently: the
counting proxy in front of the loopback S3 server (tests/s3/s3server.py) sees
several chunk requests in flight at once, where ``ds.load()`` sends one at a time.
No timing: the proxy counts requests sent on and not yet answered."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import xarray as xr

import arrayds
from arrayds.nodes.shards import clear_reader_cache

pytest.importorskip("s3fs")

NVARS = 8


def dataset() -> xr.Dataset:
    # one chunk per variable, no index coordinates: opening reads no chunk
    return xr.Dataset({f"v{i}": ("x", np.arange(64.0) + i) for i in range(NVARS)})


@pytest.fixture
def stored(xr_s3, s3_proxy):
    url = f"s3://arrayds-xr-conformance/async-{id(s3_proxy):x}"
    arrayds.to_arrayrecord(dataset(), url, mode="w", storage_options=xr_s3.storage_options())
    s3_proxy.latency = 0.05  # so that concurrent requests overlap at the proxy
    opts = xr_s3.storage_options(s3_proxy.url)
    return url, opts


def _open(url, opts):
    clear_reader_cache()
    return xr.open_dataset(url, engine="arrayds", storage_options=opts)


def test_load_async_has_several_chunk_requests_in_flight(stored, s3_proxy):
    url, opts = stored
    ds = _open(url, opts)
    s3_proxy.stats.reset()
    ds.load()
    sequential = s3_proxy.stats.snapshot()
    assert sequential["methods"].get("GET", 0) >= NVARS
    assert sequential["max_in_flight"] == 1  # synchronous: one variable after the other

    ds = _open(url, opts)
    s3_proxy.stats.reset()
    loaded = asyncio.run(ds.load_async())
    concurrent = s3_proxy.stats.snapshot()
    assert concurrent["methods"].get("GET", 0) >= NVARS
    assert concurrent["max_in_flight"] >= 3
    xr.testing.assert_identical(loaded, dataset())
