"""benchmarks/bench_manifest_scale.py runs end to end at its quick size (so the manifest
work cannot break it unnoticed), and the datasets it builds from hard links
and a version 1 manifest are what a dask write of the same shards gives."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import dask.array as da
import numpy as np
import pytest
from benchscript import loaded

import arrayds
from arrayds import records
from arrayds.verify import verify


@pytest.fixture(scope="module")
def bench():
    with loaded("bench_manifest_scale") as module:
        yield module


def _rows(out: str, title: str) -> dict[tuple[int, str], list[str]]:
    """The rows of the table under ``#### title``: (shards, library) -> cells."""
    body = out.split(f"#### {title}\n\n")[1].split("\n\n")[0]
    rows = {}
    for line in body.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[int(cells[0].replace(",", "")), cells[1]] = cells
    return rows


def test_quick_run_measures_every_dataset(bench, tmp_path, capsys, monkeypatch):
    missing = tmp_path / "no-python"
    monkeypatch.setenv(bench.ANCHOR_ENV, str(missing))
    work = tmp_path / "work"
    work.mkdir()
    assert bench.main(["--quick", f"--workdir={work}"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("## Manifest scale\n")
    assert f"Anchor rows (zarr, icechunk) skipped: no anchor interpreter at {missing}" in out
    local = _rows(out, "Arrays on local disk")
    assert sorted(local) == [(1, "arrayds"), (1_000, "arrayds"), (10_000, "arrayds")]
    # the manifest grows with the shards, and a fresh process reads all of it
    sizes = {n: cells[2] for (n, _lib), cells in local.items()}
    assert sizes[1].endswith(" B") and sizes[10_000].endswith(" MiB")
    assert local[1, "arrayds"][5] == "-"  # one shard: no other row to read later
    assert re.fullmatch(r"[\d.]+ ms", local[10_000, "arrayds"][5])
    assert sorted(_rows(out, "Records datasets on local disk")) == [
        (1, "arrayds"),
        (10_000, "arrayds"),
    ]
    s3 = _rows(out, "Arrays on S3 (moto, 5 ms per request)")
    assert sorted(s3) == [(1, "arrayds"), (1_000, "arrayds")]
    opened, first = (int(x) for x in s3[1_000, "arrayds"][7].split(" + "))
    assert opened >= 1 and first >= 1  # every request went through the counting proxy
    assert "| open <= 5 ms |" in out  # the targets, at 10,000 shards in the quick run
    assert "Targets at 10,000 shards (local disk), today:" in out
    assert os.listdir(work) == []  # the built datasets are removed


def _head(url: str) -> dict:
    with open(os.path.join(url, "arrayds.json")) as f:
        return json.load(f)


def _entries(url: str, head: dict) -> list[dict]:
    """The shard list of a head, its segments read (docs/spec.md section 14)."""
    log = head["shards"]
    out = []
    for seg in log["segments"]:
        with open(os.path.join(url, seg["path"])) as f:
            out += json.load(f)["entries"]
    return out + log["tail"]


def test_built_array_is_what_a_dask_write_of_the_shards_stores(bench, tmp_path):
    n = 40  # above the inline tail's 32 entries: the list is a segment
    template = bench.array_template(str(tmp_path))
    built = str(tmp_path / "built")
    bench.build_array(built, n, template)
    written = str(tmp_path / "written")
    row = np.arange(bench.ROW, dtype="<f8")
    x = da.from_array(np.tile(row, (n, 1)), chunks=(1, bench.ROW))
    arrayds.to_arrayrecord(x, written, compression="uncompressed", shard_size=1)
    ours, theirs = _head(built), _head(written)
    volatile = {"commit", "recent", "generation", "time", "shards"}  # what a commit stamps
    assert {k: v for k, v in ours.items() if k not in volatile} == {
        k: v for k, v in theirs.items() if k not in volatile
    }
    for head in (ours, theirs):  # one segment of every entry, an empty tail
        assert [s["count"] for s in head["shards"]["segments"]] == [n]
        assert head["shards"]["tail"] == []
    a, b = _entries(built, ours), _entries(written, theirs)
    assert [{**e, "path": None} for e in a] == [{**e, "path": None} for e in b]
    assert [e["path"].rsplit("-", 1)[1] for e in a] == [f"{k}.array_record" for k in range(n)]
    np.testing.assert_array_equal(arrayds.open_array(built)[:], np.tile(row, (n, 1)))
    report = verify(built)
    assert report.ok and report.shards == n and report.records == n
    # the shard files are links of the template (a copy of it starts each group)
    inodes = {os.stat(os.path.join(built, e["path"])).st_ino for e in a}
    assert len(inodes) == 1


def test_built_records_are_what_a_write_of_the_shards_stores(bench, tmp_path):
    n = 40
    template = bench.records_template(str(tmp_path))
    built = str(tmp_path / "built")
    bench.build_records(built, n, template)
    written = str(tmp_path / "written")
    arrayds.to_arrayrecord([bench.RECORD] * n, written, compression="uncompressed", num_shards=n)
    ours, theirs = _head(built), _head(written)
    volatile = {"commit", "recent", "generation", "time", "shards"}  # what a commit stamps
    assert {k: v for k, v in ours.items() if k not in volatile} == {
        k: v for k, v in theirs.items() if k not in volatile
    }
    a, b = _entries(built, ours), _entries(written, theirs)
    assert [{**e, "path": None} for e in a] == [{**e, "path": None} for e in b]
    assert [e["path"].split(".array_record-")[1] for e in a] == [
        e["path"].split(".array_record-")[1] for e in b
    ]
    ds = records.open_records(built)
    assert len(ds) == n and ds[n - 1] == bench.RECORD
    assert verify(built).ok
    size, objects = bench.arrayds_objects(built, "records", [3, 0])
    assert size == sum(os.path.getsize(os.path.join(built, k)) for k in objects[:-2])
    assert objects[-2:] == [a[3]["path"], a[0]["path"]]


def test_link_names_starts_a_copy_before_the_link_limit(bench, tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "LINKS_PER_FILE", 3)
    template = tmp_path / "template"
    template.write_bytes(b"shard")
    paths = [str(tmp_path / f"n{k}") for k in range(7)]
    bench.link_names(str(template), paths)
    inodes = [os.stat(p).st_ino for p in paths]
    assert inodes[0] == inodes[1] == inodes[2] != inodes[3] == inodes[4] == inodes[5]
    assert inodes[6] not in inodes[:6] and os.stat(template).st_ino not in inodes
    assert all(Path(p).read_bytes() == b"shard" for p in paths)


def test_pick_rows_are_distinct_rows_of_the_array(bench):
    assert bench.pick_rows(1) == [0]
    rows = bench.pick_rows(1_000)
    assert len(rows) == bench.LATER + 1 == len(set(rows))
    assert all(0 <= r < 1_000 for r in rows)
    assert bench.pick_rows(1_000) == rows  # the same rows for every library and run
    assert sorted(bench.pick_rows(5)) == [0, 1, 2, 3, 4]  # all there are


def test_a_failed_measurement_names_the_dataset(bench, tmp_path):
    warm = str(tmp_path / "warm")
    bench.build_array(warm, 1, bench.array_template(str(tmp_path)))
    missing = str(tmp_path / "missing")
    ds = bench.Dataset("arrayds", "array", 3, "local", missing, warm, False, [0, 1], 0)
    with pytest.raises(RuntimeError, match=f"measuring arrayds array {missing} failed"):
        bench.measure_once(ds, None, None, dict)


def test_repeat_below_one_is_refused(bench, capsys):
    with pytest.raises(SystemExit) as e:
        bench.main(["--repeat=0"])
    assert e.value.code == 2
    assert "--repeat must be at least 1" in capsys.readouterr().err


def test_the_anchors_measure_the_same_shapes(bench, tmp_path):
    """zarr and icechunk through the anchor script: built, then measured in a fresh
    process of the anchor interpreter with the benchmark's handshake."""
    python = bench.anchor_python()
    if python is None:
        pytest.skip(f"no anchor interpreter (set {bench.ANCHOR_ENV})")
    jobs, keys = [], []
    for lib in ("zarr", "icechunk"):
        for kind in ("array", "records"):
            for n in (1, 30):
                path = str(tmp_path / f"{lib}-{kind}-{n}")
                rows = bench.pick_rows(n)
                jobs.append(
                    {
                        "lib": lib,
                        "kind": kind,
                        "n": n,
                        "path": path,
                        "rows": rows,
                        "record": bench.RECORD.hex(),
                    }  # fmt: skip
                )
                keys.append((lib, kind, n, path, rows))
    proc = bench.anchor_builds(python, jobs)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    built = [json.loads(line) for line in out.splitlines()]
    assert len(built) == len(jobs)
    for (lib, kind, n, path, rows), res in zip(keys, built, strict=True):
        assert all(os.path.exists(os.path.join(path, k)) for k in res["read_objects"])
        if n == 1:
            continue
        warm = path[: -len("30")] + "1"
        ds = bench.Dataset(lib, kind, n, "local", path, warm, False, rows, res["metadata_bytes"])
        got = bench.measure_once(ds, python, None, dict)
        assert set(got) == {"open", "first", "later"}
        assert got["later"]["versions"]["zarr"].startswith("3.")
        assert got["later"]["peak_rss"] > 10 << 20
        assert got["open"]["seconds"] > 0 and got["first"]["rchar"] >= 0
