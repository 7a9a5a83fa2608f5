"""Shard I/O of every node kind: the one shard writer and the per-process reader cache.

* :func:`shard_writer` / :func:`write_shard` — one immutable ArrayRecord shard, written
  through :meth:`arrayds.abc.store.Store.new_file` (a temporary file, fsync, rename, or
  a streamed upload) under a name no other write uses;
* :func:`shard_reader` / :func:`node_shard_reader` — a per-process LRU cache of open
  shard readers keyed by (file system, path): shards are immutable, so a footer is read
  once per process; on object stores the footers of the other shards a read needs are
  prefetched, and remote shards are opened and read through the store's planned
  ranges (:meth:`Store.get_ranges`, :mod:`arrayds.storage.coalesce`);
* :func:`read_shard_records` / :func:`read_shard_records_into` — batched reads of a shard's records;
* :func:`io_stats` — counters of reader opens and records read, for tests and
  diagnostics; :func:`io_pool` — the small pool that reads several shards at once
  (through :func:`arrayds.files.common.run_each`).

Node names are :mod:`arrayds.nodes.names`'; manifests are :mod:`arrayds.nodes.commit`'s.

>>> from arrayds.storage import new_store
>>> st = new_store("memory://doc-store")
>>> size = write_shard(st, "a/c/x.array_record", [b"r0", b"r1"], "")
>>> st.exists("a/c/x.array_record"), shard_reader(st, st.path("a/c/x.array_record")).num_records()
(True, 2)
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..files.reader import ArrayRecordReader
from ..files.writer import ArrayRecordWriter
from ..storage.base import BaseStore as Store

# ----------------------------------------------------------------- shard writes


@contextlib.contextmanager
def shard_writer(
    store: Store, key: str, options: str, *, defer_sync: bool = False
) -> Iterator[ArrayRecordWriter]:
    """Write one immutable shard at ``key``: yields its :class:`ArrayRecordWriter`;
    when the block ends normally the shard is complete under ``key``, else nothing is
    left there. The one place a shard is written (:func:`write_shard` and the records
    writers use it).

    The engine writes through :meth:`Store.new_file`: on local disks under a
    temporary name, synced to the disk and renamed into place, so a shard name never
    holds a half-written file even if two attempts of the same task race, and a
    commit that names it never outlives its bytes; on object stores the engine
    uploads the object as it is written and completes it at ``close()`` (through
    fsspec, or through the :class:`arrayds.abc.store.Upload` the store yields: the
    obstore backend's, with the store's own client). Errors of the
    writer itself (opening, closing) name the shard's URL; what the caller's block
    raises is its own. ``defer_sync``: for a shard this process commits itself (see
    :meth:`Store.new_file`): locally its data reaches the disk while the commit is
    prepared, and the commit waits for it.

    >>> import tempfile
    >>> from arrayds.storage import get_store
    >>> st = get_store(tempfile.mkdtemp())
    >>> with shard_writer(st, "a/c/x.array_record", "group_size:1") as w:
    ...     w.write_many([b"r0", b"r1"])
    2
    >>> st.size("a/c/x.array_record") > 0
    True
    """
    opts = None if store.local else store.storage_options
    with store.new_file(key, defer_sync=defer_sync) as target:
        try:
            w = ArrayRecordWriter(target, options, storage_options=opts)
        except (PermissionError, FileNotFoundError) as e:
            if store.local:
                raise
            raise store.named_error(e, "cannot write the shard", store.path(key)) from e
        try:
            yield w
        except BaseException:
            w.abort()
            raise
        try:
            w.close()
        except OSError as e:
            if store.local:
                raise
            if not _stored_whole(store, key, w.upload_bytes):
                if isinstance(e, (PermissionError, FileNotFoundError)):
                    raise store.named_error(e, "cannot write the shard", store.path(key)) from e
                raise


def _stored_whole(store: Store, key: str, uploaded: int) -> bool:
    """Whether the upload of shard ``key`` whose completing request failed is stored
    whole: the request was applied and only its reply lost (the client's resend then
    fails: :attr:`ArrayRecordWriter.upload_bytes`). The object is the upload's own
    when it holds every byte sent: a shard's name is its write's alone, an object
    appears only when its upload completes, whole, and a dask retry of the same task
    writes the same bytes."""
    if uploaded <= 0:
        return False
    try:
        return store.size(key) == uploaded
    except Exception:  # noqa: BLE001 - unknown: the close's error stands
        return False


def write_shard(
    store: Store, key: str, records: Iterable[Any], options: str, *, defer_sync: bool = False
) -> int:
    """Write one immutable shard at ``key`` (one record per chunk, through
    :func:`shard_writer`, with its ``defer_sync``) and return its size."""
    with shard_writer(store, key, options, defer_sync=defer_sync) as w:
        try:
            w.write_many(records)
        except (PermissionError, FileNotFoundError) as e:
            if store.local:
                raise
            raise store.named_error(e, "cannot write the shard", store.path(key)) from e
    return store.size(key)


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


# -------------------------------------------------------------- reader cache

_READER_CACHE_SIZE = int(os.environ.get("ARRAYDS_READER_CACHE_SIZE", "256"))
_readers: OrderedDict[tuple[Any, ...], ArrayRecordReader] = OrderedDict()
_readers_lock = threading.Lock()


def _store_key(store: Store, path: str) -> str | None:
    """The key of file-system path ``path`` in ``store`` (None if outside its root)."""
    root = store.root
    if root in ("", "/"):
        return path.lstrip("/")
    return path[len(root) + 1 :] if path.startswith(root + "/") else None


def shard_reader(
    store: Store, path: str, size: int | None = None, *, whole: bool = False
) -> ArrayRecordReader:
    """An open :class:`arrayds.ArrayRecordReader` for ``path`` on ``store``'s file
    system, from a per-process LRU cache keyed by (protocol, storage options, path).

    ``size`` is the shard's byte size as its manifest records it (``None``: not
    recorded). On object stores a known size saves the size request (HEAD) of an
    open: the reader fetches the tail right away and raises
    :class:`arrayds.CorruptionError` naming the file if the object has another size.
    Local shards open as before (the engine reads the size itself).

    ``whole``: the caller is about to read most of the shard; on an object store a
    reader not yet open then fetches the whole shard (footer included, ``size`` must
    be known) in one ranged GET and serves its first read from those bytes. A remote
    shard is opened (its tail and footer) and read (its chunks, coalesced:
    :mod:`arrayds.storage.coalesce`) through :meth:`Store.get_ranges`, so a store's own
    client (the obstore backend's) serves every request; a size not recorded is asked
    of :meth:`Store.size`.

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
    # fetch (on object stores each open is a HEAD and a ranged GET)
    with gate:
        with _readers_lock:
            r = _readers.get(key)
            if r is not None:
                _readers.move_to_end(key)
                return r
        store_key = None if store.local else _store_key(store, path)
        if store.local:
            url = path
        elif store_key is not None:  # named by the store: no fsspec file system opened
            url = store.url_of(store_key)
        else:
            url = store.fs.unstrip_protocol(path)
        try:
            if store.local:
                r = ArrayRecordReader(url)
            else:
                # object stores: every byte through the store (the obstore backend's
                # own client, or fsspec's), a size not recorded by its size request;
                # a 128 KiB tail (the postscript and, up to a few thousand chunks, the
                # whole footer) instead of the reader's 1 MiB default, which would move
                # most of a small shard per open
                if store_key is not None and not size:
                    size = store.size(store_key)
                r = ArrayRecordReader(
                    url,
                    REMOTE_SHARD_READER_OPTIONS,
                    storage_options=store.storage_options,
                    file_size=size if size else None,
                    whole_file=whole,
                    get_ranges=(
                        None
                        if store_key is None
                        else functools.partial(store.get_ranges, store_key)
                    ),
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
"""Footer prefetch on object stores: when one read (a slice, an ``oindex``, a dask
task's box, a ragged read) needs the footers of several shard files, opening the
first of them starts fetching the others' in the background, 8 at a time, so that the
read does not pay one round trip per shard one after another. Only the shards that
read needs are fetched, and only for reads that need at most this many (larger ones
open each shard as they reach it, which keeps the per-process reader cache from
evicting footers before their read uses them). ``ARRAYDS_FOOTER_PREFETCH_SHARDS=0``
turns the prefetch off."""

_FOOTER_THREADS = 8
_footer_queue: queue.SimpleQueue[tuple[Store, str, int | None]] = queue.SimpleQueue()
_footer_threads: list[threading.Thread] = []
_exiting = False
_queued: set[tuple[Any, ...]] = set()
"""The (store, path) of footers queued for the prefetch threads and not yet opened."""


def _prefetch_footers(
    store: Store, node: str, opened: str, shards: Mapping[str, int | None]
) -> None:
    """Queue the footers of ``shards`` of ``node`` (relpath -> recorded size) other
    than ``opened`` that are neither open nor queued already."""
    if len(shards) > FOOTER_PREFETCH_SHARDS or _exiting:
        return
    todo = []
    with _readers_lock:
        for rel, size in shards.items():
            key = (store.token, store.path(node, rel))
            if rel != opened and key not in _readers and key not in _queued:
                _queued.add(key)
                todo.append((key[1], size))
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
        finally:
            with _readers_lock:
                _queued.discard((store.token, path))


def _stop_prefetching() -> None:
    global _exiting
    _exiting = True


atexit.register(_stop_prefetching)


def node_shard_reader(
    store: Store,
    node: str,
    relpath: str,
    size: int | None = None,
    shards: Mapping[str, int | None] | None = None,
    *,
    whole: bool = False,
) -> ArrayRecordReader:
    """The cached reader of shard ``relpath`` of ``node`` (see :func:`shard_reader`);
    ``size``: its byte size from the manifest, if recorded; ``shards``: the shard files
    (relpath -> recorded size or None) whose footers the same read needs besides this
    one: on object stores, when the read opens a shard of them the others (three or
    more) are prefetched meanwhile (see :data:`FOOTER_PREFETCH_SHARDS`). A read passes
    only what it opens by footer: a shard it reads whole (``whole``: the read needs most
    of the shard, see :func:`shard_reader`) comes in one request with its footer.

    >>> from arrayds.storage import new_store
    >>> st = new_store("memory://doc-node-reader")
    >>> n = write_shard(st, "a/c/x.array_record", [b"r0"], "")
    >>> len(node_shard_reader(st, "a", "c/x.array_record", n, {"c/x.array_record": n}))
    1
    """
    path = store.path(node, relpath)
    if store.local:
        return shard_reader(store, path, size)
    if shards is not None and len(shards) > 2:
        with _readers_lock:
            r = _readers.get((store.token, path))
        if r is not None:
            return r
        # the read opens its first shard: its other footers come meanwhile
        _prefetch_footers(store, node, relpath, shards)
    return shard_reader(store, path, size, whole=bool(whole and size))


REMOTE_SHARD_READER_OPTIONS = "footer_prefetch_bytes:128K"
"""Reader options of dataset shards on remote file systems (see :func:`shard_reader`)."""

_opening: dict[tuple[Any, ...], threading.Lock] = {}
"""Per-shard locks held while a reader opens (see :func:`shard_reader`)."""

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_opening.clear)


def read_shard_records(reader: ArrayRecordReader, records: Any) -> list[bytes]:
    """One batched engine read (decoded in parallel), counted in :func:`io_stats`."""
    out = reader.read(records)
    with _stats_lock:
        _stats["read_calls"] += 1
        _stats["records_read"] += len(out)
    return out


def read_shard_records_into(
    reader: ArrayRecordReader, records: Any, buffers: Sequence[Any], prefix: Any = None
) -> None:
    """:func:`read_shard_records`, decoding into caller-provided writable buffers (each
    record is ``prefix`` + its buffer's bytes; see ``ArrayRecordReader.read_into``)."""
    reader.read_into(records, buffers, prefix)
    with _stats_lock:
        _stats["read_calls"] += 1
        _stats["records_read"] += len(buffers)


def clear_reader_cache() -> None:
    """Forget every cached shard reader (they close when unreferenced)."""
    with _readers_lock:
        _readers.clear()


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
    _queued.clear()
    _pool_lock = threading.Lock()
    _readers_lock = threading.Lock()
    _stats_lock = threading.Lock()
    _readers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
