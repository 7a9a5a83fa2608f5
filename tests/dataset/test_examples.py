"""The array examples run end to end as scripts (examples/svd_pipeline.py with a
smaller matrix, examples/sparse_big_array.py with 1000 x 1000 chunks: the same
(10**8, 10**8) shape, 10**10 chunks, 100x less data to write; the 10**4 chunks of the
default are tested in test_array.py). examples/quickstart.py is run by
tests/arrayrecord/test_docs_and_example.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_example(name: str, *args: str, cwd: Path) -> str:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    return proc.stdout


def test_svd_pipeline(tmp_path):
    out = run_example(
        "svd_pipeline.py",
        *("--rows", "4000", "--cols", "120", "--rank", "5", "--block-rows", "500"),
        *("--workdir", str(tmp_path)),
        cwd=tmp_path,
    )
    assert "wrote X (4000, 120) float64 as 8 row blocks" in out
    assert "identical to the in-memory dask result: True" in out
    assert "vs numpy.linalg.svd: singular values within" in out
    assert (tmp_path / "svd.arrayds" / "X" / "arrayds.json").exists()


def test_sparse_big_array(tmp_path):
    out = run_example(
        "sparse_big_array.py", "--chunk", "1000", "--workdir", str(tmp_path), cwd=tmp_path
    )
    assert "created (100000000, 100000000) float32: 10,000,000,000 chunks of (1000, 1000)" in out
    assert "Chunks initialized : 3/10000000000" in out
    manifest = tmp_path / "sparse.arrayds" / "world" / "arrayds.json"
    assert manifest.stat().st_size < 4096
