"""benchmarks/bench_write_commit.py runs end to end at a small size for arrays,
records and DataTrees: every commit runs in its own process, and the commit over
segment references receives one item per segment where the one over entries
receives one per shard."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_write_commit.py"


@pytest.mark.parametrize(
    ("flag", "writes"),
    [
        ([], ["w-", "w-", "r+", "w"]),
        (["--records"], ["records w-"] * 2),
        (["--tree"], ["DataTree w-"] * 2),
    ],  # fmt: skip
)
def test_bench_write_commit_small(tmp_path, flag, writes):
    n = 300
    out = subprocess.run(
        [sys.executable, str(PATH), str(n), "--workdir", str(tmp_path), *flag],
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    ).stdout
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines()
            if line.startswith(f"| {n} |")]  # fmt: skip
    assert [r[1] for r in rows] == writes
    received = {r[2]: int(r[3]) for r in rows[:2]}
    assert received["entries"] == n and received["segments"] == -(-n // 128)
