"""The anchor side of benchmarks/bench_scale.py's array workload: the zarr-python and
icechunk of the anchor interpreter (zarr 3.4, icechunk 2.3) take the appends arrayds
took, in the same run.

Run by benchmarks/anchor_runner.py in the anchor interpreter (protocol:
benchmarks/anchors/harness.py). The job (JSON on stdin):

* ``rows``: a ``.npy`` file of the rows appended (n x 128 float64), one per write;
* ``workdir``: where the zarr array and the icechunk repository are made;
* ``travel_rows``: the row count of the old version read (arrayds' middle retained
  version; icechunk opens the snapshot of that many rows).

Like bench_scale.py's own sides (the helpers are anchors/scaling.py's): a zarr array
on local disk (``Array.append``) and an icechunk repository (each append a commit of
its own on branch ``main``) take the n single-row appends, their writes interleaved;
then the same rows are written at once to a second zarr array (the reference of
bench_scale.py's targets); the current zarr array, the one written at once, the
current icechunk array and the icechunk snapshot of ``travel_rows`` rows are opened
and read in turn; then icechunk's ``expire_snapshots`` + ``garbage_collect`` keep only
the current snapshot. The result: per-write wall and CPU seconds of both, open / read
seconds, bytes on disk (allocated, apparent), zarr's chunk files and ``once`` (open,
read, disk of the array written at once), icechunk's versions before and after its
gc, the gc's seconds, and the versions of Python, zarr, icechunk and numpy.
"""

from __future__ import annotations

import os

import numpy as np
import zarr
from harness import finish, job, versions
from scaling import (
    ROW,
    IcechunkArray,
    disk_usage,
    measure_states,
    timed_writes,
    zarr_chunk_files,
)


def main() -> None:
    j = job()
    rows = np.load(j["rows"])
    n, travel = len(rows), int(j["travel_rows"])
    if rows.shape != (n, ROW) or not 1 <= travel <= n:
        raise SystemExit(f"history anchor: bad job (rows {rows.shape}, travel_rows {travel})")
    zpath = os.path.join(j["workdir"], "anchor-array.zarr")
    z = zarr.create_array(zpath, shape=(0, ROW), chunks=(1, ROW), dtype="f8")
    ice = IcechunkArray(os.path.join(j["workdir"], "anchor-array.icechunk"))
    (z_wall, z_cpu), (i_wall, i_cpu) = timed_writes(
        n,
        lambda i: z.append(rows[i : i + 1], axis=0),
        lambda i: ice.append(rows[i : i + 1]),
    )
    snapshot = ice.snapshots[travel - 1]
    current = zarr.open_array(zpath, mode="r")
    assert current.shape == (n, ROW) and ice.open().shape == (n, ROW)
    assert float(current[n - 1, 7]) == float(ice.open()[n - 1, 7]) == rows[n - 1, 7]
    assert float(ice.open(snapshot)[travel - 1, 7]) == rows[travel - 1, 7]
    assert ice.open(snapshot).shape == (travel, ROW)
    zonce = os.path.join(j["workdir"], "anchor-array-once.zarr")
    zarr.create_array(zonce, shape=(n, ROW), chunks=(1, ROW), dtype="f8")[:] = rows

    def read(h, i):
        return h[i, 7]

    z_now, z_once, i_now, i_old = measure_states(
        [
            (lambda: zarr.open_array(zpath, mode="r"), zpath),
            (lambda: zarr.open_array(zonce, mode="r"), zonce),
            (ice.open, ice.path),
            (lambda: ice.open(snapshot), ice.path),
        ],
        read,
        travel,
    )
    kept = ice.versions()
    took = ice.collect()
    assert float(ice.open()[n - 1, 7]) == rows[n - 1, 7]
    finish(
        versions=versions("zarr", "icechunk", "numpy"),
        zarr={
            "wall": z_wall,
            "cpu": z_cpu,
            "open_s": z_now[0],
            "read_s": z_now[1],
            "disk": z_now[2],
            "files": zarr_chunk_files(zpath),
            "once": z_once,
        },
        icechunk={
            "wall": i_wall,
            "cpu": i_cpu,
            "open_s": i_now[0],
            "read_s": i_now[1],
            "disk": i_now[2],
            "travel": i_old[:2],
            "versions": kept,
            "gc_s": took,
            "disk_gc": disk_usage(ice.path),
            "versions_gc": ice.versions(),
        },
    )


if __name__ == "__main__":
    main()
