"""The anchor side of benchmarks/bench_manifest_scale.py: zarr-python sharded arrays and
icechunk repositories of many shards, built and then measured in fresh processes of the
anchor interpreter (Python 3.12 with zarr 3.4 and icechunk 2.3; arrayds is not imported
here). Self-contained: the benchmark runs it as a subprocess and talks JSON with it.

    python manifest_scale.py build JOB      # prints one JSON line, the build's result
    python manifest_scale.py measure JOB    # the measuring handshake (below)

``JOB`` is a JSON object. **build** (``lib`` "zarr" or "icechunk", ``kind`` "array" or
"records", ``path``, ``n``, ``rows``: the rows the measurements will read,
``record``: the record's hex):

* zarr, array: ``zarr.create_array`` of shape (n, 128) float64, chunks and shards of one
  row, no compressor, the default chunk key encoding (``c/<row>/0``); row 0 is written
  by zarr, and every other row's shard file is a hard link of that file (every row
  holds the same values, so every shard file holds the same bytes; a fresh copy of the
  file every 50,000 links, below ext4's limit of 65,000 links per file);
* zarr, records: a 1-d ``VariableLengthBytes`` array of n items, chunks and shards of
  one item (``c/<i>``), the same record in every item, files shared the same way;
* icechunk: a repository on local disk (``local_filesystem_storage``) holding the same
  zarr array (no shards: icechunk's manifest is the index) as ``a`` on branch
  ``main``, one commit. Row 0 is written through zarr; every other chunk is stored
  with the store's own ``set`` of the bytes zarr wrote for row 0 (the same bytes zarr
  would write: the array has no compressor; this skips only zarr's per-chunk codec
  pipeline, which would make the million-chunk build take minutes). Chunks are real
  objects (``chunks/<id>``, icechunk names them; 1 KiB is above its inline limit).
  The chunks of ``rows`` are stored last, so their object names are known
  (``read_objects``, for the S3 copy).

The result: ``metadata_bytes`` (zarr: ``zarr.json``; icechunk: every object but the
chunks), ``read_objects`` (what the measured reads can touch: metadata and the shard
or chunk objects of ``rows``, relative keys) and ``seconds``.

**measure** (``lib``, ``kind``, ``url``: a local path or ``s3://bucket/prefix``,
``s3``: ``{"endpoint_url", "key", "secret"}`` or null, ``warm``: a one-row dataset of
the same library and kind, on S3 if ``warm_s3``, ``rows``, ``col``, ``expect``: the
value every read must return, a float or the record's hex). The process first opens
and reads ``warm`` (so imports, lazy module loads and S3 clients are done), prints
``{"phase": "ready"}`` and waits for a line on stdin; then for each of ``open``,
``first`` (read ``rows[0]``) and ``later`` (read the other rows, one element each) it
runs the phase, prints ``{"phase": name, ...}`` and, except after the last, waits for
a line again (the benchmark reads the S3 proxy's counters in between). Each phase
reports ``seconds``, ``cpu`` (this process, all threads) and ``rchar`` (bytes of read
syscalls, ``/proc/self/io``); ``later`` the median ``seconds`` of one read; the last
line also ``peak_rss`` (``VmHWM``, bytes) and the library versions.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
import warnings
from typing import Any

ROW = 128
LINKS_PER_FILE = 50_000
ARRAY_NAME = "a"  # the array's name inside an icechunk repository


def _rchar() -> int:
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    return 0


def _peak_rss() -> int:
    """This process's peak resident set (``VmHWM``, bytes; ``ru_maxrss`` would carry
    the forking parent's across ``exec``)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _first_row(job: dict[str, Any]) -> Any:
    """What row 0 (and so every row) holds: ``arange(128)``, or the record ``record``
    (hex), as zarr takes it for ``z[0:1]``."""
    import numpy as np

    if job["kind"] == "array":
        return np.arange(ROW, dtype="<f8")[None]
    return np.array([bytes.fromhex(job["record"])], dtype=object)


def _create(store: Any, n: int, kind: str, *, sharded: bool, name: str | None = None):
    import zarr

    if kind == "array":
        shape, chunks, dtype = (n, ROW), (1, ROW), "f8"
    else:
        from zarr.core.dtype import VariableLengthBytes

        shape, chunks, dtype = (n,), (1,), VariableLengthBytes()
    return zarr.create_array(
        store,
        name=name,
        shape=shape,
        chunks=chunks,
        shards=chunks if sharded else None,
        dtype=dtype,
        compressors=None,
        fill_value=0.0 if kind == "array" else None,
    )


def _link_all(first: str, names: list[str]) -> None:
    """Hard links of the file ``first`` at every name of ``names`` (their folders
    made), a fresh copy of it every LINKS_PER_FILE names."""
    import shutil

    source = first
    for k, name in enumerate(names):
        os.makedirs(os.path.dirname(name), exist_ok=True)
        if (k + 1) % LINKS_PER_FILE == 0:
            shutil.copyfile(first, name)
            source = name
        else:
            os.link(source, name)


def build_zarr(job: dict[str, Any]) -> dict[str, Any]:
    path, n, kind = job["path"], job["n"], job["kind"]
    z = _create(path, n, kind, sharded=True)
    z[0:1] = _first_row(job)
    key = (lambda i: f"c/{i}/0") if kind == "array" else (lambda i: f"c/{i}")
    _link_all(os.path.join(path, key(0)), [os.path.join(path, key(i)) for i in range(1, n)])
    return {
        "metadata_bytes": os.path.getsize(os.path.join(path, "zarr.json")),
        "read_objects": ["zarr.json"] + sorted({key(r) for r in job["rows"]}),
    }


