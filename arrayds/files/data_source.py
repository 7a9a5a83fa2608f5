"""The ArrayRecord data source: many files (paths, globs, file instructions or the URL
of a dataset) as one random-access sequence, as the official
``ArrayRecordDataSource`` gives Grain and PyTorch.

Dataset URLs: the data source asks the resolvers registered with
:func:`register_dataset_resolver` (the dataset layer registers one, so this layer
imports nothing of datasets) whether a path is the URL of a dataset that reads as a
data source; its shard files come with their record counts, so nothing needs to be
opened. Any other path is an ArrayRecord file (or a glob of them).

>>> import os, tempfile, arrayds
>>> d = tempfile.mkdtemp()
>>> for k in range(2):
...     with arrayds.ArrayRecordWriter(os.path.join(d, f"p-{k}.array_record")) as w:
...         _ = w.write_many([b"%d%d" % (k, i) for i in range(3)])
>>> src = ArrayRecordDataSource(os.path.join(d, "p-*.array_record"))
>>> len(src), src[4]
(6, b'11')
"""

from __future__ import annotations

import bisect
import contextvars
import functools
import glob as _glob
import hashlib
import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, SupportsIndex

import numpy as np

from ..storage import get_store
from ..storage.base import BaseStore
from ..storage.coalesce import coalesce_options
from .common import PathLike, fspath, index_array, resolve_fs, run_each
from .options import ReaderOptions, parse_reader_options
from .read_along import ReadAlong
from .reader import ArrayRecordReader, prefetcher

# Files kept open after counting records at construction of a data source.
_KEEP_OPEN = 256
PAGE_FILES = 1 << 18
"""How many files the pages of a long shard list (:class:`ShardPages`) that a data
source keeps may hold in all (the least recently used go first)."""
DEFAULT_READAHEAD = 8
"""Batches :meth:`ArrayRecordDataSource.batches` reads together when the size of the
records is not known (files of unknown size): a window of 8 blocks of a
:class:`arrayds.sampler.BlockShuffleSampler` at ``batch_size == block_size``."""
READAHEAD_BYTES = 32 << 20
"""What :meth:`ArrayRecordDataSource.batches` reads together by default: as many
batches as hold about 32 MiB of the files' bytes (their size over their records)."""
KEEP_BYTES = 32 << 20
"""What :meth:`ArrayRecordDataSource.batches` may keep of records read along for later
groups of remote files (:mod:`arrayds.files.read_along`): about 32 MiB of the files'
bytes."""
_REMOTE_FOOTER_PREFETCH = "footer_prefetch_bytes:128K"
"""What a remote shard's open fetches unless the reader options say otherwise: a
128 KiB tail holds the postscript and the footer of files of up to some ten thousand
records (a larger footer is one more ranged GET), where the reader's 1 MiB default
would move more bytes per open than a batch needs from the file."""
_SLICE_SUFFIX = re.compile(r"(.*)\[(\d+):(\d+)\]")
_GLOB_CHARS = re.compile(r"[*?\[]")


_live_sources: weakref.WeakSet[ArrayRecordDataSource] = weakref.WeakSet()


def _forget_readers_after_fork() -> None:
    # the readers of a data source hold threads and open files of the parent: a child
    # process opens its own when it first reads
    for source in list(_live_sources):
        source._forget_readers()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_readers_after_fork)


def _no_read(i: int) -> bytes:  # placeholder for _read1 on several-file sources
    raise AssertionError("unreachable: _fast_len is 0 for several files")


# ---------------------------------------------------------------------- data source


@dataclass(frozen=True)
class SourceShard:
    """One file of a data source: records ``start..stop-1`` of ``path``
    (``stop=None``: up to the end; the file is opened to count them); ``size``: the
    file's byte size if known (a records manifest says it; see ``file_size``)."""

    path: str
    start: int = 0
    stop: int | None = None
    size: int | None = None


class ShardPages(Protocol):
    """A long list of shard files known by pages (a dataset's manifest segments):
    how many records and files each page holds is known without loading it, and
    :meth:`page` loads one. A data source over it finds the page of a record from
    ``records`` and loads only the pages its reads touch (a bounded cache of
    :data:`PAGE_FILES` files); it pickles as itself, without the pages loaded."""

    records: Sequence[int]
    """The records of each page's files, in page order."""
    files: Sequence[int]
    """How many files each page holds."""
    where: str
    """A path in the folder of the files (a URL's scheme tells remote files)."""

    def page(self, p: int) -> list[SourceShard] | ShardPages:
        """The files of page ``p`` in order, each with its ``stop``; or, for a page
        of pages (a manifest index of segments), those pages, whose ``records`` and
        ``files`` add up to the page's."""
        ...


@dataclass(frozen=True)
class ResolvedSource:
    """What a node kind's ``data_source`` returns for the URL of a dataset: its shard
    files in order (with ``stop`` so they need not be opened, and ``size`` so an object
    store needs no size request to open them), or pages of them, and the item decoder,
    which ``ArrayRecordDataSource(..., decode=True)`` applies to each item."""

    shards: list[SourceShard] | ShardPages
    decoder: Callable[[bytes], Any] | None = None


