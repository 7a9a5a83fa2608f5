"""The local file system store: durable writes and a locked compare-and-swap.

:class:`LocalStore` keeps each key as a file below its root folder. A write is
durable when it returns (it survives a power loss, as in SQLite and LMDB):

* :meth:`LocalStore.put` writes a temporary file in the target's folder, fsyncs it,
  ``os.replace`` s it over the target and syncs the folder;
* :meth:`LocalStore.put_if_match`, the compare-and-swap of every commit, writes a
  temporary file in the target's folder, then under an exclusive lock of the folder
  (:func:`folder_lock`: a ``flock``, or a lock file where the file system has none)
  reads and compares the current bytes, so of two writers that read the same version
  exactly one replaces it; still under the lock it keeps the file being replaced
  (``keep``: a hard link at the kept key, or a durable copy where the file system has
  no hard links), fsyncs the temporary file, syncs the folders of the kept file and
  of the files the new bytes name (``flush``) and renames; it syncs the target's
  folder once the lock is released, before it returns. So everything the new file
  names or keeps is on the disk before it is visible, and it is on the disk when the
  call returns. The metadata changes (the link, the names to flush) all precede the
  first sync, so a journaling file system commits them in one transaction and the
  folder syncs that follow cost only a cache flush;
* :meth:`LocalStore.new_file` (:func:`local_file`) gives the engine a temporary name to
  write an immutable file to, whose data is synced (``fdatasync``) and which is then
  renamed into place when it is complete (synced first, so that a rename over a
  committed file, by a retried task writing the same name, never leaves a name whose
  data is not on the disk); the names of such files become durable when their folders
  are synced (:meth:`LocalStore.flush`, or the ``flush`` of the commit's
  :meth:`LocalStore.put_if_match`), before a commit names them. With ``defer_sync``
  (a file that this process commits: an append) the file is linked into place at once,
  under a name nothing held (``os.link`` never replaces), and its data is synced by a
  background thread (:data:`_syncs`) while the caller prepares its commit; the
  ``flush`` of that commit waits for the sync before anything names the file;
* every folder a write creates has its parent synced by its creator
  (:func:`make_folders`).

>>> import tempfile
>>> st = LocalStore(tempfile.mkdtemp())
>>> st.put_if_match("a/k", b"1", None)
>>> st.get_versioned("a/k")[0], st.list_dir("")
(b'1', ['a'])
>>> st.put_if_match("a/k", b"2", digest(b"1"), keep=Keep("a/old/k", b"1"))
>>> st.get("a/k"), st.get("a/old/k")
(b'2', b'1')
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import queue
import secrets
import shutil
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from concurrent.futures import Future
from itertools import repeat
from typing import Any

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from ..abc.store import Keep
from ..errors import CommitLockError, PreconditionFailedError
from .base import BaseStore

__all__ = [
    "LOCK_TIMEOUT",
    "LocalStore",
    "digest",
    "folder_lock",
    "local_file",
    "make_folders",
    "sync_file",
    "sync_folder",
    "wait_synced",
]


# ------------------------------------------------------------------ durability


def sync_file(path: str) -> None:
    """Flush a file's data (and the size that is needed to read it) to the disk."""
    fd = os.open(path, os.O_RDWR if os.name == "nt" else os.O_RDONLY)  # Windows: writable
    try:
        _datasync(fd)
    finally:
        os.close(fd)


def _datasync(fd: int) -> None:
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # macOS, Windows
        os.fsync(fd)


