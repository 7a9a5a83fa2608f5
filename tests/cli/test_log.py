"""``arrayds log`` lists a node's versions newest first; ``arrayds gc
--keep-versions/--older-than`` expires old versions."""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest

import arrayds

from .conftest import arrayds_executable


def _history(url: str) -> arrayds.Array:
    a = arrayds.open_array(url, "x", mode="w", shape=(4,), dtype="i4", chunks=2)
    for i in range(3):
        a[:] = np.full(4, i)
    return a


def test_log_lists_the_versions_newest_first(run, tmp_path):
    url = str(tmp_path / "ds")
    _history(url)
    r = run("log", url, "--component", "x")
    assert r.exit_code == 0, r.output
    lines = r.output.splitlines()
    assert [int(line.split()[0]) for line in lines] == [4, 3, 2, 1]
    assert lines[0].endswith("(current)") and not any("(current)" in x for x in lines[1:])
    vs = arrayds.versions(url, "x")
    for line, v in zip(lines, reversed(vs), strict=True):
        gen, when, commit_id = line.split()[:3]
        assert when == v.time.isoformat(timespec="seconds") and commit_id == v.commit
    got = json.loads(run("log", url, "-c", "x", "--json").output)
    assert [g["generation"] for g in got] == [4, 3, 2, 1]
    assert got[0]["current"] and got[0]["time"] == vs[-1].time.isoformat()
    # the root group: one version
    assert re.fullmatch(r"\s*1\s+\S+\s+[0-9a-f]{24}\s+\(current\)\n", run("log", url).output)


def test_log_errors(run, tmp_path):
    r = run("log", str(tmp_path / "none"))
    assert r.exit_code == 1 and "FileNotFoundError: no arrayds node" in r.output
    url = str(tmp_path / "ds")
    _history(url)
    r = run("log", url, "-c", "nothing")
    assert r.exit_code == 1 and "FileNotFoundError" in r.output
    r = run("log", url, "-c", "../up")
    assert r.exit_code == 1 and "ValueError" in r.output


def test_gc_expires_versions(run, tmp_path):
    url = str(tmp_path / "ds")
    _history(url)
    r = run("gc", url, "--min-age", "0", "--keep-versions", "2", "--dry-run")
    assert r.exit_code == 0, r.output
    assert r.output.count("would expire ") == 3  # two lines and the summary
    assert "would expire 2 versions" in r.output
    assert len(arrayds.versions(url, "x")) == 4
    r = run("gc", url, "--min-age", "0", "--keep-versions", "2", "--json")
    report = json.loads(r.output)
    assert report["keep_versions"] == 2 and report["older_than_seconds"] is None
    assert len(report["expired"]) == 2 and report["expired_bytes"] > 0 and report["removed"]
    assert [v.generation for v in arrayds.versions(url, "x")] == [3, 4]
    r = run("gc", url, "--min-age", "0", "--older-than", "0")
    assert "expired 1 version " in r.output and "kept 2" in r.output
    assert [v.generation for v in arrayds.versions(url, "x")] == [4]
    assert arrayds.open_array(url, "x")[:].tolist() == [2, 2, 2, 2]
    r = run("gc", url, "--json")
    assert json.loads(r.output)["older_than_seconds"] == 7 * 86400


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["--older-than", "soon"], "--older-than"),
        (["--keep-versions", "-1"], "--keep-versions"),
        (["--keep-versions", "many"], "--keep-versions"),
    ],
)
def test_gc_bad_retention_flags(run, tmp_path, args, hint):
    url = str(tmp_path / "ds")
    _history(url)
    r = run("gc", url, *args)
    assert r.exit_code == 2 and hint in r.output
    assert len(arrayds.versions(url, "x")) == 4


def test_log_console_script(tmp_path):
    url = str(tmp_path / "ds")
    _history(url)
    out = subprocess.run(
        [arrayds_executable(), "log", url, "-c", "x"], capture_output=True, text=True, check=True
    ).stdout
    assert len(out.splitlines()) == 4
