"""The store conformance suite (:class:`conformance.store.StoreTests`) on the local
file system (with ``flock`` and with the lock-file fallback), on ``memory://`` and
through the obstore backend on S3 (moto); S3 and GCS through fsspec run it in
tests/s3/test_s3_store.py and tests/gcs/test_gcs_store.py.
Below the suites: what only one of these stores does."""

from __future__ import annotations

import errno
import os
import uuid
import warnings

import pytest

from arrayds.abc.store import Keep
from arrayds.errors import BlindCommitWarning
from arrayds.storage import (
    FsspecStore,
    LocalStore,
    get_store,
    local,
    new_store,
    register_store,
    store_class,
)
from arrayds.storage import fsspec as fsspec_store
from conformance.servers import moto_bucket
from conformance.store import ProcessRaceTests, StoreTests


class TestLocalStore(StoreTests, ProcessRaceTests):
    @pytest.fixture
    def store(self, tmp_path):
        st = new_store(str(tmp_path / "root"))
        assert type(st) is LocalStore
        return st


class TestLocalStoreWithoutFlock(StoreTests):
    """A file system whose ``flock`` fails (some network and FUSE file systems): the
    compare-and-swap holds a lock file instead. No process race: the children would
    have flock, so they would not race on the lock file."""

    @pytest.fixture
    def store(self, tmp_path, monkeypatch):
        import fcntl

        def flock(fd, op):
            raise OSError(38, "Function not implemented")

        monkeypatch.setattr(fcntl, "flock", flock)
        return new_store(str(tmp_path / "root"))


class TestMemoryStore(StoreTests):
    @pytest.fixture
    def store(self):
        st = new_store(f"memory://store-tests-{uuid.uuid4().hex}")
        assert type(st) is FsspecStore
        yield st
        st.delete_prefix("")


@pytest.fixture(scope="module")
def obstore_s3():
    pytest.importorskip("obstore", reason="the obstore backend needs arrayds[obstore]")
    with moto_bucket("arrayds-obstore") as server:
        yield server


class TestObstoreS3Store(StoreTests, ProcessRaceTests):
    """The obstore backend on moto: versions are ETags, ``put_if_match`` a PUT with
    ``If-Match`` / ``If-None-Match``. The backend is chosen by the environment, so
    that stores re-opened from ``(url, storage_options)`` (the racing processes, the
    canonical URL) are obstore ones too."""

    @pytest.fixture
    def store(self, obstore_s3, monkeypatch):
        monkeypatch.setenv("ARRAYDS_STORAGE_BACKEND", "obstore")
        st = new_store(f"s3://arrayds-obstore/{uuid.uuid4().hex}", obstore_s3.storage_options())
        assert type(st).__name__ == "ObstoreStore"
        return st


# ------------------------------------------------------------- store-specific


def test_local_put_if_match_leaves_no_lock_or_temporary_file(tmp_path):
    st = new_store(str(tmp_path))
    st.put_if_match("n/k", b"1", None)
    st.put_if_match("n/k", b"2", st.get_versioned("n/k")[1])
    assert os.listdir(tmp_path / "n") == ["k"]


def test_local_keep_is_a_hard_link_of_the_replaced_file(tmp_path):
    st = new_store(str(tmp_path))
    st.put_if_match("n/k", b"gen 1", None)
    before = os.stat(tmp_path / "n" / "k")
    st.put_if_match("n/k", b"gen 2", st.get_versioned("n/k")[1], keep=Keep("n/h/1", b"gen 1"))
    kept = os.stat(tmp_path / "n" / "h" / "1")
    assert (kept.st_ino, kept.st_nlink) == (before.st_ino, 1)  # the old file, now only there
    assert (tmp_path / "n" / "h" / "1").read_bytes() == b"gen 1"
    assert sorted(os.listdir(tmp_path / "n")) == ["h", "k"]  # no lock or temporary file


@pytest.mark.parametrize(
    "code",
    [errno.EPERM, errno.EXDEV, errno.EOPNOTSUPP, errno.EIO],
    ids=["EPERM", "EXDEV", "EOPNOTSUPP", "EIO"],
)
def test_local_keep_copies_where_the_file_system_refuses_a_link(tmp_path, monkeypatch, code):
    """No hard links (EPERM, EXDEV, ENOTSUP: the store copies from then on) or a link
    that fails otherwise (copied this once): ``keep.data`` is written durably."""
    st = LocalStore(str(tmp_path))
    links = []

    def link(src, dst, **kw):
        links.append(dst)
        raise OSError(code, os.strerror(code), src, None, dst)

    monkeypatch.setattr(os, "link", link)
    for g in (1, 2, 3):
        data, v = st.get_versioned("n/k")
        st.put_if_match(
            "n/k", b"gen %d" % g, v, keep=None if data is None else Keep(f"h/{g - 1}", data)
        )
    assert [st.get(k) for k in ("h/1", "h/2", "n/k")] == [b"gen 1", b"gen 2", b"gen 3"]
    assert os.stat(tmp_path / "h" / "1").st_ino != os.stat(tmp_path / "n" / "k").st_ino
    assert len(links) == (1 if code != errno.EIO else 2)
    assert sorted(os.listdir(tmp_path / "h")) == ["1", "2"]  # no temporary file


def _write(st, key, data, **kw):
    with st.new_file(key, **kw) as tmp:
        with open(tmp, "wb") as f:
            f.write(data)


