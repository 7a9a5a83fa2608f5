"""benchmarks/ab.py runs the benchmark scripts at a tiny size against two trees (this
worktree twice), alternating the sides, and prints their figures side by side; its
module aliases reach a tree only where the new name is missing; bad input is refused."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / "benchmarks" / "ab.py"


@pytest.fixture(scope="module")
def ab():
    spec = importlib.util.spec_from_file_location("ab", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(text: str, title: str) -> dict[str, list[str]]:
    """The rows of the table after ``title``: figure -> the other cells."""
    table = text.split(title, 1)[1].split("\n\n", 2)[1]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()]
    return {c[0]: c[1:] for c in cells[2:]}


def run_ab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(PATH), "--before", str(ROOT), "--after", str(ROOT), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def test_two_rounds_alternate_and_every_figure_has_both_sides():
    got = run_ab(
        "--rounds=2",
        "--bench=bench_scale.py --quick --appends=3 --records=3 --only=records --no-compact",
    )
    assert got.returncode == 0, got.stderr
    order = re.findall(r"bench_scale\.py round (\d) (before|after):", got.stderr)
    assert order == [("1", "before"), ("1", "after"), ("2", "after"), ("2", "before")]
    assert f"Trees: before `{ROOT}`" in got.stdout
    table = rows(got.stdout, "`bench_scale.py --quick")
    assert "2 runs per side" in got.stdout
    assert sorted(table) == sorted(
        [
            "Records appends: one write (mean)",
            "Records appends: open",
            "Records appends: read one element",
            "Records appends: cold open",
            "whole run",
        ]
    )
    for name, (_, before, after, ratio, _, sb, sa) in table.items():
        assert float(before) > 0 and float(after) > 0, name
        assert float(ratio) == pytest.approx(float(after) / float(before), rel=2e-3), name
        assert sb.endswith("%") and sa.endswith("%")
    assert table["whole run"][0] == "s"
    assert float(table["whole run"][4]) > 0  # CPU time from getrusage
    assert table["Records appends: one write (mean)"][4] != "-"  # the script's CPU figures
    assert table["Records appends: open"][4] == "-"  # timed without CPU
    loads = re.search(r"at the start of each run: (.*)\.", got.stdout)[1].split(", ")
    assert [w.split()[0] for w in loads] == ["before", "after", "after", "before", "end"]


def test_the_records_script_gives_its_arrayds_figures():
    got = run_ab(
        "--rounds=1",
        "--bench=bench_records.py --per-shard=50 --reads=50 --batches=2 --repeat=1 --only=reads",
    )
    assert got.returncode == 0, got.stderr
    records = rows(got.stdout, "`bench_records.py")
    assert sorted(records) == ["random batches of 256", "random single reads", "whole run"]
    assert records["random single reads"][0] == "reads/s"
    assert float(records["random single reads"][4]) > 0  # per CPU second, from the script


def test_the_arrays_script_gives_its_arrayds_figures():
    # bench_arrays.py prepares its anchors (TensorStore, zarr) in every run: the [bench] extra
    pytest.importorskip("tensorstore")
    got = run_ab(
        "--rounds=1",
        "--bench=bench_arrays.py --n=512 --chunk=128 --reads=3 --repeat=1 --only=A3",
    )
    assert got.returncode == 0, got.stderr
    arrays = rows(got.stdout, "`bench_arrays.py")
    assert sorted(arrays) == ["A3", "whole run"]
    assert arrays["A3"][0] == "ms/read" and float(arrays["A3"][1]) > 0


def test_alias_reaches_only_missing_modules(ab, tmp_path):
    shim = ab.write_shim(
        tmp_path / "shim",
        {"arrayds.moved_away.errs": "arrayds.errors", "arrayds.records": "arrayds.errors"},
    )
    code = (
        "import arrayds.errors as old, arrayds.moved_away.errs as new, arrayds.records as r\n"
        "assert new is old and old.__spec__.name == 'arrayds.errors'\n"
        "assert r.__name__ == 'arrayds.records'\n"
        "print('ok')"
    )
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{shim}")
    got = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert got.returncode == 0 and got.stdout == "ok\n", got.stderr


def test_a_tree_without_arrayds_is_refused(ab, tmp_path):
    with pytest.raises(SystemExit, match=r"--before .*: import arrayds is not this tree's"):
        ab.main(["--before", str(tmp_path), "--after", str(ROOT), "--bench=bench_scale.py"])


def test_a_failing_run_names_the_script_and_tree():
    got = run_ab("--rounds=1", "--bench=bench_scale.py --appends=1")
    assert got.returncode == 1
    assert f"bench_scale.py --appends=1 on {ROOT} failed" in got.stderr
    assert "--appends must be at least 2" in got.stderr


@pytest.mark.parametrize(
    "args, message",
    [
        (["--bench=bench_nothing.py"], "SCRIPT one of"),
        (["--bench=bench_scale.py --json=x"], "passes --json itself"),
        (["--bench=bench_scale.py", "--alias=arrayds.x"], "--alias wants NEW=OLD"),
        (["--bench=bench_scale.py", "--alias=a.b=a.b"], "--alias wants NEW=OLD"),
        (["--bench=bench_scale.py", "--rounds=0"], "--rounds must be at least 1"),
    ],
)
def test_bad_arguments_are_refused(ab, capsys, args, message):
    with pytest.raises(SystemExit) as exc:
        ab.main(["--before", str(ROOT), "--after", str(ROOT), *args])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err
