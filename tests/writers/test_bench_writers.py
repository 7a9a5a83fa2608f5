"""benchmarks/bench_writers.py runs end to end at its quick size: a table row per kind
with no row lost or duplicated and no append failed or of unknown outcome, locally and
with the writers behind a fault proxy on moto S3 (``--faults``, refused on a local
store); its accounting of appends that raised (clean failures must be absent, unknown
outcomes whole and once or absent)."""

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
    assert out.count("| 0 / 0 | 0 | 0 (0) |") == 3
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
        assert "| 0 / 0 |" in r
        assert re.search(r"\| ((503|500|429|reset|lost): \d+ ?)+ \|$", r), r


def test_bench_writers_counts_raised_appends_by_outcome(bench):
    # writer 0 appended 0..2; append 1 failed cleanly, append 2's outcome is unknown
    check = bench.check_values
    assert check([0, 2], 1, 3, "records", {1}, {2}) == (0, 0, 1)  # unknown one landed
    assert check([0], 1, 3, "records", {1}, {2}) == (0, 0, 0)  # or it did not
    assert check([0, 1], 1, 3, "records", {1}, {2}) == (0, 1, 0)  # a clean failure there
    assert check([0, 2, 2], 1, 3, "records", {1}, {2}) == (0, 2, 0)  # twice is no landing
    assert check([0, 0, 2], 1, 3, "array", {1}, {2}) == (0, 1, 0)  # half an array append
    assert check([0], 1, 3, "records", set(), set()) == (2, 0, 0)  # two rows lost
    assert bench.outcome_unknown(f"OSError\nnode 'x': {bench.UNKNOWN} (the store failed")
    assert not bench.outcome_unknown("node 'x': not committed: the node is as before")
