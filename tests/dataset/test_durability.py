"""Durable local commits (docs/spec.md): before the rename that makes a manifest
visible, every shard it adds has had its bytes synced (before its own rename into
place, or, for a shard the committing process wrote with ``defer_sync``, linked into
place under a new name and synced in the background before the commit), its folder
synced (after that rename or link) and every folder the write created has had its
parent synced; after the manifest rename the node folder is synced.

The real os.fsync / os.fdatasync / os.replace / os.link run; a recorder wrapped around
them notes which path each one touched, in order (the path of a synced descriptor is
read from /proc/self/fd), for writes of every kind: numpy and dask arrays, records,
ragged arrays, an xarray dataset.
"""

from __future__ import annotations

import json
import os
import threading

import dask
import dask.array as da
import dask.bag as db
import numpy as np
import pytest

import arrayds
from arrayds.nodes.commit import referenced_files
from arrayds.storage import fsspec as fsspec_store

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


class Recorder:
    """Wraps os.fsync, os.fdatasync, os.replace and os.link; ``events`` is the ordered
    list of ("sync", path), ("replace", src, dst) and ("link", src, dst)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, ...]] = []
        self._lock = threading.Lock()
        for name in ("fsync", "fdatasync"):
            if hasattr(os, name):
                monkeypatch.setattr(os, name, self._wrap_sync(getattr(os, name)))
        real_replace = os.replace

        def replace(src, dst, *args, **kwargs):
            real_replace(src, dst, *args, **kwargs)
            self._add(("replace", os.fspath(src), os.fspath(dst)))

        monkeypatch.setattr(os, "replace", replace)
        real_link = os.link

        def link(src, dst, *args, **kwargs):
            real_link(src, dst, *args, **kwargs)
            self._add(("link", os.fspath(src), os.fspath(dst)))

        monkeypatch.setattr(os, "link", link)

    def _add(self, event: tuple[str, ...]) -> None:
        with self._lock:
            self.events.append(event)

    def _wrap_sync(self, real):
        def sync(fd):
            path = os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)")
            real(fd)
            self._add(("sync", path))

        return sync

    def index(self, pred, start: int = 0, stop: int | None = None) -> int:
        """First event index in [start, stop) matching ``pred``, or -1."""
        stop = len(self.events) if stop is None else stop
        for i in range(start, stop):
            if pred(self.events[i]):
                return i
        return -1

    def check_commit(self, root: str, node_folder: str) -> int:
        """Assert the last commit of ``node_folder`` was durable; returns how many
        shards it names."""
        manifest = os.path.join(node_folder, "arrayds.json")
        commits = [i for i, e in enumerate(self.events) if e[0] == "replace" and e[2] == manifest]
        assert commits, f"no manifest rename of {manifest}"
        c = commits[-1]
        tmp = self.events[c][1]
        assert self.index(lambda e: e == ("sync", tmp), 0, c) >= 0, "manifest tmp not synced"
        assert self.index(lambda e: e == ("sync", node_folder), c + 1) >= 0, (
            "the node folder is not synced after the manifest rename"
        )
        with open(manifest, "rb") as f:
            doc = json.loads(f.read())
        shards = sorted(referenced_files(doc))
        for rel in shards:
            final = os.path.join(node_folder, *rel.split("/"))
            r = self.index(
                lambda e, final=final: e[0] in ("replace", "link") and e[2] == final, 0, c
            )
            assert r >= 0, f"{rel}: not renamed or linked into place before the manifest"
            kind, src = self.events[r][:2]
            if kind == "replace":
                assert self.index(lambda e, src=src: e == ("sync", src), 0, r) >= 0, (
                    f"{rel}: its bytes were not synced before its rename"
                )
            else:  # a new name (a link never replaces): synced before the commit
                assert self.index(lambda e, src=src: e == ("sync", src), r + 1, c) >= 0, (
                    f"{rel}: its bytes were not synced before the manifest's rename"
                )
            folder = os.path.dirname(final)
            assert self.index(lambda e, folder=folder: e == ("sync", folder), r + 1, c) >= 0, (
                f"{rel}: its folder was not synced between its rename and the manifest's"
            )
            # every folder from the shard's up to the root was created by this test's
            # writes: each one's parent must be synced before the commit
            d = folder
            while len(d) > len(os.path.dirname(root)):
                parent = os.path.dirname(d)
                assert self.index(lambda e, parent=parent: e == ("sync", parent), 0, c) >= 0, (
                    f"{d}: created, but its parent {parent} was not synced before the commit"
                )
                d = parent
        return len(shards)


@pytest.fixture
def rec(monkeypatch):
    return Recorder(monkeypatch)


def test_numpy_array_write_is_durable(rec, tmp_path):
    root = str(tmp_path / "ds")
    arrayds.to_arrayrecord(np.arange(4000.0).reshape(40, 100), root, "g/x", chunks=(10, 100))
    assert rec.check_commit(root, os.path.join(root, "g", "x")) >= 1
    a = arrayds.open_array(root, "g/x", mode="r+")
    a[3:5] = -1.0  # a selection write: one more shard, one more commit
    assert rec.check_commit(root, os.path.join(root, "g", "x")) >= 2


def test_appends_sync_their_shards_in_the_background_before_the_commit(rec, tmp_path):
    """Appends and single-shard records writes commit in the writing process: their
    shards are linked into place and synced while the commit is prepared; the
    commit's rename still follows the sync (check_commit), and so does a tiered merge."""
    root = str(tmp_path / "a")
    a = arrayds.open_array(root, mode="w", shape=(0, 4), dtype="f8", chunks=(1, 4))
    for i in range(9):  # the eighth append fills a tier: a merge commit follows
        a.append(np.full((1, 4), i, "f8"))
        assert rec.check_commit(root, root) >= 1
    linked = [e for e in rec.events if e[0] == "link" and e[2].endswith(".array_record")]
    assert len(linked) == 10  # nine appends and one merged shard
    assert arrayds.open_array(root).nshards == 2  # the merged eight and the ninth
    recs = str(tmp_path / "r")
    for i in range(3):
        arrayds.to_arrayrecord([b"x%d" % i], recs, mode="a" if i else "w")
        assert rec.check_commit(recs, recs) == i + 1
    assert sum(e[0] == "link" and e[2].startswith(recs) for e in rec.events) >= 3


