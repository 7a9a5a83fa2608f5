"""Shard files written through the obstore backend on moto: ``ObstoreStore.new_file``
yields an :class:`arrayds.storage.obstore.ObstoreUpload` (obstore's buffered writer)
that the ArrayRecord writer streams into, so a write sends every request with
obstore's client (the proxy counts them per User-Agent) and none with s3fs; a shard
larger than a part is a multipart upload, and a write that fails midway leaves no
object and no pending multipart upload (asked of the server with s3fs, past the
proxy). A completing request whose reply is lost is recovered as on fsspec
(``nodes.shards._stored_whole``)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest
from conformance.servers import load_helper

import arrayds
from arrayds.abc import store as store_contract
from arrayds.nodes import shards as store_mod
from arrayds.storage import get_store

from .conftest import BUCKET

pytest.importorskip("obstore", reason="the obstore backend needs arrayds[obstore]")
from arrayds.storage.obstore import ObstoreUpload  # noqa: E402

OBSTORE = "object_store"
PART = 5 << 20  # the S3 minimum part size


@pytest.fixture
def small_parts(monkeypatch):
    monkeypatch.setattr(store_contract, "UPLOAD_PART_BYTES", PART)


@pytest.fixture
def fs(s3):
    """s3fs straight to the server: what is stored, and the pending uploads."""
    import s3fs

    return s3fs.S3FileSystem(**s3.storage_options())


@pytest.fixture
def url():
    return f"s3://{BUCKET}/{uuid.uuid4().hex}"


def _pending(fs, url: str) -> list[str]:
    """Keys of the multipart uploads pending below ``url``."""
    prefix = url[len(f"s3://{BUCKET}/") :]
    got = fs.call_s3("list_multipart_uploads", Bucket=BUCKET, Prefix=prefix)
    return [u["Key"] for u in got.get("Uploads", [])]


def _parts(fs, path: str) -> int:
    """How many parts the object was uploaded in (a multipart ETag ends in -<parts>)."""
    fs.invalidate_cache()
    etag = fs.info(path)["ETag"].strip('"')
    return int(etag.rsplit("-", 1)[1]) if "-" in etag else 1


def _records(n_mib: int) -> list[bytes]:
    """Incompressible 1 MiB records."""
    rng = np.random.default_rng(11)
    return [rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes() for _ in range(n_mib)]


def test_a_multipart_shard_is_written_by_obstore_alone(s3, small_parts, proxy, fs, url, tmp_path):
    """An 11 MiB array in one shard through the obstore backend: three parts, every
    request obstore's; the shard reads back through arrayds and the official reader."""
    from array_record.python import array_record_module as official

    x = np.random.default_rng(1).integers(0, 256, (11, 1 << 20), dtype=np.uint8)
    opts = {**s3.storage_options(proxy.url), "backend": "obstore"}
    proxy.stats.reset()
    arrayds.to_arrayrecord(
        x, url, "x", chunks=(1, 1 << 20), compression="uncompressed", storage_options=opts
    )
    got = proxy.stats.snapshot()
    assert got["agents"] == {OBSTORE: got["requests"]}, got
    [shard] = fs.find(f"{url}/x/c")
    assert _parts(fs, shard) == 3 and _pending(fs, url) == []
    np.testing.assert_array_equal(arrayds.open_array(url, "x", storage_options=opts)[:], x)
    local = tmp_path / "shard.array_record"
    local.write_bytes(fs.cat_file(shard))
    r = official.ArrayRecordReader(str(local))
    try:
        assert r.num_records() == 11 and r.read([10])[0].endswith(x[10].tobytes())
    finally:
        r.close()


def test_a_small_shard_is_one_put(s3, proxy, url):
    opts = {**s3.storage_options(proxy.url), "backend": "obstore"}
    st = get_store(url, opts)
    proxy.stats.reset()
    size = store_mod.write_shard(st, "n/c/s.array_record", [b"r%d" % i for i in range(50)], "")
    got = proxy.stats.snapshot()
    assert got["methods"] == {"PUT": 1, "HEAD": 1}, got  # the PUT, then write_shard's size
    assert st.size("n/c/s.array_record") == size


def test_an_exception_midway_leaves_no_object_and_no_pending_upload(s3, small_parts, fs, url):
    st = get_store(url, {**s3.storage_options(), "backend": "obstore"})
    with pytest.raises(RuntimeError, match="the data source broke"):
        with store_mod.shard_writer(st, "n/c/s.array_record", "uncompressed") as w:
            w.write_many(_records(12))
            assert len(_pending(fs, url)) == 1  # parts were uploaded
            raise RuntimeError("the data source broke")
    fs.invalidate_cache()
    assert fs.find(url) == [] and _pending(fs, url) == []
    assert st.list("") == []


def test_an_abandoned_writer_leaves_no_pending_upload(s3, small_parts, fs, url):
    """A writer collected without close() aborts its upload; the block then ends
    with the RuntimeError of an upload not completed."""
    st = get_store(url, {**s3.storage_options(), "backend": "obstore"})
    with pytest.raises(RuntimeError, match="the upload was aborted"):
        with st.new_file("n/c/s.array_record") as upload:
            w = arrayds.ArrayRecordWriter(upload, "uncompressed")
            w.write_many(_records(12))
            assert len(_pending(fs, url)) == 1
            with pytest.warns(ResourceWarning, match="garbage-collected without close"):
                del w
                gc.collect()
            assert upload.state == "aborted" and _pending(fs, url) == []
    fs.invalidate_cache()
    assert fs.find(url) == []


