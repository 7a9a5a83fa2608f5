"""The obstore store: S3, GCS and Azure keys through obstore (Rust ``object_store``).

:class:`ObstoreStore` serves ``s3://``, ``gs://`` and ``az://`` roots when the
``obstore`` backend is chosen (``storage_options={"backend": "obstore"}`` or
``ARRAYDS_STORAGE_BACKEND=obstore``, see :func:`arrayds.storage.store_class`; install
with ``pip install arrayds[obstore]``). Every key-addressed method of
:class:`arrayds.abc.store.Store` is one obstore call (GET, ranged GET, HEAD, PUT,
LIST, DELETE) made by obstore's own HTTP client, the GIL released. Its
compare-and-swap, :meth:`ObstoreStore.put_if_match`, is a PUT with a precondition:

* S3 and Azure: ``If-Match: <ETag>`` (``If-None-Match: *`` to create), the ETag read
  with the bytes in one GET by :meth:`ObstoreStore.get_versioned`;
* GCS: ``x-goog-if-generation-match: <generation>`` (``0`` to create).

As in :mod:`arrayds.storage.fsspec`, a refused PUT whose object now holds exactly the
bytes being written was this PUT retried after a lost reply (a success), and a
``keep`` is written with :meth:`ObstoreStore.put` before the conditional PUT.
``ARRAYDS_CONDITIONAL_COMMIT=0`` makes the puts blind (with a
:class:`arrayds.errors.BlindCommitWarning`).

The store is opened from the same ``storage_options`` as the fsspec one (s3fs:
``endpoint_url``, ``key``, ``secret``, ``token``, ``anon``,
``client_kwargs={"region_name": ...}``; gcsfs: ``token`` (``"anon"`` or a service
account file), ``endpoint_url``; adlfs: ``account_name``, ``account_key``,
``sas_token``, ``anon``); obstore reads the rest of its configuration from the
environment (``AWS_*``, ``GOOGLE_*``, ``AZURE_*``). This store serves what the
dataset layer reads and writes by key (manifests, commits, listings, deletes), every
byte of a shard read through :meth:`ObstoreStore.get_ranges` (the open's tail and
footer, the chunk ranges) and every shard written: :meth:`ObstoreStore.new_file`
yields an :class:`ObstoreUpload` (obstore's buffered writer: one PUT for an object
smaller than a part, else a multipart upload), which the ArrayRecord writer streams
the file into, so no request of a dataset's reads or writes goes through fsspec.
:attr:`ObstoreStore.storage_options` holds ``"backend": "obstore"``, so that a store
reopened from the URL and those options (the tasks of a dask write reopen theirs) is
an obstore store again; fsspec never sees it (:attr:`ObstoreStore.fs` and
:func:`arrayds.files.common.resolve_fs` drop it).

>>> from arrayds.storage import store_class
>>> store_class("s3://bucket/x", {"backend": "obstore"}).__name__
'ObstoreStore'
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import fsspec
import obstore
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import AzureStore, GCSStore, S3Store

from ..abc import store as store_contract
from ..abc.store import Keep
from ..errors import BlindCommitWarning, CorruptionError, PreconditionFailedError
from .base import BaseStore, options_token

__all__ = ["PROTOCOLS", "UPLOAD_CONCURRENCY", "ObstoreStore", "ObstoreUpload"]

PROTOCOLS = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss")
"""The fsspec protocols this store serves (S3, Google Cloud Storage, Azure Blob)."""

_GCS = ("gs", "gcs")
_AZURE = ("az", "abfs", "abfss")
_FSSPEC_NAMES = {"s3a": "s3", "gcs": "gs", "az": "abfs", "abfss": "abfs"}
"""Protocols under the name fsspec's file systems give them (their first protocol)."""

UPLOAD_CONCURRENCY = 1
"""Parts of an :class:`ObstoreUpload` in flight at once: one part uploads while the
engine fills the next, so an upload holds at most two parts of
:data:`arrayds.abc.store.UPLOAD_PART_BYTES` (obstore's default, 12, would hold 13)."""


