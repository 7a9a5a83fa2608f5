"""The committed datasets of tests/data/datasets pin both manifest formats on disk.

* ``v2`` (written by this release): every value of every node at every retained
  version, the head fields and the file layout; writing the fixture again with the
  current code gives the same structure (file layout and head fields, ids and times
  aside), so a change of format 2 cannot pass unnoticed.
* ``v3`` (this release with small limits: long lists with indexes, format version 3):
  read value by value as ``v2``; its heads reference indexes.
* ``v2-unindexed`` (written by the release before segment references carried a
  summary): read value by value as ``v2``, segments loaded whole as they must be.
* ``v1`` (written by the last format 1 release, make_fixtures.py): this release reads
  it, appends to it and it stays format 1; ``upgrade`` makes it format 2 with
  identical contents; the format 1 release then refuses it with its own message.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arrayds
from arrayds.nodes import commit
from arrayds.nodes import history as log
from arrayds.nodes import registry as kinds
from arrayds.storage import get_store
from arrayds.verify import verify

DATA = Path(__file__).resolve().parents[1] / "data" / "datasets"
ROOT = DATA.parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "arrayds_make_fixtures", DATA / "make_fixtures.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


fx = _script()
EXPECTED = fx.expected()


@pytest.fixture(params=["v2", "v2-unindexed", "v3"])
def v2(tmp_path, request) -> str:
    """A copy of a v2 fixture (tests never change the committed files)."""
    return shutil.copytree(DATA / request.param, tmp_path / request.param)


@pytest.fixture
def v1(tmp_path) -> str:
    return shutil.copytree(DATA / "v1", tmp_path / "v1")


def _handle(store, node: str, version: commit.NodeVersion):
    kind = kinds.get(version.kind)
    return kind.open(store, node, kind.parse(version.raw, node), "r")


def _check_content(store, node: str, version: commit.NodeVersion, want: Any) -> None:
    spec = EXPECTED[node]
    h = _handle(store, node, version)
    if spec["kind"] == "group":
        assert dict(h.attrs) == want, (node, version.generation)
    elif spec["kind"] == "array":
        got = h[...]
        assert got.dtype == want.dtype and got.shape == want.shape, (node, version.generation)
        np.testing.assert_array_equal(got, want)
    else:
        assert len(h) == len(want) and [h[i] for i in range(len(h))] == want


def _files(url: str | Path) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), url) for d, _, fs in os.walk(url) for f in fs)


# ------------------------------------------------------------------ format 2


def test_v2_fixture_reads_every_value_at_every_version(v2):
    store = get_store(str(v2), None)
    for node, spec in EXPECTED.items():
        vs = commit.versions(store, node)
        assert [v.generation for v in vs] == list(range(1, len(spec["versions"]) + 1)), node
        assert all(v.time is not None for v in vs)
        assert [v.time for v in vs] == sorted(v.time for v in vs)
        for v, want in zip(vs, spec["versions"], strict=True):
            got = commit.read(store, node, version=v.generation)
            assert got.generation == v.generation
            assert got.format_version == (3 if log.has_index(got.head) else 2)
            _check_content(store, node, got, want)
        if "attrs" in spec:
            assert dict(arrayds.open(str(v2))[node].attrs) == spec["attrs"]
    # the public reads see the current state
    g = arrayds.open(str(v2))
    np.testing.assert_array_equal(g["x"][...], EXPECTED["x"]["versions"][-1])
    assert list(g["r"]) == EXPECTED["r"]["versions"][-1]
    assert sorted(g) == ["g", "r", "x"] and list(g["g"]) == ["y"]
    report = verify(str(v2))
    assert report.ok, report.problems


def test_v2_fixture_holds_the_format_on_disk():
    """What the fixture pins: the array's head names one merged segment of 69
    entries and a tail of one; its history keeps every replaced head; short lists
    stay inline; every file a head or version names exists."""
    store = get_store(str(DATA / "v2"), None)
    x = json.loads((DATA / "v2" / "x" / "arrayds.json").read_bytes())
    assert x["format_version"] == 2 and x["generation"] == 13
    assert [s["count"] for s in x["shards"]["segments"]] == [69]
    assert len(x["shards"]["tail"]) == 1
    for node in EXPECTED:
        head = commit.read(store, node).head
        assert head["format_version"] == 2 and log.parse_time(head["time"]) is not None
        for g in range(1, head["generation"]):
            kept = json.loads(store.get(f"{node}/{log.version_key(g)}".lstrip("/")))
            assert kept["generation"] == g
            for p in log.log_files(store, node, kept) | commit.referenced_files(kept):
                assert store.exists(f"{node}/{p}".lstrip("/")), (node, g, p)
    r = commit.read(store, "r").head
    assert isinstance(r["shards"], list) and len(r["shards"]) == 3
    seg = json.loads(store.get("x/" + x["shards"]["segments"][0]["path"]))
    assert seg["format"] == "arrayds-segment" and seg["count"] == len(seg["entries"]) == 69
    # the reference says what its entries hold: their records and their chunk box
    ref = x["shards"]["segments"][0]
    assert ref["records"] == sum(e["records"] for e in seg["entries"]) == 162
    assert ref["box"] == [[0], [100]]
    old = json.loads((DATA / "v2-unindexed" / "x" / "arrayds.json").read_bytes())
    assert set(old["shards"]["segments"][0]) == {"path", "count"}


_ID = re.compile(r"[0-9a-f]{24}(?:-[0-9a-f]{8}(?=\.json))?")
"""A write id, or a segment's name (``<write id>.json`` in the fixtures, the write id
and 8 hex digits since segments are named after the committing write)."""


def _normal(value: Any) -> Any:
    """A JSON value with write ids replaced by ``<id>`` and ``commit``/``time`` dropped."""
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items() if k not in ("commit", "time")}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, str):
        return _ID.sub("<id>", value)
    return value


def _structure(url: Path) -> dict[str, Any]:
    """The file layout (ids replaced) and every head, version file and segment
    (normalised). Segment files that no head or version names are left out: they
    are what a merging commit writes too many (see tests/nodes/test_log.py)."""
    store = get_store(str(url), None)
    named: set[str] = set()
    docs = {}
    for node in EXPECTED:
        heads = [commit.read(store, node).head]
        heads += [
            commit.read(store, node, version=v.generation).head
            for v in commit.versions(store, node)[:-1]
        ]
        for h in heads:
            named |= {f"{node}/{p}".lstrip("/") for p in log.log_files(store, node, h)}
        docs[node] = [_normal(h) for h in heads]
    files = [f for f in _files(url) if not (f"/{log.LOG_DIR}/" in f"/{f}" and f not in named)]
    segments = {_ID.sub("<id>", f): _normal(json.loads(store.get(f))) for f in sorted(named)}
    return {
        "files": sorted(_ID.sub("<id>", f) for f in files),
        "heads": docs,
        "segments": sorted(json.dumps(s, sort_keys=True) for s in segments.values()),
    }


def test_regenerating_v2_gives_the_same_structure(tmp_path):
    fx.build(str(tmp_path / "again"))
    assert _structure(tmp_path / "again") == _structure(DATA / "v2")


# ------------------------------------------------------------------ format 1


def _logical(raw: dict) -> dict:
    """A manifest without what every commit stamps (docs/spec.md 3 and 12.2)."""
    stamped = ("format_version", "generation", "commit", "recent", "time")
    return {k: v for k, v in raw.items() if k not in stamped}


def test_v1_fixture_reads_appends_and_stays_format_1(v1):
    store = get_store(str(v1), None)
    for node, spec in EXPECTED.items():
        cur = commit.read(store, node)
        assert cur.format_version == 1 and cur.time is None
        assert [v.generation for v in commit.versions(store, node)] == [cur.generation]
        _check_content(store, node, cur, spec["versions"][-1])
    assert not [f for f in _files(v1) if "_arrayds" in f]
    x = arrayds.open_array(str(v1), "x", mode="r+")
    x.append(np.arange(105, 110))
    x[0:3] = 7
    arrayds.to_arrayrecord([b"more"], str(v1), "r", mode="a")
    arrayds.open_group(str(v1), mode="r+").attrs.update({"after": 1})
    want = np.concatenate([EXPECTED["x"]["versions"][-1], np.arange(105, 110)])
    want[0:3] = 7
    np.testing.assert_array_equal(arrayds.open_array(str(v1), "x")[...], want)
    assert list(arrayds.open(str(v1))["r"])[-1] == b"more"
    for node in EXPECTED:
        assert commit.read(store, node).format_version == 1
    assert not [f for f in _files(v1) if "_arrayds" in f]  # no history, no segments
    assert verify(str(v1)).ok


def test_upgrade_makes_v1_format_2_with_identical_contents(v1):
    store = get_store(str(v1), None)
    before = {node: commit.read(store, node) for node in EXPECTED}
    assert arrayds.upgrade(str(v1), dry_run=True) == ["", "g", "g/y", "r", "x"]
    assert all(commit.read(store, n).format_version == 1 for n in EXPECTED)  # dry run
    assert arrayds.upgrade(str(v1)) == ["", "g", "g/y", "r", "x"]
    for node, spec in EXPECTED.items():
        now = commit.read(store, node)
        assert now.format_version == 2 and now.generation == before[node].generation + 1
        assert _logical(now.raw) == _logical(before[node].raw)
        _check_content(store, node, now, spec["versions"][-1])
        # the format 1 head is not kept: the history starts at the upgrade
        assert [v.generation for v in commit.versions(store, node)] == [now.generation]
    x = commit.read(store, "x").head
    assert x["shards"]["segments"]  # 70 entries: a log now
    assert arrayds.upgrade(str(v1)) == []  # nothing left to do
    a = arrayds.open_array(str(v1), "x", mode="r+")
    a.append(np.arange(105, 108), compact=False)
    assert commit.read(store, "x").generation == before["x"].generation + 2
    assert verify(str(v1)).ok


def test_v3_fixture_holds_indexes_on_disk():
    """``v3`` (segments of 4 entries, indexes of 2 references): the head of "x"
    references indexes then segments, in format version 3 (its versions from the
    first index on, the others and every other node 2); every index holds segment
    references whose summary is its reference's; every file any version names
    exists."""
    store = get_store(str(DATA / "v3"), None)
    head = commit.read(store, "x").head
    assert head["format_version"] == 3
    fvs = [commit.read(store, "x", version=v.generation) for v in commit.versions(store, "x")]
    assert [v.format_version for v in fvs] == [2] * 7 + [3] * 6
    assert all(commit.read(store, n).format_version == 2 for n in ("", "r", "g", "g/y"))
    refs = head["shards"]["segments"]
    seg_limit, index_limit, tail_limit = fx.INDEXED_LIMITS
    kinds_ = ["refs" in r for r in refs]
    assert kinds_[: kinds_.count(True)] == [True] * kinds_.count(True) >= [True, True]
    assert kinds_.count(False) <= index_limit and len(head["shards"]["tail"]) <= tail_limit
    for r in refs:
        if "refs" in r:
            doc = json.loads(store.get(f"x/{r['path']}"))
            assert doc["format"] == "arrayds-index" and doc["count"] == r["refs"] == index_limit
            assert sum(x["count"] for x in doc["refs"]) == r["count"]
            assert all(x["count"] <= seg_limit and "refs" not in x for x in doc["refs"])
    for v in commit.versions(store, "x"):
        for p in log.log_files(store, "x", commit.read(store, "x", version=v.generation).head):
            assert store.exists(f"x/{p}"), (v.generation, p)


def test_upgrade_gives_an_unindexed_v2_list_its_segment_summaries(tmp_path):
    url = shutil.copytree(DATA / "v2-unindexed", tmp_path / "old")
    store = get_store(str(url), None)
    before = commit.read(store, "x")
    assert log.needs_index(before.head)
    assert arrayds.upgrade(str(url), dry_run=True) == ["x"]  # the one node with segments
    assert arrayds.upgrade(str(url)) == ["x"]
    now = commit.read(store, "x")
    assert not log.needs_index(now.head) and now.generation == before.generation + 1
    refs = now.head["shards"]["segments"]
    assert all("records" in r and "box" in r for r in refs)
    assert _logical(now.raw) == _logical(before.raw)
    _check_content(store, "x", now, EXPECTED["x"]["versions"][-1])
    # the versions before keep their segments; nothing is left to do
    old = commit.read(store, "x", version=before.generation)
    assert old.raw["shards"] == before.raw["shards"]
    assert arrayds.upgrade(str(url)) == []
    assert verify(str(url)).ok


def test_the_release_before_indexes_refuses_only_indexed_nodes(tmp_path):
    """The last release before indexes (make_fixtures.V2_RELEASE, from git) reads
    ``v3``'s nodes without an index and refuses its indexed array "x" by its format
    version, never taking an index for a damaged segment."""
    if subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{fx.V2_RELEASE}^{{commit}}"],
        capture_output=True,
    ).returncode:
        pytest.skip(f"this checkout has no commit {fx.V2_RELEASE} (no git history)")
    src = fx.v1_release(tmp_path / "release", fx.V2_RELEASE)
    url = shutil.copytree(DATA / "v3", tmp_path / "v3")
    code = (
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in "
        "type(f).__module__]; sys.path.insert(0, sys.argv[1]); import arrayds; "
        "print(list(arrayds.open(sys.argv[2])['r'])[:2]); arrayds.open_array(sys.argv[2], 'x')"
    )
    old = subprocess.run(
        [sys.executable, "-c", code, str(src), str(url)], capture_output=True, text=True
    )
    assert old.stdout.strip() == repr(EXPECTED["r"]["versions"][-1][:2]), old.stderr
    assert old.returncode != 0
    assert (
        "dataset format version 3 is newer than this arrayds supports (2); upgrade arrayds"
        in old.stderr
    ), old.stderr


def test_the_format_1_release_refuses_an_upgraded_dataset(v1, tmp_path):
    """The last format 1 release (make_fixtures.py builds it from git) reads the
    fixture, and after ``upgrade`` refuses it with its newer-format message."""
    if subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{fx.V1_RELEASE}^{{commit}}"],
        capture_output=True,
    ).returncode:
        pytest.skip(f"this checkout has no commit {fx.V1_RELEASE} (no git history)")
    src = fx.v1_release(tmp_path / "release")
    code = (
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in "
        "type(f).__module__]; sys.path.insert(0, sys.argv[1]); import arrayds; "
        "print(arrayds.open_array(sys.argv[2], 'x').shape)"
    )

    def old(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", code, str(src), *args], capture_output=True, text=True
        )

    ok = old(str(v1))
    assert ok.returncode == 0 and ok.stdout.strip() == "(105,)", ok.stderr
    arrayds.upgrade(str(v1))
    refused = old(str(v1))
    assert refused.returncode != 0
    assert (
        "dataset format version 2 is newer than this arrayds supports (1); upgrade arrayds"
        in refused.stderr
    ), refused.stderr
