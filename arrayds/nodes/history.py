"""Manifest format version 2: how a node's manifest is kept so that a commit costs what
it writes, not what was written before (docs/spec.md, "Format version 2").

The *logical* manifest of a node is the same JSON object in every format version (what
:func:`arrayds.nodes.commit.read` returns as ``raw`` and every node kind parses). What
version 2 changes is how its shard lists are stored:

* The head ``arrayds.json`` (the compare-and-swap point) holds every field inline
  except the shard lists. Each shard list (the node's ``"shards"`` and those of the
  members of a group's xarray ``snapshot``) is a *shard log*:
  ``{"segments": [{"path": ..., "count": n}, ...], "tail": [entries...]}``: the list is
  the entries of the segments, in order, then the ``tail`` (a list of at most
  :data:`TAIL_LIMIT` entries with no segment is kept inline as a plain list).
* A segment is an immutable JSON file ``_arrayds/log/<id>.json`` inside the node
  (``{"format": "arrayds-segment", "count": n, "entries": [...]}``). A commit that
  appends entries adds them to the tail; once the tail holds more than
  :data:`TAIL_LIMIT` entries it moves into a new segment, and the last two segments
  are merged while the older one is less than twice the size of the newer (a binary
  counter: at most log2(n / TAIL_LIMIT) + 1 segments for n entries, and each entry is
  rewritten O(log n) times in all). A commit that changes a list other than by
  appending writes it anew.
* Every commit is a version: before the head is replaced, the bytes of the head it
  replaces are kept as the immutable ``_arrayds/versions/<generation>.json``; those
  files and the current head are the node's history (:func:`versions`). A copy is the
  bytes of a committed head, so writers that race to keep the same version write the
  same bytes.

Segments and version files are only ever created (never changed) and are named
uniquely, so readers cache parsed segments by name (:func:`segment`), and a head
names everything a reader needs: reading the head, then its segments, always gives
one committed state.

>>> from arrayds.storage import new_store
>>> st = new_store("memory://log-doc")
>>> head, new_files = encode(st, "n", {"kind": "records", "shards": [{"path": "a"}]}, None)
>>> head["shards"], new_files  # a short list stays inline, as in format 1
([{'path': 'a'}], [])
>>> resolve(st, "n", head, "n")["shards"]
[{'path': 'a'}]
"""

from __future__ import annotations

import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from itertools import chain
from typing import Any

import numpy as np

from ..abc.store import Store
from ..errors import CorruptionError
from ..files.common import run_each
from .names import META_DIR, dump_json, new_write_id, parse_json
from .shards import io_pool

__all__ = [
    "HISTORY_FROM",
    "INDEX_LIMIT",
    "INDEXED_VERSION",
    "Appended",
    "LOG_DIR",
    "META_DIR",
    "SEGMENT_LIMIT",
    "TAIL_LIMIT",
    "VERSIONS_DIR",
    "Extend",
    "by_segment",
    "write_segments",
    "Fresh",
    "VersionInfo",
    "clear_cache",
    "encode",
    "extend",
    "log_files",
    "has_index",
    "index",
    "kept",
    "needs_index",
    "newest",
    "now",
    "parse_time",
    "plain",
    "ShardLog",
    "resolve",
    "segment",
    "summary",
    "version_key",
    "version_of_key",
]

LOG_DIR = f"{META_DIR}/log"
_WRITE_ID = re.compile(r"[0-9a-f]{24}")
VERSIONS_DIR = f"{META_DIR}/versions"
HISTORY_FROM = "history_from"
"""The head field naming the first generation of the node's history (set by a commit
that replaced the node whole; older version files are not part of it)."""
TAIL_LIMIT = 32
"""The most entries a shard log keeps inline in the head before they move to a segment
(a head stays a few KiB however long the history)."""
SEGMENT_FORMAT = "arrayds-segment"
MAX_SEGMENT_BYTES = 1 << 30
"""A segment file larger than this is refused as damaged before it is parsed."""
FIRST_READ = 1 << 20
"""The bytes of a segment or index read first, in one request: the whole file unless
it is larger (then its size is checked, and it is read whole)."""
SEGMENT_LIMIT = 128
"""The most entries a writer puts in one segment: the merge of the binary counter stops
there, and a longer run of new entries is written as several segments. A read that
needs one entry then loads at most this many (about 15 KiB of JSON for an array),
however long the list."""
INDEX_FORMAT = "arrayds-index"
INDEXED_VERSION = 3
"""The format version of a head one of whose shard lists has an index."""
INDEX_LIMIT = 128
"""The most segment references a head keeps after its last index reference, and the
number an index holds: once a head would keep more, the first :data:`INDEX_LIMIT` of
them move into a new index (an immutable file of references) that the head references
instead. A head then holds about n / (SEGMENT_LIMIT x INDEX_LIMIT) + INDEX_LIMIT
references for n entries (a few KiB up to 16 million entries), and a read that needs
one entry loads the head, one index and one segment."""


@dataclass(frozen=True)
class Extend:
    """What a write that only adds shards returns from its ``build``: the next manifest
    is the current one with ``fields`` replaced and ``shards`` appended to its
    ``"shards"``. A commit then writes only the new entries (and the head), whatever
    the length of the history.

    ``drop`` (a region write whose new entries hide old ones): positions of entries
    left out of the current list first, by the path of the segment that holds them
    (``""``: the tail). Only the segments named are rewritten; the commit's ``build``
    must give it for the stored list of the head it commits on.

    ``segments``: references (:func:`write_segments`) of segments written before the
    commit (by the workers of a dask write), appended after the current entries and
    before ``shards``: the commit then holds only their references, never their
    entries. They become visible only when the head names them; named after the
    write's id, gc keeps them while its pending marker lives
    (:mod:`arrayds.nodes.pending`) and removes them afterwards if no version names
    them.

    ``fresh`` (a write that replaces the node, mode ``"w"``): nothing of the current
    manifest is kept, its fields nor its entries; the list is ``segments`` then
    ``shards``, and every entry they name is a file of the committing write (its
    commit then removes the replaced manifest's files one stored segment at a time,
    :func:`arrayds.nodes.commit.commit`)."""

    fields: Mapping[str, Any]
    shards: Sequence[Mapping[str, Any]]
    drop: Mapping[str, Sequence[int]] = field(default_factory=dict)
    segments: Sequence[Mapping[str, Any]] = ()
    fresh: bool = False


