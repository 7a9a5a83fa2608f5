"""Many writers: N processes append to one array, one records dataset and one xarray
dataset at once, while this process reads and runs ``arrayds gc`` beside them.

    python benchmarks/bench_writers.py                 # 4 and 16 writers x 20 appends
    python benchmarks/bench_writers.py --quick         # 4 writers x 3 appends, local
    python benchmarks/bench_writers.py --store s3 --store gcs   # also moto / fake-gcs
    python benchmarks/bench_writers.py --faults --store s3      # writers through a proxy
    python benchmarks/bench_writers.py --store s3 --kind array  # one kind only
    python benchmarks/bench_writers.py --writers 16 --appends 10  # one size only

Each writer is its own Python process (``--worker``): it opens the node, says
``ready``, waits for ``go`` on stdin (all start together), then appends its rows one
append at a time and prints how many commit races it lost and retried
(:func:`arrayds.nodes.retry.retried`), how many attempts each append took and how long it
waited between them (:func:`arrayds.nodes.retry.slept`). Array, records and xarray
(``append_dim=``) appends retry with their default ``retries=``. Row ``j`` of writer
``k`` holds the value ``k * 100_000 + j``
(an array append adds two equal rows, a records append one record, an xarray append
one time step whose coordinate and variable ``v`` both hold it), so the final node
shows any row lost or duplicated. While they run, this process reads the node again
and again (every read must be a committed state, the last one extended: generations
increase, the earlier rows are a prefix of the later ones, no xarray coordinate is
paired with another row's value) and runs ``collect_garbage(min_age=GC_MIN_AGE,
keep_versions=3)``; at the end every retained version must open and
``arrayds.verify`` pass.

The table: store, kind, writers x appends, conflicts retried, attempts per append
(median / max), seconds waited between attempts (all writers), wall time, CPU time of
the writers, rows lost / duplicated (both must be 0), appends that failed cleanly
(they raised ``CommitConflictError`` having lost every race, or a store error noted
"not committed": their rows must not be there), appends whose outcome is unknown (the
store failed during the commit and on the read after it, :data:`UNKNOWN`: their rows
must be there whole and once, or not at all; the column says how many of them landed),
reads checked, faults injected. Below the table, each error an append raised (its
type and message with the notes saying what state it left).

Faults (``--faults``, S3 or GCS only): the writers' traffic goes through a
``FaultProxy`` (tests/faults/proxy.py) with the seeded schedule
:func:`fault_schedule` of transient faults on any request: ``503`` at 2 %, ``500``,
``429`` and ``reset`` at 1 % each, and ``lost`` (the server applied a PUT/POST, its
reply is dropped) at 2 %. The readers, gc and the final checks go straight to the
server, so what they see is what is stored. The last column counts the faults injected
per type in that run.
"""

from __future__ import annotations

import argparse
import importlib
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
from statistics import median
from typing import Any

import numpy as np

import arrayds
from arrayds.errors import CommitConflictError, CorruptionError
from arrayds.nodes.retry import retried, slept
from arrayds.verify import collect_garbage, verify

KINDS = ("array", "records", "xarray")
STRIDE = 100_000
TESTS = Path(__file__).resolve().parents[1] / "tests"
WRITES = ("PUT", "POST")


def tests_helper(folder: str, name: str) -> Any:
    """The module tests/<folder>/<name>.py (a test server, the fault proxy), loaded once
    by tests/conformance/servers.py's ``load_helper``, as the tests load it. The test
    tree is no installed package: tests/ is on ``sys.path`` only while that loader is
    imported, and at its end (it shadows nothing)."""
    if "conformance.servers" not in sys.modules:
        sys.path.append(str(TESTS))
        try:
            importlib.import_module("conformance.servers")
        finally:
            sys.path.remove(str(TESTS))
    return sys.modules["conformance.servers"].load_helper(folder, name)


