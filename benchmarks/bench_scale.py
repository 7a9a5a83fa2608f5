"""Scaling with history: many small writes, arrayds next to zarr-python 3
doing the same work in the same run.

    python benchmarks/bench_scale.py            # 10,000 / 10,000 / 2,000 writes
    python benchmarks/bench_scale.py --quick    # 200 / 200 / 50 writes
    python benchmarks/bench_scale.py --appends=3000 --records=3000 --xr-steps=500
    python benchmarks/bench_scale.py --merge=off     # appends without the tiered merge

Workloads (each write is one commit of its own, page cache hot, local disk; zarr is
the anchor interpreter's zarr-python 3.4 (with xarray; see below), run after arrayds'
writes on the same data in the same run: benchmarks/anchors/history.py for the array
workload, benchmarks/anchors/scale_zarr.py for the records and xarray ones; without an
anchor interpreter the zarr columns are empty and each table says why):
* array: ``--appends`` single-row appends of 128 float64 (1 KiB) to an array with
  chunks of one row: ``Array.append`` / zarr ``Array.append``;
* records: ``--records`` appends of 20 records of 100 bytes:
  ``arrayds.to_arrayrecord(list_of_bytes, url, mode="a")`` / ``append`` of 20 elements
  to a 1-d zarr ``VariableLengthBytes`` array with chunks of 20;
* xarray: ``--xr-steps`` steps of one ``time`` of a (time, 32, 64) float32 variable:
  ``ds.arrayds.to_arrayrecord(url, append_dim="time")`` / ``ds.to_zarr(url,
  append_dim="time")`` (the first step of each creates the dataset).

arrayds' appends run with ``compact="tiered"``, their default (the newest small shards
merged by tiers after the append, docs/guide.md "Compaction"), or with ``--merge=off``
with ``compact=False`` (one shard file per write, nothing merged).

Reported for each: the cost of one write (wall and CPU) around 10 / 100 / 1,000 /
10,000 writes (the median over a window of writes centred on the mark, so one slow
write does not decide it) and the mean over all writes; then, after the last write,
the time to open, the latency of reading one element (median over random elements
of an open handle), the bytes on disk (allocated, ``st_blocks * 512`` like ``du``,
and apparent, ``st_size``), and the same three for the same content written at
once (the reference of the targets; its opens and reads are timed in turn with those
of the grown dataset, so that a drifting load weighs on both alike). arrayds' open is
also timed with its per-process cache of manifest segments emptied (what a new process
pays). Rows "after compact + gc" are measured after ``arrayds.compact`` and ``arrayds
gc`` keeping only the current version (``--no-compact`` leaves them out).

History anchor (array workload): an icechunk repository on local disk
(``icechunk.local_filesystem_storage``, this venv's icechunk) takes the same appends in
the same run, its writes interleaved with arrayds', each ``zarr`` ``append`` on a
writable session of branch ``main`` and its own ``commit``. Its rows, beside arrayds':
the cost of one write, the versions kept, open and read of the current version and of
an old one (time travel: arrayds ``version=`` the middle retained generation, icechunk
the snapshot of the same row count), and the bytes on disk after each one's garbage
collection keeping only the current version (arrayds: compact + gc as above;
icechunk: ``expire_snapshots`` and ``garbage_collect``, both up to now).

Anchors of the newest releases (array workload): zarr-python 3.4 and icechunk 2.3 need
a newer Python than the project's venv, so after arrayds' appends the same rows are
appended by the anchor interpreter's zarr and icechunk (``$ARRAYDS_ANCHOR_PYTHON`` or
``.venv-anchors``, benchmarks/anchor_runner.py; the script is
benchmarks/anchors/history.py), their writes interleaved with each other; its zarr is
the zarr column of the workload's main table, and a last table puts arrayds beside
both: per-write cost, open and read of the current version, time travel, versions,
bytes on disk before and after each one's gc. Without an anchor interpreter that table
says it was skipped.

Targets (without compaction unless said): cost per write at 10,000 writes
<= 1.5x its cost at 10 writes and <= zarr's; open time and read latency <= 2x those
of the same content written at once; bytes on disk after compact <= 1.1x those of
the content written at once.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import arrayds

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "anchors")]
from anchor_runner import AnchorUnavailable, run_anchor  # noqa: E402
from scaling import (  # noqa: E402
    OPENS,
    ROW,
    IcechunkArray,
    State,
    disk_usage,
    measure_states,
    timed_writes,
)

MARKS = (10, 100, 1_000, 10_000)
RECORDS_PER_WRITE = 20
RECORD_BYTES = 100
GRID = (32, 64)  # float32 per xarray step: 8 KiB
NO_COMPACT = "n/a (--no-compact)"


@dataclass
class Run:
    """One library's side of a workload."""

    wall: list[float] = field(default_factory=list)  # per write, seconds
    cpu: list[float] = field(default_factory=list)
    open_s: float = 0.0
    read_s: float = 0.0
    disk: tuple[int, int] = (0, 0)  # (allocated, apparent) bytes
    once: tuple[float, float, tuple[int, int]] | None = None  # open, read, disk
    cold_open_s: float | None = None  # arrayds: open with its segment cache emptied
    compact: tuple[float, float, float, tuple[int, int]] | None = None  # + time taken
    files: int = 0  # shard files the manifest names (zarr: chunk files)
    zarr: str = ""  # zarr's side: its version and where it ran
    skipped: str = ""  # zarr's side: why it was not measured (no anchor interpreter)
    history: History | None = None  # arrayds' array workload: beside icechunk
    # arrayds' array workload: the anchor interpreter's zarr and icechunk on the same
    # appends (anchors/history.py's result), or {"skipped": why}
    anchors: dict[str, Any] | None = None


