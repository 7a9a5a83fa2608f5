"""Storage for datasets: fsspec access, node paths, atomic commits, shard I/O.

A dataset lives under one root URL (docs/spec.md section 2). This module is the only
place that touches the file system for datasets:

* :class:`Store` — one root on one fsspec file system (local paths, ``file://``,
  ``memory://``, and object stores). Only whole-object writes and ranged reads are
  used outside the local fast path: no rename, no append, no in-place edit.
* :func:`check_component` — node names cannot escape the root.
* :meth:`Store.write_manifest` — the atomic, durable commit point: a temporary file
  plus ``os.replace`` under the node's lock on local disks (compare-and-swap), a
  conditional PUT on S3 and GCS, one whole-object write elsewhere.
* :meth:`Store.write_shard` — one immutable ArrayRecord shard, written under a name
  no other write uses (:func:`new_write_id`), synced to the disk before its rename
  (:func:`local_shard`).
* :func:`shard_reader` — a per-process LRU cache of open shard readers keyed by
  (file system, path): shards are immutable, so a footer is read once per process.
* :func:`io_stats` — counters of reader opens and records read, for tests and
  diagnostics.

>>> st = Store("memory://doc-store")
>>> st.write_manifest("a", {"format": "arrayds", "kind": "group"})
>>> st.read_manifest("a")["kind"], st.child_nodes("")
('group', ['a'])
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import hashlib
import json
import os
import queue
import secrets
import shutil
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import fsspec
from fsspec.implementations.local import LocalFileSystem

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from .arrayrecord import ArrayRecordReader, ArrayRecordWriter
from .errors import (
    BlindCommitWarning,
    CommitConflictError,
    CommitLockError,
    PreconditionFailedError,
)

__all__ = [
    "MANIFEST",
    "SHARD_DIR",
    "BlindCommitWarning",
    "CommitLockError",
    "Store",
    "check_component",
    "io_pool",
    "io_stats",
    "is_reserved_name",
    "join_component",
    "local_shard",
    "make_folders",
    "manifest_shard_paths",
    "new_write_id",
    "reset_io_stats",
    "shard_reader",
    "sync_file",
    "sync_folder",
]

MANIFEST = "arrayds.json"
"""The file name of every node's manifest."""
SHARD_DIR = "c"
"""The folder (inside an array node) holding its shards."""
SHARD_SUFFIX = ".array_record"


# ----------------------------------------------------------------------- names


def check_component(component: str | None, what: str = "component") -> str:
    """Normalize a node name (``"a/b"``) relative to the dataset root.

    ``None`` and ``""`` are the root. Absolute paths, ``..`` or ``.`` segments, empty
    segments (``"a//b"``), backslashes, NUL characters and a segment named like the
    manifest are a ``ValueError``: a name can never leave the root.

    >>> check_component("a/b"), check_component(None), check_component("a/")
    ('a/b', '', 'a')
    >>> check_component("../x")
    Traceback (most recent call last):
    ...
    ValueError: component '../x': '..' segments are not allowed (names cannot leave ...)
    """
    if component is None:
        return ""
    if not isinstance(component, str):
        raise TypeError(f"{what} must be a str, got {type(component).__name__}")
    name = component
    if name.endswith("/"):
        name = name[:-1]
    if name == "":
        return ""
    if "\\" in name:
        raise ValueError(f"{what} {component!r}: backslashes are not allowed")
    if "\x00" in name:
        raise ValueError(f"{what} {component!r}: NUL characters are not allowed")
    if name.startswith("/"):
        raise ValueError(
            f"{what} {component!r}: absolute paths are not allowed (names are relative to "
            f"the dataset root)"
        )
    for seg in name.split("/"):
        if seg == "":
            raise ValueError(f"{what} {component!r}: empty path segments are not allowed")
        if seg in ("..", "."):
            raise ValueError(
                f"{what} {component!r}: {seg!r} segments are not allowed (names cannot leave "
                f"the dataset root)"
            )
        if seg == MANIFEST:
            raise ValueError(f"{what} {component!r}: {MANIFEST!r} is reserved")
    return name


def is_reserved_name(segment: str) -> bool:
    """Whether a path segment is a name arrayds keeps for itself in node folders (the
    manifest, its temporary and lock files): no shard may be named so.

    >>> is_reserved_name("arrayds.json"), is_reserved_name(".arrayds.json.lock")
    (True, True)
    >>> is_reserved_name("0661702927ec82393c249537-0.array_record")
    False
    """
    return segment == MANIFEST or segment.startswith(f".{MANIFEST}.")


def join_component(parent: str, child: str) -> str:
    """``join_component("a", "b/c") == "a/b/c"``; the root is ``""``."""
    child = check_component(child)
    if not parent:
        return child
    if not child:
        return parent
    return f"{parent}/{child}"


def new_write_id() -> str:
    """A unique, time-sortable id for one write: 14 hex digits of microseconds since
    the epoch, then 10 random hex digits.

    >>> len(new_write_id())
    24
    """
    return f"{time.time_ns() // 1000:014x}{secrets.token_hex(5)}"


# ------------------------------------------------------------------ durability
#
# A local commit is durable (it survives a power loss, as in SQLite and LMDB) when,
# before the rename that makes a manifest visible, the bytes and the names of every
# shard it adds are on the disk, and after it, the rename itself:
#
#   1. each shard-writing task syncs its file (fdatasync) before renaming it into place
#      (local_shard): the tasks run in parallel, so their syncs overlap;
#   2. every folder a write creates has its parent folder synced by the creator
#      (make_folders), so the path to a shard and to a manifest is on the disk;
#   3. the commit syncs once each folder holding a shard the manifest adds (the renames
#      of step 1), writes and fsyncs the temporary manifest, renames it into place
#      and syncs the node folder (Store.write_manifest).
#
# Object stores need none of this: an object exists once its PUT (or multipart upload)
# is acknowledged.


def sync_file(path: str) -> None:
    """Flush a file's data (and the size that is needed to read it) to the disk."""
    fd = os.open(path, os.O_RDWR if os.name == "nt" else os.O_RDONLY)  # Windows: writable
    try:
        if hasattr(os, "fdatasync"):
            os.fdatasync(fd)
        else:  # macOS, Windows
            os.fsync(fd)
    finally:
        os.close(fd)


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


