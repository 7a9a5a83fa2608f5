"""benchmarks/bench_writers.py runs end to end at its quick size: a table row per kind
with no row lost or duplicated and no append given up, locally and with the writers
behind a fault proxy on moto S3 (``--faults``, refused on a local store)."""

from __future__ import annotations

import re

import pytest


def test_bench_writers_quick(bench, tmp_path, capsys):
    assert bench.main(["--quick", "--workdir", str(tmp_path)]) == 0
    with pytest.raises(SystemExit):
        bench.main(["--faults"])  # a local folder has no HTTP to inject faults into
    out = capsys.readouterr().out
    for kind in ("array", "records", "xarray"):
        assert f"| local | {kind} | 4 x 3 |" in out
    assert out.count("| 0 / 0 | 0 |") == 3
    assert list(tmp_path.iterdir()) == []  # its work folder is removed


def test_bench_writers_quick_faults_s3(bench, tmp_path, capsys):
    """Every check of a run holds with the writers' S3 traffic under transient faults;
    the table says which faults were injected."""
    pytest.importorskip("s3fs")
    pytest.importorskip("moto.server")
    argv = ["--quick", "--faults", "--store", "s3", "--kind", "array", "--kind", "records"]
    assert bench.main([*argv, "--workdir", str(tmp_path)]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| s3 |")]
    assert [r.split(" | ")[1] for r in rows] == ["array", "records"]
    for r in rows:
        assert "| 0 / 0 | 0 |" in r
        assert re.search(r"\| ((503|500|429|reset|lost): \d+ ?)+ \|$", r), r
