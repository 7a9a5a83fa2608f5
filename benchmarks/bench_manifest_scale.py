"""Opening and first-reading datasets of many shards: arrayds next to
zarr-python sharded arrays and icechunk in the same run, each figure from a fresh process.

    python benchmarks/bench_manifest_scale.py           # 10^3 .. 10^6 shards, S3 at 10^5
    python benchmarks/bench_manifest_scale.py --quick   # 10^3 and 10^4, S3 at 10^3

Shapes: an array of shape (n, 128) float64 in chunks of one
row (1 KiB), ``shard_size=1`` (every chunk its own shard file), uncompressed; and a
records dataset of n shards of one 100-byte record each (``raw``, uncompressed).
Every row (record) holds the same values, so every shard file holds the same bytes.

How the datasets are built (the largest ones must fit this machine's disk and time):

* arrayds: a one-row array (a one-record dataset) is written with
  ``arrayds.to_arrayrecord``; its one shard file is the template. The n-shard dataset's
  shard files are hard links of that file under the names a write of n shards gives
  them (``c/<write id>-<k>.array_record``; records ``<stem>.array_record-<k>-of-<n>``),
  a fresh copy of the template every 50,000 names (ext4 allows 65,000 links per
  file). Its manifest is written as a **format version 1** manifest (docs/spec.md
  section 5, spec-records.md: one JSON file listing every shard entry, each as the
  writers make it, with the template's size), then ``arrayds.upgrade`` stores it in
  the newest format through arrayds' own commit path, as a write would store it (the
  tests check that the result matches a dask ``to_arrayrecord`` of n one-row shards,
  entry for entry, and passes ``arrayds verify``). Writing n shards through dask
  costs about 0.5 ms a shard here (the graph's tasks), some ten minutes for 10^6;
  this takes about a minute. Nothing of arrayds' internals is imported.
* zarr and icechunk: benchmarks/anchors/manifest_scale.py (zarr's shard files are
  hard links of one file the same way; icechunk's chunks are real objects, stored by
  its store's ``set``). They run in the anchor interpreter ``$ARRAYDS_ANCHOR_PYTHON``
  (default ``.venv-anchors/bin/python``: zarr 3.4.2 and icechunk 2.3 need Python
  3.12); without it their rows are left out with a message.
* S3 (moto behind the latency proxy of tests/s3/s3server.py, 5 ms per request, in a
  separate process): the datasets built on local disk are uploaded, every metadata
  and manifest object whole, and of the shard (chunk) objects only those of the rows
  the measurements read (n shard objects would not fit moto's memory); no measured
  operation lists a folder or touches another shard, which the request counts show.

Measured, each dataset in ``--repeat`` fresh processes (the median counts; the
datasets take turns, so a drifting load weighs on all alike; page cache hot): the
process imports its library and opens and reads a one-row dataset elsewhere (so lazy
imports are done), then times **open** (``arrayds.open_array`` /
``arrayds.records.open_records``; ``zarr.open_array``; icechunk ``Repository.open``,
``readonly_session("main")`` and ``zarr.open_array``), the **first read** of one
element (one record) and the **later reads** (median of one element of each of 20
other random rows); **bytes read** by open + first read (local: the process's
``rchar`` from ``/proc/self/io``, bytes of read syscalls, manifests included, shard
bytes the engine maps not; S3: response bytes the proxy counted) and the requests;
**peak RSS** (``ru_maxrss``); CPU is the process's CPU time (all threads). Manifest
bytes: arrayds' head and segments, zarr's ``zarr.json``, icechunk's every object but
the chunks. The one-shard rows are the baseline of the targets.

Targets (at 10^6 shards): open <= 5 ms, first read <= 2x the first read at
10^3, <= 1 MiB read by it, peak RSS <= 50 MiB above the one-shard array's, open and
first read within 1.5x of zarr's and ahead of icechunk's; missed targets do not fail
the run (docs/performance.md, "Manifest scale", has today's figures).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "s3"))

import arrayds  # noqa: E402
from arrayds import records  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ANCHOR_SCRIPT = ROOT / "benchmarks" / "anchors" / "manifest_scale.py"
ANCHOR_ENV = "ARRAYDS_ANCHOR_PYTHON"
DEFAULT_ANCHOR_PYTHON = ROOT / ".venv-anchors" / "bin" / "python"
ROW = 128
COL = 7  # the element read of each row: every row is arange(128)
RECORD = bytes(range(100))
LATER = 20  # rows read after the first
LINKS_PER_FILE = 50_000  # ext4: at most 65,000 links per file
LIBS = ("arrayds", "zarr", "icechunk")
MiB = 1 << 20


@dataclass
class Dataset:
    """One dataset measured: library, kind, where it is and how to read it."""

    lib: str
    kind: str  # "array" | "records"
    n: int
    store: str  # "local" | "s3"
    url: str
    warm: str  # a one-row dataset of the same library and kind (elsewhere) ...
    warm_s3: bool  # ... on S3
    rows: list[int]
    metadata_bytes: int = 0
    runs: list[dict[str, Any]] = field(default_factory=list)


def pick_rows(n: int) -> list[int]:
    """The row of the first read, then LATER others (distinct, random, seeded by n)."""
    if n == 1:
        return [0]
    rng = np.random.default_rng(n)
    return [int(r) for r in rng.choice(n, size=min(n, LATER + 1), replace=False)]


# ---- arrayds datasets: hard-linked shards, a version 1 manifest, arrayds.upgrade


def link_names(template: str, paths: list[str]) -> None:
    """Give every path of ``paths`` the bytes of ``template``: each LINKS_PER_FILE-th
    path (the first included) a copy of it, the paths after it hard links of that copy."""
    for k, path in enumerate(paths):
        if k % LINKS_PER_FILE == 0:
            shutil.copyfile(template, path)
            source = path
        else:
            os.link(source, path)


def write_v1(path: str, header: dict[str, Any], entries: list[str]) -> None:
    """A format version 1 manifest at ``path``: ``header`` and the ``shards`` list of
    ``entries`` (each one JSON object already encoded)."""
    head = json.dumps(header, separators=(",", ":"))[:-1]
    with open(os.path.join(path, "arrayds.json"), "w") as f:
        f.write(head + ',"shards":[')
        f.write(",".join(entries))
        f.write("]}")


def array_template(workdir: str) -> str:
    """A one-row array written by arrayds -> the path of its one shard file."""
    url = os.path.join(workdir, "template-array")
    row = np.arange(ROW, dtype="<f8")[None]
    arrayds.to_arrayrecord(row, url, compression="uncompressed", shard_size=1)
    (name,) = os.listdir(os.path.join(url, "c"))
    return os.path.join(url, "c", name)


def build_array(url: str, n: int, template: str) -> None:
    """The (n, 128) array of n one-row shards (see the module docstring)."""
    os.makedirs(os.path.join(url, "c"))
    write_id = os.path.basename(template).split("-")[0]
    names = [f"c/{write_id}-{k}.array_record" for k in range(n)]
    link_names(template, [os.path.join(url, p) for p in names])
    size = os.path.getsize(template)
    header = {
        "format": "arrayds",
        "format_version": 1,
        "kind": "array",
        "generation": 1,
        "commit": write_id,
        "shape": [n, ROW],
        "dtype": "<f8",
        "chunks": [[[1, n]], [[ROW, 1]]],
        "chunk_shape": [1, ROW],
        "fill_value": 0.0,
        "compression": "uncompressed",
        "dims": None,
        "attrs": {},
    }
    entries = [
        f'{{"path":"{p}","start":[{k},0],"stop":[{k + 1},1],"records":1,"bytes":{size}}}'
        for k, p in enumerate(names)
    ]
    write_v1(url, header, entries)
    arrayds.upgrade(url)


def records_template(workdir: str) -> tuple[str, dict[str, Any]]:
    """A one-record dataset written by arrayds -> its shard file and shard entry."""
    url = os.path.join(workdir, "template-records")
    arrayds.to_arrayrecord([RECORD], url, compression="uncompressed")
    (shard,) = records.open_records(url).shards
    return os.path.join(url, shard.path), shard.to_json()


def build_records(url: str, n: int, template: tuple[str, dict[str, Any]]) -> None:
    """The records dataset of n one-record shards (see the module docstring)."""
    path, entry = template
    os.makedirs(url)
    stem = os.path.basename(path).split(".array_record-")[0]
    names = [f"{stem}.array_record-{k:05d}-of-{n:05d}" for k in range(n)]
    link_names(path, [os.path.join(url, p) for p in names])
    rest = json.dumps({k: v for k, v in entry.items() if k != "path"}, separators=(",", ":"))
    header = {
        "format": "arrayds",
        "format_version": 1,
        "kind": "records",
        "generation": 1,
        "commit": stem.rsplit("-", 1)[-1],
        "attrs": {},
        "serializer": "raw",
        "group_size": 1,
        "compression": "uncompressed",
        "num_records": n,
    }
    write_v1(url, header, [f'{{"path":"{p}",{rest[1:]}' for p in names])
    arrayds.upgrade(url)


def arrayds_objects(url: str, kind: str, rows: list[int]) -> tuple[int, list[str]]:
    """(manifest bytes: the head and its segments; the keys a read of ``rows`` can
    touch: those and the rows' shard files)."""
    meta = ["arrayds.json"]
    log = os.path.join(url, "_arrayds", "log")
    if os.path.isdir(log):
        meta += [f"_arrayds/log/{f}" for f in sorted(os.listdir(log))]
    size = sum(os.path.getsize(os.path.join(url, k)) for k in meta)
    if kind == "array":
        (first,) = [f for f in os.listdir(os.path.join(url, "c")) if f.endswith("-0.array_record")]
        write_id = first.split("-")[0]
        shards = [f"c/{write_id}-{r}.array_record" for r in rows]
    else:
        n = records.open_records(url).num_shards
        (first,) = [f for f in os.listdir(url) if f.endswith(f"-00000-of-{n:05d}")]
        stem = first.split(".array_record-")[0]
        shards = [f"{stem}.array_record-{r:05d}-of-{n:05d}" for r in rows]
    return size, meta + shards


# ---- the anchors (benchmarks/anchors/manifest_scale.py in the anchor interpreter)


def anchor_python() -> Path | None:
    """The anchor interpreter, or None when there is none (its rows are skipped)."""
    given = os.environ.get(ANCHOR_ENV)
    path = Path(given) if given else DEFAULT_ANCHOR_PYTHON
    return path if path.is_file() and os.access(path, os.X_OK) else None


def anchor_builds(python: Path, jobs: list[dict[str, Any]]) -> subprocess.Popen[str]:
    """Start the anchor builds (one after another) in the background: one process
    that runs each job and prints its result."""
    script = (
        "import json, subprocess, sys\n"
        "for job in json.loads(sys.argv[1]):\n"
        "    out = subprocess.run([sys.executable, sys.argv[2], 'build', json.dumps(job)],\n"
        "                         capture_output=True, text=True)\n"
        "    if out.returncode:\n"
        "        sys.exit(out.stderr)\n"
        "    print(out.stdout.strip(), flush=True)\n"
    )
    return subprocess.Popen(
        [str(python), "-c", script, json.dumps(jobs), str(ANCHOR_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


# ---- one measurement: a fresh process and its handshake


def peak_rss() -> int:
    """This process's peak resident set (``VmHWM``, bytes). Not ``ru_maxrss``: Linux
    carries that across ``exec`` from the forking parent."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def child_main(job: dict[str, Any]) -> int:
    """The arrayds side of a measurement (``--measure JOB``); the protocol is the
    anchor script's (benchmarks/anchors/manifest_scale.py, ``measure``)."""
    out = os.fdopen(os.dup(1), "w")
    sys.stdout = sys.stderr
    so = job.get("s3")
    opts = dict(so) if so else None

    def open_(url: str, storage_options: dict[str, Any] | None) -> Any:
        if job["kind"] == "array":
            return arrayds.open_array(url, storage_options=storage_options)
        return records.open_records(url, storage_options=storage_options)

    def read(h: Any, row: int) -> Any:
        v = float(h[row, COL]) if job["kind"] == "array" else bytes(h[row]).hex()
        if v != job["expect"]:
            raise AssertionError(f"arrayds {job['url']} row {row}: read {v!r}")
        return v

    def rchar() -> int:
        with open("/proc/self/io") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("rchar:"))

    def phase(fn: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
        io0, c0, t0 = rchar(), time.process_time(), time.perf_counter()
        value = fn()
        took = time.perf_counter() - t0
        return value, {"seconds": took, "cpu": time.process_time() - c0, "rchar": rchar() - io0}

    def say(msg: dict[str, Any], wait: bool = True) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()
        if wait and not sys.stdin.readline():
            raise SystemExit("the benchmark went away")

    read(open_(job["warm"], opts if job["warm_s3"] else None), 0)
    say({"phase": "ready"})
    rows = job["rows"]
    h, t = phase(lambda: open_(job["url"], opts))
    say({"phase": "open", **t})
    _, t = phase(lambda: read(h, rows[0]))
    say({"phase": "first", **t})
    times, cpu, io = [], 0.0, 0
    for r in rows[1:]:
        _, t = phase(lambda r=r: read(h, r))
        times.append(t["seconds"])
        cpu += t["cpu"]
        io += t["rchar"]
    k = max(1, len(times))
    say(
        {
            "phase": "later",
            "seconds": statistics.median(times) if times else 0.0,
            "cpu": cpu / k,
            "rchar": io // k,
            "peak_rss": peak_rss(),
            "versions": {"arrayds": arrayds.__version__},
        },
        wait=False,
    )
    return 0


def measure_once(
    ds: Dataset, python: Path | None, s3: dict[str, Any] | None, counters: Callable[[], dict]
) -> dict[str, Any]:
    """One fresh process measuring ``ds`` -> its phases, each with the counters read
    after it (the S3 proxy's requests and bytes; nothing locally)."""
    job = {
        "lib": ds.lib,
        "kind": ds.kind,
        "url": ds.url,
        "s3": s3 if ds.store == "s3" else None,
        "warm": ds.warm,
        "warm_s3": ds.warm_s3,
        "rows": ds.rows,
        "col": COL,
        "expect": float(COL) if ds.kind == "array" else RECORD.hex(),
    }
    if ds.lib == "arrayds":
        argv = [sys.executable, __file__, "--measure", json.dumps(job)]
    else:
        assert python is not None
        argv = [str(python), str(ANCHOR_SCRIPT), "measure", json.dumps(job)]
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        assert proc.stdin is not None and proc.stdout is not None
        result: dict[str, Any] = {}
        try:
            for line in proc.stdout:
                msg = json.loads(line)
                phase = msg.pop("phase")
                c = counters()  # what the proxy saw since the last line (and reset)
                if phase != "ready":
                    result[phase] = {**msg, **c}
                if phase == "later":
                    break
                proc.stdin.write(b"go\n")
                proc.stdin.flush()
        finally:
            proc.stdin.close()
            rc = proc.wait()
        if rc or "later" not in result:
            err.seek(0)
            raise RuntimeError(f"measuring {ds.lib} {ds.kind} {ds.url} failed:\n{err.read()}")
    return result


# ---- the run


def median_of(runs: list[dict[str, Any]], phase: str, key: str) -> float:
    return statistics.median(float(r[phase].get(key, 0)) for r in runs)


def fmt_ms(s: float) -> str:
    return f"{s * 1e3:,.1f} ms" if s >= 0.01 else f"{s * 1e3:.2f} ms"


def fmt_bytes(b: float) -> str:
    if b >= MiB:
        return f"{b / MiB:,.1f} MiB"
    if b >= 1024:
        return f"{b / 1024:,.1f} KiB"
    return f"{b:,.0f} B"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "n/a"


def table(title: str, datasets: list[Dataset], s3: bool) -> list[str]:
    got = "response bytes (proxy)" if s3 else "bytes read (rchar)"
    lines = [
        f"#### {title}",
        "",
        f"| shards | library | manifest bytes | open | first read | later reads (median) | "
        f"{got}: open + first read | "
        + ("requests: open + first read | " if s3 else "")
        + "peak RSS | CPU: open / first read |",
        "|---:|---|---:|---:|---:|---:|---:|" + ("---:|" if s3 else "") + "---:|---:|",
    ]
    for ds in datasets:
        r = ds.runs
        op, fr = median_of(r, "open", "seconds"), median_of(r, "first", "seconds")
        key = "bytes_down" if s3 else "rchar"
        read = median_of(r, "open", key) + median_of(r, "first", key)
        later = fmt_ms(median_of(r, "later", "seconds")) if len(ds.rows) > 1 else "-"
        req = ""
        if s3:
            req = (
                f"{median_of(r, 'open', 'requests'):.0f} + "
                f"{median_of(r, 'first', 'requests'):.0f} | "
            )
        lines.append(
            f"| {ds.n:,} | {ds.lib} | {fmt_bytes(ds.metadata_bytes)} | {fmt_ms(op)} | "
            f"{fmt_ms(fr)} | {later} | {fmt_bytes(read)} | "
            f"{req}{median_of(r, 'later', 'peak_rss') / MiB:,.0f} MiB | "
            f"{fmt_ms(median_of(r, 'open', 'cpu'))} / {fmt_ms(median_of(r, 'first', 'cpu'))} |"
        )
    lines.append("")
    return lines


def comparison(datasets: list[Dataset]) -> list[str]:
    """arrayds / anchor ratios of open and first read (wall and CPU) at each size."""
    by = {(d.lib, d.store, d.kind, d.n): d for d in datasets}
    lines = [
        "arrayds / anchor, same dataset shape, same run (wall; CPU in brackets):",
        "",
        "| store | kind | shards | anchor | open | first read |",
        "|---|---|---:|---|---:|---:|",
    ]
    for (lib, store, kind, n), ours in by.items():
        if lib != "arrayds" or n == 1:
            continue
        for anchor in ("zarr", "icechunk"):
            theirs = by.get((anchor, store, kind, n))
            if theirs is None:
                continue
            cells = []
            for phase in ("open", "first"):
                w = ratio(
                    median_of(ours.runs, phase, "seconds"), median_of(theirs.runs, phase, "seconds")
                )
                c = ratio(median_of(ours.runs, phase, "cpu"), median_of(theirs.runs, phase, "cpu"))
                cells.append(f"{w} ({c})")
            lines.append(f"| {store} | {kind} | {n:,} | {anchor} | {cells[0]} | {cells[1]} |")
    lines.append("")
    return lines


def targets(datasets: list[Dataset], largest: int) -> list[str]:
    """The targets at the largest local array, against today's figures."""
    by = {(d.lib, d.store, d.kind, d.n): d for d in datasets}
    big = by.get(("arrayds", "local", "array", largest))
    small = by.get(("arrayds", "local", "array", 10**3))
    one = by.get(("arrayds", "local", "array", 1))
    if big is None or small is None or one is None:
        return []
    op, fr = median_of(big.runs, "open", "seconds"), median_of(big.runs, "first", "seconds")
    got = median_of(big.runs, "open", "rchar") + median_of(big.runs, "first", "rchar")
    rss = median_of(big.runs, "later", "peak_rss") - median_of(one.runs, "later", "peak_rss")
    fr3 = median_of(small.runs, "first", "seconds")
    rows = [
        ("open <= 5 ms", fmt_ms(op), op <= 0.005),
        ("first read <= 2x the first read at 1,000", ratio(fr, fr3), fr <= 2 * fr3),
        ("bytes read by open + first read <= 1 MiB", fmt_bytes(got), got <= MiB),
        (
            "peak RSS <= 50 MiB above the one-shard array's",
            f"+{rss / MiB:,.0f} MiB",
            rss <= 50 * MiB,
        ),
    ]
    for anchor, limit, what in (
        ("zarr", 1.5, "within 1.5x of zarr's"),
        ("icechunk", 1.0, "ahead of icechunk's"),
    ):
        theirs = by.get((anchor, "local", "array", largest))
        if theirs is None:
            continue
        t_op = median_of(theirs.runs, "open", "seconds")
        t_fr = median_of(theirs.runs, "first", "seconds")
        rows.append(
            (
                f"open and first read {what}",
                f"{ratio(op, t_op)} / {ratio(fr, t_fr)}",
                op <= limit * t_op and fr <= limit * t_fr,
            )
        )
    lines = [
        f"Targets at {largest:,} shards (local disk), today:",
        "",
        "| target | today | met |",
        "|---|---:|---|",
    ]
    lines += [f"| {what} | {value} | {'yes' if ok else 'no'} |" for what, value, ok in rows]
    lines.append("")
    return lines


Key = tuple[str, str, int]  # (library, kind, shards); 0 shards: the warm-up dataset


def build_all(
    workdir: str, keys: set[Key], python: Path | None
) -> tuple[
    dict[Key, str], dict[Key, list[int]], dict[Key, tuple[int, list[str]]], dict[str, float]
]:
    """Build every dataset of ``keys`` under ``workdir`` (the anchors' in the anchor
    interpreter, beside arrayds' own) -> the folder, the rows read, (manifest bytes,
    objects the reads touch) of each, and the seconds the builds of each side took."""
    folder = {k: os.path.join(workdir, f"{k[0]}-{k[1]}-{k[2] or 'warm'}") for k in keys}
    rows = {k: pick_rows(max(1, k[2])) for k in keys}
    order = sorted(keys, key=lambda k: k[2])
    jobs = [
        {
            "lib": lib,
            "kind": kind,
            "n": max(1, n),
            "path": folder[lib, kind, n],
            "rows": rows[lib, kind, n],
            "record": RECORD.hex(),
        }  # fmt: skip
        for lib, kind, n in order
        if lib != "arrayds"
    ]
    pending = anchor_builds(python, jobs) if jobs and python is not None else None
    t0 = time.perf_counter()
    array_tpl = array_template(workdir)
    records_tpl = records_template(workdir)
    meta: dict[Key, tuple[int, list[str]]] = {}
    for key in order:
        lib, kind, n = key
        if lib == "arrayds":
            if kind == "array":
                build_array(folder[key], max(1, n), array_tpl)
            else:
                build_records(folder[key], max(1, n), records_tpl)
            meta[key] = arrayds_objects(folder[key], kind, rows[key])
    times = {"arrayds": time.perf_counter() - t0, "anchors": 0.0}
    if pending is not None:
        out, err = pending.communicate()
        if pending.returncode:
            raise RuntimeError(f"the anchor builds failed:\n{err}")
        anchor_keys = [k for k in order if k[0] != "arrayds"]
        for key, line in zip(anchor_keys, out.splitlines(), strict=True):
            res = json.loads(line)
            meta[key] = (res["metadata_bytes"], res["read_objects"])
            times["anchors"] += res["seconds"]
    return folder, rows, meta, times


def remove(workdir: str) -> None:
    """Remove ``workdir``, its dataset folders in parallel (millions of files: the
    unlinks wait on the disk, not on the CPU)."""
    from concurrent.futures import ThreadPoolExecutor

    folders = [os.path.join(workdir, f) for f in os.listdir(workdir)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda f: shutil.rmtree(f, ignore_errors=True), folders))
    shutil.rmtree(workdir, ignore_errors=True)


def upload(fs: Any, folder: str, objects: list[str], prefix: str) -> str:
    """Copy ``objects`` (keys relative to ``folder``) to ``prefix`` on S3 -> its URL."""
    for obj in objects:
        fs.put_file(os.path.join(folder, obj), f"{prefix}/{obj}")
    return f"s3://{prefix}"


def render(datasets: list[Dataset], args: argparse.Namespace, largest: int, tail: list[str]) -> str:
    versions = {"arrayds": arrayds.__version__}
    for ds in datasets:
        versions.update(ds.runs[0]["later"].get("versions", {}))
    lines = [
        "## Manifest scale",
        "",
        f"`python benchmarks/bench_manifest_scale.py{' --quick' if args.quick else ''}"
        f"{' --records-only' if args.records_only else ''} "
        f"--repeat={args.repeat}` - "
        + ", ".join(f"{k} {v}" for k, v in versions.items())
        + f"; {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()} (the anchors: their own Python 3.12); local disk with "
        f"the page cache hot; S3: moto behind a {args.latency_ms:g} ms proxy. Each figure "
        f"is the median of {args.repeat} fresh process(es).",
        "",
    ]
    for title, store, kind in (
        ("Arrays on local disk", "local", "array"),
        ("Records datasets on local disk", "local", "records"),
        (f"Arrays on S3 (moto, {args.latency_ms:g} ms per request)", "s3", "array"),
    ):
        chosen = [d for d in datasets if d.store == store and d.kind == kind]
        if chosen:
            lines += table(title, chosen, store == "s3")
    lines += comparison(datasets)
    lines += targets(datasets, largest)
    lines += tail
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="10^3 and 10^4 shards, S3 at 10^3")
    p.add_argument("--repeat", type=int, default=None, help="fresh processes per dataset (3)")
    p.add_argument("--latency-ms", type=float, default=5.0, help="added to every S3 request")
    p.add_argument("--no-s3", action="store_true", help="leave out the S3 rows")
    p.add_argument("--workdir", default=None, help="where the datasets are built (removed after)")
    p.add_argument("--records-only", action="store_true", help="only the records rows, no S3")
    p.add_argument("--measure", default=None, help=argparse.SUPPRESS)  # a measuring child
    args = p.parse_args(argv)
    if args.measure is not None:
        return child_main(json.loads(args.measure))
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.repeat < 1:
        p.error("--repeat must be at least 1")
    sizes = (10**3, 10**4) if args.quick else (10**3, 10**4, 10**5, 10**6)
    record_sizes = (10**4,) if args.quick else (10**6,)
    s3_sizes = () if args.no_s3 else ((10**3,) if args.quick else (10**5,))
    t_start = time.perf_counter()
    python = anchor_python()
    tail: list[str] = []
    if python is None:
        where = os.environ.get(ANCHOR_ENV) or DEFAULT_ANCHOR_PYTHON
        tail.append(
            f"Anchor rows (zarr, icechunk) skipped: no anchor interpreter at {where} "
            f"(set {ANCHOR_ENV} to a Python 3.12 with zarr==3.4.2 and icechunk==2.3.*)."
        )
    libs = LIBS if python is not None else ("arrayds",)
    if args.records_only:
        sizes, s3_sizes = (), ()
    keys = {(lib, "array", n) for lib in libs for n in (0, 1, *sizes, *s3_sizes)}
    if args.records_only:
        keys = set()
    keys |= {(lib, "records", n) for lib in libs for n in (0, 1, *record_sizes)}
    workdir = tempfile.mkdtemp(prefix="bench-manifest-scale-", dir=args.workdir)
    server = None
    try:
        t0 = time.perf_counter()
        folder, rows, meta, took = build_all(workdir, keys, python)
        build_s = time.perf_counter() - t0
        datasets = [
            Dataset(
                lib,
                kind,
                n,
                "local",
                folder[lib, kind, n],
                folder[lib, kind, 0],
                False,
                rows[lib, kind, n],
                meta[lib, kind, n][0],
            )  # fmt: skip
            for lib, kind, n in sorted(keys, key=lambda k: (k[1], k[2], LIBS.index(k[0])))
            if n and (kind == "records" or n in (1, *sizes))
        ]
        s3 = None
        if s3_sizes:
            import s3fs
            from s3server import ServerProcess

            server = ServerProcess(latency=args.latency_ms / 1000)
            direct = s3fs.S3FileSystem(**server.storage_options(through_proxy=False))
            direct.mkdir("bench")
            so = server.storage_options()
            s3 = {"endpoint_url": so["endpoint_url"], "key": so["key"], "secret": so["secret"]}
            for lib in libs:
                warm = (lib, "array", 0)
                warm_url = upload(direct, folder[warm], meta[warm][1], f"bench/{lib}-warm")
                for n in (1, *s3_sizes):
                    key = (lib, "array", n)
                    url = upload(direct, folder[key], meta[key][1], f"bench/{lib}-array-{n}")
                    datasets.append(
                        Dataset(
                            lib, "array", n, "s3", url, warm_url, True, rows[key], meta[key][0]
                        )  # fmt: skip
                    )
        datasets.sort(key=lambda d: (d.store, d.kind, d.n, LIBS.index(d.lib)))
        for _ in range(args.repeat):  # the datasets take turns
            for ds in datasets:
                counters = (lambda: server.stats(reset=True)) if ds.store == "s3" else dict
                ds.runs.append(measure_once(ds, python, s3, counters))
    finally:
        if server is not None:
            server.stop()
        t_rm = time.perf_counter()
        remove(workdir)
        rm_s = time.perf_counter() - t_rm
    tail.append(
        f"Build {build_s:.0f} s (arrayds {took['arrayds']:.0f} s; the anchors "
        f"{took['anchors']:.0f} s, beside it), clean-up "
        f"{rm_s:.0f} s, total run {time.perf_counter() - t_start:.0f} s."
    )
    sys.stdout.write(render(datasets, args, max(sizes, default=0), tail))
    return 0


if __name__ == "__main__":
    sys.exit(main())
