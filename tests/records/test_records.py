"""Records datasets: writing bags and lists, reading bags, manifests, append, atomic
commits, serializer gating and error paths (real files, real dask)."""

from __future__ import annotations

import json
import os
import pickle
import re

import dask
import dask.bag as db
import numpy as np
import pytest
from dask.delayed import Delayed

import arrayds
from arrayds import records as records
from arrayds.kinds.records import serializers
from arrayds.nodes.shards import io_stats, reset_io_stats

from .conftest import assert_example_equal, example

SHARD_NAME = re.compile(r"^(?P<stem>.+)\.array_record-(?P<i>\d{5})-of-(?P<n>\d{5})$")


def manifest(url: str) -> dict:
    with open(os.path.join(url, "arrayds.json")) as f:
        return json.load(f)


def test_list_of_objects_msgpack_round_trip(tmp_path, examples):
    url = str(tmp_path / "train")
    ds = records.write_records(examples, url, num_shards=4)
    assert ds.serializer == "msgpack" and ds.num_shards == 4 and len(ds) == 200
    man = manifest(url)
    assert man["kind"] == "records" and man["format"] == "arrayds"
    assert man["serializer"] == "msgpack" and man["group_size"] == 1
    assert man["compression"] == "zstd:3" and man["num_records"] == 200
    assert [s["records"] for s in man["shards"]] == [50, 50, 50, 50]
    names = [s["path"] for s in man["shards"]]
    stems = set()
    for k, name in enumerate(names):
        m = SHARD_NAME.match(name)
        assert m, name
        assert int(m["i"]) == k and int(m["n"]) == 4
        stems.add(m["stem"])
        assert os.path.isfile(os.path.join(url, name))
    assert len(stems) == 1 and next(iter(stems)).startswith("train-")
    out = records.read_records(url).compute(scheduler="sync")
    assert len(out) == 200
    for a, b in zip(examples, out, strict=True):
        assert_example_equal(a, b)


def test_bag_one_shard_per_partition_order_preserved(tmp_path):
    bag = db.from_sequence(range(1000), npartitions=7).map(lambda i: {"i": i, "sq": i * i})
    url = str(tmp_path / "bag")
    ds = records.write_records(bag, url)
    assert ds.num_shards == bag.npartitions
    sizes = bag.map_partitions(lambda p: [len(list(p))]).compute(scheduler="sync")
    assert [s.num_records for s in ds.shards] == sizes and sum(sizes) == 1000
    back = records.read_records(url)
    assert back.npartitions == bag.npartitions
    got = back.compute(scheduler="threads")
    assert [x["i"] for x in got] == list(range(1000))
    assert all(x["sq"] == x["i"] ** 2 for x in got)
    # partition k of the result is shard k
    first = back.map_partitions(lambda p: [p[0]["i"] if p else None]).compute(scheduler="sync")
    starts = np.cumsum([0] + [s.num_records for s in ds.shards[:-1]]).tolist()
    assert first == starts


def test_write_graph_is_one_task_per_partition_plus_commit(tmp_path):
    bag = db.from_sequence([b"x%d" % i for i in range(100)], npartitions=5).map(bytes.upper)
    delayed_write = records.write_records(bag, str(tmp_path / "g"), compute=False)
    assert isinstance(delayed_write, Delayed)
    graph = dict(delayed_write.__dask_graph__())
    # the bag's tasks are fused into the 5 shard writers, plus one commit (aliases are
    # key renames, not work)
    tasks = [k for k, v in graph.items() if type(v).__name__ != "Alias"]
    assert len(tasks) == 5 + 1
    assert not os.path.exists(tmp_path / "g" / "arrayds.json")  # nothing before compute
    man = delayed_write.compute(scheduler="sync")
    assert man["num_records"] == 100 and man["serializer"] == "raw"
    assert records.read_records(str(tmp_path / "g")).compute(scheduler="sync")[:2] == [
        b"X0",
        b"X1",
    ]


def test_processes_scheduler_default_for_bags(tmp_path):
    bag = db.from_sequence(list(range(40)), npartitions=4)
    ds = records.write_records(bag, str(tmp_path / "p"))  # bag default: processes
    assert len(ds) == 40
    assert records.read_records(str(tmp_path / "p")).compute() == list(range(40))


