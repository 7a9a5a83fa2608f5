"""arrayds.beam on the DirectRunner: writes committed once, reads split by record range.

One multi-process pipeline (2 workers, the slow start-up paid once) writes and reads
several datasets; the other tests use the in-process DirectRunner.
"""

from __future__ import annotations

import glob
import json
import os
import re

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.io import source_test_utils
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to

import arrayds
from arrayds import beam as abeam
from arrayds import records
from arrayds.files.tfrecord import write_tfrecord
from arrayds.kinds.records import write as records_write
from arrayds.nodes.options import WriterOptions
from arrayds.verify import collect_garbage

MP = PipelineOptions(flags=[], direct_num_workers=2, direct_running_mode="multi_processing")
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BYTES = [b"rec-%04d-" % i + bytes(i % 37) for i in range(300)]


def _dict(i: int) -> dict:
    return {"id": i, "x": np.arange(i % 5, dtype=np.float32) * i, "name": f"n{i}"}


def _same_dicts(got: list, want: list) -> None:
    got = sorted(got, key=lambda r: r["id"])
    assert [r["id"] for r in got] == [r["id"] for r in want]
    for g, w in zip(got, want, strict=True):
        assert g["name"] == w["name"]
        np.testing.assert_array_equal(g["x"], w["x"])
        assert g["x"].dtype == np.float32


def _files(url: str) -> list[str]:
    return sorted(os.path.basename(p) for p in glob.glob(os.path.join(url, "*.array_record*")))


class Fail(beam.DoFn):
    """Passes records on and fails at record ``at`` (a user DoFn that fails midway)."""

    def __init__(self, at: int) -> None:
        self.at = at

    def process(self, i):
        if i == self.at:
            raise RuntimeError(f"user DoFn failed at record {i}")
        yield b"%d" % i


class Opaque:
    pass


@pytest.fixture(scope="module")
def mp(tmp_path_factory):
    """One multi-process pipeline: bytes (one shard per bundle), dicts (3 shards), a
    records dataset and a glob of plain files read back and written again."""
    d = tmp_path_factory.mktemp("beam-mp")
    src = str(d / "src")
    records.write_records([_dict(i) for i in range(40)], src, num_shards=2)
    for k in range(2):
        with arrayds.ArrayRecordWriter(str(d / f"plain-{k}.array_record")) as w:
            w.write_many(b"p%d-%d" % (k, i) for i in range(25))
    urls = {n: str(d / n) for n in ("bytes", "dicts", "copy", "plain")}
    # the worker processes import this module (its functions are pickled by name)
    with pytest.MonkeyPatch.context() as env, beam.Pipeline(options=MP) as p:
        env.setenv("PYTHONPATH", os.pathsep.join([TESTS, os.environ.get("PYTHONPATH", "")]))
        _ = p | "B" >> beam.Create(BYTES) | "WB" >> abeam.WriteToArrayRecord(urls["bytes"])
        _ = (
            p
            | "D" >> beam.Create(range(60))
            | beam.Map(_dict)
            | "WD" >> abeam.WriteToArrayRecord(urls["dicts"], num_shards=3, group_size=4)
        )
        _ = (
            p
            | "R" >> abeam.ReadFromArrayRecord(src)
            | "WC" >> abeam.WriteToArrayRecord(urls["copy"], num_shards=1)
        )
        _ = (
            p
            | "P" >> abeam.ReadFromArrayRecord(str(d / "plain-*.array_record"))
            | "WP" >> abeam.WriteToArrayRecord(urls["plain"])
        )
    return urls


def test_mp_bytes_round_trip_one_shard_per_bundle(mp):
    ds = records.open_records(mp["bytes"])
    assert ds.serializer == "raw" and len(ds) == len(BYTES)
    assert sorted(ds) == sorted(BYTES)
    # per-bundle shards: unique names per attempt, each a set of one
    names = [s.name for s in ds.shards]
    assert len(set(names)) == len(names)
    assert all(re.search(r"-[0-9a-f]{12}\.array_record-00000-of-00001$", n) for n in names)
    assert _files(mp["bytes"]) == sorted(names)  # no stray file
    with open(os.path.join(mp["bytes"], "arrayds.json")) as f:
        assert json.load(f)["generation"] == 1  # committed once