def build_icechunk(job: dict[str, Any]) -> dict[str, Any]:
    import icechunk
    from zarr.core.buffer import default_buffer_prototype

    path, n, kind = job["path"], job["n"], job["kind"]
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(path))
    session = repo.writable_session("main")
    store = session.store
    z = _create(store, n, kind, sharded=False, name=ARRAY_NAME)
    z[0:1] = _first_row(job)
    suffix = "/0" if kind == "array" else ""
    proto = default_buffer_prototype()
    read_rows = sorted(set(job["rows"]) - {0})
    chunk_dir = os.path.join(path, "chunks")
    os.makedirs(chunk_dir, exist_ok=True)  # none when icechunk keeps chunks inline
    zero = sorted(os.listdir(chunk_dir)) if 0 in job["rows"] else []  # row 0's chunk

    async def store_rows() -> list[str]:
        data = await store.get(f"{ARRAY_NAME}/c/0{suffix}", proto)
        assert data is not None, "zarr wrote no chunk for row 0"

        async def put(rows: range | list[int]) -> None:
            rows = list(rows)
            for lo in range(0, len(rows), 2000):
                batch = rows[lo : lo + 2000]
                await asyncio.gather(
                    *(store.set(f"{ARRAY_NAME}/c/{i}{suffix}", data) for i in batch)
                )

        wanted = set(read_rows)
        await put([i for i in range(1, n) if i not in wanted])
        before = set(os.listdir(chunk_dir))
        await put(read_rows)
        return sorted(set(os.listdir(chunk_dir)) - before)

    read_chunks = zero + asyncio.run(store_rows())
    session.commit(f"{n} chunks")
    meta = []
    total = 0
    for root, _dirs, files in os.walk(path):
        rel = os.path.relpath(root, path)
        if rel == "chunks":
            continue
        for f in files:
            key = f if rel == "." else f"{rel}/{f}"
            meta.append(key)
            total += os.path.getsize(os.path.join(root, f))
    return {
        "metadata_bytes": total,
        "read_objects": sorted(meta) + [f"chunks/{c}" for c in read_chunks],
    }


def _open(job: dict[str, Any], url: str, s3: dict[str, Any] | None) -> Any:
    import zarr

    if job["lib"] == "zarr":
        if s3 is None:
            return zarr.open_array(url, mode="r")
        opts = {"endpoint_url": s3["endpoint_url"], "key": s3["key"], "secret": s3["secret"]}
        return zarr.open_array(url, mode="r", storage_options=opts)
    import icechunk

    if s3 is None:
        storage = icechunk.local_filesystem_storage(url)
    else:
        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        storage = icechunk.s3_storage(
            bucket=bucket,
            prefix=prefix,
            endpoint_url=s3["endpoint_url"],
            allow_http=True,
            access_key_id=s3["key"],
            secret_access_key=s3["secret"],
            region="us-east-1",
            force_path_style=True,
        )
    repo = icechunk.Repository.open(storage)
    return zarr.open_array(repo.readonly_session("main").store, path=ARRAY_NAME, mode="r")


def _read(job: dict[str, Any], z: Any, row: int) -> Any:
    import numpy as np

    if job["kind"] == "array":
        v: Any = float(z[row, job["col"]])
    else:
        item = z[row]
        while isinstance(item, np.ndarray):  # zarr wraps a 0-d object item in 0-d arrays
            item = item.item()
        v = bytes(item).hex()
    if v != job["expect"]:
        raise AssertionError(f"{job['lib']} {job['url']} row {row}: read {v!r}")
    return v


def _phase(fn: Any) -> tuple[Any, dict[str, Any]]:
    io0, c0, t0 = _rchar(), time.process_time(), time.perf_counter()
    value = fn()
    took = time.perf_counter() - t0
    return value, {"seconds": took, "cpu": time.process_time() - c0, "rchar": _rchar() - io0}


def measure(job: dict[str, Any], out: Any) -> None:
    import icechunk
    import zarr

    icechunk.set_logs_filter("error")

    def say(msg: dict[str, Any], wait: bool = True) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()
        if wait and not sys.stdin.readline():
            raise SystemExit("the benchmark went away")

    warm = _open(job, job["warm"], job["s3"] if job["warm_s3"] else None)
    _read(job, warm, 0)
    say({"phase": "ready"})
    rows, s3 = job["rows"], job.get("s3")
    z, t = _phase(lambda: _open(job, job["url"], s3))
    say({"phase": "open", **t})
    _, t = _phase(lambda: _read(job, z, rows[0]))
    say({"phase": "first", **t})
    times, cpu, io = [], 0.0, 0
    for r in rows[1:]:
        _, t = _phase(lambda r=r: _read(job, z, r))
        times.append(t["seconds"])
        cpu += t["cpu"]
        io += t["rchar"]
    n = max(1, len(times))
    say(
        {
            "phase": "later",
            "seconds": statistics.median(times) if times else 0.0,
            "cpu": cpu / n,
            "rchar": io // n,
            "peak_rss": _peak_rss(),
            "versions": {"zarr": zarr.__version__, "icechunk": icechunk.__version__},
        },
        wait=False,
    )


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("build", "measure"):
        sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
        return 2
    warnings.filterwarnings("ignore")  # zarr's note that VariableLengthBytes is unstable
    job = json.loads(argv[2])
    out = os.fdopen(os.dup(1), "w")
    sys.stdout = sys.stderr  # only the protocol's lines go to stdout
    if argv[1] == "measure":
        measure(job, out)
        return 0
    import icechunk

    icechunk.set_logs_filter("error")
    t0 = time.perf_counter()
    result = (build_zarr if job["lib"] == "zarr" else build_icechunk)(job)
    result["seconds"] = time.perf_counter() - t0
    out.write(json.dumps(result) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
