"""``arrayds info`` / ``verify`` / ``cat`` at a version: ``--version N`` and
``--as-of TIME`` on the command line, ``version=`` / ``as_of=`` on the Python functions
behind them (:func:`arrayds.verify.describe`, :func:`arrayds.verify.verify`,
:func:`arrayds.tools.cat.open_node`), on a real local dataset whose versions differ: an
array overwritten and appended, a records dataset appended, a group given a child
later."""

from __future__ import annotations

import json
import os
from datetime import timedelta, timezone

import numpy as np
import pytest

import arrayds
from arrayds.nodes import commit
from arrayds.storage import get_store
from arrayds.tools.cat import open_node
from arrayds.verify import collect_garbage, describe, verify


@pytest.fixture
def history(tmp_path):
    """The dataset and what each version holds.

    root v1: the empty group (current until the attrs change of v2, so its children
    as of then: ``x`` at its v4 = [7 7 7 2 2 2], ``r`` at v1 = 3 records, no ``late``);
    root v2 .. the current state: ``x`` appended (v5), ``r`` appended (v2), ``late``
    created. ``x`` v2 and v3 use a shard (``only_old``) no later version of ``x`` uses.
    """
    url = str(tmp_path / "ds.ads")
    root = arrayds.open(url, mode="w")  # root v1
    a = arrayds.open_array(url, "x", mode="w", shape=(6,), dtype="i4", chunks=3)  # x v1
    a[0:3] = 1  # x v2: shard A
    a[3:6] = 2  # x v3: shard B
    a[0:3] = 7  # x v4: shard C replaces A
    arrayds.to_arrayrecord([{"i": i} for i in range(3)], url, "r")  # r v1
    root.attrs["step"] = 2  # root v2
    a.append(np.full(3, 5, "i4"))  # x v5
    arrayds.to_arrayrecord([{"i": i} for i in range(3, 5)], url, "r", mode="a")  # r v2
    arrayds.to_arrayrecord(np.arange(4), url, "g/late", chunks=2)  # a child added later
    root.attrs["step"] = 3  # root v3
    store = get_store(url)
    files = {
        g: commit.referenced_files(commit.read(store, "x", version=g).raw) for g in range(1, 6)
    }
    (only_old,) = (files[2] | files[3]) - files[4] - files[5]
    return url, only_old


def _nodes(desc):
    return {n["path"]: n for n in desc["nodes"]}


# ------------------------------------------------------------------ Python


def test_describe_a_version_shows_the_old_content(history):
    url, _ = history
    old = describe(url, version=1)
    assert old["version"] == 1
    nodes = _nodes(old)
    assert sorted(nodes) == ["/", "/r", "/x"]  # no /g/late then
    assert nodes["/x"]["shape"] == [6] and nodes["/x"]["generation"] == 4
    assert nodes["/r"]["records"] == 3
    assert old["totals"]["records"] == 3
    now = describe(url)
    assert now["version"] is None
    nodes = _nodes(now)
    assert sorted(nodes) == ["/", "/g", "/g/late", "/r", "/x"]
    assert nodes["/x"]["shape"] == [9] and nodes["/r"]["records"] == 5
    # the newest version by number: the current state
    assert sorted(_nodes(describe(url, version=3))) == sorted(nodes)
    # a component's own versions
    x2 = _nodes(describe(url, component="x", version=2))["/x"]
    assert x2["nchunks_written"] == 1 and x2["shards"] == 1
    assert _nodes(describe(url, component="r", version=1))["/r"]["records"] == 3


def test_describe_as_of(history):
    url, _ = history
    vs = arrayds.versions(url)
    # as_of the root's first commit: nothing below it existed yet
    first = describe(url, as_of=vs[0].time)
    assert first["version"] == 1 and sorted(_nodes(first)) == ["/"]
    # as_of the commit of root v2: x at v4, r at v1, no late; a naive datetime is UTC
    naive = vs[1].time.astimezone(timezone.utc).replace(tzinfo=None)
    at = describe(url, as_of=naive)
    assert at["version"] == 2
    nodes = _nodes(at)
    assert sorted(nodes) == ["/", "/r", "/x"]
    assert nodes["/x"]["shape"] == [6] and nodes["/r"]["records"] == 3


