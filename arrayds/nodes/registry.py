"""The registry of node kinds: one record per kind, in one place.

A node's manifest names its ``kind``; everything arrayds does with a node goes through
that kind's :class:`NodeKind`: how its manifest is parsed, how ``arrayds.open`` wraps
it, how ``from_arrayrecord`` and ``ArrayRecordDataSource`` read it, where its shards
live (what ``arrayds gc`` may remove), which shard files it names (:class:`ShardRef`),
its own checks (:class:`ShardCheck`), how ``arrayds info``/``cat`` show it, and how it
is compacted and merged (:mod:`arrayds.nodes.merge`); the functions of
:mod:`arrayds.tools` that a record names are imported only when called (:func:`lazy`),
so this registry never imports the tools. The inputs ``to_arrayrecord`` accepts are
:class:`Writer` records, tried in the documented order :data:`WRITER_ORDER`.

The built-in kinds and writers live in the modules of :data:`HOMES`; they are imported
on the first lookup. Another package adds a kind with :func:`register` (and a writer
with :func:`register_writer`).

>>> from arrayds.nodes import registry
>>> [k.name for k in registry.all_kinds()]
['group', 'array', 'records', 'ragged']
>>> [w.name for w in registry.writers()]
['xarray', 'ragged', 'dask.array', 'numpy', 'records']
>>> registry.writer_for([b"a", b"b"]).name, registry.get("array").shard_folder
('records', 'c')
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import replace as dataclass_replace
from typing import Any

from ..errors import CorruptionError
from .names import FORMAT, FORMAT_VERSION

__all__ = [
    "HOMES",
    "WRITER_ORDER",
    "NodeKind",
    "ShardCheck",
    "ShardRef",
    "Writer",
    "all_kinds",
    "get",
    "get_writer",
    "kind_names",
    "lazy",
    "no_extra_keywords",
    "register",
    "register_writer",
    "writer_for",
    "writers",
]


@dataclass(frozen=True)
class ShardRef:
    """One shard file a manifest names, as ``arrayds verify`` and ``info`` see it."""

    path: str
    """The file, ``/``-separated, relative to the node's folder."""
    records: int | None = None
    """The exact number of records the file holds, if the manifest records it."""
    size: int | None = None
    """The file's size in bytes, if the manifest records it."""
    span: tuple[int, int] | None = None
    """The records ``[first, end)`` of the file that this entry claims, when several
    entries share one file (an array's chunk runs); ``None``: the entry is the file."""
    entry: Any = None
    """The kind's own record of the shard (what its ``verify_extra`` reads)."""


@dataclass
class ShardCheck:
    """A kind's own checks of one shard file (made by :attr:`NodeKind.verify_extra`)."""

    problems: list[tuple[str, str]] = field(default_factory=list)
    """(where, message) of what is wrong before any record is read."""
    record: Callable[[int, bytes], tuple[str, str] | None] | None = None
    """``record(r, data)`` -> (where, message) if record ``r`` is damaged, else ``None``."""
    where: Callable[[int, int, int], str] | None = None
    """``where(a, b, group_size)`` names records ``a..b-1`` (one damaged engine chunk)
    in the kind's terms ("chunk (0, 1) (records 4..7)"); ``None``: record numbers."""


