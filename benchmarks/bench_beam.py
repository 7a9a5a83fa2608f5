"""TFRecord -> arrayds conversion with Apache Beam (DirectRunner, 2 worker processes)
next to the dask path (2-worker LocalCluster), same data, same run, page cache hot.

    python benchmarks/bench_beam.py              # 8 TFRecord files x 50,000 records of ~1 KiB
    python benchmarks/bench_beam.py --quick      # 8 files x 5,000 records

Data: the records benchmark's token records (benchmarks/bench_records.py: uint16 ids
from a Zipf law, 448..575 tokens, about 1 KiB each), written as 8 TFRecord files.

Measured, alternating the two (best of --repeat rounds, wall clock and CPU time):
* Beam: ``arrayds.beam.tfrecord_to_arrayrecord(options, files, url)`` on the
  DirectRunner with ``direct_num_workers=2, direct_running_mode="multi_processing"``:
  one shard per input file, each streamed by a worker, one commit. Its CPU time is
  this process's plus its worker processes' (``RUSAGE_CHILDREN``, once they exit);
  the workers start anew for every pipeline, and that start-up is part of the figure
  (measured alone as well: an empty pipeline);
* dask: ``arrayds.convert.tfrecord_to_arrayrecord(files, url)`` on a 2-worker
  ``LocalCluster`` started once (its CPU time: this process's plus the workers').

The official ``array-record-beam-sdk`` cannot share a venv with array-record 0.8.6,
so it is not measured.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_records  # noqa: E402 - the records benchmark's data

import arrayds  # noqa: E402
from arrayds import beam as abeam  # noqa: E402
from arrayds.convert import tfrecord_to_arrayrecord  # noqa: E402
from arrayds.files.tfrecord import write_tfrecord


def two_workers() -> PipelineOptions:
    return PipelineOptions(flags=[], direct_num_workers=2, direct_running_mode="multi_processing")


def cpu_seconds(client=None) -> float:
    """CPU time of this process and its exited children (Beam's workers), plus the
    dask workers' when ``client``."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    if client is not None:
        total += sum(client.run(time.process_time).values())
    return total


def measure(fn: Callable[[], object], client=None) -> tuple[float, float]:
    c0 = cpu_seconds(client)
    t0 = time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    return wall, cpu_seconds(client) - c0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="8 files x 5,000 records")
    p.add_argument("--files", type=int, default=8)
    p.add_argument("--per-file", type=int, default=50_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workdir", default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.per_file, args.repeat = 5_000, 2
    from dask.distributed import Client, LocalCluster

    t_start = time.perf_counter()
    load0 = os.getloadavg()[0]
    workdir = tempfile.mkdtemp(prefix="bench-beam-", dir=args.workdir)
    try:
        files = []
        for k in range(args.files):
            path = os.path.join(workdir, f"data-{k:05d}-of-{args.files:05d}.tfrecord")
            write_tfrecord(path, bench_records.make_records(args.per_file, seed=k))
            files.append(path)
        mib = sum(os.path.getsize(f) for f in files) / 2**20
        beam_url = os.path.join(workdir, "beam")
        dask_url = os.path.join(workdir, "dask")
        with (
            LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
        ):
            client.upload_file(bench_records.__file__)
            client.run(bench_records.warm)

            def run_beam():
                abeam.tfrecord_to_arrayrecord(two_workers(), files, beam_url, mode="w")

            def run_dask():
                tfrecord_to_arrayrecord(files, dask_url, mode="w")

            def empty_beam():
                with beam.Pipeline(options=two_workers()) as pipe:
                    _ = pipe | beam.Create([0]) | beam.Map(lambda x: x)

            best = {"beam": (float("inf"), 0.0), "dask": (float("inf"), 0.0)}
            for _ in range(args.repeat):
                for key, fn, cl in (("beam", run_beam, None), ("dask", run_dask, client)):
                    wall, cpu = measure(fn, cl)
                    if wall < best[key][0]:
                        best[key] = (wall, cpu)
            startup = min(measure(empty_beam) for _ in range(2))
        for url in (beam_url, dask_url):
            ds = arrayds.records.open_records(url)
            assert len(ds) == args.files * args.per_file and ds.num_shards == args.files
        assert list(arrayds.records.open_records(beam_url)) == list(
            arrayds.records.open_records(dask_url)
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    (bw, bc), (dw, dc) = best["beam"], best["dask"]
    out = [
        "## TFRecord -> arrayds conversion: Beam DirectRunner vs dask",
        "",
        f"{args.files} TFRecord files x {args.per_file:,} records, {mib:.0f} MiB; "
        f"best of {args.repeat}; {platform.machine()}, {os.cpu_count()} cores; "
        f"load average {load0:.1f} at start, {os.getloadavg()[0]:.1f} at end.",
        "",
        "| path | wall (s) | MiB/s | CPU (s) | MiB per CPU-second |",
        "|---|---:|---:|---:|---:|",
        f"| Beam DirectRunner, 2 workers | {bw:.2f} | {mib / bw:.0f} | {bc:.2f} | {mib / bc:.0f} |",
        f"| dask LocalCluster, 2 workers | {dw:.2f} | {mib / dw:.0f} | {dc:.2f} | {mib / dc:.0f} |",
        "",
        f"Beam / dask: wall-clock throughput {dw / bw:.2f}x, per CPU-second {dc / bc:.2f}x. "
        f"An empty 2-worker DirectRunner pipeline (worker start-up) takes {startup[0]:.1f} s "
        f"and {startup[1]:.1f} CPU-s; without it Beam's figures would be "
        f"{mib / max(bw - startup[0], 1e-9):.0f} MiB/s and "
        f"{mib / max(bc - startup[1], 1e-9):.0f} MiB per CPU-second. "
        f"Total {time.perf_counter() - t_start:.0f} s.",
    ]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
