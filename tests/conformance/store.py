"""The behaviour every storage implementation (:class:`arrayds.abc.store.Store`) must
show, as one test base class, in the manner of ``zarr.testing.store.StoreTests``.

A store gets the whole suite with a subclass named ``Test...`` that provides the
``store`` fixture (a fresh, empty root per test)::

    class TestMyStore(StoreTests):
        @pytest.fixture
        def store(self, tmp_path):
            return MyStore(str(tmp_path / "root"))

A store whose objects other processes see (not ``memory://``) also takes
:class:`ProcessRaceTests` (``class TestMyStore(StoreTests, ProcessRaceTests)``), which
races writer processes on the compare-and-swap, each opening the store from its
``(url, storage_options)`` with ``arrayds.storage.base.BaseStore``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import fsspec
import pytest

from arrayds.abc.store import ABSENT, Keep
from arrayds.abc.store import Store as StoreProtocol
from arrayds.errors import PreconditionFailedError
from arrayds.files.reader import ArrayRecordReader
from arrayds.files.writer import ArrayRecordWriter
from arrayds.storage import new_store
from arrayds.storage.base import BaseStore as Store

_RACER = """
import json, os, sys, time
from arrayds.errors import PreconditionFailedError
from arrayds.storage import new_store
url, opts, key, version, me, go = sys.argv[1:]
st = new_store(url, json.loads(opts))
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
try:
    st.put_if_match(key, me.encode(), version)
    print("won")
except PreconditionFailedError:
    print("lost")
