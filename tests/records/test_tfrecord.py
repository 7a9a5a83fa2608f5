"""arrayds' TFRecord and JSON-lines readers against files built by the independent
`tfrecord` package writer; every CRC verified, damage named by file and offset."""

from __future__ import annotations

import gzip
import json
import os
import random
import struct

import pytest
import tfrecord.writer

import arrayds
from arrayds.files.tfrecord import (
    expand_paths,
    iter_jsonlines,
    iter_tfrecord,
    masked_crc32c,
    write_tfrecord,
)


def independent_tfrecord(path, records):
    """Write raw records with the `tfrecord` package (not our writer)."""
    w = tfrecord.writer.TFRecordWriter(str(path))
    for r in records:
        # TFRecordWriter.write() serializes a tf.train.Example; for raw payloads we use
        # its framing helper (masked_crc) on its file handle.
        length = len(r)
        length_bytes = struct.pack("<Q", length)
        w.file.write(length_bytes)
        w.file.write(w.masked_crc(length_bytes))
        w.file.write(r)
        w.file.write(w.masked_crc(r))
    w.close()


def make_records(n, seed):
    rnd = random.Random(seed)
    return [rnd.randbytes(rnd.choice([0, 1, 7, 100, 1000, 70_000])) for _ in range(n)]


def test_masked_crc_matches_independent_implementation():
    for data in [b"", b"a", b"hello world", bytes(range(256)) * 10]:
        assert struct.pack("<I", masked_crc32c(data)) == tfrecord.writer.TFRecordWriter.masked_crc(
            data
        )


def test_reads_every_record_of_independent_files(tmp_path):
    recs = make_records(500, 1)
    path = tmp_path / "a.tfrecord"
    independent_tfrecord(path, recs)
    assert list(iter_tfrecord(str(path))) == recs
    # the independent reader agrees on the file
    from tfrecord.reader import tfrecord_iterator

    assert [bytes(r) for r in tfrecord_iterator(str(path))] == recs
    # and our writer produces the same bytes as the independent one
    write_tfrecord(str(tmp_path / "b.tfrecord"), recs)
    assert (tmp_path / "b.tfrecord").read_bytes() == path.read_bytes()


def test_reads_tf_examples_written_by_tfrecord_package(tmp_path):
    path = tmp_path / "ex.tfrecord"
    w = tfrecord.writer.TFRecordWriter(str(path))
    for i in range(50):
        w.write({"label": (i, "int"), "feat": ([0.5 * i, 1.0], "float"), "b": (b"x" * i, "byte")})
    w.close()
    from tfrecord import example_pb2

    got = list(iter_tfrecord(str(path)))
    assert len(got) == 50
    for i, rec in enumerate(got):
        ex = example_pb2.Example()
        ex.ParseFromString(rec)
        assert ex.features.feature["label"].int64_list.value[0] == i
        assert ex.features.feature["b"].bytes_list.value[0] == b"x" * i


def test_bag_one_partition_per_file_sorted(tmp_path):
    expected = []
    for k in (2, 0, 1):
        independent_tfrecord(tmp_path / f"part-{k}.tfrecord", make_records(40 + k, k))
    for k in (0, 1, 2):
        expected.extend(make_records(40 + k, k))
    bag = arrayds.read_tfrecord(str(tmp_path / "part-*.tfrecord"))
    assert bag.npartitions == 3
    assert len(bag.dask) == 3  # one task per input file
    assert bag.compute(scheduler="threads") == expected
    assert bag.map_partitions(lambda p: [len(p)]).compute(scheduler="sync") == [40, 41, 42]


def corrupt(path, offset):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x40
    path.write_bytes(bytes(data))


def test_corrupt_data_crc_names_file_and_offset(tmp_path):
    recs = [b"a" * 10, b"b" * 20, b"c" * 30]
    path = tmp_path / "x.tfrecord"
    independent_tfrecord(path, recs)
    second = 12 + 10 + 4
    corrupt(path, second + 12 + 5)  # a data byte of record 1
    it = iter_tfrecord(str(path))
    assert next(it) == recs[0]
    with pytest.raises(arrayds.CorruptionError, match=rf"x\.tfrecord.*data CRC.*offset {second}"):
        next(it)


