"""Datasets on a real GCS-compatible server (fake-gcs-server on loopback, through gcsfs).

Arrays, records, ragged arrays and xarray datasets round-trip and append; manifest
commits are uploads with an ``ifGenerationMatch`` precondition, so of two committers
that read the same manifest exactly one wins and the other gets
``CommitConflictError``; a killed writer leaves the previous state; a missing bucket is
a clear error; dask.distributed worker processes write and read one bucket.
"""

from __future__ import annotations

import json
import threading

import dask
import dask.array as da
import numpy as np
import pytest

import arrayds
from arrayds import records
from arrayds import store as store_mod
from arrayds.manifest import CommitConflictError
from arrayds.store import Store


def _objects(fs, url: str) -> list[str]:
    fs.invalidate_cache()
    try:
        return sorted(fs.find(url[len("gs://") :]))
    except FileNotFoundError:
        return []


# ------------------------------------------------------------------- arrays


def test_array_round_trip_region_write_and_append(gcs_url, gcs_opts, gcs_fs):
    data = np.random.default_rng(0).standard_normal((60, 40)).astype("f4")
    x = da.from_array(data, chunks=(10, 8))
    a = arrayds.to_arrayrecord(x, gcs_url, "grid/t", shard_size=1, storage_options=gcs_opts)
    assert a.shape == (60, 40) and a.chunks == x.chunks
    b = arrayds.open_array(gcs_url, "grid/t", storage_options=gcs_opts)
    np.testing.assert_array_equal(b[:], data)
    np.testing.assert_array_equal(b[5:33, 7:9], data[5:33, 7:9])
    np.testing.assert_array_equal(b.oindex[[0, 59, 31], :3], data[[0, 59, 31], :3])
    w = arrayds.open_array(gcs_url, "grid/t", mode="r+", storage_options=gcs_opts)
    w[1:3, 2:5] = -1
    data[1:3, 2:5] = -1
    arrayds.to_arrayrecord(x * 0 + 7, gcs_url, "grid/t", mode="a", storage_options=gcs_opts)
    c = arrayds.open_array(gcs_url, "grid/t", storage_options=gcs_opts)
    assert c.shape == (120, 40)
    np.testing.assert_array_equal(c[:60], data)
    np.testing.assert_array_equal(c[60:], 7)
    total = arrayds.from_arrayrecord(gcs_url, "grid/t", storage_options=gcs_opts).sum()
    np.testing.assert_allclose(total.compute(), data.sum() + 7 * 60 * 40, rtol=1e-4)
    g = arrayds.open(gcs_url, storage_options=gcs_opts)
    assert list(g) == ["grid"] and "t (120, 40) float32" in str(g.tree())
    # every object is a finished shard or a manifest: no temporary objects
    names = _objects(gcs_fs, gcs_url)
    assert all(n.endswith((".array_record", "arrayds.json")) for n in names), names


# ------------------------------------------------------------------- records


def test_records_ragged_and_xarray_round_trip(gcs_url, gcs_opts):
    import xarray as xr

    from arrayds.ragged import open_ragged

    items = [{"id": i, "x": np.full(3, i, dtype="f4")} for i in range(50)]
    ds = records.write_records(items, gcs_url, "train", num_shards=3, storage_options=gcs_opts)
    assert ds.num_shards == 3 and len(ds) == 50
    more = [{"id": 50 + i, "x": np.zeros(3, "f4")} for i in range(10)]
    records.write_records(more, gcs_url, "train", mode="a", num_shards=1, storage_options=gcs_opts)
    got = arrayds.from_arrayrecord(gcs_url, "train", storage_options=gcs_opts).compute()
    assert [r["id"] for r in got] == list(range(60))
    src = records.data_source(f"{gcs_url}/train", decode=True, storage_options=gcs_opts)
    assert len(src) == 60 and src[57]["id"] == 57
    np.testing.assert_array_equal(src[3]["x"], np.full(3, 3, "f4"))

    clips = [np.arange(2 * n, dtype="f4").reshape(2, n) for n in (5, 300, 17)]
    arrayds.to_arrayrecord(clips, gcs_url, "audio", storage_options=gcs_opts)
    ra = open_ragged(gcs_url, "audio", storage_options=gcs_opts)
    assert ra.shapes == [(2, 5), (2, 300), (2, 17)]
    np.testing.assert_array_equal(ra[1, 1, 250:260], clips[1][1, 250:260])

    xds = xr.Dataset(
        {"t2m": (("time", "x"), np.arange(12.0).reshape(4, 3))},
        coords={"time": np.arange(4), "x": [10, 20, 30]},
        attrs={"title": "gcs"},
    )
    arrayds.to_arrayrecord(xds, gcs_url, "weather", storage_options=gcs_opts)
    back = xr.open_dataset(gcs_url, engine="arrayds", group="weather", storage_options=gcs_opts)
    xr.testing.assert_identical(back.load(), xds)


