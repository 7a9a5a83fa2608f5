"""A synthetic climate dataset with xarray and arrayds.

Builds a ``time x lat x lon`` dataset (temperature in float32 and precipitation
packed as int16 with ``scale_factor``) as dask arrays, writes it in parallel with
``ds.arrayds.to_arrayrecord`` (one task per shard, one atomic commit for the whole
dataset), appends another month along ``time``, then explores it with
``xr.open_dataset(..., engine="arrayds")``: ``.sel`` reads only the chunks it
touches, ``chunks={}`` gives dask chunks equal to the stored ones, ``.resample``
builds daily means.

Run: ``python examples/xarray_climate.py [--days 62] [--dir DIR]``.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import dask.array as da
import numpy as np
import pandas as pd
import xarray as xr

import arrayds
from arrayds.nodes.shards import io_stats, reset_io_stats


def synthetic(start: str, days: int, lat: np.ndarray, lon: np.ndarray, seed: int) -> xr.Dataset:
    """Six-hourly fields with a daily and a seasonal cycle, chunked by 4 days."""
    time = pd.date_range(start, periods=days * 4, freq="6h")
    nt, ny, nx = len(time), len(lat), len(lon)
    hours = da.from_array((time - pd.Timestamp("2000-01-01")).total_seconds().to_numpy() / 3600)
    hours = hours.rechunk(16)[:, None, None]
    lat3 = da.from_array(lat)[None, :, None]
    lon3 = da.from_array(lon)[None, None, :]
    noise = da.random.default_rng(seed).standard_normal((nt, ny, nx), chunks=(16, ny, nx))
    t2m = (
        288.0
        - 30.0 * np.abs(np.sin(np.deg2rad(lat3)))
        + 8.0 * da.sin(2 * np.pi * hours / 24.0 + np.deg2rad(lon3))
        + 5.0 * da.cos(2 * np.pi * hours / (24 * 365.25))
        + noise
    ).astype("f4")
    precip = da.maximum(noise * 2.0 + 0.5, 0.0)
    ds = xr.Dataset(
        {
            "t2m": (("time", "lat", "lon"), t2m, {"units": "K", "long_name": "2 m temperature"}),
            "precip": (("time", "lat", "lon"), precip, {"units": "mm/6h"}),
        },
        coords={
            "time": time,
            "lat": ("lat", lat, {"units": "degrees_north"}),
            "lon": ("lon", lon, {"units": "degrees_east"}),
        },
        attrs={"title": "synthetic climate", "source": "examples/xarray_climate.py"},
    )
    ds.precip.encoding = {"dtype": "int16", "scale_factor": 0.01, "_FillValue": np.int16(-1)}
    ds.time.encoding = {"units": "hours since 2000-01-01", "calendar": "proleptic_gregorian"}
    return ds


def main(workdir: str, days: int) -> None:
    url = os.path.join(workdir, "climate.arrayds")
    lat = np.linspace(-60, 60, 49)
    lon = np.arange(0, 360, 5.0)
    first = synthetic("2020-01-01", days, lat, lon, seed=1)

    # 1. write: every dask block is one chunk; one commit makes all variables visible
    first.arrayds.to_arrayrecord(url, mode="w")
    print(f"wrote {dict(first.sizes)} with chunks {first.t2m.data.chunksize}")

    # 2. append another stretch of time: one more atomic commit
    later = synthetic(str(first.time.values[-1] + np.timedelta64(6, "h")), 31, lat, lon, seed=2)
    later.arrayds.to_arrayrecord(url, append_dim="time")
    print(arrayds.open(url).tree())

    # 3. lazy opening: .sel reads only the chunks it touches
    ds = xr.open_dataset(url, engine="arrayds")
    reset_io_stats()
    point = ds.t2m.sel(lat=48.0, lon=10.0, method="nearest").sel(time="2020-01-05")
    values = point.values
    print(
        f"t2m near (48N, 10E) on 2020-01-05: {[round(float(v), 1) for v in values]} "
        f"({io_stats()['records_read']} chunk read)"
    )

    # 4. dask, aligned with the stored chunks; daily means with resample
    dsk = xr.open_dataset(url, engine="arrayds", chunks={})
    assert dsk.t2m.chunks == xr.concat([first.t2m, later.t2m], "time").chunks
    daily = dsk.t2m.mean(("lat", "lon")).resample(time="1D").mean().compute()
    print(f"{daily.sizes['time']} daily global means, first: {float(daily[0]):.2f} K")
    wettest = dsk.precip.sum("time").compute()
    where = wettest.argmax(...)
    print(
        f"wettest cell: lat {float(wettest.lat[where['lat']]):.1f}, "
        f"lon {float(wettest.lon[where['lon']]):.1f}, {float(wettest.max()):.1f} mm"
    )
    # precip was stored as int16 with scale_factor 0.01: decoded back to floats
    stored = arrayds.open_array(url, "precip").dtype
    print(f"stored precip dtype: {stored}, decoded: {dsk.precip.dtype}")
    total = dsk.sizes["time"]
    assert total == (days + 31) * 4, total
    print("done")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--days", type=int, default=62)
    p.add_argument("--dir", default=None, help="where to write (default: a temporary folder)")
    args = p.parse_args()
    if args.dir:
        main(args.dir, args.days)
    else:
        with tempfile.TemporaryDirectory() as d:
            main(d, args.days)
