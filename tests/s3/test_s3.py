"""Datasets on a real S3-compatible server (moto on loopback, through s3fs).

:class:`TestS3` runs the object-store conformance suite
(:class:`conformance.objectstore.ObjectStoreConformance`: round trips, appends,
conditional commits, missing buckets, killed writers, dask.distributed) on S3. The
S3-only tests below it: reads open a shard's footer once per process and then fetch
only the byte ranges of the chunks they need (counted by a proxy); wrong credentials
are a clear error that leaves nothing behind; the CLI works on ``s3://`` URLs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import dask.array as da
import numpy as np
import pytest
from conformance.objectstore import ObjectStoreConformance, objects

import arrayds
from arrayds.nodes import shards as store_mod
from arrayds.nodes.names import MANIFEST
from arrayds.storage.base import BaseStore as Store


class TestS3(ObjectStoreConformance):
    """The object-store suite on moto's S3 (fixtures in conftest.py)."""

    @pytest.fixture
    def store_url(self, s3_url: str) -> str:
        return s3_url

    @pytest.fixture
    def store_opts(self, s3_opts: dict) -> dict:
        return s3_opts

    @pytest.fixture
    def store_fs(self, s3_fs: Any) -> Any:
        return s3_fs

    def after_version_read(
        self, monkeypatch: pytest.MonkeyPatch, store: Store, action: Callable[[Any, str], None]
    ) -> None:
        """S3 committers HEAD the manifest (its ETag) first: run ``action`` after
        every ``info`` of a manifest on the store's file system, found or not."""
        fs = store.fs
        real_info = fs.info

        def info_then_act(path: str, **kw: Any) -> dict:
            try:
                return real_info(path, **kw)
            finally:
                if path.endswith(MANIFEST):
                    action(fs, path)

        monkeypatch.setattr(fs, "info", info_then_act)


# ------------------------------------------------------------------- reads


def test_reads_open_the_footer_once_then_fetch_only_chunk_ranges(s3, s3_url, s3_opts, proxy):
    data = np.arange(2000 * 1000, dtype="i4").reshape(2000, 1000)  # 200 chunks of 40 KB
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(10, 1000)),
        s3_url,
        compression="uncompressed",
        shard_size="100MiB",
        storage_options=s3_opts,
    )
    opts = s3.storage_options(proxy.url)
    a = arrayds.open_array(s3_url, storage_options=opts)
    assert len(a.manifest.shards) == 1
    shard_bytes = a.manifest.shards[0].bytes
    assert shard_bytes > 8_000_000
    proxy.stats.reset()
    np.testing.assert_array_equal(a[10:12], data[10:12])
    first = proxy.stats.snapshot()
    # opening the shard: a 128 KiB tail holding the footer (the manifest gives the size:
    # no HEAD), then the chunk
    assert first["requests"] == 2 and first["methods"] == {"GET": 2}
    assert first["bytes_down"] < (128 << 10) + 40_000 + 10_000
    proxy.stats.reset()
    np.testing.assert_array_equal(a[1000:1010], data[1000:1010])
    second = proxy.stats.snapshot()
    # the footer is cached per process: one ranged GET for the one chunk
    assert second["requests"] == 1
    assert second["bytes_down"] < 40_000 + 2_000
    proxy.stats.reset()
    np.testing.assert_array_equal(a[[55, 1505, 1999]], data[[55, 1505, 1999]])
    third = proxy.stats.snapshot()
    assert third["requests"] == 3  # one range per chunk (fetched concurrently)
    assert third["bytes_down"] < 3 * (40_000 + 2_000)


def test_opening_a_node_is_one_head_and_one_get(s3, s3_url, s3_opts, proxy):
    """The manifest's ETag (a HEAD), then its bytes in one GET: s3fs's whole-object
    read would ask for the size again first."""
    arrayds.to_arrayrecord(da.arange(100, chunks=10), s3_url, storage_options=s3_opts)
    arrayds.storage.clear_store_cache()
    proxy.stats.reset()
    x = arrayds.from_arrayrecord(s3_url, storage_options=s3.storage_options(proxy.url))
    assert proxy.stats.snapshot()["methods"] == {"HEAD": 1, "GET": 1}
    assert int(x.sum().compute()) == sum(range(100))


def test_an_object_is_read_in_one_get_an_empty_one_too(s3, s3_url, s3_opts, proxy):
    """s3fs's whole-object read asks for the size first (a HEAD); the store reads an
    object with one open-range GET, and an empty object (which refuses any range)
    still reads as empty."""
    from arrayds.storage import new_store

    writer = new_store(s3_url, s3_opts)
    writer.put("full", b"abc")
    writer.put("empty", b"")
    store = new_store(s3_url, s3.storage_options(proxy.url))
    proxy.stats.reset()
    assert store.get("full") == b"abc"
    assert proxy.stats.snapshot()["methods"] == {"GET": 1}
    assert store.get("empty") == b""
    assert store.get("missing") is None
    assert store.get_versioned("empty")[0] == b""
    assert store.get_versioned("full")[0] == b"abc"