def sync_folder(path: str) -> None:
    """Flush a folder's entries (created, renamed and removed names) to the disk.

    No-op on Windows (folders cannot be opened; NTFS journals its metadata) and on
    file systems that cannot sync a folder (``EINVAL``)."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def make_folders(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)``, durably: the parent of each folder that
    was missing is synced after the folder is made (by whoever made it first)."""
    missing: list[str] = []
    p = path
    while not os.path.isdir(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    for d in reversed(missing):
        try:
            os.mkdir(d)
        except FileExistsError:
            pass  # made by a concurrent write (not a folder: the next open says so)
        sync_folder(os.path.dirname(d))


def _create(path: str, data: bytes) -> int:
    """Create the file ``path`` (it must not exist) holding ``data``; returns its
    descriptor, open for writing (the caller syncs and closes it)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_FLAGS, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        raise
    return fd


_O_FLAGS = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)

_NO_LINKS = frozenset(
    getattr(errno, n)
    for n in ("EPERM", "EXDEV", "EMLINK", "ENOSYS", "EOPNOTSUPP", "ENOTSUP")
    if hasattr(errno, n)
)
"""The errors of ``os.link`` that say the file system makes no hard links."""


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


@contextlib.contextmanager
def local_file(final: str, *, defer_sync: bool = False) -> Iterator[str]:
    """Write an immutable local file durably: yields a temporary path next to
    ``final`` (its folder made with :func:`make_folders`); when the block ends
    normally the file is synced and renamed to ``final``, else removed.

    ``defer_sync``: when the block ends the file is hard-linked to ``final`` at once
    (a link never replaces a file: where ``final`` exists, or the file system has no
    hard links, the file is synced and renamed as without it) and its data is synced
    in the background (:class:`_DataSyncs`); :func:`wait_synced` of ``final`` waits
    for it (and raises its error). For a file the calling process commits: its
    commit's ``flush`` waits, so its sync overlaps the work of preparing the commit.

    >>> import os, tempfile
    >>> final = os.path.join(tempfile.mkdtemp(), "c", "x.array_record")
    >>> with local_file(final) as tmp:
    ...     _ = open(tmp, "wb").write(b"bytes")
    >>> open(final, "rb").read()
    b'bytes'
    >>> later = final + ".2"
    >>> with local_file(later, defer_sync=True) as tmp:
    ...     _ = open(tmp, "wb").write(b"more")
    >>> wait_synced([later]); open(later, "rb").read()
    b'more'
    """
    make_folders(os.path.dirname(final))
    tmp = f"{final}.{secrets.token_hex(6)}.tmp"
    try:
        yield tmp
        if not (defer_sync and _link_in_background(tmp, final)):
            sync_file(tmp)
            os.replace(tmp, final)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def _link_in_background(tmp: str, final: str) -> bool:
    """Link the complete file ``tmp`` at ``final`` and start the sync of its data
    (:data:`_syncs`); ``False`` if ``final`` exists or the file system makes no hard
    links (the caller then syncs and renames)."""
    fd = os.open(tmp, (os.O_RDWR if os.name == "nt" else os.O_RDONLY) | _O_FLAGS)
    try:
        os.link(tmp, final)
    except OSError as e:
        os.close(fd)
        if isinstance(e, FileExistsError) or e.errno in _NO_LINKS:
            return False
        raise
    _syncs.start(final, fd)
    _unlink_quietly(tmp)
    return True


class _DataSyncs:
    """The data syncs of files :func:`local_file` linked into place with
    ``defer_sync``, run one after another by one daemon thread (a disk serves its
    cache flushes one at a time), keyed by the file's path until they are waited for
    (:meth:`wait`). A sync that succeeds forgets itself; a failed one keeps its
    error for the wait (the commit that would name the file then fails)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[str, Future[None]] = {}
        self._queue: queue.SimpleQueue[tuple[str, int, Future[None]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self, path: str, fd: int) -> None:
        """Sync (``fdatasync``) and close ``fd``, the file now at ``path``, later."""
        fut: Future[None] = Future()
        with self._lock:
            self._pending[path] = fut
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="arrayds-datasync", daemon=True
                )
                self._thread.start()
        self._queue.put((path, fd, fut))

    def _run(self) -> None:
        while True:
            path, fd, fut = self._queue.get()
            try:
                _datasync(fd)
            except Exception as e:  # noqa: BLE001 - kept for the wait to raise
                fut.set_exception(e)
                continue
            finally:
                os.close(fd)
            fut.set_result(None)
            with self._lock:
                if self._pending.get(path) is fut:
                    del self._pending[path]

    def wait(self, paths: Iterable[str]) -> None:
        """Return once the data of each of ``paths`` that has a sync under way is on
        the disk; the first failed sync raises its ``OSError``."""
        if not self._pending:
            return
        with self._lock:
            futures = [f for f in map(self._pending.pop, paths, repeat(None)) if f]
        for f in futures:
            f.result()

    def forget(self, paths: Iterable[str]) -> None:
        """Drop the syncs of ``paths`` (files being removed) without waiting."""
        if self._pending:
            with self._lock:
                for p in paths:
                    self._pending.pop(p, None)


_syncs = _DataSyncs()


def wait_synced(paths: Iterable[str]) -> None:
    """Wait until the data of the files :func:`local_file` wrote with ``defer_sync``
    at ``paths`` is on the disk (others: return at once); raises a failed sync's
    ``OSError``."""
    _syncs.wait(paths)


def _after_fork_in_child() -> None:
    global _syncs
    _syncs = _DataSyncs()  # the parent's thread does not exist here


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def digest(data: bytes) -> str:
    """The version token of bytes kept where the store has no version of its own.

    >>> digest(b"x") == digest(b"x") != digest(b"y")
    True
    """
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# ------------------------------------------------------------------- locking
#
# A compare-and-swap reads the current bytes and renames the new file over them under
# an exclusive lock of the folder, held only for that read and that rename.


def _flock(fd: int) -> bool:
    """Take an exclusive ``flock`` of ``fd``; ``False`` if the platform or the file
    system has none."""
    if fcntl is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def folder_lock(folder: str, name: str) -> Iterator[None]:
    """An exclusive lock of ``folder`` while the object ``name`` in it is replaced: a
    ``flock`` of the folder, or where the platform or the file system has none
    (Windows; some network and FUSE file systems) the lock file ``.<name>.lock``
    (:func:`_lock_file`). A lock that cannot be taken is a :class:`CommitLockError`,
    never an unlocked replace."""
    fd = os.open(folder, os.O_RDONLY) if fcntl is not None else -1
    try:
        if fd >= 0 and _flock(fd):
            yield
            return
        with _lock_file(folder, os.path.join(folder, f".{name}.lock")):
            yield
    finally:
        if fd >= 0:
            os.close(fd)  # closing the descriptor releases the flock


LOCK_TIMEOUT = 30.0
"""Seconds a compare-and-swap waits for another one's lock file (held for one read and
one rename); ``ARRAYDS_LOCK_TIMEOUT`` overrides it."""


def _lock_timeout() -> float:
    try:
        return float(os.environ.get("ARRAYDS_LOCK_TIMEOUT", LOCK_TIMEOUT))
    except ValueError:
        return LOCK_TIMEOUT


@contextlib.contextmanager
def _lock_file(folder: str, path: str) -> Iterator[None]:
    """Hold the lock file ``path``, created with ``O_EXCL`` (atomic on local and NFS
    file systems) and holding ``<pid> <host> <nonce>``; removed on release.

    A lock file left by a process that died on this host (its pid is gone, or the
    file predates the last boot) is broken (:func:`_break_stale`); any other lock
    file is waited for, up to :data:`LOCK_TIMEOUT`, then :class:`CommitLockError`.
    """
    token = f"{os.getpid()} {socket.gethostname()} {secrets.token_hex(8)}".encode()
    deadline = time.monotonic() + _lock_timeout()
    delay = 0.0005
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _break_stale(path):
                continue
            if time.monotonic() >= deadline:
                raise CommitLockError(
                    errno.ENOLCK,
                    f"cannot lock {folder} for a commit: the lock file {path} is held by "
                    f"{_lock_owner(path)} (this file system has no flock, so arrayds uses "
                    f"a lock file); nothing of this write is visible. If no arrayds write "
                    f"is running on that host, remove the lock file",
                    path,
                ) from None
            time.sleep(delay)
            delay = min(2 * delay, 0.05)
            continue
        except OSError as e:
            raise CommitLockError(
                e.errno or errno.ENOLCK,
                f"cannot lock {folder} for a commit: this file system has no flock and "
                f"the lock file {path} cannot be created ({e.strerror or e}); nothing of "
                f"this write is visible",
                path,
            ) from e
        try:
            os.write(fd, token)
        finally:
            os.close(fd)
        break
    try:
        yield
    finally:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _read_lock(path: str) -> tuple[bytes, float] | None:
    try:
        with open(path, "rb") as f:
            return f.read(200), os.fstat(f.fileno()).st_mtime
    except FileNotFoundError:
        return None


def _lock_owner(path: str) -> str:
    got = _read_lock(path)
    parts = got[0].decode("utf8", "replace").split() if got else []
    if len(parts) < 2:
        return "a commit that is starting"
    age = time.time() - got[1] if got else 0.0
    return f"process {parts[0]} on host {parts[1]} (for {age:.0f} s)"


def _boot_time() -> float | None:
    try:
        with open("/proc/stat", "rb") as f:
            for line in f:
                if line.startswith(b"btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


def _holder_is_dead(content: bytes, mtime: float) -> bool:
    """Whether the lock file contents name a process of this host that is gone."""
    parts = content.decode("utf8", "replace").split()
    if len(parts) != 3 or parts[1] != socket.gethostname() or not parts[0].isdigit():
        return False  # another host's (or a half-written) lock: only time tells
    boot = _boot_time()
    if boot is not None and mtime < boot:
        return True  # written before this host's last boot
    try:
        os.kill(int(parts[0]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # exists (EPERM: another user's process)
    return False


def _break_stale(path: str) -> bool:
    """Remove the lock file at ``path`` if its holder is dead; ``True`` if removed.

    Breakers serialize on ``<lock>.break`` (created with ``O_EXCL``, held for one
    read and one unlink) and re-read the lock under it, so a lock file that a live
    committer created after a stale one was broken is never removed."""
    got = _read_lock(path)
    if got is None:
        return True  # released meanwhile: try again
    if not _holder_is_dead(*got):
        return False
    guard = path + ".break"
    try:
        fd = os.open(guard, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except OSError:
        return False  # another process is breaking it: wait
    os.close(fd)
    try:
        now = _read_lock(path)
        if now is not None and now[0] == got[0]:
            os.unlink(path)
        return True
    finally:
        os.unlink(guard)


# ------------------------------------------------------------------- the store


def _read_file(path: str) -> bytes | None:
    """The bytes of the file ``path`` (``None`` if there is none), read without a file
    object: the manifest is read by every commit, twice."""
    try:
        fd = os.open(path, os.O_RDONLY | _O_FLAGS)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    try:
        parts = [os.read(fd, os.fstat(fd).st_size + 1)]
        while parts[-1]:
            parts.append(os.read(fd, 1 << 20))
        return b"".join(parts)
    except IsADirectoryError:
        return None
    finally:
        os.close(fd)


class LocalStore(BaseStore):
    """A folder of the local file system (see the module docstring)."""

    local = True
    _links = True
    """Whether to keep replaced files by hard links (until the file system refuses)."""

    def normalize_root(self, root: str) -> str:
        return super().normalize_root(os.path.abspath(root))

    @property
    def canonical_url(self) -> str:
        return "file://" + self.root

    def path(self, key: str, name: str = "") -> str:
        parts = [p for p in (self.root, key, name) if p]
        return os.path.join(*parts) if parts else ""

    def url_of(self, key: str, name: str = "") -> str:
        return self.path(key, name)

    # -- reading

    def get(self, key: str) -> bytes | None:
        p = self.path(key)
        try:
            return _read_file(p)
        except PermissionError as e:
            raise self.named_error(e, "cannot read", p) from e

    def get_versioned(self, key: str) -> tuple[bytes | None, Any]:
        """The bytes at ``key`` and a digest of them (:func:`digest`) as the version."""
        data = self.get(key)
        return (None, None) if data is None else (data, digest(data))

    def get_range(self, key: str, start: int, length: int) -> bytes:
        with open(self.path(key), "rb") as f:
            f.seek(start)
            return f.read(length)

    def exists(self, key: str, name: str = "") -> bool:
        return os.path.exists(self.path(key, name))

    def size(self, key: str) -> int:
        return os.path.getsize(self.path(key))

    def list_dir(self, prefix: str) -> list[str]:
        try:
            return sorted(e.name for e in os.scandir(self.path(prefix)) if e.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            return []

    def list(self, prefix: str) -> list[tuple[str, int, float | None]]:
        root = self.path("")
        out: list[tuple[str, int, float | None]] = []
        for dirpath, _dirs, files in os.walk(self.path(prefix)):
            for f in files:
                full = os.path.join(dirpath, f)
                try:
                    st = os.stat(full)
                except FileNotFoundError:
                    continue
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                out.append((rel, st.st_size, st.st_mtime))
        return sorted(out)

    # -- writing

    def _beside(self, key: str) -> tuple[str, str, str, str]:
        """(path, folder, file name, a new temporary path in the folder) of ``key``, its
        folder made (:func:`make_folders`): where a replacing write stages its bytes."""
        path = self.path(key)
        folder, name = os.path.split(path)
        make_folders(folder)
        return path, folder, name, os.path.join(folder, f".{name}.{secrets.token_hex(6)}.tmp")

    def put(self, key: str, data: bytes) -> None:
        """Write ``data`` to a temporary file in the folder of ``key``, fsync it,
        rename it over ``key`` and sync the folder."""
        path, folder, name, tmp = self._beside(key)
        try:
            fd = _create(tmp, data)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except BaseException:
            _unlink_quietly(tmp)
            raise
        sync_folder(folder)

    def put_if_match(
        self,
        key: str,
        data: bytes,
        version: Any,
        keep: Keep | None = None,
        flush: Iterable[str] = (),
    ) -> None:
        """Write ``data`` to a temporary file, then under the folder's lock
        (:func:`folder_lock`): compare the current bytes' digest with ``version``;
        keep the current file at ``keep.key`` (:meth:`_keep`: a hard link); fsync the
        temporary file; wait for the data syncs of ``flush`` still under way
        (:func:`wait_synced`); sync the folders of the kept file and of ``flush``; rename.
        The folder is synced after the lock is released. All the metadata changes come
        before the first sync, so a journaling file system commits them together."""
        path, folder, name, tmp = self._beside(key)
        try:
            fd = _create(tmp, data)
            try:
                with folder_lock(folder, name):
                    now = _read_file(path)
                    if (None if now is None else digest(now)) != version:
                        raise PreconditionFailedError(
                            errno.EAGAIN, f"{self.display(key)}: changed since it was read", path
                        )
                    named = [self.path(k) for k in flush]
                    folders = {os.path.dirname(n) for n in named}
                    if keep is not None and now is not None:
                        folders.add(self._keep(path, keep))
                    os.fsync(fd)
                    os.close(fd)
                    fd = -1
                    _syncs.wait(named)
                    for f in sorted(folders):
                        if os.path.isdir(f):
                            sync_folder(f)
                    os.replace(tmp, path)
            finally:
                if fd >= 0:
                    os.close(fd)
        except BaseException:
            _unlink_quietly(tmp)
            raise
        sync_folder(folder)

    def _keep(self, path: str, keep: Keep) -> str:
        """Keep the file ``path`` (the object being replaced, under the compare-and-swap
        lock) at ``keep.key`` and return the folder that holds it, to be synced: a hard
        link (a name is added, no data written), or where the file system refuses hard
        links a durable copy of ``keep.data`` (:meth:`put`). A file already there is
        kept by a racing writer (the same bytes) and stays."""
        target = self.path(keep.key)
        folder = os.path.dirname(target)
        make_folders(folder)
        if self._links:
            try:
                os.link(path, target)
                return folder
            except FileExistsError:
                return folder
            except OSError as e:
                if e.errno in _NO_LINKS:
                    self._links = False  # this file system makes none: copy from now on
        if not os.path.exists(target):
            self.put(keep.key, keep.data)
        return folder

    @contextlib.contextmanager
    def new_file(self, key: str, *, defer_sync: bool = False) -> Iterator[str]:
        """:func:`local_file` at ``key``'s path."""
        with local_file(self.path(key), defer_sync=defer_sync) as tmp:
            yield tmp

    def flush(self, keys: Iterable[str]) -> None:
        """Sync each folder that holds one of ``keys`` once, after the data syncs of
        those written with ``defer_sync`` (:func:`wait_synced`; the others' bytes
        were synced by their writers)."""
        named = [self.path(k) for k in keys]
        _syncs.wait(named)
        folders = {os.path.dirname(n) for n in named}
        for f in sorted(folders):
            if os.path.isdir(f):
                sync_folder(f)

    def make_folders(self, key: str) -> None:
        """Create the folder ``key`` and those above it, durably (:func:`make_folders`)."""
        make_folders(self.path(key))

    def delete(self, keys: Iterable[str]) -> None:
        paths = [self.path(k) for k in keys]
        _syncs.forget(paths)
        for p in paths:
            try:
                os.unlink(p)
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                pass

    def delete_prefix(self, prefix: str) -> None:
        p = self.path(prefix)
        if os.path.isdir(p):
            try:
                shutil.rmtree(p)
            except FileNotFoundError:
                pass  # removed by another remover meanwhile
