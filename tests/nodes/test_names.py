"""The one shard-name grammar (arrayds/nodes/names.py): every shape of name each kind
writes is built by ``shard_name`` and read back by ``parse_shard_name`` (round trip),
other names (reserved ones included) are not shard names, bad parts are a
``ValueError``, and the names real writes and compactions produce, and those of the
committed fixtures (tests/data/datasets), are exactly the grammar's (docs/spec.md 6.1,
spec-ragged.md, spec-records.md "Shard files")."""

from __future__ import annotations

import json
import pathlib

import dask
import dask.array as da
import dask.bag as db
import numpy as np
import pytest

import arrayds
from arrayds import ragged, records
from arrayds.nodes.names import (
    MANIFEST,
    META_DIR,
    SHARD_DIR,
    is_reserved_name,
    parse_shard_name,
    shard_name,
    shard_stem,
)

WID = "0661702927ec82393c249537"
FIXTURES = pathlib.Path(__file__).parent.parent / "data" / "datasets"

# (name, folder, stem, index, total): every shape of name the writers produce
SHAPES = [
    (f"c/{WID}-0.array_record", "c", WID, (0,), None),  # array
    (f"c/{WID}-17.array_record", "c", WID, (17,), None),
    (f"c/{WID}-0-0.array_record", "c", WID, (0, 0), None),  # ragged: partition, shard
    (f"c/{WID}-3-12.array_record", "c", WID, (3, 12), None),
    (f"train-{WID}.array_record-00000-of-00008", "", f"train-{WID}", (0,), 8),  # records
    (f"train-{WID}.array_record-00007-of-00008", "", f"train-{WID}", (7,), 8),
    (f"records-{WID}.array_record-99999-of-123456", "", f"records-{WID}", (99999,), 123456),
    (f"a.b-{WID}.array_record-123456-of-123457", "", f"a.b-{WID}", (123456,), 123457),
    # Beam, one shard per bundle attempt: <stem>-<12 hex>
    (f"r-{WID}-00ff00ff00ff.array_record-00000-of-00001", "", f"r-{WID}-00ff00ff00ff", (0,), 1),
    # a node whose own name ends like a write id: the last id is the write's
    (f"x-{'f' * 24}-{WID}.array_record-00000-of-00001", "", f"x-{'f' * 24}-{WID}", (0,), 1),
]


@pytest.mark.parametrize(("name", "folder", "stem", "index", "total"), SHAPES)
def test_round_trip_of_every_shape(name, folder, stem, index, total):
    assert shard_name(stem, *index, total=total, folder=folder) == name
    p = parse_shard_name(name)
    assert p is not None
    assert (p.folder, p.stem, p.write_id, p.index, p.total, p.temporary) == (
        folder,
        stem,
        WID,
        index,
        total,
        False,
    )
    assert shard_name(p.stem, *p.index, total=p.total, folder=p.folder) == name
    tmp = parse_shard_name(f"{name}.0123456789ab.tmp")
    assert tmp is not None and tmp.temporary and tmp._replace(temporary=False) == p


@pytest.mark.parametrize(
    "name",
    [
        "",
        MANIFEST,
        f".{MANIFEST}.lock",
        f".{MANIFEST}.0123456789ab.tmp",
        META_DIR,
        f"{META_DIR}/{WID}-0.array_record",
        f"{META_DIR}/log/{WID}.json",
        f"c/{MANIFEST}",
        "c/x.array_record",
        "c/notes.array_record.txt",
        f"c/{WID}.array_record",  # no number
        f"c/{WID}-0-0-0.array_record",  # three numbers
        f"c/{WID}-01.array_record",  # not what the writer prints
        f"c/{WID}--1.array_record",
        f"c/{WID.upper()}-0.array_record",
        f"c/{WID[:-1]}-0.array_record",  # 23 hex digits
        f"c/{WID}-0.array_record.tmp",
        f"c/{WID}-0.array_record.0123456789a.tmp",
        f"c/{WID}-0.array_record-00000-of-00001",
        f"{WID}-0.array_record",  # a folder shape without its folder
        f"c/x/{WID}-0.array_record",
        f"/c/{WID}-0.array_record",
        f"../c/{WID}-0.array_record",
        f"c/train-{WID}.array_record-00000-of-00001",  # a records name in a folder
        f"train-{WID}.array_record-0000-of-00001",  # four digits
        f"train-{WID}.array_record-000001-of-00002",  # a leading zero too many
        f"train-{WID}.array_record-00002-of-00002",  # index past the count
        f"train-{WID}.array_record-00000-of-00001.bak",
        "train.array_record-00000-of-00001",  # no write id
        f"-{WID}.array_record-00000-of-00001",  # no name before it
        f"t r-{WID}.array_record-00000-of-00001",
        f"train-{WID}-00ff00ff00f.array_record-00000-of-00001",  # 11 hex attempt
        f"train-{WID}.array_record",
    ],
)
def test_names_that_are_not_shard_names(name):
    assert parse_shard_name(name) is None


