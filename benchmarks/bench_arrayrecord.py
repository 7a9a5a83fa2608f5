"""ArrayRecord files: arrayds next to the official array_record package, same data,
same process, page cache hot.

    python benchmarks/bench_arrayrecord.py            # 200,000 records of ~1 KiB
    python benchmarks/bench_arrayrecord.py --quick    # 20,000 records, 2,000 reads

Data: deterministic token records (uint16 ids drawn from a Zipf law over a 32k
vocabulary, 448..575 tokens each, so about 1 KiB): compressible like real text
tokens, 1.3x (group_size:1) to 1.65x (group_size:1000) with zstd:3.

Measured (each the best of --repeat rounds; within a round the variants of a row run
one after the other, ours and the official one interleaved, so that both see the same
machine load):
* write with ``group_size:1,zstd:3`` and with ``group_size:1000`` (zstd:3); and, to
  separate compression from the rest, ~1 KiB text records (words from a 2,000-word
  vocabulary, cheap for zstd) with ``group_size:1,zstd:3`` and ``uncompressed``;
* --reads random single reads on the group_size:1 file: our reader (``r[i]``,
  ``r.read(i)``) and data source (``src[i]``); the official reader with
  ``readahead_buffer_size:0,max_parallelism:0`` (seek+read and read([i]); the best
  counts) and the official data source (``ds[i]``);
* random batches of 256: our ``reader.read(list)`` / ``src.__getitems__`` against the
  official ``reader.read(list)`` (with the options above and with its defaults, which
  decode in parallel) / ``ds.__getitems__``;
* sequential scan of each file (MB/s of record bytes): our ``iter(reader)`` and
  ``read_all()``; the official ``read_all()``, ``read(start, end)`` in batches and
  sequential ``read()``;
* anchors: a format-free baseline (one uncompressed blob + an offsets array through
  ``np.memmap``), memcpy bandwidth, and single-core zstd speed with the ``zstandard``
  package (when installed).

Besides wall-clock rates, every variant's CPU time (all threads of the process) is
recorded; "CPU ratio" is the official best CPU cost per unit over ours: how much less
work arrayds does, which does not depend on how busy the machine is.
"""

from __future__ import annotations

import argparse
import gc
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
    "single-reader": 1.2,
    "single-source": 1.0,
    "batch": 3.0,
    "scan": 2.0,
}


def make_records(n: int, seed: int = 20240611) -> list[bytes]:
    """n deterministic records of ~1 KiB of Zipf-distributed uint16 token ids."""
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


def make_text_records(n: int, seed: int = 7) -> list[bytes]:
    """n deterministic ~1 KiB records of words from a 2,000-word vocabulary (Zipf):
    text that zstd compresses ~3x, and cheaply."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{k:x}".encode() for k in range(2000)], dtype=object)
    out = []
    for _ in range(n):
        words = vocab[(rng.zipf(1.3, size=260) - 1) % 2000]
        out.append(b" ".join(words)[:1024])
    return out


@dataclass
class Variant:
    side: str  # "ours", "official" or "anchor"
    name: str
    fn: Callable[[], object]
    work: float  # records or bytes per call
    wall: float = float("inf")
    cpu: float = float("inf")

    @property
    def rate(self) -> float:
        return self.work / self.wall

    @property
    def cpu_per_unit(self) -> float:
        return self.cpu / self.work


@dataclass
class Row:
    name: str
    unit: str  # "rec/s" or "MB/s"
    variants: list[Variant] = field(default_factory=list)
    target: str | None = None
    note: str = ""

    def side(self, side: str) -> list[Variant]:
        return [v for v in self.variants if v.side == side]

    def best(self, side: str) -> Variant | None:
        vs = self.side(side)
        return max(vs, key=lambda v: v.rate) if vs else None

    @property
    def ratio(self) -> float | None:
        a, b = self.best("ours"), self.best("official")
        return None if a is None or b is None else a.rate / b.rate

    @property
    def cpu_ratio(self) -> float | None:
        a, b = self.side("ours"), self.side("official")
        if not a or not b:
            return None
        return min(v.cpu_per_unit for v in b) / min(v.cpu_per_unit for v in a)


def measure(row: Row, repeat: int) -> Row:
    """Runs the variants round-robin `repeat` times; keeps each one's best."""
    for _ in range(repeat):
        for v in row.variants:
            gc.collect()
            w0, c0 = time.perf_counter(), time.process_time()
            v.fn()
            v.wall = min(v.wall, time.perf_counter() - w0)
            v.cpu = min(v.cpu, time.process_time() - c0)
    return row