def test_verify_a_version_checks_the_shards_it_names(history):
    url, only_old = history
    for version in (1, 2, 3):
        report = verify(url, version=version)
        assert report.ok, report.problems
        assert report.version == version
    assert verify(url).version is None
    x2 = verify(url, component="x", version=2)
    assert x2.ok and x2.shards == 1 and x2.version == 2
    r1 = verify(url, component="r", version=1)
    assert r1.ok and r1.records == 3
    os.remove(os.path.join(url, "x", only_old))
    # the current state and root v1 (x at v4) do not use it
    assert verify(url).ok
    assert verify(url, version=1).ok
    for component, version in (("x", 2), ("x", 3)):
        report = verify(url, component=component, version=version)
        assert not report.ok
        (problem,) = report.problems
        assert problem.url.endswith(only_old) and problem.node == "x"
        assert "missing" in problem.message
        assert report.to_json()["version"] == version


def test_open_node_a_version(history):
    url, _ = history
    kind, x = open_node(url, "x", version=2)
    assert kind.name == "array" and x.version == 2 and x.read_only
    np.testing.assert_array_equal(x[:], [1, 1, 1, 0, 0, 0])
    kind, r = open_node(url, "r", version=1)
    assert kind.name == "records" and len(r) == 3 and r.version == 1
    kind, g = open_node(url, version=1)
    assert kind.name == "group" and g.version == 1
    np.testing.assert_array_equal(g["x"][:], [7, 7, 7, 2, 2, 2])
    with pytest.raises(KeyError):
        g["g/late"]
    kind, now = open_node(url, "x")
    assert now.version is None and now.shape == (9,)


def test_gc_expires_what_verify_can_check(history):
    url, _ = history
    collect_garbage(url, min_age=0, keep_versions=1)
    with pytest.raises(ValueError, match="history keeps only the current version 5"):
        verify(url, component="x", version=2)
    assert verify(url, component="x", version=5).ok


@pytest.mark.parametrize(
    "call",
    [
        lambda url, **kw: describe(url, **kw),
        lambda url, **kw: verify(url, **kw),
        lambda url, **kw: open_node(url, "x", **kw),
    ],
    ids=["describe", "verify", "open_node"],
)
def test_python_errors(history, call):
    url, _ = history
    with pytest.raises(ValueError, match=r"no version 99; the versions kept are 1, 2, 3"):
        call(url, version=99)
    first = arrayds.versions(url)[0].time
    with pytest.raises(ValueError, match="give version= or as_of=, not both"):
        call(url, version=1, as_of=first)
    with pytest.raises(ValueError, match="no version was committed at or before .*versions kept"):
        call(url, as_of=first - timedelta(days=1))
    with pytest.raises(TypeError, match="version must be an int"):
        call(url, version="1")
    with pytest.raises(TypeError, match="version must be an int"):
        call(url, version=True)
    with pytest.raises(TypeError, match="as_of must be a datetime"):
        call(url, as_of="2024-01-01")


# --------------------------------------------------------------------- CLI


def test_cli_info_version(run, history):
    url, _ = history
    old = run("info", url, "--version", "1")
    assert old.exit_code == 0, old.output
    assert old.output.splitlines()[0] == f"{url} (version 1)"
    assert "x  array (6,) int32" in old.output and "r  records 3 records" in old.output
    assert "late" not in old.output
    now = run("info", url)
    assert now.exit_code == 0
    assert now.output.splitlines()[0] == url
    assert "x  array (9,) int32" in now.output and "late" in now.output
    js = run("info", url, "--json", "--component", "r", "--version", "1")
    desc = json.loads(js.output)
    assert desc["version"] == 1 and desc["nodes"][0]["records"] == 3


def test_cli_info_as_of(run, history):
    url, _ = history
    t = arrayds.versions(url)[1].time
    for text in (t.isoformat(), t.astimezone(timezone.utc).replace(tzinfo=None).isoformat()):
        res = run("info", url, "--as-of", text, "--json")
        assert res.exit_code == 0, res.output
        desc = json.loads(res.output)
        assert desc["version"] == 2 and sorted(_nodes(desc)) == ["/", "/r", "/x"]


