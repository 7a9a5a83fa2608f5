"""Peak memory of writing one 256 MiB shard to S3: streamed (multipart upload while
the records are encoded) against built in memory and uploaded at close (the writer
before shards were streamed).

    python benchmarks/bench_s3_memory.py            # 256 MiB, both variants, 2 repeats
    python benchmarks/bench_s3_memory.py --mib 64

The S3 server (moto) runs in a process of its own, so its memory is not counted.
Each measurement is a fresh Python process; the figure is its peak RSS (VmHWM)
minus its RSS just before the write (after imports and generating the input), so it
is what the write itself adds. Two writes:

* writer: ``ArrayRecordWriter`` fed 1 MiB records one at a time from a generator
  (a records shard: the input never exists as a whole);
* array: ``arrayds.to_arrayrecord`` of a numpy array as one shard (the shard task
  holds all its encoded chunks, so the input is in memory either way).

Data: random bytes (incompressible: the shard is 256 MiB), zstd:1.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r"""
import json, os, sys, time
import numpy as np
import arrayds
from arrayds import arrayrecord as ar

mode, what, mib, endpoint, url = sys.argv[1:6]
mib = int(mib)
if mode == "memory":
    ar.STREAMED_PROTOCOLS = ()  # build in memory, one PUT at close (the old writer)
opts = {"endpoint_url": endpoint, "key": "testing", "secret": "testing"}


def rss(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(field)


rng = np.random.default_rng(0)
block = rng.integers(0, 256, 1 << 20, dtype=np.uint8)
if what == "array":
    x = rng.integers(0, 256, (mib, 1 << 20), dtype=np.uint8)
# warm up the S3 client (its threads, buffers) outside the measurement
with ar.ArrayRecordWriter(url + "-warm", storage_options=opts) as w:
    w.write(b"warm")
import ctypes
ctypes.CDLL("libc.so.6").malloc_trim(0)
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset VmHWM to the current RSS
base = rss("VmRSS")
t0 = time.perf_counter()
c0 = time.process_time()
if what == "writer":
    with ar.ArrayRecordWriter(url, "group_size:1,zstd:1", storage_options=opts) as w:
        for i in range(mib):
            block[:8] = np.frombuffer(i.to_bytes(8, "little"), np.uint8)
            w.write(block)
else:
    arrayds.to_arrayrecord(x, url, chunks=(1, 1 << 20), compression="zstd:1",
                           shard_size=f"{mib + 1}MiB", storage_options=opts)
print(json.dumps({"peak": rss("VmHWM") - base, "wall": time.perf_counter() - t0,
                  "cpu": time.process_time() - c0}))
"""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--repeat", type=int, default=2)
    args = p.parse_args()
    port_proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; sys.path.insert(0, sys.argv[1]);"
            "from tests.s3.s3server import start_moto; s = start_moto();"
            "print(s.port, flush=True); time.sleep(86400)",
            ROOT,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(port_proc.stdout.readline())
        endpoint = f"http://127.0.0.1:{port}"
        import s3fs

        fs = s3fs.S3FileSystem(endpoint_url=endpoint, key="testing", secret="testing")
        fs.mkdir("bench")
        rows = []
        for what in ("writer", "array"):
            for rep in range(args.repeat):
                for mode in ("memory", "stream"):
                    url = f"s3://bench/{what}-{mode}-{rep}-{uuid.uuid4().hex[:6]}"
                    out = subprocess.run(
                        [sys.executable, "-c", CHILD, mode, what, str(args.mib), endpoint, url],
                        capture_output=True,
                        text=True,
                        check=True,
                    ).stdout
                    r = json.loads(out.strip().splitlines()[-1])
                    r.update(what=what, mode=mode)
                    rows.append(r)
                    print(
                        f"{what:6s} {mode:6s} peak +{r['peak'] / 2**20:7.1f} MiB  "
                        f"wall {r['wall']:6.2f} s  cpu {r['cpu']:6.2f} s",
                        flush=True,
                    )
                    fs.rm(url.split("://", 1)[1])
                    time.sleep(0.5)
    finally:
        port_proc.kill()
        port_proc.wait()


if __name__ == "__main__":
    main()
