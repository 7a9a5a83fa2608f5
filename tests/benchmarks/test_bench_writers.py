"""benchmarks/bench_writers.py runs end to end at its quick size: a table row per kind
with no row lost or duplicated, locally and with the writers behind a fault proxy on
moto S3 (``--faults``, refused on a local store)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_writers.py"


@pytest.fixture
def bench():
    spec = importlib.util.spec_from_file_location("bench_writers", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_writers"] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["bench_writers"]


def test_bench_writers_quick(bench, tmp_path, capsys):
    assert bench.main(["--quick", "--workdir", str(tmp_path)]) == 0
    with pytest.raises(SystemExit):
        bench.main(["--faults"])  # a local folder has no HTTP to inject faults into
    out = capsys.readouterr().out
    for kind in ("array", "records"):
        assert f"| local | {kind} | 4 x 3 |" in out
    assert out.count("| 0 / 0 |") == 2
    assert list(tmp_path.iterdir()) == []  # its work folder is removed


def test_bench_writers_quick_faults_s3(bench, tmp_path, capsys):
    """Every check of a run holds with the writers' S3 traffic under transient faults;
    the table says which faults were injected."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    assert bench.main(["--quick", "--faults", "--store", "s3", "--workdir", str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| s3 |")]
    assert [r.split(" | ")[1] for r in rows] == ["array", "records"]
    for r in rows:
        assert "| 0 / 0 |" in r
        assert re.search(r"\| ((503|500|429|reset|lost): \d+ ?)+ \|$", r), r
