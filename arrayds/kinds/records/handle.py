"""Reading records datasets: the :class:`RecordsDataset` handle, ``read_records``
(a dask bag) and data sources with global random access.

>>> from arrayds import records
>>> _ = records.write_records([b"a", b"b", b"c"], "memory://doc-records-handle", num_shards=2)
>>> ds = open_records("memory://doc-records-handle")
>>> len(ds), ds.num_shards
(3, 2)
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...errors import CorruptionError
from ...files.data_source import ArrayRecordDataSource, ResolvedSource, SourceShard
from ...nodes import history as log
from ...nodes import registry as kinds
from ...nodes.handle import Node
from ...nodes.read import Pin
from ...nodes.shards import node_shard_reader
from ...storage.base import BaseStore as Store
from ...storage.coalesce import coalesce_options
from . import serializers as _ser
from .serializers import Serializer, SerializerSpec

if TYPE_CHECKING:
    import dask.bag
from ...html_repr import node_html
from .manifest import LazyShards, RecordPages, RecordsManifest, ShardInfo, load_manifest

# ----------------------------------------------------------------- storage helpers


# ------------------------------------------------------------------------- reading


def _read_shard(
    store: Store, node: str, name: str, expected: int, decode: Any, size: int = 0
) -> list[Any]:
    """Task: every record of one shard, decoded (one batched engine read); ``size``:
    the file's byte size from the manifest (0: not recorded)."""
    # every record is read: a shard of at most max_size comes in one GET (footer too)
    whole = 0 < size <= coalesce_options().max_size
    reader = node_shard_reader(store, node, name, size or None, whole=whole)
    n = reader.num_records()
    if n != expected:
        raise CorruptionError(
            f"records shard {store.url_of(node, name)} holds {n} records, the manifest of "
            f"{store.display(node)} says {expected}"
        )
    recs = reader.read_all()
    if decode is None:
        return recs
    return [decode(b) for b in recs]


def _read_entry(store: Store, node: str, pages: RecordPages, k: int, decode: Any) -> list[Any]:
    """Task: every record of shard ``k`` of a list kept in segments (see
    :func:`_read_shard`)."""
    s = pages.entry(k)
    return _read_shard(store, node, s.name, s.num_records, decode, s.file_size)


