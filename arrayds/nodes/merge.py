"""The tiered merge of appended shards and the contracts of compaction.

A kind takes part through its registry record (:class:`arrayds.nodes.registry.NodeKind`):
``usage`` (which of its files' bytes are live: :class:`Usage`), ``tail_sizes`` (what
the tiered merge weighs), ``compact`` (its live data rewritten into new shards:
:class:`Rewrite`), ``with_shards`` and ``place_tail``; nothing here names a kind.
:func:`tiered` is the one mechanism of the tiered merge (a hook every append passes
to its own commit); ``arrayds compact``
(:mod:`arrayds.tools.compact`) drives whole-node compaction.

>>> tail_to_merge([1] * 8, limit=100)
8
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import wait
from dataclasses import dataclass, field
from typing import Any

from ..abc.store import Store
from ..errors import CommitConflictError
from . import commit, pending
from . import history as log
from . import registry as kinds
from .names import join_component
from .shards import IO_THREADS, io_pool

AUTO_COMPACT_FILES = 64
"""How many small shard files make ``to_arrayrecord(..., compact=True)`` compact a node
after its write: a node grown by small appends is rewritten once every 64 or so
appends, so the rewrite costs each append about 1/64 of the node's size, and the node
never holds more than about 64 small files (opens and reads stay fast)."""

DEFAULT_SHARD_SIZE = 64 << 20
"""The default target size of a compacted shard: 64 MiB as stored. Large enough that
the per-file costs (an open, a footer read, on object stores a request of tens of
milliseconds) vanish against the data moved, small enough that a shard is a sensible
unit of parallel work and of a ranged download, and the size the writers aim at
(ragged arrays' ``SHARD_BYTES``)."""

MERGE_FACTOR = 8
"""Tiered merging of appended shards (:func:`tail_to_merge`): how many small shards of
about one size the newest end of a node holds before they are merged into one. A node
grown by ``n`` equal appends then holds at most about ``(MERGE_FACTOR - 1) *
log_8(n)`` files (35 after 10,000 appends), each appended byte is copied about
``log_8(n)`` times, and one append in seven (amortized) merges."""


def parse_shard_size(shard_size: Any) -> int:
    """``shard_size`` as a positive number of bytes: an int, or a string such as
    ``"64MiB"`` (read with ``dask.utils.parse_bytes``); ``None`` is
    :data:`DEFAULT_SHARD_SIZE`. ``TypeError`` for other types, ``ValueError`` for a
    size that is not positive; both name ``shard_size``.

    >>> parse_shard_size("1MiB"), parse_shard_size(4096), parse_shard_size(None) >> 20
    (1048576, 4096, 64)
    >>> parse_shard_size(0)
    Traceback (most recent call last):
    ...
    ValueError: compact: shard_size must be a positive number of bytes, got 0
    """
    if shard_size is None:
        return DEFAULT_SHARD_SIZE
    if isinstance(shard_size, str):
        try:
            from dask.utils import parse_bytes
        except ImportError:  # pragma: no cover - dask is part of every array install
            raise ValueError(
                f"compact: shard_size {shard_size!r}: sizes as text need dask; give bytes"
            ) from None
        try:
            n = int(parse_bytes(shard_size))
        except (ValueError, KeyError):
            raise ValueError(
                f"compact: shard_size {shard_size!r} is not a size such as '64MiB'"
            ) from None
    elif isinstance(shard_size, int) and not isinstance(shard_size, bool):
        n = shard_size
    elif type(shard_size).__module__ == "numpy" and hasattr(shard_size, "__index__"):
        n = int(shard_size)
    else:
        raise TypeError(
            f"compact: shard_size must be an int (bytes) or a size such as '64MiB', got "
            f"{type(shard_size).__name__}"
        )
    if n < 1:
        raise ValueError(
            f"compact: shard_size must be a positive number of bytes, got {shard_size!r}"
        )
    return n


MAX_TAIL = 4 * MERGE_FACTOR
"""How many small shards the newest end of a node holds before appends of very
different sizes are merged by the looser rule of :func:`tail_to_merge`."""


def _balanced_run(sizes: Sequence[int], limit: int, least: int, gain: int) -> int:
    """The longest run of newest shards smaller than ``limit``, of at least ``least``
    shards, none more than ``1/gain`` of their total (0: none)."""
    best = total = biggest = 0
    for count, nbytes in enumerate(reversed(sizes), 1):
        if nbytes >= limit:
            break
        nbytes = max(nbytes, 1)
        total += nbytes
        biggest = max(biggest, nbytes)
        if count >= least and biggest * gain <= total:
            best = count
    return best


def tail_to_merge(sizes: Sequence[int], limit: int) -> int:
    """How many of the newest shards (the last of ``sizes``, their payload bytes) the
    tiered merge of an append rewrites into one; 0 if none.

    The rule, a size-tiered merge as in log-structured merge trees, over the newest
    shards smaller than ``limit`` (half of ``shard_size``; larger shards are never
    merged): the longest run of newest shards that holds at least
    :data:`MERGE_FACTOR` shards none of which is more than ``1/MERGE_FACTOR`` of
    their total. Equal appends thus merge as a base-8 counter (eight shards of one
    size make one of the next; a merge that completes eight of the next size takes
    them along: one rewrite). Appends of very different sizes can leave runs where one
    shard dominates; once the newest end holds :data:`MAX_TAIL` small shards, the
    longest run of two or more in which none is more than half of their total is
    merged as well. Every byte a merge copies lands in a file at least twice (mostly
    eight times) as large as the one it leaves: it is copied at most
    ``log_2(total / smallest)`` times, ``log_8`` for equal appends.

    >>> tail_to_merge([1024] * 7, 1 << 25), tail_to_merge([1024] * 8, 1 << 25)
    (0, 8)
    >>> tail_to_merge([8192] * 7 + [1024] * 8, 1 << 25)  # the cascade: one rewrite of 15
    15
    >>> tail_to_merge([65536] + [8192] * 7 + [1024] * 8, 1 << 25)  # 64 KiB stays
    15
    >>> tail_to_merge([1 << 25] + [1024] * 8, 1 << 25)  # a large shard is never merged
    8
    """
    run = _balanced_run(sizes, limit, MERGE_FACTOR, MERGE_FACTOR)
    if run:
        return run
    small = 0
    for nbytes in reversed(sizes):
        if nbytes >= limit or small >= MAX_TAIL:
            break
        small += 1
    return _balanced_run(sizes, limit, 2, 2) if small >= MAX_TAIL else 0


def may_merge(entries: Any) -> bool:
    """Whether the shard list of a stored array manifest (its ``"shards"`` JSON: a
    list, or a log of segments and a tail) may hold newest shards for the tiered merge
    to take; ``False`` only where it certainly does not (a check that reads nothing:
    the entries' chunk counts stand for their sizes, which differ from them by one
    factor per array). A log with segments is always ``True``.

    >>> may_merge([{"records": 1}] * 7), may_merge([{"records": 1}] * 8)
    (False, True)
    """
    if isinstance(entries, dict):
        if entries.get("segments"):
            return True
        entries = entries.get("tail")
    if not isinstance(entries, list) or len(entries) < MERGE_FACTOR:
        return False
    counts = [e.get("records") if isinstance(e, dict) else None for e in entries]
    if not all(isinstance(c, int) for c in counts):
        return True
    return tail_to_merge(counts, limit=1 << 62) > 0


def tiered(
    store: Store,
    node: str,
    appended: Sequence[str] | Mapping[str, Sequence[str]],
    *,
    shard_size: Any = None,
) -> TieredMerge:
    """The tiered merge of an append (``compact="tiered"``, the default of appends),
    as the ``merge`` hook of the append's own commit (:func:`arrayds.nodes.commit.commit`):
    one compare-and-swap commits the appended shards and, where the newest small
    shards of the node then fill a tier (:func:`tail_to_merge`), those shards merged
    into one (:func:`compact_tail`, byte for byte): one version per append, whatever
    its kind and path. ``appended``: the shard files the append wrote (relative to
    ``node``); or, for the commit of a group's xarray snapshot, member name -> the
    files written for that member array (relative to it): each such member is merged
    within the snapshot the commit builds.

    The hook reads only the manifest JSON the build made, and materialises an
    :class:`arrayds.nodes.commit.Extend` only when its shard list may hold a full
    tier (:func:`may_merge`). Its merged shard is removed if the put is refused (a
    retried commit merges again from its fresh read); the appended files the merge
    copied, which no version then names, are removed once the put landed (after a
    crash ``arrayds gc`` removes them).

    >>> import arrayds, numpy as np
    >>> from arrayds.nodes import commit
    >>> from arrayds.nodes.names import new_write_id
    >>> a = arrayds.open_array("memory://doc-tiered", mode="w", shape=(0,), dtype="i4",
    ...                        chunks=1)
    >>> for i in range(8):
    ...     _ = a.append(np.array([i], "i4"), compact=False)
    >>> hook = tiered(a.store, "", ())
    >>> _ = commit.commit(a.store, "", lambda base: base.raw, write_id=new_write_id(),
    ...                   merge=hook)
    >>> hook.merged is not None, arrayds.open_array("memory://doc-tiered").nshards
    (True, 1)
    >>> arrayds.open_array("memory://doc-tiered")[:].tolist()
    [0, 1, 2, 3, 4, 5, 6, 7]
    """
    # a list stays the caller's: an append that writes its shard again names the new one
    files = dict(appended) if isinstance(appended, Mapping) else {"": _as_list(appended)}
    return TieredMerge(store, node, files, parse_shard_size(shard_size))


def _as_list(files: Sequence[str]) -> list[str]:
    return files if isinstance(files, list) else list(files)


MERGE_WINDOW = 128
"""The most newest entries of a shard list that the tiered merge of an append weighs
and may rewrite into one (for a kind with a ``window``,
:attr:`arrayds.nodes.registry.NodeKind.window`): an append's commit then loads only
the tail and the last segments of a long list, and rewrites only the segments that
hold the entries it merged (:class:`arrayds.nodes.commit.Extend`'s ``drop``)."""


@dataclass
class _Tail:
    """A tiered merge of the newest entries of a shard list."""

    n: int
    """How many of the newest entries it merged."""
    entries: list[Any]
    """The JSON entries that take their place."""
    written: list[str]
    gone: list[str]
    marker: str


class TieredMerge:
    """The ``merge`` hook :func:`tiered` makes; ``merged`` holds what its last call
    made (``None``: no tier was full)."""

    def __init__(
        self, store: Store, node: str, appended: Mapping[str, Sequence[str]], shard_size: int
    ) -> None:
        self.store = store
        self.node = node
        self.appended = appended
        self.shard_size = shard_size
        self.merged: commit.Merged | None = None

    def __call__(
        self, base: commit.NodeVersion, change: Mapping[str, Any] | commit.Extend
    ) -> commit.Merged | None:
        self.merged = None
        if "" in self.appended:
            try:
                merged = self._node_merge(base, change, self.appended[""])
            except FileNotFoundError:
                if not self._moved(base):
                    raise  # the current version names a missing shard: damage, said
                merged = None
            self.merged = merged
            return self.merged
        assert not isinstance(change, commit.Extend)
        snap = change.get("snapshot")
        members = dict(snap.get("members") or {}) if isinstance(snap, dict) else {}
        written: list[str] = []
        gone: list[str] = []
        markers: list[str] = []
        try:
            for name, files in self.appended.items():
                doc = members.get(name)
                if not isinstance(doc, dict):
                    continue
                node = join_component(self.node, name)
                try:
                    got = self._list_merge(node, doc, files)
                except FileNotFoundError:
                    if not self._moved(base):
                        raise
                    continue
                if got is not None:
                    members[name], t = got
                    written += [f"{name}/{p}" for p in t.written]
                    gone += [f"{name}/{p}" for p in t.gone]
                    markers.append(t.marker)
        except BaseException:
            _delete(self.store, self.node, written)
            for wid in markers:
                pending.end(self.store, self.node, wid)
            raise
        if written:
            doc = {**change, "snapshot": {**snap, "members": members}}  # type: ignore[dict-item]
            self.merged = commit.Merged(doc, written, gone, tuple(markers))
        return self.merged

    def _moved(self, base: commit.NodeVersion) -> bool:
        """Whether the node's head is no longer ``base``: then a shard of a tier that
        is gone was merged away by another writer and removed by ``arrayds gc``, and
        the append commits unmerged (its put is refused, its retry merges from a
        fresh read; the merge is never needed for the append itself)."""
        return commit.read(self.store, self.node).stamp != base.stamp

    def _node_merge(
        self,
        base: commit.NodeVersion,
        change: Mapping[str, Any] | commit.Extend,
        appended: Sequence[str],
    ) -> commit.Merged | None:
        """The merge of the node's own list: ``change`` (a whole manifest, or an
        :class:`commit.Extend` of ``base``) with its newest small shards merged."""
        if not isinstance(change, commit.Extend):
            got = self._list_merge(self.node, change, appended)
            if got is None:
                return None
            doc, t = got
            return commit.Merged(doc, t.written, t.gone, markers=(t.marker,))
        if change.drop or change.segments:  # a region write, or a list too long to weigh
            return None
        doc = dict(change.fields) if change.fresh else {**(base.head or {}), **change.fields}
        kind = _merging(doc)
        if kind is None:
            return None
        if kind.window is None:  # the whole list, as a whole manifest
            return self._node_merge(base, commit.materialize(base, change), appended)
        new = list(change.shards)
        stored = None if change.fresh else (base.head or {}).get("shards")
        olds = log.newest(self.store, self.node, stored, MERGE_WINDOW - len(new), base.what)
        window = [*(e for _p, _i, e in olds), *new][-MERGE_WINDOW:]
        t = self._merge(self.node, kind, doc, window, appended)
        if t is None:
            return None
        if t.n <= len(new):
            shards = [*new[: len(new) - t.n], *t.entries]
            merged = commit.Extend(change.fields, shards, fresh=change.fresh)
        else:
            drop = log.by_segment(olds[len(olds) - (t.n - len(new)) :])
            merged = commit.Extend(change.fields, t.entries, drop=drop, fresh=change.fresh)
        return commit.Merged(merged, t.written, t.gone, markers=(t.marker,))

    def _list_merge(
        self, node: str, doc: Mapping[str, Any], appended: Sequence[str]
    ) -> tuple[dict[str, Any], _Tail] | None:
        """``doc`` (a whole manifest of ``node``: its shard list a list, or an
        :class:`arrayds.nodes.history.Appended` whose stored entries are read only
        as far back as the window) with its newest small shards merged."""
        kind = _merging(doc)
        if kind is None:
            return None
        shards = doc.get("shards")
        what = f"{kind.a()} {self.store.display(node)!r}"
        if isinstance(shards, log.Appended) and shards.segments:
            return None  # a write too long to weigh (its entries are not at hand)
        if isinstance(shards, log.Appended) and not shards.drop and kind.window is not None:
            new = shards.added
            before = shards.before
            k = MERGE_WINDOW - len(new)
            if isinstance(before, log.ShardLog):
                olds = before.newest(k)
            else:
                olds = log.newest(self.store, node, list(before), k, what)
            window = [*(e for _p, _i, e in olds), *new][-MERGE_WINDOW:]
            t = self._merge(node, kind, doc, window, appended)
            if t is None:
                return None
            if t.n <= len(new):
                out = log.Appended(before, [*new[: len(new) - t.n], *t.entries], shards.stamp)
            else:
                gone = range(len(before) - (t.n - len(new)), len(before))
                out = log.Appended(before, t.entries, shards.stamp, drop=gone)
            return {**doc, "shards": out}, t
        if not isinstance(shards, (list, log.Appended, log.ShardLog)):
            return None
        entries = list(shards)
        window = entries[-MERGE_WINDOW:] if kind.window is not None else entries
        t = self._merge(node, kind, doc, window, appended)
        if t is None:
            return None
        return {**doc, "shards": [*entries[: len(entries) - t.n], *t.entries]}, t

    def _merge(
        self,
        node: str,
        kind: kinds.NodeKind,
        doc: Mapping[str, Any],
        window: list[Any],
        appended: Sequence[str],
    ) -> _Tail | None:
        """The tiered merge of ``window``, the newest entries (JSON) of the shard list
        of ``node`` (manifest ``doc``): ``None`` if no tier is full, else how many of
        them it merged and what replaces them, the merged files, the ``appended``
        files merged away and the write id the merged files are named after (its
        pending marker is in the committed node, :attr:`commit.Merged.markers`)."""
        if not may_merge(window):
            return None
        what = f"{kind.a()} {self.store.display(node)!r}"
        whole = kind.window(doc, window) if kind.window is not None else {**doc, "shards": window}
        m = kind.parse(whole, what)
        sizes = kind.tail_sizes(m)  # type: ignore[misc]
        n = tail_to_merge(sizes, self.shard_size // 2) if sizes else 0
        if n == 0:
            return None
        # the merged shard's own name: an append's files are named after its write id
        wid = pending.begin(self.store, self.node)
        with pending.uploading(self.store, self.node, wid):
            rw = rewrite(self.store, node, kind, m, self.shard_size, wid, tail=n)
        entries = rw.manifest.to_json()["shards"][len(window) - n :]
        return _Tail(n, entries, list(rw.written), _merged_away(m.shards, n, appended), wid)


def _merging(doc: Mapping[str, Any]) -> kinds.NodeKind | None:
    """The kind of the manifest ``doc`` if it has tiered merges."""
    kind = kinds.find(doc.get("kind"))
    if kind is None or kind.tail_sizes is None or kind.compact is None:
        return None
    return kind


def _delete(store: Store, node: str, files: Sequence[str]) -> None:
    """Remove ``files`` (relative to ``node``), best effort (leftovers: gc)."""
    try:
        store.delete([join_component(node, p) for p in files])
    except Exception:  # noqa: BLE001 - best effort: leftovers are orphans (gc)
        pass


def rewrite(
    store: Store,
    node: str,
    kind: kinds.NodeKind,
    m: Any,
    size: int,
    write_id: str,
    tail: int = 0,
) -> Rewrite:
    """The kind's rewrite of a node (with ``tail``: of its newest ``tail`` entries,
    :func:`compact_tail`); the shards it wrote go if it fails."""
    written: list[str] = []
    assert kind.compact is not None
    try:
        if tail:
            return compact_tail(
                store, node, m, tail, shard_size=size, write_id=write_id, written=written
            )
        return kind.compact(store, node, m, shard_size=size, write_id=write_id, written=written)
    except BaseException:
        _delete(store, node, written)
        raise


def _merged_away(entries: Sequence[Any], n: int, appended: Sequence[str]) -> list[str]:
    """The files of ``appended`` (named by the last entries of ``entries`` only) that
    no entry names once the last ``n`` entries are merged: those whose entries all lie
    in the merged tail."""
    if not appended:
        return []
    named = set(appended)
    cut = len(entries) - n
    tail = {e.path for e in entries[cut:]}
    kept = set()
    while cut > 0 and entries[cut - 1].path in named:  # the appended entries left whole
        cut -= 1
        kept.add(entries[cut].path)
    return [p for p in appended if p in tail and p not in kept]


def commit_rewrite(
    store: Store,
    node: str,
    rw: Rewrite,
    write_id: str,
    stamp: tuple[int, str] | None,
    what: str,
    conflict: Callable[[commit.NodeVersion], str],
) -> dict[str, Any]:
    """Commit the manifest of ``rw`` if the node is still at ``stamp`` (else
    :class:`CommitConflictError` with the message ``conflict(now)`` and the shards of
    ``rw`` removed). ``write_id``: the write its shards are named after, whose pending
    marker (:func:`arrayds.nodes.pending.begin`) was put before they were written."""

    def check(now: commit.NodeVersion) -> None:
        if now.stamp != stamp:
            raise CommitConflictError(conflict(now))

    return commit.commit(
        store,
        node,
        lambda now: rw.manifest.to_json(),
        write_id=write_id,
        check=check,
        written=rw.written,
        parents=False,
        what=what,
        registered=True,
    )


__all__ = [
    "FileUse",
    "Rewrite",
    "TieredMerge",
    "TooFragmentedError",
    "Usage",
    "compact_tail",
    "entry_sizes",
    "tiered",
    "usage",
    "whole_files",
]


class TooFragmentedError(ValueError):
    """An array whose entries cut its chunk grid into more than :data:`CELL_LIMIT`
    cells: its liveness is not mapped (compaction skips it)."""


@dataclass(frozen=True)
class FileUse:
    """One shard file of a node: its size and its live part."""

    path: str
    bytes: int | None
    """The file's size (``None``: neither the manifest nor the caller knows it)."""
    records: int
    live_records: int


@dataclass(frozen=True)
class Usage:
    """What :func:`usage` measured of a node's manifest."""

    files: list[FileUse]
    entries: int
    live_entries: int


@dataclass
class Rewrite:
    """A node's live data rewritten into new shards (not committed yet)."""

    manifest: Any
    """The node's next manifest object (its kind's), naming only the new shards."""
    written: list[str] = field(default_factory=list)
    """The new shard files, relative to the node."""
    bytes_written: int = 0


def sized_file(path: str, recorded: int | None, sizes: Mapping[str, int] | None) -> int | None:
    if recorded:
        return recorded
    if sizes is not None and path in sizes:
        return sizes[path]
    return recorded


Box = tuple[tuple[int, ...], tuple[int, ...]]


def in_parallel(fn: Callable[[Any], Any], args: Sequence[Any], store: Store) -> Iterator[Any]:
    """``fn(a)`` for each of ``args``, in order, run on :func:`arrayds.nodes.shards.io_pool`
    with a bounded number in flight (reads of many small old shards, each a request on
    an object store, overlap). On a local store they run in the calling thread: the
    page cache or the disk answers a read at once, and the engine decodes a batch on
    its own threads already; handing reads to the pool cost more than they overlapped
    (the tiered merge of eight small shards: 1-2 ms of 8)."""
    if len(args) <= 1 or store.local:
        yield from (fn(a) for a in args)
        return
    pool = io_pool()
    window = 2 * IO_THREADS
    futures = [pool.submit(fn, a) for a in args[:window]]
    try:
        for i in range(len(args)):
            if i + window < len(args):
                futures.append(pool.submit(fn, args[i + window]))
            yield futures[i].result()
            futures[i] = None  # type: ignore[call-overload]
    finally:  # left early (an error, a closed generator): no read outlives the merge
        live = [f for f in futures if f is not None]
        for f in live:
            f.cancel()
        wait(live)


UNWEIGHED = 1 << 62
"""The size :func:`entry_sizes` gives an entry whose bytes its manifest does not
record: larger than any merge limit, so the tiered merge leaves it (compaction weighs
it by its file)."""


def entry_sizes(manifest: Any) -> list[int] | None:
    """The payload of each entry of a parsed manifest's shard list in bytes (what the
    tiered merge of appended shards weighs: before compression for arrays and records,
    as stored for ragged arrays, whose manifests record no other size), or ``None``
    for a kind without shards to merge by tiers.

    >>> from arrayds.kinds.array.manifest import ArrayManifest, ShardEntry
    >>> m = ArrayManifest.new((4,), "f8", ((2, 2),)).with_(shards=[
    ...     ShardEntry("c/a", (0,), (2,)), ShardEntry("c/b", (1,), (2,))])
    >>> entry_sizes(m)
    [32, 16]
    """
    kind = kinds.find(getattr(manifest, "kind", None))
    return None if kind is None or kind.tail_sizes is None else kind.tail_sizes(manifest)


def whole_files(manifest: Any, n: int) -> int:
    """``n`` grown until the last ``n`` entries of the shard list hold every entry of
    the files they name (several entries of an array can share a file)."""
    entries = manifest.shards
    paths = {e.path for e in entries[len(entries) - n :]} if n else set()
    while n < len(entries) and entries[len(entries) - n - 1].path in paths:
        n += 1
    return n


def compact_tail(
    store: Store,
    node: str,
    manifest: Any,
    n: int,
    *,
    shard_size: int,
    write_id: str,
    written: list[str],
) -> Rewrite:
    """Rewrite only the last ``n`` entries of the shard list of an array, records or
    ragged manifest (their files whole, :func:`whole_files`) into new shards, as
    :func:`compact_array` / :func:`compact_records` / :func:`compact_ragged` rewrite
    a whole node; the entries before them stay as they are. The new entries take the
    place of the old ones at the end of the list, so what every read selects is
    unchanged: an array's newer entries still hide the older ones, a records dataset
    and a ragged array keep their order (a ragged array's new entries start at the
    first item of the old ones)."""
    entries = list(manifest.shards)
    keep, tail = entries[: len(entries) - n], entries[len(entries) - n :]
    kind = kinds.get(manifest.kind)
    if kind.compact is None or kind.tail_sizes is None:
        raise ValueError(f"no tiered merging for {manifest.kind} nodes")
    rw = kind.compact(
        store,
        node,
        kind.with_shards(manifest, tail),
        shard_size=shard_size,
        write_id=write_id,
        written=written,
    )
    new = list(rw.manifest.shards)
    if kind.place_tail is not None and tail:
        new = kind.place_tail(tail, new)
    rw.manifest = kind.with_shards(manifest, [*keep, *new])
    return rw


# ------------------------------------------------------------------ dispatch


def usage(manifest: Any, sizes: Mapping[str, int] | None = None) -> Usage:
    """The shard files of a parsed manifest (array, records or ragged) and their live
    parts; ``sizes``: file sizes (relative path -> bytes) the manifest does not record.
    ``ValueError`` for a kind without compaction; :class:`TooFragmentedError` for an
    array too fragmented to map.

    >>> from arrayds.kinds.array.manifest import ArrayManifest, ShardEntry
    >>> m = ArrayManifest.new((4,), "i1", ((2, 2),)).with_(shards=[
    ...     ShardEntry("c/a", (0,), (2,), 0, 100), ShardEntry("c/b", (1,), (2,), 0, 50)])
    >>> u = usage(m)
    >>> [(f.path, f.records, f.live_records) for f in u.files], u.live_entries
    ([('c/a', 2, 1), ('c/b', 1, 1)], 2)
    """
    kind = kinds.find(getattr(manifest, "kind", None))
    if kind is None or kind.usage is None:
        raise ValueError(f"no compaction for {type(manifest).__name__} manifests")
    return kind.usage(manifest, sizes)


# ------------------------------------------------------------------ compaction


def format_bytes(n: float | None) -> str:
    """``1536 -> '1.5 KiB'`` (``None`` -> ``'?'``).

    >>> format_bytes(1536), format_bytes(10), format_bytes(None)
    ('1.5 KiB', '10 B', '?')
    """
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{int(n)} B" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


@dataclass(frozen=True)
class Fragmentation:
    """The figures :func:`fragmentation` measured of one node, and its verdict."""

    kind: str
    shard_size: int
    files: int
    """Shard files the manifest names."""
    small_files: int
    """Of those, files smaller than ``shard_size / 2`` (unknown sizes count as large)."""
    entries: int
    """Entries of the manifest's shard list."""
    live_entries: int
    """Entries that a reader can still select (an array's others are hidden by newer
    entries)."""
    file_bytes: int
    """The size of the files together (as far as known)."""
    live_bytes: int
    """Their live part, estimated: each file's size times the share of its records a
    reader can still select."""
    needs_compaction: bool
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def fragmentation(
    manifest: Any,
    shard_size: Any = None,
    *,
    sizes: Mapping[str, int] | None = None,
    min_small_files: int = 2,
) -> Fragmentation:
    """Measure one node's manifest (a parsed array, records or ragged manifest) and
    decide whether it needs compaction. The rule: a node needs compaction if

    * at least ``min_small_files`` (2) of its shard files are smaller than
      ``shard_size / 2`` (they can be merged into one file of at most ``shard_size``),
      or
    * less than half of its stored bytes are live (newer writes override most of what
      the files hold).

    A compacted node meets neither (all its files but the last are about
    ``shard_size``, and everything is live), so compacting again does nothing.
    ``sizes``: file sizes (path relative to the node -> bytes) the manifest does not
    record; a file of unknown size counts as large.

    >>> import arrayds, numpy as np
    >>> a = arrayds.open_array("memory://doc-frag", mode="w", shape=(6,), dtype="i4", chunks=1)
    >>> a[:] = 1
    >>> a[1:5] = 2
    >>> a[5] = 3
    >>> f = fragmentation(a.manifest)
    >>> f.files, f.entries, f.live_entries, f.live_bytes < f.file_bytes, f.needs_compaction
    (3, 3, 3, True, True)
    >>> f.reason
    '3 of 3 shard files are smaller than half of shard_size (32.0 MiB)'
    """
    size = parse_shard_size(shard_size)
    u = usage(manifest, sizes)
    known = [f for f in u.files if f.bytes is not None]
    small = sum(1 for f in known if f.bytes < size / 2)
    file_bytes = sum(f.bytes for f in known)
    live_bytes = int(sum(f.bytes * f.live_records / f.records for f in known if f.records))
    if small >= max(2, min_small_files):
        needs, reason = (
            True,
            f"{small} of {len(u.files)} shard files are smaller than half of shard_size "
            f"({format_bytes(size / 2)})",
        )
    elif file_bytes and 2 * live_bytes < file_bytes:
        needs, reason = (
            True,
            f"only {format_bytes(live_bytes)} of the {format_bytes(file_bytes)} its shard files "
            f"hold are live",
        )
    else:
        needs, reason = False, ("not fragmented" if u.files else "no shard files")
    return Fragmentation(
        getattr(manifest, "kind", "?"),
        size,
        len(u.files),
        small,
        u.entries,
        u.live_entries,
        file_bytes,
        live_bytes,
        needs,
        reason,
    )


COMPACT_CHOICES = ("tiered", True, False)
"""The values of the ``compact=`` keyword of writes (:func:`check_compact`)."""


def check_compact(compact: Any, what: str) -> None:
    """``ValueError`` naming ``what`` unless ``compact`` is ``"tiered"``, ``True`` or
    ``False``."""
    if not any(compact is c or (isinstance(c, str) and compact == c) for c in COMPACT_CHOICES):
        raise ValueError(
            f"{what}: compact must be 'tiered' (merge the newest small shards of appends "
            f"by tiers), True (compact a node of {AUTO_COMPACT_FILES} small files) or "
            f"False, got {compact!r}"
        )


def file_sizes(store: Store, node: str, m: Any) -> dict[str, int]:
    """The sizes of the node's files its manifest does not record (asked of the store)."""
    out: dict[str, int] = {}
    for f in usage(m).files:
        if f.bytes is None:
            try:
                out[f.path] = store.size(join_component(node, f.path))
            except (FileNotFoundError, OSError):
                pass
    return out


def compact_small_files(
    store: Store, node: str, manifest: Any, stamp: tuple[int, str]
) -> Any | None:
    """The automatic compaction of an append (``compact=True``): if ``node`` (as
    ``manifest``, parsed, at ``stamp``) holds :data:`AUTO_COMPACT_FILES` small files,
    rewrite its live data into shards of :data:`DEFAULT_SHARD_SIZE` and commit, provided
    the node is still at ``stamp``; returns the committed manifest (parsed), or ``None``
    if it is not fragmented so (nothing written).

    >>> import arrayds, numpy as np
    >>> a = arrayds.open_array("memory://doc-small-files", mode="w", shape=(0,), dtype="i4",
    ...                        chunks=1)
    >>> for i in range(3):
    ...     _ = a.append(np.array([i], "i4"), compact=False)
    >>> m = a.manifest
    >>> compact_small_files(a.store, "", m, (m.generation, m.commit)) is None
    True
    """
    kind = kinds.get(manifest.kind)
    if kind.compact is None or len(manifest.shards) < AUTO_COMPACT_FILES:
        return None
    what = f"{kind.a()} {store.display(node)!r}"
    frag = fragmentation(
        manifest,
        DEFAULT_SHARD_SIZE,
        sizes=file_sizes(store, node, manifest),
        min_small_files=AUTO_COMPACT_FILES,
    )
    if not frag.needs_compaction:
        return None
    write_id = pending.begin(store, node)
    with pending.uploading(store, node, write_id):
        rw = rewrite(store, node, kind, manifest, DEFAULT_SHARD_SIZE, write_id)
    raw = commit_rewrite(
        store,
        node,
        rw,
        write_id,
        stamp,
        what,
        lambda now: f"{what}: committed to since (generation {now.generation})",
    )
    return kind.parse(raw, what)
