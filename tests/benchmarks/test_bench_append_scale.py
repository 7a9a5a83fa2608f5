"""benchmarks/bench_append_scale.py runs end to end at a small size: every case
appends nine times in its own process, and no append parses more than the newest
segments of the list (the per-append count the table reports)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_append_scale.py"


def test_bench_append_scale_small():
    out = subprocess.run(
        [sys.executable, str(PATH), "600", "--xarray-max", "600"],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    rows = [line for line in out.splitlines() if line.startswith("| 600 |")]
    cases = ["dask", "Array.append", "records", "xarray", "ragged"]
    assert [r.split("|")[2].strip() for r in rows] == cases
    for row in rows:
        parsed = int(row.split("|")[6])
        # the tail, the last segments a merge window reaches and those rewritten; an
        # xarray append does so in the group's copy and in the member's list of v and t
        assert parsed <= (12 if "xarray" in row else 4), row
