"""Object store reads: arrayds (fsspec and obstore backends) next to zarr-python 3.4
sharded (over fsspec and over obstore), icechunk 2.3 and TensorStore, side by side in
one run: same data, same S3 server, 5 ms added to every request.

    python benchmarks/bench_s3.py            # 4096 x 4096 float32, 256 chunks, 16 shards
    python benchmarks/bench_s3.py --quick    # 2048 x 2048 float32, 64 chunks, 4 shards
    python benchmarks/bench_s3.py --only-records   # only the records rows

Setup: moto's S3 server on 127.0.0.1 behind a small TCP proxy that sleeps 5 ms
before forwarding each HTTP request and counts requests and bytes, both in a separate
process (tests/s3/s3server.py), so every round trip costs what a nearby object store
costs and the server does not compete with the client for the GIL. The data is written
once (without the delay) as

* an arrayds array: chunks of 256 x 256 (256 KiB), ``zstd:3``, 16 chunks per shard;
* by the anchors themselves (benchmarks/anchors/s3_reads.py, in the anchor
  interpreter: ``ARRAYDS_ANCHOR_PYTHON``, default ``.venv-anchors/bin/python`` from
  ``make bench-anchors``, requirements/anchors.txt): a zarr v3 array with the same
  chunks inside 1024 x 1024 shards, codecs bytes + zstd(3) (zarr's sharding codec,
  index at the end of each shard), and the same array in an icechunk repository.

Readers: arrayds through fsspec (s3fs) and through obstore
(``storage_options={"backend": "obstore"}``), in this process; in the anchor
interpreter (benchmarks/anchor_runner.py), zarr-python through its fsspec store and
through ``zarr.storage.ObjectStore`` (obstore), icechunk (zarr over its session
store) and TensorStore (its zarr3 driver on its ``s3`` kvstore, default context: no
cache), the last two reading the same sharded layout. Without an anchor interpreter
the anchor rows are skipped (the output says so) and the arrayds rows still run.

Measured (best of --repeat runs, each with fresh readers: nothing cached between runs;
"CPU" is the reading process's CPU time in the best run, all threads, the server not
counted; "peak RSS" what the run added to that process's peak resident set, the
kernel's high-water mark reset before it; requests and bytes are the proxy's):

* **100 random chunks, cold** — open the array, then read 100 chunks chosen at
  random, one after another, each as its own ``a[r:r+256, c:c+256]``;
* **warm** — the same reads from an array that is already open and has read one
  element of every shard (whatever a library keeps between reads, it has);
* **16 threads, warm** — the same reads issued from 16 threads;
* **whole array through dask** — ``arrayds.from_arrayrecord(url).compute()``,
  ``dask.array.from_zarr(z).compute()`` (TensorStore: ``from_array`` over its reads):
  dask chunks = the stored chunks, threaded scheduler with 16 workers;
* **region through dask** — ``[n/4:3n/4, n/4:3n/4]`` of the same, crossing shards;
* **whole array, the library's own read** — ``a[...]`` (TensorStore ``read()``);
* the **transport limit** — every arrayds shard fetched whole, one ranged GET each,
  16 at a time (s3fs); the **region's transport limit** — the data GETs arrayds'
  region read made (recorded in one run of it: the manifest and the byte ranges of
  shards), replayed the same way; ``arrayds verify``, and the same passes on a local
  disk.

Where the CPU goes: for the transport limits and arrayds' dask reads, the CPU time of
the reading process and of the S3 server + proxy process (its process CPU clock), and
the share of the machine they kept busy, (client + server) / (cores x wall clock).

Targets: dask reads at least 90% of the transport limit and 1.5x the best
peer; 100 random chunks at least 1.5x the best peer. The last table says whether they
hold; ``--strict`` makes a miss the exit status 1.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "s3"))
sys.path.insert(0, str(HERE / "anchors"))

from anchor_runner import AnchorUnavailable, anchor_python, run_anchor  # noqa: E402
from harness import measure  # noqa: E402
from s3server import ServerProcess  # noqa: E402

import arrayds  # noqa: E402
from arrayds.nodes import shards as store_mod  # noqa: E402
from arrayds.storage import clear_store_cache  # noqa: E402
from arrayds.verify import verify  # noqa: E402

CHUNK = 256
SHARD_CHUNKS = 16  # chunks per shard: 1024 x 1024 shards
TARGET = 1.5  # arrayds / best peer, random chunks and dask reads
TRANSPORT_TARGET = 0.9

WORKLOADS = {  # key: (title, what it reads: "cells", "all" or "region")
    "cold": ("{n} random chunks, one after another, cold (open + index/footers)", "cells"),
    "warm": ("{n} random chunks, one after another, warm", "cells"),
    "threads": ("{n} random chunks, {t} threads, warm", "cells"),
    "dask": ("whole array through dask ({t} threads)", "all"),
    "region": ("region [{q}:{q3}, {q}:{q3}] through dask, crossing {s} shards", "region"),
    "whole": ("whole array, the library's own read (no dask)", "all"),
}
ANCHOR_READERS = {  # s3_reads.py reader -> row name (formatted with the versions)
    "zarr-fsspec": "zarr {zarr} sharded, fsspec",
    "zarr-obstore": "zarr {zarr} sharded, ObjectStore (obstore {obstore})",
    "icechunk": "icechunk {icechunk} (zarr {zarr}, sharded)",
    "tensorstore": "TensorStore {tensorstore} (zarr3, s3 kvstore)",
}
LAYOUT = {"icechunk": "icechunk"}  # whose stored bytes a reader reads (default: zarr's)


def make_data(n: int) -> np.ndarray:
    """Smooth fields plus noise: compresses about 1.3x with zstd, like real floats."""
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:n, 0:n].astype("f4") / n
    field = np.sin(6 * x) * np.cos(4 * y) + 0.1 * rng.standard_normal((n, n)).astype("f4")
    return np.round(field, 3).astype("f4")


def fresh_readers() -> None:
    """Forget arrayds' cached shard readers (footers) and stores: a cold reader.
    (fsspec's HTTP connection pool stays warm, as it does for the anchors.)"""
    store_mod.clear_reader_cache()
    clear_store_cache()


def write_arrayds(data: np.ndarray, so: dict, bucket: str) -> str:
    import dask.array as da

    url = f"s3://{bucket}/arrayds-{uuid.uuid4().hex[:8]}"
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(CHUNK, CHUNK)),
        url,
        compression="zstd:3",
        shard_size=SHARD_CHUNKS * CHUNK * CHUNK * data.dtype.itemsize,
        storage_options=so,
    )
    return url