def test_dask_array_write_is_durable(rec, tmp_path):
    root = str(tmp_path / "ds")
    x = da.arange(64 * 64, chunks=512).reshape(64, 64).rechunk((8, 64))
    with dask.config.set(scheduler="threads"):
        arrayds.to_arrayrecord(x, root, shard_size="16KiB")
    assert rec.check_commit(root, root) >= 2


def test_records_write_is_durable(rec, tmp_path):
    root = str(tmp_path / "recs")
    items = [{"i": i, "v": np.full(20, i)} for i in range(300)]
    with dask.config.set(scheduler="threads"):
        arrayds.to_arrayrecord(db.from_sequence(items, npartitions=4), root)
    assert rec.check_commit(root, root) == 4
    arrayds.records.write_records(items[:10], root, mode="a", num_shards=2)
    assert rec.check_commit(root, root) == 6


def test_ragged_write_is_durable(rec, tmp_path):
    root = str(tmp_path / "clips")
    clips = [np.ones((2, 10 + 7 * i), np.float32) for i in range(12)]
    arrayds.to_arrayrecord(clips, root, piece_len=16)
    assert rec.check_commit(root, root) >= 1


def test_xarray_write_is_durable(rec, tmp_path):
    xr = pytest.importorskip("xarray")
    root = str(tmp_path / "era")
    ds = xr.Dataset(
        {"t": (("time", "x"), np.arange(60.0).reshape(6, 10)), "p": ("time", np.arange(6.0))},
        coords={"time": np.arange(6)},
    )
    arrayds.to_arrayrecord(ds, root)
    # the group snapshot names the members' shards (in <member>/c/): all synced
    assert rec.check_commit(root, root) >= 3
    # a small in-memory step is written and committed here: its shards are linked
    # into place and synced in the background, before the commit
    step = ds.isel(time=[0]).assign_coords(time=[6])
    step.arrayds.to_arrayrecord(root, append_dim="time")
    assert rec.check_commit(root, root) >= 3
    assert any(e[0] == "link" and "/t/c/" in e[2] for e in rec.events)
    assert xr.open_dataset(root, engine="arrayds")["t"].shape == (7, 10)


# ------------------------------------------------- locks and compare-and-swap (item 7)

from arrayds.errors import BlindCommitWarning, CommitConflictError, CommitLockError  # noqa: E402
from arrayds.nodes import commit  # noqa: E402
from arrayds.nodes.names import new_write_id  # noqa: E402
from arrayds.storage import new_store  # noqa: E402
from arrayds.storage.base import BaseStore as Store  # noqa: E402


def _commit(store: Store, node: str, doc: dict) -> None:
    """Commit ``doc`` (its generation) at ``node`` through the one commit path: a
    generation that is there already is a conflict, as for a stale writer."""

    def check(base: commit.NodeVersion) -> None:
        if base.generation >= doc["generation"]:
            raise CommitConflictError(f"{node}: generation {base.generation} is there")

    commit.commit(
        store, node, lambda base: doc, write_id=new_write_id(), check=check, parents=False
    )


def _manifest(store: Store, node: str) -> dict:
    return commit.read(store, node).raw


def _group(gen: int, tag: str = "") -> dict:
    return {
        "format": "arrayds",
        "format_version": 1,
        "kind": "group",
        "generation": gen,
        "commit": tag,
        "attrs": {"by": tag},
    }


@pytest.fixture
def no_flock(monkeypatch):
    """flock fails as on a file system without it (ENOLCK, as NFS without lockd)."""
    import errno
    import fcntl

    def flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", flock)


