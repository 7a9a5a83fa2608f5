"""Writing shards through the obstore backend: obstore's own multipart upload against
the same store writing its shards through s3fs (as it did before) and against the
fsspec backend.

    python benchmarks/bench_obstore_write.py             # 256 MiB in 4 shards, 3 repeats
    python benchmarks/bench_obstore_write.py --mib 64 --repeat 1

Setup: moto's S3 server behind the 5 ms :class:`LatencyProxy` of tests/s3/s3server.py,
both in a process of their own. Each measurement is a fresh Python process that
writes ``arrayds.to_arrayrecord`` of a dask array of random bytes (incompressible:
zstd:1 stores every byte), chunks of 4 MiB, shards of 64 MiB (two 32 MiB parts
each), on dask's threaded scheduler, to a fresh URL. Figures: the write's wall
seconds, the process's CPU seconds (all threads: obstore's runtime and s3fs's event
loop included) and its peak RSS (``VmHWM``) minus its RSS just before the write
(after imports and generating the input). Modes, interleaved:

* ``fsspec``: ``storage_options`` without a backend (s3fs);
* ``obstore, shards by s3fs``: the obstore backend with its ``new_file`` as it was
  before shards were written through obstore (it yielded the object's URL and the
  writer streamed to it through s3fs);
* ``obstore``: the obstore backend (its ``ObstoreUpload``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "s3"))

from s3server import ServerProcess  # noqa: E402

MODES = ("fsspec", "obstore, shards by s3fs", "obstore")

CHILD = r"""
import contextlib, json, sys, time
import dask.array as da
import numpy as np
import arrayds
from arrayds.storage.obstore import ObstoreStore

mode, mib, opts, url = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
if mode != "fsspec":
    opts["backend"] = "obstore"
if mode == "obstore, shards by s3fs":
    @contextlib.contextmanager
    def new_file(self, key, *, defer_sync=False):  # the obstore store's, before
        try:
            yield self.url_of(key)
        except BaseException:
            self.delete([key])
            raise
    ObstoreStore.new_file = new_file


def rss(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


x = np.random.default_rng(0).integers(0, 256, (mib, 1 << 20), dtype=np.uint8)
arr = da.from_array(x, chunks=(4, 1 << 20))
# warm up the clients (their threads, pools) outside the measurement
arrayds.to_arrayrecord(x[:1], url + "-warm", storage_options=opts)
import ctypes
ctypes.CDLL("libc.so.6").malloc_trim(0)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset VmHWM to the current RSS
base = rss("VmRSS")
t0, c0 = time.perf_counter(), time.process_time()
arrayds.to_arrayrecord(arr, url, compression="zstd:1", shard_size="64MiB", storage_options=opts)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
assert arrayds.open_array(url, storage_options=opts).shape == x.shape
print(json.dumps({"peak": rss("VmHWM") - base, "wall": wall, "cpu": cpu}))
"""


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--latency-ms", type=float, default=5.0)
    args = p.parse_args(argv)
    server = ServerProcess(latency=args.latency_ms / 1000)
    runs: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    try:
        import s3fs

        fs = s3fs.S3FileSystem(**server.storage_options(through_proxy=False))
        fs.mkdir("bench")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        for _ in range(args.repeat):
            for mode in MODES:
                url = f"s3://bench/{uuid.uuid4().hex[:8]}"
                out = subprocess.run(
                    [
                        sys.executable,
                        "-c",
                        CHILD,
                        mode,
                        str(args.mib),
                        json.dumps(server.storage_options()),
                        url,
                    ],
                    capture_output=True,
                    text=True,
                    env=env,
                )
                if out.returncode:
                    raise RuntimeError(f"{mode}: {out.stderr[-3000:]}")
                runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
                for u in (url, url + "-warm"):
                    fs.rm(u.split("://", 1)[1], recursive=True)
    finally:
        server.stop()

    print(
        f"# bench_obstore_write ({platform.machine()}, {args.mib} MiB in 64 MiB shards, "
        f"{args.latency_ms:g} ms per request, best of {args.repeat})"
    )
    print("| shards written by | wall s | CPU s | peak RSS above the input |")
    print("|---|---:|---:|---:|")
    for mode in MODES:
        best = min(runs[mode], key=lambda r: r["wall"])
        peaks = [r["peak"] / 2**20 for r in runs[mode]]
        print(
            f"| {mode} | {best['wall']:.2f} | {best['cpu']:.2f} | "
            f"+{min(peaks):.0f} to +{max(peaks):.0f} MiB |"
        )


if __name__ == "__main__":
    main()