@dataclass
class History:
    """The history rows of the array workload: arrayds (``ours``) beside an icechunk
    repository (``ice``) that took the same appends, each a commit."""

    ice: Run  # its writes, open / read of the current version, disk before gc
    versions: tuple[int, int] = (0, 0)  # kept before gc: arrayds, icechunk
    versions_gc: tuple[int | None, int] = (None, 0)  # after gc (arrayds: None, --no-compact)
    rows: int = 0  # the row count of the old version opened
    travel: tuple[State, State] | None = None  # its open / read: arrayds, icechunk
    ice_gc: tuple[float, tuple[int, int]] = (0.0, (0, 0))  # expire + gc seconds, disk


def window(values: list[float], mark: int) -> list[float]:
    """The writes in a window centred on write number ``mark`` (1-based), clipped to
    the writes there are."""
    half = max(2, mark // 20)
    lo, hi = max(0, mark - half), min(len(values), mark + half)
    if hi - lo < 2 * half:  # at the end: the last writes
        lo = max(0, hi - 2 * half)
    return values[lo:hi]


def around(values: list[float], mark: int) -> float:
    """Median of the writes around write ``mark``: the marginal cost of a write at
    that point (the tiered merges that about one append in eight runs are left out;
    :func:`window`'s mean counts them)."""
    return statistics.median(window(values, mark))


def best_of(n: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def after_compact(
    url: str,
    open_fn: Callable[[], object],
    read_fn: Callable[[object, int], object],
    size: int,
    enabled: bool,
) -> tuple[float, float, float, tuple[int, int]] | None:
    """The "after compact" rows: ``arrayds.compact(url)``, then ``arrayds gc`` keeping
    only the current version (the old shards and history are what compaction frees)
    -> (compaction seconds, open, read, disk); None with ``--no-compact``."""
    if not enabled:
        return None
    from arrayds.tools.gc import collect_garbage

    t0 = time.perf_counter()
    arrayds.compact(url)
    took = time.perf_counter() - t0
    collect_garbage(url, min_age=0, keep_versions=1)
    return (took, *measure_states([(open_fn, url)], read_fn, size)[0])


def cold_open(open_fn: Callable[[], object]) -> float:
    """Seconds to open with arrayds' per-process cache of manifest segments emptied
    (what a new process pays; the page cache stays warm)."""
    from arrayds.nodes import history as log

    def once() -> object:
        log.clear_cache()
        return open_fn()

    return best_of(OPENS, once)


def measure(
    ours: Run,
    ours_open: Callable[[str], object],
    read_fn: Callable[[object, int], object],
    size: int,
    url: str,
    once: str,
) -> None:
    """Fills arrayds' open, read and disk figures: the grown dataset at ``url`` timed in
    turn with the same content written at once (``once``), and arrayds' cold open
    (the anchor interpreter measures zarr's side the same way)."""
    (ours.open_s, ours.read_s, ours.disk), ours.once = measure_states(
        [(lambda: ours_open(url), url), (lambda: ours_open(once), once)], read_fn, size
    )
    ours.cold_open_s = cold_open(lambda: ours_open(url))


# ---- the three workloads


def history_rows(
    ice: Run,
    ice_side: IcechunkArray,
    url: str,
    read: Callable[[object, int], object],
    last: float,
) -> History:
    """Before arrayds' compact + gc: the versions each keeps and the opens / reads of
    the current icechunk array and of an old version of each (the middle retained
    arrayds generation, and icechunk's snapshot of the same row count), timed in turn;
    then icechunk's expire + gc and its bytes on disk (``last``: the last row's element
    read checks the array after it)."""
    vs = arrayds.versions(url)
    generation = vs[len(vs) // 2].generation
    old = arrayds.open_array(url, version=generation)
    rows = old.shape[0]
    assert rows >= 1, "the middle version holds no rows"
    snapshot = ice_side.snapshots[rows - 1]
    h = History(ice=ice)
    h.versions = (len(vs), ice_side.versions())
    h.rows = rows
    assert float(ice_side.open(snapshot)[rows - 1, 7]) == float(old[rows - 1, 7])
    ice_now, ours_old, ice_old = measure_states(
        [
            (ice_side.open, ice_side.path),
            (lambda: arrayds.open_array(url, version=generation), url),
            (lambda: ice_side.open(snapshot), ice_side.path),
        ],
        read,
        rows,
    )
    h.ice.open_s, h.ice.read_s, h.ice.disk = ice_now
    h.travel = (ours_old, ice_old)
    took = ice_side.collect()
    assert float(ice_side.open()[-1, 7]) == last
    h.ice_gc = (took, disk_usage(ice_side.path))
    h.versions_gc = (None, ice_side.versions())
    return h


def bench_array(n: int, workdir: str, compact: bool, merge: bool | str) -> tuple[Run, Run]:
    rows = np.random.default_rng(1).standard_normal((n, ROW))
    ours, ice = Run(), Run()

    url = os.path.join(workdir, "array.ads")
    a = arrayds.open_array(url, mode="w", shape=(0, ROW), dtype="f8", chunks=(1, ROW))
    ice_side = IcechunkArray(os.path.join(workdir, "array.icechunk"))
    (ours.wall, ours.cpu), (ice.wall, ice.cpu) = timed_writes(
        n,
        lambda i: a.append(rows[i : i + 1], compact=merge),
        lambda i: ice_side.append(rows[i : i + 1]),
    )
    assert a.shape == (n, ROW) and ice_side.open().shape == (n, ROW)
    ours.files = arrayds.open_array(url).nshards

    def ours_open(u: str = url):
        return arrayds.open_array(u)

    def read(h, i):
        return h[i, 7]

    assert float(ours_open()[n - 1, 7]) == rows[n - 1, 7]
    once = os.path.join(workdir, "array-once.ads")
    arrayds.to_arrayrecord(rows, once, mode="w", chunks=(1, ROW))
    measure(ours, ours_open, read, n, url, once)
    ours.history = history_rows(ice, ice_side, url, read, rows[n - 1, 7])
    ours.anchors = anchor_history(rows, workdir, ours.history.rows)
    ours.compact = after_compact(url, ours_open, read, n, compact)
    if compact:
        ours.history.versions_gc = (len(arrayds.versions(url)), ours.history.versions_gc[1])
    return ours, anchor_zarr_run(ours.anchors)


def anchor_zarr_run(a: dict[str, Any]) -> Run:
    """The zarr side of the array workload's main table: the anchor interpreter's zarr
    from :func:`anchor_history`'s result (or its ``skipped``)."""
    if "skipped" in a:
        return Run(skipped=a["skipped"])
    z = a["zarr"]
    return Run(
        wall=z["wall"],
        cpu=z["cpu"],
        open_s=z["open_s"],
        read_s=z["read_s"],
        disk=tuple(z["disk"]),
        once=(z["once"][0], z["once"][1], tuple(z["once"][2])),
        files=z["files"],
        zarr=f"{a['versions']['zarr']} in the anchor interpreter, after arrayds' writes "
        "(benchmarks/anchors/history.py)",
    )


def anchor_history(rows: np.ndarray, workdir: str, travel_rows: int) -> dict[str, Any]:
    """The array workload's appends by the anchor interpreter's zarr-python and
    icechunk (benchmarks/anchors/history.py), after arrayds' in the same run -> their
    figures and versions, or ``{"skipped": why}`` without an anchor interpreter."""
    path = os.path.join(workdir, "anchor-rows.npy")
    np.save(path, rows)
    try:
        got = run_anchor("history", {"rows": path, "workdir": workdir, "travel_rows": travel_rows})
    except AnchorUnavailable as e:
        return {"skipped": str(e)}
    return got.info


def make_records(n_writes: int) -> list[list[bytes]]:
    rng = np.random.default_rng(2)
    # no zero bytes: zarr hands a VariableLengthBytes element back as numpy bytes,
    # which drop trailing zeros
    blob = rng.integers(1, 256, size=n_writes * RECORDS_PER_WRITE * RECORD_BYTES, dtype=np.uint8)
    raw = blob.tobytes()
    out = []
    for w in range(n_writes):
        base = w * RECORDS_PER_WRITE * RECORD_BYTES
        out.append(
            [
                raw[base + k * RECORD_BYTES : base + (k + 1) * RECORD_BYTES]
                for k in range(RECORDS_PER_WRITE)
            ]
        )
    return out


def bench_records(n: int, workdir: str, compact: bool, merge: bool | str) -> tuple[Run, Run]:
    batches = make_records(n)
    flat = [r for b in batches for r in b]
    size = len(flat)
    ours = Run()

    url = os.path.join(workdir, "records.ads")
    ((ours.wall, ours.cpu),) = timed_writes(
        n, lambda i: arrayds.to_arrayrecord(batches[i], url, mode="a" if i else "w", compact=merge)
    )
    ours.files = arrayds.open(url).num_shards

    def ours_open(u: str = url):
        return arrayds.open(u)

    def read(h, i):
        return h[i]

    assert ours_open()[size - 3] == flat[size - 3]
    once = os.path.join(workdir, "records-once.ads")
    arrayds.to_arrayrecord(flat, once, mode="w")
    measure(ours, ours_open, read, size, url, once)
    data = np.frombuffer(b"".join(flat), dtype=np.uint8).reshape(size, RECORD_BYTES)
    theirs = anchor_zarr("records", data, workdir, per_write=RECORDS_PER_WRITE)
    ours.compact = after_compact(url, ours_open, read, size, compact)
    return ours, theirs


def xr_step(i: int):
    import xarray as xr

    rng = np.random.default_rng(1000 + i)
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), rng.standard_normal((1, *GRID), dtype="f4"))},
        coords={
            "time": [np.datetime64("2020-01-01T00", "h") + np.timedelta64(i, "h")],
            "lat": np.linspace(-90, 90, GRID[0]),
            "lon": np.linspace(0, 360, GRID[1], endpoint=False),
        },
    )
    ds["time"].encoding = {"units": "hours since 2020-01-01", "dtype": "int64"}
    return ds


