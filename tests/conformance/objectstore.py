"""The behaviour every object store must show, as one test base class.

:class:`ObjectStoreConformance` holds the tests that S3, GCS and any later object
store (Azure, ...) must pass in the same way: arrays, records, ragged arrays and
xarray datasets round-trip and append; of two committers that read the same manifest
exactly one wins; a change between a committer's read and its conditional PUT is
refused by the server; concurrent records appends lose nothing; a missing bucket is a
clear error; a killed writer leaves the previous state and ``gc`` removes its orphans;
dask.distributed worker processes write and read one bucket.

A store gets the whole suite with a subclass named ``Test...`` that provides three
fixtures and one hook (the server itself should be module- or session-scoped)::

    class TestAzure(ObjectStoreConformance):
        @pytest.fixture
        def store_url(self, azure_url):  # a fresh dataset root per test
            return azure_url

        @pytest.fixture
        def store_opts(self, azure_opts):  # the storage_options for it
            return azure_opts

        @pytest.fixture
        def store_fs(self, azure_opts):  # an fsspec file system on the server
            return adlfs.AzureBlobFileSystem(**azure_opts)

        def after_version_read(self, monkeypatch, store, action):
            ...  # see ObjectStoreConformance.after_version_read

``missing_bucket_url`` (a URL in a bucket that does not exist) has a default built
from the scheme of ``store_url``.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from typing import Any

import dask
import dask.array as da
import numpy as np
import pytest

import arrayds
from arrayds import records as records
from arrayds.errors import BlindCommitWarning, CommitConflictError
from arrayds.nodes import commit
from arrayds.nodes import shards as store_mod
from arrayds.storage import fsspec as fsspec_store
from arrayds.storage import get_store, new_store
from arrayds.storage.base import BaseStore as Store

MISSING_BUCKET = "no-such-bucket-arrayds"


def objects(fs: Any, url: str) -> list[str]:
    """The object names (without the scheme) below ``url``, sorted; ``[]`` if none."""
    fs.invalidate_cache()
    try:
        return sorted(fs.find(url.split("://", 1)[1]))
    except FileNotFoundError:
        return []


def group(gen: int, **attrs: Any) -> dict[str, Any]:
    """A group manifest of generation ``gen`` with ``attrs``."""
    return {"format": "arrayds", "kind": "group", "generation": gen, "attrs": attrs}


class _SharedCluster:
    """The one LocalCluster of :meth:`ObjectStoreConformance.distributed_cluster`
    (each subclass gets its own session fixture; they share this) and its users."""

    cluster: Any = None
    users = 0


class ObjectStoreConformance:
    """Tests every object store inherits (see the module docstring)."""

    # ------------------------------------------------ what a subclass provides

    @pytest.fixture
    def store_url(self) -> str:
        """A fresh dataset root URL (``scheme://bucket/prefix``) per test."""
        pytest.fail(f"{type(self).__name__} must provide the store_url fixture")

    @pytest.fixture
    def store_opts(self) -> dict:
        """The ``storage_options`` for ``store_url``."""
        pytest.fail(f"{type(self).__name__} must provide the store_opts fixture")

    @pytest.fixture
    def store_fs(self) -> Any:
        """An fsspec file system on the server, to look at the objects directly."""
        pytest.fail(f"{type(self).__name__} must provide the store_fs fixture")

    @pytest.fixture
    def missing_bucket_url(self, store_url: str) -> str:
        """A dataset URL in a bucket that does not exist."""
        return f"{store_url.split('://', 1)[0]}://{MISSING_BUCKET}/ds"

    @pytest.fixture(scope="session")
    @classmethod
    def distributed_cluster(cls) -> Any:
        """A dask.distributed LocalCluster of two worker processes, started once for
        the distributed tests of all stores (it holds no state of any store:
        storage_options travel with the tasks) and closed after the last of them."""
        from distributed import LocalCluster

        if _SharedCluster.cluster is None:
            _SharedCluster.cluster = LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
            )
        _SharedCluster.users += 1
        yield _SharedCluster.cluster
        _SharedCluster.users -= 1
        if _SharedCluster.users == 0:
            _SharedCluster.cluster.close()
            _SharedCluster.cluster = None

    def after_version_read(
        self,
        monkeypatch: pytest.MonkeyPatch,
        store: Store,
        action: Callable[[Any, str], None],
    ) -> None:
        """Make ``action(fs, path)`` run each time a committer of ``store`` has read
        the version of the manifest at ``path`` that its conditional PUT will require
        (S3: the HEAD that gives the ETag; GCS: the GET that gives the object
        generation), also when there is no manifest yet, and before it goes on.

        Patch with ``monkeypatch``; the tests undo it with ``monkeypatch.undo()``."""
        raise NotImplementedError(f"{type(self).__name__} must implement after_version_read")

    # ---------------------------------------------------------------- arrays

    def test_array_round_trip_selections_region_write_and_append(
        self, store_url, store_opts, store_fs
    ):
        """Six shards of five chunks each (one shard per row of chunks): selections
        within and across shards, a region write through an ``r+`` handle, an append
        by ``to_arrayrecord(mode="a")``, and a dask reduction over all of it."""
        data = np.random.default_rng(0).standard_normal((60, 40)).astype("f4")
        x = da.from_array(data, chunks=(10, 8))
        opts = store_opts
        row = 5 * 10 * 8 * 4  # bytes in one row of chunks
        a = arrayds.to_arrayrecord(x, store_url, "grid/t", shard_size=row, storage_options=opts)
        assert a.shape == (60, 40) and a.chunks == x.chunks
        assert len(a.manifest.shards) == 6
        b = arrayds.open_array(store_url, "grid/t", storage_options=opts)
        np.testing.assert_array_equal(b[:], data)
        np.testing.assert_array_equal(b[5:33, 7:9], data[5:33, 7:9])
        np.testing.assert_array_equal(b.oindex[[0, 59, 31], :3], data[[0, 59, 31], :3])
        g = arrayds.open(store_url, storage_options=opts)
        assert list(g) == ["grid"] and "t (60, 40) float32" in str(g.tree())
        w = arrayds.open_array(store_url, "grid/t", mode="r+", storage_options=opts)
        w[1:3, 2:5] = -1
        data[1:3, 2:5] = -1
        arrayds.to_arrayrecord(x * 0 + 7, store_url, "grid/t", mode="a", storage_options=opts)
        c = arrayds.open_array(store_url, "grid/t", storage_options=opts)
        assert c.shape == (120, 40)
        np.testing.assert_array_equal(c[:60], data)
        np.testing.assert_array_equal(c[60:], 7)
        total = arrayds.from_arrayrecord(store_url, "grid/t", storage_options=opts).sum()
        np.testing.assert_allclose(total.compute(), data.sum() + 7 * 60 * 40, rtol=1e-4)
        g = arrayds.open(store_url, storage_options=opts)
        assert list(g) == ["grid"] and "t (120, 40) float32" in str(g.tree())
        # every object is a finished shard, a manifest or a kept version: no temporary
        # objects
        names = objects(store_fs, store_url)
        kept = [n for n in names if "/_arrayds/versions/" in n]
        assert kept and all(n.endswith(".json") for n in kept), names
        rest = [n for n in names if n not in kept]
        assert all(n.endswith((".array_record", "arrayds.json")) for n in rest), names

    def test_created_array_region_write_and_append(self, store_url, store_opts, store_fs):
        """An array created empty by ``open_array(mode="w")``, filled, overwritten in
        a region, then appended to."""
        a = arrayds.open_array(
            store_url,
            "x",
            mode="w",
            shape=(4, 6),
            dtype="i8",
            chunks=(2, 3),
            storage_options=store_opts,
        )
        a[:] = np.arange(24).reshape(4, 6)
        a[1:3, 2:5] = -1
        expect = np.arange(24).reshape(4, 6)
        expect[1:3, 2:5] = -1
        np.testing.assert_array_equal(
            arrayds.open_array(store_url, "x", storage_options=store_opts)[:], expect
        )
        arrayds.to_arrayrecord(
            da.full((4, 6), 7, chunks=(2, 3), dtype="i8"),
            store_url,
            "x",
            mode="a",
            storage_options=store_opts,
        )
        b = arrayds.open_array(store_url, "x", storage_options=store_opts)
        assert b.shape == (8, 6)
        np.testing.assert_array_equal(b[4:], 7)
        np.testing.assert_array_equal(b[:4], expect)
        # every object is a finished shard, a manifest or a kept version: no temporary
        # objects
        names = objects(store_fs, store_url)
        kept = [n for n in names if "/_arrayds/versions/" in n]
        assert kept and all(n.endswith(".json") for n in kept), names
        rest = [n for n in names if n not in kept]
        assert all(n.endswith((".array_record", "arrayds.json")) for n in rest), names

    # ------------------------------------------------ records, ragged, xarray

    def test_records_round_trip_append_and_data_source(self, store_url, store_opts):
        items = [{"id": i, "x": np.full(3, i, dtype="f4")} for i in range(50)]
        ds = records.write_records(
            items, store_url, "train", num_shards=3, storage_options=store_opts
        )
        assert ds.num_shards == 3 and len(ds) == 50
        more = [{"id": 50 + i, "x": np.zeros(3, "f4")} for i in range(10)]
        records.write_records(
            more, store_url, "train", mode="a", num_shards=1, storage_options=store_opts
        )
        bag = arrayds.from_arrayrecord(store_url, "train", storage_options=store_opts)
        assert [r["id"] for r in bag.compute(scheduler="threads")] == list(range(60))
        src = records.data_source(f"{store_url}/train", decode=True, storage_options=store_opts)
        assert len(src) == 60 and src[57]["id"] == 57
        np.testing.assert_array_equal(src[3]["x"], np.full(3, 3, "f4"))

    def test_ragged_and_xarray_round_trip(self, store_url, store_opts):
        import xarray as xr

        from arrayds.kinds.ragged.handle import open_ragged

        clips = [np.arange(2 * n, dtype="f4").reshape(2, n) for n in (5, 300, 17)]
        arrayds.to_arrayrecord(clips, store_url, "audio", storage_options=store_opts)
        ra = open_ragged(store_url, "audio", storage_options=store_opts)
        assert ra.shapes == [(2, 5), (2, 300), (2, 17)]
        np.testing.assert_array_equal(ra[1, 1, 250:260], clips[1][1, 250:260])

        xds = xr.Dataset(
            {"t2m": (("time", "x"), np.arange(12.0).reshape(4, 3))},
            coords={"time": np.arange(4), "x": [10, 20, 30]},
            attrs={"title": store_url.split("://", 1)[0]},
        )
        arrayds.to_arrayrecord(xds, store_url, "weather", storage_options=store_opts)
        back = xr.open_dataset(
            store_url, engine="arrayds", group="weather", storage_options=store_opts
        )
        xr.testing.assert_identical(back.load(), xds)

    # ---------------------------------------------------------------- commits

    @pytest.mark.parametrize("existing", [False, True], ids=["create", "replace"])
    def test_two_committers_that_read_the_same_manifest_exactly_one_wins(
        self, store_url, store_opts, monkeypatch, existing
    ):
        """Both committers read the node (no manifest, or generation 1) before either
        uploads; the server's precondition (S3: If-None-Match / If-Match; GCS:
        ``ifGenerationMatch=0`` / the generation read) lets exactly one through."""
        store = new_store(store_url, store_opts)  # a private store: its reads are patched
        if existing:
            commit.commit(store, "n", lambda base: group(1), write_id="first")
        both_read = threading.Barrier(2, timeout=20)
        self.after_version_read(monkeypatch, store, lambda fs, path: both_read.wait())
        outcome: dict[int, BaseException | None] = {}

        def write(who: int) -> None:
            try:
                commit.commit(
                    store, "n", lambda base: group(2, by=who), write_id=f"w{who}", parents=False
                )
                outcome[who] = None
            except BaseException as e:  # noqa: BLE001 - recorded and checked below
                outcome[who] = e

        threads = [threading.Thread(target=write, args=(i,)) for i in (1, 2)]
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
        assert f"{store_url}/n" in str(loser_error)
        monkeypatch.undo()
        assert commit.read(store, "n").raw["attrs"] == {"by": winners[0]}

    def test_a_committer_that_read_an_older_generation_is_refused(self, store_url, store_opts):
        """Two committers prepared the same next generation; the second to commit
        sees the first's generation and is refused before it uploads."""
        g = arrayds.open(store_url, mode="w", storage_options=store_opts)
        g.attrs["n"] = 0
        store = get_store(store_url, store_opts)
        m = dict(commit.read(store, "").raw)
        gen0 = m["generation"]
        commit.replace(store, "", dict(m, generation=gen0 + 1, attrs={"by": 1}))
        with pytest.raises(
            CommitConflictError, match=f"another writer committed generation {gen0 + 1}"
        ):
            commit.replace(store, "", dict(m, generation=gen0 + 1, attrs={"by": 2}))
        assert commit.read(store, "").raw["attrs"] == {"by": 1}

    def test_a_change_between_read_and_put_is_refused_by_the_server(
        self, store_url, store_opts, monkeypatch
    ):
        """Another writer replaces the manifest right after this committer read its
        version (with a generation number this committer's client-side check would
        accept): the conditional PUT must be refused by the server, not overwrite."""
        store = new_store(store_url, store_opts)
        commit.commit(store, "n", lambda base: group(1), write_id="first")
        raced: list[str] = []

        def race(fs: Any, path: str) -> None:
            if not raced and path.endswith("n/arrayds.json"):
                raced.append(path)
                fs.pipe_file(path, json.dumps(group(1, x=1)).encode())

        self.after_version_read(monkeypatch, store, race)
        with pytest.raises(CommitConflictError, match="conditional PUT refused"):
            commit.commit(store, "n", lambda base: group(2), write_id="second")
        assert len(raced) == 1
        monkeypatch.undo()
        assert commit.read(store, "n").raw["attrs"] == {"x": 1}

    def test_concurrent_appends_never_lose_a_commit(self, store_url, store_opts):
        """Eight threads append to one records dataset at once: a records append that
        loses the conditional commit re-reads the manifest and appends again, so every
        append commits and the final dataset holds all of them."""
        from concurrent.futures import ThreadPoolExecutor

        records.write_records([b"seed"], store_url, storage_options=store_opts)

        def append(i: int) -> bool:
            try:
                records.write_records(
                    [b"%d" % i], store_url, mode="a", num_shards=1, storage_options=store_opts
                )
                return True
            except CommitConflictError:
                return False

        with ThreadPoolExecutor(8) as pool, dask.config.set(scheduler="sync"):
            ok = list(pool.map(append, range(8)))
        assert all(ok), ok
        ds = records.open_records(store_url, storage_options=store_opts)
        got = records.read_records(store_url, storage_options=store_opts).compute(scheduler="sync")
        assert sorted(got) == sorted([b"seed"] + [b"%d" % i for i in range(8)])
        assert len(ds) == 1 + 8

    def test_conditional_commit_can_be_turned_off(self, store_url, store_opts, monkeypatch):
        """ARRAYDS_CONDITIONAL_COMMIT=0 (servers without preconditions on writes):
        one plain upload, no check, after a BlindCommitWarning."""
        store = new_store(store_url, store_opts)
        commit.replace(store, "", group(3))
        with pytest.raises(CommitConflictError, match="another writer committed generation 3"):
            commit.replace(store, "", group(2, checked=True))
        monkeypatch.setenv("ARRAYDS_CONDITIONAL_COMMIT", "0")
        monkeypatch.setattr(fsspec_store, "warned_blind", set())
        with pytest.warns(BlindCommitWarning, match="ARRAYDS_CONDITIONAL_COMMIT=0"):
            commit.commit(store, "", lambda base: group(2, plain=True), write_id="plain")
        assert commit.read(store, "").raw["attrs"] == {"plain": True}
        # no check: a put from a version that is not there lands all the same
        store.put_if_match(commit.manifest_key(""), json.dumps(group(7)).encode(), "stale")
        assert commit.read(store, "").generation == 7

    # -------------------------------------------------------------- bad input

    def test_missing_bucket_is_a_clear_error_and_writes_nothing(
        self, missing_bucket_url, store_opts, store_fs
    ):
        url = missing_bucket_url
        bucket = url.split("://", 1)[1].split("/", 1)[0]
        with pytest.raises(FileNotFoundError, match=re.escape(url)) as ei:
            arrayds.to_arrayrecord(da.ones((4, 4), chunks=2), url, storage_options=store_opts)
        assert f"bucket {bucket!r} does not exist" in str(ei.value)
        with pytest.raises(FileNotFoundError, match=re.escape(url)):
            arrayds.open(url, storage_options=store_opts)
        store_fs.invalidate_cache()
        assert not store_fs.exists(bucket)

    def test_a_killed_write_leaves_the_previous_state(
        self, store_url, store_opts, store_fs, tmp_path
    ):
        """A writer process is SIGKILLed after some of its shards were uploaded: the
        dataset still reads as before, and the orphans are what `gc` removes."""
        import signal
        import subprocess
        import sys
        import time

        from arrayds.verify import collect_garbage, verify

        base = np.arange(40, dtype="i4").reshape(20, 2)
        arrayds.to_arrayrecord(
            da.from_array(base, chunks=(2, 2)), store_url, storage_options=store_opts
        )
        before = set(objects(store_fs, store_url))
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
        # the child inherits the environment the store's conftest set (GCS: gcsfs's)
        proc = subprocess.Popen([sys.executable, str(script), store_url, json.dumps(store_opts)])
        try:
            deadline = time.time() + 60
            while time.time() < deadline:
                new = set(objects(store_fs, store_url)) - before
                if sum(o.endswith(".array_record") for o in new) >= 3 or proc.poll() is not None:
                    break
                time.sleep(0.1)
            assert proc.poll() is None, "the writer finished before it could be killed"
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(30)
        orphans = set(objects(store_fs, store_url)) - before
        # its shards, and the pending marker its commit never removed
        markers = {o for o in orphans if "/_arrayds/writes/" in o}
        shards = orphans - markers
        assert len(shards) >= 3 and all(o.endswith(".array_record") for o in shards)
        assert len(markers) == 1
        store_mod.clear_reader_cache()
        a = arrayds.open_array(store_url, storage_options=store_opts)
        assert a.shape == (20, 2)
        np.testing.assert_array_equal(a[:], base)
        # gc removes exactly the orphans; verify then finds nothing wrong
        scheme = store_url.split("://", 1)[0]
        # while its marker is younger than max_write_age, the write may be running
        kept = collect_garbage(store_url, storage_options=store_opts, min_age=0)
        assert kept.removed == [] and len(kept.under_way) == len(shards)
        report = collect_garbage(store_url, storage_options=store_opts, min_age=0, max_write_age=0)
        assert sorted(report.removed) == sorted(f"{scheme}://{o}" for o in shards)
        assert report.abandoned == [f"{scheme}://{o}" for o in markers]
        assert set(objects(store_fs, store_url)) == before
        assert verify(store_url, storage_options=store_opts).ok

    # ------------------------------------------------------- dask.distributed

    def test_distributed_workers_write_and_read_one_bucket(
        self, store_url, store_opts, distributed_cluster
    ):
        """Worker processes write shards into the bucket and commit; other tasks read
        them back (each worker opens a shard's footer once and caches the reader)."""
        import os

        import dask.bag as db
        from distributed import Client

        opts = store_opts
        data = np.random.default_rng(1).integers(0, 1000, size=(400, 30)).astype("i8")
        with Client(distributed_cluster) as client:
            x = da.from_array(data, chunks=(25, 30))
            arrayds.to_arrayrecord(x, store_url, "x", shard_size=1, storage_options=opts)
            arrayds.to_arrayrecord(x * 2, store_url, "x", mode="a", storage_options=opts)
            y = arrayds.from_arrayrecord(store_url, "x", storage_options=opts)
            assert y.shape == (800, 30)
            assert int(y.sum().compute()) == int(data.sum()) * 3
            # a region crossing the two writes' shards, computed on the workers
            region = y[390:410, 3:7]
            assert type(region).__name__ == "BoxReadArray"
            both = np.concatenate([data[390:], 2 * data[:10]])
            np.testing.assert_array_equal(region.compute(), both[:, 3:7])
            # the work ran in the two worker processes, not in the client
            pids = client.run(os.getpid)
            assert len(set(pids.values())) == 2
            assert os.getpid() not in pids.values()
            bag = db.from_sequence(range(1000), npartitions=4).map(lambda i: {"i": i, "sq": i * i})
            records.write_records(bag, store_url, "sq", storage_options=opts)
            back = arrayds.from_arrayrecord(store_url, "sq", storage_options=opts)
            assert back.npartitions == 4
            assert back.map(lambda r: r["sq"]).sum().compute() == sum(i * i for i in range(1000))
        a = arrayds.open_array(store_url, "x", storage_options=opts)
        assert len(a.manifest.shards) == 16 + 1
        np.testing.assert_array_equal(
            a[390:410, :3], np.concatenate([data[390:], 2 * data[:10]])[:, :3]
        )