def test_auto_raw_and_official_reader_on_shards(tmp_path):
    from array_record.python import array_record_module as official
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    recs = [os.urandom(int(n)) for n in np.random.default_rng(0).integers(0, 3000, 300)]
    url = str(tmp_path / "raw")
    ds = records.write_records(db.from_sequence(recs, npartitions=3), url)
    assert ds.serializer == "raw"
    # every shard opens with the official reader, group_size 1, all records in order
    got = []
    for path in ds.shard_paths:
        r = official.ArrayRecordReader(path)
        assert "group_size:1" in r.writer_options_string()
        got.extend(r.read_all())
        r.close()
    assert got == recs
    # and the official data source over the shard files (no arrayds involved)
    src = ArrayRecordDataSource(ds.shard_paths)
    assert len(src) == 300
    idx = [299, 0, 150, 7]
    assert [src[i] for i in idx] == [recs[i] for i in idx]


def test_append_adds_shards_without_touching_old_ones(tmp_path):
    url = str(tmp_path / "app")
    records.write_records([{"i": i} for i in range(10)], url, num_shards=2)
    before = {n: os.stat(os.path.join(url, n)).st_mtime_ns for n in os.listdir(url)}
    shard_files = sorted(n for n in before if ".array_record-" in n)
    ds = records.write_records(
        db.from_sequence([{"i": i} for i in range(10, 25)], npartitions=3), url, mode="a"
    )
    assert ds.num_shards == 5 and len(ds) == 25
    for n in shard_files:
        assert os.stat(os.path.join(url, n)).st_mtime_ns == before[n]
    names = [s.path for s in ds.shards]
    assert names[:2] == shard_files
    assert SHARD_NAME.match(names[2])["stem"] != SHARD_NAME.match(names[0])["stem"]
    assert [x["i"] for x in records.read_records(url).compute(scheduler="sync")] == list(range(25))
    assert manifest(url)["generation"] == 2
    # appending with another serializer is refused, nothing changes
    with pytest.raises(ValueError, match="uses the 'msgpack' serializer"):
        records.write_records([{"i": 0}], url, mode="a", serializer="json")
    assert len(records.open_records(url)) == 25


def test_append_auto_follows_stored_serializer(tmp_path):
    url = str(tmp_path / "rawapp")
    records.write_records([b"a", b"b"], url)
    records.write_records([b"c"], url, mode="a")
    assert records.open_records(url).serializer == "raw"
    with pytest.raises(TypeError, match=r"item 1 of partition 0 .*'raw' serializer"):
        records.write_records([b"d", {"not": "bytes"}], url, mode="a")
    assert records.read_records(url).compute(scheduler="sync") == [b"a", b"b", b"c"]


def test_append_to_missing_creates(tmp_path):
    url = str(tmp_path / "new")
    ds = records.write_records([1, 2, 3], url, mode="a")
    assert len(ds) == 3 and ds.serializer == "msgpack"


def test_modes(tmp_path):
    url = str(tmp_path / "m")
    records.write_records([b"1"], url)
    with pytest.raises(FileExistsError, match="already exists"):
        records.write_records([b"2"], url)
    records.write_records([b"3", b"4"], url, mode="w")
    assert records.read_records(url).compute(scheduler="sync") == [b"3", b"4"]
    with pytest.raises(ValueError, match="mode must be one of"):
        records.write_records([b"x"], url, mode="r+")


def test_w_minus_race_detected_at_commit(tmp_path):
    url = str(tmp_path / "race")
    pending = records.write_records([b"late"], url, compute=False)
    records.write_records([b"first"], url)
    with pytest.raises(FileExistsError):
        pending.compute(scheduler="sync")
    assert records.read_records(url).compute(scheduler="sync") == [b"first"]
    # the losing write removed its shard
    assert len([n for n in os.listdir(url) if ".array_record-" in n]) == 1


def test_unencodable_item_names_partition_and_index_nothing_committed(tmp_path):
    items = [{"ok": i} for i in range(30)]
    items[23] = {"bad": object()}
    bag = db.from_sequence(items, npartitions=3)  # partition 2 holds items 20..29
    url = str(tmp_path / "bad")
    with pytest.raises(TypeError, match=r"item 3 of partition 2 .*'msgpack'") as info:
        with dask.config.set(scheduler="sync"):
            records.write_records(bag, url, serializer="msgpack")
    assert "bad" in str(info.value)
    assert not os.path.exists(os.path.join(url, "arrayds.json"))
    assert not records.is_records(url)
    with pytest.raises(FileNotFoundError):
        records.open_records(url)


def test_unencodable_in_append_leaves_dataset_unchanged(tmp_path):
    url = str(tmp_path / "keep")
    records.write_records([{"a": 1}], url)
    before = manifest(url)
    with pytest.raises(TypeError, match="item 0 of partition 0"):
        records.write_records([{1, 2}], url, mode="a")
    assert manifest(url) == before