def bench_xarray(n: int, workdir: str, compact: bool, merge: bool | str) -> tuple[Run, Run]:
    import xarray as xr

    steps = [xr_step(i) for i in range(n)]
    ours = Run()

    url = os.path.join(workdir, "xr.ads")

    def ours_write(i: int) -> None:
        if i == 0:
            steps[0].arrayds.to_arrayrecord(url, mode="w")
        else:
            steps[i].arrayds.to_arrayrecord(url, append_dim="time", compact=merge)

    ((ours.wall, ours.cpu),) = timed_writes(n, ours_write)
    ours.files = sum(arrayds.open_array(url, v).nshards for v in ("t2m", "time", "lat", "lon"))

    def ours_open(u: str = url):
        return xr.open_dataset(u, engine="arrayds")

    def read(h, i):
        return h["t2m"][i, 5, 9].values

    last = steps[n - 1]["t2m"].values[0, 5, 9]
    assert float(read(ours_open(), n - 1)) == last
    whole = xr.concat(steps, dim="time").chunk({"time": 1})
    once = os.path.join(workdir, "xr-once.ads")
    whole.arrayds.to_arrayrecord(once, mode="w")
    measure(ours, ours_open, read, n, url, once)
    theirs = anchor_zarr("xarray", whole["t2m"].values, workdir)
    ours.compact = after_compact(url, ours_open, read, n, compact)
    return ours, theirs