class ObstoreUpload:
    """An :class:`arrayds.abc.store.Upload` through obstore's buffered writer
    (``obstore.open_writer``, object_store's ``BufWriter``) of one object of a store:
    the bytes gather up to :data:`arrayds.abc.store.UPLOAD_PART_BYTES`; an object
    smaller than that is one PUT at :meth:`close`, a larger one a multipart upload
    whose parts leave as they fill (:data:`UPLOAD_CONCURRENCY`) and which
    :meth:`close` completes. :meth:`abort` puts nothing and aborts a multipart upload
    begun (obstore aborts from the ``with`` exit of its writer on an exception: it has
    no ``abort`` method). After :meth:`close` was called (whether or not it raised)
    :meth:`abort` does nothing: obstore's writer is gone then.

    ``state``: ``"open"``, ``"closed"`` (:meth:`close` called) or ``"aborted"``."""

    def __init__(self, client: Any, key: str, url: str) -> None:
        self.url = url
        self.state = "open"
        self.file = obstore.open_writer(
            client,
            key,
            buffer_size=store_contract.UPLOAD_PART_BYTES,
            max_concurrency=UPLOAD_CONCURRENCY,
        )

    def write(self, data: Any) -> None:
        self.file.write(data)

    def close(self) -> None:
        self.state = "closed"
        self.file.close()

    def abort(self) -> None:
        if self.state != "open":
            return
        self.state = "aborted"
        stop = RuntimeError("upload aborted")
        self.file.__exit__(type(stop), stop, None)


def _s3_store(bucket: str, prefix: str, opts: Mapping[str, Any]) -> S3Store:
    client = dict(opts.get("client_kwargs") or {})
    cfg: dict[str, Any] = {}
    endpoint = opts.get("endpoint_url") or client.get("endpoint_url")
    if endpoint:
        cfg["endpoint"] = endpoint
    for ours, theirs in (("key", "access_key_id"), ("secret", "secret_access_key")):
        if opts.get(ours):
            cfg[theirs] = opts[ours]
    if opts.get("token"):
        cfg["session_token"] = opts["token"]
    if opts.get("anon"):
        cfg["skip_signature"] = True
    region = client.get("region_name") or os.environ.get("AWS_DEFAULT_REGION")
    cfg["region"] = region or os.environ.get("AWS_REGION") or "us-east-1"
    return S3Store(
        bucket,
        prefix=prefix or None,
        config=cfg,
        client_options={"allow_http": str(endpoint or "").startswith("http://")},
    )


def _gcs_store(bucket: str, prefix: str, opts: Mapping[str, Any]) -> GCSStore:
    endpoint = opts.get("endpoint_url") or os.environ.get("STORAGE_EMULATOR_HOST")
    token = opts.get("token")
    cfg: dict[str, Any] = {}
    if token == "anon" or endpoint:
        # an anonymous client (or an emulator): a key that names the endpoint and
        # turns OAuth off, as object_store reads it
        key: dict[str, Any] = {"disable_oauth": token == "anon"}
        key.update(client_email="", private_key="", private_key_id="")
        if endpoint:
            key["gcs_base_url"] = str(endpoint).rstrip("/")
        cfg["service_account_key"] = json.dumps(key)
    elif isinstance(token, str) and os.path.isfile(token):
        cfg["service_account_path"] = token
    return GCSStore(
        bucket,
        prefix=prefix or None,
        config=cfg,
        client_options={"allow_http": str(endpoint or "").startswith("http://")},
    )


def _azure_store(container: str, prefix: str, opts: Mapping[str, Any]) -> AzureStore:
    cfg: dict[str, Any] = {}
    for ours, theirs in (
        ("account_name", "account_name"),
        ("account_key", "account_key"),
        ("sas_token", "sas_key"),
    ):
        if opts.get(ours):
            cfg[theirs] = opts[ours]
    if opts.get("anon"):
        cfg["skip_signature"] = True
    return AzureStore(container, prefix=prefix or None, config=cfg)