class RecordsDataset(Node):
    """An open records dataset: its manifest, shards and readers (a
    :class:`arrayds.nodes.handle.Node`, read only: records datasets change by writes
    through :func:`arrayds.records.write_records`).

    ``len(ds)`` is the number of records; nothing but the manifest is read to open
    it.  ``ds.shard_paths`` are the shard files in order (give them to Grain or the
    official ``ArrayRecordDataSource``); ``ds.to_bag()`` and ``ds.data_source()``
    read it. ``version=N`` / ``as_of=`` (a datetime; naive means UTC) open that
    version of the dataset's history (:func:`arrayds.versions`): a ``ValueError``
    names the versions kept if it is not one of them.

    Example:
        >>> import os, tempfile
        >>> from arrayds import records
        >>> url = os.path.join(tempfile.mkdtemp(), "r")
        >>> _ = records.write_records([{"a": 1}, {"a": 2}], url)
        >>> ds = records.open_records(url)
        >>> len(ds), ds.serializer, [os.path.basename(p)[-21:] for p in ds.shard_paths]
        (2, 'msgpack', ['record-00000-of-00001'])
    """

    def __init__(
        self,
        url: str,
        component: str | None = None,
        *,
        storage_options: Mapping[str, Any] | None = None,
        allow_pickle: bool = False,
        serializer: SerializerSpec | None = None,
        version: int | None = None,
        as_of: datetime | None = None,
    ) -> None:
        store, node, man = load_manifest(url, component, storage_options, version, as_of)
        self._init(store, node, man)
        self._allow_pickle = allow_pickle
        self._override = serializer
        if version is not None or as_of is not None:
            self._pin = Pin(man.generation, None)

    @classmethod
    def from_committed(cls, store: Store, node: str, man: dict[str, Any]) -> RecordsDataset:
        """The dataset a write just committed (its manifest ``man`` is parsed when it
        is first used: a write's cost does not grow with the dataset)."""
        self = cls.from_parsed(store, node, None)
        self._raw = man
        return self

    @classmethod
    def from_parsed(cls, store: Store, node: str, man: RecordsManifest | None) -> RecordsDataset:
        self = cls.__new__(cls)
        self._init(store, node, man)
        self._allow_pickle = False
        self._override = None
        return self

    _kind = "records dataset"
    _mode = "r"

    @property
    def url(self) -> str:  # type: ignore[override]
        """The dataset's URL (its node's URL inside the dataset root, unlike the
        other handles' ``url``, the root's)."""
        return self._store.display(self._node)

    def _init(self, store: Store, node: str, man: RecordsManifest | None) -> None:
        self._store = store
        self._node = node
        self._parsed = man
        self._raw: dict[str, Any] | None = None

    @property
    def manifest(self) -> RecordsManifest:
        if self._parsed is None:
            # the manifest a commit returned, its shard list possibly still a log: a
            # ShardLog, whose segments load when a read needs them (as an open's)
            raw = log.resolve(self._store, self._node, self._raw or {}, self.url, lazy=True)
            self._parsed = RecordsManifest.from_json(raw, self.url)
        return self._parsed

    @property
    def serializer(self) -> str:
        """Name of the stored serializer."""
        return self.manifest.serializer

    @property
    def compression(self) -> str:
        return self.manifest.compression

    @property
    def group_size(self) -> int:
        return self.manifest.group_size

    @property
    def attrs(self) -> dict[str, Any]:
        return self.manifest.attrs

    @property
    def shards(self) -> list[ShardInfo]:
        return list(self.manifest.shards)

    @property
    def num_shards(self) -> int:
        return len(self.manifest.shards)

    @property
    def num_records(self) -> int:
        return self.manifest.num_records

    def __len__(self) -> int:
        return self.manifest.num_records

    @property
    def shard_paths(self) -> list[str]:
        """Full paths/URLs of the shard files, in dataset order."""
        return [self._store.url_of(self._node, s.name) for s in self.manifest.shards]

    def decoder(self) -> Serializer:
        """The serializer that decodes this dataset's records (pickle gate applied)."""
        return _ser.resolve_for_read(
            self.serializer,
            override=self._override,
            allow_pickle=self._allow_pickle,
            where=self.url,
        )

    def to_bag(self, *, decode: bool = True) -> dask.bag.Bag:
        """A ``dask.bag.Bag``, one partition (one task) per shard, in order. A list
        kept in segments is not read here: each task finds its shard from the
        references (:meth:`arrayds.kinds.records.manifest.RecordPages.entry`, the
        index and segment that hold it loaded where it runs)."""
        import dask.bag as db
        from dask.base import tokenize
        from dask.highlevelgraph import HighLevelGraph

        dec = self.decoder().decode if decode else None
        store, node, shards = self._store, self._node, self.manifest.shards
        pages = shards.pages(store, node) if isinstance(shards, LazyShards) else None
        if pages is not None:
            listed = pages.listed()  # the head's references and tail name the list
            name = "read-records-" + tokenize(
                store.canonical_url, node, listed, self.serializer, decode
            )
            dsk: dict[Any, Any] = {name + "-list": pages}
            dsk.update(
                ((name, k), (_read_entry, store, node, name + "-list", k, dec))
                for k in range(len(shards))
            )
        else:
            name = "read-records-" + tokenize(
                store.canonical_url,
                node,
                [(s.name, s.num_records) for s in shards],
                self.serializer,
                decode,
            )
            dsk = {
                (name, k): (_read_shard, store, node, s.name, s.num_records, dec, s.file_size)
                for k, s in enumerate(shards)
            }
        graph = HighLevelGraph.from_collections(name, dsk, dependencies=[])
        return db.Bag(graph, name, len(shards))

    def data_source(
        self,
        *,
        decode: bool = False,
        reader_options: Mapping[str, str] | str | None = None,
    ) -> ArrayRecordDataSource:
        """Random access across all shards (see :func:`data_source`), read through the
        backend this dataset was opened with."""
        # the store's options never hold "backend": name it, so the data source reads
        # through the same backend (obstore's get_ranges or fsspec's cat_ranges)
        opts = {**self._store.storage_options, "backend": getattr(self._store, "backend", "fsspec")}
        return ArrayRecordDataSource(
            self.url,
            reader_options,
            storage_options=opts,
            decode=decode,
            allow_pickle=self._allow_pickle,
            serializer=self._override,
            version=self.version,
        )

    def __getitem__(self, key: Any) -> Any:
        """Decoded record(s) by global index: an int, a slice, a list or an array.

        Example:
            >>> import os, tempfile
            >>> from arrayds import records
            >>> ds = records.write_records(
            ...     [{"i": i} for i in range(5)], os.path.join(tempfile.mkdtemp(), "r")
            ... )
            >>> ds[3], ds[[4, 0]]
            ({'i': 3}, [{'i': 4}, {'i': 0}])
        """
        src = self.__dict__.get("_decoded")
        if src is None:
            src = self._decoded = self.data_source(decode=True)
        return src[key]

    def __iter__(self) -> Any:
        """Decoded records in order, shard by shard (sequential reads)."""
        return iter(self.data_source(decode=True))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.pop("_decoded", None)
        return state

    def __repr__(self) -> str:
        return (
            f"RecordsDataset({self.url!r}, {self.num_records} records in "
            f"{self.num_shards} shards, serializer={self.serializer!r})"
        )

    def _repr_html_(self) -> str:
        """A summary table and a bar of the shards (:mod:`arrayds.html_repr`)."""

        return node_html(self._store, self._node, self.manifest, version=self.version)