def anchor_zarr(workload: str, data: np.ndarray, workdir: str, **job: Any) -> Run:
    """The zarr side of the records or xarray workload by the anchor interpreter's
    zarr-python (benchmarks/anchors/scale_zarr.py) on ``data``, after arrayds' writes
    in the same run; without an anchor interpreter, a :class:`Run` that says so."""
    path = os.path.join(workdir, f"anchor-{workload}.npy")
    np.save(path, data)
    try:
        got = run_anchor(
            "scale_zarr", {"workload": workload, "data": path, "workdir": workdir, **job}
        )
    except AnchorUnavailable as e:
        return Run(skipped=str(e))
    r = got.info["run"]
    (open_s, read_s, disk), (o_open, o_read, o_disk) = r["states"]
    return Run(
        wall=r["wall"],
        cpu=r["cpu"],
        open_s=open_s,
        read_s=read_s,
        disk=tuple(disk),
        once=(o_open, o_read, tuple(o_disk)),
        files=r["files"],
        zarr=f"{got.info['versions']['zarr']} in the anchor interpreter, after arrayds' writes",
    )


# ---- the report


# A side not measured (zarr without an anchor interpreter) has NaN figures: printed "-".


def ms(s: float) -> str:
    return "-" if math.isnan(s) else f"{s * 1e3:.2f} ms"


def us(s: float) -> str:
    return "-" if math.isnan(s) else f"{s * 1e6:,.0f} µs"


def secs(s: float) -> str:
    return "-" if math.isnan(s) else f"{s:.1f} s"


def count(k: float) -> str:
    return "-" if math.isnan(k) else f"{k:,}"


def size(b: float) -> str:
    if math.isnan(b):
        return "-"
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << k:
            return f"{b / (1 << k):,.1f} {unit}"
    return f"{b:,} B"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b > 0 else "-"


def verdict(ok: bool, what: str) -> str:
    return f"{what} {'ok' if ok else 'MISSED'}"