class Appended(Sequence[Any]):
    """A whole shard list that a writer built as the list ``before`` of the manifest
    stamped ``stamp`` (its ``(generation, commit)``), without the entries at the
    positions ``drop``, followed by the entries of ``segments``, then the entries
    ``added``.
    :func:`encode` then changes a stored list of that manifest by exactly that (the
    segments holding the dropped entries rewritten, the segment references and
    ``added`` appended) without reading or comparing the entries before them (a
    snapshot member's list, or the node's own, may be millions long); against any
    other stored list it is an ordinary list, read whole. A list with no ``before``
    entries is the whole list, whatever is stored.

    ``before`` is the list as it was read (a :class:`ShardLog`, whose segments load
    only if the list is read whole, or a plain list). ``segments``: the new entries
    written as segments before the commit (by the workers of a dask write,
    :func:`write_segments`), node -> a :class:`ShardLog` of the references of the
    segments that node holds (the same entries under every node: a group snapshot's
    copy of a member list and the member's own list are stored in their own nodes).
    A ``(generation, commit)`` names one content: a commit's write id is unique, and
    the roll forward of a group snapshot (docs/spec.md 10.2) writes exactly the copy
    the snapshot lists under the same stamp.

    >>> lst = Appended([{"path": "a"}, {"path": "b"}], [{"path": "c"}], (3, "w3"), drop=[1])
    >>> list(lst), lst.count, len(lst)
    ([{'path': 'a'}, {'path': 'c'}], 2, 2)
    """

    __slots__ = ("_all", "added", "before", "drop", "segments", "stamp")

    def __init__(
        self,
        before: Sequence[Any],
        added: Sequence[Any],
        stamp: tuple[int, str],
        drop: Sequence[int] = (),
        segments: Mapping[str, ShardLog] | None = None,
    ) -> None:
        self.drop = sorted(set(drop))
        if self.drop and not 0 <= self.drop[0] <= self.drop[-1] < len(before):
            raise ValueError(
                f"positions {self.drop[0]}..{self.drop[-1]} are not in a list of {len(before)}"
            )
        self.before = before
        self.added = list(added)
        self.stamp = stamp
        self.segments = dict(segments or {})
        self._all: list[Any] | None = None

    @property
    def count(self) -> int:
        """How many entries the stamped manifest's list holds."""
        return len(self.before)

    def _written(self) -> Sequence[Any]:
        """The entries of ``segments`` (those of any one node: the same entries)."""
        return next(iter(self.segments.values()), [])

    def __len__(self) -> int:
        return len(self.before) - len(self.drop) + len(self._written()) + len(self.added)

    def __iter__(self) -> Iterator[Any]:
        gone = set(self.drop)
        kept = (e for i, e in enumerate(self.before) if i not in gone) if gone else self.before
        return chain(kept, self._written(), self.added)

    def __getitem__(self, i: Any) -> Any:
        if self._all is None:  # read whole once (its parts are immutable)
            self._all = list(self)
        return self._all[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Appended, ShardLog, list)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        n = len(self._written())
        gone = len(self.drop)
        return f"Appended({len(self.before)} - {gone} + {n} + {len(self.added)} entries)"


def _stamp(d: Any) -> tuple[int, str] | None:
    """The ``(generation, commit)`` of the stored manifest ``d`` that holds a list."""
    if not isinstance(d, Mapping):
        return None
    g, c = d.get("generation", 0), d.get("commit", "")
    if not isinstance(g, int) or isinstance(g, bool):
        return None
    return g, str(c)


def _stored_count(stored: Any) -> int | None:
    """The number of entries a stored shard list stands for (``None`` if malformed)."""
    if isinstance(stored, list):
        return len(stored)
    if not _is_log(stored) or not isinstance(stored["tail"], list):
        return None
    segs = stored["segments"]
    if not isinstance(segs, list):
        return None
    n = len(stored["tail"])
    for ref in segs:
        c = ref.get("count") if isinstance(ref, dict) else None
        if not isinstance(c, int) or isinstance(c, bool) or c < 0:
            return None
        n += c
    return n


@dataclass(frozen=True)
class VersionInfo:
    """One retained version of a node (what :func:`arrayds.versions` lists).

    >>> import arrayds
    >>> a = arrayds.open_array("memory://log-versioninfo-doc", mode="w", shape=(0,),
    ...                        dtype="i1", chunks=1)
    >>> _ = a.append([1])
    >>> [(v.generation, v.current) for v in arrayds.versions("memory://log-versioninfo-doc")]
    [(1, False), (2, True)]
    """

    generation: int
    commit: str | None
    time: datetime | None
    """When it was committed (UTC; ``None`` for manifests written before format 2)."""
    current: bool
    """Whether it is the node's current state (its head)."""


def now() -> str:
    """The commit time stored in a head: ISO 8601, UTC, microseconds."""
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def parse_time(value: Any) -> datetime | None:
    """A head's ``time`` as an aware datetime, or ``None`` if it has none or a bad one."""
    if not isinstance(value, str):
        return None
    try:
        t = datetime.fromisoformat(value)
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def version_key(generation: int) -> str:
    """The file (relative to the node) that keeps version ``generation``.

    >>> version_key(7)
    '_arrayds/versions/000000000007.json'
    """
    return f"{VERSIONS_DIR}/{generation:012d}.json"


def version_of_key(name: str) -> int | None:
    """The generation a version file's name gives (``None`` if it is no such name)."""
    stem, dot, ext = name.rpartition("/")[2].partition(".")
    if ext != "json" or not dot or len(stem) != 12 or not stem.isdigit():
        return None
    return int(stem)


# ------------------------------------------------------------------ segments

CACHE_ENTRIES = 262_144
"""How many entries (and index references) of parsed segments and indexes a process
keeps, least recently used first out: 2,048 full segments, some 130 MB of Python
objects. A read of one chunk needs one index and one segment; a reader that parses
a whole list keeps its own columns (:class:`arrayds.kinds.array.manifest.ShardList`)."""
_cache: OrderedDict[tuple[str, str], list[Any]] = OrderedDict()
_cache_size = 0
_cache_lock = threading.Lock()


def clear_cache() -> None:
    """Forget the parsed segments this process keeps (what a new process starts with).

    >>> clear_cache()
    """
    global _cache_size
    with _cache_lock:
        _cache.clear()
        _cache_size = 0


def _key(node: str, rel: str) -> str:
    return f"{node}/{rel}" if node else rel


def segment(store: Store, node: str, ref: Any, what: str, cache: bool = True) -> list[Any]:
    """The entries of the segment ``ref`` (``{"path", "count"}``) of ``node``, from a
    per-process cache (segments never change); ``cache=False``: not kept there (a
    pass over a whole list, one segment at a time). A missing, damaged or forged
    segment raises :class:`arrayds.CorruptionError` naming it."""
    path, count = _check_ref(ref, what)
    if "refs" in ref:
        raise CorruptionError(f"{what}: manifest segment {path!r} is an index, not a segment")
    where = f"{what}: manifest segment {path!r}"
    return _load(store, node, ref, path, count, "entries", where, cache)


def index(store: Store, node: str, ref: Any, what: str) -> list[dict[str, Any]]:
    """The segment references held by the index ``ref`` (an index reference:
    ``{"path", "count", "refs"}``) of ``node``, cached as segments are. A missing,
    damaged or forged index (one that holds an index reference, or whose references
    disagree with what ``ref`` says of them) raises :class:`arrayds.CorruptionError`
    naming it."""
    path, _ = _check_ref(ref, what)
    n = ref.get("refs")
    if not _is_count(n):
        raise CorruptionError(f"{what}: manifest segment reference {ref!r} is no index")
    return _load(store, node, ref, path, n, "refs", f"{what}: manifest index {path!r}")


def _load(
    store: Store,
    node: str,
    ref: Any,
    path: str,
    count: int,
    field: str,
    where: str,
    cache: bool = True,
) -> Any:
    ck = (store.canonical_url, _key(node, path))
    with _cache_lock:
        got = _cache.get(ck)
        if got is not None:
            _cache.move_to_end(ck)
            return got
    key = _key(node, path)
    try:
        # one request for a file of less than FIRST_READ bytes (every segment and
        # index a writer makes), its size checked before a larger one is read
        data: bytes | None = store.get_range(key, 0, FIRST_READ)
        if len(data) >= FIRST_READ:
            size = store.size(key)
            if size > MAX_SEGMENT_BYTES:
                raise CorruptionError(f"{where} holds {size} bytes, more than {MAX_SEGMENT_BYTES}")
            data = store.get(key)
    except FileNotFoundError:
        raise CorruptionError(f"{where} is missing") from None
    if data is None:
        raise CorruptionError(f"{where} is missing")
    doc = parse_json(data, where)
    items = doc.get(field)
    fmt = SEGMENT_FORMAT if field == "entries" else INDEX_FORMAT
    if doc.get("format") != fmt or not isinstance(items, list):
        raise CorruptionError(f"{where} is not an arrayds {fmt[8:]}")
    if len(items) != count or doc.get("count") != count:
        raise CorruptionError(f"{where} holds {len(items)} {field}; the manifest says {count}")
    if field == "refs":
        _check_index(ref, items, where)
    else:
        _check_summary(ref, items, where)
    if cache:
        _remember(ck, items)
    return items