def test_json_pickle_and_user_serializers(tmp_path):
    url = str(tmp_path / "j")
    records.write_records([{"a": [1, 2]}, [3]], url, serializer="json")
    assert records.read_records(url).compute(scheduler="sync") == [{"a": [1, 2]}, [3]]
    assert records.read_records(url, decode=False).compute(scheduler="sync")[1] == b"[3]"

    url = str(tmp_path / "pk")
    records.write_records([{1, 2}, (3, 4)], url, serializer="pickle")
    with pytest.raises(ValueError, match="allow_pickle=True"):
        records.read_records(url)
    assert records.read_records(url, allow_pickle=True).compute(scheduler="sync") == [
        {1, 2},
        (3, 4),
    ]
    # the raw bytes are always available
    raw = records.read_records(url, decode=False).compute(scheduler="sync")
    assert all(isinstance(b, bytes) for b in raw)

    url = str(tmp_path / "user")
    pair = (lambda s: s.encode("utf-16"), lambda b: bytes(b).decode("utf-16"))
    records.write_records(["héllo", "wörld"], url, serializer=pair)
    assert records.open_records(url).serializer == "custom"
    with pytest.raises(ValueError, match="not registered in this process"):
        records.read_records(url)
    assert records.read_records(url, serializer=pair).compute(scheduler="sync") == [
        "héllo",
        "wörld",
    ]

    serializers.register(
        "test-upper", lambda s: s.upper().encode(), lambda b: bytes(b).decode(), overwrite=True
    )
    url = str(tmp_path / "reg")
    records.write_records(["a", "b"], url, serializer="test-upper")
    assert records.open_records(url).serializer == "test-upper"
    assert records.read_records(url).compute(scheduler="sync") == ["A", "B"]


def test_never_unpickles_a_non_pickle_dataset(tmp_path):
    url = str(tmp_path / "mp")
    records.write_records([{"a": 1}], url)
    with pytest.raises(ValueError, match="cannot be read with 'pickle'"):
        records.read_records(url, allow_pickle=True, serializer="pickle")


def test_auto_mixed_partitions_become_msgpack(tmp_path):
    bag = db.from_sequence([b"x", b"y", {"z": 1}, 2], npartitions=2)
    url = str(tmp_path / "mixed")
    ds = records.write_records(bag, url)
    assert ds.serializer == "msgpack"
    assert records.read_records(url).compute(scheduler="sync") == [b"x", b"y", {"z": 1}, 2]


def test_empty_partitions_and_empty_list(tmp_path):
    bag = db.from_sequence([b"a"], npartitions=1)
    bag = db.concat([bag, db.from_sequence([], npartitions=1), bag])
    url = str(tmp_path / "e")
    ds = records.write_records(bag, url)
    assert [s.num_records for s in ds.shards] == [1, 0, 1]
    assert ds.serializer == "raw"
    assert records.read_records(url).compute(scheduler="sync") == [b"a", b"a"]
    src = arrayds.ArrayRecordDataSource(url)
    assert len(src) == 2 and src[1] == b"a"
    ds = records.write_records([], str(tmp_path / "none"))
    assert len(ds) == 0 and ds.num_shards == 1


def test_opening_reads_manifest_only(tmp_path):
    url = str(tmp_path / "lazy")
    ds = records.write_records([b"r%d" % i for i in range(50)], url, num_shards=5)
    reset_io_stats()
    ds = records.open_records(url)
    assert len(ds) == 50 and [s.num_records for s in ds.shards] == [10] * 5
    bag = records.read_records(url)
    src = arrayds.ArrayRecordDataSource(url)
    assert len(src) == 50 and bag.npartitions == 5
    assert io_stats()["reader_opens"] == 0
    # shards really are not needed to open: hide them
    for p in ds.shard_paths:
        os.rename(p, p + ".hidden")
    assert len(records.open_records(url)) == 50
    assert len(arrayds.ArrayRecordDataSource(url)) == 50


