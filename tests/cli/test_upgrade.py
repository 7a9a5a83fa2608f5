"""``arrayds upgrade`` and :func:`arrayds.upgrade` (arrayds/tools/upgrade.py): format 1
nodes become format 2 with the same manifest, the dry run changes nothing, errors stop
the command before any change, a group's pending roll forward is completed first."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import arrayds
from arrayds.errors import CorruptionError
from arrayds.nodes import commit
from arrayds.storage import get_store

from .conftest import arrayds_executable

V1 = Path(__file__).resolve().parents[1] / "data" / "datasets" / "v1"


@pytest.fixture
def old(tmp_path) -> str:
    """A copy of the committed format 1 dataset (tests/data/datasets)."""
    return str(shutil.copytree(V1, tmp_path / "old.ads"))


def _versions(url: str, nodes) -> list[int]:
    st = get_store(url, None)
    return [commit.read(st, n).format_version for n in nodes]


NODES = ["", "g", "g/y", "r", "x"]


def test_cli_upgrade_dry_run_then_upgrade(run, old):
    res = run("upgrade", old, "--dry-run")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[-1] == "would upgrade 5 nodes to format version 2"
    assert lines[:-1] == [f"would upgrade {get_store(old, None).display(n)}" for n in NODES]
    assert _versions(old, NODES) == [1] * 5
    res = run("upgrade", old)
    assert res.exit_code == 0 and res.output.splitlines()[-1] == (
        "upgraded 5 nodes to format version 2"
    )
    assert _versions(old, NODES) == [2] * 5
    assert run("upgrade", old).output == "upgraded 0 nodes to format version 2\n"


def test_cli_upgrade_of_one_component(run, old):
    res = run("upgrade", old, "--component", "g")
    assert res.exit_code == 0 and res.output.splitlines()[-1].startswith("upgraded 2 nodes")
    assert _versions(old, NODES) == [1, 2, 2, 1, 1]
    res = run("upgrade", old, "-c", "x")
    assert res.output.splitlines()[-1] == "upgraded 1 node to format version 2"


def test_cli_upgrade_errors(run, old, tmp_path):
    res = run("upgrade", str(tmp_path / "nothing"))
    assert res.exit_code == 1 and "no arrayds dataset" in res.output
    res = run("upgrade", old, "--component", "nope")
    assert res.exit_code == 1 and "no arrayds dataset" in res.output
    res = run("upgrade", old, "--component", "../x")
    assert res.exit_code == 1 and "'..'" in res.output
    res = run("upgrade")
    assert res.exit_code == 2


def test_the_console_script_upgrades(old):
    out = subprocess.run(
        [arrayds_executable(), "upgrade", old], capture_output=True, text=True, check=True
    ).stdout
    assert out.splitlines()[-1] == "upgraded 5 nodes to format version 2"


def test_a_damaged_manifest_stops_the_upgrade_before_any_change(old):
    (Path(old) / "r" / "arrayds.json").write_text("{not json")
    with pytest.raises(CorruptionError):
        arrayds.upgrade(old)
    assert _versions(old, ["", "g", "g/y", "x"]) == [1] * 4


def test_a_newer_format_stops_the_upgrade_before_any_change(old):
    st = get_store(old, None)
    raw = commit.read(st, "x").raw
    commit.replace(st, "x", dict(raw, format_version=4, generation=raw["generation"] + 1))
    with pytest.raises(NotImplementedError, match="format version 4 is newer"):
        arrayds.upgrade(old)
    assert _versions(old, ["", "g", "g/y", "r"]) == [1] * 4


def test_upgrade_completes_a_pending_roll_forward_first(tmp_path):
    """A group whose snapshot lists a member newer than the member's own manifest (a
    dataset write interrupted before its roll forward): upgrading the stale member
    must not make it win over the snapshot's copy."""
    url = str(tmp_path / "ds")
    st = get_store(url, None)
    member = {
        "format": "arrayds", "kind": "array", "shape": [2], "dtype": "<i1",
        "chunks": [[[2, 1]]], "chunk_shape": [2], "fill_value": 5,
        "compression": "zstd:3", "dims": None, "attrs": {"v": "new"}, "shards": [],
    }  # fmt: skip
    g = {"format": "arrayds", "kind": "group", "attrs": {}}
    commit.commit(st, "", lambda b: g, write_id="w0", format_version=1)
    stale = dict(member, attrs={"v": "old"})
    for i in range(2):
        commit.commit(st, "a", lambda b: stale, write_id=f"a{i}", format_version=1)
    # the snapshot lists generation 3 of "a", whose own manifest is at 2
    snap = {"commit": "s1", "members": {"a": dict(member, generation=3, commit="s1")}}
    commit.commit(st, "", lambda b: dict(g, snapshot=snap), write_id="s1", format_version=1)
    assert dict(arrayds.open_array(url, "a").attrs) == {"v": "old"}  # the own manifest
    assert arrayds.upgrade(url) == ["", "a"]
    a = commit.read(st, "a")
    assert a.raw["attrs"] == {"v": "new"} and a.generation == 4 and a.format_version == 2
    assert dict(arrayds.open_array(url, "a").attrs) == {"v": "new"}


def test_upgrade_of_a_missing_url(tmp_path):
    with pytest.raises(FileNotFoundError, match="no arrayds dataset"):
        arrayds.upgrade(tmp_path / "nothing")


def test_upgrade_on_memory_and_new_nodes_of_an_old_dataset(old):
    """Nodes a write adds to a format 1 dataset are format 2 at once."""
    arrayds.open_array(old, "new", mode="w-", shape=(3,), dtype="i2", chunks=3)[:] = 1
    assert _versions(old, ["", "new"]) == [1, 2]
    assert arrayds.upgrade(old, "new") == []
    url = "memory://upgrade-test"
    st = get_store(url, None)
    commit.commit(st, "", lambda b: {"format": "arrayds", "kind": "group", "attrs": {}},
                  write_id="w", format_version=1)  # fmt: skip
    assert arrayds.upgrade(url, storage_options={}) == [""]
    st.delete_prefix("")
    np.testing.assert_array_equal(arrayds.open_array(old, "new")[...], [1, 1, 1])
