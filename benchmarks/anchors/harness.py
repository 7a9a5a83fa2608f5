"""The anchor side of benchmarks/anchor_runner.py: what an anchor script imports.

An anchor script runs in the anchor interpreter (``ARRAYDS_ANCHOR_PYTHON``, a Python
3.12 venv made by ``make bench-anchors`` from requirements/anchors.txt) as a
subprocess of a benchmark. It talks to the runner over its standard streams:

* stdin, first line: the job, one JSON object (:func:`job`);
* stdout, lines starting with ``@anchor `` followed by one JSON object (anything else
  a library prints is ignored):

  - ``{"event": "ready", "label": L}`` before a measured section; the script then
    waits for a line ``go`` on stdin (the runner resets its request counters first);
  - ``{"event": "done", "label": L, "seconds": s, "cpu": c, "rss_added": b,
    "rss_peak": b}`` after it (wall-clock and CPU seconds of this process, all
    threads, and of the child processes it waited for; the peak resident set during
    the section minus the resident set before it, and the peak itself, in bytes; the
    runner reads its counters then);
  - ``{"event": "result", ...}`` once, at the end: whatever else the script reports
    (versions, checks).

A section's peak RSS is measured by resetting the kernel's high-water mark
(``/proc/self/clear_refs``) before it; where that is refused, ``rss_added`` and
``rss_peak`` are ``null``. Errors are exceptions: the script exits non-zero and the
runner raises with its stderr.

    with section("100 random chunks, cold"):
        ...  # the measured work
    finish(versions=versions("zarr"))
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import time
from collections.abc import Callable, Iterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any

PREFIX = "@anchor "


def emit(event: str, **fields: Any) -> None:
    """One protocol line on stdout."""
    sys.stdout.write(PREFIX + json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def job() -> dict[str, Any]:
    """The job: the first line of stdin, a JSON object."""
    line = sys.stdin.readline()
    if not line:
        raise SystemExit("anchor script: no job on stdin")
    return json.loads(line)


def _status(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak resident set size (VmHWM) to the current RSS
        return True
    except OSError:
        return False


def process_cpu() -> float:
    """CPU seconds of this process (all threads) and of the children it waited for."""
    return time.process_time() + _children_cpu()


@contextlib.contextmanager
def measure(cpu_clock: Callable[[], float] = process_cpu) -> Iterator[dict[str, Any]]:
    """Time, CPU time and peak RSS of the ``with`` block, in the dict it yields (filled
    when the block ends): ``seconds``, ``cpu`` (by ``cpu_clock``: by default this
    process's, all threads, plus that of the child processes it started and waited
    for, such as ``curl`` pipes; a script with worker processes passes a clock that
    adds theirs), ``rss_added``, ``rss_peak``."""
    out: dict[str, Any] = {}
    base = _status("VmRSS:")
    peak_ok = _reset_peak()
    c0 = cpu_clock()
    t0 = time.perf_counter()
    yield out
    out["seconds"] = time.perf_counter() - t0
    out["cpu"] = cpu_clock() - c0
    peak = _status("VmHWM:") if peak_ok else None
    out["rss_added"] = peak - base if peak is not None and base is not None else None
    out["rss_peak"] = peak


@contextlib.contextmanager
def section(label: str, cpu_clock: Callable[[], float] = process_cpu) -> Iterator[None]:
    """A measured section: the ready/go handshake, then :func:`measure` (with
    ``cpu_clock``)."""
    emit("ready", label=label)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit(f"anchor script: no 'go' for section {label!r}")
    with measure(cpu_clock) as m:
        yield
    emit("done", label=label, **m)


def finish(**fields: Any) -> None:
    """The last line: the script's result."""
    emit("result", **fields)


def versions(*names: str) -> dict[str, str]:
    """Installed versions of these distributions, and Python's."""
    out = {"python": ".".join(map(str, sys.version_info[:3]))}
    for name in names:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "absent"
    return out