def fmt(v: float, unit: str) -> str:
    if unit == "MB/s":
        v = v / 1e6
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e4:
        return f"{v / 1e3:.0f}k"
    if v >= 100:
        return f"{v:.0f}"
    return f"{v:.2f}"


def bench_write(
    records, workdir, repeat, cases=("group_size:1,zstd:3", "group_size:1000"), label=""
) -> tuple[list[Row], dict[str, str]]:
    total = sum(map(len, records))
    files, rows = {}, []
    for opts in cases:
        stem = f"{label}{opts}".replace(":", "").replace(",", "-").replace(" ", "")
        ours_path = os.path.join(workdir, f"ours-{stem}.ar")
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

        row = Row(f"write `{opts}`{label}", "MB/s", target=None if label else "write")
        row.variants.append(Variant("ours", "write_many", ours, total))
        if official is not None:
            row.variants.append(Variant("official", "write() loop", theirs, total))
        rows.append(measure(row, repeat))
        files[opts] = ours_path
        size = os.path.getsize(ours_path)
        theirs_size = os.path.getsize(theirs_path) if official is not None else 0
        row.note = f"file {size / 1e6:.1f} MB, official {theirs_size / 1e6:.1f} MB"
    return rows, files


def bench_random(path, records, nreads, repeat) -> list[Row]:
    n = len(records)
    rng = np.random.default_rng(1)
    idx_list = rng.integers(0, n, size=nreads).tolist()
    batch_lists = [rng.integers(0, n, size=BATCH).tolist() for _ in range(max(1, nreads // 64))]
    nb = len(batch_lists) * BATCH
    r = arrayds.ArrayRecordReader(path)
    src = arrayds.ArrayRecordDataSource(path)
    # correctness spot checks before timing
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

    def ours_batch_reader():
        for b in batch_lists:
            r.read(b)

    def ours_batch_source():
        for b in batch_lists:
            src.__getitems__(b)

    single_r = Row("random single reads, reader", "rec/s", target="single-reader")
    single_s = Row("random single reads, data source", "rec/s", target="single-source")
    batch = Row(f"random batches of {BATCH}", "rec/s", target="batch")
    single_r.variants += [
        Variant("ours", "r[i]", ours_reader, nreads),
        Variant("ours", "r.read(i)", ours_reader_read, nreads),
    ]
    single_s.variants += [Variant("ours", "src[i]", ours_source, nreads)]
    batch.variants += [
        Variant("ours", "reader.read(list)", ours_batch_reader, nb),
        Variant("ours", "src.__getitems__", ours_batch_source, nb),
    ]
    if official is not None:
        o = official.ArrayRecordReader(path, OFFICIAL_READER_OPTIONS)
        od = official.ArrayRecordReader(path)  # default options: parallel batch decode
        ods = official_ds.ArrayRecordDataSource([path])
        assert o.read([idx_list[0]])[0] == records[idx_list[0]]
        # read([i]) and ds[i] (which uses read([i])) cost O(num_records) per call in
        # the 0.8.6 wheel (~1 ms at 200k records): time them on the first 1000 reads.
        few = idx_list[: min(len(idx_list), 1000)]

        def theirs_seek_read():
            seek, read = o.seek, o.read
            for i in idx_list:
                seek(i)
                read()

        def theirs_read_list():
            read = o.read
            for i in few:
                read([i])

        def theirs_source():
            for i in few:
                ods[i]

        def theirs_batch_reader():
            for b in batch_lists:
                o.read(b)

        def theirs_batch_reader_default():
            for b in batch_lists:
                od.read(b)

        def theirs_batch_source():
            for b in batch_lists:
                ods.__getitems__(b)

        official_single = [
            Variant("official", "seek+read()", theirs_seek_read, nreads),
            Variant("official", "read([i])", theirs_read_list, len(few)),
        ]
        single_r.variants += official_single
        # The data-source target compares with the official reader's best single read.
        single_s.variants += [Variant("official", "ds[i]", theirs_source, len(few))]
        batch.variants += [
            Variant("official", "reader.read(list)", theirs_batch_reader, nb),
            Variant(
                "official", "default-options reader.read(list)", theirs_batch_reader_default, nb
            ),
            Variant("official", "ds.__getitems__", theirs_batch_source, nb),
        ]
    measure(single_r, repeat)
    measure(single_s, repeat)
    if official is not None:
        single_s.variants += [v for v in single_r.variants if v.side == "official"]
    measure(batch, repeat)
    return [single_r, single_s, batch]


def bench_scan(path, records, repeat, label) -> Row:
    total = sum(map(len, records))
    n = len(records)
    r = arrayds.ArrayRecordReader(path)
    assert r.read_all() == records

    def ours_iter():
        for _ in r:
            pass

    row = Row(f"sequential scan{label}", "MB/s", target="scan")
    row.variants += [
        Variant("ours", "iter(reader)", ours_iter, total),
        Variant("ours", "read_all()", r.read_all, total),
    ]
    if official is not None:
        o = official.ArrayRecordReader(path)
        chunk = 4096

        def theirs_ranges():
            for s in range(0, n, chunk):
                o.read(s, min(n, s + chunk))

        def theirs_sequential():
            o.seek(0)
            read = o.read
            for _ in range(n):
                read()

        row.variants += [
            Variant("official", "read_all()", o.read_all, total),
            Variant("official", f"read(s, e) x{chunk}", theirs_ranges, total),
            Variant("official", "read() loop", theirs_sequential, total),
        ]
    return measure(row, repeat)


def bench_baseline(records, workdir, nreads, repeat) -> list[Row]:
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
    return [
        measure(Row("anchor: memmap blob, random single reads", "rec/s", [
            Variant("anchor", "slice.tobytes()", single, nreads)]), repeat),
        measure(Row(f"anchor: memmap blob, batches of {BATCH}", "rec/s", [
            Variant("anchor", "slices", batch, nb)]), repeat),
        measure(Row("anchor: memmap blob, scan into bytes records", "MB/s", [
            Variant("anchor", "tobytes + slices", scan, total)]), repeat),
    ]  # fmt: skip


def bench_machine(records, repeat) -> list[Row]:
    a = np.ones(256 << 20, dtype=np.uint8)
    b = a.copy()  # touched, so no page faults are timed
    rows = [
        measure(
            Row("machine: memcpy 256 MiB, one core", "MB/s", [
                Variant("anchor", "np.copyto", lambda: np.copyto(b, a), a.nbytes)]),
            repeat,
        )
    ]  # fmt: skip
    try:
        import zstandard
    except ImportError:
        rows.append(Row("machine: zstd (`pip install zstandard` to measure)", ""))
        return rows
    sample = b"".join(records[: min(len(records), 65536)])
    comp = zstandard.ZstdCompressor(level=3).compress(sample)
    d = zstandard.ZstdDecompressor()
    small = records[: min(len(records), 20000)]
    cctx = zstandard.ZstdCompressor(level=3)
    frames = [cctx.compress(r) for r in small]
    dec = d.decompress
    comp_fn = cctx.compress
    size_mib = len(sample) >> 20
    rows += [
        measure(Row(f"machine: zstd:3 decompress, one {size_mib} MiB frame, one core", "MB/s", [
            Variant("anchor", "zstandard", lambda: d.decompress(comp), len(sample))]), repeat),
        measure(Row("machine: zstd:3 decompress, one ~1 KiB record per frame, one core",
                    "rec/s", [Variant("anchor", "zstandard", lambda: [dec(f) for f in frames],
                                      len(frames))]), repeat),
        measure(Row("machine: zstd:3 compress, one ~1 KiB record per frame, one core",
                    "MB/s", [Variant("anchor", "zstandard", lambda: [comp_fn(r) for r in small],
                                     sum(map(len, small)))]), repeat),
    ]  # fmt: skip
    return rows


def render(rows: list[Row], args, elapsed: float) -> str:
    load = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        f"records: {args.records} of ~1 KiB; random reads: {args.reads}; best of "
        f"{args.repeat} interleaved rounds; python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs; total {elapsed:.0f} s; load average (1/5/15 min) at the "
        f"start {args.load0}, at the end {load}",
        "",
        "| benchmark | unit | arrayds | official | ratio | CPU ratio | target |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        cells = []
        for side in ("ours", "official"):
            vs = sorted(row.side(side), key=lambda v: -v.rate)
            if side == "ours" and not vs:
                vs = row.side("anchor")
            cells.append(
                " / ".join(
                    (f"**{fmt(v.rate, row.unit)}**" if k == 0 and len(vs) > 1 else
                     fmt(v.rate, row.unit)) + f" {v.name}"
                    for k, v in enumerate(vs)
                ) or "-"
            )  # fmt: skip
        ratio, cpu = row.ratio, row.cpu_ratio
        target = TARGETS.get(row.target or "")
        verdict = "-"
        if ratio is not None and target is not None:
            verdict = f">= {target:g}x: {'met' if ratio >= target else 'MISSED'}"
        name = row.name + (f" ({row.note})" if row.note else "")
        lines.append(
            f"| {name} | {row.unit} | {cells[0]} | {cells[1]} | "
            f"{'-' if ratio is None else f'{ratio:.2f}x'} | "
            f"{'-' if cpu is None else f'{cpu:.2f}x'} | {verdict} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--reads", type=int, default=20_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workdir", default=None, help="where to write the files (default: tmp)")
    p.add_argument("--json", default=None, help="also write the measurements as JSON here")
    p.add_argument("--quick", action="store_true", help="20,000 records, 2,000 reads")
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.reads, args.repeat = 20_000, 2_000, 2
    args.load0 = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    records = make_records(args.records)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        write_rows, files = bench_write(records, workdir, args.repeat)
        rows += write_rows
        text_rows, _ = bench_write(
            make_text_records(args.records),
            workdir,
            args.repeat,
            ("group_size:1,zstd:3", "group_size:1,uncompressed"),
            ", text records",
        )
        rows += text_rows
        rows += bench_random(files["group_size:1,zstd:3"], records, args.reads, args.repeat)
        rows.append(
            bench_scan(files["group_size:1,zstd:3"], records, args.repeat, " (group_size:1)")
        )
        rows.append(
            bench_scan(files["group_size:1000"], records, args.repeat, " (group_size:1000)")
        )
        rows += bench_baseline(records, workdir, args.reads, args.repeat)
    rows += bench_machine(records, args.repeat)
    text = render(rows, args, time.perf_counter() - t0)
    sys.stdout.write("## ArrayRecord files: arrayds vs official array_record\n\n" + text + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                [
                    {
                        "name": r.name,
                        "unit": r.unit,
                        "ratio": r.ratio,
                        "cpu_ratio": r.cpu_ratio,
                        "variants": [
                            {"side": v.side, "name": v.name, "rate": v.rate, "cpu": v.cpu,
                             "wall": v.wall, "work": v.work}
                            for v in r.variants
                        ],
                    }
                    for r in rows
                ],
                f,
                indent=1,
            )  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
