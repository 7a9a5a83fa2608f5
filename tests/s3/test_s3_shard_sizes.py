"""Shard opens on S3 use the byte size the manifest records.

Opening a shard costs one ranged GET of its tail and no HEAD, for arrays, records,
ragged arrays and xarray datasets; a shard whose real size differs from the
manifest is a CorruptionError naming it (never wrong data), and ``verify`` reports
the difference. Requests are counted by the proxy in front of the moto server.
"""

from __future__ import annotations

import json

import dask.array as da
import numpy as np
import pytest

import arrayds
from arrayds import CorruptionError
from arrayds.nodes import shards as store_mod
from arrayds.verify import verify


def _shard_keys(fs, url: str) -> list[str]:
    fs.invalidate_cache()
    return sorted(p for p in fs.find(url[len("s3://") :]) if not p.endswith("arrayds.json"))


def _no_head(stats: dict) -> bool:
    return stats["methods"].get("HEAD", 0) == 0


def test_array_reads_issue_no_head(s3, s3_url, s3_opts, proxy):
    data = np.arange(64 * 100, dtype="i8").reshape(64, 100)
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(4, 100)),
        s3_url,
        shard_size=8 * 4 * 100 * 8,
        storage_options=s3_opts,
    )
    a = arrayds.open_array(s3_url, storage_options=s3.storage_options(proxy.url))
    nshards = len({e.path for e in a.manifest.shards})
    assert nshards == 2 and all(e.bytes for e in a.manifest.shards)
    store_mod.reset_io_stats()
    proxy.stats.reset()
    np.testing.assert_array_equal(a[0:4], data[0:4])  # a chunk of each shard
    np.testing.assert_array_equal(a[60:64], data[60:64])
    # two footers and two chunks: one ranged GET each
    assert proxy.stats.snapshot()["methods"] == {"GET": 4}
    assert store_mod.io_stats()["reader_opens"] == nshards
    np.testing.assert_array_equal(a[:], data)
    # dask tasks open the shards the same way
    store_mod.clear_reader_cache()
    y = arrayds.from_arrayrecord(s3_url, storage_options=s3.storage_options(proxy.url))
    proxy.stats.reset()
    np.testing.assert_array_equal(y.compute(scheduler="threads"), data)
    assert _no_head(proxy.stats.snapshot())


def test_records_ragged_and_xarray_reads_issue_no_head(s3, s3_url, s3_opts, proxy):
    import xarray as xr

    from arrayds import records as records
    from arrayds.kinds.ragged.handle import open_ragged

    slow = s3.storage_options(proxy.url)
    items = [{"id": i, "x": np.full(3, i, dtype="f4")} for i in range(40)]
    records.write_records(items, s3_url, "train", num_shards=3, storage_options=s3_opts)
    clips = [np.arange(2 * n, dtype="f4").reshape(2, n) for n in (5, 300, 17)]
    arrayds.to_arrayrecord(clips, s3_url, "audio", storage_options=s3_opts)
    ds = xr.Dataset({"t": (("time", "x"), np.arange(12.0).reshape(4, 3))}, coords={"x": [1, 2, 3]})
    arrayds.to_arrayrecord(ds, s3_url, "weather", storage_options=s3_opts)

    # records: the dask bag and the data source
    bag = arrayds.from_arrayrecord(s3_url, "train", storage_options=slow)
    proxy.stats.reset()
    assert [r["id"] for r in bag.compute(scheduler="threads")] == list(range(40))
    assert _no_head(proxy.stats.snapshot())
    src = records.data_source(f"{s3_url}/train", decode=True, storage_options=slow)
    proxy.stats.reset()
    assert [src[i]["id"] for i in (0, 17, 39)] == [0, 17, 39]
    got = proxy.stats.snapshot()
    assert _no_head(got) and got["requests"] == 3 + 3  # 3 footers, 3 records
    # ragged
    store_mod.clear_reader_cache()
    ra = open_ragged(s3_url, "audio", storage_options=slow)
    proxy.stats.reset()
    np.testing.assert_array_equal(ra[1, 1, 250:260], clips[1][1, 250:260])
    assert _no_head(proxy.stats.snapshot())
    # xarray
    store_mod.clear_reader_cache()
    lazy = xr.open_dataset(s3_url, engine="arrayds", group="weather", storage_options=slow)
    proxy.stats.reset()
    back = lazy.load()
    assert _no_head(proxy.stats.snapshot())
    xr.testing.assert_equal(back, ds)


