"""The anchor side of benchmarks/bench_scale.py's records and xarray workloads: the
anchor interpreter's zarr-python (3.4; xarray's zarr engine on it) takes the writes
arrayds took, on the same data in the same run (after arrayds' writes, not
interleaved with them).

Run by benchmarks/anchor_runner.py in the anchor interpreter (protocol:
benchmarks/anchors/harness.py). The job (JSON on stdin):

* ``workload``: ``records`` or ``xarray``;
* ``data``: a ``.npy`` file: records, an (n x per_write, record bytes) uint8 array,
  each row one record (no zero bytes); xarray, the (n, lat, lon) float32 ``t2m`` of
  the n steps;
* ``per_write``: records per write (records);
* ``workdir``: where the zarr stores are made.

As bench_scale.py's own zarr side: records, a 1-d ``VariableLengthBytes`` array with
chunks of ``per_write``, one ``append`` per write; xarray, one ``to_zarr(append_dim=
"time")`` per step (zarr format 3, not consolidated). Then the grown store and one
written at once are opened and read in turn (anchors/scaling.py's ``measure_states``).
The result ``run``: per-write wall and CPU seconds, open / read seconds and disk of
the grown store, ``once`` (the same of the one written at once), chunk files; and the
versions of Python, zarr, numpy and xarray.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import zarr
from harness import finish, job, versions
from scaling import measure_states, timed_writes, zarr_chunk_files


def records(j: dict[str, Any]) -> dict[str, Any]:
    from zarr.dtype import VariableLengthBytes

    flat = [r.tobytes() for r in np.load(j["data"])]
    k = int(j["per_write"])
    n, size = len(flat) // k, len(flat)
    zpath = os.path.join(j["workdir"], "anchor-records.zarr")
    z = zarr.create_array(zpath, shape=(0,), chunks=(k,), dtype=VariableLengthBytes())
    ((wall, cpu),) = timed_writes(
        n, lambda i: z.append(np.array(flat[i * k : (i + 1) * k], dtype=object))
    )
    zonce = os.path.join(j["workdir"], "anchor-records-once.zarr")
    zo = zarr.create_array(zonce, shape=(size,), chunks=(k,), dtype=VariableLengthBytes())
    zo[:] = np.array(flat, dtype=object)

    def item(h, i):
        got = h[i]
        while isinstance(got, np.ndarray):  # a 0-d object array of a numpy bytes array
            got = got.item()
        return bytes(got)

    for p in (zpath, zonce):
        assert item(zarr.open_array(p, mode="r"), size - 3) == flat[size - 3]
    states = measure_states(
        [(lambda p=p: zarr.open_array(p, mode="r"), p) for p in (zpath, zonce)],
        lambda h, i: h[i],
        size,
    )
    return {"wall": wall, "cpu": cpu, "states": states, "files": zarr_chunk_files(zpath)}


def step(t2m: np.ndarray, i: int):
    import xarray as xr

    lat, lon = t2m.shape[1:]
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), t2m[i : i + 1])},
        coords={
            "time": [np.datetime64("2020-01-01T00", "h") + np.timedelta64(i, "h")],
            "lat": np.linspace(-90, 90, lat),
            "lon": np.linspace(0, 360, lon, endpoint=False),
        },
    )
    ds["time"].encoding = {"units": "hours since 2020-01-01", "dtype": "int64"}
    return ds


def xarray(j: dict[str, Any]) -> dict[str, Any]:
    import xarray as xr

    t2m = np.load(j["data"])
    n = len(t2m)
    steps = [step(t2m, i) for i in range(n)]
    zpath = os.path.join(j["workdir"], "anchor-xr.zarr")

    def write(i: int) -> None:
        if i == 0:
            steps[0].to_zarr(zpath, mode="w", zarr_format=3, consolidated=False)
        else:
            steps[i].to_zarr(zpath, append_dim="time", zarr_format=3, consolidated=False)

    ((wall, cpu),) = timed_writes(n, write)
    zonce = os.path.join(j["workdir"], "anchor-xr-once.zarr")
    xr.concat(steps, dim="time").chunk({"time": 1}).to_zarr(
        zonce, mode="w", zarr_format=3, consolidated=False
    )

    def xopen(p: str):
        return xr.open_zarr(p, zarr_format=3, consolidated=False, chunks=None)

    def read(h, i):
        return h["t2m"][i, 5, 9].values

    for p in (zpath, zonce):
        assert float(read(xopen(p), n - 1)) == float(t2m[n - 1, 5, 9])
    states = measure_states([(lambda p=p: xopen(p), p) for p in (zpath, zonce)], read, n)
    return {"wall": wall, "cpu": cpu, "states": states, "files": zarr_chunk_files(zpath)}


def main() -> None:
    j = job()
    kinds = {"records": records, "xarray": xarray}
    if j.get("workload") not in kinds:
        raise SystemExit(f"scale_zarr anchor: unknown workload {j.get('workload')!r}")
    run = kinds[j["workload"]](j)
    finish(versions=versions("zarr", "numpy", "xarray"), run=run)


if __name__ == "__main__":
    main()
