"""Datasets on a real S3-compatible server (moto on loopback, through s3fs).

Arrays, records, ragged arrays and xarray datasets round-trip; appends; reads open a
shard's footer once per process and then fetch only the byte ranges of the chunks
they need; commits are conditional PUTs, so concurrent committers never overwrite
each other; bad credentials and missing buckets are clear errors that leave nothing
behind.
"""

from __future__ import annotations

import json

import dask
import dask.array as da
import numpy as np
import pytest

import arrayds
from arrayds import store as store_mod
from arrayds.manifest import CommitConflictError
from arrayds.store import Store


def _objects(fs, url: str) -> list[str]:
    fs.invalidate_cache()
    path = url[len("s3://") :]
    try:
        return sorted(fs.find(path))
    except FileNotFoundError:
        return []


# ------------------------------------------------------------------- arrays


def test_array_round_trip_and_selections(s3_url, s3_opts):
    rng = np.random.default_rng(0)
    data = rng.standard_normal((60, 40)).astype("f4")
    x = da.from_array(data, chunks=(10, 8))
    a = arrayds.to_arrayrecord(x, s3_url, "grid/t", storage_options=s3_opts)
    assert a.shape == (60, 40) and a.chunks == x.chunks
    b = arrayds.open_array(s3_url, "grid/t", storage_options=s3_opts)
    np.testing.assert_array_equal(b[:], data)
    np.testing.assert_array_equal(b[5:33, 7:9], data[5:33, 7:9])
    np.testing.assert_array_equal(b.oindex[[0, 59, 31], :3], data[[0, 59, 31], :3])
    y = arrayds.from_arrayrecord(s3_url, "grid/t", storage_options=s3_opts)
    np.testing.assert_allclose(y.sum().compute(), data.sum(), rtol=1e-4)
    g = arrayds.open(s3_url, storage_options=s3_opts)
    assert list(g) == ["grid"] and "t (60, 40) float32" in str(g.tree())


def test_region_write_and_append(s3_url, s3_opts, s3_fs):
    a = arrayds.open_array(
        s3_url, "x", mode="w", shape=(4, 6), dtype="i8", chunks=(2, 3), storage_options=s3_opts
    )
    a[:] = np.arange(24).reshape(4, 6)
    a[1:3, 2:5] = -1
    expect = np.arange(24).reshape(4, 6)
    expect[1:3, 2:5] = -1
    np.testing.assert_array_equal(
        arrayds.open_array(s3_url, "x", storage_options=s3_opts)[:], expect
    )
    arrayds.to_arrayrecord(
        da.full((4, 6), 7, chunks=(2, 3), dtype="i8"),
        s3_url,
        "x",
        mode="a",
        storage_options=s3_opts,
    )
    b = arrayds.open_array(s3_url, "x", storage_options=s3_opts)
    assert b.shape == (8, 6)
    np.testing.assert_array_equal(b[4:], 7)
    np.testing.assert_array_equal(b[:4], expect)
    # every object is a finished shard or a manifest: no temporary objects
    names = _objects(s3_fs, s3_url)
    assert all(n.endswith((".array_record", "arrayds.json")) for n in names), names


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


# ------------------------------------------------------------------- records


def test_records_round_trip_append_and_data_source(s3_url, s3_opts):
    from arrayds import records

    items = [{"id": i, "x": np.full(3, i, dtype="f4")} for i in range(50)]
    ds = records.write_records(items, s3_url, "train", num_shards=3, storage_options=s3_opts)
    assert ds.num_shards == 3 and len(ds) == 50
    more = [{"id": 50 + i, "x": np.zeros(3, "f4")} for i in range(10)]
    records.write_records(more, s3_url, "train", mode="a", num_shards=1, storage_options=s3_opts)
    bag = arrayds.from_arrayrecord(s3_url, "train", storage_options=s3_opts)
    got = bag.compute(scheduler="threads")
    assert [r["id"] for r in got] == list(range(60))
    src = records.data_source(f"{s3_url}/train", decode=True, storage_options=s3_opts)
    assert len(src) == 60 and src[57]["id"] == 57
    np.testing.assert_array_equal(src[3]["x"], np.full(3, 3, "f4"))