class ObstoreStore(BaseStore):
    """A root on S3, GCS or Azure served by obstore (see the module docstring)."""

    local = False
    backend = "obstore"

    def __init__(
        self, url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
    ):
        opts = {k: v for k, v in (storage_options or {}).items() if k != "backend"}
        super().__init__(url, opts)
        if self.protocol not in PROTOCOLS:
            raise ValueError(
                f"{self.url}: the obstore backend serves {', '.join(PROTOCOLS)} URLs, not "
                f"{self.protocol}://; use the fsspec backend"
            )
        # kept with the backend: a store reopened from (url, storage_options), as the
        # tasks of a dask write reopen theirs, is again an obstore store
        self.storage_options = {**opts, "backend": self.backend}
        self.token = (self.protocol, options_token(self.storage_options))
        bucket, _, prefix = self.root.strip("/").partition("/")
        self.bucket = bucket
        self.prefix = prefix
        self._client: Any = None
        self._pid = -1

    def locate(self, url: str) -> tuple[str, str]:
        """The root path and protocol of ``url`` as fsspec names them (``s3a://`` is
        ``s3``, ``gcs://`` ``gs``, ``az://`` ``abfs``), without opening fsspec's file
        system: obstore needs none, so s3fs, gcsfs and adlfs need not be installed.
        :attr:`fs` opens it for a caller that asks for it."""
        protocol, path = fsspec.core.split_protocol(url)
        protocol = protocol or "file"
        return self.normalize_root(path), _FSSPEC_NAMES.get(protocol, protocol)

    @functools.cached_property
    def fs(self) -> Any:
        """The fsspec file system of the root (opened when first asked for: not by
        this store's own reads and writes)."""
        opts = {k: v for k, v in self.storage_options.items() if k != "backend"}
        return fsspec.filesystem(self.protocol, **opts)

    @property
    def canonical_url(self) -> str:
        return f"{self.protocol}://{self.root}"

    def url_of(self, key: str, name: str = "") -> str:
        return f"{self.protocol}://{self.path(key, name)}"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"], state["_pid"] = None, -1  # rebuilt where unpickled
        return state

    @property
    def client(self) -> Any:
        """The obstore store of the root (one per process: rebuilt after a fork)."""
        if self._client is None or self._pid != os.getpid():
            make = (
                _gcs_store
                if self.protocol in _GCS
                else _azure_store
                if self.protocol in _AZURE
                else _s3_store
            )
            self._client = make(self.bucket, self.prefix, self.storage_options)
            self._pid = os.getpid()
        return self._client

    def _version(self, meta: Mapping[str, Any]) -> Any:
        return meta.get("version") if self.protocol in _GCS else meta.get("e_tag")

    def check_bucket(self) -> None:
        """``FileNotFoundError`` naming the URL if the root's bucket does not exist
        (checked once per store, when a key is missing)."""
        if getattr(self, "_bucket_ok", False):
            return
        bucket_store = (
            _gcs_store
            if self.protocol in _GCS
            else _azure_store
            if self.protocol in _AZURE
            else _s3_store
        )(self.bucket, "", self.storage_options)
        try:
            obstore.list_with_delimiter(bucket_store, None)
        except Exception as e:  # noqa: BLE001 - a listing of no bucket: HTTP 404
            if not (isinstance(e, FileNotFoundError) or "404 Not Found" in str(e)):
                raise
            raise FileNotFoundError(
                errno.ENOENT,
                f"{self.url}: the bucket {self.bucket!r} does not exist (create it first, "
                f"or check the endpoint in storage_options)",
                self.url,
            ) from None
        self._bucket_ok = True

    # -- reading

    def get(self, key: str) -> bytes | None:
        return self.get_versioned(key)[0]

    def get_versioned(self, key: str) -> tuple[bytes | None, Any]:
        """The bytes at ``key`` and their version (the ETag, on GCS the generation),
        from one GET."""
        try:
            result = obstore.get(self.client, key)
            data = bytes(result.bytes())
        except FileNotFoundError:
            self.check_bucket()
            return None, None
        return data, self._version(result.meta)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        if length <= 0:
            self.size(key)  # FileNotFoundError if there is no object
            return b""
        try:
            return bytes(obstore.get_range(self.client, key, start=start, length=length))
        except FileNotFoundError as e:
            raise FileNotFoundError(errno.ENOENT, str(e), self.display(key)) from None
        except Exception:  # noqa: BLE001 - a range past the end is HTTP 416
            if start >= self.size(key):
                return b""
            raise

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[Any]:
        """The bytes of each ``(begin, end)`` range of ``key`` (see
        :meth:`arrayds.abc.store.Store.get_ranges`), fetched concurrently with obstore's
        ``get_ranges`` as planned (:mod:`arrayds.storage.coalesce` merged them already); a range
        past the object's end is cut there (the caller checks lengths:
        :func:`arrayds.storage.coalesce.fetch_spans`), and a reply longer than asked is
        :class:`arrayds.CorruptionError`. Each response is obstore's ``Bytes``, a
        bytes-like buffer over the memory the response arrived in (not copied: compare
        it with ``==`` or take ``memoryview`` of it; ``bytes(r)`` copies)."""
        ranges = [(int(b), int(e)) for b, e in ranges]
        for b, e in ranges:
            if b < 0 or e < b:
                raise ValueError(f"{self.display(key)}: a bad byte range [{b}, {e})")
        size: int | None = None
        while True:
            cut = [(b, e if size is None else max(b, min(e, size))) for b, e in ranges]
            wanted = [(b, e) for b, e in cut if e > b]
            try:
                got = (
                    obstore.get_ranges(
                        self.client,
                        key,
                        starts=[b for b, _ in wanted],
                        ends=[e for _, e in wanted],
                        coalesce=0,  # the requests are arrayds' coalesced plan already
                    )
                    if wanted
                    else []
                )
                break
            except FileNotFoundError as e:
                raise FileNotFoundError(errno.ENOENT, str(e), self.display(key)) from None
            except Exception:  # noqa: BLE001 - a range past the end: cut at the size, once
                if size is not None:
                    raise
                head = self._head(key)
                if head is None:
                    raise FileNotFoundError(
                        errno.ENOENT, "no such object", self.display(key)
                    ) from None
                size = int(head["size"])
        out: list[Any] = []
        it = iter(got)
        for b, e in cut:
            # obstore's Bytes: a buffer over the response (no copy into a bytes object)
            data = next(it) if e > b else b""
            if len(data) > e - b:
                raise CorruptionError(
                    f"{self.display(key)}: asked for bytes [{b}, {e}) and got {len(data)} bytes"
                )
            out.append(data)
        return out

    def _head(self, key: str) -> Mapping[str, Any] | None:
        try:
            return obstore.head(self.client, key)  # type: ignore[return-value]
        except FileNotFoundError:
            return None

    def exists(self, key: str, name: str = "") -> bool:
        """Whether an object is at the key, or objects below it (a folder)."""
        key = f"{key}/{name}" if name and key else key or name
        if key and self._head(key) is not None:
            return True
        for chunk in obstore.list(self.client, key or None, chunk_size=1):
            return len(chunk) > 0
        return False

    def size(self, key: str) -> int:
        meta = self._head(key)
        if meta is None:
            raise FileNotFoundError(errno.ENOENT, "no such object", self.display(key))
        return int(meta["size"])

    def list_dir(self, prefix: str) -> list[str]:
        found = obstore.list_with_delimiter(self.client, prefix or None)
        return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in found["common_prefixes"])

    def list(self, prefix: str) -> list[tuple[str, int, float | None]]:
        out: list[tuple[str, int, float | None]] = []
        for chunk in obstore.list(self.client, prefix or None, chunk_size=1000):
            for m in chunk:
                t = m.get("last_modified")
                out.append((m["path"], int(m["size"]), None if t is None else t.timestamp()))
        return sorted(out)

    # -- writing

    def put(self, key: str, data: bytes) -> None:
        obstore.put(self.client, key, bytes(data), use_multipart=False)

    def put_if_match(
        self,
        key: str,
        data: bytes,
        version: Any,
        keep: Keep | None = None,
        flush: Iterable[str] = (),
    ) -> None:
        """See the module docstring. ``keep``: :meth:`put` of ``keep.data`` at
        ``keep.key`` (if ``version`` is not ``ABSENT``) before the conditional PUT.
        ``flush``: nothing to do (:meth:`flush`)."""
        if keep is not None and version is not None:
            self.put(keep.key, keep.data)
        if os.environ.get("ARRAYDS_CONDITIONAL_COMMIT", "1").strip().lower() in (
            "0",
            "false",
            "no",
        ):
            warnings.warn(
                f"{self.url}: commits are not compare-and-swap (ARRAYDS_CONDITIONAL_COMMIT=0 "
                f"turns the conditional PUT off): let one writer at a time write to a node",
                BlindCommitWarning,
                stacklevel=2,
            )
            self.put(key, data)
            return
        if version is None:
            mode: Any = "create"
        elif self.protocol in _GCS:
            mode = {"version": str(version)}
        else:
            mode = {"e_tag": str(version)}
        try:
            obstore.put(self.client, key, bytes(data), mode=mode, use_multipart=False)
        except (AlreadyExistsError, PreconditionError):
            now, _ = self.get_versioned(key)
            if now == data:  # this PUT landed; the client retried it after a lost reply
                return
            raise PreconditionFailedError(
                errno.EAGAIN,
                f"{self.display(key)}: conditional PUT refused (the object "
                f"{'was created' if version is None else 'changed'} since it was read)",
                self.path(key),
            ) from None

    @contextlib.contextmanager
    def new_file(self, key: str, *, defer_sync: bool = False) -> Iterator[ObstoreUpload]:
        """Yields an :class:`ObstoreUpload` of ``key``, which
        :class:`arrayds.ArrayRecordWriter` takes as its destination: the engine streams
        the file into it and the writer's ``close()`` completes it (the object appears
        then, whole and durable: ``defer_sync`` changes nothing). On an exception an
        upload not completed is aborted (no object, no pending multipart upload) and
        an object completed is deleted. A block that ends normally without the upload
        closed (never written, or aborted) is a ``RuntimeError``: nothing is under
        ``key`` then.

        >>> from arrayds.storage import get_store
        >>> st = get_store("s3://bucket/x", {"backend": "obstore", "anon": True})
        >>> with st.new_file("a/c/s.array_record") as upload:
        ...     upload.abort()  # nothing was sent: no request is made
        Traceback (most recent call last):
        ...
        RuntimeError: s3://bucket/x/a/c/s.array_record: the upload was aborted when ...
        """
        upload = ObstoreUpload(self.client, key, self.display(key))
        try:
            yield upload
        except BaseException:
            with contextlib.suppress(Exception):
                upload.abort()
            if upload.state == "closed":  # completed (or its completing reply lost)
                with contextlib.suppress(Exception):
                    self.delete([key])
            raise
        if upload.state != "closed":
            state = upload.state
            upload.abort()
            raise RuntimeError(
                f"{upload.url}: the upload was {state} when the new_file block ended "
                f"(close the writer inside it): nothing is stored"
            )

    def flush(self, keys: Iterable[str]) -> None:
        """Nothing to do: an object exists once its PUT (or upload) is acknowledged."""

    def delete(self, keys: Iterable[str]) -> None:
        keys = list(keys)
        if not keys:
            return
        try:
            obstore.delete(self.client, keys)
        except FileNotFoundError:  # GCS and Azure refuse to delete what is missing
            for k in keys:
                with contextlib.suppress(FileNotFoundError):
                    obstore.delete(self.client, k)

    def delete_prefix(self, prefix: str) -> None:
        keys = [k for k, _, _ in self.list(prefix)]
        if prefix and self._head(prefix) is not None:
            keys.append(prefix)
        self.delete(keys)