def test_concurrent_first_reads_share_one_footer_fetch(s3, s3_url, s3_opts, proxy):
    from concurrent.futures import ThreadPoolExecutor

    data = np.arange(64 * 100, dtype="i8").reshape(64, 100)
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(4, 100)), s3_url, shard_size="1GiB", storage_options=s3_opts
    )
    a = arrayds.open_array(s3_url, storage_options=s3.storage_options(proxy.url))
    store_mod.reset_io_stats()
    proxy.stats.reset()
    with ThreadPoolExecutor(16) as pool:
        parts = list(pool.map(lambda i: a[4 * i : 4 * i + 4], range(16)))
    np.testing.assert_array_equal(np.concatenate(parts), data)
    assert store_mod.io_stats()["reader_opens"] == 1
    assert proxy.stats.snapshot()["requests"] == 1 + 16  # the footer, then one per chunk


# --------------------------------------------------------------- bad input


def test_wrong_credentials_are_a_clear_error_and_write_nothing(s3, s3_url, s3_opts, s3_fs):
    bad = dict(s3_opts, key="AKIAWRONGWRONGWRONG0", secret="not-the-secret")
    s3.set_auth(True)
    try:
        with pytest.raises(PermissionError, match="access denied") as ei:
            arrayds.to_arrayrecord(da.ones((4, 4), chunks=2), s3_url, storage_options=bad)
        assert s3_url in str(ei.value)
        with pytest.raises(PermissionError, match=s3_url):
            arrayds.open(s3_url, storage_options=bad)
    finally:
        s3.set_auth(False)
    assert objects(s3_fs, s3_url) == []


# ------------------------------------------------------------------- the CLI


def test_cli_info_verify_gc_on_s3(s3_url, s3_opts, s3_fs):
    from click.testing import CliRunner

    from arrayds.cli import cli

    arrayds.to_arrayrecord(
        da.arange(400, chunks=50, dtype="i4"), s3_url, "x", shard_size=1, storage_options=s3_opts
    )
    arrayds.to_arrayrecord([b"a", b"b", b"c"], s3_url, "r", storage_options=s3_opts)
    opts = ["-o", f"endpoint_url={s3_opts['endpoint_url']}", "-o", "key=testing"]
    opts += ["--storage-options", json.dumps({"secret": "testing"})]
    runner = CliRunner()

    def run(*args):
        return runner.invoke(cli, [*args, *opts], catch_exceptions=False)

    desc = json.loads(run("info", s3_url, "--json").output)
    nodes = {n["path"]: n for n in desc["nodes"]}
    assert nodes["/x"]["shards"] == 8 and nodes["/r"]["records"] == 3
    assert nodes["/x"]["bytes_stored"] > 0
    ok = run("verify", s3_url)
    assert ok.exit_code == 0 and "8 records" not in ok.output and "no problems" in ok.output
    # an orphan (a copied shard) and a deleted shard
    shards = sorted(p for p in objects(s3_fs, s3_url) if "/x/c/" in p)
    orphan = shards[0].rsplit("-", 1)[0] + "-99.array_record"  # a name writes produce
    s3_fs.copy(shards[0], orphan)
    dry = run("gc", s3_url, "--dry-run", "--min-age", "0")
    assert dry.exit_code == 0 and f"would remove s3://{orphan}" in dry.output
    assert run("gc", s3_url, "--min-age", "0").exit_code == 0
    assert orphan not in objects(s3_fs, s3_url)
    s3_fs.rm(shards[3])
    bad = run("verify", s3_url)
    assert bad.exit_code == 1
    assert f"DAMAGED s3://{shards[3]}: file: missing" in bad.output


def test_cli_convert_into_and_out_of_s3(s3_url, s3_opts, s3_fs, tmp_path):
    """A local .npy into an S3 dataset, and a .npy on S3 (read by byte ranges) into a
    local one."""
    from click.testing import CliRunner

    from arrayds.cli import cli

    data = np.arange(5000 * 3, dtype="<i4").reshape(5000, 3)
    np.save(tmp_path / "a.npy", data)
    opts = ["-o", f"endpoint_url={s3_opts['endpoint_url']}", "-o", "key=testing"]
    opts += ["-o", "secret=testing"]
    runner = CliRunner()
    res = runner.invoke(
        cli, ["convert", str(tmp_path / "a.npy"), s3_url, "-c", "a", "--chunks", "1000,3", *opts]
    )
    assert res.exit_code == 0, res.output
    a = arrayds.open_array(s3_url, "a", storage_options=s3_opts)
    assert a.chunks[0] == (1000,) * 5
    np.testing.assert_array_equal(a[:], data)
    src = s3_url.replace("s3://", "") + "-src/a.npy"
    s3_fs.put(str(tmp_path / "a.npy"), src)
    src_opts = [o.replace("-o", "--source-option") for o in opts]
    dst = str(tmp_path / "local.ads")
    res = runner.invoke(cli, ["convert", f"s3://{src}", dst, "--chunks", "700,3", *src_opts])
    assert res.exit_code == 0, res.output
    np.testing.assert_array_equal(arrayds.open_array(dst)[:], data)
    assert arrayds.open_array(dst).chunks[0][:2] == (700, 700)
