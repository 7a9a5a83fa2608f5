"""The anchor side of benchmarks/bench_xarray_ragged.py's xarray rows: xarray's zarr
engine on the anchor interpreter's zarr-python (3.4), on the same data in the same run.

Run by benchmarks/anchor_runner.py in the anchor interpreter (protocol:
benchmarks/anchors/harness.py). The job (JSON on stdin):

* ``data``: a ``.npy`` file of the float32 ``t2m`` field (time, lat, lon); the
  coordinates are made as bench_xarray_ragged.py's ``climate`` makes them (6-hourly
  times from 2000-01-01, evenly spaced lat -89..89 and lon 0..359);
* ``means``: a ``.npy`` file of ``t2m.mean(("lat", "lon"))`` (what arrayds read), the
  check of every mean;
* ``workdir``: where the zarr stores are written;
* ``repeat``: how many times each section runs (the runner keeps the fastest);
* ``cases``: ``{"label": L, "chunks": {dim: n}, "point": [y, x] | null}``.

Each case writes the field with ``ds.chunk(chunks).to_zarr`` (zarr format 3,
consolidated, ``ZstdCodec(level=3)``, the dask chunks as the zarr chunks), then times
section ``L`` (``xr.open_dataset(engine="zarr", chunks={})`` + ``mean(("lat",
"lon"))`` with the threaded scheduler) and, with ``point``, section ``point`` (lazy
``isel`` of one grid point's time series, no dask).
"""

from __future__ import annotations

import os

import dask
import numpy as np
import pandas as pd
import xarray as xr
import zarr
from harness import finish, job, section, versions


def main() -> None:
    j = job()
    field = np.load(j["data"])
    means = np.load(j["means"])
    nt, ny, nx = field.shape
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), field, {"units": "K"})},
        coords={
            "time": pd.date_range("2000-01-01", periods=nt, freq="6h"),
            "lat": np.linspace(-89, 89, ny),
            "lon": np.linspace(0, 359, nx),
        },
    )
    repeat = int(j["repeat"])
    stored = {}
    with dask.config.set(scheduler="threads"):
        for case in j["cases"]:
            dsk = ds.chunk(case["chunks"])
            zurl = os.path.join(j["workdir"], f"anchor-{case['label'].split()[0]}.zarr")
            enc = {
                "compressors": [zarr.codecs.ZstdCodec(level=3)],
                "chunks": tuple(c[0] for c in dsk.t2m.chunks),
            }
            dsk.to_zarr(zurl, mode="w", zarr_format=3, consolidated=True, encoding={"t2m": enc})
            stored[case["label"]] = sum(
                os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(zurl) for f in fs
            )

            def mean(url: str = zurl) -> object:
                with xr.open_dataset(url, engine="zarr", chunks={}) as d:
                    return d.t2m.mean(("lat", "lon")).compute()

            np.testing.assert_allclose(mean().values, means, rtol=1e-5)
            for _ in range(repeat):
                with section(case["label"]):
                    mean()
            if case.get("point"):
                y, x = case["point"]

                def point(url: str = zurl, y: int = y, x: int = x) -> object:
                    with xr.open_dataset(url, engine="zarr") as d:
                        return d.t2m.isel(lat=y, lon=x).values

                np.testing.assert_array_equal(point(), field[:, y, x])
                for _ in range(repeat):
                    with section("point"):
                        point()
    finish(versions=versions("zarr", "xarray", "dask", "numpy"), stored=stored)


if __name__ == "__main__":
    main()
