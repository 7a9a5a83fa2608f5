"""Object store reads: arrayds next to zarr-python 3 (sharded, same codec), same data,
same S3 server, 5 ms added to every request.

    python benchmarks/bench_s3.py            # 4096 x 4096 float32, 256 chunks, 16 shards
    python benchmarks/bench_s3.py --quick    # 2048 x 2048 float32, 64 chunks, 4 shards

Setup: moto's S3 server on 127.0.0.1 behind a small TCP proxy that sleeps 5 ms
before forwarding each HTTP request, both in a separate process
(tests/s3/s3server.py), so every round trip costs what a nearby object store costs
and the server does not compete with the client for the GIL. The data is written once (without
the delay) as

* an arrayds array: chunks of 256 x 256 (256 KiB), ``zstd:3``, 16 chunks per shard;
* a zarr v3 array: the same chunks inside 1024 x 1024 shards, codecs bytes + zstd(3)
  (zarr's sharding codec, index at the end of each shard).

Measured (best of --repeat runs, each with fresh readers: nothing cached between runs;
"CPU" is this process's CPU time in the best run, all threads, the server not counted):

* **100 random chunks, one after another, cold** — open the array, then read 100
  chunks chosen at random, each as its own ``a[r:r+256, c:c+256]``. arrayds fetches
  each shard's footer once (one ranged GET: the manifest records the shard's size, so
  no HEAD; once the reads have opened two shards, the other footers are fetched in
  the background, 8 at a time), then one ranged GET per chunk; zarr fetches the
  shard index for every chunk (two GETs per chunk).
* **warm** — the same reads from an array that is already open and, for arrayds,
  has read each shard's footer before (the steady state of a training loop or a
  service; zarr keeps no shard index between reads, so it has nothing to warm).
* **16 threads, warm** — the same reads issued from 16 threads.
* **verify vs read-all** — ``arrayds verify`` (every checksum of every shard, 16
  shards at a time) against reading every chunk through
  ``arrayds.from_arrayrecord(url).compute()``: MB/s of stored bytes.

Target: arrayds / zarr >= 2x for the random chunk reads (steady state; the cold row
shows what opening the footers costs).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "s3"))

from s3server import ServerProcess  # noqa: E402

import arrayds  # noqa: E402
from arrayds.nodes import shards as store_mod
from arrayds.storage import clear_store_cache  # noqa: E402
from arrayds.verify import verify  # noqa: E402

CHUNK = 256
TARGET = 2.0


def make_data(n: int) -> np.ndarray:
    """Smooth fields plus noise: compresses about 1.3x with zstd, like real floats."""
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:n, 0:n].astype("f4") / n
    field = np.sin(6 * x) * np.cos(4 * y) + 0.1 * rng.standard_normal((n, n)).astype("f4")
    return np.round(field, 3).astype("f4")


def fresh_s3fs() -> None:
    """Forget arrayds' cached shard readers (footers) and stores: a cold reader.
    (The HTTP connection pool stays warm, for both libraries.)"""
    store_mod.clear_reader_cache()
    clear_store_cache()


def write_both(data: np.ndarray, so: dict, bucket: str, chunks_per_shard: int) -> tuple[str, str]:
    import dask.array as da
    import zarr
    from zarr.codecs import BytesCodec, ZstdCodec

    run = uuid.uuid4().hex[:8]
    ads = f"s3://{bucket}/arrayds-{run}"
    zurl = f"s3://{bucket}/zarr-{run}.zarr"
    shard_bytes = chunks_per_shard * CHUNK * CHUNK * data.dtype.itemsize
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(CHUNK, CHUNK)),
        ads,
        compression="zstd:3",
        shard_size=shard_bytes,
        storage_options=so,
    )
    side = int(round(chunks_per_shard**0.5)) * CHUNK
    z = zarr.create_array(
        zurl,
        shape=data.shape,
        dtype=data.dtype,
        chunks=(CHUNK, CHUNK),
        shards=(side, side),
        serializer=BytesCodec(),
        compressors=ZstdCodec(level=3),
        storage_options=so,
        zarr_format=3,
    )
    z[:] = data
    return ads, zurl


def pick(n_chunks_side: int, count: int, seed: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    flat = rng.choice(n_chunks_side * n_chunks_side, size=count, replace=False)
    return [(int(i) // n_chunks_side * CHUNK, int(i) % n_chunks_side * CHUNK) for i in flat]


def read_chunks(a, cells: list[tuple[int, int]], threads: int) -> list:
    """Each cell as its own ``a[r:r+CHUNK, c:c+CHUNK]`` (zarr or arrayds array)."""

    def one(rc: tuple[int, int]) -> np.ndarray:
        r, c = rc
        return a[r : r + CHUNK, c : c + CHUNK]

    if threads <= 1:
        return [one(rc) for rc in cells]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, cells))


def open_arrayds(url: str, so: dict, warm: bool, side: int) -> object:
    """Open the arrayds array; ``warm``: every shard's footer already cached (a
    process that has been reading for a while)."""
    a = arrayds.open_array(url, storage_options=so)
    if warm:
        for e in a.manifest.shards:
            r, c = e.start[0] * CHUNK, e.start[1] * CHUNK
            a[r : r + 1, c : c + 1]
    return a


def open_zarr(url: str, so: dict, warm: bool, side: int) -> object:
    """Open the zarr array (zarr keeps no shard index between reads: nothing to warm)."""
    import zarr

    return zarr.open_array(url, mode="r", storage_options=so)


def timed(fn, repeat: int, server: ServerProcess, setup=None) -> tuple[float, dict]:
    best, stats = float("inf"), {}
    for _ in range(repeat):
        fresh_s3fs()
        arg = setup() if setup is not None else None
        server.stats(reset=True)
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn() if setup is None else fn(arg)
        dt = time.perf_counter() - t0
        cpu = time.process_time() - c0
        if dt < best:
            best, stats = dt, {**server.stats(), "cpu": cpu}
    return best, stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2048 x 2048, 4 shards")
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--latency-ms", type=float, default=5.0)
    p.add_argument("--reads", type=int, default=100)
    p.add_argument("--threads", type=int, default=16)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    if args.quick:
        args.size, args.repeat = 2048, 2
    try:
        import s3fs
        import zarr
    except ImportError as e:  # pragma: no cover
        sys.stderr.write(f"bench_s3 needs s3fs, moto[server] and zarr>=3: {e}\n")
        return 1
    t_start = time.perf_counter()
    server = ServerProcess(latency=args.latency_ms / 1000)  # its own process: no shared GIL
    direct = server.storage_options(through_proxy=False)
    slow = server.storage_options()
    bucket = "bench"
    s3fs.S3FileSystem(**direct).mkdir(bucket)
    data = make_data(args.size)
    side = args.size // CHUNK
    ads, zurl = write_both(data, direct, bucket, 16)
    cells = pick(side, min(args.reads, side * side), seed=1)
    # correctness first: both return the same chunks
    fresh_s3fs()
    for x, y, (r, c) in zip(
        read_chunks(open_arrayds(ads, slow, False, side), cells[:5], 1),
        read_chunks(open_zarr(zurl, slow, False, side), cells[:5], 1),
        cells[:5],
        strict=True,
    ):
        np.testing.assert_array_equal(x, data[r : r + CHUNK, c : c + CHUNK])
        np.testing.assert_array_equal(y, x)
    rows = []
    n = len(cells)
    for label, threads, warm in (
        (f"{n} random chunks, one after another, cold (open + footers)", 1, False),
        (f"{n} random chunks, one after another, warm (footers cached)", 1, True),
        (f"{n} random chunks, {args.threads} threads, warm", args.threads, True),
    ):
        if warm:
            t_a, s_a = timed(
                lambda a, t=threads: read_chunks(a, cells, t),
                args.repeat,
                server,
                setup=lambda: open_arrayds(ads, slow, True, side),
            )
            t_z, s_z = timed(
                lambda z, t=threads: read_chunks(z, cells, t),
                args.repeat,
                server,
                setup=lambda: open_zarr(zurl, slow, True, side),
            )
        else:
            t_a, s_a = timed(
                lambda t=threads: read_chunks(open_arrayds(ads, slow, False, side), cells, t),
                args.repeat,
                server,
            )
            t_z, s_z = timed(
                lambda t=threads: read_chunks(open_zarr(zurl, slow, False, side), cells, t),
                args.repeat,
                server,
            )
        rows.append((label, t_a, s_a, t_z, s_z))
    # verify vs reading every chunk
    a = arrayds.open_array(ads, storage_options=direct)
    stored = a.stored_bytes or 0
    t_v, s_v = timed(
        lambda: verify(ads, storage_options=slow, threads=args.threads),
        args.repeat,
        server,
    )

    def read_all() -> None:
        import dask

        with dask.config.set(scheduler="threads", num_workers=args.threads):
            arrayds.from_arrayrecord(ads, storage_options=slow).compute()

    t_r, s_r = timed(read_all, args.repeat, server)
    peak = peak_rss_of_read(ads, slow, args.threads)
    # a region through dask: rows and columns [n/4, 3n/4), a quarter of the array
    q = args.size // 4

    def read_region() -> None:
        import dask

        with dask.config.set(scheduler="threads", num_workers=args.threads):
            x = arrayds.from_arrayrecord(ads, storage_options=slow)
            x[q : 3 * q, q : 3 * q].compute()

    t_g, s_g = timed(read_region, args.repeat, server)
    touched = {e.path for e in a.manifest.shards if _meets(e, q, 3 * q)}
    region_chunks = (2 * q // CHUNK) ** 2
    needed_g = stored * region_chunks / (side * side)  # the touched chunks' stored bytes
    # the transport limit: every shard whole, one ranged GET each, same concurrency
    shard_keys = [(f"{ads[len('s3://') :]}/{e.path}", e.bytes) for e in a.manifest.shards]
    shard_keys = list(dict(shard_keys).items())
    shard_bytes = sum(size for _, size in shard_keys)

    fs = s3fs.S3FileSystem(**slow)  # its connections stay warm, as arrayds' do

    def transport() -> None:
        with ThreadPoolExecutor(args.threads) as pool:
            got = list(pool.map(lambda k: fs.cat_file(k[0], start=0, end=k[1]), shard_keys))
        assert sum(map(len, got)) == shard_bytes

    t_t, s_t = timed(transport, args.repeat, server)
    report = verify(ads, storage_options=direct)
    assert report.ok, report.problems
    # the same passes on a local disk (page cache hot), for scale
    import dask.array as da

    local_dir = tempfile.mkdtemp(prefix="bench-s3-local-")
    try:
        local = os.path.join(local_dir, "a.ads")
        arrayds.to_arrayrecord(
            da.from_array(data, chunks=(CHUNK, CHUNK)),
            local,
            shard_size=16 * CHUNK * CHUNK * data.dtype.itemsize,
        )
        verify(local)  # warm the page cache
        t_vl, _ = timed(lambda: verify(local, threads=args.threads), args.repeat, server)

        def read_local() -> None:
            import dask

            with dask.config.set(scheduler="threads"):
                arrayds.from_arrayrecord(local).compute()

        t_rl, _ = timed(read_local, args.repeat, server)
    finally:
        shutil.rmtree(local_dir, ignore_errors=True)
    out = [
        f"## Object store reads (S3 on loopback, {args.latency_ms:g} ms per request)",
        "",
        f"{args.size} x {args.size} float32, chunks {CHUNK} x {CHUNK} ({side * side} chunks), "
        f"16 chunks per shard ({side * side // 16} shards), zstd level 3 in both; moto "
        f"{_version('moto')}, s3fs {_version('s3fs')}, zarr {zarr.__version__}; "
        f"{platform.machine()}, {_cores()} cores; best of {args.repeat}, cold readers.",
        "",
        "| workload | arrayds | requests | zarr 3 sharded | requests | arrayds / zarr "
        "| CPU: arrayds | zarr | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    missed = False
    for label, t_a, s_a, t_z, s_z in rows:
        ratio = t_z / t_a
        if "warm" in label:
            missed |= ratio < TARGET
        out.append(
            f"| {label} | {t_a * 1000:.0f} ms | {s_a['requests']} | {t_z * 1000:.0f} ms | "
            f"{s_z['requests']} | **{ratio:.1f}x** | {s_a['cpu'] * 1000:.0f} ms | "
            f"{s_z['cpu'] * 1000:.0f} ms | {s_z['cpu'] / max(s_a['cpu'], 1e-9):.1f}x |"
        )
    mb = stored / 1e6
    out += [
        "",
        "| whole-array pass | time | requests | MB/s (stored bytes) |",
        "|---|---:|---:|---:|",
        f"| `arrayds verify` (every checksum, {args.threads} shards at a time) | "
        f"{t_v * 1000:.0f} ms | {s_v['requests']} | {mb / t_v:.0f} |",
        f"| `from_arrayrecord(url).compute()` ({args.threads} threads) | {t_r * 1000:.0f} ms | "
        f"{s_r['requests']} | {mb / t_r:.0f} |",
        f"| transport limit: every shard whole, one ranged GET each ({args.threads} at a "
        f"time; CPU {s_t['cpu'] * 1000:.0f} ms) | {t_t * 1000:.0f} ms | {s_t['requests']} | "
        f"{shard_bytes / 1e6 / t_t:.0f} |",
        f"| local disk: `arrayds verify` | {t_vl * 1000:.0f} ms | - | {mb / t_vl:.0f} |",
        f"| local disk: `from_arrayrecord(path).compute()` | {t_rl * 1000:.0f} ms | - | "
        f"{mb / t_rl:.0f} |",
        "",
        "| dask read (issue 26) | time | CPU | requests | request target | fetched / needed "
        "| MB/s | of the transport limit (target >= 90%) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        f"| whole array | {t_r * 1000:.0f} ms | {s_r['cpu'] * 1000:.0f} ms | {s_r['requests']} "
        f"| <= {1.2 * (len(shard_keys) + shard_bytes / (8 << 20)):.0f} "
        f"| {s_r['bytes_down'] / shard_bytes:.2f} | {mb / t_r:.0f} | **{t_t / t_r:.0%}** |",
        f"| region [{q}:{3 * q}, {q}:{3 * q}] ({len(touched)} shards) | {t_g * 1000:.0f} ms "
        f"| {s_g['cpu'] * 1000:.0f} ms | {s_g['requests']} "
        f"| <= {2 * len(touched) + needed_g / (8 << 20):.0f} "
        f"| {s_g['bytes_down'] / needed_g:.2f} | {needed_g / 1e6 / t_g:.0f} "
        f"| **{(needed_g / t_g) / (shard_bytes / t_t):.0%}** |",
        "",
        f"Peak RSS of the whole-array read (a fresh process; what the compute adds): "
        f"**{peak:.2f}x** the array's size (target <= 1.5x).",
        "",
        "(requests and fetched bytes count everything the proxy saw, manifests included; "
        "the region's needed bytes are its chunks' share of the stored bytes.)",
        "",
        f"verify / read-all throughput: **{t_r / t_v:.2f}x** on S3, **{t_rl / t_vl:.2f}x** "
        f"on a local disk; target for random chunks: "
        f">= {TARGET:g}x ({'met' if not missed else 'MISSED'}); "
        f"total {time.perf_counter() - t_start:.0f} s",
    ]
    sys.stdout.write("\n".join(out) + "\n")
    server.stop()
    return 1 if missed and not args.quick else 0


def peak_rss_of_read(url: str, so: dict, threads: int) -> float:
    """What a whole-array dask read adds to a fresh process's peak RSS (VmHWM minus
    the RSS before the compute), as a multiple of the array's size."""
    code = (
        "import json, dask, arrayds\n"
        "def mem(k):\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith(k):\n"
        "            return int(line.split()[1]) * 1024\n"
        f"x = arrayds.from_arrayrecord({url!r}, storage_options={so!r})\n"
        "base = mem('VmRSS:')\n"
        f"with dask.config.set(scheduler='threads', num_workers={threads}):\n"
        "    y = x.compute()\n"
        "print(json.dumps([mem('VmHWM:') - base, y.nbytes]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    added, nbytes = json.loads(out.stdout.strip().splitlines()[-1])
    return added / nbytes


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
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
