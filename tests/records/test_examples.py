"""The records examples run end to end (with smaller sizes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_records_pipeline_example():
    out = run_example("records_pipeline.py", "--n", "3000", "--partitions", "4", "--steps", "5")
    assert "wrote 3,000 examples in 4 shards" in out
    assert "official reader:" in out


def test_torch_loader_example():
    pytest.importorskip("torch", reason="torch is part of the [ml] extra")
    out = run_example("torch_loader.py", "--n", "2000", "--epochs", "2")
    assert "epoch 1: 2000 examples" in out


def test_grain_pipeline_example():
    pytest.importorskip("grain", reason="grain is part of the [ml] extra")
    out = run_example("grain_pipeline.py", "--n", "2000")
    assert "grain.sources.ArrayRecordDataSource: 2000 records in 4 files" in out
