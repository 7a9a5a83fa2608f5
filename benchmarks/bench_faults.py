"""Object-store faults: a seeded fault schedule over many writes and reads, on moto
(S3) and fake-gcs-server (GCS), each behind tests/faults/proxy.py's FaultProxy.

Runs tests/faults/workload.py (appends, region writes, dask appends, rewrites,
compaction, gc; after each, a read through the proxy and a read straight from the
server) with the schedule of tests/faults/test_faults.py at higher rates and no caps,
and prints the table of docs/reliability.md ("Object-store faults"): operations
attempted per kind, faults injected per type, committed, failed cleanly, and the
violations (mixed states, lost or duplicated commits, wrong reads), which must be 0.

    python benchmarks/bench_faults.py --ops 60 --seed 1
"""

from __future__ import annotations

import argparse
import collections
import time
import uuid

from bench_writers import tests_helper  # this script's folder, benchmarks/

tests_helper("gcs", "gcsserver").apply_gcsfs_env()  # before gcsfs is imported
proxy_mod = tests_helper("faults", "proxy")
workload = tests_helper("faults", "workload")
FAULTS, FaultProxy, Rule = proxy_mod.FAULTS, proxy_mod.FaultProxy, proxy_mod.Rule
KINDS, run = workload.KINDS, workload.run

BUCKET = "arrayds-bench-faults"


def schedule(rate: float) -> list[Rule]:
    """Every fault type on every method and key kind at ``rate`` each (the lost
    replies on writes, the truncated bodies on reads)."""
    return [
        Rule("503", rate=rate),
        Rule("500", rate=rate / 2),
        Rule("429", rate=rate / 2),
        Rule("reset", rate=rate / 2),
        Rule("slow", rate=rate, delay=0.01),
        Rule("lost", rate=rate, methods=("PUT", "POST", "DELETE")),
        Rule("truncate", rate=rate, methods=("GET",)),
    ]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", type=int, default=60, help="operations per store")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rate", type=float, default=0.04, help="rate of each fault rule")
    p.add_argument("--stores", default="s3,gs")
    a = p.parse_args(argv)
    import gcsfs
    import s3fs

    rows = []
    cpu0, t0 = time.process_time(), time.perf_counter()
    for backend in a.stores.split(","):
        if backend == "s3":
            server = tests_helper("s3", "s3server").start_moto()
            s3fs.S3FileSystem(**server.storage_options()).mkdir(BUCKET)
        else:
            server = tests_helper("gcs", "gcsserver").start_fake_gcs()
            gcsfs.GCSFileSystem(**server.storage_options()).mkdir(BUCKET)
        try:
            direct = server.storage_options()
            with FaultProxy(server.endpoint_url, schedule(a.rate), seed=a.seed) as proxy:
                opts = (
                    server.storage_options(proxy.url)
                    if backend == "s3"
                    else dict(direct, endpoint_url=proxy.url)
                )
                url = f"{backend}://{BUCKET}/run-{uuid.uuid4().hex[:8]}"
                start = time.perf_counter()
                tally = run(url, opts, direct, ops=a.ops, seed=a.seed)
                rows.append(
                    (
                        backend,
                        tally,
                        collections.Counter(proxy.injected),
                        proxy,
                        time.perf_counter() - start,
                    )
                )
        finally:
            server.stop()
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    print(f"seed {a.seed}, {a.ops} operations per store, fault rate {a.rate} per rule\n")
    print("| | " + " | ".join(b for b, *_ in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for kind in KINDS:
        print(
            f"| attempted: {kind} | "
            + " | ".join(str(t.attempted[kind]) for _, t, *_ in rows)
            + " |"
        )
    print(
        "| requests through the proxy | "
        + " | ".join(str(sum(px.requests.values())) for *_, px, _ in rows)
        + " |"
    )
    for f in FAULTS:
        print(f"| injected: {f} | " + " | ".join(str(inj[f]) for _, _, inj, *_ in rows) + " |")
    for label, attr in [
        ("committed", "committed"),
        ("failed cleanly (error, dataset as before)", "failed"),
        ("mixed states", "mixed"),
        ("lost commits", "lost"),
        ("duplicated appends", "duplicated"),
        ("raised but committed", "raised_but_committed"),
        ("reads through the proxy", "reads"),
        ("reads failed cleanly", "reads_failed"),
        ("reads with wrong values", "reads_wrong"),
    ]:
        print(f"| {label} | " + " | ".join(str(getattr(t, attr)) for _, t, *_ in rows) + " |")
    print(
        "| verify problems | " + " | ".join(str(len(t.verify_problems)) for _, t, *_ in rows) + " |"
    )
    print("| seconds | " + " | ".join(f"{s:.1f}" for *_, s in rows) + " |")
    print(f"\nwall {wall:.1f} s, CPU {cpu:.1f} s (this process; CPU/wall {cpu / wall:.2f})")
    for b, t, *_ in rows:
        for e in t.errors[:10]:
            print(f"{b}: {e[:200]}")
    return 1 if any(t.violations for _, t, *_ in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