def test_ragged_and_xarray(s3_url, s3_opts):
    import xarray as xr

    clips = [np.arange(2 * n, dtype="f4").reshape(2, n) for n in (5, 300, 17)]
    arrayds.to_arrayrecord(clips, s3_url, "audio", storage_options=s3_opts)
    from arrayds.ragged import open_ragged

    ra = open_ragged(s3_url, "audio", storage_options=s3_opts)
    assert ra.shapes == [(2, 5), (2, 300), (2, 17)]
    np.testing.assert_array_equal(ra[1, 1, 250:260], clips[1][1, 250:260])

    ds = xr.Dataset(
        {"t2m": (("time", "x"), np.arange(12.0).reshape(4, 3))},
        coords={"time": np.arange(4), "x": [10, 20, 30]},
        attrs={"title": "s3"},
    )
    arrayds.to_arrayrecord(ds, s3_url, "weather", storage_options=s3_opts)
    back = xr.open_dataset(
        s3_url, engine="arrayds", group="weather", storage_options=s3_opts
    ).load()
    xr.testing.assert_identical(back, ds)


# ------------------------------------------------------------------- commits


def test_two_committers_from_the_same_generation_cannot_both_win(s3_url, s3_opts):
    g = arrayds.open(s3_url, mode="w", storage_options=s3_opts)
    g.attrs["n"] = 0
    # two handles read generation g; both prepare generation g + 1
    h1 = arrayds.open(s3_url, mode="r+", storage_options=s3_opts)
    h2 = arrayds.open(s3_url, mode="r+", storage_options=s3_opts)
    store = Store.get(s3_url, s3_opts)
    gen0 = store.read_manifest("")["generation"]
    m = dict(store.read_manifest(""))
    m1 = dict(m, generation=gen0 + 1, attrs={"by": 1})
    m2 = dict(m, generation=gen0 + 1, attrs={"by": 2})
    store.write_manifest("", m1)
    with pytest.raises(CommitConflictError, match="another writer committed generation"):
        store.write_manifest("", m2)
    assert store.read_manifest("")["attrs"] == {"by": 1}
    del h1, h2


def test_conditional_put_refuses_a_change_between_read_and_put(s3_url, s3_opts, monkeypatch):
    """Another writer replaces the manifest right after this committer's HEAD: the
    If-Match PUT must be refused by the server (not overwrite it)."""
    store = Store(s3_url, s3_opts)  # a private store: its file system is patched below
    store.write_manifest("n", {"format": "arrayds", "kind": "group", "generation": 1})
    fs = store.fs
    real_info = fs.info

    def info_then_race(path, **kw):
        out = real_info(path, **kw)
        if path.endswith("n/arrayds.json"):
            monkeypatch.setattr(fs, "info", real_info)
            other = {"format": "arrayds", "kind": "group", "generation": 5, "attrs": {"x": 1}}
            fs.pipe_file(path, json.dumps(other).encode())
        return out

    monkeypatch.setattr(fs, "info", info_then_race)
    with pytest.raises(CommitConflictError):
        store.write_manifest("n", {"format": "arrayds", "kind": "group", "generation": 6})
    assert store.read_manifest("n")["attrs"] == {"x": 1}


def test_concurrent_appends_never_lose_a_commit(s3_url, s3_opts):
    """Eight threads append to one records dataset at once: every append either
    commits or raises CommitConflictError; the final manifest holds exactly the
    appends that reported success."""
    from concurrent.futures import ThreadPoolExecutor

    from arrayds import records

    records.write_records([b"seed"], s3_url, storage_options=s3_opts)

    def append(i: int) -> bool:
        try:
            records.write_records(
                [b"%d" % i], s3_url, mode="a", num_shards=1, storage_options=s3_opts
            )
            return True
        except CommitConflictError:
            return False

    with ThreadPoolExecutor(8) as pool, dask.config.set(scheduler="sync"):
        ok = list(pool.map(append, range(8)))
    assert any(ok)
    ds = records.open_records(s3_url, storage_options=s3_opts)
    got = sorted(records.read_records(s3_url, storage_options=s3_opts).compute(scheduler="sync"))
    want = sorted([b"seed"] + [b"%d" % i for i, good in enumerate(ok) if good])
    assert got == want
    assert len(ds) == 1 + sum(ok)


# --------------------------------------------------------------- bad input


def test_missing_bucket_is_a_clear_error_and_writes_nothing(s3_opts, s3_fs):
    url = "s3://no-such-bucket-arrayds/ds"
    with pytest.raises(FileNotFoundError, match="no-such-bucket-arrayds") as ei:
        arrayds.to_arrayrecord(da.ones((4, 4), chunks=2), url, storage_options=s3_opts)
    assert "does not exist" in str(ei.value)
    with pytest.raises(FileNotFoundError, match="s3://no-such-bucket-arrayds/ds"):
        arrayds.open(url, storage_options=s3_opts)
    assert not s3_fs.exists("no-such-bucket-arrayds")


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
    assert _objects(s3_fs, s3_url) == []


