"""The tools and the CLI see a node only through its kind's record: a kind
that another package registers is verified, described, collected and refused by
``cat`` with no change to them."""

from __future__ import annotations

import json
import os
import time
import uuid
from types import SimpleNamespace

import numpy as np
import pytest

import arrayds
from arrayds import ArrayRecordWriter
from arrayds.nodes import registry as kinds
from arrayds.nodes.names import FORMAT, FORMAT_VERSION
from arrayds.tools.describe import node_text
from arrayds.tools.gc import is_shard_name
from arrayds.verify import collect_garbage, describe, verify

WID = "0123456789abcdef01234567"


def _blob_kind(shard_folder: str | None = "c") -> kinds.NodeKind:
    def shards(m):
        return [kinds.ShardRef(s["path"], records=s["records"]) for s in m.shards]

    return kinds.NodeKind(
        "blob",
        parse=lambda d, what: SimpleNamespace(kind="blob", shards=d["shards"]),
        open=lambda store, node, m, mode: m,
        shard_folder=shard_folder,
        shards=shards,
    )


@pytest.fixture
def blob(tmp_path, monkeypatch):
    """A group with an array and a node of kind "blob" (3 records in c/), the kind
    registered for this test only."""
    kinds.get("group")  # the built-in kinds first, so the test kind is not replaced
    monkeypatch.setitem(kinds._kinds, "blob", _blob_kind())
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(np.arange(6), url, "a", chunks=3)
    folder = os.path.join(url, "b")
    os.makedirs(os.path.join(folder, "c"))
    rel = f"c/{WID}-0.array_record"
    with ArrayRecordWriter(os.path.join(folder, rel)) as w:
        w.write_many([b"x", b"y", b"z"])
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": "blob",
        "shards": [{"path": rel, "records": 3}],
    }
    with open(os.path.join(folder, "arrayds.json"), "w") as f:
        json.dump(manifest, f)
    return url, folder, manifest


def test_verify_checks_the_shards_a_new_kind_names(blob):
    url, folder, manifest = blob
    report = verify(url)
    assert report.ok and report.shards == 2 and report.records == 2 + 3
    manifest["shards"][0]["records"] = 4
    manifest["shards"].append(dict(manifest["shards"][0]))
    with open(os.path.join(folder, "arrayds.json"), "w") as f:
        json.dump(manifest, f)
    text = [str(p) for p in verify(url).problems]
    assert any("index: holds 3 records, the manifest says 4" in t for t in text), text
    assert any("names shard 'c/" in t and "twice (entries 0 and 1)" in t for t in text), text


def test_gc_removes_orphans_only_in_the_shard_folder_of_the_kind(blob, monkeypatch):
    url, folder, _ = blob
    orphan = os.path.join(folder, "c", f"{WID}-1.array_record")
    with open(orphan, "wb") as f:
        f.write(b"left by a killed write")
    old = time.time() - 3 * 86400
    os.utime(orphan, (old, old))
    monkeypatch.setitem(kinds._kinds, "blob", _blob_kind(shard_folder=None))
    assert collect_garbage(url).removed == [] and os.path.exists(orphan)
    monkeypatch.setitem(kinds._kinds, "blob", _blob_kind())
    assert collect_garbage(url, dry_run=True).removed == [orphan] and os.path.exists(orphan)
    assert collect_garbage(url).removed == [orphan] and not os.path.exists(orphan)
    assert os.path.exists(os.path.join(folder, "c", f"{WID}-0.array_record"))


def test_gc_protects_a_kind_it_does_not_know(blob, monkeypatch):
    url, folder, _ = blob
    orphan = os.path.join(folder, "c", f"{WID}-1.array_record")
    open(orphan, "wb").close()
    monkeypatch.delitem(kinds._kinds, "blob")
    report = collect_garbage(url, min_age=0)
    assert report.removed == [] and report.protected == [folder] and os.path.exists(orphan)


def test_info_and_cat_of_a_kind_without_those_fields(blob, run):
    url, _, _ = blob
    desc = describe(url)
    [b] = [n for n in desc["nodes"] if n["path"] == "/b"]
    assert b["kind"] == "blob" and "shards" not in b
    assert "blob" not in desc["totals"] and desc["totals"]["arrays"] == 1
    assert node_text(b) == ("<blob> ", [])
    res = run("info", url)
    assert res.exit_code == 0 and "b  <blob>" in res.output
    res = run("cat", url, "--component", "b")
    assert res.exit_code == 1 and "cannot print a blob" in res.output


def test_shard_names_follow_the_kind():
    array, records = kinds.get("array"), kinds.get("records")
    name = f"c/{WID}-0.array_record"
    assert is_shard_name(name, array) and not is_shard_name(name, records)
    assert not is_shard_name(f"d/{WID}-0.array_record", array)
    assert not is_shard_name("c/notes.array_record.txt", array)
    assert is_shard_name(f"train-{WID}.array_record-00000-of-00004", records)
    assert not is_shard_name(f"c/x/{WID}-0.array_record", array)


def test_lazy_imports_when_called_and_names_a_missing_function():
    fmt = kinds.lazy("arrayds.tools.describe", "format_bytes")
    assert fmt.__name__ == "format_bytes" and fmt(1536) == "1.5 KiB"
    with pytest.raises(AttributeError, match="no_such_function"):
        kinds.lazy("arrayds.tools.describe", "no_such_function")()
    with pytest.raises(ModuleNotFoundError):
        kinds.lazy("arrayds.tools.no_such_module", "f")()


def test_gc_on_memory_keeps_young_orphans_and_removes_old_ones():
    """The listing's modification times come from the store on every file system
    (memory:// lists a float 'created'): young orphans stay, old ones go."""
    from datetime import datetime, timezone

    import fsspec

    url = f"memory://gc-age-{uuid.uuid4().hex}"
    arrayds.to_arrayrecord(np.arange(6), url, chunks=3)
    fs = fsspec.filesystem("memory")
    [shard] = fs.find(f"{url}/c")
    young, old = (shard.replace("-0.array_record", f"-{i}.array_record") for i in (1, 2))
    fs.pipe(young, b"young")
    fs.pipe(old, b"old")
    fs.store[old].created = datetime(2000, 1, 1, tzinfo=timezone.utc)
    try:
        report = collect_garbage(url)
        assert report.removed == [fs.unstrip_protocol(old)]
        assert report.kept_young == [fs.unstrip_protocol(young)]
        assert fs.exists(young) and not fs.exists(old) and fs.exists(shard)
    finally:
        fs.rm(url.split("://", 1)[1], recursive=True)
