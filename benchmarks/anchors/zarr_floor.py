"""The anchor side of benchmarks/bench_zarr_view.py: the zarr floor of the anchor
interpreter's zarr-python (3.4), on the same data in the same run.

Run by benchmarks/anchor_runner.py in the anchor interpreter (protocol:
benchmarks/anchors/harness.py). The job (JSON on stdin):

* ``cases``: a list of ``{"label": "A2" | "A4", "data": path, "chunk": c}``, ``data``
  a ``.npy`` file of the square float32 array;
* ``repeat``: how many times each measured section runs (the runner keeps the fastest).

Each array is written to zarr's own ``MemoryStore`` in chunks of ``c`` x ``c``,
uncompressed and with no codec but ``bytes``, as bench_zarr_view.py's floor is, then
read (dask's threaded scheduler): section ``A2 sum`` is ``da.from_zarr(z).sum()``,
``A4 dask read`` is ``da.from_zarr(z).compute()``, ``A4 direct read`` is ``z[...]``.
Every read is checked against the data once, outside the sections.
"""

from __future__ import annotations

import dask
import dask.array as da
import numpy as np
import zarr
from harness import finish, job, section, versions
from zarr.storage import MemoryStore


def main() -> None:
    j = job()
    repeat = int(j["repeat"])
    with dask.config.set(scheduler="threads"):
        for case in j["cases"]:
            data = np.load(case["data"])
            c = int(case["chunk"])
            z = zarr.create_array(
                MemoryStore(), shape=data.shape, chunks=(c, c), dtype=data.dtype, compressors=None
            )
            z[...] = data
            x = da.from_zarr(z)
            if case["label"] == "A2":
                want = float(data.sum(dtype=np.float64))
                assert np.isclose(float(x.sum(dtype=np.float64).compute()), want)
                jobs = {"A2 sum": lambda x=x: x.sum().compute()}
            else:
                assert np.array_equal(x.compute(), data) and np.array_equal(z[...], data)
                jobs = {"A4 dask read": x.compute, "A4 direct read": lambda z=z: z[...]}
            for _ in range(repeat):
                for label, fn in jobs.items():
                    with section(label):
                        fn()
            del z, x, data
    finish(versions=versions("zarr", "dask", "numpy"))


if __name__ == "__main__":
    main()