@dataclass(frozen=True)
class NodeKind:
    """Everything arrayds needs to know of one node kind."""

    name: str
    """The manifest's ``kind`` value."""
    parse: Callable[[Mapping[str, Any], str], Any]
    """``parse(manifest_json, what)`` -> the manifest object (``CorruptionError`` if it
    is malformed; ``what`` names the node in messages)."""
    open: Callable[[Any, str, Any, str], Any]
    """``open(store, node, manifest, mode)`` -> the handle ``arrayds.open`` returns."""
    to_dask: Callable[..., Any] | None = None
    """``to_dask(store, node, manifest, *, chunks, name, **kwargs)`` -> the dask
    collection ``from_arrayrecord`` returns (``None``: not readable that way)."""
    data_source: Callable[..., Any] | None = None
    """``data_source(store, node, manifest, *, allow_pickle, serializer)`` -> the
    shards and decoder ``ArrayRecordDataSource(url)`` reads (``None``: not a data
    source)."""
    shard_folder: str | None = None
    """The folder inside the node that holds its shards (``"c"``), or ``None`` when
    they sit in the node folder itself; ``arrayds gc`` removes only files there whose
    names the shard grammar produces."""
    children: bool = False
    """Whether the node's sub-folders holding a manifest are its child nodes (a group)."""
    members: Callable[[Any], Mapping[str, Any]] | None = None
    """``members(manifest)`` -> {name: manifest JSON} of the nodes whose manifests this
    one holds (a group's xarray snapshot); ``verify`` checks those too."""
    shards: Callable[[Any], list[ShardRef]] | None = None
    """``shards(manifest)`` -> every shard file entry the manifest names, in order
    (``verify`` checks each file: it opens, its size and record counts agree)."""
    verify_extra: Callable[[Any, int, list[tuple[Any, ShardRef]]], ShardCheck] | None = None
    """``verify_extra(reader, n, entries)`` -> the kind's own checks of one shard file
    of ``n`` records that ``entries`` ((manifest, ShardRef) pairs) name."""
    describe: Callable[[Any, str, Any], dict[str, Any]] | None = None
    """``describe(store, node, manifest)`` -> the kind's own fields of ``arrayds info``."""
    info_text: Callable[[Mapping[str, Any]], tuple[str, list[str]]] | None = None
    """``info_text(info)`` -> (headline, detail lines) of one node in ``arrayds info``'s
    tree, from the fields ``describe`` returned."""
    cat: Callable[[Any, Any], Any] | None = None
    """``cat(handle, request)`` prints a selection of the node for ``arrayds cat``
    (``request``: :class:`arrayds.tools.cat.CatRequest`); ``None``: not printable."""
    compact: Callable[..., Any] | None = None
    """``compact(store, node, manifest, *, shard_size, write_id, written)`` -> an
    :class:`arrayds.nodes.merge.Rewrite`: the node's live data copied into new
    shards of about ``shard_size`` bytes (their paths appended to ``written`` as they
    start) and the manifest naming only them, not committed (``arrayds compact``
    commits it); ``None``: the kind is not compacted."""
    usage: Callable[[Any, Mapping[str, int] | None], Any] | None = None
    """``usage(manifest, sizes)`` -> an :class:`arrayds.nodes.merge.Usage`: the shard
    files the manifest names and their live parts (``sizes``: file sizes the manifest
    does not record); what compaction weighs. ``None``: not compacted."""
    tail_sizes: Callable[[Any], list[int]] | None = None
    """``tail_sizes(manifest)`` -> the payload bytes of each entry of its shard list
    (what the tiered merge of appended shards weighs); ``None``: no tiered merge."""
    window: Callable[[Mapping[str, Any], list[Any]], dict[str, Any]] | None = None
    """``window(manifest_json, entries)`` -> the manifest JSON of the node holding only
    ``entries``, the newest entries of its shard list, which ``parse`` accepts: the
    tiered merge of an append then weighs and rewrites only the newest
    :data:`arrayds.nodes.merge.MERGE_WINDOW` entries, and an append to a long list
    costs what it adds (a ragged array's is an in-memory window whose items start at
    its first entry's). ``None``: such a manifest is not valid, and the merge reads the
    whole list."""
    with_shards: Callable[[Any, list[Any]], Any] = field(
        default=lambda m, shards: dataclass_replace(m, shards=shards)
    )
    """``with_shards(manifest, entries)`` -> the parsed manifest with another shard list."""
    place_tail: Callable[[Sequence[Any], list[Any]], list[Any]] | None = None
    """``place_tail(old_tail, new_entries)`` -> the entries of a rewritten tail of the
    shard list, placed where ``old_tail`` was (``None``: as they are)."""
    lazy_shards: bool = False
    """Whether ``parse`` takes the node's shard lists (its own, and those of a group's
    snapshot members) as :class:`arrayds.nodes.history.ShardLog` whose segments load
    when used (an open then reads the head only), rather than as complete lists."""
    segment_summary: tuple[str, ...] = ("records",)
    """The keys of :func:`arrayds.nodes.history.summary` that every segment reference of
    the node's shard list has once this release wrote it (what its reads look segments
    up by); ``arrayds upgrade`` writes a list with a reference lacking one anew."""
    totals: str = ""
    """The key of ``arrayds info --json``'s totals that counts nodes of this kind."""
    plural: str = ""
    """How ``arrayds info``'s total line names several nodes of this kind."""
    phrase: str = ""
    """How messages name one node of this kind ("an array", "a records dataset")."""

    def a(self) -> str:
        """``phrase``, or "a <name>" / "an <name>"."""
        if self.phrase:
            return self.phrase
        return f"an {self.name}" if self.name[:1] in "aeiou" else f"a {self.name}"


