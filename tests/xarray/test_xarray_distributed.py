"""Xarray datasets and ragged arrays written and read on a real dask.distributed
cluster (worker processes: every task and the commit pickle and run elsewhere)."""

from __future__ import annotations

import dask.bag as db
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import arrayds

distributed = pytest.importorskip("distributed", reason="distributed is part of the [dask] extra")


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=":0",
        silence_logs=40,
    )
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def test_xarray_write_append_read_on_workers(tmp_path, client):
    url = str(tmp_path / "ds")
    time = pd.date_range("2000-01-01", periods=40, freq="D")
    ds = xr.Dataset(
        {"v": (("time", "x"), np.arange(40 * 6, dtype="f4").reshape(40, 6))},
        coords={"time": time, "x": np.arange(6)},
    ).chunk({"time": 10, "x": 3})
    arrayds.to_arrayrecord(ds.isel(time=slice(0, 30)), url)
    arrayds.to_arrayrecord(ds.isel(time=slice(30, 40)), url, mode="a", append_dim="time")
    back = xr.open_dataset(url, engine="arrayds", chunks={})
    assert back.v.chunks == ((10, 10, 10, 10), (3, 3))
    total = client.compute(back.v.sum()).result()
    assert float(total) == float(np.arange(240).sum())
    xr.testing.assert_identical(back.compute(), ds.compute())


def test_ragged_bag_on_workers(tmp_path, client):
    url = str(tmp_path / "clips")
    sizes = [5, 70, 3, 150, 0, 41]
    bag = db.from_sequence(sizes, npartitions=3).map(
        lambda n: np.arange(2 * n, dtype="i4").reshape(2, n)
    )
    ra = arrayds.to_arrayrecord(bag, url, piece_len=16)
    assert ra.shapes == [(2, n) for n in sizes]
    lengths = arrayds.from_arrayrecord(url).map(lambda a: a.shape[1]).compute()
    assert lengths == sizes
    assert arrayds.open_ragged(url)[3, 1, 140:].tolist() == list(range(290, 300))


def test_open_mfdataset_parallel_and_a_pickled_lazy_dataset_on_workers(tmp_path, client):
    """``open_mfdataset(parallel=True)`` opens every file in a worker process (the
    opened datasets travel back pickled), and a lazily opened dataset (no dask)
    computes on a worker."""
    time = pd.date_range("2000-01-01", periods=12, freq="D")
    full = xr.Dataset(
        {"v": (("time", "x"), np.arange(12 * 4, dtype="f8").reshape(12, 4))},
        coords={"time": time, "x": np.arange(4)},
    )
    for i in range(3):
        arrayds.to_arrayrecord(full.isel(time=slice(4 * i, 4 * i + 4)), str(tmp_path / f"p{i}.ads"))
    glob = str(tmp_path / "p*.ads")
    mf = xr.open_mfdataset(glob, engine="arrayds", parallel=True, combine="by_coords")
    assert mf.v.chunks[0] == (4, 4, 4)
    xr.testing.assert_identical(mf.compute(), full)
    lazy = xr.open_dataset(str(tmp_path / "p1.ads"), engine="arrayds")
    total = client.submit(lambda ds: float(ds.v.sum()), lazy).result()
    assert total == float(full.v.isel(time=slice(4, 8)).sum())