def test_local_deferred_file_is_linked_in_place_and_its_sync_awaited_by_the_commit(tmp_path):
    st = LocalStore(str(tmp_path))
    _write(st, "n/c/s", b"shard", defer_sync=True)
    assert os.listdir(tmp_path / "n" / "c") == ["s"]  # linked in place, temporary name gone
    assert os.stat(tmp_path / "n" / "c" / "s").st_nlink == 1
    st.put_if_match("n/m", b"names c/s", None, flush=["n/c/s"])
    assert local._syncs._pending == {}  # nothing left to wait for
    assert st.get("n/c/s") == b"shard"


def test_local_deferred_file_over_an_existing_name_is_synced_and_renamed(tmp_path):
    """A retried task writing a name its first attempt committed: a link cannot replace
    it, so the new bytes are synced before the rename (as without ``defer_sync``)."""
    st = LocalStore(str(tmp_path))
    _write(st, "n/c/s", b"first attempt")
    _write(st, "n/c/s", b"retried", defer_sync=True)
    assert st.get("n/c/s") == b"retried" and os.listdir(tmp_path / "n" / "c") == ["s"]
    assert "n/c/s" not in str(local._syncs._pending)


def test_local_deferred_file_where_links_are_refused_is_synced_and_renamed(tmp_path, monkeypatch):
    st = LocalStore(str(tmp_path))

    def link(src, dst, **kw):
        raise OSError(errno.EPERM, os.strerror(errno.EPERM), src, None, dst)

    monkeypatch.setattr(os, "link", link)
    _write(st, "n/c/s", b"bytes", defer_sync=True)
    assert st.get("n/c/s") == b"bytes" and os.listdir(tmp_path / "n" / "c") == ["s"]
    assert local._syncs._pending == {}


def test_local_failed_background_sync_fails_the_commit_that_would_name_the_file(tmp_path):
    """An fdatasync that fails (here: of a pipe, which cannot be synced) is raised by
    the wait of the commit, which then changes nothing."""
    st = LocalStore(str(tmp_path))
    path = str(tmp_path / "n" / "c" / "s")
    r, w = os.pipe()
    os.close(w)
    local._syncs.start(path, r)
    with pytest.raises(OSError) as e:
        st.put_if_match("n/m", b"names c/s", None, flush=["n/c/s"])
    assert e.value.errno == errno.EINVAL and st.get("n/m") is None
    st.flush(["n/c/s"])  # the failure was reported once


def test_local_deferred_files_are_dropped_when_deleted(tmp_path):
    st = LocalStore(str(tmp_path))
    path = str(tmp_path / "s")
    r, w = os.pipe()
    os.close(w)
    local._syncs.start(path, r)  # a sync that will fail
    st.delete(["s"])
    st.flush(["s"])  # nothing to wait for: the file is gone
    assert local._syncs._pending == {}


def test_local_deferred_sync_in_a_forked_child(tmp_path):
    """The background thread of the parent does not exist in a forked child (dask's
    process workers): the child starts its own."""
    st = LocalStore(str(tmp_path))
    _write(st, "before", b"parent", defer_sync=True)
    pid = os.fork()
    if pid == 0:  # the child: exit status 0 only if its deferred write commits
        code = 1
        try:
            _write(st, "n/c/s", b"child", defer_sync=True)
            st.put_if_match("n/m", b"x", None, flush=["n/c/s"])
            code = 0 if st.get("n/c/s") == b"child" else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    st.flush(["before"])


def test_a_local_store_of_a_file_url_is_local(tmp_path):
    st = new_store(f"file://{tmp_path}")
    assert type(st) is LocalStore and st.local and st.root == str(tmp_path)
    assert st.canonical_url == f"file://{tmp_path}" and st.url_of("a") == str(tmp_path / "a")


def test_plain_fsspec_file_systems_are_blind_with_a_warning(tmp_path, monkeypatch):
    """A file system without conditional writes (here fsspec's local one through
    FsspecStore) writes blindly, after one BlindCommitWarning."""
    monkeypatch.setattr(fsspec_store, "warned_blind", set())
    st = FsspecStore(f"file://{tmp_path}")
    st.put("k", b"1")
    _, stale = st.get_versioned("k")
    st.put("k", b"2")
    with pytest.warns(BlindCommitWarning, match="offers no conditional write"):
        st.put_if_match("k", b"3", stale)
    assert st.get("k") == b"3"
    with warnings.catch_warnings():
        warnings.simplefilter("error", BlindCommitWarning)
        st.put_if_match("k", b"4", stale)  # warned once per protocol
    assert st.get("k") == b"4"


def test_store_classes_are_picked_by_protocol(tmp_path):
    assert store_class(str(tmp_path)) is LocalStore
    assert store_class(f"file://{tmp_path}") is LocalStore
    assert store_class("memory://x") is FsspecStore
    assert store_class("s3://bucket/x") is FsspecStore
    assert store_class("simplecache::s3://bucket/x") is FsspecStore

    class Custom(FsspecStore):
        pass

    register_store("memory", Custom)
    try:
        assert type(new_store("memory://custom")) is Custom
    finally:
        register_store("memory", FsspecStore)
    with pytest.raises(TypeError, match="BaseStore subclass"):
        register_store("memory", dict)  # type: ignore[arg-type]


def test_get_store_caches_one_store_per_url_and_options(tmp_path, monkeypatch):
    st = get_store(str(tmp_path))
    assert get_store(str(tmp_path)) is st and get_store(str(tmp_path), {"x": 1}) is not st
    monkeypatch.chdir(tmp_path)
    assert get_store(".") is st


def test_bad_urls_are_errors():
    with pytest.raises(ValueError, match="url is empty"):
        new_store("")
    with pytest.raises(TypeError, match="must be a str or os.PathLike"):
        new_store(42)  # type: ignore[arg-type]
