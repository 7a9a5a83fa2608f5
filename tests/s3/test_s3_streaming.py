"""Shards stream to S3 while they are written: a file larger than
one part is a multipart upload whose parts leave while later records are still being
encoded; the object appears only when the writer closes, and a writer that fails or
is abandoned leaves no object and no pending upload."""

from __future__ import annotations

import numpy as np
import pytest
import s3fs

import arrayds
from arrayds.abc import store as store_contract

from .conftest import BUCKET


def _records(n_mib: int) -> list[bytes]:
    """Incompressible 1 MiB records (zstd cannot shrink them)."""
    rng = np.random.default_rng(7)
    return [rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes() for _ in range(n_mib)]


def _pending_uploads(fs: s3fs.S3FileSystem) -> list:
    return fs.call_s3("list_multipart_uploads", Bucket=BUCKET).get("Uploads", [])


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(store_contract, "UPLOAD_PART_BYTES", 5 << 20)  # the S3 minimum


def _parts(fs: s3fs.S3FileSystem, path: str) -> int:
    """How many parts the object was uploaded in (a multipart ETag ends in -<parts>)."""
    fs.invalidate_cache()
    etag = fs.info(path)["ETag"].strip('"')
    return int(etag.rsplit("-", 1)[1]) if "-" in etag else 1


def test_a_large_file_is_a_multipart_upload(small_parts, s3_opts, s3_fs, s3_url):
    recs = _records(12)
    url = f"{s3_url}/big.array_record"
    with arrayds.ArrayRecordWriter(url, "uncompressed", storage_options=s3_opts) as w:
        w.write_many(recs[:8])
        # a part is uploaded already, the object does not exist yet
        [upload] = [u for u in _pending_uploads(s3_fs) if url.endswith(u["Key"])]
        parts = s3_fs.call_s3(
            "list_parts", Bucket=BUCKET, Key=upload["Key"], UploadId=upload["UploadId"]
        )
        assert len(parts["Parts"]) == 1 and not s3_fs.exists(url)
        w.write_many(recs[8:])
    assert _parts(s3_fs, url) == 3  # 12 MiB in parts of 5 MiB
    with arrayds.ArrayRecordReader(url, storage_options=s3_opts) as r:
        assert r.num_records() == 12 and r.read(11) == recs[11] and r.read(0) == recs[0]
    assert _pending_uploads(s3_fs) == []


def test_a_small_file_is_one_put(proxy, s3, s3_url):
    opts = s3.storage_options(proxy.url)
    url = f"{s3_url}/small.array_record"
    with arrayds.ArrayRecordWriter(url, storage_options=opts) as w:
        w.write_many([b"record %d" % i for i in range(100)])
    methods = proxy.stats.snapshot()["methods"]
    assert methods.get("PUT") == 1 and "POST" not in methods
    assert arrayds.ArrayRecordReader(url, storage_options=opts).read(99) == b"record 99"


def test_a_failed_write_leaves_no_object_and_no_upload(small_parts, s3_opts, s3_url):
    fs = s3fs.S3FileSystem(**s3_opts)
    url = f"{s3_url}/failed.array_record"
    recs = _records(12)
    with pytest.raises(RuntimeError, match="the data source broke"):
        with arrayds.ArrayRecordWriter(url, "uncompressed", storage_options=s3_opts) as w:
            w.write_many(recs)
            assert len(_pending_uploads(fs)) == 1  # parts were uploaded
            raise RuntimeError("the data source broke")
    fs.invalidate_cache()
    assert not fs.exists(url) and _pending_uploads(fs) == []
    # an abandoned writer (never closed) uploads nothing either
    w = arrayds.ArrayRecordWriter(url, "uncompressed", storage_options=s3_opts)
    w.write_many(recs)
    with pytest.warns(ResourceWarning, match="garbage-collected without close"):
        del w
        import gc

        gc.collect()
    fs.invalidate_cache()
    assert not fs.exists(url) and _pending_uploads(fs) == []


def test_an_upload_error_is_raised_by_the_write(small_parts, s3_opts, s3_url):
    """The part upload fails (the bucket is gone): write_many raises it, and the
    writer is then unusable."""
    fs = s3fs.S3FileSystem(**s3_opts)
    bucket = "arrayds-gone"
    fs.mkdir(bucket)
    w = arrayds.ArrayRecordWriter(
        f"s3://{bucket}/x.array_record", "uncompressed", storage_options=s3_opts
    )
    fs.rmdir(bucket)
    with pytest.raises(OSError):
        w.write_many(_records(12))
    assert not w.ok()
    w.abort()


def test_dataset_shards_stream(small_parts, s3_opts, s3_fs, s3_url):
    """A dataset write: its 11 MiB shard is uploaded in parts; reads are unchanged."""
    x = np.random.default_rng(1).integers(0, 256, (11, 1 << 20), dtype=np.uint8)
    arrayds.to_arrayrecord(
        x, s3_url, chunks=(1, 1 << 20), compression="uncompressed", storage_options=s3_opts
    )
    [shard] = s3_fs.find(f"{s3_url}/c")
    assert _parts(s3_fs, shard) == 3
    np.testing.assert_array_equal(arrayds.open_array(s3_url, storage_options=s3_opts)[:], x)