def _remember(ck: tuple[str, str], items: list[Any]) -> None:
    """Keep the parsed segment or index ``items`` under ``ck`` (store URL, key), the
    least recently used ones leaving beyond :data:`CACHE_ENTRIES`."""
    global _cache_size
    with _cache_lock:
        old = _cache.pop(ck, None)
        if old is not None:
            _cache_size -= len(old) + 1
        _cache[ck] = items
        _cache_size += len(items) + 1
        while _cache_size > CACHE_ENTRIES and len(_cache) > 1:
            _, gone = _cache.popitem(last=False)
            _cache_size -= len(gone) + 1


_PLAIN_REF = rf"{LOG_DIR}/[0-9a-f]{{24}}(?:-[0-9a-f]{{8}})?\.json"
_PLAIN_REFS = re.compile(rf"{_PLAIN_REF}(?:\n{_PLAIN_REF})*")
"""Segment paths as writers name them, joined by newlines."""


def _plain_summary(refs: list[Any]) -> dict[str, Any] | None:
    """The summary of the segment references ``refs`` (:func:`summary`) if every one
    has the form writers give them (a plain path, ``count``, ``records`` and a
    well-formed ``box``, no ``refs``), checked a column at a time (an index of 128
    references in a fraction of the time of one at a time); ``None`` otherwise."""
    if not refs or any(type(r) is not dict or "refs" in r for r in refs):
        return None
    try:
        paths = [r["path"] for r in refs]
        counts = [r["count"] for r in refs]
        recs = [r["records"] for r in refs]
        boxes = [r["box"] for r in refs]
    except KeyError:
        return None
    if (
        set(map(type, paths)) != {str}
        or set(map(type, counts)) != {int}
        or set(map(type, recs)) != {int}
        or set(map(type, boxes)) != {list}
        or not _PLAIN_REFS.fullmatch("\n".join(paths))
    ):
        return None
    corners = list(chain.from_iterable(boxes))
    if set(map(type, corners)) != {list} or set(map(type, chain.from_iterable(corners))) != {int}:
        return None
    try:
        b = np.array(boxes, dtype=np.int64)
    except (ValueError, OverflowError):
        return None
    if (
        b.ndim != 3
        or b.shape[1] != 2
        or min(counts) < 0
        or min(recs) < 0
        or (b < 0).any()
        or (b[:, 0] > b[:, 1]).any()
    ):
        return None
    box = [b[:, 0].min(axis=0).tolist(), b[:, 1].max(axis=0).tolist()]
    out = {"count": sum(counts), "records": sum(recs), "box": box}
    spans = [r.get("items") for r in refs]
    if any(x is not None for x in spans):
        if not all(_is_span(x) for x in spans):
            return None
        out["items"] = [min(x[0] for x in spans), max(x[1] for x in spans)]
    return out


def _check_index(ref: Mapping[str, Any], refs: list[Any], where: str) -> None:
    """An index holds segment references only, whose summary is the one its own
    reference gives (the same ``count`` and ``records`` sums, every box inside its
    ``box``)."""
    have = _plain_summary(refs)
    if have is None:  # one by one, to name what is wrong
        for r in refs:
            _check_ref(r, where)
            if "refs" in r:
                raise CorruptionError(f"{where} holds the index reference {r!r}")
        have = summary(refs, of_refs=True)
    for key, name in (("count", "entries"), ("records", "records")):
        if key in ref and have.get(key) != ref[key]:
            raise CorruptionError(
                f"{where}: its segments hold {have.get(key)} {name}; the manifest says {ref[key]}"
            )
    if "items" in ref and have.get("items") != ref["items"]:
        raise CorruptionError(
            f"{where}: its segments hold items {have.get('items')}; the manifest says "
            f"{ref['items']}"
        )
    if "box" in ref:
        box, got = ref["box"], have.get("box")
        if (
            got is None
            or len(got[0]) != len(box[0])
            or not all(a <= c for a, c in zip(box[0], got[0], strict=True))
            or not all(d <= b for b, d in zip(box[1], got[1], strict=True))
        ):
            raise CorruptionError(
                f"{where}: its segments span the chunk box {got}, outside the box {box} "
                f"the manifest gives it"
            )


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


def summary(entries: Sequence[Any], *, of_refs: bool = False) -> dict[str, Any]:
    """What a segment's reference says of its entries, so that a reader can tell
    without loading the segment whether it may hold what a read looks for:
    ``records``, the sum of the entries' ``records`` (when every entry has one), and
    ``box``, ``[start, stop]``: the smallest box of chunk coordinates that holds every
    entry's box (when every entry has a ``start`` and a ``stop`` of the same length);
    ``items``, ``[first, stop]``: the smallest range of item numbers that holds every
    entry's ``items`` range (when every entry has one: a ragged array's).
    ``of_refs``: the summary of an index of the segment references ``entries``
    (``count``, the sum of theirs; ``records``, ``box`` and ``items`` from theirs).

    >>> summary([{"start": [0, 4], "stop": [2, 6], "records": 4},
    ...          {"start": [5, 0], "stop": [6, 1], "records": 1}])
    {'records': 5, 'box': [[0, 0], [6, 6]]}
    >>> summary([{"items": [0, 3], "records": 5}, {"items": [3, 4], "records": 2}])
    {'records': 7, 'items': [0, 4]}
    >>> summary([{"path": "a"}])
    {}
    >>> summary([{"count": 2, "records": 5, "box": [[0], [3]]},
    ...          {"count": 1, "records": 1, "box": [[7], [8]]}], of_refs=True)
    {'count': 3, 'records': 6, 'box': [[0], [8]]}
    """
    out: dict[str, Any] = {}
    if of_refs:
        counts = [e.get("count") if isinstance(e, dict) else None for e in entries]
        if all(_is_count(c) for c in counts):
            out["count"] = sum(counts)  # type: ignore[arg-type]
    recs = [e.get("records") if isinstance(e, dict) else None for e in entries]
    if entries and all(_is_count(r) for r in recs):
        out["records"] = sum(recs)  # type: ignore[arg-type]
    if of_refs:
        boxes = [e.get("box") if isinstance(e, dict) else None for e in entries]
        starts = [b[0] if isinstance(b, list) and len(b) == 2 else None for b in boxes]
        stops = [b[1] if isinstance(b, list) and len(b) == 2 else None for b in boxes]
    else:
        starts = [e.get("start") if isinstance(e, dict) else None for e in entries]
        stops = [e.get("stop") if isinstance(e, dict) else None for e in entries]
    if entries and isinstance(starts[0], list):
        ndim = len(starts[0])
        if all(
            isinstance(a, list)
            and isinstance(b, list)
            and len(a) == ndim == len(b)
            and all(_is_count(x) for x in a)
            and all(_is_count(x) for x in b)
            for a, b in zip(starts, stops, strict=True)
        ):
            lo = [min(a[d] for a in starts) for d in range(ndim)]  # type: ignore[index]
            hi = [max(b[d] for b in stops) for d in range(ndim)]  # type: ignore[index]
            out["box"] = [lo, hi]
    items = _items_of(entries)
    if items is not None:
        out["items"] = items
    return out


def _items_of(entries: Sequence[Any]) -> list[int] | None:
    """The smallest ``[first, stop]`` holding every entry's ``items`` range (``None``
    if there are no entries or one has no such range)."""
    spans = [e.get("items") if isinstance(e, dict) else None for e in entries]
    if not spans or not all(_is_span(r) for r in spans):
        return None
    return [min(r[0] for r in spans), max(r[1] for r in spans)]  # type: ignore[index]


def _is_span(r: Any) -> bool:
    return (
        isinstance(r, list) and len(r) == 2 and _is_count(r[0]) and _is_count(r[1]) and r[0] <= r[1]
    )


