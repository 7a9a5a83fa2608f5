"""Pending writes: the marker a write keeps in its node while files it wrote may still
become part of a commit, so that ``arrayds gc`` never removes them (docs/spec.md 15,
docs/reliability.md "gc beside writers").

Every file a commit can make visible (a shard, a merged shard, a manifest segment) is
named after a write id (:func:`write_id_of` reads it back). Before a write uploads its
first file it puts the marker ``<node>/_arrayds/writes/<write id>.json``
(:func:`begin`); the marker goes once the commit's outcome is known
(:func:`arrayds.nodes.commit.commit` calls :func:`end`: after its put landed, or after
a failed write removed its files), or when a write that fails before its commit
cleans up (:func:`uploading`). A writer that dies leaves its marker: it is taken
for a crashed write once it is older than :data:`MAX_WRITE_AGE` (gc's
``max_write_age``), and gc then removes it with the files of that write.

gc lists the files it may remove first, then the markers (:func:`live`), then reads
the manifests: a file whose write id has a live marker is kept. Why that is safe: a
write puts its marker before its first file, so a file in gc's first listing has a
marker that was there when the listing ended; if gc's later listing of the markers
does not show it, the write ended before that listing, so its commit (if it
landed) is in the manifests gc reads after it. S3 and GCS list and read strongly
consistently after a write (a local file system too), so both listings and the reads
see every write that completed before they began.

>>> from arrayds.storage import new_store
>>> st = new_store("memory://pending-doc")
>>> wid = begin(st, "a")
>>> sorted(live(st, ["a"]).ids) == [wid], write_id_of("c/" + wid + "-0.array_record") == wid
(True, True)
>>> end(st, "a", wid); live(st, ["a"]).ids
set()
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from urllib.parse import quote

from ..abc.store import Store
from .names import META_DIR, dump_json, new_write_id, parse_shard_name

__all__ = [
    "MAX_WRITE_AGE",
    "WRITES_DIR",
    "Live",
    "begin",
    "computing",
    "end",
    "live",
    "marker_key",
    "uploading",
    "write_id_of",
]

WRITES_DIR = f"{META_DIR}/writes"
"""The folder (inside a node) of the markers of the writes that are under way."""

MAX_WRITE_AGE = 7 * 24 * 3600.0
"""Seconds after which gc takes a marker for one a crashed writer left (7 days, gc's
default version retention): a write must commit within that time of its start."""

MARKER_FORMAT = "arrayds-write"

_MARKER = re.compile(r"(?P<wid>[A-Za-z0-9_-]+)\.json")
_MARKER_TMP = re.compile(r"[A-Za-z0-9_-]+\.json\.[0-9a-f]{12}\.tmp")
"""A local store's temporary file of a marker being written (a writer killed while it
wrote one leaves it: it expires as a marker does)."""
_SEGMENT = re.compile(rf"{META_DIR}/log/(?P<wid>[0-9a-f]{{24}})(?:-[0-9a-f]{{8}})?\.json")


def _key(node: str, rel: str) -> str:
    return f"{node}/{rel}" if node else rel


def marker_key(node: str, write_id: str) -> str:
    """The key of the marker of the write ``write_id`` in ``node``.

    >>> marker_key("a/b", "0661702927ec82393c249537")
    'a/b/_arrayds/writes/0661702927ec82393c249537.json'
    """
    return _key(node, f"{WRITES_DIR}/{quote(write_id, safe='')}.json")


def begin(store: Store, node: str, write_id: str | None = None) -> str:
    """Put the marker of a write to ``node`` (a new write id unless ``write_id`` is
    given) before it writes any file; returns the write id. One small put (locally
    a file linked into place, its data synced in the background)."""
    write_id = write_id or new_write_id()
    doc = dump_json({"format": MARKER_FORMAT, "write": write_id, "started": time.time()})
    key = marker_key(node, write_id)
    if not store.local:
        store.put(key, doc)
        return write_id
    # a marker needs to be seen, not to survive a crash (the write dies with it, and
    # then nothing needs its files): on a local disk no fsync waits for it
    with store.new_file(key, defer_sync=True) as tmp, open(tmp, "wb") as f:
        f.write(doc)
    return write_id


def end(store: Store, node: str, write_id: str) -> None:
    """Remove the marker of ``write_id`` in ``node``, best effort (a marker left
    behind expires after :data:`MAX_WRITE_AGE`). One delete."""
    try:
        store.delete([marker_key(node, write_id)])
    except Exception:  # noqa: BLE001 - best effort: it expires
        pass


@contextlib.contextmanager
def uploading(store: Store, node: str, write_id: str) -> Iterator[None]:
    """The upload of the files of the begun write ``write_id``: if it raises, the
    write failed before its commit and its marker goes (:func:`end`; the caller
    removes the files it wrote first). A write that gets to its commit leaves the
    marker to the commit.

    >>> from arrayds.storage import new_store
    >>> st = new_store("memory://pending-uploading-doc")
    >>> wid = begin(st, "")
    >>> try:
    ...     with uploading(st, "", wid):
    ...         raise OSError("upload failed")
    ... except OSError:
    ...     pass
    >>> live(st, [""]).ids
    set()
    """
    try:
        yield
    except BaseException:
        end(store, node, write_id)
        raise


def computing(
    store: Store, node: str, write_id: str, compute: bool
) -> contextlib.AbstractContextManager[None]:
    """:func:`uploading` around a dask graph of the write ``write_id`` that the caller
    computes (``compute``), nothing around one it returns: an uncomputed graph's
    marker stays until its commit task runs (or expires), and a graph whose shard
    task fails leaves it if the caller computes it.

    >>> from arrayds.storage import new_store
    >>> with computing(new_store("memory://pending-computing-doc"), "", "w", False):
    ...     pass
    """
    return uploading(store, node, write_id) if compute else contextlib.nullcontext()


def write_id_of(rel: str) -> str | None:
    """The write id a file (a path relative to its node) is named after: of a shard
    name (:func:`arrayds.nodes.names.parse_shard_name`, temporary files included) or a
    manifest segment ``_arrayds/log/<write id>-<8 hex>.json``; else ``None``.

    >>> write_id_of("_arrayds/log/0661702927ec82393c249537-0a1b2c3d.json")
    '0661702927ec82393c249537'
    >>> write_id_of("notes.txt") is None
    True
    """
    m = _SEGMENT.fullmatch(rel)
    if m is not None:
        return m["wid"]
    name = parse_shard_name(rel)
    return None if name is None else name.write_id


@dataclass
class Live:
    """The markers :func:`live` found."""

    ids: set[str] = field(default_factory=set)
    """The write ids of the live markers."""
    folders: set[str] = field(default_factory=set)
    """The node folders that hold a live marker."""
    expired: list[str] = field(default_factory=list)
    """The keys of the markers older than the age given: left by crashed writers."""


def live(
    store: Store,
    folders: Iterable[str],
    max_age: float = MAX_WRITE_AGE,
    now: float | None = None,
) -> Live:
    """List the markers of the node ``folders`` (one listing each): those younger
    than ``max_age`` seconds by the store's clock (or of unknown age) are live, the
    others expired, and so are the temporary files of markers (a local write killed
    while it wrote one) as old."""
    out = Live()
    now = time.time() if now is None else now
    for folder in sorted(set(folders)):
        prefix = _key(folder, WRITES_DIR)
        for key, _size, mtime in store.list(prefix):
            name = key[len(prefix) + 1 :]
            m = _MARKER.fullmatch(name)
            old = mtime is not None and now - mtime >= max_age
            if m is None:  # a temporary file of a marker: of no write until linked
                if old and _MARKER_TMP.fullmatch(name):
                    out.expired.append(key)
                continue
            if old:
                out.expired.append(key)
            else:
                out.ids.add(m["wid"])
                out.folders.add(folder)
    return out