DatasetResolver = Callable[..., ResolvedSource | None]
"""``resolve(path, storage_options, *, allow_pickle, serializer, version, as_of)`` ->
the shards and decoder of the dataset at ``path``, or ``None`` if ``path`` is not one
(then it is read as an ArrayRecord file)."""

_dataset_resolvers: list[DatasetResolver] = []


def register_dataset_resolver(resolve: DatasetResolver) -> DatasetResolver:
    """Let :class:`ArrayRecordDataSource` read the URL of a dataset through
    ``resolve``: the dataset layer (:mod:`arrayds.nodes.read`) registers itself here,
    so this file layer never imports it.

    >>> from arrayds.files.data_source import _dataset_resolvers
    >>> len(_dataset_resolvers) >= 1  # arrayds.nodes.read's, registered on import
    True
    """
    if resolve not in _dataset_resolvers:
        _dataset_resolvers.append(resolve)
    return resolve


class FileInstruction(Protocol):
    """What a TFDS file instruction has (``tfds``' own class, or any look-alike)."""

    filename: str
    skip: int
    take: int
    examples_in_shard: int


_FILE_INSTRUCTION_FIELDS = ("filename", "skip", "take", "examples_in_shard")


def _is_file_instruction(item: Any) -> bool:
    """A TFDS-style file instruction: any object with ``filename``, ``skip``,
    ``take`` and ``examples_in_shard`` (what the official data source's
    ``FileInstruction`` protocol checks; nothing of TFDS is imported)."""
    return not isinstance(item, (str, os.PathLike)) and all(
        hasattr(item, f) for f in _FILE_INSTRUCTION_FIELDS
    )


def _instruction_shard(fi: Any) -> SourceShard:
    """The records ``skip .. skip+take-1`` of ``fi.filename``, as the official data
    source selects them; ``take=-1`` (TFDS: "all after skip") reads to the end of the
    file. ``examples_in_shard`` is not used, as in the official data source."""
    path = fspath(fi.filename, "ArrayRecordDataSource: file instruction filename")
    where = f"ArrayRecordDataSource: file instruction for {path!r}"
    values = []
    for name in ("skip", "take"):
        value = getattr(fi, name)
        if isinstance(value, bool) or not hasattr(value, "__index__"):
            raise TypeError(f"{where}: {name} must be an int, got {type(value).__name__}")
        values.append(value.__index__())
    skip, take = values
    if skip < 0 or take < -1:
        raise ValueError(
            f"{where}: skip must be >= 0 and take >= 0 (or -1: all records after skip), "
            f"got skip={skip}, take={take}"
        )
    return SourceShard(path, skip, None if take == -1 else skip + take)


def _expand_paths(
    paths: Any,
    storage_options: Mapping[str, Any] | None,
    *,
    allow_pickle: bool,
    serializer: Any,
    version: int | None = None,
    as_of: Any = None,
) -> tuple[list[SourceShard] | ShardPages, Callable[[bytes], Any] | None, bool]:
    """-> (shards, decoder, any_resolved); ``version``/``as_of``: of the datasets. The
    shards are the pages of the one path given when it is a dataset that gives pages
    (several paths: the pages' files, every page loaded)."""
    if isinstance(paths, (str, os.PathLike)) or _is_file_instruction(paths):
        items = [paths]
    elif isinstance(paths, Sequence) and not isinstance(paths, (bytes, bytearray)):
        items = list(paths)
        if not items:
            raise ValueError("ArrayRecordDataSource: the list of paths is empty")
    else:
        raise TypeError(
            "ArrayRecordDataSource: paths must be a path, a glob pattern, a file "
            "instruction or a list of them, got " + type(paths).__name__
        )
    shards: list[SourceShard] = []
    decoders: set[Any] = set()
    resolved_any = False
    for item in items:
        if _is_file_instruction(item):
            decoders.add(None)
            shards.append(_instruction_shard(item))
            continue
        if not isinstance(item, (str, os.PathLike)):
            raise TypeError(
                "ArrayRecordDataSource: each path must be a str, an os.PathLike or a file "
                "instruction (an object with filename, skip, take and examples_in_shard), "
                f"got {type(item).__name__}"
            )
        p = fspath(item, "ArrayRecordDataSource")
        resolved = None
        if not _GLOB_CHARS.search(p):
            for resolve_dataset in _dataset_resolvers:
                resolved = resolve_dataset(
                    p,
                    storage_options,
                    allow_pickle=allow_pickle,
                    serializer=serializer,
                    version=version,
                    as_of=as_of,
                )
                if resolved is not None:
                    break
        if resolved is None and (version is not None or as_of is not None):
            raise ValueError(
                f"ArrayRecordDataSource: version=/as_of= need the URL of a records dataset; "
                f"{p!r} is not one"
            )
        if resolved is not None:
            resolved_any = True
            got = resolved.shards
            if not isinstance(got, list):
                if len(items) == 1:
                    return got, resolved.decoder, True
                got = _flat(got)
            shards.extend(got)
            decoders.add(resolved.decoder)
            continue
        decoders.add(None)
        m = _SLICE_SUFFIX.fullmatch(p)
        if m is not None and not _GLOB_CHARS.search(m.group(1)):
            # The official data source's "file[start:stop]" suffix.
            start, stop = int(m.group(2)), int(m.group(3))
            if stop < start:
                raise ValueError(f"ArrayRecordDataSource: empty-or-reversed slice in {p!r}")
            shards.append(SourceShard(m.group(1), start, stop))
            continue
        if _GLOB_CHARS.search(p):
            matches = _glob_paths(p, storage_options)
            if not matches:
                raise FileNotFoundError(2, "No file matches the glob pattern", p)
            shards.extend(SourceShard(q) for q in matches)
            continue
        shards.append(SourceShard(p))
    if len(decoders) > 1:
        raise ValueError(
            "ArrayRecordDataSource: the paths mix records datasets with different "
            "serializers (or with plain files); open them separately"
        )
    return shards, decoders.pop(), resolved_any


