"""TFRecord and JSON-lines conversion into records datasets: every record arrives,
CRCs are verified, damaged input commits nothing."""

from __future__ import annotations

import json
import os
import random

import pytest
from dask.delayed import Delayed

import arrayds
from arrayds import records as records
from arrayds.convert import jsonlines_to_arrayrecord, tfrecord_to_arrayrecord

from .conftest import write_independent_tfrecord


def make_inputs(tmp_path, nfiles=4, per_file=(50, 120)):
    rnd = random.Random(0)
    expected = []
    for k in range(nfiles):
        recs = [rnd.randbytes(rnd.randint(0, 3000)) for _ in range(rnd.randint(*per_file))]
        write_independent_tfrecord(tmp_path / f"data-{k:03d}.tfrecord", recs)
        expected.append(recs)
    return str(tmp_path / "data-*.tfrecord"), expected


@pytest.mark.parametrize("num_shards", [None, 1, 3, 4, 7])
def test_tfrecord_conversion_every_record_arrives(tmp_path, num_shards):
    pattern, expected = make_inputs(tmp_path)
    url = str(tmp_path / "out")
    ds = tfrecord_to_arrayrecord(pattern, url, num_shards, scheduler="threads")
    flat = [r for recs in expected for r in recs]
    assert ds.serializer == "raw"
    assert ds.num_shards == (num_shards or 4)
    if num_shards is None:
        assert [s.num_records for s in ds.shards] == [len(r) for r in expected]
    assert len(ds) == len(flat)
    assert records.read_records(url).compute(scheduler="sync") == flat
    src = arrayds.ArrayRecordDataSource(url)
    assert src[len(flat) - 1] == flat[-1]


def test_tfrecord_conversion_compute_false_and_bag_path(tmp_path):
    pattern, expected = make_inputs(tmp_path, nfiles=2)
    flat = [r for recs in expected for r in recs]
    pending = tfrecord_to_arrayrecord(pattern, str(tmp_path / "lazy"), compute=False)
    assert isinstance(pending, Delayed)
    assert not os.path.exists(tmp_path / "lazy" / "arrayds.json")
    pending.compute(scheduler="sync")
    assert records.read_records(str(tmp_path / "lazy")).compute(scheduler="sync") == flat
    # the same through a bag of our reader
    bag = arrayds.read_tfrecord(pattern)
    ds = records.write_records(bag, str(tmp_path / "bag"), serializer="raw")
    assert ds.num_shards == 2
    assert records.read_records(str(tmp_path / "bag")).compute(scheduler="sync") == flat


@pytest.mark.parametrize("num_shards", [None, 5])
def test_corrupt_tfrecord_commits_nothing(tmp_path, num_shards):
    pattern, _ = make_inputs(tmp_path, nfiles=3)
    bad = tmp_path / "data-001.tfrecord"
    data = bytearray(bad.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    url = str(tmp_path / "out")
    with pytest.raises(arrayds.CorruptionError, match=r"data-001\.tfrecord.*offset \d+"):
        tfrecord_to_arrayrecord(pattern, url, num_shards, scheduler="sync")
    assert not os.path.exists(os.path.join(url, "arrayds.json"))
    # truncated input too, appending to an existing dataset leaves it unchanged
    good = str(tmp_path / "data-000.tfrecord")
    ds = tfrecord_to_arrayrecord(good, url)
    before = len(ds)
    trunc = tmp_path / "trunc.tfrecord"
    trunc.write_bytes((tmp_path / "data-002.tfrecord").read_bytes()[:-10])
    with pytest.raises(arrayds.CorruptionError, match=r"trunc\.tfrecord: truncated"):
        tfrecord_to_arrayrecord(str(trunc), url, mode="a", scheduler="sync")
    assert len(records.open_records(url)) == before


def test_jsonlines_conversion(tmp_path):
    rows = [{"id": i, "text": "x" * (i % 7), "v": [i, 0.5]} for i in range(300)]
    for k in range(3):
        with open(tmp_path / f"part-{k}.jsonl", "w") as f:
            for r in rows[k * 100 : (k + 1) * 100]:
                f.write(json.dumps(r) + "\n")
    url = str(tmp_path / "js")
    ds = jsonlines_to_arrayrecord(str(tmp_path / "part-*.jsonl"), url, scheduler="sync")
    assert ds.serializer == "msgpack" and ds.num_shards == 3
    assert records.read_records(url).compute(scheduler="sync") == rows
    src = arrayds.ArrayRecordDataSource(url, decode=True)
    assert src[250] == rows[250]
    ds = jsonlines_to_arrayrecord(
        str(tmp_path / "part-*.jsonl"), str(tmp_path / "js2"), 2, serializer="json"
    )
    assert ds.num_shards == 2 and ds.serializer == "json"
    assert records.read_records(str(tmp_path / "js2")).compute(scheduler="sync") == rows
    with open(tmp_path / "part-1.jsonl", "a") as f:
        f.write("{broken\n")
    with pytest.raises(ValueError, match=r"part-1\.jsonl, line 101"):
        jsonlines_to_arrayrecord(str(tmp_path / "part-*.jsonl"), str(tmp_path / "js3"))
    assert not os.path.exists(tmp_path / "js3" / "arrayds.json")


def test_missing_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="no input file matches"):
        tfrecord_to_arrayrecord(str(tmp_path / "*.tfrecord"), str(tmp_path / "o"))
    with pytest.raises(ValueError, match="num_shards"):
        tfrecord_to_arrayrecord(str(tmp_path / "x"), str(tmp_path / "o"), 0)
