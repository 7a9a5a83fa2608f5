"""ArrayRecord files: arrayds next to the official array_record package, same data,
same process, page cache hot.

    python benchmarks/bench_arrayrecord.py            # 200,000 records of ~1 KiB
    python benchmarks/bench_arrayrecord.py --records 20000 --reads 2000   # quick

Data: deterministic token records (uint16 ids drawn from a Zipf law over a 32k
vocabulary, 448..575 tokens each, so about 1 KiB) - compressible like real text
tokens, roughly 1.6x with zstd:3.

Measured (each the best of --repeat runs):
* write with ``group_size:1,zstd:3`` and with ``group_size:1000`` (zstd:3);
* --reads random single reads on the group_size:1 file: our reader (``r[i]``), our
  data source (``src[i]``); the official reader with
  ``readahead_buffer_size:0,max_parallelism:0`` (seek+read and read([i]), the best
  counts) and the official data source (``ds[i]``);
* random batches of 256: our ``reader.read(list)`` / ``src.__getitems__`` against the
  official ``reader.read(list)`` (with the options above and with its defaults, which
  decode in parallel) / ``ds.__getitems__``;
* sequential scan of each file (MB/s of record bytes): our ``iter(reader)`` and
  ``read_all()``; the official ``read_all()``, ``read(start, end)`` in batches and
  sequential ``read()``;
* anchors: a format-free baseline (one uncompressed blob + an offsets array through
  ``np.memmap``), memcpy bandwidth, and single-core zstd decompression speed with the
  ``zstandard`` package (when installed).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import arrayds

try:
    from array_record.python import array_record_data_source as official_ds
    from array_record.python import array_record_module as official
except ImportError:  # pragma: no cover - the official package is a test dependency
    official = None
    official_ds = None

BATCH = 256
OFFICIAL_READER_OPTIONS = "readahead_buffer_size:0,max_parallelism:0"
TARGETS = {  # ratio of ours to the official best in the same run
    "write": 3.0,
    "random single reads (reader)": 1.2,
    "random single reads (data source)": 1.0,
    "random batches of 256": 3.0,
    "sequential scan": 2.0,
}


def make_records(n: int, seed: int = 20240611) -> list[bytes]:
    rng = np.random.default_rng(seed)
    lengths = rng.integers(448, 576, size=n)
    tokens = (rng.zipf(1.25, size=int(lengths.sum())) % 32000).astype("<u2")
    ends = np.cumsum(lengths)
    blob = tokens.tobytes()
    out = []
    begin = 0
    for end in ends.tolist():
        out.append(blob[2 * begin : 2 * end])
        begin = end
    return out


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


@dataclass
class Row:
    group: str
    name: str
    ours: dict[str, float] = field(default_factory=dict)  # variant -> value
    theirs: dict[str, float] = field(default_factory=dict)
    unit: str = ""
    target_key: str | None = None

    @property
    def ratio(self) -> float | None:
        if not self.ours or not self.theirs:
            return None
        return max(self.ours.values()) / max(self.theirs.values())


def fmt(v: float) -> str:
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e4:
        return f"{v / 1e3:.0f}k"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}"


def bench_write(records, workdir, repeat, rows) -> dict[str, str]:
    total = sum(map(len, records))
    files = {}
    for opts in ("group_size:1,zstd:3", "group_size:1000"):
        ours_path = os.path.join(workdir, f"ours-{opts.replace(':', '').replace(',', '-')}.ar")
        theirs_path = ours_path.replace("ours-", "official-")

        def ours(path=ours_path, opts=opts):
            with arrayds.ArrayRecordWriter(path, opts) as w:
                w.write_many(records)

        def theirs(path=theirs_path, opts=opts):
            w = official.ArrayRecordWriter(path, opts)
            write = w.write
            for rec in records:
                write(rec)
            w.close()

        row = Row("write", f"write `{opts}`", unit="MB/s", target_key="write")
        row.ours["write_many"] = total / best_of(repeat, ours) / 1e6
        if official is not None:
            row.theirs["write loop"] = total / best_of(repeat, theirs) / 1e6
        rows.append(row)
        files[opts] = ours_path
        size = os.path.getsize(ours_path)
        rows.append(
            Row(
                "write",
                f"file size `{opts}` (MB; raw {total / 1e6:.0f} MB)",
                {"ours": size / 1e6},
                {"official": os.path.getsize(theirs_path) / 1e6} if official else {},
                "MB",
            )
        )
    return files


def bench_random(path, records, nreads, repeat, rows, label) -> None:
    n = len(records)
    rng = np.random.default_rng(1)
    idx = rng.integers(0, n, size=nreads)
    idx_list = idx.tolist()
    batches = [rng.integers(0, n, size=BATCH) for _ in range(max(1, nreads // BATCH))]
    batch_lists = [b.tolist() for b in batches]
    # correctness spot checks before timing
    r = arrayds.ArrayRecordReader(path)
    src = arrayds.ArrayRecordDataSource(path)
    assert r[idx_list[0]] == records[idx_list[0]] == src[idx_list[0]]
    assert src.__getitems__(batch_lists[0]) == [records[i] for i in batch_lists[0]]

    def ours_reader():
        for i in idx_list:
            r[i]

    def ours_reader_read():
        read = r.read
        for i in idx_list:
            read(i)

    def ours_source():
        for i in idx_list:
            src[i]

    row_r = Row("random", f"random single reads, reader{label}", unit="rec/s")
    row_r.target_key = "random single reads (reader)"
    row_r.ours["r[i]"] = nreads / best_of(repeat, ours_reader)
    row_r.ours["r.read(i)"] = nreads / best_of(repeat, ours_reader_read)
    row_s = Row("random", f"random single reads, data source{label}", unit="rec/s")
    row_s.target_key = "random single reads (data source)"
    row_s.ours["src[i]"] = nreads / best_of(repeat, ours_source)

    def ours_batch_reader():
        for b in batch_lists:
            r.read(b)

    def ours_batch_source():
        for b in batch_lists:
            src.__getitems__(b)

    nb = len(batches) * BATCH
    row_b = Row("random", f"random batches of {BATCH}{label}", unit="rec/s")
    row_b.target_key = "random batches of 256"
    row_b.ours["reader.read(list)"] = nb / best_of(repeat, ours_batch_reader)
    row_b.ours["src.__getitems__"] = nb / best_of(repeat, ours_batch_source)

    if official is not None:
        o = official.ArrayRecordReader(path, OFFICIAL_READER_OPTIONS)
        ods = official_ds.ArrayRecordDataSource([path])
        assert o.read([idx_list[0]])[0] == records[idx_list[0]]

        def theirs_seek_read():
            seek, read = o.seek, o.read
            for i in idx_list:
                seek(i)
                read()

        # read([i]) and ds[i] (which uses read([i])) cost O(num_records) per call in
        # the 0.8.6 wheel (~1 ms at 200k records): time them on the first 1000 reads.
        few = idx_list[: min(len(idx_list), 1000)]

        def theirs_read_list():
            read = o.read
            for i in few:
                read([i])

        def theirs_source():
            for i in few:
                ods[i]

        # Batches: the official reader with its default options decodes in parallel.
        od = official.ArrayRecordReader(path)

        def theirs_batch_reader():
            for b in batch_lists:
                o.read(b)

        def theirs_batch_reader_default():
            for b in batch_lists:
                od.read(b)

        def theirs_batch_source():
            for b in batch_lists:
                ods.__getitems__(b)

        row_r.theirs["seek+read()"] = nreads / best_of(repeat, theirs_seek_read)
        row_r.theirs["read([i])"] = len(few) / best_of(repeat, theirs_read_list)
        # The data-source target compares with the official reader's best single read.
        row_s.theirs = dict(row_r.theirs)
        row_s.theirs["ds[i]"] = len(few) / best_of(repeat, theirs_source)
        row_b.theirs["reader.read(list)"] = nb / best_of(repeat, theirs_batch_reader)
        row_b.theirs["default-options reader.read(list)"] = nb / best_of(
            repeat, theirs_batch_reader_default
        )
        row_b.theirs["ds.__getitems__"] = nb / best_of(repeat, theirs_batch_source)
        o.close()
        od.close()
    rows.extend([row_r, row_s, row_b])


def bench_scan(path, records, repeat, rows, label) -> None:
    total = sum(map(len, records))
    n = len(records)
    r = arrayds.ArrayRecordReader(path)
    assert r.read_all() == records

    def ours_iter():
        for _ in r:
            pass

    row = Row("scan", f"sequential scan{label}", unit="MB/s", target_key="sequential scan")
    row.ours["iter(reader)"] = total / best_of(repeat, ours_iter) / 1e6
    row.ours["read_all()"] = total / best_of(repeat, r.read_all) / 1e6
    if official is not None:
        o = official.ArrayRecordReader(path)
        chunk = 4096

        def theirs_read_all():
            o.read_all()

        def theirs_ranges():
            for s in range(0, n, chunk):
                o.read(s, min(n, s + chunk))

        def theirs_sequential():
            o.seek(0)
            read = o.read
            for _ in range(n):
                read()

        row.theirs["read_all()"] = total / best_of(repeat, theirs_read_all) / 1e6
        row.theirs["read(s, e) x4096"] = total / best_of(repeat, theirs_ranges) / 1e6
        row.theirs["read() loop"] = total / best_of(repeat, theirs_sequential) / 1e6
        o.close()
    rows.append(row)


def bench_baseline(records, workdir, nreads, repeat, rows) -> None:
    """One uncompressed blob + offsets through np.memmap: no format at all."""
    blob_path = os.path.join(workdir, "baseline.bin")
    lengths = np.fromiter(map(len, records), dtype=np.int64, count=len(records))
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    with open(blob_path, "wb") as f:
        for rec in records:
            f.write(rec)
    mm = np.memmap(blob_path, dtype=np.uint8, mode="r")
    off = offsets.tolist()
    rng = np.random.default_rng(1)
    idx = rng.integers(0, len(records), size=nreads).tolist()
    assert bytes(mm[off[idx[0]] : off[idx[0] + 1]]) == records[idx[0]]

    def single():
        for i in idx:
            mm[off[i] : off[i + 1]].tobytes()

    def batch():
        for s in range(0, len(idx) - BATCH + 1, BATCH):
            [mm[off[i] : off[i + 1]].tobytes() for i in idx[s : s + BATCH]]

    def scan():
        data = mm.tobytes()
        [data[a:b] for a, b in zip(off[:-1], off[1:], strict=True)]

    total = int(offsets[-1])
    nb = (len(idx) // BATCH) * BATCH
    rows.append(
        Row(
            "anchor",
            "baseline memmap: random single reads",
            {"memmap slice": nreads / best_of(repeat, single)},
            unit="rec/s",
        )
    )
    rows.append(
        Row(
            "anchor",
            f"baseline memmap: batches of {BATCH}",
            {"memmap slices": nb / best_of(repeat, batch)},
            unit="rec/s",
        )
    )
    rows.append(
        Row(
            "anchor",
            "baseline memmap: scan into bytes records",
            {"memmap": total / best_of(repeat, scan) / 1e6},
            unit="MB/s",
        )
    )


def bench_machine(records, repeat, rows) -> None:
    a = np.ones(256 << 20, dtype=np.uint8)
    b = a.copy()  # touched, so no page faults are timed
    t = best_of(repeat, lambda: np.copyto(b, a))
    rows.append(
        Row("machine", "memcpy (256 MiB, one core)", {"np.copyto": a.nbytes / t / 1e9}, unit="GB/s")
    )
    try:
        import zstandard
    except ImportError:
        rows.append(Row("machine", "zstd decompress: `zstandard` not installed", unit=""))
        return
    sample = b"".join(records[: min(len(records), 65536)])
    comp = zstandard.ZstdCompressor(level=3).compress(sample)
    d = zstandard.ZstdDecompressor()
    t = best_of(repeat, lambda: d.decompress(comp))
    rows.append(
        Row(
            "machine",
            f"zstd:3 decompress, one {len(sample) >> 20} MiB frame, one core",
            {"zstandard": len(sample) / t / 1e6},
            unit="MB/s",
        )
    )
    small = records[: min(len(records), 20000)]
    cctx = zstandard.ZstdCompressor(level=3)
    frames = [cctx.compress(r) for r in small]
    dec = d.decompress
    t = best_of(repeat, lambda: [dec(f) for f in frames])
    rows.append(
        Row(
            "machine",
            "zstd:3 decompress, one frame per ~1 KiB record, one core",
            {"zstandard": len(frames) / t},
            unit="rec/s",
        )
    )


def render(rows: list[Row], args, elapsed: float) -> str:
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"records: {args.records} of ~1 KiB; random reads: {args.reads}; repeat: best of "
        f"{args.repeat}; python {platform.python_version()}, {os.cpu_count()} CPUs; "
        f"total {elapsed:.0f} s; load average at the end {load} (at the start {args.load0})",
        "",
        "| benchmark | unit | arrayds (best variant) | official (best variant) | ratio | target |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        ours = " / ".join(f"{fmt(v)} {k}".strip() for k, v in row.ours.items()) or "-"
        theirs = " / ".join(f"{fmt(v)} {k}".strip() for k, v in row.theirs.items()) or "-"
        ratio = row.ratio
        target = TARGETS.get(row.target_key or "")
        if ratio is None or row.unit == "MB" or target is None:
            verdict = "-"
        else:
            verdict = f">= {target:g}x {'met' if ratio >= target else 'MISSED'}"
        rtext = "-" if ratio is None else f"{ratio:.2f}x"
        lines.append(f"| {row.name} | {row.unit} | {ours} | {theirs} | {rtext} | {verdict} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--reads", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workdir", default=None, help="where to write the files (default: tmp)")
    p.add_argument("--json", default=None, help="also write the rows as JSON here")
    p.add_argument("--quick", action="store_true", help="20,000 records, 2,000 reads")
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.reads, args.repeat = 20_000, 2_000, 2
    args.load0 = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    records = make_records(args.records)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        files = bench_write(records, workdir, args.repeat, rows)
        bench_random(files["group_size:1,zstd:3"], records, args.reads, args.repeat, rows, "")
        bench_scan(files["group_size:1,zstd:3"], records, args.repeat, rows, " (group_size:1)")
        bench_scan(files["group_size:1000"], records, args.repeat, rows, " (group_size:1000)")
        bench_baseline(records, workdir, args.reads, args.repeat, rows)
    bench_machine(records, args.repeat, rows)
    text = render(rows, args, time.perf_counter() - t0)
    sys.stdout.write("## ArrayRecord files: arrayds vs official array_record\n\n" + text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                [
                    {
                        "name": r.name,
                        "unit": r.unit,
                        "ours": r.ours,
                        "official": r.theirs,
                        "ratio": r.ratio,
                    }
                    for r in rows
                ],
                f,
                indent=1,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
