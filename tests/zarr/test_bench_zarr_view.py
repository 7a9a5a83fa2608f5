"""benchmarks/bench_zarr_view.py runs end to end at a tiny size, with its anchor floor
(benchmarks/anchors/zarr_floor.py, here in this interpreter) and without an anchor
interpreter, so the view's benchmark cannot break unnoticed."""

from __future__ import annotations

import re
import sys

import pytest
from benchscript import loaded

TINY = ["--n=256", "--chunk=128", "--n4=128", "--chunk4=32", "--repeat=1"]
ROWS = ("A2 sum", "A4 dask read", "A4 direct read")


@pytest.fixture(scope="module")
def bench():
    with loaded("bench_zarr_view") as module:
        yield module


def _table_rows(text: str, header: str) -> dict[str, list[str]]:
    """The rows of the Markdown table that follows ``header``, by their first cell."""
    part = text.split(header, 1)[1]
    rows = {}
    for line in part.splitlines():
        if line.startswith("| ") and not line.startswith("| workload"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows[cells[0]] = cells[1:]
        elif rows and not line.startswith("|"):
            break
    return rows


def test_tiny_run_with_the_anchor_floor(bench, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ARRAYDS_ANCHOR_PYTHON", sys.executable)  # zarr and dask are here
    assert bench.main([*TINY, f"--workdir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    first = _table_rows(out, "## Reading through the zarr view")
    assert set(first) == set(ROWS)
    for name in ROWS:
        what, own, view, ratio, verdict, floor, floor_ratio = first[name]
        assert re.fullmatch(r"\d+\.\d{3} / \d+\.\d{3}", own) and float(own.split()[0]) > 0
        assert re.fullmatch(r"\d+\.\d\dx \(\d+\.\d\dx\)", ratio)
        assert verdict in ("met", "**missed**")
    anchor = _table_rows(out, "The zarr floor of the anchor interpreter's zarr ")
    assert set(anchor) == set(ROWS)
    for name in ROWS:
        assert anchor[name][0] == first[name][1]  # arrayds' own figures of the first table
        wall, cpu = (float(x) for x in anchor[name][1].split(" / "))
        assert wall > 0 and cpu > 0
    assert list(tmp_path.iterdir()) == []  # the data and the arrays are removed


def test_without_an_anchor_interpreter_the_floor_is_skipped(bench, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ARRAYDS_ANCHOR_PYTHON", str(tmp_path / "no-python"))
    assert bench.main([*TINY, f"--workdir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert set(_table_rows(out, "## Reading through the zarr view")) == set(ROWS)
    assert "Anchor floor (zarr-python 3.4): skipped: no anchor interpreter at " in out
    assert "The zarr floor of the anchor interpreter" not in out