def fault_schedule() -> tuple[Any, ...]:
    """The transient faults of ``--faults`` (module docstring), drawn from
    ``FAULT_SEED``: a tuple of tests/faults/proxy.py ``Rule``."""
    rule = tests_helper("faults", "proxy").Rule
    return (
        rule("503", rate=0.02),
        rule("500", rate=0.01),
        rule("429", rate=0.01),
        rule("reset", rate=0.01),
        rule("lost", rate=0.02, methods=WRITES),
    )


FAULT_SEED = 28

UNKNOWN = "the commit's outcome is unknown"
"""What :mod:`arrayds.nodes.commit` notes on an error after which it cannot tell
whether the commit landed."""

GC_MIN_AGE = 0
"""The ``min_age`` of the gc beside the writers: 0, every unreferenced file is a
candidate at once. gc keeps the files of the writes under way by their pending
markers (:mod:`arrayds.nodes.pending`), however long an append holds its shards
through its retries; this run is the proof (before the markers it needed 600 s: with
60 s, a 16-writer xarray run on S3 read a committed manifest naming a missing shard)."""


# ---------------------------------------------------------------- the writer process


def _worker(url: str, so: dict[str, Any] | None, kind: str, k: int, n: int) -> None:
    """One writer: ``n`` appends to the node ``url`` once stdin says ``go``."""
    handle = arrayds.open_array(url, mode="a", storage_options=so) if kind == "array" else None
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"
    errors = []  # [value, type, message with notes] of each append that raised
    tries, times = [], []  # per append: attempts, seconds
    for j in range(n):
        value = k * STRIDE + j
        r0, t0 = retried(), time.perf_counter()
        try:
            if handle is not None:
                handle.append(np.full((2,), value, "i8"))
            elif kind == "records":
                arrayds.to_arrayrecord([value], url, mode="a", storage_options=so)
            else:
                _append_xarray(url, so, value)
        except CorruptionError:
            raise
        except (CommitConflictError, OSError) as e:  # lost every race, or a fault outlasted
            errors.append([value, type(e).__name__, describe(e)])  # the retries
            if handle is not None:
                handle = arrayds.open_array(url, mode="a", storage_options=so)
        tries.append(retried() - r0 + 1)
        times.append(time.perf_counter() - t0)
    out = {"retried": retried(), "cpu": time.process_time(), "errors": errors}
    print(json.dumps({**out, "tries": tries, "times": times, "slept": slept()}), flush=True)


def describe(e: BaseException) -> str:
    """The message of ``e`` with its notes (where a commit says what state it left)."""
    return "\n".join([str(e), *getattr(e, "__notes__", ())])


def outcome_unknown(message: str) -> bool:
    """Whether an append's error says its commit's outcome is unknown (the store failed
    during the conditional put and on the read after it): its rows are then either all
    there, once, or not at all. Any other error says nothing was committed."""
    return UNKNOWN in message


def _xarray_rows(values: list[int]) -> Any:
    """The xarray rows of ``values``: coordinate ``time`` and variable ``v`` both hold
    them (a read that pairs a time with another row's ``v`` is a mix)."""
    import xarray as xr

    return xr.Dataset({"v": (("time",), np.array(values, "i8"))}, coords={"time": values})


def _append_xarray(url: str, so: dict[str, Any] | None, value: int) -> None:
    """``to_arrayrecord(..., append_dim="time")`` of one row (with the default
    ``retries=``: a lost race places the row after the other writer's)."""
    row = _xarray_rows([value])
    arrayds.to_arrayrecord(row, url, mode="a", append_dim="time", storage_options=so)


# ---------------------------------------------------------------- the run