def test_manifest_count_mismatch_is_corruption(tmp_path):
    url = str(tmp_path / "mismatch")
    ds = records.write_records([b"a", b"b", b"c"], url)
    man = manifest(url)
    man["shards"][0]["records"] = 2
    man["num_records"] = 2
    with open(os.path.join(url, "arrayds.json"), "w") as f:
        json.dump(man, f)
    with pytest.raises(arrayds.CorruptionError, match=r"holds 3 records, the manifest .* says 2"):
        records.read_records(url).compute(scheduler="sync")
    man["num_records"] = 7
    with open(os.path.join(url, "arrayds.json"), "w") as f:
        json.dump(man, f)
    # the shard list is checked at its first use, before any shard is opened
    forged = records.open_records(url)
    for use in (lambda: forged[0], lambda: forged.shards, lambda: list(forged.to_bag())):
        with pytest.raises(arrayds.CorruptionError, match="num_records=7"):
            use()
    assert ds.num_shards == 1


def test_component_inside_group_and_memory_fs(tmp_path):
    url = str(tmp_path / "root")
    records.write_records([b"t"], url, "splits/train")
    assert manifest(url)["kind"] == "group"
    assert manifest(os.path.join(url, "splits"))["kind"] == "group"
    assert records.read_records(url, "splits/train").compute(scheduler="sync") == [b"t"]
    with pytest.raises(ValueError, match="not a group"):
        records.write_records([b"u"], url, "splits/train/deeper")

    mem = "memory://records-test/ds"
    items = [example(i) for i in range(20)]
    records.write_records(items, mem, num_shards=3)
    got = records.read_records(mem).compute(scheduler="sync")
    for a, b in zip(items, got, strict=True):
        assert_example_equal(a, b)
    src = arrayds.ArrayRecordDataSource(mem, decode=True)
    assert_example_equal(src[13], items[13])


def test_bad_arguments(tmp_path):
    url = str(tmp_path / "args")
    with pytest.raises(TypeError, match="dask.bag.Bag or a list"):
        records.write_records(iter([b"x"]), url)
    with pytest.raises(ValueError, match="num_shards"):
        records.write_records([b"x"], url, num_shards=0)
    with pytest.raises(ValueError, match="group_size"):
        records.write_records([b"x"], url, group_size=0)
    with pytest.raises(KeyError, match="unknown serializer"):
        records.write_records([b"x"], url, serializer="yaml")
    with pytest.raises(FileNotFoundError, match="no records dataset"):
        records.open_records(str(tmp_path))
    assert not os.path.exists(url)


def test_group_size_and_compression_recorded(tmp_path):
    url = str(tmp_path / "gs")
    ds = records.write_records(
        [b"%d" % i for i in range(100)], url, group_size=16, compression="uncompressed"
    )
    man = manifest(url)
    assert man["group_size"] == 16 and man["compression"] == "uncompressed"
    assert "group_size:16" in ds.shards[0].options
    assert records.read_records(url).compute(scheduler="sync") == [b"%d" % i for i in range(100)]


def test_repr(tmp_path):
    ds = records.write_records([b"a"], str(tmp_path / "r"))
    assert "1 records in 1 shards" in repr(ds)
    assert "RecordsDataset" in ds._repr_html_()


def test_dask_delayed_under_threads_with_many_partitions(tmp_path):
    bag = db.range(5000, npartitions=16).map(lambda i: np.full(3, i, dtype=np.int16))
    with dask.config.set(scheduler="threads"):
        ds = records.write_records(bag, str(tmp_path / "t"))
    assert ds.num_shards == 16
    arrs = records.read_records(str(tmp_path / "t")).compute(scheduler="threads")
    assert [int(a[0]) for a in arrs] == list(range(5000))
    assert all(a.dtype == np.int16 for a in arrs)


def test_public_api_dispatch(tmp_path):
    url = str(tmp_path / "api")
    items = [{"k": i, "v": np.arange(i, dtype=np.uint8)} for i in range(30)]
    bag = db.from_sequence(items, npartitions=3)
    ds = arrayds.to_arrayrecord(bag, url)
    assert isinstance(ds, records.RecordsDataset) and ds.num_shards == 3
    back = arrayds.from_arrayrecord(url)
    assert isinstance(back, db.Bag) and back.npartitions == 3
    got = back.compute(scheduler="sync")
    assert [x["k"] for x in got] == list(range(30))
    assert got[7]["v"].tolist() == list(range(7))
    # a list with num_shards=, appends, compute=False
    arrayds.to_arrayrecord([{"k": 30}, {"k": 31}], url, mode="a", num_shards=2)
    pending = arrayds.to_arrayrecord([{"k": 32}], url, mode="a", compute=False)
    assert isinstance(pending, Delayed) and len(records.open_records(url)) == 32
    pending.compute()
    assert [x["k"] for x in arrayds.from_arrayrecord(url).compute(scheduler="sync")] == list(
        range(33)
    )
    # open() and groups hand back the records handle
    assert len(arrayds.open(url)) == 33
    arrayds.to_arrayrecord([b"x"], str(tmp_path / "tree"), "splits/test")
    g = arrayds.open(str(tmp_path / "tree"))
    assert isinstance(g["splits/test"], records.RecordsDataset)
    assert arrayds.from_arrayrecord(str(tmp_path / "tree"), "splits/test").compute() == [b"x"]
    with pytest.raises(ValueError, match="applies to arrays"):
        arrayds.to_arrayrecord([b"x"], str(tmp_path / "bad"), shard_size="1MiB")
    # a TFRecord bag straight into to_arrayrecord
    from .conftest import write_independent_tfrecord

    write_independent_tfrecord(tmp_path / "in.tfrecord", [b"a", b"bb"])
    arrayds.to_arrayrecord(arrayds.read_tfrecord(str(tmp_path / "in.tfrecord")), url + "-tf")
    assert arrayds.from_arrayrecord(url + "-tf").compute() == [b"a", b"bb"]