def test_mp_num_shards_dicts_read_by_every_reader(mp):
    from array_record.python.array_record_data_source import ArrayRecordDataSource

    ds = records.open_records(mp["dicts"])
    assert ds.num_shards == 3 and len(ds) == 60 and ds.serializer == "msgpack"
    stem = ds.shards[0].name.split(".array_record-")[0]
    assert [s.name for s in ds.shards] == [
        f"{stem}.array_record-{k:05d}-of-00003" for k in range(3)
    ]
    want = [_dict(i) for i in range(60)]
    _same_dicts(list(ds), want)
    _same_dicts(arrayds.from_arrayrecord(mp["dicts"]).compute(scheduler="sync"), want)
    _same_dicts(list(arrayds.ArrayRecordDataSource(mp["dicts"], decode=True)), want)
    official = ArrayRecordDataSource(ds.shard_paths)
    assert len(official) == 60
    dec = ds.decoder().decode
    _same_dicts([dec(official[i]) for i in range(60)], want)
    assert ds.group_size == 4


def test_mp_read_records_dataset_and_plain_files(mp):
    _same_dicts(list(records.open_records(mp["copy"])), [_dict(i) for i in range(40)])
    plain = records.open_records(mp["plain"])
    assert sorted(plain) == sorted(b"p%d-%d" % (k, i) for k in range(2) for i in range(25))


def test_num_shards_exact_even_with_fewer_records_and_keys_are_stable(tmp_path):
    recs = [b"a", b"b", b"c"]
    for name, order in (("one", recs), ("two", recs[::-1])):
        with beam.Pipeline() as p:
            _ = (
                p
                | beam.Create(order)
                | abeam.WriteToArrayRecord(str(tmp_path / name), num_shards=5)
            )
    one, two = (
        records.open_records(str(tmp_path / "one")),
        records.open_records(str(tmp_path / "two")),
    )
    assert one.num_shards == 5 and sum(s.num_records == 0 for s in one.shards) >= 2
    assert len(_files(str(tmp_path / "one"))) == 5
    # the same record goes to the same shard index whatever the order it came in
    by_shard = [
        [sorted(arrayds.ArrayRecordReader(p).read_all()) for p in ds.shard_paths]
        for ds in (one, two)
    ]
    assert by_shard[0] == by_shard[1]


def test_transform_output_is_the_committed_dataset(tmp_path):
    url = str(tmp_path / "out")
    with beam.Pipeline() as p:
        out = p | beam.Create([{"a": 1}]) | abeam.WriteToArrayRecord(url)
        got = out | beam.Map(lambda ds: (ds.url, len(ds), ds.serializer))
        assert_that(got, equal_to([(url, 1, "msgpack")]))


def test_empty_pcollection_commits_an_empty_dataset(tmp_path):
    url = str(tmp_path / "empty")
    with beam.Pipeline() as p:
        _ = p | beam.Create([]) | abeam.WriteToArrayRecord(url, serializer="raw")
    ds = records.open_records(url)
    assert len(ds) == 0 and ds.num_shards == 0 and ds.serializer == "raw"


def test_modes_w_minus_raises_at_construction_w_replaces_a_appends(tmp_path):
    url = str(tmp_path / "m")
    records.write_records([b"old"], url)
    before = _files(url)
    p = beam.Pipeline()
    with pytest.raises(FileExistsError, match="already exists"):
        _ = p | beam.Create([b"x"]) | abeam.WriteToArrayRecord(url)
    assert _files(url) == before and len(before) == 1  # no shard was written
    with beam.Pipeline() as p:
        _ = p | beam.Create([b"new1", b"new2"]) | abeam.WriteToArrayRecord(url, mode="w")
    assert sorted(records.open_records(url)) == [b"new1", b"new2"]
    with beam.Pipeline() as p:
        _ = p | beam.Create([b"new3"]) | abeam.WriteToArrayRecord(url, mode="a")
    assert sorted(records.open_records(url)) == [b"new1", b"new2", b"new3"]
    assert len(_files(url)) == records.open_records(url).num_shards  # old shard removed
    with pytest.raises(ValueError, match="serializer"):
        _ = (
            beam.Pipeline()
            | beam.Create([1])
            | abeam.WriteToArrayRecord(url, mode="a", serializer="json")
        )
    with pytest.raises(ValueError, match="mode"):
        _ = beam.Pipeline() | beam.Create([1]) | abeam.WriteToArrayRecord(url, mode="r")
    with pytest.raises(ValueError, match="num_shards"):
        abeam.WriteToArrayRecord(url, num_shards=-1)


@pytest.mark.parametrize("num_shards", [0, 2])
def test_failing_dofn_leaves_nothing_or_the_old_content(tmp_path, num_shards):
    new = str(tmp_path / "new")
    with pytest.raises(RuntimeError, match="failed at record 30"):
        with beam.Pipeline() as p:
            _ = (
                p
                | beam.Create(range(50))
                | beam.ParDo(Fail(30))
                | abeam.WriteToArrayRecord(new, num_shards=num_shards)
            )
    assert not records.is_records(new)
    assert not os.path.exists(os.path.join(new, "arrayds.json"))
    old = str(tmp_path / "old")
    records.write_records([b"keep-1", b"keep-2"], old)
    with pytest.raises(RuntimeError, match="failed at record 30"):
        with beam.Pipeline() as p:
            _ = (
                p
                | beam.Create(range(50))
                | beam.ParDo(Fail(30))
                | abeam.WriteToArrayRecord(old, mode="w", num_shards=num_shards)
            )
    assert sorted(records.open_records(old)) == [b"keep-1", b"keep-2"]
    collect_garbage(old, min_age=0)
    assert _files(old) == [s.name for s in records.open_records(old).shards]