def test_cli_verify_version(run, history):
    url, only_old = history
    res = run("verify", url, "--version", "1", "--no-progress")
    assert res.exit_code == 0, res.output
    assert res.output.startswith("version 1: 3 nodes") and "no problems" in res.output
    os.remove(os.path.join(url, "x", only_old))
    assert run("verify", url, "--no-progress").exit_code == 0
    bad = run("verify", url, "-c", "x", "--version", "2", "--no-progress")
    assert bad.exit_code == 1
    assert f"DAMAGED {os.path.join(url, 'x', only_old)}: file: missing" in bad.output
    js = run("verify", url, "-c", "x", "--version", "3", "--json", "--no-progress")
    assert js.exit_code == 1
    report = json.loads(js.output)
    assert report["version"] == 3 and not report["ok"]
    assert report["problems"][0]["url"].endswith(only_old)


def test_cli_cat_version(run, history):
    url, _ = history
    res = run("cat", url, "-c", "x", "--version", "2")
    assert res.exit_code == 0, res.output
    assert res.output.strip() == "[1 1 1 0 0 0]"
    assert run("cat", url, "-c", "x").output.strip() == "[7 7 7 2 2 2 5 5 5]"
    old = run("cat", url, "-c", "r", "--version", "1")
    assert old.exit_code == 0, old.output
    assert "[2] {'i': 2}" in old.output and "[3]" not in old.output
    assert "[4] {'i': 4}" in run("cat", url, "-c", "r").output
    t = arrayds.versions(url, "r")[0].time.isoformat()
    assert run("cat", url, "-c", "r", "--as-of", t).output == old.output
    # the root at a version is a group: the usage error says which version
    grp = run("cat", url, "--version", "1")
    assert grp.exit_code == 2 and "at version 1 is a group" in grp.output


@pytest.mark.parametrize("command", ["info", "verify", "cat"])
def test_cli_errors(run, history, command):
    url, _ = history
    args = [command, url, "-c", "x"]
    missing = run(*args, "--version", "99")
    assert missing.exit_code == 1
    assert "Error: ValueError:" in missing.output
    assert "no version 99; the versions kept are 1, 2, 3, 4, 5" in missing.output
    first = arrayds.versions(url, "x")[0].time
    both = run(*args, "--version", "1", "--as-of", first.isoformat())
    assert both.exit_code == 2 and "give --version or --as-of, not both" in both.output
    early = run(*args, "--as-of", (first - timedelta(days=1)).isoformat())
    assert early.exit_code == 1
    assert "no version was committed at or before" in early.output
    garbled = run(*args, "--as-of", "yesterday")
    assert garbled.exit_code == 2 and "Invalid value for '--as-of'" in garbled.output
    not_int = run(*args, "--version", "two")
    assert not_int.exit_code == 2


def test_an_xarray_dataset_at_a_version(run, tmp_path):
    """A group holding an xarray snapshot: version 1 is the dataset after its first
    write, its members and their shards as that snapshot lists them."""
    xr = pytest.importorskip("xarray")
    url = str(tmp_path / "era.ads")
    first = xr.Dataset({"t": (("time",), np.arange(4.0))}, coords={"time": np.arange(4)})
    arrayds.to_arrayrecord(first, url)
    more = xr.Dataset({"t": (("time",), np.arange(4.0, 6))}, coords={"time": np.arange(4, 6)})
    arrayds.to_arrayrecord(more, url, mode="a", append_dim="time")
    old, now = _nodes(describe(url, version=1)), _nodes(describe(url))
    assert old["/t"]["shape"] == [4] and now["/t"]["shape"] == [6]
    assert old["/"]["dataset_variables"] == ["t", "time"]
    report = verify(url, version=1)
    assert report.ok and report.shards == 2 and report.version == 1
    res = run("cat", url, "-c", "t", "--version", "1")
    assert res.exit_code == 0 and res.output.strip() == "[0. 1. 2. 3.]"