def create(url: str, so: dict[str, Any] | None, kind: str) -> None:
    """The empty node the writers append to (an array in chunks of one append: a
    partly filled last chunk rewritten by an append and then merged by tiers leaves a
    stale record that ``verify`` reports, a single-writer issue of its own)."""
    if kind == "array":
        arrayds.open_array(url, mode="w", shape=(0,), dtype="i8", chunks=(2,), storage_options=so)
    elif kind == "records":
        arrayds.to_arrayrecord([-1], url, mode="w", serializer="msgpack", storage_options=so)
    else:
        arrayds.to_arrayrecord(_xarray_rows([-1]), url, mode="w", storage_options=so)


def read_state(url: str, so: dict[str, Any] | None, kind: str) -> tuple[int, list[int]]:
    """(generation, values) of the node as committed now."""
    node = arrayds.open(url, storage_options=so)
    if kind == "array":
        return node.manifest.generation, [int(v) for v in node[:]]
    if kind == "records":
        values = [int(v) for v in node[:]][1:]  # the first record marks creation
        return node.manifest.generation, values
    import xarray as xr

    # the group's generation, then its current xarray state (one committed state, at
    # this generation or later; version=gen is no such read while writers commit: see
    # docs/reliability.md)
    gen = node._m.generation
    ds = xr.open_dataset(url, engine="arrayds", storage_options=so)
    times, values = ds["time"].values.tolist()[1:], ds["v"].values.tolist()[1:]
    assert times == values, f"generation {gen}+: a time paired with another row's value"
    return gen, values


def check_values(
    values: list[int],
    writers: int,
    appends: int,
    kind: str,
    failed: set[int],
    unknown: set[int] | None = None,
) -> tuple[int, int, int]:
    """(rows lost, rows duplicated, unknown appends that landed) against what the
    writers appended. The appends that ``failed`` cleanly must not be there (a row of
    theirs counts as duplicated); those of ``unknown`` outcome must be there whole and
    once or not at all (a part, or more, counts as duplicated)."""
    per = 2 if kind == "array" else 1
    unknown = unknown or set()
    got = Counter(values)
    want = Counter(
        {
            v: per
            for v in (k * STRIDE + j for k in range(writers) for j in range(appends))
            if v not in failed and v not in unknown
        }
    )
    for v in unknown:
        if got[v] == per:
            want[v] = per  # it landed, whole and once
    lost = sum((want - got).values())
    dup = sum((got - want).values())
    return lost, dup, sum(1 for v in unknown if want[v])


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
    here = str(Path(arrayds.__file__).resolve().parents[1])  # the writers import this arrayds
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
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
            collect_garbage(url, storage_options=so, min_age=GC_MIN_AGE, keep_versions=3)
        if not running:
            break
    wall = time.perf_counter() - start
    retries, cpu, errors, tries, times, sleeps = 0, 0.0, [], [], [], 0.0
    for p in procs:
        out, _ = p.communicate()
        assert p.returncode == 0, f"a writer failed (exit {p.returncode})"
        figures = json.loads(out.strip().splitlines()[-1])
        retries += figures["retried"]
        cpu += figures["cpu"]
        errors += figures["errors"]
        tries += figures["tries"]
        times += figures["times"]
        sleeps += figures["slept"]
    _, values = read_state(url, so, kind)
    unknown = {v for v, _, message in errors if outcome_unknown(message)}
    failed = {v for v, _, _ in errors} - unknown
    lost, dup, landed = check_values(values, writers, appends, kind, failed, unknown)
    if lost or dup:  # which rows, and how often each is there (for the report)
        per, got = (2 if kind == "array" else 1), Counter(values)
        odd = {v: n for v, n in got.items() if n != per}
        odd |= {v: got[v] for v, _, _ in errors if v in values}
        expected = (k * STRIDE + j for k in range(writers) for j in range(appends))
        odd |= {v: 0 for v in expected if v not in got and v not in failed | unknown}
        errors.append([-1, "Rows", f"values there an unexpected number of times: {odd}"])
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
        "failed": len(failed),
        "unknown": len(unknown),
        "unknown_landed": landed,
        "errors": errors,
        "tries": tries,
        "times": times,
        "slept": sleeps,
    }


