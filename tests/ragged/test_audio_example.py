"""examples/audio_clips.py runs end to end (fewer, shorter clips)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_audio_clips_example(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "audio_clips.py"),
            "--clips",
            "10",
            "--min-seconds",
            "3",
            "--max-seconds",
            "8",
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
    assert "wrote 10 clips" in out
    # the first second of channel 0 of 4 clips: one piece each
    assert "shapes [(48000,), (48000,), (48000,), (48000,)], 4 pieces read" in out
    assert "dense batch: (4, 2, 144000) float32" in out
    assert "RMS of 10 clips" in out
    assert "awkward: 2 * 2 * var * float32" in out
    assert out.rstrip().endswith("done")