def test_reserved_names_are_never_shard_names():
    for seg in (MANIFEST, META_DIR, f".{MANIFEST}.lock", f".{MANIFEST}.0123456789ab.tmp"):
        assert is_reserved_name(seg) and parse_shard_name(seg) is None
        assert parse_shard_name(f"{SHARD_DIR}/{seg}") is None
    for name, *_ in SHAPES:
        assert not any(is_reserved_name(seg) for seg in name.split("/"))


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((WID, -1), {"folder": "c"}, "integers >= 0"),
        ((WID, True), {"folder": "c"}, "integers >= 0"),
        ((WID, 1.0), {"folder": "c"}, "integers >= 0"),
        ((WID, 0), {}, "has a folder and one or two numbers"),
        ((WID,), {"folder": "c"}, "has a folder and one or two numbers"),
        ((WID, 0, 1, 2), {"folder": "c"}, "has a folder and one or two numbers"),
        ((WID, 0), {"total": 1, "folder": "c"}, "a folder or a total, not both"),
        ((WID, 1), {"total": 1}, "one number below total=1"),
        ((WID, 0, 0), {"total": 2}, "one number below total=2"),
        ((WID,), {"total": 2}, "one number below total=2"),
    ],
)
def test_bad_parts_are_a_value_error(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        shard_name(*args, **kwargs)


@pytest.mark.parametrize(
    ("name", "base"),
    [
        ("train", "train"),
        ("data/train/", "train"),
        ("a\\b", "b"),
        ("s3://bucket/set.v2", "set.v2"),
        ("my set (1)", "my_set_1"),
        ("._x_.", "x"),
        ("", "records"),
        ("/tmp/?!/", "records"),
    ],
)
def test_shard_stem(name, base):
    stem = shard_stem(name, WID)
    assert stem == f"{base}-{WID}"
    p = parse_shard_name(shard_name(stem, 0, total=1))
    assert p is not None and p.stem == stem and p.write_id == WID


def _files(root: pathlib.Path, node: str) -> list[str]:
    folder = root / node
    return sorted(
        str(p.relative_to(folder)).replace("\\", "/")
        for p in folder.rglob("*")
        if p.is_file() and MANIFEST not in p.name and META_DIR not in p.parts
    )


def _manifest(root: pathlib.Path, node: str) -> dict:
    return json.loads((root / node / MANIFEST).read_text())


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_the_fixtures_names_are_the_grammars(version):
    root = FIXTURES / version
    for node in ("x", "g/y"):
        names = _files(root, node)
        assert names
        for name in names:
            p = parse_shard_name(name)
            assert p is not None and p.folder == SHARD_DIR and p.index == (0,)
            assert shard_name(p.write_id, 0, folder=SHARD_DIR) == name
    names = _files(root, "r")
    parsed = [parse_shard_name(n) for n in names]
    assert len(names) == 3 and all(p is not None for p in parsed)
    for name, p in zip(names, parsed, strict=True):
        assert shard_name(shard_stem("r", p.write_id), 0, total=1) == name
    # the last write (an append) names the manifest's commit
    assert max(p.write_id for p in parsed) == _manifest(root, "r")["commit"]


def test_the_names_each_kind_writes_and_compacts(tmp_path):
    url = str(tmp_path)
    data = da.arange(12, chunks=4)
    with dask.config.set(scheduler="synchronous"):
        arrayds.to_arrayrecord(data, url, "x", shard_size=1)
        records.write_records(db.from_sequence(range(6), npartitions=3), url, "t")
        items = [np.arange(n, dtype=np.int64) for n in (3, 0, 5, 2)]
        ragged.write_ragged(db.from_sequence(items, npartitions=2), url, "rg", shard_size=1)

    def write_ids(node):
        return {parse_shard_name(n).write_id for n in _files(tmp_path, node)}

    [wid] = write_ids("x")
    assert wid == _manifest(tmp_path, "x")["commit"]
    assert _files(tmp_path, "x") == sorted(shard_name(wid, n, folder="c") for n in range(3))

    [wid] = write_ids("t")
    assert _files(tmp_path, "t") == sorted(
        shard_name(shard_stem("t", wid), i, total=3) for i in range(3)
    )
    assert [s["path"] for s in _manifest(tmp_path, "t")["shards"]] == _files(tmp_path, "t")

    [wid] = write_ids("rg")
    parsed = [parse_shard_name(n) for n in _files(tmp_path, "rg")]
    assert all(p.folder == SHARD_DIR and len(p.index) == 2 for p in parsed)
    assert {p.index[0] for p in parsed} == {0, 1}
    for part in (0, 1):
        ks = sorted(p.index[1] for p in parsed if p.index[0] == part)
        assert ks == list(range(len(ks)))

    before = {node: set(_files(tmp_path, node)) for node in ("x", "t", "rg")}
    arrayds.compact(url, "x", min_small_files=2)
    arrayds.compact(url, "t", min_small_files=2)
    arrayds.compact(url, "rg", min_small_files=2)
    for node in ("x", "t", "rg"):
        new = set(_files(tmp_path, node)) - before[node]
        assert new, node
        [wid] = {parse_shard_name(n).write_id for n in new}
        assert wid == _manifest(tmp_path, node)["commit"]
        if node == "t":
            expected = {
                shard_name(shard_stem("t", wid), i, total=len(new)) for i in range(len(new))
            }
        elif node == "rg":
            expected = {shard_name(wid, 0, n, folder="c") for n in range(len(new))}
        else:
            expected = {shard_name(wid, n, folder="c") for n in range(len(new))}
        assert new == expected, node