def test_mode_w_replaces_and_removes_old_shards(tmp_path):
    url = str(tmp_path / "repl")
    old = records.write_records([b"1", b"2"], url, num_shards=2).shard_paths
    new = records.write_records([b"3"], url, mode="w").shard_paths
    assert all(not os.path.exists(p) for p in old)
    assert [os.path.exists(p) for p in new] == [True]
    assert records.read_records(url).compute(scheduler="sync") == [b"3"]
    assert manifest(url)["generation"] == 2


def test_dataset_handle_indexing_iteration_pickling(tmp_path):
    import pickle

    url = str(tmp_path / "h")
    ds = records.write_records([{"i": i} for i in range(12)], url, num_shards=3)
    assert ds[5] == {"i": 5} and ds[-1] == {"i": 11}
    assert ds[2:5] == [{"i": 2}, {"i": 3}, {"i": 4}]
    assert [x["i"] for x in ds] == list(range(12))
    clone = pickle.loads(pickle.dumps(ds))
    assert clone[7] == {"i": 7} and len(clone) == 12
    pk = records.write_records([{1}], str(tmp_path / "pk"), serializer="pickle")
    with pytest.raises(ValueError, match="allow_pickle"):
        pk[0]
    assert records.open_records(str(tmp_path / "pk"), allow_pickle=True)[0] == {1}


def test_from_arrayrecord_passes_record_keywords_and_names_unknown_ones(tmp_path):
    url = str(tmp_path / "pk")
    arrayds.to_arrayrecord([{1, 2}, {3}], url, serializer="pickle")
    with pytest.raises(ValueError, match="allow_pickle=True"):
        arrayds.from_arrayrecord(url)
    assert arrayds.from_arrayrecord(url, allow_pickle=True).compute() == [{1, 2}, {3}]
    raw = arrayds.from_arrayrecord(url, decode=False).compute()
    assert [pickle.loads(b) for b in raw] == [{1, 2}, {3}]
    with pytest.raises(
        TypeError, match=r"records dataset .*unexpected keyword arguments \['bogus'\]"
    ):
        arrayds.from_arrayrecord(url, bogus=1)
    arr = str(tmp_path / "arr")
    arrayds.to_arrayrecord(np.arange(4), arr, chunks=2)
    with pytest.raises(TypeError, match=r"array .*unexpected keyword arguments \['allow_pickle'\]"):
        arrayds.from_arrayrecord(arr, allow_pickle=True)


def test_numpy_items_are_records_when_the_call_asks_for_records(tmp_path):
    """A list of numpy arrays is a ragged array by default; serializer=, group_size=
    or num_shards= ask for records, which hold the arrays as msgpack items."""
    items = [np.arange(3), np.arange(5, dtype="f4")]
    for i, kw in enumerate(({"serializer": "msgpack"}, {"group_size": 4}, {"num_shards": 2})):
        url = str(tmp_path / f"r{i}")
        ds = arrayds.to_arrayrecord(items, url, **kw)
        assert isinstance(ds, records.RecordsDataset)
        got = arrayds.from_arrayrecord(url).compute()
        assert [g.tolist() for g in got] == [x.tolist() for x in items]
        assert [g.dtype for g in got] == [x.dtype for x in items]
    same_dtype = [np.arange(3), np.arange(5)]
    ra = arrayds.to_arrayrecord(same_dtype, str(tmp_path / "rag"))
    assert isinstance(ra, arrayds.RaggedArray)