def unmeasured(n: int) -> Run:
    """A side with NaN for every figure (of ``n`` writes): zarr's, when it was skipped."""
    nan = math.nan
    return Run(
        wall=[nan] * n,
        cpu=[nan] * n,
        open_s=nan,
        read_s=nan,
        disk=(nan, nan),  # type: ignore[arg-type]
        once=(nan, nan, (nan, nan)),  # type: ignore[arg-type]
        files=nan,  # type: ignore[arg-type]
    )


def render_workload(title: str, what: str, ours: Run, theirs: Run) -> tuple[list[str], list[str]]:
    """-> (markdown lines, names of missed targets)."""
    n = len(ours.wall)
    missed: list[str] = []
    zarr = f"zarr-python {theirs.zarr}"
    if theirs.skipped:
        zarr = f"zarr-python 3.4 (anchor interpreter) skipped: {theirs.skipped}"
        theirs = unmeasured(n)
    lines = [
        f"### {title}: {n:,} writes ({what})",
        "",
        f"zarr: {zarr}.",
        "",
        "| measurement | arrayds | zarr | arrayds/zarr (wall) | arrayds/zarr (CPU) | target |",
        "|---|---:|---:|---:|---:|---|",
    ]
    marks = [m for m in MARKS if m <= n]
    if n not in marks:
        marks.append(n)  # and the last write
    first = around(ours.wall, marks[0]) if marks else 0.0
    first_cpu = around(ours.cpu, marks[0]) if marks else 0.0
    for m in marks:
        ow, tw = around(ours.wall, m), around(theirs.wall, m)
        oc, tc = around(ours.cpu, m), around(theirs.cpu, m)
        target = ""
        if m == MARKS[-1]:
            ok = ow <= 1.5 * first and not ow > tw  # zarr unmeasured (NaN): not compared
            against = "<= 1.5x at 10 and <= zarr" + (" (zarr unmeasured)" if math.isnan(tw) else "")
            target = verdict(ok, against) + (f" ({ow / first:.1f}x; CPU {oc / first_cpu:.1f}x)")
            if not ok:
                missed.append(f"{title} per write at {m:,}")
        elif m == marks[-1] and m != marks[0]:
            target = f"({ow / first:.1f}x its cost at 10; CPU {oc / first_cpu:.1f}x)"
        lines.append(
            f"| per write around write {m:,} | {ms(ow)} | {ms(tw)} | {ratio(ow, tw)} | "
            f"{ratio(oc, tc)} (CPU {ms(oc)} / {ms(tc)}) | {target} |"
        )
    last = marks[-1] if marks else n
    ow, tw = (statistics.fmean(window(r.wall, last)) for r in (ours, theirs))
    oc, tc = (statistics.fmean(window(r.cpu, last)) for r in (ours, theirs))
    lines.append(
        f"| per write around write {last:,}, mean (merges included) | {ms(ow)} | {ms(tw)} | "
        f"{ratio(ow, tw)} | {ratio(oc, tc)} (CPU {ms(oc)} / {ms(tc)}) | |"
    )
    ow, tw = statistics.fmean(ours.wall), statistics.fmean(theirs.wall)
    oc, tc = statistics.fmean(ours.cpu), statistics.fmean(theirs.cpu)
    lines.append(
        f"| per write, mean of all {n:,} | {ms(ow)} | {ms(tw)} | {ratio(ow, tw)} | "
        f"{ratio(oc, tc)} (CPU {ms(oc)} / {ms(tc)}) | |"
    )
    ow, tw, oc, tc = sum(ours.wall), sum(theirs.wall), sum(ours.cpu), sum(theirs.cpu)
    lines.append(
        f"| all writes: wall / CPU | {ow:.1f} s / {oc:.1f} s | {secs(tw)} / {secs(tc)} | "
        f"{ratio(ow, tw)} | {ratio(oc, tc)} | |"
    )
    assert ours.once is not None and theirs.once is not None
    o_open, o_read, o_disk = ours.once
    t_open, t_read, t_disk = theirs.once
    ok_open = ours.open_s <= 2 * o_open
    ok_read = ours.read_s <= 2 * o_read
    if not ok_open:
        missed.append(f"{title} open")
    if not ok_read:
        missed.append(f"{title} read")
    lines += [
        f"| open | {ms(ours.open_s)} | {ms(theirs.open_s)} | "
        f"{ratio(ours.open_s, theirs.open_s)} | | "
        f"{verdict(ok_open, '<= 2x at once')} ({ratio(ours.open_s, o_open)}) |",
        f"| open, segment cache emptied (a new process) | "
        f"{ms(ours.cold_open_s or 0.0)} | | | | ({ratio(ours.cold_open_s or 0.0, o_open)} "
        f"at once) |",
        f"| shard files (zarr: chunk files) | {ours.files:,} | {count(theirs.files)} | "
        f"{ratio(ours.files, theirs.files)} | | |",
        f"| read one element | {us(ours.read_s)} | {us(theirs.read_s)} | "
        f"{ratio(ours.read_s, theirs.read_s)} | | "
        f"{verdict(ok_read, '<= 2x at once')} ({ratio(ours.read_s, o_read)}) |",
        f"| on disk, allocated (du) | {size(ours.disk[0])} | {size(theirs.disk[0])} | "
        f"{ratio(ours.disk[0], theirs.disk[0])} | | |",
        f"| on disk, apparent | {size(ours.disk[1])} | {size(theirs.disk[1])} | "
        f"{ratio(ours.disk[1], theirs.disk[1])} | | |",
        f"| written at once: open | {ms(o_open)} | {ms(t_open)} | {ratio(o_open, t_open)} | | |",
        f"| written at once: read one element | {us(o_read)} | {us(t_read)} | "
        f"{ratio(o_read, t_read)} | | |",
        f"| written at once: on disk, allocated / apparent | {size(o_disk[0])} / "
        f"{size(o_disk[1])} | {size(t_disk[0])} / {size(t_disk[1])} | "
        f"{ratio(o_disk[0], t_disk[0])} | | |",
    ]
    if ours.compact is None:
        for name in ("compaction time", "open", "read one element", "on disk, allocated"):
            lines.append(f"| after compact + gc: {name} | {NO_COMPACT} | | | | |")
    else:
        took, c_open, c_read, c_disk = ours.compact
        ok_disk = c_disk[0] <= 1.1 * o_disk[0]
        if not ok_disk:
            missed.append(f"{title} size after compact")
        lines += [
            f"| after compact + gc: compaction time | {took:.2f} s | | | | |",
            f"| after compact + gc: open | {ms(c_open)} | | | | "
            f"({ratio(c_open, o_open)} at once) |",
            f"| after compact + gc: read one element | {us(c_read)} | | | | "
            f"({ratio(c_read, o_read)} at once) |",
            f"| after compact + gc: on disk, allocated | {size(c_disk[0])} | | | | "
            f"{verdict(ok_disk, '<= 1.1x at once')} ({ratio(c_disk[0], o_disk[0])}) |",
        ]
    lines.append("")
    if ours.history is not None:
        lines += render_history(ours, ours.history)
    if ours.anchors is not None:
        lines += render_anchors(ours, ours.anchors)
    return lines, missed