def _check_ref(ref: Any, what: str) -> tuple[str, int]:
    path = ref.get("path") if isinstance(ref, dict) else None
    count = ref.get("count") if isinstance(ref, dict) else None
    if (
        not isinstance(path, str)
        or not path.startswith(LOG_DIR + "/")
        or "/" in path[len(LOG_DIR) + 1 :]
        or ".." in path
        or "\x00" in path
        or "\\" in path
        or not isinstance(count, int)
        or isinstance(count, bool)
        or count < 0
        or ("records" in ref and not _is_count(ref["records"]))
        or ("box" in ref and not _is_box(ref["box"]))
        or ("refs" in ref and not (_is_count(ref["refs"]) and ref["refs"] > 0))
        or ("items" in ref and not _is_span(ref["items"]))
    ):
        raise CorruptionError(f"{what}: manifest segment reference {ref!r} is invalid")
    return path, count


def _is_box(box: Any) -> bool:
    return (
        isinstance(box, list)
        and len(box) == 2
        and all(isinstance(b, list) and all(_is_count(x) for x in b) for b in box)
        and len(box[0]) == len(box[1])
        and all(a <= b for a, b in zip(box[0], box[1], strict=True))
    )


def _check_summary(ref: Mapping[str, Any], entries: list[Any], where: str) -> None:
    """A segment's entries must agree with what its reference says of them: the same
    ``records`` sum, every entry inside the reference's ``box``, and the same
    ``items`` range (else a read that trusted the reference would miss entries, or
    find them where none can be). The entries' own form is the kind's to check."""
    if "records" in ref:
        try:
            got: Any = sum(int(e["records"]) for e in entries)
        except (KeyError, TypeError, ValueError):
            got = None
        if got != ref["records"]:
            raise CorruptionError(
                f"{where}: its entries hold {got} records; the manifest says {ref['records']}"
            )
    if "box" in ref:
        box = ref["box"]
        try:
            starts = np.array([e["start"] for e in entries], dtype=np.int64)
            stops = np.array([e["stop"] for e in entries], dtype=np.int64)
            have = [starts.min(axis=0).tolist(), stops.max(axis=0).tolist()]
        except (KeyError, TypeError, ValueError, OverflowError):
            have = None
        if (
            have is None
            or starts.shape != (len(entries), len(box[0]))
            or stops.shape != starts.shape
            or not all(a <= c for a, c in zip(box[0], have[0], strict=True))
            or not all(d <= b for b, d in zip(box[1], have[1], strict=True))
        ):
            raise CorruptionError(
                f"{where}: its entries span the chunk box {have}, outside the box "
                f"{box} the manifest gives it"
            )
    if "items" in ref:
        span = _items_of(entries)
        if span != ref["items"]:
            raise CorruptionError(
                f"{where}: its entries hold items {span}; the manifest says {ref['items']}"
            )


def _segment_path(write_id: str | None) -> str:
    """A new segment's path: ``_arrayds/log/<write id>-<8 hex>.json`` for a commit of
    the write ``write_id`` (whose pending marker keeps gc from removing it before the
    commit: :mod:`arrayds.nodes.pending`), ``_arrayds/log/<new write id>.json`` for
    others."""
    if write_id is not None and _WRITE_ID.fullmatch(write_id):
        return f"{LOG_DIR}/{write_id}-{secrets.token_hex(4)}.json"
    return f"{LOG_DIR}/{new_write_id()}.json"


def _write_segment(
    store: Store, node: str, entries: Sequence[Any], write_id: str | None
) -> dict[str, Any]:
    """Write the immutable segment of ``entries`` (named after ``write_id``); returns
    its reference."""
    path = _segment_path(write_id)
    entries = list(entries)
    store.put(
        _key(node, path),
        dump_json({"format": SEGMENT_FORMAT, "count": len(entries), "entries": entries}),
    )
    _remember((store.canonical_url, _key(node, path)), entries)  # the writer reads it next
    return {"path": path, "count": len(entries), **summary(entries)}


def _write_segments(
    store: Store, node: str, entries: list[Any], write_id: str | None
) -> list[dict[str, Any]]:
    """``entries`` as segments of at most :data:`SEGMENT_LIMIT` entries each, written
    at once; their references, in order."""
    runs = [entries[i : i + SEGMENT_LIMIT] for i in range(0, len(entries), SEGMENT_LIMIT)]
    return run_each(io_pool(), lambda run: _write_segment(store, node, run, write_id), runs)


def _write_index(
    store: Store, node: str, refs: Sequence[Mapping[str, Any]], write_id: str | None
) -> dict[str, Any]:
    """Write the immutable index of the segment references ``refs`` (named after
    ``write_id``, as segments are); returns its reference."""
    path = _segment_path(write_id)
    refs = [dict(r) for r in refs]
    store.put(
        _key(node, path), dump_json({"format": INDEX_FORMAT, "count": len(refs), "refs": refs})
    )
    _remember((store.canonical_url, _key(node, path)), refs)
    return {"path": path, "refs": len(refs), **summary(refs, of_refs=True)}


