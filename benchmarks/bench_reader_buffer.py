"""Remote ``ArrayRecordReader`` reads with and without ``file_reader_buffer_size``.

    python benchmarks/bench_reader_buffer.py

moto's S3 server on 127.0.0.1 behind a proxy that adds 5 ms to every request and
counts requests and bytes (tests/s3/s3server.py). One file of 4000 records of 1 KB
(``group_size:1,zstd:3``); for each buffer size (none, 32 KiB, 1 MiB): 2000 ``read()``
cursor reads from the start, then 200 random ``r[i]``. Requests and bytes are exact;
seconds depend on the machine. The figures are in docs/arrayrecord.md.
"""

from __future__ import annotations

import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "s3"))

from s3server import LatencyProxy, start_moto  # noqa: E402

import arrayds  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    import s3fs

    server = start_moto()
    try:
        s3fs.S3FileSystem(**server.storage_options()).mkdir("bench-buffer")
        url = "s3://bench-buffer/f.array_record"
        rng = np.random.default_rng(0)
        records = [rng.bytes(500) + b"x" * 500 for _ in range(4000)]
        with arrayds.ArrayRecordWriter(url, storage_options=server.storage_options()) as w:
            w.write_many(records)
        picks = rng.integers(0, len(records), 200).tolist()
        with LatencyProxy(("127.0.0.1", server.port), latency=0.005) as proxy:
            opts = server.storage_options(proxy.url)
            for size in (None, 32768, 1 << 20):
                r = arrayds.ArrayRecordReader(
                    url,
                    "readahead_buffer_size:0",
                    storage_options=opts,
                    file_reader_buffer_size=size,
                )
                runs = {
                    "2000 read() in order": (
                        lambda r=r: [r.read() for _ in range(2000)],
                        records[:2000],
                    ),
                    "200 random r[i]": (
                        lambda r=r: [r[i] for i in picks],
                        [records[i] for i in picks],
                    ),
                }
                for name, (run, expected) in runs.items():
                    proxy.stats.reset()
                    t0, c0 = time.perf_counter(), _cpu()
                    assert run() == expected
                    wall, cpu = time.perf_counter() - t0, _cpu() - c0
                    print(
                        f"file_reader_buffer_size={size!s:>7}  {name:21}  "
                        f"{proxy.stats.requests:5d} requests  "
                        f"{proxy.stats.bytes_down / 1e6:7.2f} MB  "
                        f"wall {wall:6.2f} s  cpu {cpu:5.2f} s"
                    )
                r.close()
    finally:
        server.stop()
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
