"""arrayds.beam on S3 (the loopback moto server of this folder's conftest): a Beam
pipeline writes a records dataset into a bucket, ReadFromArrayRecord reads it back and
reads plain ArrayRecord files there by glob."""

from __future__ import annotations

import numpy as np
import pytest

from arrayds import records as records

beam = pytest.importorskip("apache_beam", reason="needs apache-beam (arrayds[beam])")
abeam = pytest.importorskip("arrayds.beam", reason="needs apache-beam (arrayds[beam])")
source_test_utils = pytest.importorskip("apache_beam.io.source_test_utils")


def _dict(i: int) -> dict:
    return {"id": i, "x": np.arange(i % 5, dtype=np.float32) * i, "name": f"n{i}"}


def _same_dicts(got: list, want: list) -> None:
    got = sorted(got, key=lambda r: r["id"])
    assert [r["id"] for r in got] == [r["id"] for r in want]
    for g, w in zip(got, want, strict=True):
        assert g["name"] == w["name"]
        np.testing.assert_array_equal(g["x"], w["x"])


def test_beam_write_and_read(s3_url, s3_opts):
    want = [_dict(i) for i in range(30)]
    with beam.Pipeline() as p:
        _ = (
            p
            | beam.Create(range(30))
            | beam.Map(_dict)
            | abeam.WriteToArrayRecord(s3_url, num_shards=2, storage_options=s3_opts)
        )
    ds = records.open_records(s3_url, storage_options=s3_opts)
    assert ds.num_shards == 2
    _same_dicts(list(ds), want)
    got = source_test_utils.read_from_source(
        abeam.ReadFromArrayRecord(s3_url, storage_options=s3_opts).source
    )
    _same_dicts(got, want)
    with pytest.raises(FileExistsError):
        _ = (
            beam.Pipeline()
            | beam.Create([1])
            | abeam.WriteToArrayRecord(s3_url, storage_options=s3_opts)
        )
    # plain files on S3 by glob
    plain = [s3_url + "/plain/" + p.rsplit("/", 1)[-1] for p in ds.shard_paths]
    import s3fs

    fs = s3fs.S3FileSystem(**s3_opts)
    for src, dst in zip(ds.shard_paths, plain, strict=True):
        fs.copy(src, dst)
    src = abeam.ReadFromArrayRecord(s3_url + "/plain/*.array_record-*", storage_options=s3_opts)
    assert len(source_test_utils.read_from_source(src.source)) == 30
