"""A bound on the work a call does, not on how long it takes: the CPU time of the
process (all its threads) and the growth of its peak resident memory. A loaded machine
delays a call but does not make it use more CPU or memory, so the bounds hold however
busy the machine is; a reader that looped over what a forged size claims, or filled
memory for it, still fails them by orders of magnitude.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

CPU_SECONDS = 0.25
"""The forged-input paths take about 2 ms of CPU each (the slowest, a data source's
open): over 100x margin."""
PEAK_BYTES = 64 << 20
"""Less than any claim of the forgeries (2^40 bytes, 10^12 elements) by far."""


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/self/status")


@contextmanager
def bounded(what: object = "", cpu_seconds: float = CPU_SECONDS) -> Iterator[None]:
    """Assert that the body uses less than ``cpu_seconds`` of CPU and raises the
    process's peak resident memory by less than :data:`PEAK_BYTES` (the peak is reset
    first: writing 5 to /proc/self/clear_refs)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    base = _status("VmRSS")
    start = time.process_time()
    yield
    cpu = time.process_time() - start
    grew = _status("VmHWM") - base
    assert cpu < cpu_seconds, f"{what}: {cpu:.3f} s of CPU"
    assert grew < PEAK_BYTES, f"{what}: the peak resident memory grew by {grew} bytes"