def test_a_killed_write_leaves_the_previous_state(s3, s3_url, s3_opts, s3_fs, tmp_path):
    """A writer process is SIGKILLed after some of its shards were uploaded: the
    dataset still reads as before, and the orphans are what `gc` removes."""
    import signal
    import subprocess
    import sys
    import time

    base = np.arange(40, dtype="i4").reshape(20, 2)
    arrayds.to_arrayrecord(da.from_array(base, chunks=(2, 2)), s3_url, storage_options=s3_opts)
    before = set(_objects(s3_fs, s3_url))
    script = tmp_path / "writer.py"
    script.write_text(
        "import sys, time, json, dask, dask.array as da, numpy as np, arrayds\n"
        "opts = json.loads(sys.argv[2])\n"
        "def slow(b):\n"
        "    time.sleep(0.3)\n"
        "    return b + 1000\n"
        "x = da.zeros((60, 2), chunks=(2, 2), dtype='i4').map_blocks(slow, dtype='i4')\n"
        "with dask.config.set(scheduler='sync'):\n"
        "    arrayds.to_arrayrecord(x, sys.argv[1], mode='a', shard_size=1,"
        " storage_options=opts)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script), s3_url, json.dumps(s3_opts)])
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            new = set(_objects(s3_fs, s3_url)) - before
            if len(new) >= 3 or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the writer finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
    orphans = set(_objects(s3_fs, s3_url)) - before
    assert len(orphans) >= 3 and all(o.endswith(".array_record") for o in orphans)
    store_mod.clear_reader_cache()
    a = arrayds.open_array(s3_url, storage_options=s3_opts)
    assert a.shape == (20, 2)
    np.testing.assert_array_equal(a[:], base)
    # gc removes exactly the orphans; verify then finds nothing wrong
    from arrayds.verify import collect_garbage, verify

    report = collect_garbage(s3_url, storage_options=s3_opts, min_age=0)
    assert sorted(report.removed) == sorted("s3://" + o for o in orphans)
    assert set(_objects(s3_fs, s3_url)) == before
    assert verify(s3_url, storage_options=s3_opts).ok


# ------------------------------------------------------------ dask.distributed


def test_distributed_workers_write_and_read_one_bucket(s3_url, s3_opts):
    """Worker processes write shards into the bucket and commit; other tasks read
    them back (each worker opens a shard's footer once and caches the reader)."""
    import dask.bag as db
    from distributed import Client, LocalCluster

    from arrayds import records

    data = np.random.default_rng(1).integers(0, 1000, size=(400, 30)).astype("i8")
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        x = da.from_array(data, chunks=(25, 30))
        arrayds.to_arrayrecord(x, s3_url, "x", shard_size=1, storage_options=s3_opts)
        arrayds.to_arrayrecord(x * 2, s3_url, "x", mode="a", storage_options=s3_opts)
        y = arrayds.from_arrayrecord(s3_url, "x", storage_options=s3_opts)
        assert y.shape == (800, 30)
        total = y.sum().compute()
        assert int(total) == int(data.sum()) * 3
        # which processes did the work: both workers, not the client
        who = client.run(lambda: __import__("os").getpid())
        assert len(set(who.values())) == 2
        bag = db.from_sequence(range(1000), npartitions=4).map(lambda i: {"i": i, "sq": i * i})
        records.write_records(bag, s3_url, "sq", storage_options=s3_opts)
        back = arrayds.from_arrayrecord(s3_url, "sq", storage_options=s3_opts)
        assert back.npartitions == 4
        assert back.map(lambda r: r["sq"]).sum().compute() == sum(i * i for i in range(1000))
    a = arrayds.open_array(s3_url, "x", storage_options=s3_opts)
    np.testing.assert_array_equal(
        a[390:410, :3], np.concatenate([data[390:], 2 * data[:10]])[:, :3]
    )


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
    shards = sorted(p for p in _objects(s3_fs, s3_url) if "/x/c/" in p)
    orphan = shards[0].replace(".array_record", "-orphan.array_record")
    s3_fs.copy(shards[0], orphan)
    dry = run("gc", s3_url, "--dry-run", "--min-age", "0")
    assert dry.exit_code == 0 and f"would remove s3://{orphan}" in dry.output
    assert run("gc", s3_url, "--min-age", "0").exit_code == 0
    assert orphan not in _objects(s3_fs, s3_url)
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