def _race(store: Store, node: str, n: int) -> tuple[list[str], list[BaseException]]:
    """n threads commit generation 2 of ``node`` at the same moment."""
    barrier = threading.Barrier(n)
    won: list[str] = []
    lost: list[BaseException] = []

    def commit(k: int) -> None:
        barrier.wait()
        try:
            _commit(store, node, _group(2, f"w{k}"))
            won.append(f"w{k}")
        except BaseException as e:  # noqa: BLE001
            lost.append(e)

    threads = [threading.Thread(target=commit, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won, lost


@pytest.mark.parametrize("flock", ["works", "fails"])
def test_local_commits_stay_compare_and_swap(request, tmp_path, flock):
    if flock == "fails":
        request.getfixturevalue("no_flock")
    store = new_store(str(tmp_path / "ds"))
    for attempt in range(5):
        node = f"n{attempt}"
        _commit(store, node, _group(1))
        won, lost = _race(store, node, 8)
        assert len(won) == 1 and len(lost) == 7, (won, lost)
        assert all(isinstance(e, CommitConflictError) for e in lost)
        assert _manifest(store, node)["attrs"] == {"by": won[0]}
        # no lock file left (_arrayds holds the node's history)
        assert sorted(os.listdir(tmp_path / "ds" / node)) == ["_arrayds", "arrayds.json"]


def test_lock_file_held_by_a_live_commit_is_waited_for(no_flock, tmp_path, monkeypatch):
    import socket

    monkeypatch.setenv("ARRAYDS_LOCK_TIMEOUT", "0.3")
    store = new_store(str(tmp_path / "ds"))
    _commit(store, "a", _group(1))
    lock = tmp_path / "ds" / "a" / ".arrayds.json.lock"
    lock.write_text(f"{os.getpid()} {socket.gethostname()} 0123456789abcdef")  # alive
    with pytest.raises(CommitLockError, match=f"held by process {os.getpid()} on host"):
        _commit(store, "a", _group(2))
    assert _manifest(store, "a")["generation"] == 1
    # released while the commit waits: the commit goes ahead
    monkeypatch.setenv("ARRAYDS_LOCK_TIMEOUT", "10")
    threading.Timer(0.3, lock.unlink).start()
    _commit(store, "a", _group(2))
    assert _manifest(store, "a")["generation"] == 2 and not lock.exists()
    # another host's lock cannot be judged: waited for, then the error names it
    monkeypatch.setenv("ARRAYDS_LOCK_TIMEOUT", "0.2")
    lock.write_text("4242 some-other-host 0123456789abcdef")
    with pytest.raises(CommitLockError, match="process 4242 on host some-other-host"):
        _commit(store, "a", _group(3))


def test_stale_lock_file_of_a_dead_process_is_broken(no_flock, tmp_path, monkeypatch):
    import socket
    import subprocess
    import sys

    monkeypatch.setenv("ARRAYDS_LOCK_TIMEOUT", "5")
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    store = new_store(str(tmp_path / "ds"))
    _commit(store, "a", _group(1))
    lock = tmp_path / "ds" / "a" / ".arrayds.json.lock"
    lock.write_text(f"{dead.stdout.strip()} {socket.gethostname()} 0123456789abcdef")
    _commit(store, "a", _group(2))
    assert _manifest(store, "a")["generation"] == 2
    assert sorted(os.listdir(tmp_path / "ds" / "a")) == ["_arrayds", "arrayds.json"]


def test_flock_failure_uses_the_lock_file(no_flock, tmp_path, monkeypatch):
    """The lock file exists exactly while the commit reads and renames."""
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        if os.path.basename(dst) == "arrayds.json":
            seen.append(os.path.exists(os.path.join(os.path.dirname(dst), ".arrayds.json.lock")))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    arrayds.to_arrayrecord(np.arange(10), str(tmp_path / "ds"), chunks=5)
    assert seen and all(seen)
    assert not (tmp_path / "ds" / ".arrayds.json.lock").exists()


@pytest.fixture
def fresh_warnings(monkeypatch):
    monkeypatch.setattr(fsspec_store, "warned_blind", set())


def test_memory_commits_are_compare_and_swap(fresh_warnings):
    import uuid
    import warnings

    store = new_store(f"memory://cas-{uuid.uuid4().hex}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", BlindCommitWarning)
        _commit(store, "a", _group(1))
        won, lost = _race(store, "a", 8)
    assert len(won) == 1 and all(isinstance(e, CommitConflictError) for e in lost)
    assert len(lost) == 7


def test_blind_commits_warn_once(fresh_warnings, tmp_path):
    from fsspec.implementations.dirfs import DirFileSystem

    if "pipe_file" not in DirFileSystem.__dict__:  # the dependency floor (fsspec 2023.6)
        pytest.skip("this fsspec's dir:// cannot write a file (DirFileSystem has no pipe_file)")
    so = {"path": str(tmp_path), "target_protocol": "file", "target_options": {"auto_mkdir": True}}
    with pytest.warns(BlindCommitWarning, match="commits to dir:// are not compare-and-swap"):
        arrayds.to_arrayrecord(np.arange(10), "dir://ds", "a", storage_options=so, chunks=5)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", BlindCommitWarning)  # once per process and reason
        arrayds.to_arrayrecord(np.arange(10), "dir://ds", "b", storage_options=so, chunks=5)
    np.testing.assert_array_equal(
        arrayds.open_array("dir://ds", "b", storage_options=so)[:], np.arange(10)
    )
