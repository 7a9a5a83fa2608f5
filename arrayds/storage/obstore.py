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
environment (``AWS_*``, ``GOOGLE_*``, ``AZURE_*``). Shard files are still written by
the ArrayRecord engine through fsspec with those options
(:meth:`ObstoreStore.new_file`, :attr:`ObstoreStore.storage_options`, which never
holds ``backend``); this store serves what the dataset layer reads and writes by key
(manifests, commits, listings, deletes) and every byte of a shard read through
:meth:`ObstoreStore.get_ranges` (the open's tail and footer, the chunk ranges).

>>> from arrayds.storage import store_class
>>> store_class("s3://bucket/x", {"backend": "obstore"}).__name__
'ObstoreStore'
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import obstore
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import AzureStore, GCSStore, S3Store

from ..abc.store import Keep
from ..errors import BlindCommitWarning, CorruptionError, PreconditionFailedError
from .base import BaseStore, options_token

__all__ = ["PROTOCOLS", "ObstoreStore"]

PROTOCOLS = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss")
"""The fsspec protocols this store serves (S3, Google Cloud Storage, Azure Blob)."""

_GCS = ("gs", "gcs")
_AZURE = ("az", "abfs", "abfss")


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
        self.token = (self.protocol, options_token({**opts, "backend": self.backend}))
        bucket, _, prefix = self.root.strip("/").partition("/")
        self.bucket = bucket
        self.prefix = prefix
        self._client: Any = None
        self._pid = -1

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
    def new_file(self, key: str, *, defer_sync: bool = False) -> Iterator[str]:
        """Yields the object's URL for the engine to stream to through fsspec (with
        :attr:`storage_options`); the object exists once the engine closed it. On an
        exception the object is removed if the engine had completed it. An object is
        durable once written: ``defer_sync`` changes nothing."""
        try:
            yield self.fs.unstrip_protocol(self.path(key))
        except BaseException:
            with contextlib.suppress(Exception):
                self.delete([key])
            raise
        finally:
            self.fs.invalidate_cache(self.path(key))

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
