"""benchmarks/bench_scale.py runs end to end at a tiny size (so the commit-path
work cannot break it unnoticed), and its helpers measure what they say."""

from __future__ import annotations

import os
import re

import pytest
from benchscript import loaded


@pytest.fixture(scope="module")
def bench():
    with loaded("bench_scale") as module:
        yield module


def test_tiny_run_prints_every_workload(bench, tmp_path, capsys):
    rc = bench.main(
        ["--quick", "--appends=12", "--records=12", "--xr-steps=3", f"--workdir={tmp_path}"]
    )
    out = capsys.readouterr().out
    assert rc == 0
    for title in (
        "Array appends: 12 writes",
        "Records appends: 12 writes",
        "xarray appends along time: 3 writes",
    ):
        assert f"### {title}" in out
    assert "| per write around write 10 |" in out
    assert "| per write around write 12 |" in out  # the last write is a mark too
    assert "| on disk, allocated (du) |" in out
    # every zarr column is the anchor interpreter's zarr-python 3.4, or says it was skipped
    # (no other zarr stands in)
    assert out.count("\nzarr: zarr-python 3.4") == 3 and "in-process" not in out
    # the history rows beside icechunk (array workload): one table, every row filled
    assert out.count("History beside icechunk ") == 1
    assert "(the same 12 appends, each a commit on branch main)" in out
    history = out.split("History beside icechunk ")[1].split("###")[0]
    assert "| versions kept | " in history
    versions = re.search(r"\| versions kept \| ([\d,]+) \| ([\d,]+) \|", history)
    assert versions and int(versions[2]) == 14  # first snapshot, create, 12 appends
    assert int(versions[1]) >= 13  # arrayds: creation and 12 appends (and merges)
    for row in (
        "| per write around write 12 |",
        "| open, current version |",
        "| read one element, current version |",
        "| time travel: open the version of ",
        "| time travel: read one element of it |",
        "| on disk, allocated (du), before gc |",
        "expire_snapshots + garbage_collect): time |",
        "| after gc: on disk, allocated |",
    ):
        assert row in history, row
    kept = re.search(r"\| after gc: versions kept \| (\S+) \| (\d+) \|", history)
    assert kept and int(kept[2]) == 2  # icechunk keeps its first snapshot and the tip
    import arrayds

    if not hasattr(arrayds, "compact"):
        assert out.count(bench.NO_COMPACT) == 12  # four rows for each workload
    assert os.listdir(tmp_path) == []  # the work folder is removed


def test_timed_writes_interleave_every_writer_the_first_rotating(bench):
    calls: list[tuple[str, int]] = []
    out = bench.timed_writes(
        3, *(lambda i, name=name: calls.append((name, i)) for name in ("a", "b", "c"))
    )
    assert calls == [
        ("a", 0),
        ("b", 0),
        ("c", 0),
        ("b", 1),
        ("c", 1),
        ("a", 1),
        ("c", 2),
        ("a", 2),
        ("b", 2),
    ]
    assert [(len(wall), len(cpu)) for wall, cpu in out] == [(3, 3)] * 3


def test_counts_below_two_are_refused(bench, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--appends=1"])
    assert e.value.code == 2
    assert "--appends must be at least 2" in capsys.readouterr().err


def test_around_is_the_median_of_a_window_centred_on_the_mark(bench):
    values = [float(i) for i in range(1, 201)]  # write k costs k
    assert bench.around(values, 100) == pytest.approx(100.5)  # writes 96..105
    assert bench.around(values, 200) == pytest.approx(190.5)  # the last 20 writes
    assert bench.around(values[:3], 10) == pytest.approx(2.0)  # fewer writes than the window


def test_disk_usage_counts_allocated_and_apparent_bytes(bench, tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "data").write_bytes(os.urandom(10_000))
    with open(tmp_path / "sparse", "wb") as f:
        f.seek(1 << 20)
        f.write(b"1")
    os.sync()
    allocated, apparent = bench.disk_usage(str(tmp_path))
    assert apparent == 10_000 + (1 << 20) + 1
    assert allocated >= 10_000
    blocks = sum(
        os.stat(p).st_blocks * 512 for p in (tmp_path / "sub" / "data", tmp_path / "sparse")
    )
    assert allocated == blocks