def _roll_up(
    store: Store, node: str, segs: list[Any], written: list[str], write_id: str | None
) -> list[Any]:
    """The references ``segs`` of a head with the segment references after its last
    index reference moved into new indexes of :data:`INDEX_LIMIT` each, first ones
    first, until at most :data:`INDEX_LIMIT` of them are left (a bounded head)."""
    last = max((i for i, r in enumerate(segs) if _is_index_ref(r)), default=-1)
    run = segs[last + 1 :]
    groups = -(-(len(run) - INDEX_LIMIT) // INDEX_LIMIT)
    if groups <= 0:
        return segs
    runs = [run[i * INDEX_LIMIT : (i + 1) * INDEX_LIMIT] for i in range(groups)]
    new = run_each(io_pool(), lambda r: _write_index(store, node, r, write_id), runs)
    written += [r["path"] for r in new]
    return [*segs[: last + 1], *new, *run[groups * INDEX_LIMIT :]]


# ------------------------------------------------------------------ shard logs


def _is_index_ref(ref: Any) -> bool:
    """Whether ``ref`` is the reference of an index (it has ``refs``)."""
    return isinstance(ref, dict) and "refs" in ref


def _is_log(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"segments", "tail"}


def _resolve_list(store: Store, node: str, value: Any, what: str) -> Any:
    """The entries a stored shard list stands for (a plain list is itself)."""
    if not isinstance(value, dict):
        return value
    segs, tail = value.get("segments"), value.get("tail")
    if not _is_log(value) or not isinstance(segs, list) or not isinstance(tail, list):
        raise CorruptionError(f"{what}: manifest field 'shards' is not a shard list")
    if not segs:
        return tail
    out: list[Any] = []
    for ref in segs:
        for leaf in index(store, node, ref, what) if _is_index_ref(ref) else [ref]:
            out.extend(segment(store, node, leaf, what))
    out.extend(tail)
    return out


class ShardLog(Sequence[Any]):
    """A stored shard log read lazily: the list of its entries (a ``Sequence``:
    ``len()`` is known from the head's references, indexing or iterating loads every
    segment once), and its segments one by one for a read that needs only some
    (:meth:`meeting`, :meth:`load`), each loaded and checked when first used.

    Segments are numbered in list order, those an index of the head holds included
    (:attr:`nsegments` of them, known from the head); an index is loaded when a
    segment it holds is first looked for.

    >>> from arrayds.storage import new_store
    >>> st = new_store("memory://log-shardlog-doc")
    >>> entries = [{"path": f"c/{i}", "start": [i], "stop": [i + 1], "records": 1}
    ...            for i in range(300)]
    >>> head, _ = encode(st, "", {"kind": "array", "shards": entries}, None)
    >>> lg = ShardLog(st, "", head["shards"], "doc")
    >>> len(lg), lg.nsegments, lg.meeting([250], [250]), lg.load(1)[122]["start"]
    (300, 3, [1], [250])
    """

    __slots__ = ("_all", "_boxes_of", "_first", "_indexes", "_len", "_node", "_spans",
                 "_store", "_what", "nsegments", "refs", "tail")  # fmt: skip

    def __init__(self, store: Store, node: str, value: Any, what: str) -> None:
        segs, tail = (value.get("segments"), value.get("tail")) if _is_log(value) else (None, None)
        if not isinstance(segs, list) or not isinstance(tail, list):
            raise CorruptionError(f"{what}: manifest field 'shards' is not a shard list")
        self.refs: list[dict[str, Any]] = segs
        """The head's references, in order: of segments (``path``, ``count``, and what
        :func:`summary` gave their writer) and of indexes (also ``refs``: how many
        segment references the index holds), each checked when first used."""
        self.tail: list[Any] = tail
        self._store, self._node, self._what = store, node, what
        self._all: list[Any] | None = None
        self._len: int | None = None
        self._indexes: dict[int, list[dict[str, Any]]] = {}
        self._boxes_of: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        spans = [r["refs"] if _is_index_ref(r) and _is_count(r["refs"]) else 1 for r in segs]
        self._first = np.cumsum([0, *spans], dtype=np.int64)
        """Number of the first segment of each head reference (and the total last)."""
        self.nsegments: int = int(self._first[-1])
        """How many segments the list has (those its indexes hold included)."""
        self._spans: Any = None

    def __len__(self) -> int:
        if self._len is None:
            counts = [r.get("count") if isinstance(r, dict) else None for r in self.refs]
            if not all(_is_count(c) for c in counts):
                for ref in self.refs:
                    _check_ref(ref, self._what)  # names the first bad one
            self._len = sum(counts) + len(self.tail)  # type: ignore[arg-type]
        return self._len

    def entries(self) -> list[Any]:
        """Every entry, in order (each segment loaded once)."""
        if self._all is None:
            out: list[Any] = []
            for k in range(self.nsegments):
                out.extend(self.load(k))
            out.extend(self.tail)
            self._all = out
        return self._all

    def __getitem__(self, i: Any) -> Any:
        return self.entries()[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.entries())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (ShardLog, list)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ShardLog({self.nsegments} segments, {len(self)} entries)"

    def _index(self, i: int) -> list[dict[str, Any]]:
        got = self._indexes.get(i)
        if got is None:
            got = index(self._store, self._node, self.refs[i], self._what)
            self._indexes[i] = got
        return got

    def segment_ref(self, k: int) -> dict[str, Any]:
        """The reference of segment ``k`` (its index loaded if it is in one)."""
        if not 0 <= k < self.nsegments:
            raise IndexError(f"segment {k} of {self.nsegments}")
        i = int(np.searchsorted(self._first, k, side="right")) - 1
        ref = self.refs[i]
        return self._index(i)[k - int(self._first[i])] if _is_index_ref(ref) else ref

    def held(self, i: int) -> list[dict[str, Any]]:
        """The references of the segments head reference ``i`` stands for: those of
        its index (loaded), or itself."""
        ref = self.refs[i]
        return self._index(i) if _is_index_ref(ref) else [ref]

    def load(self, k: int, cache: bool = True) -> list[Any]:
        """The entries of segment ``k`` (checked against its reference); ``cache``:
        kept in the per-process cache (:func:`segment`)."""
        return segment(self._store, self._node, self.segment_ref(k), self._what, cache)

    def positions(self, positions: Sequence[int]) -> dict[str, list[int]]:
        """Where the entries at ``positions`` (in the list) are: their positions by the
        path of the segment that holds them (``""``: the tail), found from the
        references' counts (an index is loaded where a position lies in it, no
        segment): what an :class:`Extend`'s ``drop`` names."""
        if not positions:
            return {}
        at = np.asarray(positions, dtype=np.int64)
        if at.min() < 0 or at.max() >= len(self):
            raise ValueError(f"{self._what}: positions {positions!r} are not in the list")
        seg, first, _ = self.holding_entries(at)
        out: dict[str, list[int]] = {}
        for k, e0, p in zip(seg.tolist(), first.tolist(), at.tolist(), strict=True):
            path = "" if k == self.nsegments else self.segment_ref(k)["path"]
            out.setdefault(path, []).append(p - e0)
        return out

    def first_entry(self, k: int) -> int:
        """The position in the list of the first entry of segment ``k`` (of the tail
        for ``k ==`` :attr:`nsegments`)."""
        self._item_spans()
        entry0 = self._spans[0]
        if k >= self.nsegments:
            return int(entry0[-1])
        i = int(np.searchsorted(self._first, k, side="right")) - 1
        if _is_index_ref(self.refs[i]):
            return int(self._within(i)[0][k - int(self._first[i])])
        return int(entry0[i])

    def newest(self, k: int) -> list[tuple[str, int, Any]]:
        """The last ``k`` entries of the list (all if it has fewer), in order, each as
        ``(path of the segment that holds it, its position there, the entry)`` (path
        ``""``: the tail): only the tail and the last segments are loaded."""
        tail = self.tail[max(0, len(self.tail) - k) :] if k > 0 else []
        first = len(self.tail) - len(tail)
        out = [("", first + j, e) for j, e in enumerate(tail)]
        seg = self.nsegments - 1
        while len(out) < k and seg >= 0:
            path = self.segment_ref(seg)["path"]
            entries = self.load(seg)
            part = entries[max(0, len(entries) - (k - len(out))) :]
            first = len(entries) - len(part)
            out = [(path, first + j, e) for j, e in enumerate(part)] + out
            seg -= 1
        return out

    def meeting(self, lo: Sequence[int], hi: Sequence[int]) -> list[int]:
        """The segments that may hold an entry whose box meets the box of chunk
        coordinates ``lo`` .. ``hi`` (both included): those whose reference (and that
        of the index holding them) has a ``box`` that meets it or none. Only the
        indexes whose box meets it are loaded."""
        lo_a = np.asarray(lo, dtype=np.int64)
        hi_a = np.asarray(hi, dtype=np.int64)
        out: list[int] = []
        for i in self._meets(-1, self.refs, lo_a, hi_a):
            ref = self.refs[i]
            first = int(self._first[i])
            if _is_index_ref(ref):
                out += [first + j for j in self._meets(i, self._index(i), lo_a, hi_a)]
            else:
                out.append(first)
        return out

    def _meets(self, key: int, refs: list[Any], lo: np.ndarray, hi: np.ndarray) -> list[int]:
        got = self._boxes_of.get(key)
        if got is None:
            got = self._boxes(refs, len(lo))
            self._boxes_of[key] = got
        boxed, box_lo, box_hi = got
        meets = np.all((box_lo <= hi) & (box_hi > lo), axis=1)
        return np.flatnonzero(meets | ~boxed).tolist()

    def _boxes(self, refs: list[Any], nd: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The boxes of ``refs`` as arrays (which have one of ``nd`` axes, their lower
        and upper corners), every reference checked: at once when all have a
        well-formed box, else one by one (a malformed one is corruption naming it)."""
        try:
            boxes = np.array([r["box"] for r in refs], dtype=np.int64).reshape(len(refs), 2, nd)
            ok = bool((boxes >= 0).all() and (boxes[:, 0] <= boxes[:, 1]).all())
        except (KeyError, TypeError, ValueError, OverflowError):
            ok = False
        if ok and all(type(r.get("count")) is int and r["count"] >= 0 for r in refs):
            return np.ones(len(refs), dtype=bool), boxes[:, 0], boxes[:, 1]
        for ref in refs:
            _check_ref(ref, self._what)
        has = [isinstance(r.get("box"), list) and len(r["box"][0]) == nd for r in refs]
        zero = [0] * nd
        box_lo = np.array(
            [r["box"][0] if h else zero for r, h in zip(refs, has, strict=True)], dtype=np.int64
        ).reshape(len(refs), nd)
        box_hi = np.array(
            [r["box"][1] if h else zero for r, h in zip(refs, has, strict=True)], dtype=np.int64
        ).reshape(len(refs), nd)
        return np.array(has, dtype=bool), box_lo, box_hi

    def holding_items(self, items: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Where the entries that hold each of ``items`` (item numbers, as the
        entries' ``items`` ranges count them) are, by binary search on the
        references' ``items`` summaries (an index's loaded when an item lies in it):
        ``(segment, entries before it, its first item)`` of each (segment
        :attr:`nsegments`: the tail, for items past the last segment; load it with
        :meth:`part`). ``None`` if a reference has no ``items`` (written before them:
        the caller reads the whole list). References whose ranges do not follow each
        other from item 0 are :class:`arrayds.CorruptionError` naming the first that
        does not."""
        spans = self._item_spans()
        if spans is None:
            return None
        return self._descend(np.searchsorted(spans[1][1:], items, side="right"), items, 1)

    def holding_entries(
        self, positions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """``(segment, entries before it, its first item)`` of each entry position of
        the list, by binary search on the references' ``count`` (segment
        :attr:`nsegments`: the tail, for positions from ``len(self)`` on; first items
        ``None`` if a reference has no ``items``)."""
        self._item_spans()
        entry0 = self._spans[0]
        h = np.searchsorted(entry0[1:], positions, side="right")
        return self._descend(h, positions, 0)

    def part(self, k: int) -> list[Any]:
        """The entries of segment ``k`` (checked against its reference), or the tail
        for ``k ==`` :attr:`nsegments`."""
        return self.tail if k == self.nsegments else self.load(k)

    def _descend(self, h: np.ndarray, keys: np.ndarray, by: int) -> Any:
        """From the head reference ``h`` of each of ``keys`` (entry positions,
        ``by=0``; items, ``by=1``) to its segment: ``(segment, entries before it, its
        first item)``, the indexes that hold them loaded."""
        entry0, item0 = self._spans[:2]
        seg = self._first[h].copy()
        e0 = entry0[h].copy()
        i0 = None if item0 is None else item0[h].copy()
        for i in np.unique(h).tolist():
            if i < len(self.refs) and _is_index_ref(self.refs[i]):
                sel = h == i
                sub = self._within(i)
                j = np.searchsorted(sub[by][1:], keys[sel], side="right")
                seg[sel] += j
                e0[sel] = sub[0][j]
                if i0 is not None:
                    i0[sel] = sub[1][j]
        return seg, e0, i0

    def _within(self, i: int) -> Any:
        """The first entry position and first item (``None`` without ``items``) of each
        segment the index of head reference ``i`` holds, then of what follows it."""
        got = self._spans[2].get(i)
        if got is None:
            entry0, item0 = self._spans[:2]
            refs = self._index(i)
            e = entry0[i] + np.concatenate([[0], np.cumsum([r["count"] for r in refs])])
            it = None
            if item0 is not None:
                it = np.zeros(len(refs) + 1, dtype=np.int64)
                it[0] = item0[i]
                for k, ref in enumerate(refs):
                    self._check_follows(ref, int(it[k]))
                    it[k + 1] = ref["items"][1]
            got = (e.astype(np.int64), it)
            self._spans[2][i] = got
        return got

    def _check_follows(self, ref: Any, first: int) -> None:
        span = ref.get("items") if isinstance(ref, dict) else None
        if not _is_span(span):
            _check_ref(ref, self._what)  # names it
            raise CorruptionError(f"{self._what}: manifest segment reference {ref!r} has no items")
        if span[0] != first:
            raise CorruptionError(
                f"{self._what}: manifest segment {ref.get('path')!r}: its "
                f"reference's items {span!r} do not start at item {first}, "
                f"where the segment before it ends"
            )

    def _item_spans(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The first entry position and first item of each head reference and of the
        tail (cached; items ``None`` if a reference has no ``items``)."""
        if self._spans is None:
            len(self)  # every count checked
            counts = [r["count"] for r in self.refs] + [len(self.tail)]
            entry0 = np.zeros(len(counts), dtype=np.int64)
            np.cumsum(counts[:-1], out=entry0[1:])
            item0: np.ndarray | None = None
            if all(isinstance(r, dict) and "items" in r for r in self.refs):
                item0 = np.zeros(len(counts), dtype=np.int64)
                for k, ref in enumerate(self.refs):
                    self._check_follows(ref, int(item0[k]))
                    item0[k + 1] = ref["items"][1]
            self._spans = (entry0, item0, {})
        entry0, item0 = self._spans[:2]
        return None if item0 is None else (entry0, item0)


class Fresh(list):  # type: ignore[type-arg]
    """A whole shard list that :func:`encode` writes anew (segments of at most
    :data:`SEGMENT_LIMIT` entries, each with its summary) even where it equals the
    stored one: what :func:`arrayds.nodes.commit.upgrade` gives a list stored before
    segment summaries.

    >>> Fresh([{"path": "a"}])
    [{'path': 'a'}]
    """


def needs_index(head: Mapping[str, Any], keys: Sequence[str] = ("records",)) -> bool:
    """Whether the node's own shard list, as the head ``head`` stores it, has a
    segment written before segment summaries (a reference without one of ``keys``,
    the :func:`summary` keys the node's kind reads by: ``records``, and ``items`` for
    a ragged array) or longer than :data:`SEGMENT_LIMIT` entries (a reader then loads
    it for any chunk it looks for), or more than :data:`INDEX_LIMIT` segment
    references after its last index (written before indexes: every open reads them
    all).

    >>> needs_index({"shards": {"segments": [{"path": "_arrayds/log/a.json", "count": 40}],
    ...                         "tail": []}})
    True
    >>> needs_index({"shards": {"segments": [{"path": "_arrayds/log/a.json", "count": 4,
    ...     "records": 9}], "tail": []}}, ("records", "items"))
    True
    """
    value = head.get("shards")
    if not _is_log(value) or not isinstance(value["segments"], list):
        return False
    segs = value["segments"]
    last = max((i for i, r in enumerate(segs) if _is_index_ref(r)), default=-1)
    after = len(segs) - 1 - last
    return after > INDEX_LIMIT or any(
        isinstance(r, dict)
        and (
            any(k not in r for k in keys)
            or (
                not _is_index_ref(r)
                and (not _is_count(r.get("count")) or r["count"] > SEGMENT_LIMIT)
            )
        )
        for r in segs
    )


def _members(head: Mapping[str, Any]) -> dict[str, Any] | None:
    snap = head.get("snapshot")
    members = snap.get("members") if isinstance(snap, dict) else None
    return members if isinstance(members, dict) else None


MAX_NESTING = 64
"""The deepest a tree snapshot's subgroups nest that :func:`list_paths` follows (a
forged manifest nesting deeper is refused by the group parser, not walked)."""


def list_paths(manifest: Any, depth: int = 0) -> list[tuple[str, ...]]:
    """The paths of the shard lists a manifest (logical or stored) holds: its own
    ``shards``, those of its snapshot's members, and, through the subgroups a tree's
    snapshot lists (docs/spec.md 10.4), those of their members, at any depth. Every
    list a head holds is stored, resolved and read the same way (docs/spec.md 14.2).

    >>> list_paths({"shards": [], "snapshot": {"members": {"g": {"kind": "group",
    ...     "snapshot": {"members": {"v": {"shards": []}}}}}}})
    [('shards',), ('snapshot', 'members', 'g', 'snapshot', 'members', 'v', 'shards')]
    """
    out: list[tuple[str, ...]] = []
    if not isinstance(manifest, Mapping) or depth > MAX_NESTING:
        return out
    if "shards" in manifest:
        out.append(("shards",))
    for name, m in (_members(manifest) or {}).items():
        out += [("snapshot", "members", name, *p) for p in list_paths(m, depth + 1)]
    return out


def _at(manifest: Any, path: Sequence[str]) -> Any:
    """The value at ``path`` in ``manifest`` (``None`` where a level is missing)."""
    for p in path:
        manifest = manifest.get(p) if isinstance(manifest, Mapping) else None
    return manifest


def _with(manifest: Mapping[str, Any], path: Sequence[str], value: Any) -> dict[str, Any]:
    """A copy of ``manifest`` with ``value`` at ``path`` (each level on the way copied,
    the rest shared)."""
    out = dict(manifest)
    out[path[0]] = value if len(path) == 1 else _with(out[path[0]], path[1:], value)
    return out


def _where(path: Sequence[str]) -> str:
    """The folder (relative to the node) of the files the list at ``path`` names:
    ``""`` for the node's own, the member's name, ``group/member`` in a tree."""
    return "/".join(path[2::3])


def resolve(
    store: Store, node: str, head: Mapping[str, Any], what: str, *, lazy: bool = False
) -> dict[str, Any]:
    """The logical manifest of a stored head: its shard logs replaced by their entries
    (the head itself if it holds none, as every format 1 manifest). ``lazy``: each
    list that is a log with segments (the node's own ``shards`` and those of its
    snapshot's members) is a :class:`ShardLog` instead, whose segments load when used
    (the open of a long list costs its head only)."""

    def one(value: Any, where: str) -> Any:
        if lazy and _is_log(value) and value.get("segments"):
            return ShardLog(store, node, value, where)
        return _resolve_list(store, node, value, where)

    out = dict(head)
    for path in list_paths(head):
        value = _at(out, path)
        if isinstance(value, dict):  # a log (a plain list stands for itself)
            out = _with(out, path, one(value, f"{what} ({_where(path)})" if path[1:] else what))
    return out


def plain(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The logical manifest ``manifest`` with its lazy shard lists (:class:`Appended`,
    :class:`ShardLog`: the node's own and its snapshot members') read into plain
    lists: what a manifest stored whole (format version 1) holds.

    >>> plain({"shards": Appended([{"path": "a"}], [{"path": "b"}], (1, "w"))})
    {'shards': [{'path': 'a'}, {'path': 'b'}]}
    """
    out = dict(manifest)
    for path in list_paths(manifest):
        if isinstance(_at(out, path), (Appended, ShardLog)):
            out = _with(out, path, list(_at(out, path)))
    return out


def kept(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The logical manifest ``manifest`` as read lazily (:func:`resolve` with
    ``lazy``), each of its snapshot members' shard lists that is a :class:`ShardLog`
    given as an :class:`Appended` of nothing to the member's ``(generation,
    commit)``: a commit of it (a group's attributes changed) then keeps those lists
    as stored, never reading them.

    >>> kept({"snapshot": {"members": {"v": {"generation": 2, "commit": "w", "shards": []}}}})
    {'snapshot': {'members': {'v': {'generation': 2, 'commit': 'w', 'shards': []}}}}
    """
    out = dict(manifest)
    for path in list_paths(manifest):
        value, stamp = _at(out, path), _stamp(_at(out, path[:-1]))
        if path[1:] and isinstance(value, ShardLog) and stamp is not None:
            out = _with(out, path, Appended(value, [], stamp))
    return out


def has_index(head: Mapping[str, Any]) -> bool:
    """Whether one of the shard lists the stored head ``head`` holds has an index.

    >>> has_index({"shards": {"segments": [{"path": "_arrayds/log/a.json", "count": 9,
    ...     "refs": 2}], "tail": []}})
    True
    """
    lists = [_at(head, path) for path in list_paths(head)]
    return any(
        _is_log(v) and isinstance(v["segments"], list) and any(map(_is_index_ref, v["segments"]))
        for v in lists
    )


def log_files(store: Store, node: str, head: Mapping[str, Any]) -> set[str]:
    """The segment and index files (relative to the node) a stored head names, those
    its indexes name included (each index is read). A missing or damaged index raises
    :class:`arrayds.CorruptionError`.

    >>> from arrayds.storage import new_store
    >>> sorted(log_files(new_store("memory://log-files-doc"), "", {"shards": {"segments":
    ...     [{"path": "_arrayds/log/a.json", "count": 1}], "tail": []}}))
    ['_arrayds/log/a.json']
    """
    out: set[str] = set()
    what = store.display(node)
    for value in (_at(head, path) for path in list_paths(head)):
        if _is_log(value) and isinstance(value["segments"], list):
            for r in value["segments"]:
                if isinstance(r, dict) and isinstance(r.get("path"), str):
                    out.add(r["path"])
                    if _is_index_ref(r):
                        out |= {leaf["path"] for leaf in index(store, node, r, what)}
    return out


def _append(
    store: Store,
    node: str,
    log: Any,
    added: Sequence[Any],
    written: list[str],
    write_id: str | None,
) -> dict[str, Any]:
    """The shard log ``log`` (stored form, or a plain list) with ``added`` appended."""
    if _is_log(log):
        segs, tail = list(log["segments"]), [*log["tail"], *added]
    else:
        segs, tail = [], [*(log if isinstance(log, list) else []), *added]
    if len(tail) <= TAIL_LIMIT:
        if not segs:
            return tail
        return {"segments": _roll_up(store, node, segs, written, write_id), "tail": tail}
    # the tail becomes a segment, merged first with the last segments while the older
    # one is less than twice the size of what follows it and the two fit in one
    # segment (one file written); a tail longer than a segment becomes several
    entries = tail
    while (
        segs
        and not _is_index_ref(segs[-1])
        and segs[-1]["count"] < 2 * len(entries)
        and segs[-1]["count"] + len(entries) <= SEGMENT_LIMIT
    ):
        entries = [*segment(store, node, segs.pop(), store.display(node)), *entries]
    new = _write_segments(store, node, entries, write_id)
    segs += new
    written += [r["path"] for r in new]
    return {"segments": _roll_up(store, node, segs, written, write_id), "tail": []}


def _fresh(store: Store, node: str, entries: Any, written: list[str], write_id: str | None) -> Any:
    """A shard list written anew (not a list: kept as it is, for the kind to refuse)."""
    if not isinstance(entries, list):
        return entries
    return _append(store, node, None, entries, written, write_id)


def _encode_list(
    store: Store,
    node: str,
    new: Any,
    stored: Any,
    current: Callable[[], Any],
    written: list[str],
    owner: tuple[int, str] | None = None,
    write_id: str | None = None,
) -> tuple[Any, list[Any]]:
    """Store the list ``new`` given the stored form of the list it replaces (held by
    a manifest stamped ``owner``): appended to it when ``new`` starts with the
    current entries (known without looking at them for an :class:`Appended` of that
    manifest), else written anew. Returns it and the entries that are not the
    current ones' (what the write adds)."""
    if isinstance(new, Appended):
        fits = new.count == 0 or (
            owner is not None and new.stamp == owner and _stored_count(stored) == new.count
        )
        refs = new.segments.get(node) if new.segments else None
        if fits and (refs is not None or not new.segments):
            what = store.display(node)
            kept = stored if new.count else None
            if new.drop:
                drop = _as_log(store, node, kept, what).positions(new.drop)
                kept = _dropped(store, node, kept, drop, written, write_id)
            if refs is not None:
                kept = _then_segments(store, node, kept, refs.refs, written, write_id)
            return _append(store, node, kept, new.added, written, write_id), new.added
        new = list(new)  # another manifest's list: compared as any list
    if stored is None or not isinstance(new, list):
        return _fresh(store, node, new, written, write_id), new if isinstance(new, list) else []
    if isinstance(new, Fresh):
        return _fresh(store, node, list(new), written, write_id), []
    old = current()
    if isinstance(old, list) and len(new) >= len(old) and new[: len(old)] == old:
        added = new[len(old) :]
        return _append(store, node, stored, added, written, write_id), added
    return _fresh(store, node, new, written, write_id), new


def encode(
    store: Store,
    node: str,
    new: Mapping[str, Any],
    base: Mapping[str, Any] | None,
    current: Callable[[], Mapping[str, Any] | None] | None = None,
    added: dict[str, list[Any]] | None = None,
    write_id: str | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The head (format 2) that stores the logical manifest ``new``, given the stored
    head ``base`` it replaces (``None``: none) and ``current()``, the logical manifest
    of ``base``. Returns it and the segment files written for it (relative to the
    node; they must be durable before the head is). ``added``, if given, receives the
    entries of each list that the current manifest does not have, by the folder of
    its files (``""``: the node's own shards, else the snapshot member's name, or
    ``group/member`` below a tree snapshot's subgroup). Every list :func:`list_paths`
    finds is stored so, in the node's own folder. New segments are named after
    ``write_id``, the write that commits the head."""
    written: list[str] = []
    added = {} if added is None else added
    head = dict(new)
    full = (lambda: current() if current is not None else None) if base is not None else None

    def base_list(path: tuple[str, ...]) -> tuple[Any, Callable[[], Any], Any]:
        stored = _at(base, path)

        def cur() -> Any:
            if full is None or current is None:
                return None
            if _is_log(stored):  # only this list's segments, not every list of the head
                return _resolve_list(store, node, stored, store.display(node))
            if isinstance(stored, list):  # inline: the list itself
                return stored
            return _at(full(), path)

        return stored, cur, _stamp(_at(base, path[:-1]))

    for path in list_paths(head):
        stored, cur, owner = base_list(path)
        enc, added[_where(path)] = _encode_list(
            store, node, _at(head, path), stored, cur, written, owner, write_id
        )
        head = _with(head, path, enc)
    return head, written


def extend(
    store: Store,
    node: str,
    change: Extend,
    base: Mapping[str, Any],
    write_id: str | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The head (format 2) of ``base`` (a stored head) changed by ``change``, and the
    segment files written for it (named after ``write_id``, the write that commits
    the head)."""
    written: list[str] = []
    if change.fresh:
        base = {}
    head = {**base, **change.fields}
    stored = base.get("shards")
    if change.drop:
        stored = _dropped(store, node, stored, change.drop, written, write_id)
    if change.segments:
        stored = _then_segments(store, node, stored, change.segments, written, write_id)
    head["shards"] = _append(store, node, stored, list(change.shards), written, write_id)
    return head, written


def _then_segments(
    store: Store,
    node: str,
    stored: Any,
    refs: Sequence[Mapping[str, Any]],
    written: list[str],
    write_id: str | None,
) -> dict[str, Any]:
    """The stored shard list ``stored`` followed by the segments ``refs`` (written
    before the commit, each checked): its tail first becomes segments, so the current
    entries stay before the new ones."""
    what = store.display(node)
    for ref in refs:
        _check_ref(ref, what)
    segs = list(stored["segments"]) if _is_log(stored) else []
    tail = list(stored["tail"]) if _is_log(stored) else list(stored or [])
    if tail:
        new = _write_segments(store, node, tail, write_id)
        segs += new
        written += [r["path"] for r in new]
    return {"segments": [*segs, *(dict(r) for r in refs)], "tail": []}


def write_segments(
    store: Store, node: str, entries: Sequence[Any], write_id: str | None = None
) -> list[dict[str, Any]]:
    """Write ``entries`` as new immutable segments of ``node`` (at most
    :data:`SEGMENT_LIMIT` entries each, uniquely named after ``write_id``, the write
    whose pending marker keeps them from gc until its commit) and return their
    references (with their summaries), for an :class:`Extend`'s ``segments``. Nothing
    is visible until a commit's head names them.

    >>> import arrayds
    >>> st = arrayds.open("memory://doc-write-segments", mode="w").store
    >>> [r["count"] for r in write_segments(st, "x", [{"path": "c/a"}] * 3)]
    [3]
    """
    return _write_segments(store, node, list(entries), write_id)


def newest(store: Store, node: str, stored: Any, k: int, what: str) -> list[tuple[str, int, Any]]:
    """The last ``k`` entries of the stored shard list ``stored`` (a plain list or a
    log) with where they are (:meth:`ShardLog.newest`), reading only the segments that
    hold them.

    >>> newest(None, "", [{"path": "a"}, {"path": "b"}, {"path": "c"}], 2, "doc")
    [('', 1, {'path': 'b'}), ('', 2, {'path': 'c'})]
    """
    return _as_log(store, node, stored, what).newest(k)


def _as_log(store: Store, node: str, stored: Any, what: str) -> ShardLog:
    """The stored shard list ``stored`` (a plain list is all tail) read lazily."""
    if not _is_log(stored):
        stored = {"segments": [], "tail": stored if isinstance(stored, list) else []}
    return ShardLog(store, node, stored, what)


def by_segment(found: Sequence[tuple[str, int, Any]]) -> dict[str, list[int]]:
    """The positions of the entries ``found`` (as :func:`newest` gives them) by the
    path of their segment: what an :class:`Extend`'s ``drop`` names.

    >>> by_segment([("s", 4, {}), ("", 0, {}), ("", 1, {})])
    {'s': [4], '': [0, 1]}
    """
    out: dict[str, list[int]] = {}
    for path, pos, _e in found:
        out.setdefault(path, []).append(pos)
    return out


def _dropped(
    store: Store,
    node: str,
    stored: Any,
    drop: Mapping[str, Sequence[int]],
    written: list[str],
    write_id: str | None,
) -> Any:
    """The stored shard list ``stored`` without the entries ``drop`` names (positions
    by segment path, ``""`` the tail): each segment named is written anew without
    them (left out if nothing remains), the others stay as they are."""
    what = store.display(node)
    segs = list(stored["segments"]) if _is_log(stored) else []
    tail = list(stored["tail"]) if _is_log(stored) else list(stored or [])
    # the indexes are loaded from the last on, only while a segment to rewrite is
    # not found yet (a merge or a region near the end loads none or one)
    paths = {r["path"] for r in segs if not _is_index_ref(r)}
    held: dict[int, list[dict[str, Any]]] = {}
    for i in reversed(range(len(segs))):
        if not set(drop) - {""} - paths:
            break
        if _is_index_ref(segs[i]):
            held[i] = index(store, node, segs[i], what)
            paths |= {leaf["path"] for leaf in held[i]}
    for p, pos in drop.items():
        n = len(tail) if p == "" else None
        if p != "" and p not in paths:
            raise ValueError(f"{what}: no segment {p!r} in the shard list to drop entries from")
        if n is not None and any(not 0 <= i < n for i in pos):
            raise ValueError(f"{what}: positions {list(pos)} are not in the tail")

    def without(ref: dict[str, Any]) -> list[dict[str, Any]]:
        pos = drop.get(ref["path"])
        if not pos:
            return [ref]
        gone = set(pos)
        n = ref.get("count")
        if _is_count(n) and gone == set(range(n)):  # every entry dropped: nothing to read
            return []
        entries = segment(store, node, ref, what, cache=False)
        if any(not 0 <= i < len(entries) for i in gone):
            raise ValueError(f"{what}: positions {sorted(gone)} are not in {ref['path']!r}")
        kept = [e for i, e in enumerate(entries) if i not in gone]
        if not kept:
            return []
        written.append((new := _write_segment(store, node, kept, write_id))["path"])
        return [new]

    out: list[Any] = []
    for i, ref in enumerate(segs):
        if _is_index_ref(ref) and i not in held:  # none of its segments changes
            out.append(ref)
            continue
        if i not in held:
            out += without(ref)
            continue
        leaves = [r for leaf in held[i] for r in without(leaf)]
        if leaves == held[i]:
            out.append(ref)
        elif leaves:  # the index anew, with the segments rewritten
            written.append((new := _write_index(store, node, leaves, write_id))["path"])
            out.append(new)
    gone_tail = set(drop.get("", ()))
    tail = [e for i, e in enumerate(tail) if i not in gone_tail]
    return {"segments": out, "tail": tail} if out else tail