@contextlib.contextmanager
def local_shard(final: str) -> Iterator[str]:
    """Write a local shard durably: yields a temporary path next to ``final`` (its
    folder made with :func:`make_folders`) to write the file to; when the block ends
    normally the file is synced and renamed to ``final``, else removed.

    >>> import os, tempfile
    >>> final = os.path.join(tempfile.mkdtemp(), "c", "x.array_record")
    >>> with local_shard(final) as tmp:
    ...     _ = open(tmp, "wb").write(b"bytes")
    >>> open(final, "rb").read()
    b'bytes'
    """
    make_folders(os.path.dirname(final))
    tmp = f"{final}.{secrets.token_hex(6)}.tmp"
    try:
        yield tmp
        sync_file(tmp)
        os.replace(tmp, final)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def manifest_shard_paths(manifest: Mapping[str, Any]) -> set[str]:
    """The shard paths (relative to the node folder, ``/``-separated) a manifest
    names: its ``shards`` and those of a group snapshot's members (``<member>/...``).

    >>> sorted(manifest_shard_paths({"shards": [{"path": "c/a-0.array_record"}],
    ...     "snapshot": {"members": {"x": {"shards": [{"path": "c/b-0.array_record"}]}}}}))
    ['c/a-0.array_record', 'x/c/b-0.array_record']
    """
    out: set[str] = set()
    shards = manifest.get("shards")
    if isinstance(shards, list):
        for s in shards:
            if isinstance(s, dict) and isinstance(s.get("path"), str):
                out.add(s["path"])
    snap = manifest.get("snapshot")
    members = snap.get("members") if isinstance(snap, dict) else None
    if isinstance(members, dict):
        for name, member in members.items():
            if isinstance(name, str) and isinstance(member, dict):
                out |= {f"{name}/{q}" for q in manifest_shard_paths(member)}
    return out


def new_shard_folders(folder: str, manifest: Mapping[str, Any], old: bytes | None) -> set[str]:
    """The local folders (under the node ``folder``) of the shards ``manifest`` names
    that the ``old`` manifest bytes did not."""
    known: set[str] = set()
    if old is not None:
        try:
            prev = json.loads(old.decode("utf8"))
        except (UnicodeDecodeError, ValueError):
            prev = None
        if isinstance(prev, dict):
            known = manifest_shard_paths(prev)
    out: set[str] = set()
    for rel in manifest_shard_paths(manifest) - known:
        d = os.path.dirname(os.path.join(folder, *rel.split("/")))
        if os.path.isdir(d):
            out.add(d)
    return out


# ------------------------------------------------------------------------ stats

_stats_lock = threading.Lock()
_stats: dict[str, int] = {"reader_opens": 0, "read_calls": 0, "records_read": 0}


def _count(key: str, n: int = 1) -> None:
    with _stats_lock:
        _stats[key] += n


def io_stats() -> dict[str, int]:
    """Counters since the last :func:`reset_io_stats`: ``reader_opens`` (shard
    footers read), ``read_calls`` (batched engine reads) and ``records_read``
    (chunks fetched and decoded).

    >>> reset_io_stats(); io_stats()
    {'reader_opens': 0, 'read_calls': 0, 'records_read': 0}
    """
    with _stats_lock:
        return dict(_stats)


def reset_io_stats() -> None:
    """Zero the counters of :func:`io_stats`."""
    with _stats_lock:
        for k in _stats:
            _stats[k] = 0


# ------------------------------------------------------------------- the store


def options_token(storage_options: Mapping[str, Any] | None) -> str:
    return json.dumps(dict(storage_options or {}), sort_keys=True, default=repr)