def _store_of(path: str, storage_options: Mapping[str, Any] | None) -> BaseStore | None:
    """The store of the folder of ``path`` if it is on an object store (``None``: a
    local file, or a chained URL, which the reader reads through fsspec itself)."""
    if "://" not in path or "::" in path or path.startswith("file://"):
        return None
    store = get_store(path.rsplit("/", 1)[0], storage_options)
    return None if store.local else store


def _fsspec_options(storage_options: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``storage_options`` for fsspec: without ``"backend"``, which picks a store
    (:func:`arrayds.storage.store_class`) and which fsspec does not take."""
    opts = {k: v for k, v in (storage_options or {}).items() if k != "backend"}
    return opts or None


def _glob_paths(pattern: str, storage_options: Mapping[str, Any] | None) -> list[str]:
    fs, inner = resolve_fs(pattern, _fsspec_options(storage_options))
    if fs is None:
        return sorted(q for q in _glob.glob(inner) if os.path.isfile(q))
    protocol = pattern.split("://", 1)[0] if "://" in pattern else None
    found = sorted(q for q in fs.glob(inner) if fs.isfile(q))
    if protocol is None:
        return found
    return [fs.unstrip_protocol(q) for q in found]


class _Page:
    """Files of a data source, located: a page's records are the global indices
    ``ends[j-1] .. ends[j]-1`` of its file ``j`` (the source's file ``first + j``),
    and a global index plus ``shift[j]`` (``offsets``: the same as an array) is the
    record's index in that file."""

    __slots__ = ("ends", "ends_list", "first", "offsets", "shards", "shift")

    def __init__(self, shards: list[SourceShard], first_record: int, first: int) -> None:
        counts = np.asarray([s.stop - s.start for s in shards], dtype=np.int64)  # type: ignore[operator]
        self.shards = shards
        self.first = first
        self.ends = first_record + np.cumsum(counts)
        self.ends_list: list[int] = self.ends.tolist()
        begins = [first_record, *self.ends_list[:-1]][: len(shards)]
        self.shift = [s.start - b for s, b in zip(shards, begins, strict=True)]
        self.offsets = np.asarray(self.shift, dtype=np.int64)

    @property
    def held(self) -> int:
        """Files this page holds in memory."""
        return len(self.shards)

    def loaded(self) -> list[SourceShard]:
        """The files this page holds in memory."""
        return self.shards

    def each(self) -> Iterator[tuple[int, SourceShard]]:
        """Every file of the page with its number in the source, in order."""
        return enumerate(self.shards, self.first)

    def shard(self, k: int) -> SourceShard:
        """The source's file ``k`` (one of this page's)."""
        return self.shards[k - self.first]

    def locate_one(self, i: int) -> tuple[int, int]:
        """The file number of global record ``i`` (one of this page's) and the
        record's index in that file."""
        j = bisect.bisect_right(self.ends_list, i)
        return self.first + j, i + self.shift[j]

    def locate(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`locate_one` of every index of ``idx`` (all of this page's)."""
        j = np.searchsorted(self.ends, idx, side="right")
        return j + self.first, idx + self.offsets[j]


class _Pages:
    """A page that is itself pages (:class:`ShardPages`: a manifest index of segments,
    each a page): its pages are located from their counts and loaded when a read
    first needs them, as the source's are; the same interface as :class:`_Page`."""

    __slots__ = ("_first_file", "_pages", "ends", "ends_list", "first", "provider", "starts")

    def __init__(self, provider: ShardPages, first_record: int, first: int) -> None:
        self.provider = provider
        self.first = first
        self.ends = first_record + np.cumsum(np.asarray(provider.records, dtype=np.int64))
        self.ends_list: list[int] = self.ends.tolist()
        self.starts = [first_record, *self.ends_list[:-1]]
        self._first_file = [first, *(first + np.cumsum(provider.files)).tolist()[:-1]]
        self._pages: dict[int, _Page] = {}

    def _page(self, q: int) -> _Page:
        got = self._pages.get(q)
        if got is None:
            got = _Page(self.provider.page(q), self.starts[q], self._first_file[q])  # type: ignore[arg-type]
            self._pages[q] = got
        return got

    @property
    def held(self) -> int:
        return sum(pg.held for pg in list(self._pages.values()))

    def loaded(self) -> list[SourceShard]:
        return [s for pg in list(self._pages.values()) for s in pg.shards]

    def each(self) -> Iterator[tuple[int, SourceShard]]:
        for q in range(len(self.starts)):
            yield from self._page(q).each()

    def shard(self, k: int) -> SourceShard:
        return self._page(bisect.bisect_right(self._first_file, k) - 1).shard(k)

    def locate_one(self, i: int) -> tuple[int, int]:
        return self._page(bisect.bisect_right(self.ends_list, i)).locate_one(i)

    def locate(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return _locate_in_pages(self.ends, self._page, idx)


def _locate_in_pages(
    ends: np.ndarray, page: Callable[[int], _Page | _Pages], idx: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The file number of each record index ``idx`` and the record's index in that
    file, given the global index where each page ends (``ends``) and ``page(p)``,
    each page's files located (loaded only for the pages ``idx`` lie in)."""
    pid = np.searchsorted(ends, idx, side="right")
    fid = np.empty_like(idx)
    local = np.empty_like(idx)
    for p in np.unique(pid).tolist():
        sel = pid == p
        fid[sel], local[sel] = page(p).locate(idx[sel])
    return fid, local


def _flat(pages: ShardPages) -> list[SourceShard]:
    """Every file of ``pages``, those of pages that are pages included, in order."""
    out: list[SourceShard] = []
    for p in range(len(pages.files)):
        got = pages.page(p)
        out += got if isinstance(got, list) else _flat(got)
    return out


class ArrayRecordDataSource:
    """Many ArrayRecord files as one random-access sequence of records.

    ``paths`` is one path, a list of paths, a glob pattern (expanded in sorted order;
    no match is ``FileNotFoundError``), an fsspec URL, a TFDS file instruction or a
    list mixing them. The official suffix ``"file[start:stop]"`` selects a range of a
    file. A file instruction is any object with ``filename``, ``skip``, ``take`` and
    ``examples_in_shard`` (what TFDS passes for a sliced split such as
    ``train[10%:20%]``; nothing of TFDS is imported): it selects records ``skip`` to
    ``skip + take - 1`` of ``filename``, as the official data source does, and
    ``take=-1`` (TFDS: all after ``skip``) reads to the end of the file. Files with a
    known range are not opened until read. Items are the stored bytes.

    ``reader_options`` are passed to every reader (a dict of strings or the official
    string). Files on an object store are read through the store that
    ``storage_options`` pick (:func:`arrayds.storage.get_store` of their folder: with
    ``"backend": "obstore"`` obstore's batched ranged GETs, else fsspec's), opened with
    a 128 KiB tail unless ``footer_prefetch_bytes`` says otherwise; the files a batch
    needs are opened at once. ``decode=True`` applies a records dataset's serializer;
    it needs the URL of a records dataset (docs/records.md) and is a ``ValueError``
    for plain files.
    A dataset written with ``pickle`` decodes only with ``allow_pickle=True`` (without
    it, ``decode=True`` is a ``ValueError`` here, at once); one written with an
    unregistered ``(encode, decode)`` pair needs ``serializer=`` that pair (or a
    :class:`arrayds.serializers.Serializer`). Both only matter with ``decode=True``.
    ``version=N`` / ``as_of=`` (a datetime; naive means UTC) read that version of a
    records dataset's history (:func:`arrayds.versions`; a ``ValueError`` names the
    versions kept if it is not one of them, or if a path is no records dataset).

    It is a Grain ``RandomAccessDataSource`` (``len``, ``__getitem__``, batched
    ``_getitems``) and a PyTorch map-style ``Dataset`` (``__getitems__``). It pickles
    without its open files; each process reopens them lazily. ``repr(src)`` is the
    official ``ArrayRecordDataSource(hash_of_paths=...)`` (Grain checkpoints compare
    it); ``str(src)`` also names the files and counts the records.

    >>> import os, tempfile, arrayds
    >>> d = tempfile.mkdtemp()
    >>> for k in range(2):
    ...     with arrayds.ArrayRecordWriter(os.path.join(d, f"part-{k}.array_record")) as w:
    ...         w.write_many(b"file %d record %d" % (k, i) for i in range(3))
    3
    3
    >>> src = arrayds.ArrayRecordDataSource(os.path.join(d, "part-*.array_record"))
    >>> len(src), src[0], src[-1]
    (6, b'file 0 record 0', b'file 1 record 2')
    >>> src[[4, 1]]
    [b'file 1 record 1', b'file 0 record 1']
    >>> from dataclasses import dataclass
    >>> @dataclass
    ... class FileInstruction:  # the fields of tfds' FileInstruction
    ...     filename: str
    ...     skip: int
    ...     take: int
    ...     examples_in_shard: int
    >>> part1 = os.path.join(d, "part-1.array_record")
    >>> arrayds.ArrayRecordDataSource([FileInstruction(part1, 1, 2, 3)])[:]
    [b'file 1 record 1', b'file 1 record 2']
    """

    def __init__(
        self,
        paths: PathLike | FileInstruction | Sequence[PathLike | FileInstruction],
        reader_options: Mapping[str, str] | str | None = None,
        *,
        storage_options: Mapping[str, Any] | None = None,
        decode: bool = False,
        allow_pickle: bool = False,
        serializer: Any = None,
        version: int | None = None,
        as_of: Any = None,
    ) -> None:
        shards, decoder, resolved = _expand_paths(
            paths,
            storage_options,
            allow_pickle=allow_pickle,
            serializer=serializer,
            version=version,
            as_of=as_of,
        )
        if decode and not resolved:
            raise ValueError(
                "ArrayRecordDataSource(decode=True) needs the URL of a records dataset, whose "
                "serializer decodes the items; plain ArrayRecord files hold raw bytes"
            )
        refusal = getattr(decoder, "refusal", None) if decode else None
        if refusal:  # e.g. a pickle dataset without allow_pickle: say so now, not per item
            raise ValueError(refusal)
        self._options: ReaderOptions = parse_reader_options(reader_options, "ArrayRecordDataSource")
        self._storage_options = dict(storage_options) if storage_options else None
        self._decode = decoder if decode else None
        self._lock = threading.Lock()
        self._opening: dict[int, threading.Lock] = {}  # a lock per file being opened
        self._readers: dict[int, ArrayRecordReader] = {}
        # files by global number in pages: one page of every file, or a kind's pages
        self._pages: OrderedDict[int, _Page | _Pages] = OrderedDict()
        self._pages_lock = threading.Lock()
        if isinstance(shards, list):
            counts = self._count(shards)
            files = [
                SourceShard(s.path, s.start, s.start + c, s.size)
                for s, c in zip(shards, counts, strict=True)
            ]
            self._provider: ShardPages | None = None
            page_records, page_files = [sum(counts)], [len(files)]
            self._where = files[0].path if files else ""
            self._pages[0] = _Page(files, 0, 0)
        else:
            self._provider = shards
            page_records, page_files = list(shards.records), list(shards.files)
            self._where = shards.where
        ends = np.cumsum(np.asarray(page_records, dtype=np.int64))
        self._page_ends = ends  # global index -> page: searchsorted(ends, i, "right")
        self._page_ends_list = ends.tolist()
        self._page_first = [0, *np.cumsum(page_files).tolist()[:-1]]
        self._nfiles = sum(page_files)
        self._len = int(ends[-1]) if len(ends) else 0
        if len(self._readers) > _KEEP_OPEN:
            for r in self._readers.values():
                r.close()
            self._readers = {}
        self._setup_fast_path()
        _live_sources.add(self)

    # -- construction helpers

    def _open(self, shard: SourceShard) -> ArrayRecordReader:
        store = _store_of(shard.path, self._storage_options)
        if store is None:
            return ArrayRecordReader(
                shard.path,
                self._options.string,
                storage_options=_fsspec_options(self._storage_options),
                file_size=shard.size,
            )
        # an object store: the reader fetches its byte ranges through the store of the
        # file's folder, the one the storage options pick (obstore's get_ranges with
        # "backend": "obstore", fsspec's cat_ranges otherwise)
        options = self._options.string
        if self._options.footer_prefetch_bytes is None and (
            self._options.index_storage_option != "offloaded"
        ):
            options = ",".join(o for o in (options, _REMOTE_FOOTER_PREFETCH) if o)
        return ArrayRecordReader(
            shard.path,
            options,
            storage_options=store.storage_options,
            file_size=shard.size,
            get_ranges=functools.partial(store.get_ranges, shard.path.rsplit("/", 1)[1]),
        )

    def _count(self, shards: list[SourceShard]) -> list[int]:
        todo = [k for k, s in enumerate(shards) if s.stop is None]

        def count(k: int) -> int:
            r = self._open(shards[k])
            self._readers[k] = r
            return r.num_records()

        if len(todo) > 1:
            with ThreadPoolExecutor(min(16, len(todo))) as pool:
                found = dict(zip(todo, pool.map(count, todo), strict=True))
        else:
            found = {k: count(k) for k in todo}
        counts = []
        for k, s in enumerate(shards):
            if s.stop is None:
                n = found[k] - s.start
                if n < 0:
                    raise IndexError(
                        f"ArrayRecordDataSource: {s.path!r} has {found[k]} records; "
                        f"cannot start at {s.start}"
                    )
            else:
                n = s.stop - s.start
            counts.append(n)
        return counts

    def _setup_fast_path(self) -> None:
        # src[i] goes straight to the engine's read(i) of the right file: a file's
        # read function is the reader's (opened once per process), found by its
        # number; a file not read yet has none, and its first read opens it.
        self._single = self._nfiles == 1
        # remote files: a batch reads its files at once (see _read_multi)
        first = self._where
        self._remote = ("://" in first or "::" in first) and not first.startswith("file://")
        self._single_offset = self._shard(0).start if self._single else 0
        # 0 disables the one-file fast path in __getitem__ (several files, or decoding).
        self._fast_len = self._len if self._single and self._decode is None else 0
        self._read_fns: dict[int, Callable[[int], bytes]] = {}
        self._read1: Callable[[int], bytes] = (
            functools.partial(self._open_then_read, 0) if self._single else _no_read
        )

    def _page(self, p: int) -> _Page | _Pages:
        """Page ``p`` of the files, located (loaded if it is not kept)."""
        got = self._pages.get(p)
        if got is not None:
            return got
        assert self._provider is not None  # a source of one page keeps it
        first = self._page_ends_list[p - 1] if p else 0
        loaded = self._provider.page(p)
        if isinstance(loaded, list):
            got = _Page(loaded, first, self._page_first[p])
        else:
            got = _Pages(loaded, first, self._page_first[p])
        with self._pages_lock:
            pages = self._pages
            pages[p] = got
            held = sum(x.held for x in pages.values())
            while len(pages) > 1 and held > PAGE_FILES:
                held -= pages.pop(next(iter(pages))).held
        return got

    def _shard(self, k: int) -> SourceShard:
        """File number ``k`` of the source."""
        return self._page(bisect.bisect_right(self._page_first, k) - 1).shard(k)

    def _locate(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The file number of each (valid) record index and the record's index in
        that file (the pages they lie in loaded, no other)."""
        if len(self._page_first) == 1:
            return self._page(0).locate(idx)
        return _locate_in_pages(self._page_ends, self._page, idx)

    def _reader(self, k: int) -> ArrayRecordReader:
        r = self._readers.get(k)
        if r is None:
            # one opener per file, files opened at once (on an object store each open
            # is a round trip: a batch over many unopened files pays one, not one each)
            with self._lock:
                gate = self._opening.setdefault(k, threading.Lock())
            with gate:
                r = self._readers.get(k)
                if r is None:
                    s = self._shard(k)
                    r = self._open(s)
                    n = r.num_records()
                    if n < s.stop:  # type: ignore[operator]
                        r.close()
                        raise IndexError(
                            f"ArrayRecordDataSource: {s.path!r} has {n} records, fewer than "
                            f"the {s.stop} it was expected to have"
                        )
                    self._readers[k] = r
            with self._lock:
                self._opening.pop(k, None)
        return r

    def _open_then_read(self, k: int, i: int) -> bytes:
        read = self._reader(k).take_one
        self._read_fns[k] = read
        if k == 0 and self._single:
            self._read1 = read
        return read(i)

    def _forget_readers(self) -> None:
        self._readers = {}
        self._lock = threading.Lock()
        self._opening = {}
        self._pages_lock = threading.Lock()
        self._setup_fast_path()

    # -- the sequence protocol

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, key: Any) -> Any:
        if type(key) is int and 0 <= key < self._fast_len:
            return self._read1(key + self._single_offset)
        if isinstance(key, (list, tuple, np.ndarray)):
            return self.__getitems__(key)
        if isinstance(key, slice):
            return self.__getitems__(np.arange(*key.indices(self._len), dtype=np.int64))
        if isinstance(key, bool) or not hasattr(key, "__index__"):
            raise TypeError(
                "ArrayRecordDataSource: indices must be integers, slices, lists or numpy "
                f"arrays, not {type(key).__name__}"
            )
        i = key.__index__()
        n = self._len
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(
                f"ArrayRecordDataSource: record index {key.__index__()} is out of range for "
                f"{n} records"
            )
        pages = self._page_ends_list
        k, local = self._page(bisect.bisect_right(pages, i) if len(pages) > 1 else 0).locate_one(i)
        read = self._read_fns.get(k)
        rec = read(local) if read is not None else self._open_then_read(k, local)
        return rec if self._decode is None else self._decode(rec)

    def __getitems__(self, indices: Sequence[SupportsIndex] | np.ndarray) -> list[Any]:
        """A batch of records, in the order asked; one engine call per file.

        >>> import os, tempfile, arrayds
        >>> path = os.path.join(tempfile.mkdtemp(), "a.ar")
        >>> with arrayds.ArrayRecordWriter(path) as w:
        ...     w.write_many([b"a", b"b", b"c"])
        3
        >>> arrayds.ArrayRecordDataSource(path).__getitems__([2, 0, 2])
        [b'c', b'a', b'c']
        """
        idx = index_array(indices, self._len, "ArrayRecordDataSource")
        if idx.size == 0:
            return []
        if self._single:
            if self._single_offset:
                idx = idx + self._single_offset
            recs = self._reader(0).take(idx)
        else:
            recs = self._read_multi(idx)
        if self._decode is not None:
            decode = self._decode
            return [decode(r) for r in recs]
        return recs

    def _read_multi(self, idx: np.ndarray) -> list[bytes]:
        fid, local = self._locate(idx)
        first = int(fid[0])
        if (fid == first).all():
            return self._reader(first).take(local)
        order = np.argsort(fid, kind="stable")
        sorted_fid = fid[order]
        cuts = np.flatnonzero(sorted_fid[1:] != sorted_fid[:-1]) + 1
        out: list[Any] = [None] * idx.size

        def read(part: np.ndarray) -> None:
            recs = self._reader(int(fid[part[0]])).take(local[part])
            for pos, rec in zip(part.tolist(), recs, strict=True):
                out[pos] = rec

        parts = np.split(order, cuts)
        if self._remote:
            # remote files: one coalesced pass per file, the files fetched at once
            run_each(prefetcher(), read, parts)
        else:
            for part in parts:
                read(part)
        return out

    def _getitems(self, indices: Sequence[int]) -> list[Any]:
        """Grain's batched read (``SupportsBatchedReadRandomAccessDataSource``)."""
        return self.__getitems__(indices)

    def batches(
        self,
        order: Sequence[SupportsIndex] | np.ndarray,
        batch_size: int,
        *,
        readahead: int | None = None,
        keep_bytes: int | None = None,
    ) -> Iterator[list[Any]]:
        """The records of ``order`` (record indices, e.g. a sampler's
        :meth:`~arrayds.sampler.BlockShuffleSampler.epoch_order`) in batches of
        ``batch_size`` (the last may be shorter), read ahead.

        The records of ``readahead`` batches are read together, as one
        ``__getitems__`` (one coalesced pass per shard for all of them), in a
        background thread while the batches before them are used: a window of a
        block shuffle is then one ranged GET per block (or per run of blocks) instead
        of one per batch and block, and a full shuffle's batches share their
        requests. ``readahead=None`` (the default) reads as many batches together as
        hold about :data:`READAHEAD_BYTES` (32 MiB) of the files' bytes, judged by
        the files' sizes over their records (at least one batch; 8 batches,
        :data:`DEFAULT_READAHEAD`, where the sizes are not known): the more records a
        group holds, the denser a shuffled group's records lie in each file and the
        fewer bytes its coalesced requests fetch beside them. At most two groups
        of records are held at once; leaving the loop early waits for the read in
        flight. ``readahead=0`` reads each batch when it is reached.

        Files on an object store whose sizes the source knows (a records dataset's
        shards) also read along records of later groups of ``order`` in the files a
        group reads (all of a file's, when they fit, so that no later group reads it
        again; else those that let the coalescing join the group's ranges into fewer
        requests) and keep them until their group comes (reading along,
        :mod:`arrayds.files.read_along`): a shuffled epoch then fetches few bytes
        twice and makes fewer requests. ``keep_bytes`` bounds what is kept, in stored
        bytes, on top of the two groups (``None``: :data:`KEEP_BYTES`, 32 MiB; ``0``:
        nothing is read along).

        A bad ``batch_size``, ``readahead`` or ``keep_bytes`` is a ``ValueError``, an
        index out of range an ``IndexError``, both raised here, before anything is
        read.

        >>> import os, tempfile, arrayds
        >>> path = os.path.join(tempfile.mkdtemp(), "b.ar")
        >>> with arrayds.ArrayRecordWriter(path) as w:
        ...     w.write_many([b"%d" % i for i in range(5)])
        5
        >>> list(arrayds.ArrayRecordDataSource(path).batches([4, 0, 3, 1, 2], 2))
        [[b'4', b'0'], [b'3', b'1'], [b'2']]
        >>> arrayds.ArrayRecordDataSource(path).batches([0], 0)
        Traceback (most recent call last):
        ...
        ValueError: ArrayRecordDataSource.batches: batch_size must be an int >= 1, got 0
        """
        checks = [("batch_size", batch_size, 1)]
        if readahead is not None:
            checks.append(("readahead", readahead, 0))
        if keep_bytes is not None:
            checks.append(("keep_bytes", keep_bytes, 0))
        for name, value, low in checks:
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ValueError(
                    f"ArrayRecordDataSource.batches: {name} must be an int >= {low}, got {value!r}"
                )
        idx = index_array(order, self._len, "ArrayRecordDataSource.batches")
        if readahead is None:
            readahead = self._readahead_batches(int(batch_size))
        keep = KEEP_BYTES if keep_bytes is None else int(keep_bytes)
        return self._batches(idx, int(batch_size), int(readahead), keep)

    def _record_bytes(self, k: int) -> float | None:
        """The stored bytes per record of file ``k`` (its size over its records; the
        records after a range that stops early counted too), or None if not known."""
        s = self._shard(k)
        return s.size / s.stop if s.size and s.stop else None

    def _readahead_batches(self, batch_size: int) -> int:
        """The default read-ahead of :meth:`batches`: batches of about
        :data:`READAHEAD_BYTES` of the files' bytes (their size per record judged from
        the pages of files loaded, the first one if none is)."""
        with self._pages_lock:
            pages = list(self._pages.values())
        if not pages and self._page_first:
            pages = [self._page(0)]
        sized = [s for pg in pages for s in pg.loaded() if s.size and s.stop]
        records = sum(s.stop - s.start for s in sized)  # type: ignore[operator]
        if not records:
            return DEFAULT_READAHEAD
        per_record = sum(s.size for s in sized) / records  # type: ignore[misc]
        return max(1, int(READAHEAD_BYTES // (per_record * batch_size)))

    def _batches(
        self, idx: np.ndarray, batch_size: int, readahead: int, keep_bytes: int
    ) -> Iterator[list[Any]]:
        if readahead == 0:
            for i in range(0, idx.size, batch_size):
                yield self.__getitems__(idx[i : i + batch_size])
            return
        step = batch_size * readahead
        groups = [idx[i : i + step] for i in range(0, idx.size, step)]
        # remote files: records of later groups read along (local reads need no requests)
        along = None
        if self._remote and keep_bytes and len(groups) > 1:
            along = ReadAlong(idx, step, keep_bytes)

        def read_group(k: int) -> list[Any]:
            if along is None:
                return self.__getitems__(groups[k])
            gap = coalesce_options().gap  # the coalescing the read will plan with
            return along.read(
                k, groups[k], self.__getitems__, self._locate, self._record_bytes, gap
            )

        # leaving the loop early (close, an error) leaves the with block, whose
        # shutdown waits for the read in flight
        with ThreadPoolExecutor(1, thread_name_prefix="arrayds-batches") as pool:
            ahead = None
            for k in range(len(groups)):
                got = read_group(k) if ahead is None else ahead.result()
                if k + 1 < len(groups):
                    ahead = pool.submit(contextvars.copy_context().run, read_group, k + 1)
                for i in range(0, len(got), batch_size):
                    yield got[i : i + batch_size]

    def __iter__(self) -> Iterator[Any]:
        for p in range(len(self._page_first)):
            for k, s in self._page(p).each():
                if s.stop == s.start:
                    continue
                it = self._reader(k).scan(s.start, s.stop)  # type: ignore[arg-type]
                if self._decode is None:
                    yield from it
                else:
                    yield from map(self._decode, it)

    # -- files, pickling, lifecycle

    @property
    def paths(self) -> list[str]:
        """The files, in order (globs expanded; every page of a long list loaded)."""
        return [s.path for p in range(len(self._page_first)) for _, s in self._page(p).each()]

    def num_records(self) -> int:
        """Same as ``len(src)``."""
        return self._len

    def close(self) -> None:
        """Close the open files. The source stays usable: files reopen when read."""
        with self._lock:
            readers, self._readers = self._readers, {}
            self._setup_fast_path()
        for r in readers.values():
            r.close()

    def __enter__(self) -> ArrayRecordDataSource:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close()

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        for key in ("_readers", "_lock", "_pages_lock", "_opening", "_read1", "_read_fns"):
            state.pop(key, None)
        if self._provider is not None:  # the pages of a long list: loaded again when used
            state["_pages"] = OrderedDict()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._readers = {}
        self._lock = threading.Lock()
        self._opening = {}
        self._pages_lock = threading.Lock()
        self._setup_fast_path()
        _live_sources.add(self)

    def hash_of_paths(self) -> str:
        """The SHA-1 (hex) of the file paths in order, each UTF-8 encoded, fed one after
        the other: the identity the official data source shows in its ``repr``.

        >>> import os, tempfile, hashlib, arrayds
        >>> path = os.path.join(tempfile.mkdtemp(), "a.ar")
        >>> arrayds.ArrayRecordWriter(path).close()
        >>> src = arrayds.ArrayRecordDataSource(f"{path}[0:0]")
        >>> src.hash_of_paths() == hashlib.sha1(path.encode()).hexdigest()
        True
        """
        h = hashlib.sha1()
        for p in self.paths:
            h.update(p.encode())
        return h.hexdigest()

    def __repr__(self) -> str:
        # Exactly the official repr: Grain's DataLoader stores repr(data_source) in
        # its checkpoints and refuses to restore over a source whose repr differs, so a
        # checkpoint made over the official source restores over this one.
        return f"ArrayRecordDataSource(hash_of_paths={self.hash_of_paths()})"

    def __str__(self) -> str:
        n = self._nfiles
        shown = ", ".join(repr(self._shard(k).path) for k in range(min(3, n)))
        if n > 3:
            shown += f", ... ({n - 3} more)"
        files = "1 file" if n == 1 else f"{n} files"
        return (
            f"ArrayRecordDataSource([{shown}], {files}, {self._len} records, "
            f"hash_of_paths={self.hash_of_paths()})"
        )