@pytest.fixture
def one_shard(s3_url, s3_opts, s3_fs):
    """An array with one shard of about 800 KB; -> (url, shard key, its bytes, data)."""
    data = np.random.default_rng(3).standard_normal((400, 250))  # incompressible
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(50, 250)), s3_url, shard_size="1GiB", storage_options=s3_opts
    )
    (key,) = _shard_keys(s3_fs, s3_url)
    raw = s3_fs.cat_file(key)
    assert arrayds.open_array(s3_url, storage_options=s3_opts).manifest.shards[0].bytes == len(raw)
    store_mod.clear_reader_cache()
    return s3_url, key, raw, data


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda raw: raw + b"\0" * 10, id="longer"),
        pytest.param(lambda raw: raw[:-10], id="shorter"),
        pytest.param(lambda raw: raw[:100_000], id="shorter-than-the-tail-offset"),
    ],
)
def test_shard_of_another_size_is_corruption_naming_it(one_shard, s3_opts, s3_fs, damage):
    url, key, raw, _data = one_shard
    s3_fs.pipe_file(key, damage(raw))
    a = arrayds.open_array(url, storage_options=s3_opts)
    relpath = a.manifest.shards[0].path
    with pytest.raises(CorruptionError, match="expected to have") as info:
        a[:50]
    assert relpath in str(info.value) and "is damaged" in str(info.value)
    # verify opens it with its real size: the damage shows as the file not opening
    report = verify(url, storage_options=s3_opts)
    assert [(p.url.rsplit("/", 1)[-1], p.where) for p in report.problems] == [
        (relpath.rsplit("/", 1)[-1], "file")
    ], report.problems


@pytest.mark.parametrize("delta", [-1, 1])
def test_manifest_with_a_wrong_size_is_corruption_and_verify_says_so(
    one_shard, s3_opts, s3_fs, delta
):
    url, key, raw, data = one_shard
    mkey = url[len("s3://") :] + "/arrayds.json"
    m = json.loads(s3_fs.cat_file(mkey))
    m["shards"][0]["bytes"] = len(raw) + delta
    s3_fs.pipe_file(mkey, json.dumps(m).encode())
    a = arrayds.open_array(url, storage_options=s3_opts)
    with pytest.raises(CorruptionError, match=m["shards"][0]["path"]):
        a[:]
    report = verify(url, storage_options=s3_opts)
    assert [p.message for p in report.problems] == [
        f"has {len(raw)} bytes, the manifest says {len(raw) + delta}"
    ]
    # the manifest with the right size reads again
    m["shards"][0]["bytes"] = len(raw)
    s3_fs.pipe_file(mkey, json.dumps(m).encode())
    store_mod.clear_reader_cache()
    np.testing.assert_array_equal(arrayds.open_array(url, storage_options=s3_opts)[:], data)


def test_records_and_ragged_shards_of_another_size_are_corruption(s3_url, s3_opts, s3_fs):
    from arrayds import records as records
    from arrayds.kinds.ragged.handle import open_ragged

    records.write_records([{"i": i} for i in range(10)], s3_url, "r", storage_options=s3_opts)
    arrayds.to_arrayrecord([np.arange(5.0), np.arange(7.0)], s3_url, "g", storage_options=s3_opts)
    for node in ("r", "g"):
        for key in _shard_keys(s3_fs, f"{s3_url}/{node}"):
            s3_fs.pipe_file(key, s3_fs.cat_file(key) + b"\0")
    store_mod.clear_reader_cache()
    with pytest.raises(CorruptionError, match="expected to have .*more than that"):
        records.data_source(f"{s3_url}/r", storage_options=s3_opts)[0]
    with pytest.raises(CorruptionError, match="expected to have .*more than that"):
        arrayds.from_arrayrecord(s3_url, "r", storage_options=s3_opts).compute(scheduler="sync")
    with pytest.raises(CorruptionError, match="shard .* is damaged: .*expected to have"):
        open_ragged(s3_url, "g", storage_options=s3_opts)[1]
    report = verify(s3_url, storage_options=s3_opts)
    assert len(report.problems) == 2 and all(p.where == "file" for p in report.problems)


def _wait_for(cond) -> bool:
    """Wait until ``cond()`` holds (background work finishing); the deadline only
    turns a hang into a failure, it bounds no expected duration."""
    import time

    end = time.monotonic() + 120
    while not cond():
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def _object_name(request: bytes) -> str:
    """The last path component of an HTTP request's target."""
    return request.split(b" ", 2)[1].split(b"?", 1)[0].decode().rsplit("/", 1)[-1]