@pytest.mark.parametrize("num_shards", [0, 3])
def test_unserializable_record_names_its_type_and_commits_nothing(tmp_path, num_shards):
    url = str(tmp_path / "bad")
    with pytest.raises(TypeError, match="Opaque"):
        with beam.Pipeline() as p:
            _ = (
                p
                | beam.Create([1, 2, 3])
                | beam.Map(lambda i: {"v": i} if i != 2 else Opaque())
                | abeam.WriteToArrayRecord(url, num_shards=num_shards)
            )
    assert not records.is_records(url)
    # an opt-in serializer writes it
    with beam.Pipeline() as p:
        _ = (
            p
            | beam.Create([1])
            | beam.Map(lambda i: Opaque())
            | abeam.WriteToArrayRecord(url, serializer="pickle", num_shards=num_shards)
        )
    assert isinstance(records.open_records(url, allow_pickle=True)[0], Opaque)


def test_retried_bundle_is_not_duplicated_and_its_shard_is_collected(tmp_path):
    """A runner retries a failed bundle and keeps only the retry's output: the first
    attempt's shard file exists but is never named, and gc removes it."""
    url = str(tmp_path / "retry")
    plan, expected = records_write.prepare_write(
        url, None, "w-", WriterOptions("zstd:3", 1), "auto", None, 1
    )
    bundle = [b"r%d" % i for i in range(20)]

    def attempt() -> list:
        fn = abeam._WriteBundleShards(plan)
        fn.start_bundle()
        out = [r for item in bundle for r in fn.process(item)]
        return out + [wv.value for wv in fn.finish_bundle()]

    first = attempt()
    second = attempt()  # the retry of the same bundle
    assert first[0]["shard"].name != second[0]["shard"].name
    settings = ("w-", expected, 0)  # mode, expected serializer, num_shards
    parts = [(0, "shards", second)]  # the one run of a short write
    ds = abeam._commit_parts(parts, plan, settings, expected, (url, None, None))
    assert sorted(ds) == sorted(bundle)  # every record once
    # a retried commit (the commit bundle run again) neither fails nor removes shards
    again = abeam._commit_parts(parts, plan, settings, expected, (url, None, None))
    assert sorted(again) == sorted(bundle)
    assert len(_files(url)) == 2
    report = collect_garbage(url, min_age=0)
    assert [os.path.basename(p) for p in report.removed] == [first[0]["shard"].name]
    assert _files(url) == [second[0]["shard"].name]


def test_big_bundle_rolls_into_several_shards(tmp_path, monkeypatch):
    monkeypatch.setattr(abeam, "_BUNDLE_SHARD_BYTES", 1000)
    url = str(tmp_path / "roll")
    recs = [bytes([i]) * 100 for i in range(35)]
    with beam.Pipeline() as p:
        _ = p | beam.Create(recs) | abeam.WriteToArrayRecord(url)
    ds = records.open_records(url)
    assert ds.num_shards >= 4 and sorted(ds) == sorted(recs)


# ------------------------------------------------------------------------- reading


def _one_big_shard(tmp_path, n=40):
    url = str(tmp_path / "big")
    records.write_records([{"i": i} for i in range(n)], url, group_size=3)
    return url


def test_source_splits_one_shard_by_record_range(tmp_path):
    url = _one_big_shard(tmp_path)
    source = abeam.ReadFromArrayRecord(url).source
    bundles = list(source.split(desired_bundle_size=60))
    assert len(bundles) > 3
    assert bundles[0].start_position == 0 and bundles[-1].stop_position == 40
    source_test_utils.assert_sources_equal_reference_source(
        (source, None, None), [(b.source, b.start_position, b.stop_position) for b in bundles]
    )
    got = source_test_utils.read_from_source(source, 7, 19)
    assert [r["i"] for r in got] == list(range(7, 19))
    # dynamic splitting at every fraction after every record read is consistent, also
    # across a shard boundary
    url2 = str(tmp_path / "two")
    records.write_records([{"i": i} for i in range(12)], url2, num_shards=2)
    source_test_utils.assert_split_at_fraction_exhaustive(abeam.ReadFromArrayRecord(url2).source)