def lazy(module: str, name: str) -> Callable[..., Any]:
    """A function that imports ``module`` when first called and calls its ``name``:
    a kind's record names a function of a higher layer (``arrayds.tools``) without
    importing it.

    >>> lazy("arrayds.tools.describe", "format_bytes")(2048)
    '2.0 KiB'
    """
    found: list[Callable[..., Any]] = []

    def call(*args: Any, **kwargs: Any) -> Any:
        if not found:
            found.append(getattr(importlib.import_module(module), name))
        return found[0](*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{module}.{name}, imported when first called."
    return call


@dataclass(frozen=True)
class Writer:
    """An input ``to_arrayrecord`` writes."""

    name: str
    accepts: Callable[[Any], bool]
    """Whether this writer writes ``data``."""
    write: Callable[..., Any]
    """``write(data, store, node, **options)``: every keyword of ``to_arrayrecord``
    (``mode``, ``compression``, ``shard_size``, ``region``, ``attrs``, ``dims``,
    ``serializer``, ``group_size``, ``compute``, ``progress``) plus its ``**kwargs``."""
    kind: str
    """The node kind it writes (``"group"`` for an xarray snapshot)."""


HOMES: tuple[str, ...] = (
    "arrayds.kinds.group",  # group
    "arrayds.kinds.array.kind",  # array, and the dask.array and numpy writers
    "arrayds.kinds.records.kind",  # records, and its writer
    "arrayds.kinds.ragged.kind",  # ragged, and its writer
    "arrayds.xarray",  # the xarray writer (xarray itself is imported only when used)
)
"""The modules that register the built-in kinds and writers."""

WRITER_ORDER: tuple[str, ...] = ("xarray", "ragged", "dask.array", "numpy", "records")
"""The order ``to_arrayrecord`` tries the writers in: xarray objects first (they also
look like mappings), ragged inputs (lists of arrays, dask bags) before the records
writer that would take any list or bag, dask arrays before numpy arrays (a dask array
converts to numpy). Writers added by :func:`register_writer` come after these."""

_kinds: dict[str, NodeKind] = {}
_writers: dict[str, Writer] = {}
_extra_order: list[str] = []
_loaded = False
_lock = threading.RLock()


def register(kind: NodeKind) -> NodeKind:
    """Add (or replace) the record of ``kind.name``; returns it."""
    with _lock:
        _kinds[kind.name] = kind
    return kind


def register_writer(writer: Writer) -> Writer:
    """Add (or replace) a writer; one not named in :data:`WRITER_ORDER` is tried after
    those, in the order added."""
    with _lock:
        if writer.name not in WRITER_ORDER and writer.name not in _extra_order:
            _extra_order.append(writer.name)
        _writers[writer.name] = writer
    return writer


def no_extra_keywords(what: str, kwargs: Mapping[str, Any]) -> None:
    """``TypeError`` naming the keywords a kind's ``to_dask`` does not take."""
    if kwargs:
        raise TypeError(f"from_arrayrecord({what}): unexpected keyword arguments {sorted(kwargs)}")


def _load() -> None:
    global _loaded
    if _loaded:
        return
    with _lock:
        if _loaded:
            return
        for home in HOMES:
            importlib.import_module(home)
        _loaded = True


def get(name: str | None, what: str = "node") -> NodeKind:
    """The record of kind ``name``; ``NotImplementedError`` naming ``what`` and the
    known kinds if there is none (a dataset written by a newer arrayds)."""
    _load()
    kind = _kinds.get(name) if isinstance(name, str) else None
    if kind is None:
        raise NotImplementedError(
            f"{what}: node kind {name!r} is not supported by this arrayds (known: {kind_names()})"
        )
    return kind


def find(name: str | None) -> NodeKind | None:
    """The record of kind ``name``, or ``None`` if there is none."""
    _load()
    return _kinds.get(name) if isinstance(name, str) else None


_BUILTIN_KINDS = ("group", "array", "records", "ragged")


def all_kinds() -> list[NodeKind]:
    """Every registered kind: the built-in ones (group, array, records, ragged), then
    the others in the order they were added."""
    _load()
    rank = {n: i for i, n in enumerate(_BUILTIN_KINDS)}
    return sorted(_kinds.values(), key=lambda k: rank.get(k.name, len(rank)))


def kind_names() -> list[str]:
    """The names of every registered kind, sorted."""
    _load()
    return sorted(_kinds)


def writers() -> list[Writer]:
    """Every writer, in the order ``to_arrayrecord`` tries them."""
    _load()
    order = [*WRITER_ORDER, *_extra_order]
    return [_writers[n] for n in order if n in _writers]


def get_writer(name: str) -> Writer:
    """The writer called ``name`` (``KeyError`` if there is none): a writer that
    finds its input is another's (a bag of records given to the ragged writer) hands
    it on."""
    _load()
    return _writers[name]


def writer_for(data: Any) -> Writer:
    """The first writer (in :func:`writers` order) that accepts ``data``; else
    ``TypeError`` naming the type and the writers."""
    found = writers()
    for w in found:
        if w.accepts(data):
            return w
    raise TypeError(
        f"cannot write data of type {type(data).__module__}.{type(data).__qualname__} "
        f"(writers, in order: {', '.join(w.name for w in found)})"
    )


# ------------------------------------------------------------- kind dispatch


def parse_node(d: Mapping[str, Any], what: str) -> Any:
    """Check the common header of a manifest and parse it by ``kind``."""
    if d.get("format") != FORMAT:
        raise CorruptionError(
            f"{what}: not an arrayds manifest (format is {d.get('format')!r}, expected {FORMAT!r})"
        )
    version = d.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CorruptionError(f"{what}: manifest format_version {version!r} is not an integer")
    if version > FORMAT_VERSION:
        raise NotImplementedError(
            f"{what}: dataset format version {version} is newer than this arrayds supports "
            f"({FORMAT_VERSION}); upgrade arrayds"
        )
    if version < 1:
        raise CorruptionError(f"{what}: manifest format_version {version} is invalid")

    return get(d.get("kind"), what).parse(d, what)
