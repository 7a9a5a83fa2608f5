"""examples/xarray_climate.py runs end to end (a shorter period)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_xarray_climate_example(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "xarray_climate.py"),
            "--days",
            "20",
            "--dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "wrote {'time': 80, 'lat': 49, 'lon': 72}" in out
    assert "(1 chunk read)" in out
    assert "51 daily global means" in out
    assert "stored precip dtype: int16, decoded: float64" in out
    assert out.rstrip().endswith("done")
