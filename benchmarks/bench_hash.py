"""HighwayHash-64 in the engine: checksum speed and its share of a read.

    python benchmarks/bench_hash.py            # best of 15 rounds
    python benchmarks/bench_hash.py --quick    # best of 3 rounds

Rows (CPU time of the calling thread, ``time.thread_time``; page cache hot):
* ``_native.highway_hash`` of a 4 MiB buffer (GB/s) and of 32 B (a chunk header), 1 KiB
  and 64 KiB (ns per call, the Python call included);
* random single ``reader.read(i)`` of ~1 KiB records, ``group_size:1``: random bytes
  uncompressed, and Zipf-distributed uint16 token ids (as in bench_arrayrecord.py) with
  zstd:3; every read checks the chunk header hash and the chunk data hash;
* ``read_into`` of one 4 MiB uncompressed chunk (the hash and one copy are all the work).

The hash share of a read is the time of hashing the bytes that read hashes (the 32-byte
header and ~1 KiB of chunk data, measured with ``highway_hash`` minus the call overhead
of hashing ``b""``) over the read's CPU time: an upper bound for zstd, whose chunks are
smaller than the record.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

from arrayds import _native

MIB = 1 << 20


def per_call(fn, n: int) -> float:
    """CPU seconds per call of fn over n calls."""
    t = time.thread_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - t) / n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--records", type=int, default=20_000)
    p.add_argument("--quick", action="store_true", help="best of 3 rounds")
    p.add_argument("--workdir", default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.repeat = 3
    rng = np.random.default_rng(3)
    big = rng.integers(0, 256, size=4 * MIB, dtype=np.uint8).tobytes()
    small = {n: big[:n] for n in (0, 32, 1024, 64 * 1024)}
    hh = _native.highway_hash
    assert hh(big) == hh(memoryview(big))
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        lengths = rng.integers(896, 1152, size=args.records)
        records = [big[i * 1024 : i * 1024 + int(n)] for i, n in enumerate(lengths)]
        tokens = (rng.zipf(1.25, size=int(lengths.sum()) // 2) % 32000).astype("<u2").tobytes()
        sizes = lengths // 2 * 2
        ends = np.cumsum(sizes).tolist()
        token_records = [tokens[e - int(n) : e] for e, n in zip(ends, sizes, strict=True)]
        readers = {}
        for options, recs in (
            ("group_size:1,uncompressed", records),
            ("group_size:1,zstd:3", token_records),
        ):
            path = os.path.join(workdir, options.replace(":", "").replace(",", "_") + ".ar")
            w = _native.Writer(path, options)
            w.write_many(recs)
            w.close()
            readers[options] = _native.Reader(path)
        chunk_path = os.path.join(workdir, "chunk.ar")
        w = _native.Writer(chunk_path, "group_size:1,uncompressed")
        w.write(big)
        w.close()
        chunk_reader = _native.Reader(chunk_path)
        out = np.empty(len(big), dtype=np.uint8)
        picks = [int(i) for i in rng.integers(0, args.records, size=5000)]
        mean_record = float(np.mean(lengths))

        best: dict[str, float] = {}

        def keep(name: str, v: float) -> None:
            best[name] = min(best.get(name, float("inf")), v)

        for _ in range(args.repeat):
            keep("hash 4 MiB", per_call(lambda: hh(big), 20))
            for n, b in small.items():
                keep(f"hash {n}", per_call(lambda b=b: hh(b), 20_000 if n < 65536 else 2000))
            for options, r in readers.items():
                read = r.read
                t = time.thread_time()
                for i in picks:
                    read(i)
                keep(f"read {options}", (time.thread_time() - t) / len(picks))
            keep(
                "read_into 4 MiB",
                per_call(lambda: chunk_reader.read_into([0], [out]), 20),
            )
    call = best["hash 0"]
    # A ~1 KiB record's simple chunk: 32-byte header + compression byte + sizes + data.
    hashed_us = (best["hash 32"] - call + best["hash 1024"] * mean_record / 1024 - call) * 1e6
    load = " / ".join(open("/proc/loadavg").read().split()[:3])
    lines = [
        f"## HighwayHash ({_native.highway_hash_implementation()})",
        "",
        f"best of {args.repeat} rounds; CPU time; load average at the end {load}",
        "",
        "| what | figure |",
        "|---|---:|",
        f"| hash 4 MiB | {len(big) / best['hash 4 MiB'] / 1e9:.2f} GB/s "
        f"({best['hash 4 MiB'] * 1e6:.0f} µs) |",
    ]
    for n in (0, 32, 1024, 64 * 1024):
        lines.append(f"| hash {n} B, one Python call | {best[f'hash {n}'] * 1e9:.0f} ns |")
    for options in readers:
        t = best[f"read {options}"] * 1e6
        lines.append(
            f"| random `read(i)`, ~1 KiB records, `{options}` | {t:.2f} µs/read "
            f"(hash {hashed_us:.3f} µs = {hashed_us / t:.1%}) |"
        )
    t = best["read_into 4 MiB"] * 1e6
    h = (best["hash 4 MiB"] - call) * 1e6
    lines.append(
        f"| `read_into` one 4 MiB uncompressed chunk | {t:.0f} µs (hash {h:.0f} µs = {h / t:.0%}) |"
    )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