class Store:
    """A dataset root: an fsspec file system and the root path inside it.

    Node names are ``""`` (the root) or ``"a/b"``; file names inside a node are
    relative (``"arrayds.json"``, ``"c/<id>-0.array_record"``). ``Store`` objects are
    cheap; :func:`arrayds.storage.get_store` caches one per (url, storage_options)
    per process.
    """

    def __init__(
        self, url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
    ):
        if isinstance(url, os.PathLike):
            url = os.fspath(url)
        if not isinstance(url, str):
            raise TypeError(f"dataset url must be a str or os.PathLike, got {type(url).__name__}")
        if not url:
            raise ValueError("dataset url is empty")
        self.url = url
        self.storage_options: dict[str, Any] = dict(storage_options or {})
        fs, root = fsspec.core.url_to_fs(url, **self.storage_options)
        self.fs: fsspec.AbstractFileSystem = fs
        self.local = isinstance(fs, LocalFileSystem)
        if self.local:
            root = os.path.abspath(root)
        self.root = root.rstrip("/") if root not in ("/", "") else root
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        self.protocol = protocol
        self.token = (protocol, options_token(self.storage_options))

    # -- naming

    @property
    def canonical_url(self) -> str:
        """The root as a full URL (``file:///abs/path``, ``memory:///x``); stable
        across processes and used in dask tokens."""
        if self.local:
            return "file://" + self.root
        return self.fs.unstrip_protocol(self.root)

    def path(self, node: str, name: str = "") -> str:
        """The file-system path of ``name`` inside ``node``."""
        parts = [self.root] if self.root else []
        if node:
            parts.append(node)
        if name:
            parts.append(name)
        if self.local:
            return os.path.join(*parts)
        return "/".join(p.rstrip("/") for p in parts) if parts else ""

    def url_of(self, node: str, name: str = "") -> str:
        """A URL the ArrayRecord reader/writer understands (a plain path locally)."""
        p = self.path(node, name)
        return p if self.local else self.fs.unstrip_protocol(p)

    def display(self, node: str) -> str:
        """``url`` for the root, ``url/node`` otherwise (for messages)."""
        base = self.url.rstrip("/")
        return f"{base}/{node}" if node else self.url

    # -- manifests

    def read_manifest(self, node: str) -> dict[str, Any] | None:
        """The parsed manifest of ``node``, or ``None`` if it has none. A manifest
        that is not a JSON object raises :class:`arrayds.CorruptionError`."""
        raw = self.read_manifest_bytes(node)
        if raw is None:
            return None
        return parse_json(raw, self.display(node))

    def read_manifest_bytes(self, node: str) -> bytes | None:
        p = self.path(node, MANIFEST)
        try:
            if self.local:
                with open(p, "rb") as f:
                    return f.read()
            return self.fs.cat_file(p)
        except (FileNotFoundError, NotADirectoryError):
            if not self.local:
                self.check_bucket()  # object stores: a missing bucket is an error (issue 6)
            return None
        except IsADirectoryError:
            return None
        except PermissionError as e:
            raise self.named_error(e, "cannot read", p) from e

    def has_manifest(self, node: str) -> bool:
        p = self.path(node, MANIFEST)
        if self.local:
            return os.path.isfile(p)
        return bool(self.fs.exists(p))

    def write_manifest(self, node: str, manifest: Mapping[str, Any]) -> None:
        """Atomically and durably replace (or create) the manifest of ``node``.

        Local: sync every folder that holds a shard this manifest adds (so their names
        are on the disk: the shards' bytes were synced by the tasks that wrote them),
        write a temporary file in the node folder, flush and fsync it, ``os.replace``
        it over the manifest under the node's lock (a compare-and-swap, see
        :func:`is_newer`), then sync the node folder (see "Durability" below).
        Elsewhere: one whole-object write, which object stores make visible
        atomically (conditional where the store allows, see :func:`commit_object`).
        Readers see the old or the new manifest, never a mix.
        """
        data = dump_json(manifest)
        p = self.path(node, MANIFEST)
        if self.local:
            folder = os.path.dirname(p)
            make_folders(folder)
            old = self.read_manifest_bytes(node)
            for f in sorted(new_shard_folders(folder, manifest, old)):
                sync_folder(f)
            tmp = os.path.join(folder, f".{MANIFEST}.{secrets.token_hex(6)}.tmp")
            replaced = False
            try:
                with open(tmp, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                with _folder_lock(folder):
                    if is_newer(self, node, self.read_manifest_bytes(node), manifest):
                        os.replace(tmp, p)
                        replaced = True
                    else:
                        os.unlink(tmp)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            if replaced:
                sync_folder(folder)
        else:
            try:
                commit_object(self, node, p, data, manifest)
            except (PermissionError, FileNotFoundError) as e:
                raise self.named_error(e, "cannot commit", p) from e

    # -- versioned objects: the primitives of every commit (arrayds.abc.store.Store)

    def get_versioned(self, key: str) -> tuple[bytes | None, Any]:
        """The bytes at ``key`` and their version token (``(None, None)`` if there is
        no object): a digest of the bytes locally and on ``memory://``, the ETag on
        S3, the object generation on GCS (read with the bytes in one GET)."""
        p = self.path(key)
        if self.local:
            try:
                with open(p, "rb") as f:
                    data = f.read()
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                return None, None
            except PermissionError as e:
                raise self.named_error(e, "cannot read", p) from e
            return data, _digest(data)
        fs = self.fs
        try:
            if self.protocol in GCS_PROTOCOLS and _conditional(self, warn=False):
                data, version = _gcs_read(fs, p)
            elif self.protocol in CONDITIONAL_PROTOCOLS and _conditional(self, warn=False):
                fs.invalidate_cache(p)
                try:
                    version = fs.info(p).get("ETag")
                except FileNotFoundError:
                    version = None
                data = None if version is None else fs.cat_file(p)
            else:
                try:
                    data = fs.cat_file(p)
                except (FileNotFoundError, IsADirectoryError):
                    data = None
                version = None if data is None else _digest(data)
        except FileNotFoundError:
            data, version = None, None
        except PermissionError as e:
            raise self.named_error(e, "cannot read", p) from e
        if data is None:
            self.check_bucket()  # object stores: a missing bucket is an error (issue 6)
            return None, None
        return bytes(data), version

    def put_if_match(self, key: str, data: bytes, version: Any) -> None:
        """Replace (or create) the object at ``key`` with ``data`` only if it is still
        ``version`` (``None``: only if there is none), atomically with the check; else
        :class:`arrayds.errors.PreconditionFailedError` and nothing changes.

        Local: ``data`` goes to a temporary file that is synced, then renamed over
        ``key`` under the folder's lock after re-reading the current bytes; the folder
        is synced after. ``memory://``: the same under a process-wide lock. S3: PUT with
        ``If-Match: <ETag>`` (``If-None-Match: *`` to create); GCS: upload with
        ``ifGenerationMatch`` (``0`` to create). A refused PUT whose object now holds
        exactly ``data`` was this PUT retried by the client after a lost reply: success.
        Other fsspec file systems: one blind whole-object PUT (with a
        :class:`BlindCommitWarning`, once)."""
        p = self.path(key)
        if self.local:
            _local_put(p, data, version)
            return
        fs = self.fs
        try:
            if self.protocol in PROCESS_LOCAL_PROTOCOLS:
                with _process_commit_lock:
                    try:
                        current: bytes | None = fs.cat_file(p)
                    except FileNotFoundError:
                        current = None
                    if (None if current is None else _digest(current)) != version:
                        raise PreconditionFailedError(
                            errno.EAGAIN, f"{self.display(key)}: changed since it was read", p
                        )
                    fs.pipe_file(p, data)
                return
            if not _conditional(self):
                fs.pipe_file(p, data)
                return
            try:
                if self.protocol in GCS_PROTOCOLS:
                    _gcs_put(fs, p, data, version or "0")
                elif version is None:
                    fs.pipe_file(p, data, mode="create")
                else:
                    fs.pipe_file(p, data, IfMatch=version)
            except OSError as e:
                if not _precondition_failed(e):
                    raise
                fs.invalidate_cache(p)
                try:
                    now = fs.cat_file(p)
                except FileNotFoundError:
                    now = None
                if now == data:  # this PUT landed; the client retried it after a lost reply
                    return
                raise PreconditionFailedError(
                    errno.EAGAIN,
                    f"{self.display(key)}: the conditional PUT was refused (the object "
                    f"changed since it was read)",
                    p,
                ) from None
            finally:
                fs.invalidate_cache(p)
        except (PermissionError, FileNotFoundError) as e:
            raise self.named_error(e, "cannot commit", p) from e

    def delete(self, keys: Iterable[str]) -> None:
        """Remove the objects at ``keys``; missing ones are fine."""
        self.remove_files("", list(keys))

    def delete_prefix(self, prefix: str) -> None:
        """Remove everything below ``prefix`` (a folder and its contents)."""
        self.remove(prefix, "")

    def list_dir(self, prefix: str) -> list[str]:
        """The names (sorted) of the folders directly below ``prefix``."""
        base = self.path(prefix)
        if self.local:
            try:
                return sorted(e.name for e in os.scandir(base) if e.is_dir())
            except (FileNotFoundError, NotADirectoryError):
                return []
        try:
            self.fs.invalidate_cache(base)
            found = self.fs.ls(base, detail=True)
        except FileNotFoundError:
            return []
        finally:
            self.fs.invalidate_cache(base)
        return sorted(
            str(e["name"]).rstrip("/").rsplit("/", 1)[-1]
            for e in found
            if e.get("type") == "directory"
        )

    def list(self, prefix: str) -> list[tuple[str, int, float | None]]:
        """Every object below ``prefix`` (recursively), as (key, size, mtime)."""
        base = self.path(prefix)
        root = self.path("")
        out: list[tuple[str, int, float | None]] = []
        if self.local:
            for dirpath, _dirs, files in os.walk(base):
                for f in files:
                    full = os.path.join(dirpath, f)
                    try:
                        st = os.stat(full)
                    except FileNotFoundError:
                        continue
                    rel = os.path.relpath(full, root).replace(os.sep, "/")
                    out.append((rel, st.st_size, st.st_mtime))
            return sorted(out)
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return []
        finally:
            self.fs.invalidate_cache(base)
        cut = len(root.rstrip("/")) + 1 if root else 0
        for name, info in found.items():
            mtime = info.get("mtime") or info.get("LastModified") or info.get("updated")
            t = mtime.timestamp() if hasattr(mtime, "timestamp") else None
            out.append((str(name)[cut:], int(info.get("size") or 0), t))
        return sorted(out)

    def flush(self, keys: Iterable[str]) -> None:
        """Make the names of objects written earlier durable: locally, sync each folder
        that holds one of ``keys`` once (their bytes were synced by their writers);
        object stores need nothing."""
        if not self.local:
            return
        folders = {os.path.dirname(self.path(k)) for k in keys}
        for f in sorted(folders):
            if os.path.isdir(f):
                sync_folder(f)

    # -- object stores (issue 6: errors naming the URL; commits: see commit_object)

    def named_error(self, e: OSError, action: str, path: str) -> OSError:
        """``e`` re-created (same type) with a message naming the URL of ``path``."""
        return named_error(self, e, action, path)

    def check_bucket(self) -> None:
        """On bucket-based object stores (S3, GCS, Azure): ``FileNotFoundError``
        naming the URL if the root's bucket does not exist, ``PermissionError`` if
        the credentials are refused. Checked once per store."""
        check_bucket(self)

    # -- listing and removal

    def child_nodes(self, node: str) -> list[str]:
        """Names (sorted) of the sub-folders of ``node`` that hold a manifest."""
        base = self.path(node)
        if self.local:
            try:
                entries = list(os.scandir(base))
            except (FileNotFoundError, NotADirectoryError):
                return []
            return sorted(
                e.name
                for e in entries
                if e.is_dir() and os.path.isfile(os.path.join(e.path, MANIFEST))
            )
        pattern = (base.rstrip("/") + "/*/" + MANIFEST) if base else ("*/" + MANIFEST)
        try:
            self.fs.invalidate_cache(base)  # see other processes' new nodes (issue 6)
            found = self.fs.glob(pattern)
        except FileNotFoundError:
            return []
        finally:
            # keep no listing cached: s3fs answers info() from a cached listing, which
            # would hide shards that other processes write later
            self.fs.invalidate_cache(base)
        names = {p.rstrip("/").split("/")[-2] for p in found}
        return sorted(names)

    def exists(self, node: str, name: str = "") -> bool:
        p = self.path(node, name)
        if self.local:
            return os.path.exists(p)
        return bool(self.fs.exists(p))

    def remove(self, node: str, name: str) -> None:
        """Remove one file or folder inside ``node`` (missing is fine)."""
        p = self.path(node, name)
        try:
            if self.local:
                if os.path.isdir(p):
                    shutil.rmtree(p)
                else:
                    os.unlink(p)
            else:
                self.fs.rm(p, recursive=True)
        except FileNotFoundError:
            pass

    def remove_files(self, node: str, names: Sequence[str]) -> None:
        """Remove many files inside ``node``, ignoring the missing ones."""
        if not names:
            return
        if self.local:
            for n in names:
                try:
                    os.unlink(self.path(node, n))
                except FileNotFoundError:
                    pass
            return
        paths = [self.path(node, n) for n in names]
        try:
            self.fs.rm(paths)
        except FileNotFoundError:
            for p in paths:
                try:
                    self.fs.rm(p)
                except FileNotFoundError:
                    pass

    # -- shards

    @contextlib.contextmanager
    def shard_writer(self, node: str, relpath: str, options: str) -> Iterator[ArrayRecordWriter]:
        """Write one immutable shard: yields the :class:`ArrayRecordWriter` of
        ``relpath`` inside ``node``; when the block ends normally the shard is complete
        under that name, else nothing is left there. The one place a shard is written.

        On local disks the shard is built under a temporary name, synced to the disk
        and renamed into place (:func:`local_shard`), so a shard name never holds a
        half-written file even if two attempts of the same task race, and a commit
        that names it never outlives its bytes; elsewhere the ArrayRecord writer
        uploads the object as it is written and completes it at ``close()`` (a failed
        write removes what was uploaded, best effort).

        >>> import tempfile
        >>> st = Store(tempfile.mkdtemp())
        >>> with st.shard_writer("a", "c/x.array_record", "group_size:1") as w:
        ...     w.write_many([b"r0", b"r1"])
        2
        >>> st.size("a/c/x.array_record") > 0
        True
        """
        if self.local:
            with local_shard(self.path(node, relpath)) as tmp, ArrayRecordWriter(tmp, options) as w:
                yield w
            return
        path = self.path(node, relpath)
        try:
            w = ArrayRecordWriter(
                self.url_of(node, relpath), options, storage_options=self.storage_options
            )
        except (PermissionError, FileNotFoundError) as e:
            raise self.named_error(e, "cannot write the shard", path) from e
        try:
            yield w  # what the caller's block raises is its own (not renamed)
        except BaseException:
            w.abort()
            self._drop(path)
            raise
        try:
            w.close()
        except BaseException as e:
            self._drop(path)
            if isinstance(e, PermissionError | FileNotFoundError):
                raise self.named_error(e, "cannot write the shard", path) from e
            raise

    def _drop(self, path: str) -> None:
        """Remove what a failed remote shard write may have left (best effort: an
        orphan shard is harmless)."""
        try:
            self.fs.rm_file(path)
        except Exception:  # noqa: BLE001
            pass

    def write_shard(self, node: str, relpath: str, records: Iterable[Any], options: str) -> int:
        """Write one immutable shard (one record per chunk, see :meth:`shard_writer`)
        and return its size."""
        with self.shard_writer(node, relpath, options) as w:
            try:
                w.write_many(records)
            except (PermissionError, FileNotFoundError) as e:
                if self.local:
                    raise
                raise self.named_error(e, "cannot write the shard", self.path(node, relpath)) from e
        return self.size(f"{node}/{relpath}" if node else relpath)

    def size(self, key: str) -> int:
        """The size in bytes of the object at ``key`` (``FileNotFoundError`` if none)."""
        p = self.path(key)
        return os.path.getsize(p) if self.local else int(self.fs.size(p))

    def shard_reader(
        self,
        node: str,
        relpath: str,
        size: int | None = None,
        shards: Mapping[str, int | None] | None = None,
    ) -> ArrayRecordReader:
        """The cached reader of a shard (see :func:`shard_reader`); ``size``: its
        byte size from the manifest, if recorded; ``shards``: every shard file of the
        node (relpath -> recorded size or None), which lets reads on object stores
        prefetch footers (see :data:`FOOTER_PREFETCH_SHARDS`)."""
        path = self.path(node, relpath)
        if shards is None or self.local or len(shards) < 3:
            return shard_reader(self, path, size)
        with _readers_lock:
            r = _readers.get((self.token, path))
        if r is None:
            r = shard_reader(self, path, size)
            _prefetch_footers(self, node, relpath, shards)
        return r


# ------------------------------------------------------ compare-and-swap commits
#
# Every committer reads the node's manifest, prepares generation g + 1 and then writes
# it. Two committers that both read generation g must not both succeed, or the second
# silently drops what the first committed (two appends, say). So the write itself
# checks, atomically with the replace, that the manifest is still older than the one
# being written: on local disks under an exclusive flock of the node's folder (held
# only for one read and one rename), on object stores by a conditional PUT
# (commit_object). A committer that finds a newer manifest gets CommitConflictError
# and nothing of its write becomes visible.


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
def _folder_lock(folder: str) -> Iterator[None]:
    """An exclusive lock of ``folder`` for the length of a commit: a ``flock`` of the
    folder, or where the platform or the file system has none (Windows; some network
    and FUSE file systems: ``flock`` fails) a lock file (:func:`_lock_file`). A lock
    that cannot be taken is a :class:`CommitLockError`, never an unlocked commit."""
    fd = os.open(folder, os.O_RDONLY) if fcntl is not None else -1
    try:
        if fd >= 0 and _flock(fd):
            yield
            return
        with _lock_file(folder):
            yield
    finally:
        if fd >= 0:
            os.close(fd)  # closing the descriptor releases the flock


LOCK_FILE = f".{MANIFEST}.lock"
"""The lock file of a node folder whose file system has no ``flock``."""
LOCK_TIMEOUT = 30.0
"""Seconds a commit waits for another commit's lock file (a commit holds it for one
read and one rename); ``ARRAYDS_LOCK_TIMEOUT`` overrides it."""


def _lock_timeout() -> float:
    try:
        return float(os.environ.get("ARRAYDS_LOCK_TIMEOUT", LOCK_TIMEOUT))
    except ValueError:
        return LOCK_TIMEOUT


@contextlib.contextmanager
def _lock_file(folder: str) -> Iterator[None]:
    """Hold ``folder/.arrayds.json.lock``, created with ``O_EXCL`` (atomic on local
    and NFS file systems) and holding ``<pid> <host> <nonce>``; removed on release.

    A lock file left by a process that died on this host (its pid is gone, or the
    file predates the last boot) is broken (:func:`_break_stale`); any other lock
    file is waited for, up to :data:`LOCK_TIMEOUT`, then :class:`CommitLockError`.
    """
    path = os.path.join(folder, LOCK_FILE)
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


def _digest(data: bytes) -> str:
    """The version token of bytes kept where the store has no version of its own."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _local_put(path: str, data: bytes, version: Any) -> None:
    """:meth:`Store.put_if_match` on a local file system (see there)."""
    folder = os.path.dirname(path)
    make_folders(folder)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{secrets.token_hex(6)}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        with _folder_lock(folder):
            try:
                with open(path, "rb") as f:
                    now: Any = _digest(f.read())
            except FileNotFoundError:
                now = None
            if now != version:
                raise PreconditionFailedError(
                    errno.EAGAIN, f"{path}: changed since it was read", path
                )
            os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    sync_folder(folder)


def is_newer(store: Store, node: str, current: bytes | None, manifest: Mapping[str, Any]) -> bool:
    """Whether to write ``manifest`` over the ``current`` manifest bytes of ``node``:
    ``True`` when its ``generation`` is larger (or there is nothing to compare),
    ``False`` when it is the empty group that ``ensure_parents`` writes and a group is
    already there (the goal is met), else :class:`CommitConflictError`."""
    cur_gen = _generation(current)
    new_gen = manifest.get("generation")
    if cur_gen is None or not isinstance(new_gen, int) or new_gen > cur_gen:
        return True
    if _is_fresh_group(manifest) and _kind(current) == "group":
        return False

    raise CommitConflictError(
        f"{store.display(node)}: another writer committed generation {cur_gen} while this "
        f"write prepared generation {new_gen}; nothing of this write is visible"
    )


# ------------------------------------------------- object stores (issue 6)
#
# Commits on object stores (docs/spec.md, "Commits on object stores"). A manifest is
# replaced by one whole-object PUT. Where the store offers conditional writes (see
# CONDITIONAL_PROTOCOLS) the PUT is a compare-and-swap:
#
#   1. read the manifest's version: S3 HEAD -> its ETag; GCS: one GET returns the
#      manifest and its object generation (x-goog-generation) together;
#   2. the manifest -> its (arrayds) generation (S3: a GET after the HEAD); the new
#      manifest must have a larger one, else some other writer committed since this
#      write read the node: CommitConflictError;
#   3. PUT only if the object is still that version: S3 If-Match: <ETag> (or
#      If-None-Match: * when there was none); GCS ifGenerationMatch=<generation> (or
#      0: only if there is no object). If the object changed after step 1 the store
#      refuses the PUT (HTTP 412): CommitConflictError.
#
# S3's step 2 reads after step 1, so a change between them makes step 3 fail (safe).
# Two committers that both start from generation g can therefore never both succeed.
# A refused PUT whose object now holds exactly this write's bytes was this write,
# retried by the client after a lost response: that is a success, not a conflict.

CONDITIONAL_PROTOCOLS = ("s3", "s3a", "gs", "gcs")
"""fsspec protocols whose PUT can be made conditional: S3 (s3fs passes If-Match /
If-None-Match to PutObject) and Google Cloud Storage (gcsfs; ``ifGenerationMatch``,
see :func:`_gcs_put`). ``ARRAYDS_CONDITIONAL_COMMIT=0`` turns the conditional PUT off
for compatible servers that reject these preconditions (commits are then blind, with
a :class:`BlindCommitWarning`)."""

GCS_PROTOCOLS = ("gs", "gcs")
"""The fsspec protocols of gcsfs."""

PROCESS_LOCAL_PROTOCOLS = ("memory",)
"""fsspec file systems that live in one process (``memory://``): a commit there is a
compare-and-swap under a process-wide lock (:data:`_process_commit_lock`)."""

_process_commit_lock = threading.Lock()


_warned_blind: set[str] = set()


def _warn_blind(store: Store, why: str) -> None:
    key = f"{store.protocol}:{why}"
    if key in _warned_blind:
        return
    _warned_blind.add(key)
    import warnings

    warnings.warn(
        f"{store.url}: commits to {store.protocol}:// are not compare-and-swap ({why}): "
        f"two writers committing to the same node at once can lose one of the commits; "
        f"let one writer at a time write to a node",
        BlindCommitWarning,
        stacklevel=4,
    )


def _conditional(store: Store, warn: bool = True) -> bool:
    """Whether commits to ``store`` use conditional PUTs; warns once when they cannot
    (unless ``warn`` is false: a read asks only which version token to take)."""
    if os.environ.get("ARRAYDS_CONDITIONAL_COMMIT", "1").strip().lower() in ("0", "false", "no"):
        if warn:
            _warn_blind(store, "ARRAYDS_CONDITIONAL_COMMIT=0 turns the conditional PUT off")
        return False
    if store.protocol in CONDITIONAL_PROTOCOLS:
        return True
    if warn:
        _warn_blind(store, "this file system offers no conditional write")
    return False


def _precondition_failed(e: BaseException) -> bool:
    """A refused conditional PUT: s3fs turns it into FileExistsError for
    If-None-Match and into a plain OSError for If-Match; gcsfs turns every HTTP 412
    (``ifGenerationMatch`` not met) into FileExistsError."""
    if isinstance(e, FileExistsError):
        return True
    cause = e.__cause__ or e.__context__
    code = ""
    resp = getattr(cause, "response", None)
    if isinstance(resp, dict):
        code = str(resp.get("Error", {}).get("Code", ""))
    text = f"{e} {cause}"
    return code in ("PreconditionFailed", "ConditionalRequestConflict") or (
        "PreconditionFailed" in text or "ConditionalRequestConflict" in text
    )


def _gcs_read(fs: Any, path: str) -> tuple[bytes | None, str | None]:
    """The object at ``path`` and its GCS generation, from one media GET (gcsfs's own
    request machinery: credentials, retries, errors), or ``(None, None)``."""
    try:
        headers, body = fs.call("GET", fs.url(path))
    except FileNotFoundError:
        return None, None
    generation = headers.get("x-goog-generation")
    if not generation:
        raise OSError(
            errno.EPROTO,
            f"{fs.unstrip_protocol(path)}: the server sent no x-goog-generation header, so "
            f"the manifest cannot be replaced conditionally; set "
            f"ARRAYDS_CONDITIONAL_COMMIT=0 for a server without object generations",
        )
    return bytes(body), str(generation)


def _gcs_put(fs: Any, path: str, data: bytes, if_generation_match: str) -> None:
    """Upload ``data`` to ``path`` only if the object's generation is
    ``if_generation_match`` (``"0"``: only if there is no object); HTTP 412 otherwise,
    which gcsfs raises as FileExistsError.

    gcsfs's ``pipe_file`` can only ask for ``ifGenerationMatch=0`` (``mode="create"``),
    so this sends the same one-request multipart upload as its ``simple_upload``
    through its ``call`` (credentials, retries, status -> exception), with the
    generation precondition added.
    """
    bucket, key, _ = fs.split_path(path)
    boundary = f"arrayds-{secrets.token_hex(12)}"
    meta = json.dumps({"name": key, "contentType": "application/json"})
    body = (
        (
            f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{meta}\r\n"
            f"--{boundary}\r\nContent-Type: application/json\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    fs.call(
        "POST",
        f"{fs._location}/upload/storage/v1/b/{quote(bucket, safe='')}/o",
        uploadType="multipart",
        ifGenerationMatch=if_generation_match,
        headers={"Content-Type": f'multipart/related; boundary="{boundary}"'},
        data=body,
        json_out=True,
    )


def _generation(raw: bytes | None) -> int | None:
    if raw is None:
        return None
    try:
        gen = json.loads(raw.decode("utf8")).get("generation")
    except (UnicodeDecodeError, ValueError, AttributeError):
        return None
    return gen if isinstance(gen, int) and not isinstance(gen, bool) else None


def _kind(raw: bytes | None) -> str | None:
    try:
        kind = json.loads(raw.decode("utf8")).get("kind") if raw is not None else None
    except (UnicodeDecodeError, ValueError, AttributeError):
        return None
    return kind if isinstance(kind, str) else None


def _is_fresh_group(manifest: Mapping[str, Any]) -> bool:
    """The empty generation-1 group that ``ensure_parents`` creates for a missing
    parent: if another writer created that group first, the goal is met."""
    return (
        manifest.get("kind") == "group"
        and manifest.get("generation") == 1
        and not manifest.get("attrs")
        and "snapshot" not in manifest
    )


def commit_object(
    store: Store, node: str, path: str, data: bytes, manifest: Mapping[str, Any]
) -> None:
    """Write a manifest object: a conditional PUT where the store supports one (see
    the comment above), a compare-and-swap under a process-wide lock on ``memory://``,
    else one plain whole-object PUT (with a :class:`BlindCommitWarning`, once)."""
    fs = store.fs
    if store.protocol in PROCESS_LOCAL_PROTOCOLS:
        with _process_commit_lock:
            try:
                current: bytes | None = fs.cat_file(path)
            except FileNotFoundError:
                current = None
            if is_newer(store, node, current, manifest):
                fs.pipe_file(path, data)
        return
    if not _conditional(store):
        fs.pipe_file(path, data)
        return

    what = store.display(node)
    gcs = store.protocol in GCS_PROTOCOLS
    fs.invalidate_cache(path)
    # step 1 (and on GCS step 2): the version the PUT will require
    current = None
    if gcs:
        current, version = _gcs_read(fs, path)
    else:
        try:
            version = fs.info(path).get("ETag")
        except FileNotFoundError:
            version = None
    if version is not None:
        if not gcs:
            current = fs.cat_file(path)
        if not is_newer(store, node, current, manifest):
            return
    try:
        if gcs:
            _gcs_put(fs, path, data, version or "0")
        elif version is None:
            fs.pipe_file(path, data, mode="create")
        else:
            fs.pipe_file(path, data, IfMatch=version)
    except OSError as e:
        if not _precondition_failed(e):
            raise
        fs.invalidate_cache(path)
        try:
            now = fs.cat_file(path)
        except FileNotFoundError:
            now = None
        if now == data:  # this write landed; the client retried it after a lost reply
            return
        if version is None:
            if _is_fresh_group(manifest) and _kind(now) == "group":
                return
            raise CommitConflictError(
                f"{what}: another writer created this node while this write ran; nothing of "
                f"this write is visible"
            ) from None
        raise CommitConflictError(
            f"{what}: another writer replaced the manifest while this write committed "
            f"(conditional PUT refused); nothing of this write is visible"
        ) from None
    finally:
        fs.invalidate_cache(path)


def named_error(store: Store, e: OSError, action: str, path: str) -> OSError:
    """``e`` re-created as the same exception type with a message naming the URL."""
    url = path if store.local else store.fs.unstrip_protocol(path)
    detail = e.strerror or str(e)
    if isinstance(e, PermissionError):
        msg = (
            f"{action} {url}: access denied ({detail}); check the credentials and "
            f"permissions in storage_options"
        )
    else:
        msg = f"{action} {url}: {detail}"
    code = (
        e.errno
        if e.errno is not None
        else (errno.EACCES if isinstance(e, PermissionError) else errno.ENOENT)
    )
    return type(e)(code, msg, url)


def check_bucket(store: Store) -> None:
    """See :meth:`Store.check_bucket`."""
    if store.local or getattr(store, "_bucket_ok", False):
        return
    split = getattr(store.fs, "split_path", None)
    if split is None:
        return
    try:
        bucket = split(store.root)[0]
    except Exception:  # noqa: BLE001 - not a bucket-style path
        return
    if not bucket:
        return
    try:
        store.fs.info(bucket)
    except FileNotFoundError:
        raise FileNotFoundError(
            errno.ENOENT,
            f"{store.url}: the bucket {bucket!r} does not exist (create it first, or check "
            f"the endpoint in storage_options)",
            store.url,
        ) from None
    except PermissionError as e:
        raise named_error(store, e, "cannot access the bucket of", store.root) from e
    store._bucket_ok = True  # type: ignore[attr-defined]


# ---------------------------------------------------------------- JSON helpers


def dump_json(obj: Mapping[str, Any]) -> bytes:
    """Strict JSON (no NaN/Infinity literals), compact, UTF-8."""
    return json.dumps(obj, allow_nan=False, separators=(",", ":"), ensure_ascii=False).encode(
        "utf8"
    )


def parse_json(raw: bytes, what: str) -> dict[str, Any]:
    from .arrayrecord import CorruptionError

    try:
        obj = json.loads(raw.decode("utf8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptionError(f"{what}: the manifest {MANIFEST} is not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise CorruptionError(
            f"{what}: the manifest {MANIFEST} holds a JSON {type(obj).__name__}, expected an object"
        )
    return obj


# -------------------------------------------------------------- reader cache

_READER_CACHE_SIZE = int(os.environ.get("ARRAYDS_READER_CACHE_SIZE", "256"))
_readers: OrderedDict[tuple[Any, ...], ArrayRecordReader] = OrderedDict()
_readers_lock = threading.Lock()


def shard_reader(store: Store, path: str, size: int | None = None) -> ArrayRecordReader:
    """An open :class:`arrayds.ArrayRecordReader` for ``path`` on ``store``'s file
    system, from a per-process LRU cache keyed by (protocol, storage options, path).

    ``size`` is the shard's byte size as its manifest records it (``None``: not
    recorded). On object stores a known size saves the size request (HEAD) of an
    open: the reader fetches the tail right away and raises
    :class:`arrayds.CorruptionError` naming the file if the object has another size.
    Local shards open as before (the engine reads the size itself).

    Shards are immutable and uniquely named, so a cached reader is never stale. An
    evicted reader is not closed (another thread may still be using it); it closes
    when the last reference goes. ``FileNotFoundError`` and
    :class:`arrayds.CorruptionError` from opening propagate to the caller, which
    names the array.
    """
    key = (store.token, path)
    with _readers_lock:
        r = _readers.get(key)
        if r is not None:
            _readers.move_to_end(key)
            return r
        gate = _opening.setdefault(key, threading.Lock())
    # one opener per shard: threads that need it at the same moment share one footer
    # fetch (on object stores each open is a HEAD and a ranged GET) (issue 6)
    with gate:
        with _readers_lock:
            r = _readers.get(key)
            if r is not None:
                _readers.move_to_end(key)
                return r
        url = path if store.local else store.fs.unstrip_protocol(path)
        try:
            if store.local:
                r = ArrayRecordReader(url)
            else:
                # object stores: fetch a 128 KiB tail (the postscript and, up to a few
                # thousand chunks, the whole footer) instead of the reader's 1 MiB
                # default, which would move most of a small shard per open (issue 6)
                r = ArrayRecordReader(
                    url,
                    REMOTE_SHARD_READER_OPTIONS,
                    storage_options=store.storage_options,
                    file_size=size if size else None,
                )
        except BaseException:
            with _readers_lock:
                _opening.pop(key, None)
            raise
        _count("reader_opens")
        with _readers_lock:
            _opening.pop(key, None)
            existing = _readers.get(key)
            if existing is not None:
                return existing
            _readers[key] = r
            while len(_readers) > _READER_CACHE_SIZE:
                _readers.popitem(last=False)
    return r


FOOTER_PREFETCH_SHARDS = int(os.environ.get("ARRAYDS_FOOTER_PREFETCH_SHARDS", "64"))
"""Footer prefetch on object stores: when the reads of one array or ragged array open
a second of its shard files, the footers of all its other shards are fetched in the
background, 8 at a time, so that reads spread over the shards stop paying one
round trip per shard one after another. Only for nodes with at most this many shard
files (at most this many ranged GETs of 128 KiB, once per process); larger nodes
open each shard when a read first needs it. ``ARRAYDS_FOOTER_PREFETCH_SHARDS=0``
turns the prefetch off."""

_FOOTER_THREADS = 8
_footer_queue: queue.SimpleQueue[tuple[Store, str, int | None]] = queue.SimpleQueue()
_footer_threads: list[threading.Thread] = []
_exiting = False
_prefetched: OrderedDict[tuple[Any, ...], Mapping[str, int | None]] = OrderedDict()
"""Nodes whose footers were prefetched, keyed by (store, node, id of its shard map);
the map is kept so that its id is not reused while the key is remembered."""


def _prefetch_footers(
    store: Store, node: str, opened: str, shards: Mapping[str, int | None]
) -> None:
    """After a read opened shard ``opened`` of ``node``: if another of its shards is
    already open (reads are spreading over the node) prefetch the rest, once."""
    if len(shards) > FOOTER_PREFETCH_SHARDS or _exiting:
        return
    key = (store.token, store.path(node), id(shards))
    with _readers_lock:
        if key in _prefetched:
            return
        todo = [
            (store.path(node, rel), size)
            for rel, size in shards.items()
            if rel != opened and (store.token, store.path(node, rel)) not in _readers
        ]
        if len(todo) >= len(shards) - 1:
            return  # the first shard this process opens for the node
        _prefetched[key] = shards
        while len(_prefetched) > 256:
            _prefetched.popitem(last=False)
        while len(_footer_threads) < min(_FOOTER_THREADS, len(todo)):
            # daemon threads: a prefetch still queued at exit never holds the process
            t = threading.Thread(target=_footer_worker, name="arrayds-footer", daemon=True)
            t.start()
            _footer_threads.append(t)
    for path, size in todo:
        _footer_queue.put((store, path, size))


def _footer_worker() -> None:
    while True:
        store, path, size = _footer_queue.get()
        if _exiting:
            continue
        try:
            shard_reader(store, path, size)
        except Exception:  # noqa: BLE001 - a read that needs the shard raises it, named
            pass


def _stop_prefetching() -> None:
    global _exiting
    _exiting = True


atexit.register(_stop_prefetching)


REMOTE_SHARD_READER_OPTIONS = "footer_prefetch_bytes:128K"
"""Reader options of dataset shards on remote file systems (see :func:`shard_reader`)."""

_opening: dict[tuple[Any, ...], threading.Lock] = {}
"""Per-shard locks held while a reader opens (see :func:`shard_reader`)."""

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_opening.clear)


def read_records(reader: ArrayRecordReader, records: Any) -> list[bytes]:
    """One batched engine read (decoded in parallel), counted in :func:`io_stats`."""
    out = reader.read(records)
    with _stats_lock:
        _stats["read_calls"] += 1
        _stats["records_read"] += len(out)
    return out


def read_records_into(
    reader: ArrayRecordReader, records: Any, buffers: Sequence[Any], prefix: Any = None
) -> None:
    """:func:`read_records`, decoding into caller-provided writable buffers (each
    record is ``prefix`` + its buffer's bytes; see ``ArrayRecordReader._read_into``)."""
    reader._read_into(records, buffers, prefix)
    with _stats_lock:
        _stats["read_calls"] += 1
        _stats["records_read"] += len(buffers)


def clear_reader_cache() -> None:
    """Forget every cached shard reader (they close when unreferenced) and which
    nodes had their footers prefetched."""
    with _readers_lock:
        _readers.clear()
        _prefetched.clear()


# ----------------------------------------------------------------- thread pool

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()
IO_THREADS = int(os.environ.get("ARRAYDS_IO_THREADS", str(min(8, 2 * (os.cpu_count() or 1)))))


def io_pool() -> ThreadPoolExecutor:
    """A small per-process pool that reads several shards at once (each shard is one
    batched engine call, itself decoded in parallel by the engine)."""
    global _pool
    pool = _pool
    if pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max(1, IO_THREADS), thread_name_prefix="arrayds-io")
            pool = _pool
    return pool


def _after_fork_in_child() -> None:
    global _pool, _pool_lock, _readers_lock, _stats_lock, _footer_queue
    _pool = None
    _footer_queue = queue.SimpleQueue()
    _footer_threads.clear()
    _prefetched.clear()
    _pool_lock = threading.Lock()
    _readers_lock = threading.Lock()
    _stats_lock = threading.Lock()
    _readers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
