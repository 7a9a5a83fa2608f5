"""What benchmarks/bench_scale.py and its anchor script (anchors/history.py) share:
the appended rows' width, the interleaved timing of writes, the timing of opens and
reads, disk usage, and the icechunk side of the array workload. No arrayds here: the
anchor interpreter (zarr-python 3.4, icechunk 2.3) imports it too, and so does
bench_scale.py in the project's interpreter.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

ROW = 128  # float64 per appended row: 1 KiB
READS = 1000  # reads timed (the median counts): single-digit-microsecond reads need many
OPENS = 200  # opens timed (the best counts): sub-millisecond figures need many ...
OPEN_BUDGET = 20.0  # ... but seconds-long ones (zarr's grown xarray) stop after this

State = tuple[float, float, tuple[int, int]]  # open s, one-element read s, disk usage


def timed_writes(
    n: int, *writers: Callable[[int], object]
) -> list[tuple[list[float], list[float]]]:
    """Calls ``writer(i)`` of every writer for i in 0..n-1, interleaved (write i of
    each library in turn, the first rotating), so that the load of the machine
    drifting during the run weighs on all alike -> the (wall, CPU) seconds of each
    call of each writer, in the order of ``writers``."""
    out: list[tuple[list[float], list[float]]] = [([], []) for _ in writers]
    k = len(writers)
    for i in range(n):
        order = [((i + j) % k, writers[(i + j) % k]) for j in range(k)]
        for side, write in order:
            c0 = time.process_time()
            t0 = time.perf_counter()
            write(i)
            out[side][0].append(time.perf_counter() - t0)
            out[side][1].append(time.process_time() - c0)
    return out


def disk_usage(path: str) -> tuple[int, int]:
    """(allocated bytes as ``du`` counts them, apparent bytes) of everything under path."""
    allocated = apparent = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            st = os.stat(os.path.join(root, name))
            allocated += st.st_blocks * 512
            apparent += st.st_size
    return allocated, apparent


def measure_states(
    datasets: Sequence[tuple[Callable[[], object], str]],
    read_fn: Callable[[object, int], object],
    size: int,
    seed: int = 3,
) -> list[State]:
    """The :data:`State` of each ``(open function, path)``: the best of OPENS opens
    (fewer, but at least 5, once they have taken OPEN_BUDGET seconds) and the median
    of READS reads of random elements below ``size`` from an open handle. The
    datasets take turns (one open, or one read of the same element, of each in
    turn), so that the load of the machine drifting weighs on all alike: their
    ratios are what the targets compare."""
    opens = [float("inf")] * len(datasets)
    start = time.perf_counter()
    for turn in range(OPENS):
        for k, (open_fn, _path) in enumerate(datasets):
            t0 = time.perf_counter()
            open_fn()
            opens[k] = min(opens[k], time.perf_counter() - t0)
        if turn >= 4 and time.perf_counter() - start > OPEN_BUDGET:
            break
    handles = [open_fn() for open_fn, _path in datasets]
    idx = np.random.default_rng(seed).integers(0, size, size=READS).tolist()
    for h in handles:
        read_fn(h, idx[0])  # first-touch costs (readers opened lazily) outside the timing
    reads: list[list[float]] = [[] for _ in datasets]
    for i in idx:
        for k, h in enumerate(handles):
            t0 = time.perf_counter()
            read_fn(h, i)
            reads[k].append(time.perf_counter() - t0)
    return [
        (opens[k], statistics.median(reads[k]), disk_usage(path))
        for k, (_open_fn, path) in enumerate(datasets)
    ]


def zarr_chunk_files(path: str) -> int:
    """Chunk files of a zarr store (every file but the metadata)."""
    return sum(
        1 for _root, _dirs, files in os.walk(path) for f in files if not f.startswith("zarr.")
    )


class IcechunkArray:
    """The icechunk side of the array workload: a repository on local disk holding the
    array ``array`` on branch ``main``; every append a commit of its own."""

    def __init__(self, path: str) -> None:
        import icechunk
        import zarr

        icechunk.set_logs_filter("error")  # its warning, at every open, that local disk
        # is unsafe for concurrent commits (the benchmark commits from one thread)
        self.path = path
        self.repo = icechunk.Repository.create(icechunk.local_filesystem_storage(path))
        session = self.repo.writable_session("main")
        zarr.create_array(session.store, name="array", shape=(0, ROW), chunks=(1, ROW), dtype="f8")
        session.commit("create")
        self.snapshots: list[str] = []  # the snapshot of each append, in order

    def append(self, rows: np.ndarray) -> None:
        import zarr

        session = self.repo.writable_session("main")
        zarr.open_array(session.store, path="array", mode="r+").append(rows, axis=0)
        self.snapshots.append(session.commit(f"append {len(self.snapshots)}"))

    def open(self, snapshot: str | None = None):
        """The array as a new reader finds it: the current one on ``main``, or the one
        of ``snapshot`` (time travel)."""
        import icechunk
        import zarr

        repo = icechunk.Repository.open(icechunk.local_filesystem_storage(self.path))
        if snapshot is None:
            session = repo.readonly_session("main")
        else:
            session = repo.readonly_session(snapshot_id=snapshot)
        return zarr.open_array(session.store, path="array", mode="r")

    def versions(self) -> int:
        return sum(1 for _ in self.repo.ancestry(branch="main"))

    def collect(self) -> float:
        """``expire_snapshots`` and ``garbage_collect`` up to now, keeping only the
        current snapshot of ``main`` (and the repository's first) -> seconds taken."""
        from datetime import UTC, datetime

        t0 = time.perf_counter()
        now = datetime.now(UTC)
        self.repo.expire_snapshots(now)
        self.repo.garbage_collect(now)
        return time.perf_counter() - t0
