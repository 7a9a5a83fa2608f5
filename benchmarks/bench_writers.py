"""Many writers: N processes append to one array and one records dataset at once,
while this process reads and runs ``arrayds gc`` beside them.

    python benchmarks/bench_writers.py                 # 4 and 16 writers x 20 appends
    python benchmarks/bench_writers.py --quick         # 4 writers x 3 appends, local
    python benchmarks/bench_writers.py --store s3 --store gcs   # also moto / fake-gcs
    python benchmarks/bench_writers.py --faults --store s3      # writers through a proxy

Each writer is its own Python process (``--worker``): it opens the node, says
``ready``, waits for ``go`` on stdin (all start together), then appends its rows one
append at a time with the default ``retries=`` and prints how many commit races it
lost and retried (:func:`arrayds.nodes.retry.retried`). Row ``j`` of writer ``k`` holds the
value ``k * 100_000 + j`` (an array append adds two equal rows, a records append one
record), so the final node shows any row lost or duplicated. While they run, this
process reads the node again and again (every read must be a committed state, the
last one extended: generations increase, the earlier rows are a prefix of the later
ones) and runs ``collect_garbage(min_age=60, keep_versions=3)``; at the end every
retained version must open and ``arrayds.verify`` pass.

The table: store, kind, writers x appends, conflicts retried, wall time, CPU time of
the writers, rows lost / duplicated (both must be 0), appends that gave up (or raised
another error: those rows must not be there), reads checked, faults injected.

Faults (``--faults``, S3 or GCS only): the writers' traffic goes through a
:class:`FaultProxy` (tests/faults/proxy.py) with the seeded schedule
:data:`FAULT_SCHEDULE` of transient faults on any request: ``503`` at 2 %, ``500``,
``429`` and ``reset`` at 1 % each, and ``lost`` (the server applied a PUT/POST, its
reply is dropped) at 2 %. The readers, gc and the final checks go straight to the
server, so what they see is what is stored. The last column counts the faults injected
per type in that run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

import arrayds
from arrayds.errors import CommitConflictError, CorruptionError
from arrayds.nodes.retry import retried
from arrayds.tools.gc import collect_garbage
from arrayds.tools.verify import verify

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from faults.proxy import FaultProxy, Rule  # noqa: E402 - the tests folder, just added

sys.path.pop(0)

KINDS = ("array", "records")
STRIDE = 100_000
TESTS = Path(__file__).resolve().parents[1] / "tests"
WRITES = ("PUT", "POST")
FAULT_SCHEDULE = (
    Rule("503", rate=0.02),
    Rule("500", rate=0.01),
    Rule("429", rate=0.01),
    Rule("reset", rate=0.01),
    Rule("lost", rate=0.02, methods=WRITES),
)
"""The transient faults of ``--faults`` (module docstring), drawn from ``FAULT_SEED``."""
FAULT_SEED = 28


# ---------------------------------------------------------------- the writer process


def _worker(url: str, so: dict[str, Any] | None, kind: str, k: int, n: int) -> None:
    """One writer: ``n`` appends to the node ``url`` once stdin says ``go``."""
    handle = arrayds.open_array(url, mode="a", storage_options=so) if kind == "array" else None
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"
    gave_up = []  # appends that raised (lost every race, or a fault): not visible
    for j in range(n):
        value = k * STRIDE + j
        try:
            if handle is not None:
                handle.append(np.full((2,), value, "i8"))
            else:
                arrayds.to_arrayrecord([value], url, mode="a", storage_options=so)
        except CorruptionError:
            raise
        except (CommitConflictError, OSError):  # lost every race, or a fault outlasted retries
            gave_up.append(value)
            if handle is not None:
                handle = arrayds.open_array(url, mode="a", storage_options=so)
    cpu = time.process_time()
    print(json.dumps({"retried": retried(), "cpu": cpu, "gave_up": gave_up}), flush=True)


# ---------------------------------------------------------------- the run


def create(url: str, so: dict[str, Any] | None, kind: str) -> None:
    """The empty node the writers append to (an array in chunks of one append: a
    partly filled last chunk rewritten by an append and then merged by tiers leaves a
    stale record that ``verify`` reports, a single-writer issue of its own)."""
    if kind == "array":
        arrayds.open_array(url, mode="w", shape=(0,), dtype="i8", chunks=(2,), storage_options=so)
    else:
        arrayds.to_arrayrecord([-1], url, mode="w", serializer="msgpack", storage_options=so)


def read_state(url: str, so: dict[str, Any] | None, kind: str) -> tuple[int, list[int]]:
    """(generation, values) of the node as committed now."""
    node = arrayds.open(url, storage_options=so)
    if kind == "array":
        return node.manifest.generation, [int(v) for v in node[:]]
    values = [int(v) for v in node[:]][1:]  # the first record marks creation
    return node.manifest.generation, values


def check_values(
    values: list[int], writers: int, appends: int, kind: str, gave_up: set[int]
) -> tuple[int, int]:
    """(rows lost, rows duplicated) against what the writers appended (but the appends
    ``gave_up``, which raised and must not be there)."""
    per = 2 if kind == "array" else 1
    want = Counter(
        {
            k * STRIDE + j: per
            for k in range(writers)
            for j in range(appends)
            if k * STRIDE + j not in gave_up
        }
    )
    got = Counter(values)
    lost = sum((want - got).values())
    dup = sum((got - want).values())
    return lost, dup


def run(
    url: str,
    so: dict[str, Any] | None,
    kind: str,
    writers: int,
    appends: int,
    gc: bool = True,
    writers_so: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``writers`` processes x ``appends`` appends to a new node at ``url`` (through
    ``writers_so`` if given, e.g. a fault proxy, else ``so``); readers and gc run here
    meanwhile through ``so``. Raises ``AssertionError`` on a read that is not a
    committed state in order; returns the figures."""
    create(url, so, kind)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    wso = so if writers_so is None else writers_so
    cmd = [sys.executable, __file__, "--worker", url, json.dumps(wso), kind]
    procs = [
        subprocess.Popen(
            [*cmd, str(k), str(appends)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for k in range(writers)
    ]
    for p in procs:  # the handshake: every writer has opened the node
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    start = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    gen, seen, reads = 0, [], 0
    while True:
        running = any(p.poll() is None for p in procs)
        g, values = read_state(url, so, kind)
        assert g >= gen, f"generation went back from {gen} to {g}"
        assert values[: len(seen)] == seen, "a later read does not extend an earlier one"
        gen, seen, reads = g, values, reads + 1
        if gc:
            collect_garbage(url, storage_options=so, min_age=60, keep_versions=3)
        if not running:
            break
    wall = time.perf_counter() - start
    retries, cpu, gave_up = 0, 0.0, set()
    for p in procs:
        out, _ = p.communicate()
        assert p.returncode == 0, f"a writer failed (exit {p.returncode})"
        figures = json.loads(out.strip().splitlines()[-1])
        retries += figures["retried"]
        cpu += figures["cpu"]
        gave_up.update(figures["gave_up"])
    _, values = read_state(url, so, kind)
    lost, dup = check_values(values, writers, appends, kind, gave_up)
    for v in arrayds.versions(url, storage_options=so):  # gc kept what they need
        arrayds.open(url, version=v.generation, storage_options=so)
    report = verify(url, storage_options=so)
    assert report.ok, report
    return {
        "kind": kind,
        "writers": writers,
        "appends": appends,
        "retried": retries,
        "wall": wall,
        "cpu": cpu,
        "lost": lost,
        "duplicated": dup,
        "reads": reads,
        "gave_up": len(gave_up),
    }


# ---------------------------------------------------------------- the stores


def _helper(folder: str, name: str) -> Any:
    sys.path.insert(0, str(TESTS))
    try:
        from conformance.servers import load_helper
    finally:
        sys.path.remove(str(TESTS))
    return load_helper(folder, name)


Store = tuple[str, dict[str, Any] | None, dict[str, Any] | None, FaultProxy | None]


@contextmanager
def store_for(name: str, workdir: str, faults: bool = False) -> Iterator[Store]:
    """(a root URL, storage_options, the writers' storage_options, the proxy) on the
    store ``name``: a local folder, a moto S3 server or a fake-gcs-server on 127.0.0.1.
    With ``faults`` the writers' options go through a :class:`FaultProxy` running
    :data:`FAULT_SCHEDULE` (else they are the same options and the proxy is None)."""
    if name == "local":
        if faults:
            raise ValueError("--faults needs --store s3 or --store gcs (an HTTP store)")
        yield workdir, None, None, None
        return
    if name == "s3":
        import s3fs

        server = _helper("s3", "s3server").start_moto()
        stop, fs, root = server.stop, s3fs.S3FileSystem, "s3://writers"
    else:
        gcs = _helper("gcs", "gcsserver")
        gcs.apply_gcsfs_env()
        import gcsfs

        server = gcs.start_fake_gcs()
        stop, fs, root = server.stop, gcsfs.GCSFileSystem, "gs://writers"
    try:
        so = server.storage_options()
        fs(**so).mkdir("writers")
        if not faults:
            yield root, so, so, None
            return
        with FaultProxy(server.endpoint_url, FAULT_SCHEDULE, seed=FAULT_SEED) as proxy:
            yield root, so, dict(so, endpoint_url=proxy.url), proxy
    finally:
        stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        url, so, kind, k, n = argv[1:]
        _worker(url, json.loads(so), kind, int(k), int(n))
        return 0
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--store", action="append", choices=("local", "s3", "gcs"))
    p.add_argument("--workdir", default=None)
    p.add_argument("--no-gc", action="store_true", help="no gc beside the writers")
    p.add_argument(
        "--faults", action="store_true", help="writers through a fault proxy (S3/GCS only)"
    )
    args = p.parse_args(argv)
    stores = args.store or ["local"]
    if args.faults and "local" in stores:
        p.error("--faults needs --store s3 or --store gcs (the proxy speaks HTTP)")
    sizes = [(4, 3)] if args.quick else [(4, 20), (16, 20)]
    workdir = tempfile.mkdtemp(dir=args.workdir)
    print(
        "| store | kind | writers x appends | conflicts retried | wall | writers' CPU | "
        "rows lost / duplicated | appends that gave up | reads checked | faults injected |\n"
        "|---|---|---|---:|---:|---:|---|---:|---:|---|"
    )
    try:
        for store in stores:
            with store_for(store, workdir, args.faults) as (root, so, wso, proxy):
                for writers, appends in sizes:
                    for kind in KINDS:
                        url = f"{root}/{kind}-{writers}-{uuid.uuid4().hex[:8]}"
                        before = Counter(proxy.injected) if proxy else Counter()
                        r = run(url, so, kind, writers, appends, not args.no_gc, wso)
                        hit = (Counter(proxy.injected) - before) if proxy else Counter()
                        faults = " ".join(f"{f}: {hit[f]}" for f in sorted(hit)) or "-"
                        print(
                            f"| {store} | {kind} | {writers} x {appends} | {r['retried']} | "
                            f"{r['wall']:.2f} s | {r['cpu']:.2f} s | {r['lost']} / "
                            f"{r['duplicated']} | {r['gave_up']} | {r['reads']} | {faults} |",
                            flush=True,
                        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
