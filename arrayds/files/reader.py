"""The ArrayRecord reader: records by index, list, range, slice or numpy array, decoded
in parallel by the engine; sequential iteration with readahead; remote files read by
byte ranges (:mod:`arrayds.storage.coalesce` plans them).

>>> import os, tempfile, arrayds
>>> path = os.path.join(tempfile.mkdtemp(), "r.array_record")
>>> with arrayds.ArrayRecordWriter(path) as w:
...     w.write_many([b"a", b"b", b"c"])
3
>>> ArrayRecordReader(path)[1:]
[b'b', b'c']
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import Any, SupportsIndex

import numpy as np

from .. import _native
from ..errors import CorruptionError
from ..storage.coalesce import fetch_spans
from .common import (
    BLOCK,
    PathLike,
    fspath,
    index_array,
    raise_closed,
    remote_url,
    resolve_fs,
    use_mmap,
)
from .options import parse_reader_options

# Bytes decoded per step of a sequential scan unless readahead_buffer_size says so.
_SCAN_BYTES = 8 << 20


# ------------------------------------------------------------------- shared helpers

_prefetch_pool: ThreadPoolExecutor | None = None
_prefetch_lock = threading.Lock()


def prefetcher() -> ThreadPoolExecutor:
    global _prefetch_pool
    pool = _prefetch_pool
    if pool is None:
        with _prefetch_lock:
            if _prefetch_pool is None:
                _prefetch_pool = ThreadPoolExecutor(16, thread_name_prefix="arrayds-readahead")
            pool = _prefetch_pool
    return pool


def _reset_after_fork() -> None:
    # Threads do not survive fork(): a pool inherited from the parent would never run
    # its work. Forget it; the child makes a new one when it first needs it.
    global _prefetch_pool, _prefetch_lock
    _prefetch_pool = None
    _prefetch_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _size_mismatch(name: str, expected: int, real: int | str | None) -> str:
    has = "more than that" if real is None else f"{real}"
    return (
        f"{name}: expected to have {expected} bytes (file_size, e.g. from a dataset "
        f"manifest), but the file has {has}: a damaged, replaced or truncated file"
    )


# --------------------------------------------------------------------------- reader


class ArrayRecordReader:
    """Read records from an ArrayRecord file by index, list, range or slice.

    Opening reads and checks the postscript, the footer and the index at once: a
    missing file, a truncated file or a file that is not an ArrayRecord file raises
    here (``FileNotFoundError``, :class:`CorruptionError`), not at the first read.

    The official overloads work: ``read()`` returns the record at the cursor (moved
    by ``seek(i)``), ``read([i, j])`` a list, ``read(start, end)`` a range (an ``end``
    past the last record is ``IndexError``; ``read(a, a)`` is ``[]``). Additions:
    ``read(i)``, Python indexing (``r[i]``, ``r[-1]``, ``r[i:j:k]``, ``r[[i, j]]``,
    ``r[np.array(...)]``), ``len(r)`` and sequential iteration with readahead.
    Batches are decoded in parallel with the GIL released; one reader may be shared
    by many threads. ``options`` are the official reader options, as a string
    (``"readahead_buffer_size:0"``) or a dict of strings; they change how, never
    what, is read. Iteration decodes batches of about ``readahead_buffer_size``
    bytes (8 MiB by default) and decodes the next batch in the background unless
    ``readahead_buffer_size:0`` or ``max_parallelism:0``.

    ``file_reader_buffer_size`` (the official keyword): the size in bytes of the
    file reader's buffer. For a remote file it is the smallest byte range fetched:
    a read of chunks that are not in the buffer fetches them with at least that many
    bytes from where they begin, keeps the last range fetched, and later reads of
    chunks inside it need no request (``read()`` cursor reads of small records go
    from one request per record to one per buffer). ``None`` (the default) fetches
    exactly the chunks each read needs, which suits random access (the official
    default is a 1 MiB buffer, which random reads pay for with 1 MiB per record; the
    official data source passes 32 KiB). Local files are memory-mapped or read with
    one ``pread`` per run of chunks, sized by the engine: there the value is checked
    and has no effect.

    ``file_size``: the file's size in bytes, when the caller knows it (a dataset
    manifest records the size of every shard). A remote file then opens with one
    ranged GET of its tail instead of a size request (HEAD) and the GET; a file of
    another size raises :class:`CorruptionError` naming the file, never reads wrong
    data. A local file's size is checked against the file system. With
    ``whole_file=True`` (and ``file_size``) a remote file is fetched whole by that one
    GET and its first read needs no request (for small files read whole, such as the
    shards of a dataset). ``get_ranges``: a function that fetches a list of byte ranges
    ``[(begin, end), ...]`` of this file (a dataset's store passes its own, which
    may plan them, :mod:`arrayds.storage.coalesce`); ``None``: the file system's
    ``cat_ranges``.

    Local files are memory-mapped (read-only) and decoded straight from the mapping;
    special files, or all files when the environment variable ``ARRAYDS_MMAP`` is
    ``0`` (read at each open), are read with ``pread``. A file truncated while open
    raises :class:`CorruptionError` at the next read of the lost part, not a crash.

    Where this differs from the official 0.8.6 reader, on purpose (the reasons are in
    docs/arrayrecord.md): errors in the file raise at open, not at the first read;
    ``read(a, a)`` is ``[]`` instead of ``IndexError``; ``read([...])`` accepts
    negative indices and costs O(len(list)) (the official one costs O(num_records)
    per call); ``seek(i)`` rejects a negative position (seeking past the end stays
    allowed); after ``close()`` reads raise ``ValueError`` ("... is closed") instead
    of ``RuntimeError``, while ``num_records()`` still answers; ``close()`` during an
    iteration ends it at the next batch boundary; ``file_reader_buffer_size``
    defaults to exact reads and must be a non-negative int.

    >>> import os, tempfile, arrayds, numpy as np
    >>> path = os.path.join(tempfile.mkdtemp(), "example.array_record")
    >>> with arrayds.ArrayRecordWriter(path) as w:
    ...     w.write_many(b"record %d" % i for i in range(10))
    10
    >>> r = arrayds.ArrayRecordReader(path)
    >>> len(r), r[0], r[-1]
    (10, b'record 0', b'record 9')
    >>> r.read([3, 1]), r.read(2, 4)
    ([b'record 3', b'record 1'], [b'record 2', b'record 3'])
    >>> r[8:], r[np.array([5])]
    ([b'record 8', b'record 9'], [b'record 5'])
    >>> r.seek(7); r.read()
    b'record 7'
    >>> r.close()
    """

    def __init__(
        self,
        path: PathLike,
        options: str | Mapping[str, str] | None = "",
        *,
        storage_options: Mapping[str, Any] | None = None,
        file_size: int | None = None,
        file_reader_buffer_size: int | None = None,
        whole_file: bool = False,
        get_ranges: Callable[[list[tuple[int, int]]], Sequence[Any]] | None = None,
    ) -> None:
        self._path = fspath(path, "ArrayRecordReader")
        if get_ranges is not None and not callable(get_ranges):
            raise TypeError(
                f"ArrayRecordReader: get_ranges must be callable, got {type(get_ranges).__name__}"
            )
        for key, value in (
            ("file_size", file_size),
            ("file_reader_buffer_size", file_reader_buffer_size),
        ):
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 0
            ):
                raise ValueError(
                    f"ArrayRecordReader({self._path!r}): {key} must be a non-negative int "
                    f"or None, got {value!r}"
                )
        self._buffer_size = file_reader_buffer_size or 0
        self._window: tuple[int, bytes] | None = None  # remote: the last range fetched
        # remote, opened with whole_file: the whole file, kept for the first read only
        self._preloaded: bytes | None = None
        self._get_ranges = get_ranges
        self._closed = True
        self._n = 0
        self._inflight: set[Future[list[bytes]]] = set()
        self._set_closed_callables()
        self._options = parse_reader_options(options, f"ArrayRecordReader({self._path!r})")
        self._storage_options = dict(storage_options) if storage_options else None
        self._fs: Any = None
        self._inner = self._path
        if get_ranges is not None and remote_url(self._path):
            self._remote = True  # every byte through get_ranges: the fs only if needed
        else:
            self._fs, self._inner = resolve_fs(self._path, storage_options)
            self._remote = self._fs is not None
        self._cursor = 0
        if not self._remote:
            self._open_local()
            if file_size is not None:
                self._check_local_size(file_size)
        else:
            self._open_remote(file_size, whole=whole_file and file_size is not None)
        self._closed = False
        self._n = int(self._native.num_records())

    # -- opening

    def _open_local(self) -> None:
        native = _native.Reader(self._inner, self._options.string, mmap=use_mmap())
        self._native = native
        self._read_one = native.read
        self._read_many = native.read_batch
        self._read_range = native.read_range

    def _check_local_size(self, expected: int) -> None:
        real = os.path.getsize(self._inner)
        if real != expected:
            self._native.close()
            raise CorruptionError(_size_mismatch(self._path, expected, real))

    def _file_system(self) -> Any:
        """The fsspec file system of a remote file (made on first use when the reader
        was given ``get_ranges``)."""
        if self._fs is None:
            self._fs, self._inner = resolve_fs(self._path, self._storage_options)
        return self._fs

    def _remote_size(self) -> int:
        try:
            return int(self._file_system().size(self._inner))
        except FileNotFoundError:
            raise FileNotFoundError(2, "No such file", self._path) from None

    def _fetch_range(self, begin: int, end: int) -> Any:
        """Bytes ``[begin, end)`` of the remote file (fewer at its end), through
        ``get_ranges`` if the reader has one, else the file system's ``cat_file``."""
        if self._get_ranges is None:
            return self._file_system().cat_file(self._inner, start=begin, end=end)
        (data,) = self._get_ranges([(begin, end)])
        if isinstance(data, BaseException):
            raise data
        return data

    def _open_remote(self, known_size: int | None = None, whole: bool = False) -> None:
        name = self._path
        size = self._remote_size() if known_size is None else known_size
        if size < BLOCK:
            if known_size is not None:
                raise CorruptionError(
                    f"{name}: expected to have {size} bytes, but an ArrayRecord file is at "
                    f"least {BLOCK} bytes (a wrong file_size)"
                )
            raise CorruptionError(
                f"{name}: not an ArrayRecord file: it has {size} bytes, but an ArrayRecord "
                f"file is at least {BLOCK} bytes"
            )
        want = self._options.footer_prefetch_bytes
        want = (1 << 20) if want is None else want
        tail_len = size if whole else min(size, max(BLOCK, want - want % BLOCK))
        if known_size is None:
            tail = self._fetch_range(size - tail_len, size)
        else:
            # No size request: ask for one byte past the claimed end. Exactly tail_len
            # bytes back means the file ends where it was said to (a longer file
            # returns one more byte, a shorter one fewer, or refuses the range).
            try:
                tail = self._fetch_range(size - tail_len, size + 1)
            except FileNotFoundError:
                raise FileNotFoundError(2, "No such file", name) from None
            except PermissionError:
                raise
            except OSError:
                if self._get_ranges is not None:
                    raise  # a store's get_ranges cuts a range past the end itself
                real = self._remote_size()  # e.g. "range not satisfiable": shorter
                if real != size:
                    raise CorruptionError(_size_mismatch(name, size, real)) from None
                raise
            if len(tail) > tail_len:
                raise CorruptionError(_size_mismatch(name, size, None))
            if len(tail) < tail_len:
                real: int | str
                if tail:
                    real = size - tail_len + len(tail)
                elif self._get_ranges is not None:  # nothing from the tail's first byte
                    real = f"at most {size - tail_len}"
                else:
                    real = self._remote_size()
                raise CorruptionError(_size_mismatch(name, size, real))
        if len(tail) != tail_len:
            raise CorruptionError(
                f"{name}: asked for bytes [{size - tail_len}, {size}) and got {len(tail)} bytes"
            )
        view = memoryview(tail)
        footer_offset = int(_native.Reader.footer_offset(view[-BLOCK:], size, name))
        tail_begin = size - tail_len
        if footer_offset >= tail_begin:
            footer = view[footer_offset - tail_begin : tail_len - BLOCK]
        else:
            footer = self._fetch_range(footer_offset, size - BLOCK)
            if len(footer) != size - BLOCK - footer_offset:
                raise CorruptionError(
                    f"{name}: asked for bytes [{footer_offset}, {size - BLOCK}) (the footer) "
                    f"and got {len(footer)} bytes"
                )
        native = _native.Reader.from_footer(size, footer_offset, footer, name, self._options.string)
        self._native = native
        if whole:
            self._preloaded = tail
        self._read_many = self._remote_read_many
        self._read_one = self._remote_read_one
        self._read_range = self._remote_read_range

    @property
    def holds_whole_file(self) -> bool:
        """Whether the reader holds its whole (small, remote) file from the open: its
        first read needs no request."""
        return self._preloaded is not None

    def _remote_read_many(self, indices: np.ndarray | Sequence[int]) -> list[bytes]:
        native = self._native
        return native.decode_spans(indices, self._fetch_spans(native.chunk_spans(indices)))

    def _fetch_spans(self, spans: list[tuple[int, int]]) -> list[tuple[int, Any]]:
        """The bytes of each chunk span ``(begin, end)`` of a remote file, as the
        ``(begin, data)`` pairs the engine decodes from: one ``cat_ranges`` call
        fetches the spans (exactly, or in ranges of at least
        ``file_reader_buffer_size`` bytes, serving spans inside the last range
        fetched without a request)."""
        if not spans:
            return []
        whole, self._preloaded = self._preloaded, None
        if whole is not None:  # opened with the whole file: the first read needs no request
            view = memoryview(whole)
            return [(b, view[b:e]) for b, e in spans]
        if not self._buffer_size:
            return fetch_spans(spans, self._get_ranges or self._cat_ranges, self._path)
        out: list[tuple[int, Any]] = []
        window = self._window
        missing = []
        for begin, end in spans:
            if window is not None and window[0] <= begin and end <= window[0] + len(window[1]):
                w0 = window[0]
                out.append((begin, memoryview(window[1])[begin - w0 : end - w0]))
            else:
                missing.append((begin, end))
                out.append((begin, None))
        if not missing:
            return out
        # Spans come sorted and disjoint: each missing one is fetched with at least
        # buffer-size bytes from its start (not past the file's end); ranges that
        # touch or overlap become one.
        size = int(self._native.file_size())
        ranges: list[list[int]] = []
        for begin, end in missing:
            stop = min(max(end, begin + self._buffer_size), size)
            if ranges and begin <= ranges[-1][1]:
                ranges[-1][1] = max(ranges[-1][1], stop)
            else:
                ranges.append([begin, stop])
        datas = (self._get_ranges or self._cat_ranges)([(b, e) for b, e in ranges])
        for (b, e), data in zip(ranges, datas, strict=True):
            if isinstance(data, BaseException):
                raise data
            if len(data) != e - b:
                raise CorruptionError(
                    f"{self._path}: asked for bytes [{b}, {e}) and got {len(data)} bytes"
                )
        views = [memoryview(d) for d in datas]
        j = 0
        for k, (begin, data) in enumerate(out):
            if data is not None:
                continue
            end = spans[k][1]
            while ranges[j][1] < end:
                j += 1
            r0 = ranges[j][0]
            out[k] = (begin, views[j][begin - r0 : end - r0])
        self._window = (ranges[-1][0], datas[-1])
        return out

    def _cat_ranges(self, ranges: list[tuple[int, int]]) -> list[Any]:
        """The bytes of each ``(begin, end)`` range, fetched concurrently by fsspec."""
        return self._file_system().cat_ranges(
            [self._inner] * len(ranges), [b for b, _ in ranges], [e for _, e in ranges]
        )

    def _remote_read_one(self, i: int) -> bytes:
        return self._remote_read_many([i])[0]

    def _remote_read_range(self, start: int, stop: int) -> list[bytes]:
        return self._remote_read_many(np.arange(start, stop, dtype=np.int64))

    def read_into(
        self, indices: np.ndarray | Sequence[int], buffers: Sequence[Any], prefix: Any = None
    ) -> None:
        """Decode records ``indices`` (non-negative) into the writable ``buffers``
        (internal; the engine's ``Reader.read_into``, docs/design/engine.md).

        Each record must be ``prefix`` (one bytes-like object, or one per record)
        followed by exactly as many bytes as its buffer holds (``ValueError``
        otherwise, naming the record); those bytes land in the buffer in C order.
        Local files decode with the GIL released; remote files fetch the chunks'
        byte ranges first, as :meth:`read` does.
        """
        native = self._native
        if not self._remote:
            native.read_into(indices, buffers, prefix)
            return
        native.read_into(indices, buffers, prefix, self._fetch_spans(native.chunk_spans(indices)))

    def _set_closed_callables(self) -> None:
        closed = raise_closed(f"ArrayRecordReader({self._path!r})")
        self._read_one = closed
        self._read_many = closed
        self._read_range = closed

    # -- metadata

    @property
    def path(self) -> str:
        """The path or URL this reader reads."""
        return self._path

    def num_records(self) -> int:
        """The number of records in the file (still answers after ``close()``)."""
        return self._n

    def __len__(self) -> int:
        return self._n

    def group_size(self) -> int:
        """Records per chunk, as the file's index says (0 for an empty file)."""
        self._check_open()
        return int(self._native.group_size())

    def writer_options_string(self) -> str | None:
        """The options string the writer stored in the footer, or ``None`` if absent.

        >>> import os, tempfile, arrayds
        >>> path = os.path.join(tempfile.mkdtemp(), "a.ar")
        >>> arrayds.ArrayRecordWriter(path, "uncompressed").close()
        >>> arrayds.ArrayRecordReader(path).writer_options_string()
        'group_size:1,transpose:false,pad_to_block_boundary:false,uncompressed,max_parallelism:1'
        """
        self._check_open()
        return self._native.writer_options_string()

    def record_index(self) -> int:
        """The cursor: the index :meth:`read` with no argument returns next."""
        return self._cursor

    def seek(self, index: SupportsIndex) -> None:
        """Move the cursor. Like a file, seeking past the end is allowed; the next
        ``read()`` then raises ``IndexError``. A negative position is ``ValueError``."""
        self._check_open()
        i = index.__index__()
        if i < 0:
            raise ValueError(f"ArrayRecordReader({self._path!r}): negative seek position {i}")
        self._cursor = i

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"ArrayRecordReader({self._path!r}) is closed")

    def _index(self, i: int) -> int:
        n = self._n
        if i < 0:
            i += n
        if 0 <= i < n:
            return i
        self._check_open()
        raise IndexError(
            f"ArrayRecordReader({self._path!r}): record index {i if i >= 0 else i - n} is "
            f"out of range for {n} records"
        )

    # -- reading

    def read(self, *args: Any) -> Any:
        """Read records (the official overloads plus ``read(i)``).

        * ``read()`` -> the record at the cursor; the cursor moves on;
        * ``read(i)`` -> one record (``i < 0`` counts from the end);
        * ``read([i, j, ...])`` (list, tuple or numpy array) -> a list, in that order;
        * ``read(start, end)`` -> records ``start..end-1``; negative values count
          from the end, an ``end`` past the last record is ``IndexError`` and
          ``read(a, a)`` is ``[]``.

        >>> import os, tempfile, arrayds
        >>> path = os.path.join(tempfile.mkdtemp(), "a.ar")
        >>> with arrayds.ArrayRecordWriter(path) as w:
        ...     w.write_many([b"a", b"b", b"c"])
        3
        >>> r = arrayds.ArrayRecordReader(path)
        >>> r.read(), r.read(), r.read(-1), r.read([2, 0]), r.read(1, 3)
        (b'a', b'b', b'c', [b'c', b'a'], [b'b', b'c'])
        """
        if not args:
            i = self._cursor
            if i >= self._n:
                self._check_open()
                raise IndexError(
                    f"ArrayRecordReader({self._path!r}): out of range of num_records: {self._n}"
                )
            rec = self._read_one(i)
            self._cursor = i + 1
            return rec
        if len(args) == 1:
            key = args[0]
            if type(key) is int:
                return self._read_one(self._index(key))
            if isinstance(key, (list, tuple, np.ndarray)):
                return self._read_many(self._indices(key))
            if hasattr(key, "__index__") and not isinstance(key, bool):
                return self._read_one(self._index(key.__index__()))
            raise TypeError(
                f"ArrayRecordReader.read() takes an int, a list of ints or (start, end), "
                f"got {type(key).__name__}"
            )
        if len(args) == 2:
            start, stop = self._range(args[0], args[1])
            if start == stop:
                self._check_open()
                return []
            return self._read_range(start, stop)
        raise TypeError(f"ArrayRecordReader.read() takes at most 2 arguments, got {len(args)}")

    def _range(self, start: SupportsIndex, end: SupportsIndex) -> tuple[int, int]:
        n = self._n
        a = start.__index__()
        b = end.__index__()
        a0, b0 = a, b
        if a < 0:
            a += n
        if b < 0:
            b += n
        if not (0 <= a <= b <= n):
            self._check_open()
            raise IndexError(
                f"ArrayRecordReader({self._path!r}): range [{a0}, {b0}) is out of range of [0, {n})"
            )
        return a, b

    def _indices(self, key: Any) -> np.ndarray:
        return index_array(key, self._n, f"ArrayRecordReader({self._path!r})")

    def read_all(self) -> list[bytes]:
        """Every record, in order (decoded in parallel).

        >>> import os, tempfile, arrayds
        >>> path = os.path.join(tempfile.mkdtemp(), "a.ar")
        >>> arrayds.ArrayRecordWriter(path).close()
        >>> arrayds.ArrayRecordReader(path).read_all()
        []
        """
        self._check_open()
        if self._n == 0:
            return []
        return self._read_range(0, self._n)

    def __getitem__(self, key: Any) -> Any:
        if type(key) is int:
            if 0 <= key < self._n:
                return self._read_one(key)
            return self._read_one(self._index(key))
        if isinstance(key, slice):
            start, stop, step = key.indices(self._n)
            if step == 1:
                if start >= stop:
                    self._check_open()
                    return []
                return self._read_range(start, stop)
            idx = np.arange(start, stop, step, dtype=np.int64)
            if idx.size == 0:
                self._check_open()
                return []
            return self._read_many(idx)
        if isinstance(key, (list, tuple, np.ndarray)):
            return self._read_many(self._indices(key))
        if hasattr(key, "__index__") and not isinstance(key, bool):
            return self._read_one(self._index(key.__index__()))
        raise TypeError(
            f"ArrayRecordReader({self._path!r}): indices must be integers, slices, lists "
            f"or numpy arrays, not {type(key).__name__}"
        )

    def __iter__(self) -> Iterator[bytes]:
        self._check_open()
        return self._iter_range(0, self._n)

    def take(self, indices: np.ndarray) -> list[bytes]:
        """The records at ``indices``, an int64 array of indices the caller checked
        (non-negative, in range): no index conversion (what a data source, which
        checked them against all its files, reads with)."""
        return self._read_many(indices)

    def take_one(self, i: int) -> bytes:
        """The record at index ``i``, checked by the caller (``0 <= i < len(self)``)."""
        return self._read_one(i)

    def scan(self, start: int, stop: int) -> Iterator[bytes]:
        """The records ``start`` to ``stop`` (checked by the caller) in order, decoded
        in batches with readahead, as iteration reads them."""
        return self._iter_range(start, stop)

    def _iter_range(self, start: int, stop: int) -> Iterator[bytes]:
        """Records start..stop-1 in order, decoded in batches of about
        ``readahead_buffer_size`` bytes; the next batch is decoded in the background
        while the current one is consumed (unless ``max_parallelism:0`` or
        ``readahead_buffer_size:0``)."""
        opts = self._options
        target = opts.readahead_buffer_size
        background = target != 0 and opts.max_parallelism != 0
        if not target:
            target = _SCAN_BYTES
        group = max(1, int(self._native.group_size())) if stop > start else 1
        count = max(group, 64)
        pos = start
        pending = None
        pending_stop = pos
        try:
            while pos < stop:
                if pending is not None:
                    try:
                        batch = pending.result()
                    except CancelledError:
                        self._check_open()  # cancelled by close(): "... is closed"
                        raise
                    finally:
                        self._inflight.discard(pending)
                    pending = None
                    end = pending_stop
                else:
                    end = min(stop, pos + count)
                    batch = self._read_range(pos, end)
                pos = end
                # Size the next batch so it holds about `target` bytes.
                nbytes = sum(map(len, batch))
                per = max(1, nbytes // max(1, len(batch)))
                count = max(1, min(1 << 16, target // per))
                count = max(group, count - count % group)
                if background and pos < stop:
                    pending_stop = min(stop, pos + count)
                    pending = prefetcher().submit(self._read_range, pos, pending_stop)
                    self._inflight.add(pending)
                yield from batch
        finally:
            if pending is not None:
                pending.cancel()
                self._inflight.discard(pending)

    # -- lifecycle

    def close(self) -> None:
        """Close the file. Later reads raise ``ValueError``; ``close()`` may be
        repeated; ``num_records()`` still answers."""
        if self._closed:
            return
        self._closed = True
        self._set_closed_callables()
        # Let readahead that is already decoding finish before the engine closes.
        inflight = list(self._inflight)
        for f in inflight:
            f.cancel()
        futures_wait(inflight)
        self._native.close()
        self._window = None

    def ok(self) -> bool:
        """True while the reader is open (a reader that failed to open raised)."""
        return not self._closed

    def is_open(self) -> bool:
        """True until :meth:`close`."""
        return not self._closed

    def __enter__(self) -> ArrayRecordReader:
        self._check_open()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"ArrayRecordReader({self._path!r}, num_records={self._n}, {state})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickles by path: the copy reopens the file (and checks it again).
        return (
            _unpickle_reader,
            (
                self._path,
                self._options.string,
                self._storage_options,
                self._cursor,
                self._closed,
                self._buffer_size or None,
            ),
        )


def _unpickle_reader(
    path: str,
    options: str,
    storage_options: dict[str, Any] | None,
    cursor: int,
    closed: bool,
    file_reader_buffer_size: int | None = None,
) -> ArrayRecordReader:
    if closed:
        r = ArrayRecordReader.__new__(ArrayRecordReader)
        r._path = path
        r._closed = True
        r._n = 0
        r._cursor = cursor
        r._options = parse_reader_options(options)
        r._storage_options = storage_options
        r._buffer_size = file_reader_buffer_size or 0
        r._window = None
        r._inflight = set()
        r._set_closed_callables()
        return r
    r = ArrayRecordReader(
        path,
        options,
        storage_options=storage_options,
        file_reader_buffer_size=file_reader_buffer_size,
    )
    r._cursor = cursor
    return r