# ---------------------------------------------------------------- the stores


Store = tuple[str, dict[str, Any] | None, dict[str, Any] | None, Any]


@contextmanager
def store_for(name: str, workdir: str, faults: bool = False) -> Iterator[Store]:
    """(a root URL, storage_options, the writers' storage_options, the proxy) on the
    store ``name``: a local folder, a moto S3 server or a fake-gcs-server on 127.0.0.1.
    With ``faults`` the writers' options go through a ``FaultProxy`` running
    :func:`fault_schedule` (else they are the same options and the proxy is None)."""
    if name == "local":
        if faults:
            raise ValueError("--faults needs --store s3 or --store gcs (an HTTP store)")
        yield workdir, None, None, None
        return
    if name == "s3":
        import s3fs

        server = tests_helper("s3", "s3server").start_moto()
        stop, fs, root = server.stop, s3fs.S3FileSystem, "s3://writers"
    else:
        gcs = tests_helper("gcs", "gcsserver")
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
        proxy_type = tests_helper("faults", "proxy").FaultProxy
        with proxy_type(server.endpoint_url, fault_schedule(), seed=FAULT_SEED) as proxy:
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
    p.add_argument("--kind", action="append", choices=KINDS, help="default: all")
    p.add_argument("--no-gc", action="store_true", help="no gc beside the writers")
    p.add_argument(
        "--faults", action="store_true", help="writers through a fault proxy (S3/GCS only)"
    )
    p.add_argument("--writers", type=int, action="append", help="default: 4 and 16")
    p.add_argument("--appends", type=int, default=None, help="per writer (default 20)")
    args = p.parse_args(argv)
    stores = args.store or ["local"]
    if args.faults and "local" in stores:
        p.error("--faults needs --store s3 or --store gcs (the proxy speaks HTTP)")
    sizes = [(4, 3)] if args.quick else [(4, 20), (16, 20)]
    if args.writers or args.appends:
        sizes = [(w, args.appends or 20) for w in args.writers or (4, 16)]
    workdir = tempfile.mkdtemp(dir=args.workdir)
    errors: list[tuple[Any, ...]] = []
    print(
        "| store | kind | writers x appends | conflicts retried | attempts per append "
        "(median / max) | waited | wall | writers' CPU | rows lost / duplicated | appends "
        "failed cleanly | outcome unknown (landed) | reads checked | faults injected |\n"
        "|---|---|---|---:|---|---:|---:|---:|---|---:|---:|---:|---|"
    )
    try:
        for store in stores:
            with store_for(store, workdir, args.faults) as (root, so, wso, proxy):
                for writers, appends in sizes:
                    for kind in args.kind or KINDS:
                        url = f"{root}/{kind}-{writers}-{uuid.uuid4().hex[:8]}"
                        before = Counter(proxy.injected) if proxy else Counter()
                        r = run(url, so, kind, writers, appends, not args.no_gc, wso)
                        hit = (Counter(proxy.injected) - before) if proxy else Counter()
                        faults = " ".join(f"{f}: {hit[f]}" for f in sorted(hit)) or "-"
                        print(
                            f"| {store} | {kind} | {writers} x {appends} | {r['retried']} | "
                            f"{median(r['tries']):g} / {max(r['tries'])} | {r['slept']:.1f} s | "
                            f"{r['wall']:.2f} s | {r['cpu']:.2f} s | {r['lost']} / "
                            f"{r['duplicated']} | {r['failed']} | {r['unknown']} "
                            f"({r['unknown_landed']}) | {r['reads']} | {faults} |",
                            flush=True,
                        )
                        errors += [(store, kind, writers, *e) for e in r["errors"]]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for store, kind, writers, value, name, message in errors:
        k, j = divmod(value, STRIDE)
        who = f"writer {k}, append {j}" if value >= 0 else "the final check"
        print(f"\n{store} {kind} {writers} writers: {who}: {name}: {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