def open_records(
    url: str,
    component: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    allow_pickle: bool = False,
    serializer: SerializerSpec | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> RecordsDataset:
    """Open a records dataset (reads the manifest only); ``version=`` / ``as_of=``:
    a version of its history (see :class:`RecordsDataset`).

    Example:
        >>> import os, tempfile
        >>> from arrayds import records
        >>> url = os.path.join(tempfile.mkdtemp(), "r")
        >>> _ = records.write_records([b"x"] * 5, url, num_shards=2)
        >>> ds = records.open_records(url)
        >>> len(ds), [s.num_records for s in ds.shards]
        (5, [2, 3])
        >>> _ = records.write_records([b"y"] * 2, url, mode="a")
        >>> len(records.open_records(url, version=1)), len(records.open_records(url))
        (5, 7)
    """
    return RecordsDataset(
        url,
        component,
        storage_options=storage_options,
        allow_pickle=allow_pickle,
        serializer=serializer,
        version=version,
        as_of=as_of,
    )


def read_records(
    url: str,
    component: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    allow_pickle: bool = False,
    serializer: SerializerSpec | None = None,
    decode: bool = True,
    version: int | None = None,
    as_of: datetime | None = None,
) -> dask.bag.Bag:
    """A ``dask.bag.Bag`` of a records dataset: one partition per shard, order preserved.

    Items are decoded with the stored serializer (``decode=False``: the stored bytes).
    A dataset written with ``pickle`` needs ``allow_pickle=True``; one written with an
    unregistered ``(encode, decode)`` pair needs ``serializer=`` that pair.
    ``version=`` / ``as_of=``: a version of the dataset's history.

    Example:
        >>> import os, tempfile
        >>> from arrayds import records
        >>> url = os.path.join(tempfile.mkdtemp(), "r")
        >>> _ = records.write_records([[1, 2], [3]], url, serializer="json", num_shards=2)
        >>> bag = records.read_records(url)
        >>> bag.npartitions, bag.compute(scheduler="sync")
        (2, [[1, 2], [3]])
    """
    ds = open_records(
        url,
        component,
        storage_options=storage_options,
        allow_pickle=allow_pickle,
        serializer=serializer,
        version=version,
        as_of=as_of,
    )
    return ds.to_bag(decode=decode)


def data_source(
    url: str,
    *,
    decode: bool = False,
    allow_pickle: bool = False,
    serializer: SerializerSpec | None = None,
    reader_options: Mapping[str, str] | str | None = None,
    storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> ArrayRecordDataSource:
    """Global random access over a records dataset's shards.

    The same object as ``arrayds.ArrayRecordDataSource(url, decode=...)``; use this
    function to pass ``allow_pickle=True`` (pickle datasets) or the ``serializer=``
    pair of a dataset written with unregistered callables.  Record counts come from
    the manifest, so no shard is opened until it is read. ``version=`` / ``as_of=``:
    a version of the dataset's history.

    Example:
        >>> import os, tempfile
        >>> from arrayds import records
        >>> url = os.path.join(tempfile.mkdtemp(), "r")
        >>> _ = records.write_records([{"i": i} for i in range(6)], url, num_shards=3)
        >>> src = records.data_source(url, decode=True)
        >>> len(src), src[4], [x["i"] for x in src[[5, 0]]]
        (6, {'i': 4}, [5, 0])
    """
    ds = open_records(
        url,
        storage_options=storage_options,
        allow_pickle=allow_pickle,
        serializer=serializer,
        version=version,
        as_of=as_of,
    )
    return ds.data_source(decode=decode, reader_options=reader_options)


# ------------------------------------------------- ArrayRecordDataSource resolver


class _RefusedDecoder:
    """Stands in for a decoder this process may not use (pickle without consent).
    ``ArrayRecordDataSource(decode=True)`` raises its ``refusal`` at once; with
    ``decode=False`` the stored bytes stay readable."""

    def __init__(self, refusal: str) -> None:
        self.refusal = refusal

    def __call__(self, data: bytes) -> Any:
        raise ValueError(self.refusal)


def node_data_source(
    store: Store,
    node: str,
    m: RecordsManifest,
    *,
    allow_pickle: bool,
    serializer: SerializerSpec | None,
) -> ResolvedSource:
    """``ArrayRecordDataSource(url)`` on a records dataset: its shards and decoder."""
    where = store.display(node)
    pages = m.shards.pages(store, node) if isinstance(m.shards, LazyShards) else None
    shards: Any = (
        pages
        if pages is not None
        else [
            # object stores: the recorded size spares each shard open a HEAD request
            SourceShard(
                store.url_of(node, s.name),
                0,
                s.num_records,
                None if store.local else s.file_size or None,
            )
            for s in m.shards
        ]
    )
    try:
        ser = _ser.resolve_for_read(
            m.serializer, override=serializer, allow_pickle=allow_pickle, where=where
        )
        decoder: Any = ser.decode
    except ValueError as exc:
        decoder = _RefusedDecoder(
            f"{exc} (ArrayRecordDataSource(url, decode=True) takes allow_pickle= and "
            "serializer= too)"
        )
    if not len(m.shards):
        raise ValueError(f"records dataset {where} has no shards yet")
    return ResolvedSource(shards, decoder)


def node_handle(store: Store, node: str, man: RecordsManifest, mode: str) -> RecordsDataset:
    """``arrayds.open`` / ``Group[name]`` on a records node."""
    return RecordsDataset.from_parsed(store, node, man)


_READ_KEYS = ("allow_pickle", "serializer", "decode")


def node_to_dask(store: Store, node: str, m: Any, *, chunks: Any, name: Any, **kwargs: Any) -> Any:
    """``from_arrayrecord`` of a records dataset: a bag (see :func:`read_records`)."""
    what = f"records dataset {store.display(node)!r}"
    if chunks is not None or name is not None:
        raise ValueError(f"{what}: chunks= and name= apply to arrays")
    kinds.no_extra_keywords(what, {k: v for k, v in kwargs.items() if k not in _READ_KEYS})
    # the manifest read (which may be a version of the history), not the URL again
    ds = RecordsDataset.from_parsed(store, node, m)
    ds._allow_pickle = bool(kwargs.get("allow_pickle", False))
    ds._override = kwargs.get("serializer")
    return ds.to_bag(decode=kwargs.get("decode", True))