def test_read_decode_false_pickle_gate_and_components(tmp_path):
    url = str(tmp_path / "g")
    records.write_records([{"k": 1}], url, "sub/data")
    with beam.Pipeline() as p:
        got = p | abeam.ReadFromArrayRecord(url, "sub/data", decode=False)
        _ = got | beam.Map(lambda b: (isinstance(b, bytes) and b) or 1 / 0)
    pick = str(tmp_path / "pick")
    records.write_records([Opaque()], pick, serializer="pickle")
    with pytest.raises(ValueError, match="pickle"):
        abeam.ReadFromArrayRecord(pick)
    src = abeam.ReadFromArrayRecord(pick, allow_pickle=True).source
    assert isinstance(source_test_utils.read_from_source(src)[0], Opaque)
    with pytest.raises(FileNotFoundError):
        abeam.ReadFromArrayRecord(str(tmp_path / "plain-*"), "sub")


def test_read_glob_matching_nothing_is_file_not_found_at_construction(tmp_path):
    with pytest.raises(FileNotFoundError, match="no input file matches"):
        abeam.ReadFromArrayRecord(str(tmp_path / "nothing-*.array_record"))
    with pytest.raises(FileNotFoundError):
        abeam.ReadFromArrayRecord(str(tmp_path / "missing.array_record"))


def test_damaged_shard_is_corruption_error_naming_the_file(tmp_path):
    url = _one_big_shard(tmp_path)
    shard = records.open_records(url).shard_paths[0]
    data = bytearray(open(shard, "rb").read())
    data[100] ^= 0xFF  # a chunk header
    with open(shard, "wb") as f:
        f.write(data)
    with pytest.raises(arrayds.CorruptionError, match=re.escape(os.path.basename(shard))):
        with beam.Pipeline() as p:
            _ = p | abeam.ReadFromArrayRecord(url)
    plain = abeam.ReadFromArrayRecord(shard).source  # the plain file, listed by path
    with pytest.raises(arrayds.CorruptionError, match=re.escape(os.path.basename(shard))):
        source_test_utils.read_from_source(plain)
    with open(shard, "wb") as f:  # truncated: the listing (which opens it) fails
        f.write(data[: len(data) // 2])
    with pytest.raises(arrayds.CorruptionError, match=re.escape(os.path.basename(shard))):
        abeam.ReadFromArrayRecord(shard)
    # a shard holding other records than the manifest says
    url2 = str(tmp_path / "swap")
    ds = records.write_records([b"a", b"b", b"c"], url2, num_shards=2)
    a, b = ds.shard_paths
    os.replace(b, a)
    with arrayds.ArrayRecordWriter(b) as w:
        w.write(b"z")
    src = abeam.ReadFromArrayRecord(url2).source
    with pytest.raises(arrayds.CorruptionError, match="manifest"):
        source_test_utils.read_from_source(src)


# --------------------------------------------------------------------- conversion


def _tfrecords(d, n_files=3, per=10) -> list[bytes]:
    out = []
    for k in range(n_files):
        recs = [b"tf-%d-%d" % (k, i) for i in range(per)]
        write_tfrecord(os.path.join(d, f"in-{k}.tfrecord"), recs)
        out.extend(recs)
    return out


def test_tfrecord_to_arrayrecord_per_file_and_num_shards(tmp_path):
    want = _tfrecords(str(tmp_path))
    pattern = str(tmp_path / "in-*.tfrecord")
    ds = abeam.tfrecord_to_arrayrecord(None, pattern, str(tmp_path / "a"))
    assert ds.num_shards == 3 and ds.serializer == "raw"
    assert list(ds.data_source()) == want  # one shard per file, in file order
    with beam.Pipeline() as p:
        out = abeam.tfrecord_to_arrayrecord(p, pattern, str(tmp_path / "b"), num_shards=2)
        assert isinstance(out, beam.PCollection)
    ds = records.open_records(str(tmp_path / "b"))
    assert ds.num_shards == 2 and sorted(ds) == sorted(want)


def test_tfrecord_conversion_bad_input(tmp_path):
    _tfrecords(str(tmp_path), n_files=2)
    with pytest.raises(FileNotFoundError):
        abeam.tfrecord_to_arrayrecord(None, str(tmp_path / "none-*"), str(tmp_path / "o"))
    path = str(tmp_path / "in-1.tfrecord")
    data = bytearray(open(path, "rb").read())
    data[30] ^= 0xFF
    open(path, "wb").write(data)
    with pytest.raises(arrayds.CorruptionError, match="in-1.tfrecord"):
        abeam.tfrecord_to_arrayrecord(None, str(tmp_path / "in-*"), str(tmp_path / "o"))
    assert not records.is_records(str(tmp_path / "o"))
    with pytest.raises(ValueError, match="num_shards"):
        abeam.tfrecord_to_arrayrecord(None, path, str(tmp_path / "o"), num_shards=-2)