def pick(n_chunks_side: int, count: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    flat = rng.choice(n_chunks_side * n_chunks_side, size=count, replace=False)
    return [(int(i) // n_chunks_side * CHUNK, int(i) % n_chunks_side * CHUNK) for i in flat]


def read_chunks(a, cells: list[tuple[int, int]], threads: int) -> list:
    """Each cell as its own ``a[r:r+CHUNK, c:c+CHUNK]``."""

    def one(rc: tuple[int, int]) -> np.ndarray:
        r, c = rc
        return a[r : r + CHUNK, c : c + CHUNK]

    if threads <= 1:
        return [one(rc) for rc in cells]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, cells))


def open_warm(url: str, so: dict) -> Any:
    """The arrayds array, every shard's footer already read (a process that has been
    reading for a while)."""
    a = arrayds.open_array(url, storage_options=so)
    for e in a.manifest.shards:
        r, c = e.start[0] * CHUNK, e.start[1] * CHUNK
        a[r : r + 1, c : c + 1]
    return a


def timed(fn: Callable[..., Any], repeat: int, server: ServerProcess, setup=None) -> dict[str, Any]:
    """The fastest of ``repeat`` runs of ``fn`` (given ``setup()``'s result when there
    is a setup; fresh readers before each): seconds, CPU, peak RSS and the proxy's
    counters of that run."""
    best: dict[str, Any] = {"seconds": float("inf")}
    for _ in range(repeat):
        fresh_readers()
        arg = setup() if setup is not None else None
        server.stats(reset=True)
        s0 = cpu_of(server.proc.pid)
        with measure() as m:
            fn() if setup is None else fn(arg)
        s1 = cpu_of(server.proc.pid)
        if m["seconds"] < best["seconds"]:
            best = {**m, "server_cpu": s1 - s0, **server.stats()}
    return best


def cpu_of(pid: int) -> float:
    """CPU seconds of process ``pid`` so far (all its threads, the ended ones included):
    its process CPU-time clock (Linux's ``clock_getcpuclockid``, nanoseconds), which
    Python does not expose: the clock id is ``~pid << 3 | CPUCLOCK_SCHED``."""
    return time.clock_gettime(~pid << 3 | 2)


def busy(m: dict[str, Any]) -> float:
    """The share of the machine a timed run kept busy: (this process's CPU + the S3
    server and proxy process's) / (cores x wall clock)."""
    return (m["cpu"] + m["server_cpu"]) / (_cores() * m["seconds"])


def measure_arrayds(
    url: str, so: dict, cells: list, data: np.ndarray, args, server: ServerProcess
) -> dict[str, dict[str, Any]]:
    """The six workloads for arrayds opened with ``so``; the reads are checked first."""
    import dask

    n, q = args.size, args.size // 4
    for x, (r, c) in zip(
        read_chunks(arrayds.open_array(url, storage_options=so), cells, 4), cells, strict=True
    ):
        np.testing.assert_array_equal(x, data[r : r + CHUNK, c : c + CHUNK])

    def cold() -> None:
        read_chunks(arrayds.open_array(url, storage_options=so), cells, 1)

    def through_dask(lo: int, hi: int) -> Callable[[], Any]:
        def run() -> None:
            with dask.config.set(scheduler="threads", num_workers=args.threads):
                x = arrayds.from_arrayrecord(url, storage_options=so)
                got = x[lo:hi, lo:hi].compute()
            assert got.shape == (hi - lo, hi - lo)

        return run

    fresh_readers()
    whole = arrayds.open_array(url, storage_options=so)[...]
    np.testing.assert_array_equal(whole, data)
    del whole
    fresh_readers()
    region = recorded_fetches(through_dask(q, 3 * q))
    return {
        "region limit": transport_limit(region, so, args.threads, args.repeat, server),
        "cold": timed(cold, args.repeat, server),
        "warm": timed(
            lambda a: read_chunks(a, cells, 1),
            args.repeat,
            server,
            setup=lambda: open_warm(url, so),
        ),
        "threads": timed(
            lambda a: read_chunks(a, cells, args.threads),
            args.repeat,
            server,
            setup=lambda: open_warm(url, so),
        ),
        "dask": timed(through_dask(0, n), args.repeat, server),
        "region": timed(through_dask(q, 3 * q), args.repeat, server),
        "whole": timed(
            lambda: arrayds.open_array(url, storage_options=so)[...], args.repeat, server
        ),
    }


def measure_anchors(
    job: dict[str, Any], readers: list[str], server: ServerProcess
) -> tuple[dict[str, dict[str, Any]], dict[str, str], str]:
    """Write the anchors' data, then each reader's workloads, in the anchor interpreter.
    Returns the rows by name (each reader's sections and ``stored``, the bytes of the
    chunk data it reads), the anchors' versions and a note (why they were skipped, or
    which interpreter ran them)."""
    try:
        python = anchor_python()
    except AnchorUnavailable as e:
        return {}, {}, f"anchor rows skipped: {e}"
    written = run_anchor("s3_reads", {**job, "mode": "write"}).info
    versions = written["versions"]
    rows = {}
    for reader in readers:
        got = run_anchor("s3_reads", {**job, "mode": "read", "reader": reader}, server.stats)
        stored = written["stored"][LAYOUT.get(reader, "zarr")]
        rows[ANCHOR_READERS[reader].format(**versions)] = {**got.sections, "stored": stored}
    return rows, versions, f"anchors run by {python} (Python {versions['python']})"


def transport_limit(
    fetches: list[tuple[str, int, int]], so: dict, threads: int, repeat: int, server
) -> dict:
    """Every ``(URL, begin, end)`` of ``fetches`` one ranged GET each, ``threads`` at a
    time, nothing decoded (s3fs, its connections warm as arrayds' are): the time a read
    that fetches those bytes cannot beat."""
    import s3fs

    fs = s3fs.S3FileSystem(**{k: v for k, v in so.items() if k != "backend"})
    total = sum(e - b for _, b, e in fetches)

    def run() -> None:
        with ThreadPoolExecutor(threads) as pool:
            got = pool.map(lambda f: len(fs.cat_file(f[0], start=f[1], end=f[2])), fetches)
            assert sum(got) == total

    return {**timed(run, repeat, server), "bytes": total, "gets": len(fetches)}


def shard_fetches(url: str, a) -> list[tuple[str, int, int]]:
    """Every shard of ``a`` (at ``url``) whole: one range each."""
    sizes = dict((f"{url}/{e.path}", e.bytes) for e in a.manifest.shards)
    return [(u, 0, n) for u, n in sizes.items()]


def recorded_fetches(fn: Callable[[], Any]) -> list[tuple[str, int, int]]:
    """The data GETs ``fn()`` makes through arrayds' stores, in the order they were
    asked for: ``(URL, begin, end)`` of every byte range (a whole object, such as a
    manifest, as the range of the bytes it held). Requests without data (HEAD, LIST)
    are not recorded."""
    from arrayds.storage.fsspec import FsspecStore
    from arrayds.storage.obstore import ObstoreStore

    got: list[tuple[str, int, int]] = []
    inside = threading.local()  # a get that calls another is recorded once

    def recording(name: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        def get(self, key: str, *rest: Any) -> Any:
            if getattr(inside, "on", False):
                return orig(self, key, *rest)
            inside.on = True
            try:
                data = orig(self, key, *rest)
            finally:
                inside.on = False
            if name == "get_range":
                spans = [(rest[0], rest[0] + len(data))]
            elif name == "get_ranges":
                spans = [(b, b + len(d)) for (b, _), d in zip(rest[0], data, strict=True)]
            else:  # get: bytes or None; get_versioned: (bytes or None, version)
                whole = data[0] if name == "get_versioned" else data
                spans = [(0, len(whole))] if whole is not None else []
            got.extend((self.url_of(key), b, e) for b, e in spans if e > b)
            return data

        return get

    saved = {}
    for cls in (FsspecStore, ObstoreStore):
        for name in ("get", "get_versioned", "get_range", "get_ranges"):
            saved[cls, name] = cls.__dict__.get(name)
            setattr(cls, name, recording(name, getattr(cls, name)))
    try:
        fn()
    finally:
        for (cls, name), orig in saved.items():
            if orig is None:
                delattr(cls, name)
            else:
                setattr(cls, name, orig)
    return got


_RSS_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[5])
import dask, arrayds
import numpy as np
from harness import measure
url, so, how, threads = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])
x = arrayds.from_arrayrecord(url, storage_options=so)
a = arrayds.open_array(url, storage_options=so)
with dask.config.set(scheduler="threads", num_workers=threads), measure() as m:
    if how == "store":
        got = np.empty(x.shape, x.dtype)
        x.store(got, lock=False)
    else:
        got = x.compute() if how == "dask" else a[...]