def test_a_block_that_ends_without_closing_the_upload_is_an_error(s3, fs, url):
    st = get_store(url, {**s3.storage_options(), "backend": "obstore"})
    with pytest.raises(RuntimeError, match=r"s3://.*/n/c/s.array_record: the upload was open"):
        with st.new_file("n/c/s.array_record") as upload:
            upload.write(b"half a file")
    with pytest.raises(RuntimeError, match="the upload was aborted"):
        with st.new_file("n/c/s.array_record") as upload:
            with arrayds.ArrayRecordWriter(upload) as w:
                w.write(b"x")
                w.abort()
    assert fs.find(url) == [] and _pending(fs, url) == []


def test_bad_writer_options_abort_the_upload_given(s3, fs, url):
    st = get_store(url, {**s3.storage_options(), "backend": "obstore"})
    with pytest.raises(ValueError, match=r"ArrayRecordWriter\('s3://.*'\): .*nosuchoption"):
        with st.new_file("n/c/s.array_record") as upload:
            arrayds.ArrayRecordWriter(upload, "nosuchoption:1")
    assert upload.state == "aborted"
    with pytest.raises(TypeError, match="options must be a str"):
        with st.new_file("n/c/t.array_record") as upload:
            arrayds.ArrayRecordWriter(upload, 3)
    assert upload.state == "aborted" and fs.find(url) == []
    assert isinstance(upload, ObstoreUpload)


def test_a_lost_reply_to_the_completing_request_is_recovered(s3, small_parts, fs, url):
    """The CompleteMultipartUpload of a shard is applied and its reply lost: obstore
    resends it, moto (as S3) answers the resend of a completed upload with success,
    and the shard is stored once, whole, with no upload left pending. (A resend
    answered 404, as GCS answers a completed session, is a ``FileNotFoundError`` from
    ``close()``, which ``shard_writer`` takes as stored when the object holds every
    byte sent: ``nodes.shards._stored_whole``; fake-gcs-server cannot run obstore's
    uploads.)"""
    faults = load_helper("faults", "proxy")
    with faults.FaultProxy(("127.0.0.1", s3.port)) as proxy:
        st = get_store(url, {**s3.storage_options(proxy.url), "backend": "obstore"})
        # the POSTs of a multipart upload: create (?uploads), then complete (?uploadId)
        proxy.set_schedule([faults.Rule("lost", methods=("POST",), keys="shard", skip=1, limit=1)])
        with store_mod.shard_writer(st, "n/c/s.array_record", "uncompressed") as w:
            w.write_many(_records(7))
        assert proxy.injected["lost"] == 1
    fs.invalidate_cache()
    assert fs.size(f"{url}/n/c/s.array_record") == w.upload_bytes > PART
    assert _parts(fs, f"{url}/n/c/s.array_record") == 2 and _pending(fs, url) == []


def test_a_write_and_a_read_need_no_s3fs(s3, url):
    """A user with only arrayds[obstore]: s3fs cannot be imported, yet a dataset is
    written (pending marker, shards, manifest) and read back through the obstore
    backend."""
    opts = {**s3.storage_options(), "backend": "obstore"}
    code = f"""
import sys
sys.modules["s3fs"] = None  # what a missing package raises on import
import numpy as np, arrayds
x = np.arange(600.0).reshape(20, 30)
arrayds.to_arrayrecord(x, {url!r}, "x", chunks=(5, 30), storage_options={opts!r})
got = arrayds.open_array({url!r}, "x", storage_options={opts!r})[3:17]
assert (got == x[3:17]).all(), got
"""
    root = os.path.dirname(os.path.dirname(arrayds.__file__))  # where this arrayds is
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    x = np.arange(600.0).reshape(20, 30)
    got = arrayds.open_array(url, "x", storage_options=opts)[:]
    np.testing.assert_array_equal(got, x)


@pytest.mark.parametrize(
    ("url", "root", "canonical"),
    [
        ("s3://b/p/", "b/p", "s3://b/p"),
        ("s3a://b/p", "b/p", "s3://b/p"),
        ("s3://b", "b", "s3://b"),
        ("gs://b/p", "b/p", "gs://b/p"),
        ("gcs://b/p/q", "b/p/q", "gs://b/p/q"),
        ("az://c/p", "c/p", "abfs://c/p"),
    ],
)
def test_the_root_is_named_as_fsspec_names_it_without_opening_fsspec(url, root, canonical):
    """``ObstoreStore.locate`` reads the root from the URL (no s3fs, gcsfs or adlfs
    file system is made: adlfs is not even installed) and names it as fsspec does
    (on S3 the same as the fsspec store; gcsfs and adlfs are slow or absent here)."""
    from arrayds.storage import FsspecStore
    from arrayds.storage.obstore import ObstoreStore

    ob = ObstoreStore(url, {"anon": True})
    assert "fs" not in vars(ob)  # not opened
    assert (ob.root, ob.canonical_url, ob.url_of("k")) == (root, canonical, canonical + "/k")
    if url.startswith("s3"):
        fs = FsspecStore(url, {"anon": True})
        assert (ob.root, ob.protocol, ob.canonical_url) == (fs.root, fs.protocol, fs.canonical_url)
        assert type(ob.fs) is type(fs.fs) and "backend" not in ob.fs.storage_options
