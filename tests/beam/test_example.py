"""examples/beam_pipeline.py runs end to end (fewer examples, the in-process runner:
the 2-worker DirectRunner is exercised by test_beam.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_beam_pipeline_example(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "beam_pipeline.py"), "--n", "1500"]
        + ["--workers", "0", "--out", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "converted 1,500 TFRecords into 4 shards (serializer raw)" in proc.stdout
    assert "wrote 1,500 feature records in 4 shards (serializer msgpack)" in proc.stdout
    assert "every id once" in proc.stdout
    assert (tmp_path / "corpus.ads" / "features" / "arrayds.json").exists()