print(json.dumps({"added": m["rss_added"], "nbytes": got.nbytes}))
"""


RSS_READS = {
    "dask": "from_arrayrecord(url).compute()",
    "store": "from_arrayrecord(url).store(np.empty(...))",
    "whole": "a[...]",
}


def fresh_rss(url: str, so: dict, how: str, threads: int) -> dict[str, int]:
    """The peak RSS a whole-array read (``how``: "dask" for ``compute()``, "store" for
    ``store()`` into a preallocated array, or "whole" for ``a[...]``) adds to a fresh
    process (its resident set's high-water mark, reset before the read, over the
    resident set before it; the array already opened): {"added", "nbytes"}."""
    import json
    import subprocess

    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _RSS_SCRIPT,
            url,
            json.dumps(so),
            how,
            str(threads),
            str(HERE / "anchors"),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def local_passes(data: np.ndarray, threads: int, repeat: int, server) -> tuple[float, float]:
    """``arrayds verify`` and a dask read of the same array on a local disk (page cache
    hot): seconds of each."""
    import dask
    import dask.array as da

    local_dir = tempfile.mkdtemp(prefix="bench-s3-local-")
    try:
        local = os.path.join(local_dir, "a.ads")
        arrayds.to_arrayrecord(
            da.from_array(data, chunks=(CHUNK, CHUNK)),
            local,
            shard_size=SHARD_CHUNKS * CHUNK * CHUNK * data.dtype.itemsize,
        )
        verify(local)  # warm the page cache

        def read_local() -> None:
            with dask.config.set(scheduler="threads"):
                arrayds.from_arrayrecord(local).compute()

        t_v = timed(lambda: verify(local, threads=threads), repeat, server)["seconds"]
        return t_v, timed(read_local, repeat, server)["seconds"]
    finally:
        shutil.rmtree(local_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2048 x 2048, 4 shards")
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--latency-ms", type=float, default=5.0)
    p.add_argument("--reads", type=int, default=100)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument(
        "--anchors",
        default=",".join([*ANCHOR_READERS, "webdataset"]),
        help="anchor readers, comma-separated (none: '')",
    )
    p.add_argument(
        "--records", type=int, default=100_000, help="records of 1 KiB (0: no records rows)"
    )
    p.add_argument(
        "--record-batches",
        type=int,
        default=0,
        help="batches of 256 an epoch is measured over (0, the default: the whole epoch)",
    )
    p.add_argument(
        "--only-records", action="store_true", help="only the records rows (no array rows)"
    )
    p.add_argument(
        "--strict", action="store_true", help="exit 1 when a target against the peers is missed"
    )
    args = p.parse_args(argv)
    if args.quick:
        args.size, args.repeat, args.records = 2048, 2, 20_000
    if args.size % (4 * CHUNK):
        p.error(f"--size must be a multiple of {4 * CHUNK}")
    readers = [r for r in args.anchors.split(",") if r]
    unknown = sorted(set(readers) - {*ANCHOR_READERS, "webdataset"})
    if unknown:
        p.error(f"unknown anchor readers {unknown}; known: {', '.join(ANCHOR_READERS)}, webdataset")
    import s3fs

    t_start = time.perf_counter()
    server = ServerProcess(latency=args.latency_ms / 1000)  # its own process: no shared GIL
    work = tempfile.mkdtemp(prefix="bench-s3-")
    try:
        text, ok = ("", True) if args.only_records else run(args, readers, server, work, s3fs)
        if args.records:
            more, more_ok = run_records(args, "webdataset" in readers, server, work, s3fs)
            text, ok = text + "\n" + more, ok and more_ok
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    sys.stdout.write(text + f"\ntotal {time.perf_counter() - t_start:.0f} s\n")
    return 0 if ok or not args.strict else 1


def run(args, readers: list[str], server: ServerProcess, work: str, s3fs) -> tuple[str, bool]:
    direct = server.storage_options(through_proxy=False)
    slow = server.storage_options()
    bucket = "bench"
    s3fs.S3FileSystem(**direct).mkdir(bucket)
    data = make_data(args.size)
    side = args.size // CHUNK
    q = args.size // 4
    cells = pick(side, min(args.reads, side * side), seed=1)
    url = write_arrayds(data, direct, bucket)
    a = arrayds.open_array(url, storage_options=direct)
    stored = a.stored_bytes or 0
    touched = sum(_meets(e, q, 3 * q) for e in a.manifest.shards)
    share = {  # the share of the array's chunks a workload reads
        "cells": len(cells) / (side * side),
        "all": 1.0,
        "region": (2 * q // CHUNK) ** 2 / (side * side),
    }
    rows: dict[str, dict[str, Any]] = {
        "arrayds, fsspec": {
            **measure_arrayds(url, slow, cells, data, args, server),
            "stored": stored,
        },
        "arrayds, obstore": {
            **measure_arrayds(url, {**slow, "backend": "obstore"}, cells, data, args, server),
            "stored": stored,
        },
    }
    np.save(os.path.join(work, "data.npy"), data)
    job = {
        "data": os.path.join(work, "data.npy"),
        "bucket": bucket,
        "zarr_path": f"zarr-{uuid.uuid4().hex[:8]}.zarr",
        "icechunk_path": f"icechunk-{uuid.uuid4().hex[:8]}",
        "direct": direct,
        "proxy": slow,
        "chunk": CHUNK,
        "shard": CHUNK * int(SHARD_CHUNKS**0.5),
        "level": 3,
        "cells": [list(rc) for rc in cells],
        "threads": args.threads,
        "repeat": args.repeat,
        "region": [q, 3 * q],
    }
    array_readers = [r for r in readers if r in ANCHOR_READERS]
    anchor_rows, versions, note = (
        measure_anchors(job, array_readers, server)
        if array_readers
        else (
            {},
            {},
            "anchor rows skipped: --anchors ''",
        )
    )
    rows.update(anchor_rows)
    tl = transport_limit(shard_fetches(url, a), slow, args.threads, args.repeat, server)
    t_v = timed(
        lambda: verify(url, storage_options=slow, threads=args.threads), args.repeat, server
    )
    report = verify(url, storage_options=direct)
    assert report.ok, report.problems
    t_vl, t_rl = local_passes(data, args.threads, args.repeat, server)
    fresh = {
        (name, how): fresh_rss(url, so, how, args.threads)
        for name, so in (("fsspec", slow), ("obstore", {**slow, "backend": "obstore"}))
        for how in ("dask", "store", "whole")
    }
    anchor_versions = ", ".join(f"{k} {v}" for k, v in versions.items() if k != "python")
    out = [
        f"## Object store reads (S3 on loopback, {args.latency_ms:g} ms per request)",
        "",
        f"{args.size} x {args.size} float32, chunks {CHUNK} x {CHUNK} ({side * side} chunks), "
        f"{SHARD_CHUNKS} chunks per shard ({len(a.manifest.shards)} shards), zstd level 3 in "
        f"all; moto {_version('moto')}; arrayds side: Python "
        f"{platform.python_version()}, s3fs {_version('s3fs')}, obstore {_version('obstore')}, "
        f"dask {_version('dask')}; anchors: {anchor_versions or '-'}; {note}; "
        f"{platform.machine()}, {_cores()} cores; best of {args.repeat}, cold readers.",
        "",
    ]
    verdicts = []
    n = len(cells)
    for key, (title, need) in WORKLOADS.items():
        title = title.format(n=n, t=args.threads, q=q, q3=3 * q, s=touched)
        out += [
            f"### {title}",
            "",
            "| reader | time | MB/s | of transport limit | requests | fetched / needed | CPU "
            "| peak RSS added | this / best arrayds: wall | CPU |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        ads = [r[key] for name, r in rows.items() if name.startswith("arrayds")]
        best_t = min(r["seconds"] for r in ads)
        best_c = min(r["cpu"] for r in ads)
        for name, r in rows.items():
            m = r.get(key)
            if m is None:
                continue
            t = m["seconds"]
            rss = f"{m['rss_added'] / 1e6:.0f} MB" if m.get("rss_added") is not None else "-"
            limit = "-" if need == "cells" else f"{share[need] * tl['seconds'] / t:.0%}"
            if need == "region" and "region limit" in r:
                limit = f"{r['region limit']['seconds'] / t:.0%} (scaled: {limit})"
            fetched = m["bytes_down"] / (share[need] * r["stored"])
            out.append(
                f"| {name} | {t * 1000:.0f} ms | {share[need] * data.nbytes / 1e6 / t:.0f} "
                f"| {limit} | {m['requests']} | {fetched:.2f} | {m['cpu'] * 1000:.0f} ms "
                f"| {rss} | {t / best_t:.2f}x | {m['cpu'] / best_c:.2f}x |"
            )
        peers = {k: r[key] for k, r in rows.items() if not k.startswith("arrayds") and key in r}
        if peers and key != "whole":
            peer = min(peers, key=lambda k: peers[k]["seconds"])
            verdicts.append(
                (
                    title.split(" (")[0],
                    peer,
                    peers[peer]["seconds"] / best_t,
                    peers[peer]["cpu"] / best_c,
                )
            )
        out.append("")
    out += [
        "| whole-array pass (arrayds, fsspec) | time | requests | MB/s (stored bytes) |",
        "|---|---:|---:|---:|",
        f"| transport limit: every shard whole, one ranged GET each ({args.threads} at a time; "
        f"CPU {tl['cpu'] * 1000:.0f} ms) | {tl['seconds'] * 1000:.0f} ms | {tl['requests']} "
        f"| {tl['bytes'] / 1e6 / tl['seconds']:.0f} |",
        f"| `arrayds verify` (every checksum, {args.threads} shards at a time) | "
        f"{t_v['seconds'] * 1000:.0f} ms | {t_v['requests']} | "
        f"{stored / 1e6 / t_v['seconds']:.0f} |",
        f"| local disk: `arrayds verify` | {t_vl * 1000:.0f} ms | - | {stored / 1e6 / t_vl:.0f} |",
        f"| local disk: `from_arrayrecord(path).compute()` | {t_rl * 1000:.0f} ms | - | "
        f"{stored / 1e6 / t_rl:.0f} |",
        "",
        *saturation(rows, tl, args.threads),
        "| peak RSS a whole-array read adds to a fresh process (target <= 1.5x the array) "
        "| added | / array |",
        "|---|---:|---:|",
        *(
            f"| arrayds, {name}: {RSS_READS[how]} | {r['added'] / 1e6:.0f} MB "
            f"| {r['added'] / r['nbytes']:.2f}x |"
            for (name, how), r in fresh.items()
        ),
        "",
        f"Requests target: whole array <= "
        f"{1.2 * (tl['gets'] + tl['bytes'] / (8 << 20)):.0f}, region <= "
        f"{2 * touched + share['region'] * stored / (8 << 20):.0f}. "
        f"MB/s are array bytes read per second (the array is {data.nbytes / 1e6:.0f} MB); "
        "of transport limit: the time of the transport limit, scaled to the share of the "
        f"array read, over the read's (target for the dask reads: >= {TRANSPORT_TARGET:.0%}); "
        "for arrayds' region, the time of its own GETs replayed (the CPU table) over the "
        "read's, and the scaled figure in brackets; "
        "fetched / needed: the bytes the proxy sent (metadata "
        "included) over the reader's stored chunk bytes that the workload reads (stored: "
        + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in stored_by_layout(rows).items())
        + "); peak RSS added: over the reading process's resident set before the run.",
        "",
    ]
    ok = True
    if verdicts:
        out += [
            "| workload | best peer | best peer / best arrayds: wall (target >= "
            f"{TARGET:g}x) | CPU |",
            "|---|---|---:|---:|",
        ]
        for label, peer, ratio, cpu_ratio in verdicts:
            ok &= ratio >= TARGET
            out.append(f"| {label} | {peer} | **{ratio:.2f}x** | {cpu_ratio:.2f}x |")
        out.append("")
    return "\n".join(out), ok


RECORD = 1024  # bytes per record
RECORD_BATCH = 256
RECORD_SHARDS = 16
BLOCK_SIZE, WINDOW_BLOCKS = 256, 8  # the block shuffle (docs/records.md's example)
BIG_BLOCK, BIG_WINDOW = 2048, 4  # blocks of 2 MiB: a request per block costs little
ONE_BY_ONE = 256  # records read one request each
PER_RECORD = 2048  # records of the fully shuffled epoch read with one request per record


def run_records(args, webdataset: bool, server: ServerProcess, work: str, s3fs) -> tuple[str, bool]:
    """The records rows: arrayds' data source (fsspec and obstore) and webdataset on the
    same records in the same bucket, through the same proxy."""
    from arrayds import records
    from arrayds.files.data_source import KEEP_BYTES, READAHEAD_BYTES
    from arrayds.sampler import BlockShuffleSampler
    from arrayds.storage.coalesce import coalescing

    direct = server.storage_options(through_proxy=False)
    slow = server.storage_options()
    n = args.records
    data = np.random.default_rng(3).integers(0, 64, (n, RECORD), dtype=np.uint8)
    fs = s3fs.S3FileSystem(**direct)
    if not fs.exists("bench"):  # --only-records: no array rows made it
        fs.mkdir("bench")
    url = f"s3://bench/records-{uuid.uuid4().hex[:8]}"
    records.write_records(
        [row.tobytes() for row in data], url, num_shards=RECORD_SHARDS, storage_options=direct
    )
    stored = fs.du(url[len("s3://") :])
    limit = min(args.record_batches * RECORD_BATCH or n, n)
    full = np.random.default_rng(0).permutation(n)
    # key: (label, order, records read, read-ahead in batches (None: the default), gap,
    # keep_bytes (None: the default))
    block_order = BlockShuffleSampler(n, BLOCK_SIZE, WINDOW_BLOCKS, seed=0).epoch_order(0)
    block = f"block-shuffled epoch (blocks of {BLOCK_SIZE}, windows of {WINDOW_BLOCKS} blocks)"
    workloads: dict[str, tuple[str, np.ndarray, int, int | None, int | None, int | None]] = {
        "scan": ("sequential scan", np.arange(n), limit, None, None, None),
        "block": (block, block_order, limit, None, None, None),
        "block alone": (
            block + ", nothing read along (`keep_bytes=0`)",
            block_order,
            limit,
            None,
            None,
            0,
        ),
        "big block": (
            f"block-shuffled epoch (blocks of {BIG_BLOCK}, windows of {BIG_WINDOW} blocks)",
            BlockShuffleSampler(n, BIG_BLOCK, BIG_WINDOW, seed=0).epoch_order(0),
            limit,
            None,
            None,
            None,
        ),
        "full": ("fully shuffled epoch", full, limit, None, None, None),
        "full 8": ("fully shuffled epoch, 8 batches ahead", full, limit, 8, None, None),
        "full gap 0": (
            "fully shuffled, one request per record (gap 0; first "
            f"{min(PER_RECORD, limit):,} records)",
            full,
            min(PER_RECORD, limit),
            None,
            0,
            None,
        ),
    }

    def epoch(so: dict, order: np.ndarray, count: int, ahead: int | None, keep: int | None):
        src = records.data_source(url, storage_options=so)
        batches = src.batches(order[:count], RECORD_BATCH, readahead=ahead, keep_bytes=keep)
        for i, got in zip(range(0, count, RECORD_BATCH), batches, strict=True):
            last = order[min(i + RECORD_BATCH, count) - 1]
            assert len(got) == min(RECORD_BATCH, count - i) and got[-1] == data[last].tobytes()

    def run_epoch(so: dict, order, count: int, ahead, gap: int | None, keep: int | None):
        if gap is None:
            epoch(so, order, count, ahead, keep)
            return
        with coalescing(gap=gap):
            epoch(so, order, count, ahead, keep)

    one_by_one = np.random.default_rng(1).permutation(n)[:ONE_BY_ONE]

    def singles(so: dict) -> None:
        src = records.data_source(url, storage_options=so)
        for i in one_by_one:
            assert src[int(i)] == data[i].tobytes()

    rows: list[tuple[str, str, str, int, dict[str, Any], int]] = []  # reader, key, label, ...
    backends = (("arrayds, fsspec", slow), ("arrayds, obstore", {**slow, "backend": "obstore"}))
    for name, so in backends:
        for key, (label, order, count, ahead, gap, keep) in workloads.items():
            m = timed(
                lambda so=so, o=order, c=count, a=ahead, g=gap, k=keep: run_epoch(
                    so, o, c, a, g, k
                ),
                args.repeat,
                server,
            )
            rows.append((name, key, label, count, m, stored))
        m = timed(lambda so=so: singles(so), args.repeat, server)
        label = f"one record per request ({ONE_BY_ONE} at random)"
        rows.append((name, "singles", label, ONE_BY_ONE, m, stored))
    note = ""
    if webdataset:
        np.save(os.path.join(work, "records.npy"), data)
        job = {
            "data": os.path.join(work, "records.npy"),
            "bucket": "bench",
            "path": f"wds-{uuid.uuid4().hex[:8]}",
            "shards": RECORD_SHARDS,
            "direct": direct,
            "proxy": slow,
            "batch": RECORD_BATCH,
            "batches": args.record_batches or None,
            "window": BLOCK_SIZE * WINDOW_BLOCKS,
            "repeat": args.repeat,
        }
        try:
            written = run_anchor("records_s3", {**job, "mode": "write"})
        except AnchorUnavailable as e:
            note = f" webdataset rows skipped: {e}."
        else:
            got = run_anchor("records_s3", {**job, "mode": "read"}, server.stats)
            wds = f"webdataset {written.info['versions']['webdataset']}"
            note = f" {wds}: {RECORD_SHARDS} tar shards, {written.info['stored'] / 1e6:.1f} MB."
            shuffle = f"shard shuffle + a shuffle buffer of {BLOCK_SIZE * WINDOW_BLOCKS} records"
            for key, label in (("scan", "sequential scan"), ("shuffle", shuffle)):
                rows.append((wds, key, label, limit, got.sections[key], written.info["stored"]))
    span = "whole epochs" if limit >= n else f"the first {limit:,} records of each epoch"
    out = [
        f"### Records: {n:,} records of {RECORD} B in {RECORD_SHARDS} shards, batches of "
        f"{RECORD_BATCH}",
        "",
        f"Measured over {span} (unless the row says otherwise); arrayds: "
        f"`records.data_source(url).batches(order, {RECORD_BATCH})` (reading ahead about "
        f"{READAHEAD_BYTES >> 20} MiB of stored records and keeping up to "
        f"{KEEP_BYTES >> 20} MiB of records read along for later groups, unless the row "
        "says otherwise), "
        f"{stored / 1e6:.1f} MB stored.{note}",
        "",
        "| reader | workload | records/s | requests | fetched / needed | CPU | peak RSS added |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    rate = {}
    for name, key, label, count, m, st in rows:
        rate[name, key] = count / m["seconds"]
        rss = f"{m['rss_added'] / 1e6:.0f} MB" if m.get("rss_added") is not None else "-"
        out.append(
            f"| {name} | {label} | {count / m['seconds']:,.0f} | {m['requests']} "
            f"| {m['bytes_down'] / (st * count / n):.2f} | {m['cpu'] * 1000:.0f} ms | {rss} |"
        )
    out.append("")
    ok = True
    for name, _ in backends:
        block = rate[name, "block"] / rate[name, "scan"]
        alone = rate[name, "block alone"] / rate[name, "scan"]
        big = rate[name, "big block"] / rate[name, "scan"]
        vs_one = rate[name, "full"] / rate[name, "singles"]
        vs_gap0 = rate[name, "full"] / rate[name, "full gap 0"]
        ok &= block >= 0.8 and vs_one >= 10
        out.append(
            f"{name}: block-shuffled / sequential **{block:.0%}** with blocks of {BLOCK_SIZE} "
            f"({alone:.0%} reading nothing along), **{big:.0%}** with blocks of {BIG_BLOCK} "
            "(target >= 80%); fully shuffled / one "
            f"record per request **{vs_one:.1f}x** (target >= 10x); fully shuffled / the "
            f"same with gap 0 **{vs_gap0:.1f}x**."
        )
    wds_rates = [r for (name, _), r in rate.items() if name.startswith("webdataset")]
    if wds_rates:
        best = max(rate[name, "full"] for name, _ in backends)
        ok &= best >= max(wds_rates)
        out.append(
            f"Fully shuffled arrayds / the best webdataset row: **{best / max(wds_rates):.2f}x** "
            "(target: ahead)."
        )
    out.append("")
    return "\n".join(out), ok


def saturation(rows: dict[str, dict[str, Any]], tl: dict[str, Any], threads: int) -> list[str]:
    """The table of where the CPU went in the transport limits and arrayds' dask reads:
    the reading process's CPU, the S3 server and proxy process's, and the share of the
    machine they kept busy (:func:`busy`)."""
    out = [
        f"| pass ({threads} threads) | time | requests | CPU: client | S3 server + proxy "
        f"| busy: (client + server) / ({_cores()} cores x time) |",
        "|---|---:|---:|---:|---:|---:|",
    ]

    def row(label: str, m: dict[str, Any]) -> str:
        return (
            f"| {label} | {m['seconds'] * 1000:.0f} ms | {m['requests']} | "
            f"{m['cpu'] * 1000:.0f} ms | {m['server_cpu'] * 1000:.0f} ms | {busy(m):.0%} |"
        )

    out.append(row(f"transport limit: every shard whole ({tl['gets']} GETs)", tl))
    for name, r in rows.items():
        if not name.startswith("arrayds"):
            continue
        lim = r["region limit"]
        out += [
            row(f"{name}: whole array through dask", r["dask"]),
            row(f"{name}: region through dask", r["region"]),
            row(f"{name}: the region's {lim['gets']} data GETs replayed, nothing decoded", lim),
        ]
    return [*out, ""]


def stored_by_layout(rows: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Each distinct stored size and the first row that has it (arrayds, zarr, icechunk)."""
    out: dict[str, int] = {}
    for name, r in rows.items():
        if r["stored"] not in out.values():
            out[name.split(",")[0].split(" (")[0]] = r["stored"]
    return out


def _meets(entry, lo: int, hi: int) -> bool:
    """Whether a shard entry's box of chunks meets the square [lo, hi) of elements."""
    box = zip(entry.start, entry.stop, strict=True)
    return all(b * CHUNK < hi and e * CHUNK > lo for b, e in box)


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:  # pragma: no cover
        return "?"


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
