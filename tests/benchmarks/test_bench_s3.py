"""benchmarks/bench_s3.py and its anchor runner (benchmarks/anchor_runner.py) work end to
end at a tiny size on the moto S3 server: the arrayds rows run without an anchor
interpreter (and the output says the anchor rows were skipped); with one, the anchor's
sections come back with the proxy's request counts of each section.

The anchor interpreter of these tests is the project's own Python (the anchor venv of
``make bench-anchors`` is not part of ``make test``): the anchor script runs there with
the project's zarr and icechunk, which exercises the runner's protocol, not the anchor
versions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("moto")
pytest.importorskip("s3fs")
pytest.importorskip("zarr")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
TINY = ["--size=1024", "--reads=4", "--repeat=1", "--threads=4", "--records=0", "--latency-ms=0"]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench():
    module = _load("bench_s3")
    yield module
    del sys.modules["bench_s3"]


@pytest.fixture(scope="module")
def runner():
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    import anchor_runner

    return anchor_runner


@pytest.fixture(scope="module")
def server():
    sys.path.insert(0, str(BENCH.parent / "tests" / "s3"))
    from s3server import ServerProcess

    s = ServerProcess(latency=0.0)
    yield s
    s.stop()


def _rows(out: str, title_start: str) -> list[str]:
    """The reader names of the first table under the heading starting ``title_start``."""
    blocks = out.split(f"### {title_start}", 1)[1].split("\n\n")
    table = next(b for b in blocks if b.startswith("| reader |"))
    return [line.split(" | ")[0].lstrip("| ") for line in table.splitlines()[2:]]


def test_arrayds_rows_run_without_an_anchor_interpreter(bench, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("ARRAYDS_ANCHOR_PYTHON", str(tmp_path / "no-python"))
    assert bench.main([*TINY, "--records=1024", "--record-batches=2"]) == 0
    out = capsys.readouterr().out
    assert f"anchor rows skipped: no anchor interpreter at {tmp_path / 'no-python'}" in out
    for title in ("4 random chunks, one after another, cold", "whole array through dask"):
        assert _rows(out, title) == ["arrayds, fsspec", "arrayds, obstore"]
    assert "| workload | best peer |" not in out  # no peer, no verdict
    assert "webdataset rows skipped: no anchor interpreter" in out
    records = _rows(out, "Records: 1,024 records")
    assert records == ["arrayds, fsspec"] * 8 + ["arrayds, obstore"] * 8
    assert "first 512 records of each epoch" in out
    assert "Fully shuffled arrayds / the best webdataset" not in out


def test_only_the_records_rows(bench, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("ARRAYDS_ANCHOR_PYTHON", str(tmp_path / "no-python"))
    assert bench.main([*TINY, "--records=600", "--only-records"]) == 0
    out = capsys.readouterr().out
    assert "random chunks" not in out and "through dask" not in out
    assert _rows(out, "Records: 600 records") == ["arrayds, fsspec"] * 8 + ["arrayds, obstore"] * 8
    assert "Measured over whole epochs" in out
    assert "one request per record (gap 0; first 600 records)" in out


def test_anchor_rows_come_from_the_anchor_interpreter(bench, monkeypatch, capsys):
    monkeypatch.setenv("ARRAYDS_ANCHOR_PYTHON", sys.executable)
    assert bench.main([*TINY, "--anchors=zarr-fsspec"]) == 0
    out = capsys.readouterr().out
    assert f"anchors run by {sys.executable}" in out
    zarr_row = f"zarr {_version('zarr')} sharded, fsspec"
    assert _rows(out, "4 random chunks, 4 threads, warm") == [
        "arrayds, fsspec",
        "arrayds, obstore",
        zarr_row,
    ]
    verdicts = [line for line in out.splitlines() if line.startswith("| 4 random chunks")]
    assert len(verdicts) == 3 and all(f"| {zarr_row} | **" in line for line in verdicts)


def test_sections_carry_the_counters_of_their_run(runner, server, tmp_path, monkeypatch):
    """The runner resets the counters before each section and reads them after it: the
    requests of the warm-up read and of the setup between sections are not counted."""
    import s3fs

    monkeypatch.setenv("ARRAYDS_ANCHOR_PYTHON", sys.executable)
    direct = server.storage_options(through_proxy=False)
    s3fs.S3FileSystem(**direct).mkdir("counters")
    data = np.arange(512 * 512, dtype="f4").reshape(512, 512)
    np.save(tmp_path / "d.npy", data)
    job = {
        "data": str(tmp_path / "d.npy"),
        "bucket": "counters",
        "zarr_path": "z.zarr",
        "icechunk_path": "ic",
        "direct": direct,
        "proxy": server.storage_options(),
        "chunk": 256,
        "shard": 512,
        "level": 3,
        "cells": [[0, 0], [256, 256]],
        "threads": 2,
        "repeat": 2,
        "region": [128, 384],
    }
    written = runner.run_anchor("s3_reads", {**job, "mode": "write"})
    assert written.sections == {}
    assert written.info["stored"]["zarr"] > 0
    calls = []

    def counters(reset: bool) -> dict:
        calls.append(reset)
        return server.stats(reset=reset)

    got = runner.run_anchor("s3_reads", {**job, "mode": "read", "reader": "zarr-fsspec"}, counters)
    assert list(got.sections) == ["cold", "warm", "threads", "dask", "region", "whole"]
    assert calls == [True, False] * 12  # six sections, two runs each
    cold, warm = got.sections["cold"], got.sections["warm"]
    assert warm["runs"] == 2
    # each chunk its own read, from an array opened before the section: a GET or two
    # per chunk (zarr may fetch the shard index again), nothing of the open or warm-up
    assert 2 <= warm["requests"] <= 4 and set(warm["methods"]) == {"GET"}
    assert cold["requests"] > warm["requests"]  # the open's metadata reads come in
    assert warm["seconds"] > 0 and warm["cpu"] >= 0
    assert got.info["versions"]["zarr"] == _version("zarr")


def test_a_failing_anchor_script_raises_with_its_stderr(runner, monkeypatch, tmp_path):
    monkeypatch.setenv("ARRAYDS_ANCHOR_PYTHON", sys.executable)
    np.save(tmp_path / "d.npy", np.zeros(1))
    job = {
        "mode": "sideways",
        "data": str(tmp_path / "d.npy"),
        "direct": {"key": "k", "secret": "s"},
    }
    with pytest.raises(runner.AnchorError, match="unknown mode 'sideways'"):
        runner.run_anchor("s3_reads", job)


def test_unknown_script_and_missing_interpreter(runner, monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="no anchor script .*nothing.py"):
        runner.run_anchor("nothing", {})
    monkeypatch.setenv("ARRAYDS_ANCHOR_PYTHON", str(tmp_path))  # a directory
    with pytest.raises(runner.AnchorUnavailable, match="ARRAYDS_ANCHOR_PYTHON.*make bench-anchors"):
        runner.run_anchor("s3_reads", {})


def test_unknown_anchor_reader_is_refused(bench, capsys):
    with pytest.raises(SystemExit):
        bench.main([*TINY, "--anchors=zarr-fsspec,hdf5"])
    assert "unknown anchor readers ['hdf5']" in capsys.readouterr().err


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)
