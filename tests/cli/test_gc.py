"""``arrayds gc`` removes only names that arrayds writes produce, in folders a node
owns: a user's files that merely contain ``.array_record`` stay,
wherever they are."""

from __future__ import annotations

import glob
import json
import os
import shutil

import numpy as np

import arrayds

USER_FILES = ("notes.array_record.txt", "backup-of.array_record.bak")


def _write(path: str, data: bytes = b"user data") -> str:
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_gc_keeps_user_files_and_removes_orphans(run, tmp_path):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(np.arange(20), url, "a", chunks=5)
    arrayds.to_arrayrecord([{"i": i} for i in range(6)], url, "r", num_shards=2)
    arrayds.to_arrayrecord([np.ones(3 + i) for i in range(4)], url, "clips")
    arrayds.to_arrayrecord(np.arange(4), url, "g/c", chunks=2)  # a child node named c
    keep = []
    for folder in (url, f"{url}/a", f"{url}/a/c", f"{url}/r", f"{url}/clips/c", f"{url}/g"):
        keep += [_write(os.path.join(folder, n)) for n in USER_FILES]
    a_shard = sorted(glob.glob(f"{url}/a/c/*"))[0]
    wid = os.path.basename(a_shard).split("-")[0]
    # names the grammar produces, but not in a folder whose node owns them there
    loose = f"{url}/loose"
    os.makedirs(loose)
    keep.append(shutil.copy(a_shard, f"{loose}/{wid}-5.array_record"))
    keep.append(shutil.copy(a_shard, f"{url}/g/{wid}-5.array_record"))  # a group's folder
    os.makedirs(f"{url}/g/cc")
    keep.append(shutil.copy(a_shard, f"{url}/g/cc/{wid}-5.array_record"))
    keep.append(_write(f"{url}/a/c/{wid}-05.array_record"))  # leading zero: not produced
    keep.append(_write(f"{url}/a/c/{wid}-5.array_record.tmp"))  # no random part
    keep.append(_write(f"{url}/a/{wid}-5.array_record"))  # an array's folder, not its c/
    # real orphans: a shard of a failed write, its temporary file, a killed commit's
    # temporary manifest, a records shard of a failed write, a ragged shard
    doomed = [
        shutil.copy(a_shard, f"{url}/a/c/{wid}-9.array_record"),
        _write(f"{url}/a/c/{wid}-9.array_record.0123456789ab.tmp"),
        _write(f"{url}/a/.arrayds.json.0123456789ab.tmp"),
        _write(f"{url}/r/r-{wid}.array_record-00000-of-00003"),
        _write(f"{url}/clips/c/{wid}-0-3.array_record"),
        shutil.copy(a_shard, f"{url}/g/c/c/{wid}-5.array_record"),  # the array g/c's c/
    ]
    before = {p for p in glob.glob(f"{url}/**", recursive=True) if os.path.isfile(p)}
    res = run("gc", url, "--min-age", "0", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert sorted(report["removed"]) == sorted(doomed)
    after = {p for p in glob.glob(f"{url}/**", recursive=True) if os.path.isfile(p)}
    assert after == before - set(doomed)
    assert all(os.path.exists(p) for p in keep)
    assert run("verify", url).exit_code == 0
    np.testing.assert_array_equal(arrayds.open_array(url, "a")[:], np.arange(20))


def test_gc_refuses_a_newer_format_version(run, tmp_path):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(np.arange(10), url, "a", chunks=5)
    arrayds.to_arrayrecord(np.arange(10), url, "b", chunks=5)
    shard = sorted(glob.glob(f"{url}/a/c/*"))[0]
    orphan = shutil.copy(shard, shard.rsplit("-", 1)[0] + "-9.array_record")
    path = f"{url}/b/arrayds.json"
    with open(path) as f:
        doc = json.load(f)
    doc["format_version"] = 99
    doc["shards"] = []  # a future version might name its shards differently
    with open(path, "w") as f:
        json.dump(doc, f)
    res = run("gc", url, "--min-age", "0")
    assert res.exit_code == 1
    assert "NotImplementedError" in res.output and "format version 99" in res.output
    assert f"{url}/b/arrayds.json" in res.output
    assert os.path.exists(orphan) and len(glob.glob(f"{url}/b/c/*")) == 1
