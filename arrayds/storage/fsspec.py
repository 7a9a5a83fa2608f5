"""The fsspec object-store store: whole-object writes, ranged reads, conditional puts.

:class:`FsspecStore` keeps each key as one object of an fsspec file system
(``memory://``, S3, GCS, Azure, HTTP, ...). It uses no rename, no append and no
in-place edit: an object is written whole (:meth:`FsspecStore.put`) or streamed by the
engine and completed when it closes (:meth:`FsspecStore.new_file`), and read whole or
by range. Its compare-and-swap, :meth:`FsspecStore.put_if_match`, is

* ``memory://`` (one process): a check and a write under a process-wide lock;
* S3 (:data:`CONDITIONAL_PROTOCOLS`): a PUT with ``If-Match: <ETag>`` (``If-None-Match:
  *`` to create), the ETag being the version :meth:`FsspecStore.get_versioned` read;
* GCS: an upload with ``ifGenerationMatch=<generation>`` (``0`` to create), the
  generation read with the bytes in one GET (:mod:`arrayds.storage.gcs`);
* any other file system: a blind whole-object PUT, after a
  :class:`arrayds.errors.BlindCommitWarning` (once per protocol and reason).

A refused conditional PUT whose object now holds exactly the bytes being written was
this PUT, retried by the client after a lost reply: a success, not a conflict. The
object a conditional put replaces is kept (its ``keep`` argument) by a whole-object
PUT of its bytes before the conditional one (``memory://``: under the lock, once the
version matched).

>>> st = FsspecStore("memory://fsspec-doc")
>>> st.put_if_match("k", b"1", None)
>>> data, v = st.get_versioned("k")
>>> st.put_if_match("k", b"2", v); st.get_range("k", 0, 5)
b'2'
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from ..abc.store import Keep
from ..errors import BlindCommitWarning, PreconditionFailedError
from . import gcs
from .base import BaseStore
from .local import digest

__all__ = [
    "CONDITIONAL_PROTOCOLS",
    "PROCESS_LOCAL_PROTOCOLS",
    "S3_PROTOCOLS",
    "FsspecStore",
    "conditional",
    "precondition_failed",
]

S3_PROTOCOLS = ("s3", "s3a")
"""fsspec protocols served by s3fs."""

CONDITIONAL_PROTOCOLS = (*S3_PROTOCOLS, *gcs.PROTOCOLS)
"""fsspec protocols whose PUT can be made conditional: S3 (s3fs passes If-Match /
If-None-Match to PutObject) and Google Cloud Storage (gcsfs; ``ifGenerationMatch``,
see :func:`arrayds.storage.gcs.gcs_put`). ``ARRAYDS_CONDITIONAL_COMMIT=0`` turns the
conditional PUT off for compatible servers that reject these preconditions (puts are
then blind, with a :class:`BlindCommitWarning`)."""

PROCESS_LOCAL_PROTOCOLS = ("memory",)
"""fsspec file systems that live in one process (``memory://``): a compare-and-swap
there is a check and a write under a process-wide lock."""

_process_lock = threading.Lock()

warned_blind: set[str] = set()
"""The (protocol, reason) pairs a :class:`BlindCommitWarning` was issued for."""


def _warn_blind(store: FsspecStore, why: str) -> None:
    key = f"{store.protocol}:{why}"
    if key in warned_blind:
        return
    warned_blind.add(key)
    warnings.warn(
        f"{store.url}: commits to {store.protocol}:// are not compare-and-swap ({why}): "
        f"two writers committing to the same node at once can lose one of the commits; "
        f"let one writer at a time write to a node",
        BlindCommitWarning,
        stacklevel=5,
    )


def conditional(store: FsspecStore, warn: bool = True) -> bool:
    """Whether conditional puts to ``store`` are checked by the server; warns once
    when they cannot be (unless ``warn`` is false: a read asks only which version
    token to take)."""
    if os.environ.get("ARRAYDS_CONDITIONAL_COMMIT", "1").strip().lower() in ("0", "false", "no"):
        if warn:
            _warn_blind(store, "ARRAYDS_CONDITIONAL_COMMIT=0 turns the conditional PUT off")
        return False
    if store.protocol in CONDITIONAL_PROTOCOLS:
        return True
    if warn:
        _warn_blind(store, "this file system offers no conditional write")
    return False


def precondition_failed(e: BaseException) -> bool:
    """Whether ``e`` is a refused conditional PUT: s3fs raises FileExistsError for
    If-None-Match and a plain OSError for If-Match; gcsfs raises FileExistsError for
    every HTTP 412 (``ifGenerationMatch`` not met)."""
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


def listed_mtime(info: Mapping[str, Any]) -> float | None:
    """The modification time (POSIX seconds) in an fsspec listing entry, whatever
    the file system calls it: a number (``mtime``, memory's ``created``), a datetime
    (S3's ``LastModified``) or an ISO string (GCS's ``updated``); ``None`` if none.

    >>> listed_mtime({"updated": "1970-01-01T00:01:00Z"}), listed_mtime({"created": 5})
    (60.0, 5.0)
    """
    for key in ("mtime", "LastModified", "last_modified", "updated", "created", "modified"):
        v = info.get(key)
        if v is None:
            continue
        if isinstance(v, (int, float)):
            return float(v)
        ts = getattr(v, "timestamp", None)
        if callable(ts):
            return float(ts())
        try:
            return datetime.fromisoformat(str(v).replace("Z", "+00:00")).timestamp()
        except ValueError:
            continue
    return None


class FsspecStore(BaseStore):
    """A root on an fsspec file system other than the local one (see the module
    docstring)."""

    local = False

    def check_bucket(self) -> None:
        """On bucket-based object stores (S3, GCS, Azure): ``FileNotFoundError``
        naming the URL if the root's bucket does not exist, ``PermissionError`` if
        the credentials are refused. Checked once per store."""
        if getattr(self, "_bucket_ok", False):
            return
        split = getattr(self.fs, "split_path", None)
        if split is None:
            return
        try:
            bucket = split(self.root)[0]
        except Exception:  # noqa: BLE001 - not a bucket-style path
            return
        if not bucket:
            return
        try:
            self.fs.info(bucket)
        except FileNotFoundError:
            raise FileNotFoundError(
                errno.ENOENT,
                f"{self.url}: the bucket {bucket!r} does not exist (create it first, or "
                f"check the endpoint in storage_options)",
                self.url,
            ) from None
        except PermissionError as e:
            raise self.named_error(e, "cannot access the bucket of", self.root) from e
        self._bucket_ok = True

    # -- reading

    def get(self, key: str) -> bytes | None:
        p = self.path(key)
        try:
            return bytes(self._whole_object(p))
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            self.check_bucket()  # a missing bucket is an error
            return None
        except PermissionError as e:
            raise self.named_error(e, "cannot read", p) from e

    def get_versioned(self, key: str) -> tuple[bytes | None, Any]:
        """The bytes at ``key`` and their version: the object generation on GCS (read
        with the bytes in one GET), the ETag on S3 (a HEAD, then one GET of the whole
        object), a digest of the bytes elsewhere."""
        p = self.path(key)
        fs = self.fs
        try:
            if self.protocol in gcs.PROTOCOLS and conditional(self, warn=False):
                data, version = gcs.gcs_read(fs, p)
            elif self.protocol in CONDITIONAL_PROTOCOLS and conditional(self, warn=False):
                fs.invalidate_cache(p)
                try:
                    info = fs.info(p)
                except FileNotFoundError:
                    info = {}
                version = info.get("ETag")
                data = None if version is None else self._whole_object(p)
            else:
                try:
                    data = self._whole_object(p)
                except IsADirectoryError:
                    data = None
                version = None if data is None else digest(data)
        except FileNotFoundError:
            data, version = None, None
        except PermissionError as e:
            raise self.named_error(e, "cannot read", p) from e
        if data is None:
            self.check_bucket()
            return None, None
        return bytes(data), version

    def _whole_object(self, path: str) -> bytes:
        """The bytes of the object ``path``: on S3 in one GET (:func:`_s3_whole_object`),
        elsewhere with the file system's ``cat_file``."""
        if self.protocol in S3_PROTOCOLS:
            return _s3_whole_object(self.fs, path)
        return self.fs.cat_file(path)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        p = self.path(key)
        if length <= 0:
            self.size(key)  # FileNotFoundError if there is no object
            return b""
        try:
            return bytes(self.fs.cat_file(p, start=start, end=start + length))
        except PermissionError as e:
            raise self.named_error(e, "cannot read", p) from e
        except FileNotFoundError:
            raise
        except Exception:  # noqa: BLE001 - s3fs: OSError, gcsfs: HttpError
            if start >= self.size(key):  # a range past the end is HTTP 416
                return b""
            raise

    def exists(self, key: str, name: str = "") -> bool:
        return bool(self.fs.exists(self.path(key, name)))

    def size(self, key: str) -> int:
        return int(self.fs.size(self.path(key)))

    def list_dir(self, prefix: str) -> list[str]:
        base = self.path(prefix)
        try:
            self.fs.invalidate_cache(base)  # see other processes' new folders
            found = self.fs.ls(base, detail=True)
        except FileNotFoundError:
            return []
        finally:
            # keep no listing cached: s3fs answers info() from a cached listing, which
            # would hide objects that other processes write later
            self.fs.invalidate_cache(base)
        return sorted(
            str(e["name"]).rstrip("/").rsplit("/", 1)[-1]
            for e in found
            if e.get("type") == "directory"
        )

    def list(self, prefix: str) -> list[tuple[str, int, float | None]]:
        base = self.path(prefix)
        root = self.path("")
        # never a cached listing: gc's safety beside writers rests on a listing that
        # sees every object written before it began (arrayds.nodes.pending)
        self.fs.invalidate_cache(base)
        self._forget_listings_below(base)
        try:
            found = self.fs.find(base, detail=True)
        except FileNotFoundError:
            return []
        finally:
            self.fs.invalidate_cache(base)
            self._forget_listings_below(base)
        cut = len(root.rstrip("/")) + 1 if root else 0
        out: list[tuple[str, int, float | None]] = []
        for name, info in found.items():
            out.append((str(name)[cut:], int(info.get("size") or 0), listed_mtime(info)))
        return sorted(out)

    def _forget_listings_below(self, base: str) -> None:
        """Drop the folder listings ``find`` cached below ``base``: ``invalidate_cache``
        drops only ``base`` and its parents, and a cached listing of a shard folder
        would make a file written after it look missing (``size``, ``exists``)."""
        cache = getattr(self.fs, "dircache", None)
        if cache is None:
            return
        below = self.fs._strip_protocol(base).rstrip("/") + "/"
        for folder in [d for d in list(cache) if str(d).startswith(below)]:
            cache.pop(folder, None)

    # -- writing

    def put(self, key: str, data: bytes) -> None:
        p = self.path(key)
        try:
            self.fs.pipe_file(p, data)
        except (PermissionError, FileNotFoundError) as e:
            raise self.named_error(e, "cannot write", p) from e
        finally:
            self.fs.invalidate_cache(p)

    def put_if_match(
        self,
        key: str,
        data: bytes,
        version: Any,
        keep: Keep | None = None,
        flush: Iterable[str] = (),
    ) -> None:
        """See the module docstring for how each file system checks ``version``.
        ``keep``: :meth:`put` of ``keep.data`` at ``keep.key`` (if ``version`` is not
        ``ABSENT``), before the conditional put; ``memory://``: under its lock, once
        the version matched. ``flush``: nothing to do (:meth:`flush`)."""
        p = self.path(key)
        in_process = self.protocol in PROCESS_LOCAL_PROTOCOLS
        if keep is not None and version is not None and not in_process:
            self.put(keep.key, keep.data)
        try:
            if in_process:
                with _process_lock:
                    try:
                        current: bytes | None = self.fs.cat_file(p)
                    except FileNotFoundError:
                        current = None
                    if (None if current is None else digest(current)) != version:
                        raise PreconditionFailedError(
                            errno.EAGAIN, f"{self.display(key)}: changed since it was read", p
                        )
                    if keep is not None and version is not None:
                        self.fs.pipe_file(self.path(keep.key), keep.data)
                    self.fs.pipe_file(p, data)
            elif conditional(self):
                self._conditional_put(key, p, data, version)
            else:
                self.fs.pipe_file(p, data)
        except (PermissionError, FileNotFoundError) as e:
            raise self.named_error(e, "cannot commit", p) from e

    def _conditional_put(self, key: str, p: str, data: bytes, version: Any) -> None:
        fs = self.fs
        try:
            if self.protocol in gcs.PROTOCOLS:
                gcs.gcs_put(fs, p, data, version or "0")
            elif version is None:
                fs.pipe_file(p, data, mode="create")
            else:
                fs.pipe_file(p, data, IfMatch=version)
        except OSError as e:
            if not precondition_failed(e):
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
                f"{self.display(key)}: conditional PUT refused (the object "
                f"{'was created' if version is None else 'changed'} since it was read)",
                p,
            ) from None
        finally:
            fs.invalidate_cache(p)

    @contextlib.contextmanager
    def new_file(self, key: str, *, defer_sync: bool = False) -> Iterator[str]:
        """Yields the object's URL for the engine to stream to (with this store's
        ``storage_options``); the object exists once the engine closed it. On an
        exception the object is removed if the engine had completed it. An object is
        durable once written: ``defer_sync`` changes nothing."""
        p = self.path(key)
        try:
            yield self.fs.unstrip_protocol(p)
        except BaseException:
            with contextlib.suppress(Exception):
                self.delete([key])
            raise
        finally:
            self.fs.invalidate_cache(p)

    def flush(self, keys: Iterable[str]) -> None:
        """Nothing to do: an object exists once its PUT (or upload) is acknowledged."""

    def delete(self, keys: Iterable[str]) -> None:
        paths = [self.path(k) for k in keys]
        if not paths:
            return
        try:
            self.fs.rm(paths)
        except FileNotFoundError:
            for p in paths:
                with contextlib.suppress(FileNotFoundError):
                    self.fs.rm(p)

    def delete_prefix(self, prefix: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(self.path(prefix), recursive=True)


def _s3_whole_object(fs: Any, path: str) -> bytes:
    """The bytes of the S3 object ``path`` in one GET. s3fs's whole-object read asks
    for the object's size (a HEAD) before its GET; an open range (``bytes=0-``) is one
    GET. An empty object refuses any range (HTTP 416, ``OSError`` EINVAL from s3fs):
    then the whole-object read. ``FileNotFoundError`` and ``PermissionError`` pass."""
    try:
        return fs.cat_file(path, start=0)
    except OSError as e:
        if type(e) is not OSError or e.errno != errno.EINVAL:
            raise
        return fs.cat_file(path)