def render_history(ours: Run, h: History) -> list[str]:
    """The history rows of arrayds beside icechunk (see :class:`History`)."""
    ice = h.ice
    n = len(ours.wall)
    lines = [
        f"History beside icechunk {_icechunk_version()} (the same {n:,} appends, each a "
        "commit on branch main):",
        "",
        "| measurement | arrayds | icechunk | arrayds/icechunk (wall) | arrayds/icechunk (CPU) |",
        "|---|---:|---:|---:|---:|",
    ]
    marks = [m for m in MARKS if m <= n]
    if n not in marks:
        marks.append(n)
    for m in marks:
        ow, iw = around(ours.wall, m), around(ice.wall, m)
        oc, ic = around(ours.cpu, m), around(ice.cpu, m)
        lines.append(
            f"| per write around write {m:,} | {ms(ow)} | {ms(iw)} | {ratio(ow, iw)} | "
            f"{ratio(oc, ic)} (CPU {ms(oc)} / {ms(ic)}) |"
        )
    ow, iw, oc, ic = sum(ours.wall), sum(ice.wall), sum(ours.cpu), sum(ice.cpu)
    lines.append(
        f"| all writes: wall / CPU | {ow:.1f} s / {oc:.1f} s | {iw:.1f} s / {ic:.1f} s | "
        f"{ratio(ow, iw)} | {ratio(oc, ic)} |"
    )
    assert h.travel is not None
    (t_open, t_read, _), (it_open, it_read, _) = h.travel
    lines += [
        f"| versions kept | {h.versions[0]:,} | {h.versions[1]:,} | | |",
        f"| open, current version | {ms(ours.open_s)} | {ms(ice.open_s)} | "
        f"{ratio(ours.open_s, ice.open_s)} | |",
        f"| read one element, current version | {us(ours.read_s)} | {us(ice.read_s)} | "
        f"{ratio(ours.read_s, ice.read_s)} | |",
        f"| time travel: open the version of {h.rows:,} rows | {ms(t_open)} | "
        f"{ms(it_open)} | {ratio(t_open, it_open)} | |",
        f"| time travel: read one element of it | {us(t_read)} | {us(it_read)} | "
        f"{ratio(t_read, it_read)} | |",
        f"| on disk, allocated (du), before gc | {size(ours.disk[0])} | {size(ice.disk[0])} | "
        f"{ratio(ours.disk[0], ice.disk[0])} | |",
    ]
    took, ice_disk = h.ice_gc
    kept = h.versions_gc[1]
    if ours.compact is None or h.versions_gc[0] is None:
        lines += [
            f"| gc (arrayds: compact + gc; icechunk: expire_snapshots + garbage_collect): "
            f"time | {NO_COMPACT} | {took:.2f} s | | |",
            f"| after gc: versions kept | {NO_COMPACT} | {kept:,} | | |",
            f"| after gc: on disk, allocated | {NO_COMPACT} | {size(ice_disk[0])} | | |",
        ]
    else:
        c_took, _c_open, _c_read, c_disk = ours.compact
        lines += [
            f"| gc (arrayds: compact + gc; icechunk: expire_snapshots + garbage_collect): "
            f"time | {c_took:.2f} s (compact) | {took:.2f} s | | |",
            f"| after gc: versions kept | {h.versions_gc[0]:,} | {kept:,} | | |",
            f"| after gc: on disk, allocated | {size(c_disk[0])} | {size(ice_disk[0])} | "
            f"{ratio(c_disk[0], ice_disk[0])} | |",
        ]
    lines.append("")
    return lines