@pytest.mark.parametrize("limit", [64, 3])
def test_a_read_prefetches_the_footers_of_its_own_shards_only(
    s3, s3_url, s3_opts, proxy, monkeypatch, limit
):
    """node_shard_reader given the shards a read needs: opening the first of them
    starts the other footers meanwhile (reads of at most FOOTER_PREFETCH_SHARDS
    shards), and never a footer of a shard of the node the read does not need. The
    proxy holds the other footers until the test has seen them asked for."""
    monkeypatch.setattr(store_mod, "FOOTER_PREFETCH_SHARDS", limit)
    data = np.arange(48 * 100, dtype="i8").reshape(48, 100)  # 12 chunks, 2 per shard
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(4, 100)),
        s3_url,
        shard_size=2 * 4 * 100 * 8,
        storage_options=s3_opts,
    )
    a = arrayds.open_array(s3_url, storage_options=s3.storage_options(proxy.url))
    sizes = {e.path: e.bytes for e in a.manifest.shards}
    names = sorted(sizes)
    assert len(names) == 6
    first, needs = names[1], {p: sizes[p] for p in names[1:5]}  # the read needs 4
    others = {p.rsplit("/", 1)[-1] for p in names[2:5]}
    asked: list[str] = []

    def hold(request: bytes) -> bool:
        asked.append(_object_name(request))
        return asked[-1] in others

    proxy.hold = hold
    store_mod.reset_io_stats()
    proxy.stats.reset()
    assert len(store_mod.node_shard_reader(a.store, a.path, first, sizes[first], needs)) == 2
    if limit >= 4:  # the 3 other footers were asked for while the first one opened
        assert _wait_for(lambda: proxy.stats.snapshot()["held"] == 3)
    else:  # decided before the open returned: nothing queued
        assert not store_mod._queued
    proxy.release.set()
    opened = 4 if limit >= 4 else 1
    assert _wait_for(lambda: store_mod.io_stats()["reader_opens"] == opened)
    assert _wait_for(lambda: not store_mod._queued)
    got = proxy.stats.snapshot()
    assert _no_head(got) and got["requests"] == opened
    assert set(asked) == {p.rsplit("/", 1)[-1] for p in names[1 : 1 + opened]}
    # the read itself, one GET per shard: a chunk range of a shard open already, and,
    # as it needs half of each shard's records, a shard not open yet whole
    before = got["requests"]
    np.testing.assert_array_equal(a.oindex[[8, 16, 24, 32], :], data[[8, 16, 24, 32], :])
    assert proxy.stats.snapshot()["requests"] - before == 4
    assert store_mod.io_stats()["reader_opens"] == 4


def test_prefetch_still_queued_at_exit_does_not_hold_the_process(s3, s3_url, s3_opts, tmp_path):
    """Footer prefetches run on daemon threads that stop taking work at exit: a
    process that ends right after a read started a prefetch ends at once, not after
    the queued requests. The child opens the first of the 20 shards of a read that
    needs them all (node_shard_reader with those shards); the proxy holds every
    request for the other 19, so when all 8 prefetch threads wait on one, 11 footers
    are still queued; the child is then told to exit. A child that waited for its
    prefetch would never exit (the communicate timeout fails the test)."""
    import subprocess
    import sys

    from .s3server import LatencyProxy

    data = np.arange(160 * 10, dtype="i8").reshape(160, 10)  # 40 chunks, 2 per shard
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(4, 10)), s3_url, shard_size=640, storage_options=s3_opts
    )
    shards = arrayds.open_array(s3_url, storage_options=s3_opts).manifest.shards
    assert len(shards) == 20
    first = min(e.path for e in shards)
    others = {e.path.rsplit("/", 1)[-1] for e in shards} - {first.rsplit("/", 1)[-1]}
    assert len(others) == 19

    def prefetch_of_another_shard(request: bytes) -> bool:
        target = request.split(b" ", 2)[1].split(b"?", 1)[0].decode()
        return target.rsplit("/", 1)[-1] in others

    script = tmp_path / "reader.py"
    script.write_text(
        "import sys, arrayds\n"
        "a = arrayds.open_array(sys.argv[1], storage_options=eval(sys.argv[2]))\n"
        "from arrayds.nodes.shards import node_shard_reader\n"
        "sizes = {e.path: e.bytes for e in a.manifest.shards}\n"
        "first = min(sizes)\n"  # opening it starts the prefetch of 19 footers
        "node_shard_reader(a.store, a.path, first, sizes[first], sizes)\n"
        "print('read', flush=True)\n"
        "sys.stdin.read()\n"  # exit when the test says so
    )
    with LatencyProxy(("127.0.0.1", s3.port), latency=0.0) as gate:
        gate.hold = prefetch_of_another_shard
        proc = subprocess.Popen(
            [sys.executable, str(script), s3_url, repr(s3.storage_options(gate.url))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout.readline() == "read\n", proc.stderr.read()
            # every prefetch thread is waiting for a footer: 11 are still queued
            assert _wait_for(lambda: gate.stats.snapshot()["held"] == 8)
            _out, err = proc.communicate(timeout=120)  # closes its stdin: it exits
        finally:
            proc.kill()
        assert proc.returncode == 0, err
        assert gate.stats.snapshot()["held"] == 8  # no queued footer was fetched