# ------------------------------------------------------------------- commits


def _group(gen: int, **attrs) -> dict:
    return {"format": "arrayds", "kind": "group", "generation": gen, "attrs": attrs}


@pytest.mark.parametrize("existing", [False, True], ids=["create", "replace"])
def test_two_committers_that_read_the_same_manifest_exactly_one_wins(
    gcs_url, gcs_opts, monkeypatch, existing
):
    """Both committers read the node (no manifest, or generation 1) before either
    uploads; the server's generation precondition (``ifGenerationMatch=0`` or the
    generation read) lets exactly one upload through."""
    store = Store(gcs_url, gcs_opts)
    if existing:
        store.write_manifest("n", _group(1))
    both_read = threading.Barrier(2, timeout=20)
    real_read = store_mod._gcs_read

    def read_then_wait(fs, path):
        out = real_read(fs, path)
        both_read.wait()
        return out

    monkeypatch.setattr(store_mod, "_gcs_read", read_then_wait)
    outcome: dict[int, BaseException | None] = {}

    def commit(who: int) -> None:
        try:
            store.write_manifest("n", _group(2, by=who))
            outcome[who] = None
        except BaseException as e:  # noqa: BLE001 - recorded and checked below
            outcome[who] = e

    threads = [threading.Thread(target=commit, args=(i,)) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    winners = [who for who, e in outcome.items() if e is None]
    assert len(outcome) == 2 and len(winners) == 1, outcome
    (loser_error,) = (e for e in outcome.values() if e is not None)
    assert isinstance(loser_error, CommitConflictError), repr(loser_error)
    if existing:
        assert "conditional PUT refused" in str(loser_error)
    else:
        assert "another writer created this node" in str(loser_error)
    assert f"{gcs_url}/n" in str(loser_error)
    monkeypatch.setattr(store_mod, "_gcs_read", real_read)
    assert store.read_manifest("n")["attrs"] == {"by": winners[0]}


def test_a_committer_that_read_an_older_generation_is_refused(gcs_url, gcs_opts):
    store = Store.get(gcs_url, gcs_opts)
    store.write_manifest("", _group(1))
    store.write_manifest("", _group(2, by=1))
    with pytest.raises(CommitConflictError, match="another writer committed generation 2"):
        store.write_manifest("", _group(2, by=2))
    assert store.read_manifest("")["attrs"] == {"by": 1}


def test_a_replace_after_a_change_is_refused_by_the_server(gcs_url, gcs_opts, monkeypatch):
    """Another writer replaces the manifest right after this committer read it (with
    a generation number this committer's client-side check would accept): the upload
    with the old object generation must be refused, not overwrite."""
    store = Store(gcs_url, gcs_opts)
    store.write_manifest("n", _group(1))
    real_read = store_mod._gcs_read

    def read_then_race(fs, path):
        out = real_read(fs, path)
        monkeypatch.setattr(store_mod, "_gcs_read", real_read)
        fs.pipe_file(path, json.dumps(_group(1, x=1)).encode())
        return out

    monkeypatch.setattr(store_mod, "_gcs_read", read_then_race)
    with pytest.raises(CommitConflictError, match="conditional PUT refused"):
        store.write_manifest("n", _group(2))
    assert store.read_manifest("n")["attrs"] == {"x": 1}


def test_a_commit_retried_after_a_lost_reply_is_not_a_conflict(gcs_url, gcs_opts, monkeypatch):
    """The client resends an upload that had landed (its reply was lost): the server
    refuses the resend (the generation moved on); the commit still succeeds."""
    store = Store(gcs_url, gcs_opts)
    store.write_manifest("n", _group(1))
    real_put = store_mod._gcs_put
    refused: list[BaseException] = []

    def put_twice(fs, path, data, gen):
        real_put(fs, path, data, gen)
        try:
            real_put(fs, path, data, gen)
        except FileExistsError as e:  # HTTP 412 from the server
            refused.append(e)
            raise

    monkeypatch.setattr(store_mod, "_gcs_put", put_twice)
    store.write_manifest("n", _group(2, done=True))
    assert len(refused) == 1
    assert store.read_manifest("n")["attrs"] == {"done": True}


def test_concurrent_appends_never_lose_a_commit(gcs_url, gcs_opts):
    """Six threads append to one records dataset at once: a records append that loses
    the conditional commit re-reads the manifest and appends again, so every append
    commits and the final dataset holds all of them."""
    from concurrent.futures import ThreadPoolExecutor

    records.write_records([b"seed"], gcs_url, storage_options=gcs_opts)

    def append(i: int) -> bool:
        try:
            records.write_records(
                [b"%d" % i], gcs_url, mode="a", num_shards=1, storage_options=gcs_opts
            )
            return True
        except CommitConflictError:
            return False

    with ThreadPoolExecutor(6) as pool, dask.config.set(scheduler="sync"):
        ok = list(pool.map(append, range(6)))
    assert all(ok)
    got = records.read_records(gcs_url, storage_options=gcs_opts).compute(scheduler="sync")
    assert sorted(got) == sorted([b"seed"] + [b"%d" % i for i, good in enumerate(ok) if good])


def test_conditional_commit_can_be_turned_off(gcs_url, gcs_opts, monkeypatch):
    """ARRAYDS_CONDITIONAL_COMMIT=0 (servers without generation preconditions): one
    plain upload, no generation check."""
    store = Store(gcs_url, gcs_opts)
    store.write_manifest("", _group(3))
    monkeypatch.setenv("ARRAYDS_CONDITIONAL_COMMIT", "0")
    store.write_manifest("", _group(2, plain=True))
    assert store.read_manifest("")["attrs"] == {"plain": True}


# --------------------------------------------------------------- bad input


def test_missing_bucket_is_a_clear_error_and_writes_nothing(gcs_opts, gcs_fs):
    url = "gs://no-such-bucket-arrayds/ds"
    with pytest.raises(FileNotFoundError, match="gs://no-such-bucket-arrayds/ds") as ei:
        arrayds.to_arrayrecord(da.ones((4, 4), chunks=2), url, storage_options=gcs_opts)
    assert "bucket 'no-such-bucket-arrayds' does not exist" in str(ei.value)
    with pytest.raises(FileNotFoundError, match="gs://no-such-bucket-arrayds/ds"):
        arrayds.open(url, storage_options=gcs_opts)
    gcs_fs.invalidate_cache()
    assert not gcs_fs.exists("no-such-bucket-arrayds")


def test_a_killed_write_leaves_the_previous_state(gcs_url, gcs_opts, gcs_fs, tmp_path):
    """A writer process is SIGKILLed after some of its shards were uploaded: the
    dataset still reads as before, and the orphans are what `gc` removes."""
    import signal
    import subprocess
    import sys
    import time

    from arrayds.verify import collect_garbage, verify

    base = np.arange(40, dtype="i4").reshape(20, 2)
    arrayds.to_arrayrecord(da.from_array(base, chunks=(2, 2)), gcs_url, storage_options=gcs_opts)
    before = set(_objects(gcs_fs, gcs_url))
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
    # the child inherits GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false (conftest)
    proc = subprocess.Popen([sys.executable, str(script), gcs_url, json.dumps(gcs_opts)])
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            if len(set(_objects(gcs_fs, gcs_url)) - before) >= 3 or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert proc.poll() is None, "the writer finished before it could be killed"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(30)
    orphans = set(_objects(gcs_fs, gcs_url)) - before
    assert len(orphans) >= 3 and all(o.endswith(".array_record") for o in orphans)
    store_mod.clear_reader_cache()
    a = arrayds.open_array(gcs_url, storage_options=gcs_opts)
    assert a.shape == (20, 2)
    np.testing.assert_array_equal(a[:], base)
    report = collect_garbage(gcs_url, storage_options=gcs_opts, min_age=0)
    assert sorted(report.removed) == sorted("gs://" + o for o in orphans)
    assert set(_objects(gcs_fs, gcs_url)) == before
    assert verify(gcs_url, storage_options=gcs_opts).ok


# ------------------------------------------------------------ dask.distributed


def test_distributed_workers_write_and_read_one_bucket(gcs_url, gcs_opts):
    """Worker processes write shards into the bucket and commit; other tasks read
    them back."""
    from distributed import Client, LocalCluster

    data = np.random.default_rng(1).integers(0, 1000, size=(400, 30)).astype("i8")
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):
        x = da.from_array(data, chunks=(25, 30))
        arrayds.to_arrayrecord(x, gcs_url, "x", shard_size=1, storage_options=gcs_opts)
        arrayds.to_arrayrecord(x * 2, gcs_url, "x", mode="a", storage_options=gcs_opts)
        y = arrayds.from_arrayrecord(gcs_url, "x", storage_options=gcs_opts)
        assert y.shape == (800, 30)
        assert int(y.sum().compute()) == int(data.sum()) * 3
        # the work ran in the two worker processes, not in the client
        pids = client.run(lambda: __import__("os").getpid())
        assert len(set(pids.values())) == 2
        assert __import__("os").getpid() not in pids.values()
    a = arrayds.open_array(gcs_url, "x", storage_options=gcs_opts)
    assert len(a.manifest.shards) == 16 + 1
    np.testing.assert_array_equal(
        a[390:410, :3], np.concatenate([data[390:], 2 * data[:10]])[:, :3]
    )