def render_anchors(ours: Run, a: dict[str, Any]) -> list[str]:
    """arrayds' array workload beside the anchor interpreter's zarr and icechunk (see
    :func:`anchor_history`)."""
    if "skipped" in a:
        return [f"Anchor rows (zarr-python 3.4, icechunk 2.3): skipped: {a['skipped']}.", ""]
    v, z, ice, h = a["versions"], a["zarr"], a["icechunk"], ours.history
    assert h is not None and h.travel is not None
    n = len(ours.wall)
    lines = [
        f"Beside the anchor interpreter's zarr {v['zarr']} and icechunk {v['icechunk']} "
        f"(Python {v['python']}, benchmarks/anchors/history.py: the same {n:,} appends, "
        "zarr's and icechunk's interleaved, after arrayds' in the same run; arrayds' "
        "figures are those above):",
        "",
        "| measurement | arrayds | zarr | icechunk | arrayds/zarr wall (CPU) | "
        "arrayds/icechunk wall (CPU) |",
        "|---|---:|---:|---:|---:|---:|",
    ]

    def both(o: float, zv: float | None, iv: float, cpu: tuple[float, ...] = ()) -> str:
        """The two ratio cells, arrayds over zarr (empty without ``zv``) and over
        icechunk, with the CPU ratios in brackets when ``cpu`` (the three) is given."""
        cells = []
        for k, theirs in ((1, zv), (2, iv)):
            cell = "" if theirs is None else ratio(o, theirs)
            if cpu and theirs is not None:
                cell += f" ({ratio(cpu[0], cpu[k])})"
            cells.append(cell)
        return f"{cells[0]} | {cells[1]} |"

    marks = [m for m in MARKS if m <= n]
    if n not in marks:
        marks.append(n)
    for m in marks:
        ow, zw, iw = (around(r, m) for r in (ours.wall, z["wall"], ice["wall"]))
        oc, zc, ic = (around(r, m) for r in (ours.cpu, z["cpu"], ice["cpu"]))
        lines.append(
            f"| per write around write {m:,} | {ms(ow)} | {ms(zw)} | {ms(iw)} | "
            + both(ow, zw, iw, (oc, zc, ic))
        )
    ow, zw, iw = (sum(r) for r in (ours.wall, z["wall"], ice["wall"]))
    oc, zc, ic = (sum(r) for r in (ours.cpu, z["cpu"], ice["cpu"]))
    (t_open, t_read, _), (it_open, it_read) = h.travel[0], ice["travel"]
    lines += [
        f"| all writes: wall / CPU | {ow:.1f} s / {oc:.1f} s | {zw:.1f} s / {zc:.1f} s | "
        f"{iw:.1f} s / {ic:.1f} s | " + both(ow, zw, iw, (oc, zc, ic)),
        f"| open, current version | {ms(ours.open_s)} | {ms(z['open_s'])} | "
        f"{ms(ice['open_s'])} | " + both(ours.open_s, z["open_s"], ice["open_s"]),
        f"| read one element, current version | {us(ours.read_s)} | {us(z['read_s'])} | "
        f"{us(ice['read_s'])} | " + both(ours.read_s, z["read_s"], ice["read_s"]),
        f"| time travel: open the version of {h.rows:,} rows | {ms(t_open)} | | "
        f"{ms(it_open)} | " + both(t_open, None, it_open),
        f"| time travel: read one element of it | {us(t_read)} | | {us(it_read)} | "
        + both(t_read, None, it_read),
        f"| versions kept | {h.versions[0]:,} | | {ice['versions']:,} | | |",
        f"| shard files (zarr: chunk files) | {ours.files:,} | {z['files']:,} | | | |",
        f"| on disk, allocated (du), before gc | {size(ours.disk[0])} | "
        f"{size(z['disk'][0])} | {size(ice['disk'][0])} | "
        + both(ours.disk[0], z["disk"][0], ice["disk"][0]),
    ]
    gc = "gc (arrayds: compact + gc; icechunk: expire_snapshots + garbage_collect)"
    if ours.compact is None or h.versions_gc[0] is None:
        lines += [
            f"| {gc}: time | {NO_COMPACT} | | {ice['gc_s']:.2f} s | | |",
            f"| after gc: versions kept | {NO_COMPACT} | | {ice['versions_gc']:,} | | |",
            f"| after gc: on disk, allocated | {NO_COMPACT} | | {size(ice['disk_gc'][0])} | | |",
        ]
    else:
        c_took, _c_open, _c_read, c_disk = ours.compact
        lines += [
            f"| {gc}: time | {c_took:.2f} s (compact) | | {ice['gc_s']:.2f} s | | |",
            f"| after gc: versions kept | {h.versions_gc[0]:,} | | {ice['versions_gc']:,} | | |",
            f"| after gc: on disk, allocated | {size(c_disk[0])} | | "
            f"{size(ice['disk_gc'][0])} | | {ratio(c_disk[0], ice['disk_gc'][0])} |",
        ]
    lines.append("")
    return lines


