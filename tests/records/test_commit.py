"""Records and ragged writes through the one commit path (arrayds.nodes.commit):
races found at commit time, retried appends, what a refused write leaves behind, and
the one shard-writing function of the store (real files, memory://, real threads)."""

from __future__ import annotations

import json
import os
import threading
import uuid

import fsspec
import numpy as np
import pytest

import arrayds
from arrayds import ragged as rg
from arrayds import records as records
from arrayds.errors import CommitConflictError
from arrayds.nodes.shards import shard_writer, write_shard
from arrayds.storage import get_store


def _manifest(url: str) -> dict:
    with open(os.path.join(url, "arrayds.json")) as f:
        return json.load(f)


def _files(url: str) -> list[str]:
    """The files of the dataset but its history (``_arrayds/versions``)."""
    out = (os.path.relpath(os.path.join(d, f), url) for d, _, fs in os.walk(url) for f in fs)
    return sorted(f for f in out if not f.startswith("_arrayds/versions/"))


def test_append_whose_serializer_changed_before_commit_is_refused(tmp_path):
    url = str(tmp_path / "r")
    records.write_records([b"a"], url)  # raw
    pending = records.write_records([b"b"], url, mode="a", compute=False)
    records.write_records([{"x": 1}], url, mode="w")  # msgpack now
    before = _manifest(url)
    with pytest.raises(ValueError, match="now uses the 'msgpack' serializer"):
        pending.compute(scheduler="sync")
    assert _manifest(url) == before
    # the refused append removed its shard: only the replacing write's shard is left
    assert _files(url) == sorted(["arrayds.json", before["shards"][0]["path"]])


def test_concurrent_appends_all_land(tmp_path):
    url = str(tmp_path / "many")
    records.write_records([b"0"], url)
    errors: list[BaseException] = []

    def append(k: int) -> None:
        try:
            records.write_records([b"%d" % k] * 3, url, mode="a")
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=append, args=(k,)) for k in range(1, 7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    man = _manifest(url)
    assert man["num_records"] == 1 + 6 * 3 and len(man["shards"]) == 7
    assert man["generation"] == 7  # one commit each, the generation counted by nodes.commit
    got = sorted(records.read_records(url).compute(scheduler="sync"))
    assert got == sorted([b"0"] + [b"%d" % k for k in range(1, 7) for _ in range(3)])


def test_replace_removes_the_old_records_shards(tmp_path):
    url = str(tmp_path / "w")
    old = records.write_records([b"a", b"b"], url, num_shards=2)
    new = records.write_records([b"c"], url, mode="w")
    assert _files(url) == sorted(["arrayds.json", *(s.path for s in new.shards)])
    assert not set(s.path for s in old.shards) & set(_files(url))


def test_ragged_w_minus_race_detected_at_commit(tmp_path):
    url = str(tmp_path / "clips")
    pending = rg.write_ragged([np.ones(3)], url, compute=False)
    rg.write_ragged([np.zeros(4)], url)
    before = _manifest(url)
    with pytest.raises(FileExistsError, match="already exists"):
        pending.compute(scheduler="sync")
    assert _manifest(url) == before
    assert _files(url) == sorted(["arrayds.json", before["shards"][0]["path"]])


def test_ragged_append_after_another_commit_conflicts_and_leaves_nothing(tmp_path):
    url = str(tmp_path / "clips")
    rg.write_ragged([np.ones(3)], url)
    pending = rg.write_ragged([np.ones(5)], url, mode="a", compute=False, retries=0)
    rg.write_ragged([np.ones(2)], url, mode="a")
    before = _manifest(url)
    with pytest.raises(CommitConflictError, match="another writer committed while this write"):
        pending.compute(scheduler="sync")
    assert _manifest(url) == before and before["generation"] == 2
    assert len(rg.open_ragged(url)) == 2
    assert _files(url) == sorted(["arrayds.json", *(s["path"] for s in before["shards"])])


@pytest.mark.parametrize("via", ["write_ragged", "to_arrayrecord"])
def test_a_ragged_append_with_retries_lands_after_another_commit(tmp_path, via):
    url = str(tmp_path / "clips")
    rg.write_ragged([np.ones(3)], url)
    write = rg.write_ragged if via == "write_ragged" else arrayds.to_arrayrecord
    pending = write([np.full(5, 7.0)], url, mode="a", compute=False, retries=2)
    rg.write_ragged([np.ones(2)], url, mode="a")
    pending.compute(scheduler="sync")  # the other append committed first: placed after it
    ra = rg.open_ragged(url)
    assert ra.shapes == [(3,), (2,), (5,)] and ra[2].tolist() == [7.0] * 5
    assert len(arrayds.versions(url)) == 3 and ra.nshards == 3


@pytest.mark.parametrize("bad", [-1, 1.5, "3", None, True])
def test_a_ragged_write_refuses_a_bad_retry_budget(tmp_path, bad):
    url = str(tmp_path / "clips")
    with pytest.raises(ValueError, match=r"ragged array .*retries must be an integer >= 0"):
        rg.write_ragged([np.ones(3)], url, retries=bad)
    assert not os.path.exists(url)  # refused before anything was written


def test_to_arrayrecord_writes_records_and_ragged_at_the_store_given(tmp_path):
    root = f"memory://commit-{uuid.uuid4().hex}"
    try:
        arrayds.to_arrayrecord([b"x", b"y"], root, "g/r")
        arrayds.to_arrayrecord([np.ones(2), np.ones(3)], root, "g/clips")
        g = arrayds.open(root)
        assert g["g/r"].num_records == 2 and len(g["g/clips"]) == 2
    finally:
        fsspec.filesystem("memory").rm(root, recursive=True)


@pytest.mark.parametrize("where", ["local", "memory"])
def test_shard_writer_leaves_nothing_when_the_write_fails(tmp_path, where):
    url = str(tmp_path) if where == "local" else f"memory://shards-{uuid.uuid4().hex}"
    store = get_store(url)
    with pytest.raises(RuntimeError, match="stop"):
        with shard_writer(store, "n/c/x.array_record", "group_size:1") as w:
            w.write_many([b"a", b"b"])
            raise RuntimeError("stop")
    assert store.list("n") == []
    size = write_shard(store, "n/c/x.array_record", [b"a", b"b"], "group_size:1")
    assert [(k, s) for k, s, _ in store.list("n")] == [("n/c/x.array_record", size)]
    assert arrayds.ArrayRecordReader(store.url_of("n", "c/x.array_record")).read_all() == [
        b"a",
        b"b",
    ]


def _missing_source() -> list[bytes]:
    raise FileNotFoundError(2, "the input is gone", "in.tfrecord")


def test_a_source_error_inside_a_remote_shard_write_keeps_its_message():
    root = f"memory://src-{uuid.uuid4().hex}"
    with pytest.raises(FileNotFoundError, match="the input is gone") as info:
        records.write_from_sources([(_missing_source, ())], root, "r")
    assert "cannot write the shard" not in str(info.value)
    assert get_store(root).list("") == []