def test_corrupt_length_and_crc_fields(tmp_path):
    path = tmp_path / "len.tfrecord"
    independent_tfrecord(path, [b"x" * 10, b"y"])
    corrupt(path, 26 + 1)  # length field of record 1
    with pytest.raises(arrayds.CorruptionError, match=r"len\.tfrecord.*length CRC.*offset 26"):
        list(iter_tfrecord(str(path)))
    path2 = tmp_path / "crc.tfrecord"
    independent_tfrecord(path2, [b"x" * 10])
    corrupt(path2, 12 + 10 + 2)  # the data CRC itself
    with pytest.raises(arrayds.CorruptionError, match="data CRC mismatch.*offset 0"):
        list(iter_tfrecord(str(path2)))
    # verify=False skips CRCs but keeps framing
    assert list(iter_tfrecord(str(path2), verify=False)) == [b"x" * 10]


@pytest.mark.parametrize("cut", [1, 4, 13, 30])
def test_truncated_file(tmp_path, cut):
    path = tmp_path / "t.tfrecord"
    independent_tfrecord(path, [b"a" * 20, b"b" * 20])
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    with pytest.raises(arrayds.CorruptionError, match=r"t\.tfrecord: truncated record.*offset 36"):
        list(iter_tfrecord(str(path)))


def test_not_a_tfrecord_file(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("this is just text, not a TFRecord file at all\n")
    with pytest.raises(arrayds.CorruptionError, match="notes.txt.*offset 0"):
        list(iter_tfrecord(str(path)))


def test_corrupt_file_in_bag_raises_on_compute(tmp_path):
    independent_tfrecord(tmp_path / "a.tfrecord", [b"ok"] * 3)
    independent_tfrecord(tmp_path / "b.tfrecord", [b"ok"] * 3)
    corrupt(tmp_path / "b.tfrecord", 12 + 2 + 4 + 12)
    bag = arrayds.read_tfrecord([str(tmp_path / "a.tfrecord"), str(tmp_path / "b.tfrecord")])
    with pytest.raises(arrayds.CorruptionError, match=r"b\.tfrecord.*offset 18"):
        bag.compute(scheduler="sync")


def test_large_records_cross_read_blocks(tmp_path, monkeypatch):
    import arrayds.files.tfrecord as mod

    monkeypatch.setattr(mod, "_BLOCK", 1000)
    recs = make_records(200, 7)
    path = tmp_path / "big.tfrecord"
    independent_tfrecord(path, recs)
    assert list(iter_tfrecord(str(path))) == recs


def test_gzip_and_memory_filesystem(tmp_path):
    import fsspec

    recs = make_records(30, 3)
    plain = tmp_path / "p.tfrecord"
    independent_tfrecord(plain, recs)
    gz = tmp_path / "p.tfrecord.gz"
    gz.write_bytes(gzip.compress(plain.read_bytes()))
    assert list(iter_tfrecord(str(gz), compression="gzip")) == recs
    assert list(iter_tfrecord(str(gz), compression="infer")) == recs
    fs = fsspec.filesystem("memory")
    fs.pipe("/tfr/x.tfrecord", plain.read_bytes())
    assert arrayds.read_tfrecord("memory://tfr/*.tfrecord").compute(scheduler="sync") == recs


def test_missing_inputs(tmp_path):
    with pytest.raises(FileNotFoundError, match="no input file matches"):
        arrayds.read_tfrecord(str(tmp_path / "*.tfrecord"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        arrayds.read_tfrecord(str(tmp_path / "missing.tfrecord"))
    with pytest.raises(FileNotFoundError, match="empty list"):
        expand_paths([])


def test_jsonlines(tmp_path):
    rows = [{"id": i, "text": "é" * i, "v": [i, i / 2]} for i in range(20)]
    a = tmp_path / "a.jsonl"
    a.write_text("\n".join(json.dumps(r) for r in rows[:10]) + "\n\n")
    b = tmp_path / "b.jsonl.gz"
    b.write_bytes(gzip.compress(("\n".join(json.dumps(r) for r in rows[10:])).encode()))
    assert list(iter_jsonlines(str(a))) == rows[:10]
    bag = arrayds.read_jsonlines([str(a), str(b)])
    assert bag.npartitions == 2
    assert bag.compute(scheduler="sync") == rows
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"a": 1}\n{"a": \n')
    with pytest.raises(ValueError, match=r"bad\.jsonl, line 2: invalid JSON"):
        list(iter_jsonlines(str(bad)))


def test_paths_are_os_independent(tmp_path):
    independent_tfrecord(tmp_path / "z.tfrecord", [b"1"])
    files = expand_paths(os.path.join(str(tmp_path), "z.tfrecord"))
    assert [p for _, p in files][0].endswith("z.tfrecord")