"""


def _race_threads(store: Store, key: str, version: object) -> dict[int, BaseException | None]:
    """Two threads ``put_if_match(key, ..., version)`` at the same moment; what each
    got (``None``: it won)."""
    barrier = threading.Barrier(2, timeout=30)
    outcome: dict[int, BaseException | None] = {}

    def put(me: int) -> None:
        barrier.wait()
        try:
            store.put_if_match(key, b"by %d" % me, version)
            outcome[me] = None
        except BaseException as e:  # noqa: BLE001 - checked by the caller
            outcome[me] = e

    threads = [threading.Thread(target=put, args=(i,)) for i in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return outcome


class StoreTests:
    """Tests every store inherits (see the module docstring)."""

    @pytest.fixture
    def store(self) -> Store:
        """A store on a fresh, empty root."""
        pytest.fail(f"{type(self).__name__} must provide the store fixture")

    # ---------------------------------------------------------------- contract

    def test_implements_the_protocol(self, store):
        assert isinstance(store, StoreProtocol)
        assert isinstance(store, Store)
        assert store.token == (store.protocol, store.token[1])

    # ------------------------------------------------------------------ reads

    def test_get_put_round_trip(self, store):
        store.put("a/b/k", b"one")
        assert store.get("a/b/k") == b"one"
        store.put("a/b/k", b"two")
        assert store.get("a/b/k") == b"two"
        assert store.get_versioned("a/b/k")[0] == b"two"
        assert store.exists("a/b/k") and store.exists("a/b", "k")
        assert store.size("a/b/k") == 3
        store.put("top", b"")
        assert store.get("top") == b""

    def test_missing_keys(self, store):
        assert store.get("nope") is None
        assert store.get("no/such/key") is None
        assert store.get_versioned("no/such/key") == (None, ABSENT)
        assert not store.exists("nope") and not store.exists("no", "such")
        with pytest.raises(FileNotFoundError):
            store.size("nope")
        with pytest.raises(FileNotFoundError):
            store.get_range("nope", 0, 1)

    def test_get_range(self, store):
        data = bytes(range(200))
        store.put("r", data)
        assert store.get_range("r", 0, 5) == data[:5]
        assert store.get_range("r", 17, 40) == data[17:57]
        assert store.get_range("r", 190, 50) == data[190:]  # fewer at the end
        assert store.get_range("r", 200, 10) == b""

    def test_get_ranges(self, store):
        """The batched range read of coalesced reads (arrayds/storage/coalesce.py)."""
        data = bytes(range(200))
        store.put("r", data)
        ranges = [(0, 5), (17, 57), (100, 100), (190, 240)]
        got = store.get_ranges("r", ranges)
        assert [bytes(g) for g in got] == [data[0:5], data[17:57], b"", data[190:]]
        assert store.get_ranges("r", []) == []
        with pytest.raises(FileNotFoundError):
            store.get_ranges("nope", [(0, 1)])

    def test_list_and_list_dir(self, store):
        for k, n in [("d/a", 1), ("d/e/b", 2), ("d/e/f/c", 3), ("x", 4)]:
            store.put(k, b"z" * n)
        listed = store.list("d")
        assert [(k, size) for k, size, _ in listed] == [("d/a", 1), ("d/e/b", 2), ("d/e/f/c", 3)]
        assert all(t is None or t > 0 for _, _, t in listed)
        assert [k for k, _, _ in store.list("")] == ["d/a", "d/e/b", "d/e/f/c", "x"]
        assert store.list_dir("d") == ["e"]
        assert store.list_dir("") == ["d"]
        assert store.list_dir("d/e") == ["f"]
        assert store.list("missing") == [] and store.list_dir("missing") == []

    # ---------------------------------------------------------------- versions

    def test_versions_change_when_the_bytes_do(self, store):
        store.put("v", b"1")
        _, v1 = store.get_versioned("v")
        assert v1 is not ABSENT
        assert store.get_versioned("v")[1] == v1  # stable while nothing changes
        store.put("v", b"2")
        data, v2 = store.get_versioned("v")
        assert data == b"2" and v2 != v1

    def test_put_if_match_the_current_version_replaces(self, store):
        store.put_if_match("n/k", b"1", ABSENT)  # create-only: there is none
        data, v = store.get_versioned("n/k")
        assert data == b"1"
        store.put_if_match("n/k", b"2", v)
        assert store.get("n/k") == b"2"

    def test_put_if_match_a_stale_version_is_refused_and_changes_nothing(self, store):
        store.put("k", b"1")
        _, v1 = store.get_versioned("k")
        store.put("k", b"2")
        with pytest.raises(PreconditionFailedError):
            store.put_if_match("k", b"3", v1)
        assert store.get("k") == b"2"
        assert [k for k, _, _ in store.list("")] == ["k"]  # no temporary left

    def test_put_if_match_absent_only_creates(self, store):
        store.put("k", b"there")
        with pytest.raises(PreconditionFailedError):
            store.put_if_match("k", b"mine", ABSENT)
        assert store.get("k") == b"there"

    def test_two_racing_put_if_match_from_one_version_exactly_one_wins(self, store):
        for rnd in range(3):
            key = f"race{rnd}/k"
            store.put(key, b"base")
            _, v = store.get_versioned(key)
            outcome = _race_threads(store, key, v)
            winners = [me for me, e in outcome.items() if e is None]
            assert len(outcome) == 2 and len(winners) == 1, outcome
            (err,) = (e for e in outcome.values() if e is not None)
            assert isinstance(err, PreconditionFailedError), repr(err)
            assert store.get(key) == b"by %d" % winners[0]

    # ------------------------------------------------- keep= and flush= of a put

    def test_put_if_match_keeps_the_replaced_object(self, store):
        store.put("n/k", b"gen 1")
        _, v = store.get_versioned("n/k")
        store.put_if_match("n/k", b"gen 2", v, keep=Keep("n/h/1", b"gen 1"))
        assert store.get("n/k") == b"gen 2" and store.get("n/h/1") == b"gen 1"
        _, v = store.get_versioned("n/k")
        store.put_if_match("n/k", b"gen 3", v, keep=Keep("n/h/2", b"gen 2"))
        assert [store.get(k) for k in ("n/k", "n/h/1", "n/h/2")] == [b"gen 3", b"gen 1", b"gen 2"]
        store.put("n/k", b"other")  # the kept objects are independent of the key
        assert store.get("n/h/2") == b"gen 2"

    def test_put_if_match_keeps_nothing_when_creating(self, store):
        store.put_if_match("n/k", b"new", ABSENT, keep=Keep("n/h/0", b"none"))
        assert store.get("n/k") == b"new" and store.get("n/h/0") is None

    def test_a_refused_put_if_match_replaces_nothing_and_keeps_at_most_the_bytes(self, store):
        store.put("k", b"1")
        _, v1 = store.get_versioned("k")
        store.put("k", b"2")
        with pytest.raises(PreconditionFailedError):
            store.put_if_match("k", b"3", v1, keep=Keep("h/1", b"1"))
        assert store.get("k") == b"2"
        # object stores keep before their conditional PUT: the bytes that were there
        assert store.get("h/1") in (None, b"1")

    def test_an_object_kept_already_stays(self, store):
        """A racing writer (or a crash after the keep) kept the same key first."""
        store.put("k", b"1")
        store.put("h/1", b"1")
        _, v = store.get_versioned("k")
        store.put_if_match("k", b"2", v, keep=Keep("h/1", b"1"))
        assert store.get("k") == b"2" and store.get("h/1") == b"1"

    def test_put_if_match_flushes_written_and_missing_keys(self, store):
        with store.new_file("n/c/s.array_record") as target:
            opts = None if store.local else store.storage_options
            with ArrayRecordWriter(target, "", storage_options=opts) as w:
                w.write_many([b"r0"])
        store.put_if_match(
            "n/m", b"names s", ABSENT, flush=["n/c/s.array_record", "n/c/missing", "no/x"]
        )
        assert store.get("n/m") == b"names s" and store.size("n/c/s.array_record") > 0

    # ---------------------------------------------------------------- removal

    def test_delete_and_delete_prefix(self, store):
        for k in ("d/a", "d/e/b", "d/e/f/c", "keep"):
            store.put(k, b"x")
        store.delete(["d/a", "missing", "no/such/key"])
        assert not store.exists("d/a") and store.exists("d/e/b")
        store.delete([])
        store.delete_prefix("d/e")
        assert store.list("d") == []
        store.delete_prefix("missing")
        assert [k for k, _, _ in store.list("")] == ["keep"]

    def test_node_addressed_removal(self, store):
        for k in ("n/c/s0", "n/c/s1", "n/m", "n/sub/m"):
            store.put(k, b"x")
        store.remove_files("n", ["c/s0", "c/missing"])
        assert not store.exists("n", "c/s0") and store.exists("n", "c/s1")
        store.remove("n", "sub")
        store.remove("n", "m")
        store.remove("n", "missing")
        assert [k for k, _, _ in store.list("n")] == ["n/c/s1"]

    # ---------------------------------------------------------------- new_file

    def test_new_file_is_complete_on_success(self, store):
        with store.new_file("n/c/shard.array_record") as target:
            opts = None if store.local else store.storage_options
            with ArrayRecordWriter(target, "", storage_options=opts) as w:
                w.write_many([b"r0", b"r1", b"r2"])
        assert [k for k, _, _ in store.list("")] == ["n/c/shard.array_record"]
        url = store.url_of("n/c/shard.array_record")
        r = ArrayRecordReader(url, storage_options=None if store.local else store.storage_options)
        assert r.read([0, 2]) == [b"r0", b"r2"]
        assert store.size("n/c/shard.array_record") == len(store.get("n/c/shard.array_record"))
        store.flush(["n/c/shard.array_record"])

    def test_new_file_leaves_nothing_on_an_exception(self, store):
        with pytest.raises(RuntimeError, match="task failed"):
            with store.new_file("n/c/broken.array_record") as target:
                opts = None if store.local else store.storage_options
                with ArrayRecordWriter(target, "", storage_options=opts) as w:
                    w.write_many([b"r0"])
                    raise RuntimeError("task failed")
        assert not store.exists("n/c/broken.array_record")
        assert [k for k, _, _ in store.list("")] == []

    def test_new_file_with_deferred_sync_is_complete_and_committed_by_a_flush(self, store):
        """``defer_sync``: the object is in place when the block ends; the commit that
        names it (its ``flush``) returns once it is durable."""
        with store.new_file("n/c/later.array_record", defer_sync=True) as target:
            opts = None if store.local else store.storage_options
            with ArrayRecordWriter(target, "", storage_options=opts) as w:
                w.write_many([b"r0", b"r1"])
        assert [k for k, _, _ in store.list("")] == ["n/c/later.array_record"]
        store.put_if_match("n/m", b"names it", ABSENT, flush=["n/c/later.array_record"])
        url = store.url_of("n/c/later.array_record")
        r = ArrayRecordReader(url, storage_options=None if store.local else store.storage_options)
        assert r.read_all() == [b"r0", b"r1"]
        store.flush(["n/c/later.array_record"])  # waited for already: returns at once

    def test_new_file_with_deferred_sync_leaves_nothing_on_an_exception(self, store):
        with pytest.raises(RuntimeError, match="task failed"):
            with store.new_file("n/c/broken.array_record", defer_sync=True) as target:
                opts = None if store.local else store.storage_options
                with ArrayRecordWriter(target, "", storage_options=opts) as w:
                    w.write_many([b"r0"])
                    raise RuntimeError("task failed")
        assert [k for k, _, _ in store.list("")] == []

    def test_flush_accepts_written_and_missing_keys(self, store):
        store.put("f/a", b"1")
        store.flush(["f/a", "f/missing", "no/folder/x"])
        store.flush([])
        assert store.get("f/a") == b"1"

    # ---------------------------------------------------------------- naming

    def test_display_url_of_and_canonical_url(self, store):
        assert store.display("") == store.url
        assert store.display("a/b") == store.url.rstrip("/") + "/a/b"
        assert store.display("a", "b") == store.display("a/b")
        assert store.path("a", "b") == store.path("a/b")
        store.put("a/b", b"named")
        url = store.url_of("a/b")
        fs_opts = {k: v for k, v in store.storage_options.items() if k != "backend"}
        with fsspec.open(url, "rb", **fs_opts) as f:
            assert f.read() == b"named"
        again = new_store(store.canonical_url, store.storage_options)
        assert type(again) is type(store) and again.get("a/b") == b"named"
        assert again.canonical_url == store.canonical_url
        if store.local:
            assert os.path.isfile(store.path("a/b"))

    def test_pickles_for_dask_workers(self, store):
        import pickle

        store.put("p", b"pickled")
        back = pickle.loads(pickle.dumps(store))
        assert type(back) is type(store) and back.url == store.url
        assert back.token == store.token and back.get("p") == b"pickled"


class ProcessRaceTests:
    """For stores whose objects other processes see (see the module docstring); the
    class that takes it provides the ``store`` fixture, as for :class:`StoreTests`."""

    def test_racing_processes_exactly_one_wins(self, store, tmp_path):
        store.put("p/k", b"base")
        _, v = store.get_versioned("p/k")
        go = tmp_path / "go"
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    _RACER,
                    store.url,
                    json.dumps(store.storage_options),
                    "p/k",
                    str(v),
                    f"proc{i}",
                    str(go),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(4)
        ]
        for p in procs:  # each has imported what it needs
            assert p.stdout.readline() == "ready\n", p.communicate()[1]
        go.touch()
        said = []
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
            said.append(out.strip())
        assert sorted(said) == ["lost", "lost", "lost", "won"], said
        assert store.get("p/k") == f"proc{said.index('won')}".encode()
