"""The storage contract: what the dataset layer needs of a place to keep bytes.

A :class:`Store` is one root (a local folder, a bucket prefix, ``memory://x``) holding
objects under ``/``-separated keys relative to that root (``"a/b/arrayds.json"``,
``"a/c/<id>-0.array_record"``). It knows nothing of manifests, nodes or the ArrayRecord
format: it gets, puts, lists and deletes bytes, and offers one atomic primitive, the
conditional put (:meth:`Store.put_if_match`), on which :mod:`arrayds.nodes.commit`
builds every commit. Implementations: :mod:`arrayds.storage.local` (a local file
system: temporary file, fsync, rename; the compare-and-swap under a folder lock) and
:mod:`arrayds.storage.fsspec` (fsspec object stores: S3 ``If-Match``, GCS generations,
``memory://`` under a process lock, other file systems blind). The conformance suite
every implementation passes is ``tests/conformance/store.py``; the implementation
that serves a URL is picked by :func:`arrayds.storage.store_class` (by protocol;
:func:`arrayds.storage.register_store` adds others).

A *version* is an opaque token returned with the bytes by :meth:`Store.get_versioned`;
:data:`ABSENT` is the version of a key that holds nothing. A conditional put can also
keep the object it replaces under another key (:class:`Keep`: a commit keeps the head it
replaces as a version file of the node's history).

>>> from arrayds.storage import get_store
>>> st = get_store("memory://abc-doc")
>>> st.put_if_match("k", b"1", ABSENT)
>>> data, v = st.get_versioned("k")
>>> st.put_if_match("k", b"2", v)
>>> st.get_versioned("k")[0]
b'2'
>>> st.put_if_match("k", b"3", st.get_versioned("k")[1], keep=Keep("old/k", b"2"))
>>> st.get("k"), st.get("old/k")
(b'3', b'2')
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol, runtime_checkable

__all__ = ["ABSENT", "UPLOAD_PART_BYTES", "Entry", "Keep", "Store", "Upload", "Version"]

Version = Any
"""An opaque version token of one object (an S3 ETag, a GCS generation, a digest of
the bytes); compare only with what the same store returned."""

ABSENT: Version = None
"""The version of a key that holds no object: :meth:`Store.put_if_match` with it
creates the object only if there is none."""

Entry = tuple[str, int, "float | None"]
"""One object of a listing: (key, size in bytes, modification time or None)."""


UPLOAD_PART_BYTES = 32 << 20
"""The part size of streamed uploads (:class:`Upload`; the fsspec writer's S3 multipart
parts and GCS resumable chunks, the obstore store's multipart parts): an upload holds
about one part in memory (the obstore store's at most two: one uploading while the
next fills), not the whole object. An object smaller than this is one PUT."""


@runtime_checkable
class Upload(Protocol):
    """A streamed upload of one object, as :meth:`Store.new_file` may yield it: the
    ArrayRecord writer (:class:`arrayds.ArrayRecordWriter`) writes the file's bytes
    to it in order and then either completes it (:meth:`close`) or cancels it
    (:meth:`abort`). Nothing is visible under the key before :meth:`close` returns."""

    url: str
    """The URL of the object (for messages)."""

    def write(self, data: Any) -> Any:
        """Append the bytes-like ``data`` (uploading a part when one is full)."""

    def close(self) -> None:
        """Complete the upload: the object appears now, whole and durable."""

    def abort(self) -> None:
        """Cancel the upload: no object (not even an empty one) appears and no
        upload is left pending (an S3 multipart upload is aborted). Called at most
        once, instead of :meth:`close` or after a :meth:`close` that raised (then it
        cancels what is left to cancel, if anything)."""


class Keep(NamedTuple):
    """What :meth:`Store.put_if_match` keeps of the object it replaces."""

    key: str
    """Where the replaced object stays (a key of the same store)."""
    data: bytes
    """The replaced object's bytes, those read with the version the put requires: what
    a store that cannot keep the object itself (by a hard link) writes at ``key``."""


@runtime_checkable
class Store(Protocol):
    """One storage root. Keys are ``/``-separated, relative to the root, never start
    with ``/`` and never contain ``..``; ``""`` is the root itself."""

    url: str
    """The URL the store was opened with (for messages)."""
    protocol: str
    """The fsspec protocol (``"file"``, ``"memory"``, ``"s3"``, ``"gs"``, ...)."""
    storage_options: dict[str, Any]
    """The fsspec options it was opened with."""
    local: bool
    """Whether keys are files of the local file system (the engine then maps them)."""
    token: tuple[str, str]
    """(protocol, options) identifying the file system, for caches across handles."""

    @property
    def canonical_url(self) -> str:
        """The root as a full URL, stable across processes (used in dask tokens)."""

    def path(self, key: str) -> str:
        """The file-system path of ``key`` (what fsspec or ``os`` is given)."""

    def url_of(self, key: str) -> str:
        """A URL of ``key`` the ArrayRecord engine opens (a plain path locally)."""

    def display(self, key: str) -> str:
        """``url`` for the root, ``url/key`` otherwise (for messages)."""

    # -- reading

    def get(self, key: str) -> bytes | None:
        """The bytes at ``key``, or ``None`` if there is no object there."""

    def get_versioned(self, key: str) -> tuple[bytes | None, Version]:
        """The bytes at ``key`` and their version (``(None, ABSENT)`` if none)."""

    def get_range(self, key: str, start: int, length: int) -> bytes:
        """``length`` bytes of ``key`` from ``start`` (fewer at the end)."""

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(begin, end)`` range of ``key``, one bytes object per
        range, fetched concurrently (the requests of one coalesced read,
        :mod:`arrayds.storage.coalesce`); a response may be shorter than asked at the end of
        the object (the caller checks lengths)."""

    def exists(self, key: str) -> bool:
        """Whether an object (or, on file systems, a folder) is at ``key``."""

    def size(self, key: str) -> int:
        """The size in bytes of the object at ``key`` (``FileNotFoundError`` if none)."""

    def list_dir(self, prefix: str) -> list[str]:
        """The names (sorted) of the folders directly below ``prefix``."""

    def list(self, prefix: str) -> list[Entry]:
        """Every object below ``prefix`` (recursively), as (key, size, mtime)."""

    # -- writing

    def put(self, key: str, data: bytes) -> None:
        """Replace (or create) the object at ``key`` with ``data``, atomically (a reader
        sees the old or the new bytes) and durably (on stable storage on return)."""

    def put_if_match(
        self,
        key: str,
        data: bytes,
        version: Version,
        keep: Keep | None = None,
        flush: Iterable[str] = (),
    ) -> None:
        """:meth:`put`, only if the object at ``key`` is still ``version`` (``ABSENT``:
        only if there is none), checked atomically with the replace; else
        :class:`arrayds.errors.PreconditionFailedError` and nothing changes. Stores that
        cannot check (plain fsspec file systems) write blindly once they issued a
        :class:`arrayds.errors.BlindCommitWarning`.

        ``keep`` (ignored when ``version`` is ``ABSENT``): also keep the object being
        replaced under ``keep.key``, durably, before the new bytes become visible, so
        that a reader who sees the new object finds the old one there. An object that
        is at ``keep.key`` already may stay as it is or be written again (the keys a
        commit keeps under hold fixed bytes: a racing writer kept the same ones). The
        local store makes a hard
        link of the current file under the compare-and-swap lock (no data is written),
        or where the file system has no hard links writes ``keep.data`` there (also
        under the lock); the object stores write ``keep.data`` with :meth:`put`
        before their conditional put (``memory://``: under its lock, once the version
        matched), so a refused put may leave it written: the bytes of an object that
        was at ``key``.

        ``flush``: keys of objects written earlier (:meth:`new_file`) whose names must
        be durable before the new bytes become visible: :meth:`flush` of them, done
        where the store finds it cheapest (locally after the new bytes are synced,
        so that a journaling file system commits the names with them)."""

    def new_file(
        self, key: str, *, defer_sync: bool = False
    ) -> AbstractContextManager[str | Upload]:
        """A place for the engine to write the immutable object ``key``: yields either
        the path or URL to write to or an :class:`Upload` of the object (the obstore
        store's: the store's own client uploads it), each of which
        :class:`arrayds.ArrayRecordWriter` takes as its destination; on a clean exit
        the object is complete and durable under ``key`` (locally: a temporary name,
        fsync, rename; an :class:`Upload` must have been closed by then), on an
        exception nothing is left under ``key`` (an :class:`Upload` not completed is
        aborted).

        ``defer_sync``: the caller commits the object from this process with this
        store's :meth:`put_if_match` (its ``flush`` names the key) or :meth:`flush`,
        so the object need be durable only when those return: the local store then
        syncs its data in the background meanwhile; stores whose objects are durable
        when written ignore it."""

    def flush(self, keys: Iterable[str]) -> None:
        """Make the names of objects written earlier durable (locally: sync the folders
        that hold them; object stores: nothing to do)."""

    def delete(self, keys: Iterable[str]) -> None:
        """Remove the objects at ``keys``; missing ones are fine."""

    def delete_prefix(self, prefix: str) -> None:
        """Remove everything below ``prefix`` (a folder and its contents)."""