def render(results: list[tuple[str, str, Run, Run]], args: argparse.Namespace, elapsed: float):
    flags = " --quick" if args.quick else ""
    lines = [
        "## Scaling with history",
        "",
        f"`python benchmarks/bench_scale.py{flags} --appends={args.appends} "
        f"--records={args.records} --xr-steps={args.xr_steps} --merge={args.merge}` - every "
        f"write is its own commit (arrayds' appends with compact={MERGES[args.merge]!r}); "
        "arrayds and the anchor interpreter's zarr-python in the same run, after arrayds' "
        "writes (each workload names it), "
        f"local disk, page cache hot; {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}. Per-write costs are medians over a window "
        "of writes centred on the mark; CPU is this process's CPU time (all threads).",
        "",
    ]
    missed: list[str] = []
    for title, what, ours, theirs in results:
        body, miss = render_workload(title, what, ours, theirs)
        lines += body
        missed += miss
    lines.append(f"Total run time {elapsed:.0f} s.")
    if missed:
        lines.append(f"Targets missed: {', '.join(missed)}.")
    return "\n".join(lines), missed


def _icechunk_version() -> str:
    import icechunk

    return icechunk.__version__


MERGES: dict[str, bool | str] = {"tiered": "tiered", "off": False}

WORKLOADS = {
    "array": ("Array appends", "one 1 KiB row each", bench_array, "appends"),
    "records": (
        "Records appends",
        f"{RECORDS_PER_WRITE} records of {RECORD_BYTES} B each",
        bench_records,
        "records",
    ),
    "xarray": (
        "xarray appends along time",
        f"one step of {GRID[0]}x{GRID[1]} float32 each",
        bench_xarray,
        "xr_steps",
    ),
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="200 / 200 / 50 writes")
    p.add_argument("--appends", type=int, default=None, help="array appends (10,000)")
    p.add_argument("--records", type=int, default=None, help="records appends (10,000)")
    p.add_argument("--xr-steps", type=int, default=None, help="xarray steps (2,000)")
    p.add_argument("--no-compact", action="store_true", help="leave out the after-compact rows")
    p.add_argument(
        "--merge",
        choices=sorted(MERGES),
        default="tiered",
        help="arrayds appends with compact='tiered' (the default) or compact=False (off)",
    )
    p.add_argument("--workdir", default=None)
    p.add_argument("--only", action="append", choices=sorted(WORKLOADS), help="repeatable")
    p.add_argument("--json", default=None, help="also write the results as JSON here")
    args = p.parse_args(argv)
    defaults = (200, 200, 50) if args.quick else (10_000, 10_000, 2_000)
    for name, default in zip(("appends", "records", "xr_steps"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, default)
        if getattr(args, name) < 2:
            p.error(f"--{name.replace('_', '-')} must be at least 2")
    warnings.filterwarnings("ignore", module="zarr")
    t0 = time.perf_counter()
    workdir = tempfile.mkdtemp(prefix="bench-scale-", dir=args.workdir)
    results = []
    try:
        for key in args.only or WORKLOADS:
            title, what, fn, count = WORKLOADS[key]
            ours, theirs = fn(
                getattr(args, count), workdir, not args.no_compact, MERGES[args.merge]
            )
            results.append((title, what, ours, theirs))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    text, missed = render(results, args, time.perf_counter() - t0)
    sys.stdout.write(text + "\n")
    if args.json:  # per workload: every field of both sides' Run (seconds, bytes)
        with open(args.json, "w") as f:
            runs = [
                {"title": t, "arrayds": dataclasses.asdict(o), "zarr": dataclasses.asdict(z)}
                for t, _, o, z in results
            ]
            json.dump({"workloads": runs}, f)
    return 1 if missed and not args.quick else 0


if __name__ == "__main__":
    sys.exit(main())
