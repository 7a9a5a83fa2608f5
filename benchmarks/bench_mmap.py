"""Memory-mapped local files against pread, in one process, same files.

    python benchmarks/bench_mmap.py            # 100,000 records, best of 9 rounds
    python benchmarks/bench_mmap.py --quick    # 20,000 records, 3 rounds

Two engine readers per file, ``Reader(path)`` (mapped) and ``Reader(path, mmap=False)``
(one ``pread`` per chunk or run of chunks), read the same things in alternating order
within each round; the table gives the best CPU time per unit of each. Files: ~1 KiB
Zipf token records with ``group_size:1`` and ``group_size:1000`` (zstd:3), and twenty
4.5 MiB float32 chunks (``group_size:1``, zstd:3) read with ``read_into``, like an
xarray chunk. Page cache hot. CPU time: ``time.thread_time`` for single-threaded rows,
``time.process_time`` (all threads) for batches and scans.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np

from arrayds import _native


def write_files(workdir: str, n: int) -> tuple[str, str, str, int]:
    rng = np.random.default_rng(0)
    records = [
        np.minimum(rng.zipf(1.3, size=int(rng.integers(448, 576))), 32767)
        .astype(np.uint16)
        .tobytes()
        for _ in range(n)
    ]
    paths = []
    for options in ("group_size:1,zstd:3", "group_size:1000,zstd:3"):
        p = os.path.join(workdir, options.split(",")[0].replace(":", "") + ".ar")
        w = _native.Writer(p, options)
        w.write_many(records)
        w.close()
        paths.append(p)
    shape = (73, 90, 180)
    base = np.sin(np.linspace(0, 20, int(np.prod(shape)))).reshape(shape).astype(np.float32)
    big = os.path.join(workdir, "chunks.ar")
    w = _native.Writer(big, "group_size:1,zstd:3")
    for _ in range(20):
        w.write(np.round(base * 30 + 270 + rng.normal(0, 1, shape).astype(np.float32), 2))
    w.close()
    return paths[0], paths[1], big, int(np.prod(shape)) * 4


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=9)
    p.add_argument("--workdir", default=None)
    p.add_argument("--quick", action="store_true", help="20,000 records, 3 rounds")
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.repeat = 20_000, 3
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        g1, g1000, big, chunk_bytes = write_files(workdir, args.records)
        readers = {
            m: (
                _native.Reader(g1, mmap=m),
                _native.Reader(g1000, mmap=m),
                _native.Reader(big, mmap=m),
            )
            for m in (False, True)
        }
        assert readers[True][0].is_mapped() and not readers[False][0].is_mapped()
        rng = np.random.default_rng(1)
        singles = [int(i) for i in rng.integers(0, args.records, size=min(20_000, args.records))]
        batches = rng.integers(0, args.records, size=(100, 256))
        out = np.empty(chunk_bytes, dtype=np.uint8)

        def single(r: _native.Reader) -> float:
            read = r.read
            t = time.thread_time()
            for i in singles:
                read(i)
            return (time.thread_time() - t) / len(singles) * 1e6

        def batch(r: _native.Reader) -> float:
            t = time.process_time()
            for b in batches:
                r.read_batch(b)
            return (time.process_time() - t) / batches.size * 1e6

        def scan(r: _native.Reader) -> float:
            n, total = r.num_records(), 0
            t = time.process_time()
            for s in range(0, n, 4096):
                total += sum(map(len, r.read_range(s, min(n, s + 4096))))
            return (time.process_time() - t) / total * 1e9

        def chunk(r: _native.Reader) -> float:
            t = time.thread_time()
            for k in range(20):
                r.read_into([k], [out])
            return (time.thread_time() - t) / 20 * 1e3

        rows: list[tuple[str, Callable[[_native.Reader], float], int, str]] = [
            ("random single reads, `group_size:1`", single, 0, "µs/read"),
            ("random batches of 256, `group_size:1`", batch, 0, "µs/record"),
            ("scan, `group_size:1`", scan, 0, "ns/byte"),
            ("scan, `group_size:1000`", scan, 1, "ns/byte"),
            ("`read_into` one 4.5 MiB chunk", chunk, 2, "ms/chunk"),
        ]
        best: dict[tuple[str, bool], float] = {}
        for rnd in range(args.repeat):
            for name, fn, which, _ in rows:
                for m in (False, True) if rnd % 2 == 0 else (True, False):
                    v = fn(readers[m][which])
                    best[(name, m)] = min(best.get((name, m), float("inf")), v)
    load = " / ".join(open("/proc/loadavg").read().split()[:3])
    lines = [
        "## Memory-mapped local files against pread",
        "",
        f"{args.records} records; best of {args.repeat} alternating rounds; CPU time; "
        f"load average at the end {load}",
        "",
        "| read | unit | pread | mmap | pread / mmap |",
        "|---|---|---:|---:|---:|",
    ]
    for name, _, _, unit in rows:
        a, b = best[(name, False)], best[(name, True)]
        lines.append(f"| {name} | {unit} | {a:.3f} | {b:.3f} | {a / b:.2f}x |")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
