"""gc and shard names: a manifest may not name a reserved file as
a shard, and gc on an object-store-like file system removes only shard-grammar names
in folders a node owns."""

from __future__ import annotations

import json
import os
import uuid

import fsspec
import numpy as np
import pytest

import arrayds
from arrayds import CorruptionError
from arrayds.verify import collect_garbage

RESERVED = ["arrayds.json", "c/arrayds.json", ".arrayds.json.lock", "c/.arrayds.json.0123.tmp"]


def _forge(path: str, edit) -> None:
    with open(path) as f:
        doc = json.load(f)
    edit(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


@pytest.mark.parametrize("name", RESERVED)
def test_array_manifest_naming_a_reserved_file_is_corrupt(tmp_path, name):
    url = str(tmp_path / "a")
    arrayds.to_arrayrecord(np.arange(10), url, chunks=5)

    def edit(doc):
        doc["shards"][0]["path"] = name

    _forge(f"{url}/arrayds.json", edit)
    with pytest.raises(CorruptionError, match="reserved name"):
        arrayds.open_array(url)


@pytest.mark.parametrize("name", [n for n in RESERVED if "/" not in n])
def test_records_manifest_naming_a_reserved_file_is_corrupt(tmp_path, name):
    url = str(tmp_path / "r")
    arrayds.to_arrayrecord([{"i": i} for i in range(4)], url, num_shards=2)

    def edit(doc):
        doc["shards"][1]["path"] = name

    _forge(f"{url}/arrayds.json", edit)
    # the head's own fields are sound: it opens; its shard list is checked at first use
    ds = arrayds.records.open_records(url)
    for use in (lambda: ds[0], lambda: ds.shard_paths):
        with pytest.raises(CorruptionError, match="invalid records shard entry"):
            use()
    # a replace (mode="w") never deletes what the forged manifest names
    arrayds.to_arrayrecord([b"x"], url, mode="w")
    assert os.path.exists(f"{url}/arrayds.json") and len(arrayds.open(url)) == 1


@pytest.mark.parametrize("name", RESERVED)
def test_ragged_manifest_naming_a_reserved_file_is_corrupt(tmp_path, name):
    url = str(tmp_path / "clips")
    arrayds.to_arrayrecord([np.ones(3 + i) for i in range(4)], url)

    def edit(doc):
        doc["shards"][0]["path"] = name

    _forge(f"{url}/arrayds.json", edit)
    with pytest.raises(CorruptionError, match="must be relative to the node folder"):
        arrayds.open_ragged(url)
    # a replace (mode="w") never deletes what the forged manifest names: the node's
    # new manifest survives the removal of the old node's shards
    arrayds.to_arrayrecord([np.ones(2)], url, mode="w")
    assert os.path.exists(f"{url}/arrayds.json") and len(arrayds.open_ragged(url)) == 1


def test_gc_on_memory_keeps_user_files():
    root = f"memory://gc-{uuid.uuid4().hex}"
    fs = fsspec.filesystem("memory")
    try:
        arrayds.to_arrayrecord(np.arange(20), root, "a", chunks=5)
        [shard] = [p for p in fs.find(f"{root}/a/c")]
        wid = shard.rsplit("/", 1)[1].split("-")[0]
        user = [
            f"{root}/notes.array_record.txt",
            f"{root}/a/c/backup-of.array_record.bak",
            f"{root}/a/{wid}-3.array_record",
        ]
        for p in user:
            fs.pipe_file(p, b"mine")
        orphan = f"{root}/a/c/{wid}-3.array_record"
        fs.pipe_file(orphan, b"orphan")
        report = collect_garbage(root, min_age=0)
        assert report.removed == [fs.unstrip_protocol(fs._strip_protocol(orphan))]
        assert all(fs.exists(p) for p in user) and not fs.exists(orphan)
    finally:
        fs.rm(root.split("://", 1)[1], recursive=True)
