"""Remote ``ArrayRecordReader`` reads with and without ``file_reader_buffer_size``.

    python benchmarks/bench_reader_buffer.py            # 2000 cursor reads
    python benchmarks/bench_reader_buffer.py --quick    # 500

moto's S3 server on 127.0.0.1 behind a proxy that adds 5 ms to every request and
counts requests and bytes (tests/s3/s3server.py). One file of 4000 records of 1 KB
(``group_size:1,zstd:3``); for each buffer size (none, 32 KiB, 1 MiB): 2000 ``read()``
cursor reads from the start, then 200 random ``r[i]``; prints a markdown table.
Requests and bytes are exact; seconds depend on the machine. The figures are in
docs/arrayrecord.md.
"""

from __future__ import annotations

import argparse
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


def main(argv: list[str]) -> int:
    import s3fs

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="500 cursor reads")
    args, _ = parser.parse_known_args(argv)
    cursor = 500 if args.quick else 2000
    print("| file_reader_buffer_size | reads | requests | MB fetched | wall s | CPU s |")
    print("|---|---|---|---|---|---|")

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
                    f"{cursor} read() in order": (
                        lambda r=r: [r.read() for _ in range(cursor)],
                        records[:cursor],
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
                        f"| {size} | {name} | {proxy.stats.requests} | "
                        f"{proxy.stats.bytes_down / 1e6:.2f} | {wall:.2f} | {cpu:.2f} |"
                    )
                r.close()
    finally:
        server.stop()
    print(f"\nload average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
