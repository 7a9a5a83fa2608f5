"""Damaged and missing data, failed writes: clear errors, nothing stored is lost."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import arrayds
from arrayds import CorruptionError
from arrayds.nodes import commit
from arrayds.nodes.names import MANIFEST, check_component, new_write_id
from arrayds.storage import new_store


def make(url, name="x"):
    a = arrayds.open_array(url, name, mode="w", shape=(8, 6), dtype="i4", chunks=(4, 3))
    a[...] = np.arange(48, dtype="i4").reshape(8, 6)
    return a


def test_missing_dataset_names_the_url(tmp_path):
    url = str(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match="no arrayds dataset at .*nothing"):
        arrayds.open(url)
    with pytest.raises(FileNotFoundError, match="component 'a/b'"):
        arrayds.open_array(url, "a/b")
    with pytest.raises(FileNotFoundError, match="nothing"):
        arrayds.from_arrayrecord(url)


@pytest.mark.parametrize(
    "content,error,message",
    [
        (b"{not json", CorruptionError, "is not valid JSON"),
        (b"[1, 2]", CorruptionError, "holds a JSON list"),
        (b"", CorruptionError, "is not valid JSON"),
        (json.dumps({"format": "arrayds", "format_version": 1, "kind": "array"}).encode(),
         CorruptionError, "has no 'shape'"),
    ],
)  # fmt: skip
def test_damaged_manifest_is_a_corruption_error_naming_the_node(url, content, error, message):
    make(url)
    st = new_store(url)
    st.fs.pipe_file(st.path("x", MANIFEST), content)
    with pytest.raises(error, match=message) as e:
        arrayds.open_array(url, "x")
    assert "x" in str(e.value)
    assert isinstance(e.value, OSError)


def test_missing_shard_names_array_and_shard(url):
    a = make(url)
    st = a.store
    st.fs.rm(st.path("x", a.manifest.shards[0].path))
    from arrayds.nodes.shards import clear_reader_cache

    clear_reader_cache()
    b = arrayds.open_array(url, "x")  # opening reads the manifest only
    with pytest.raises(
        FileNotFoundError,
        match=r"array '.*x': shard 'c/.*\.array_record' named by the manifest is missing",
    ):
        b[0, 0]


def test_damaged_shard_is_a_corruption_error(local_url):
    a = make(local_url)
    path = a.store.path("x", a.manifest.shards[0].path)
    data = bytearray(open(path, "rb").read())
    data[100:140] = b"\xff" * 40  # inside the first chunk
    open(path, "wb").write(bytes(data))
    from arrayds.nodes.shards import clear_reader_cache

    clear_reader_cache()
    b = arrayds.open_array(local_url, "x")
    with pytest.raises(CorruptionError, match=r"array '.*x': shard 'c/.*' is damaged"):
        b[...]


def test_shard_with_too_few_records(local_url):
    a = make(local_url)
    m = a.manifest.to_json()
    m["shards"][0]["offset"] = 10  # points past the 4 records in the file
    commit.commit(a.store, "x", lambda base: m, write_id=new_write_id())
    with pytest.raises(CorruptionError, match="has 4 records, but the manifest needs record 13"):
        arrayds.open_array(local_url, "x")[...]


def test_record_of_the_wrong_shape_is_detected(local_url):
    a = make(local_url)
    m = a.manifest.to_json()
    m["chunks"] = [[[2, 4]], [[3, 2]]]  # claims 2x3 chunks; records hold 4x3
    m["shards"][0]["stop"] = [2, 2]
    commit.commit(a.store, "x", lambda base: m, write_id=new_write_id())
    with pytest.raises(
        CorruptionError,
        match=r"chunk \(0, 0\).*holds dtype <i4 shape \(4, 3\), expected dtype <i4 shape \(2, 3\)",
    ):
        arrayds.open_array(local_url, "x")[0, 0]


def test_failed_write_leaves_previous_state_and_no_temp_files(local_url):
    a = make(local_url)
    before = a[...].copy()
    gen = a.generation
    with pytest.raises((TypeError, ValueError)):
        a[:, :] = np.array([["text"] * 6] * 8)  # cannot become int32
    with pytest.raises(ValueError, match=r"cannot assign a value of shape \(5,\)"):
        a[:, 0] = np.zeros(5)
    b = arrayds.open_array(local_url, "x")
    assert b.generation == gen
    np.testing.assert_array_equal(b[...], before)
    leftovers = [f for f in os.listdir(os.path.join(local_url, "x", "c")) if f.endswith(".tmp")]
    assert leftovers == [] and not any(
        f.endswith(".tmp") for f in os.listdir(os.path.join(local_url, "x"))
    )


def test_reader_keeps_its_snapshot_while_a_writer_commits(url):
    a = make(url)
    old = arrayds.open_array(url, "x")
    w = arrayds.open_array(url, "x", mode="r+")
    w[...] = -1
    w.append(np.full((2, 6), -2, "i4"))
    assert old.shape == (8, 6)
    np.testing.assert_array_equal(old[...], np.arange(48).reshape(8, 6))  # old snapshot
    new = arrayds.open_array(url, "x")
    assert new.shape == (10, 6) and (new[:8] == -1).all() and (new[8:] == -2).all()
    assert old.refresh().shape == (10, 6)
    del a


def test_stale_handle_cannot_overwrite_a_newer_commit(url):
    make(url)
    h1 = arrayds.open_array(url, "x", mode="r+")
    h2 = arrayds.open_array(url, "x", mode="r+")
    h1[0, 0] = 100
    from arrayds.errors import CommitConflictError

    with pytest.raises(CommitConflictError, match="another writer committed generation"):
        h2[1, 1] = 200
    b = arrayds.open_array(url, "x")
    assert b[0, 0] == 100 and b[1, 1] == 7


def test_names_cannot_escape_the_root(tmp_path):
    for bad in [
        "..",
        "../x",
        "a/../../x",
        "/etc",
        "a//b",
        "a\\b",
        "x/./y",
        "a/arrayds.json",
        "\x00",
    ]:
        with pytest.raises(ValueError):
            check_component(bad)
    url = str(tmp_path / "ds")
    g = arrayds.open(url, mode="w")
    with pytest.raises(ValueError, match="'..' segments are not allowed"):
        g.create_group("../outside")
    with pytest.raises(ValueError):
        arrayds.to_arrayrecord(np.zeros(2), url, "../outside", mode="w")
    assert not (tmp_path / "outside").exists()
    m = json.loads((tmp_path / "ds" / "arrayds.json").read_text())
    assert m["kind"] == "group"


def test_manifest_shard_paths_cannot_escape_the_node(local_url):
    a = make(local_url)
    m = a.manifest.to_json()
    m["shards"][0]["path"] = "/etc/passwd"
    commit.commit(a.store, "x", lambda base: m, write_id=new_write_id())
    with pytest.raises(CorruptionError, match="must be relative to the node folder"):
        arrayds.open_array(local_url, "x")


def test_unknown_kind_and_future_version(local_url):
    make(local_url)
    st = new_store(local_url)
    raw = commit.read(st, "x").raw
    raw["format_version"] = 99
    raw["generation"] += 1
    commit.replace(st, "x", raw)
    with pytest.raises(NotImplementedError, match="format version 99 is newer"):
        arrayds.open_array(local_url, "x")
    with pytest.raises(NotImplementedError, match="format version 99 is newer"):
        commit.commit(st, "x", lambda base: raw, write_id=new_write_id())  # never downgraded
    raw["format_version"] = 1
    raw["kind"] = "tensor-soup"
    raw["generation"] += 1
    commit.replace(st, "x", raw)
    with pytest.raises(NotImplementedError, match="kind 'tensor-soup' is not supported"):
        arrayds.open(local_url)["x"]
