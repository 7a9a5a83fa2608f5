"""The ArrayRecord writer: records compressed in chunks by the engine (in parallel, the
GIL released); remote files uploaded whole at ``close()`` or streamed in parts to
object stores that publish an object only when its upload completes (fsspec's
buffered file, or an :class:`arrayds.abc.store.Upload` a store gives the writer).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "w.array_record")
>>> with ArrayRecordWriter(path, "group_size:2") as w:
...     w.write_many([b"x"] * 5)
5
>>> os.path.getsize(path) > 0
True
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .. import _native
from ..abc import store as store_contract
from ..abc.store import Upload

if TYPE_CHECKING:  # pragma: no cover
    from collections.abc import Buffer  # Python >= 3.12
else:
    Buffer = Any
from .common import PathLike, fspath, resolve_fs

# Records handed to the engine per write_many() call when the input is not a list: at
# most this many, and no more once they hold this many bytes (so a generator of large
# records, e.g. a shard of 4 MiB chunks, is never held whole).
_WRITE_BATCH = 4096
_WRITE_BATCH_BYTES = 64 << 20


# --------------------------------------------------------------------------- writer

STREAMED_PROTOCOLS = ("s3", "s3a", "gs", "gcs")
"""Object stores where an object appears only when its upload completes: a writer to
them streams the file into fsspec's buffered file (S3 multipart upload, GCS resumable
upload, parts of :data:`arrayds.abc.store.UPLOAD_PART_BYTES`) instead of building it
in memory first."""


class _FsspecUpload:
    """An :class:`arrayds.abc.store.Upload` over fsspec's buffered file: s3fs uploads
    the parts of a multipart upload, gcsfs the chunks of a resumable upload."""

    def __init__(self, fs: Any, path: str) -> None:
        self.url = fs.unstrip_protocol(path)
        self.file = fs.open(path, "wb", block_size=store_contract.UPLOAD_PART_BYTES)

    def write(self, data: Buffer) -> None:
        self.file.write(data)

    def close(self) -> None:
        self.file.close()

    def abort(self) -> None:
        try:
            self.file.discard()  # s3fs: abort the multipart upload; gcsfs: delete it
        finally:
            self.file.closed = True  # so that closing (or collecting) it uploads nothing


class _Stream:
    """The upload a streaming writer writes to, as the engine sees it: counts the bytes
    sent, drops writes once aborted (an abandoned engine writer finishes into nothing)
    and aborts at most once. The engine holds ``write``; this object holds no
    reference to the writer (no cycle through the engine)."""

    def __init__(self, upload: Upload) -> None:
        self.upload = upload
        self.aborted = False
        self.written = 0

    def write(self, data: bytes) -> None:
        if not self.aborted:
            self.upload.write(data)
            self.written += memoryview(data).nbytes

    def finish(self) -> None:
        """Complete the upload: the object appears now, whole."""
        self.upload.close()

    def abort(self) -> None:
        """Cancel the upload: no object (not even an empty one) appears."""
        if self.aborted:
            return
        self.aborted = True
        self.upload.abort()


def _streamed(fs: Any) -> bool:
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    return any(p in STREAMED_PROTOCOLS for p in protocols)


def _nbytes(record: Any) -> int:
    """The size of a record in bytes (0 for an object that is no buffer: the engine
    then names what is wrong with it)."""
    try:
        return memoryview(record).nbytes
    except TypeError:
        return 0


class ArrayRecordWriter:
    """Write records to an ArrayRecord file.

    ``options`` use the official grammar (spec 12.1): ``group_size:N``, ``zstd[:L]``,
    ``brotli[:L]``, ``snappy``, ``uncompressed``, ``window_log:N``,
    ``max_parallelism:N``, ``pad_to_block_boundary:true|false``. The default is
    ``group_size:1,zstd:3``. Unknown keys, bad levels, two codecs and ``transpose``
    raise ``ValueError`` naming the key. Nothing is in its final form until
    :meth:`close` writes the footer; a file that was never closed does not open. A
    ``with`` block closes the file when it ends normally and abandons it
    (:meth:`abort`) when it raises, so a failed write never looks complete.

    A local path (or ``file://`` URL) is written directly. On S3 and GCS the file is
    uploaded while it is written (:data:`STREAMED_PROTOCOLS`; it appears at
    ``close()``), so memory stays at about one part, not the file. Any other fsspec URL
    is built in memory and uploaded with one whole-object write at ``close()``.
    ``path`` may also be an :class:`arrayds.abc.store.Upload` (what
    :meth:`arrayds.abc.store.Store.new_file` of the obstore store yields): the file is
    streamed into it, completed at ``close()`` and aborted by :meth:`abort` (or if the
    writer cannot be made); ``storage_options`` then play no part.

    >>> import os, tempfile, arrayds
    >>> path = os.path.join(tempfile.mkdtemp(), "example.array_record")
    >>> with arrayds.ArrayRecordWriter(path, "group_size:1,zstd:3") as w:
    ...     w.write(b"first record")
    ...     w.write_many(b"record %d" % i for i in range(3))
    3
    >>> arrayds.ArrayRecordReader(path).read_all()
    [b'first record', b'record 0', b'record 1', b'record 2']
    """

    def __init__(
        self,
        path: PathLike | Upload,
        options: str = "",
        *,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        given = path if isinstance(path, Upload) else None
        self._upload: _Stream | None = None if given is None else _Stream(given)
        self._path = given.url if given is not None else fspath(path, "ArrayRecordWriter")
        if options is None:
            options = ""
        if not isinstance(options, str):
            if self._upload is not None:
                self._upload.abort()  # the writer was given it: nothing may remain of it
            raise TypeError(
                f"ArrayRecordWriter({self._path!r}): options must be a str in the official "
                f"grammar ('group_size:1,zstd:3'), got {type(options).__name__}"
            )
        self._failed = False
        self._closed = True  # until the engine writer exists
        self._fs, self._inner = (
            (None, "") if given is not None else resolve_fs(self._path, storage_options)
        )
        try:
            if self._upload is None and self._fs is not None and _streamed(self._fs):
                _native.canonical_writer_options(options)  # bad options: no upload begins
                self._upload = _Stream(_FsspecUpload(self._fs, self._inner))
            if self._upload is not None:
                self._native = _native.Writer(None, options, write=self._upload.write)
            else:
                path = None if self._fs is not None else self._inner
                self._native = _native.Writer(path, options)
        except ValueError as e:
            if self._upload is not None:
                self._upload.abort()
            raise ValueError(f"ArrayRecordWriter({self._path!r}): {e}") from None
        self._closed = False
        self._options = self._native.options_string()

    @property
    def path(self) -> str:
        """The path or URL this writer writes to."""
        return self._path

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"ArrayRecordWriter({self._path!r}) is closed")

    def write(self, record: Buffer) -> None:
        """Append one record (any bytes-like object: bytes, bytearray, memoryview, a
        contiguous numpy array). ``str`` is a ``TypeError``: encode it first.

        >>> import os, tempfile, arrayds
        >>> w = arrayds.ArrayRecordWriter(os.path.join(tempfile.mkdtemp(), "a.ar"))
        >>> w.write("text")
        Traceback (most recent call last):
        ...
        TypeError: ArrayRecordWriter.write() needs a bytes-like object, not str (encode it first)
        >>> w.close()
        """
        if self._closed:
            self._check_open()
        if isinstance(record, str):
            raise TypeError(
                "ArrayRecordWriter.write() needs a bytes-like object, not str (encode it first)"
            )
        try:
            self._native.write(record)
        except TypeError:
            raise
        except BaseException:
            self._failed = True
            raise

    def write_many(self, records: Iterable[Buffer]) -> int:
        """Append every record of an iterable; returns how many were written.

        Lists and tuples go to the engine in one call; other iterables in batches of
        at most 4096 records or 64 MiB, so a generator is never held whole. Chunks are
        compressed in parallel with the GIL released.

        >>> import os, tempfile, arrayds
        >>> w = arrayds.ArrayRecordWriter(os.path.join(tempfile.mkdtemp(), "a.ar"))
        >>> w.write_many([b"a", b"b", b"c"])
        3
        >>> w.close()
        """
        self._check_open()
        if isinstance(records, (str, bytes, bytearray, memoryview)):
            raise TypeError(
                "ArrayRecordWriter.write_many() needs an iterable of records; to write one "
                "record use write()"
            )
        try:
            if isinstance(records, (list, tuple)):
                return int(self._native.write_many(records))
            total = 0
            batch: list[Buffer] = []
            size = 0
            for rec in records:
                batch.append(rec)
                size += _nbytes(rec)
                if len(batch) >= _WRITE_BATCH or size >= _WRITE_BATCH_BYTES:
                    total += int(self._native.write_many(batch))
                    batch, size = [], 0
            if batch:
                total += int(self._native.write_many(batch))
            return total
        except TypeError:
            raise
        except BaseException:
            self._failed = True
            raise

    def close(self) -> None:
        """Write the footer and postscript and close the file (or upload it, for a
        remote URL). Repeated calls do nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            self._native.close()
            if self._upload is not None:
                self._upload.finish()
            elif self._fs is not None:
                self._fs.pipe_file(self._inner, self._native.getvalue())
        except BaseException:
            self._failed = True
            if self._upload is not None:
                # the close's error stands (a completing request whose reply was lost
                # leaves no upload to cancel: see :attr:`upload_bytes`)
                with contextlib.suppress(Exception):
                    self._upload.abort()
            raise

    @property
    def upload_bytes(self) -> int:
        """Bytes streamed to an object-store upload so far (:data:`STREAMED_PROTOCOLS`
        or a given :class:`arrayds.abc.store.Upload`; 0 for any other destination):
        after ``close()``, the whole file's size. A
        completing request that the store applied but whose reply was lost makes
        ``close()`` fail (GCS: the resumable session is complete, 404; S3: the
        multipart upload is gone) while the object is there whole; only a caller that
        knows no other writer can have made an object of that name may then take an
        object of this size as its own (the shard writer, :mod:`arrayds.nodes.shards`).

        >>> import os, tempfile
        >>> w = ArrayRecordWriter(os.path.join(tempfile.mkdtemp(), "u.array_record"))
        >>> w.write(b"x"); w.close(); w.upload_bytes
        0
        """
        return 0 if self._upload is None else self._upload.written

    def ok(self) -> bool:
        """True while the writer is open and no write has failed (like the official
        writer, a closed writer is not ``ok()``)."""
        return not self._closed and not self._failed

    def is_open(self) -> bool:
        """True until :meth:`close`."""
        return not self._closed

    def num_records(self) -> int:
        """Records written so far."""
        return int(self._native.num_records())

    def options_string(self) -> str:
        """The canonical options string stored in the footer (spec 12.1)."""
        return self._options

    def __enter__(self) -> ArrayRecordWriter:
        self._check_open()
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()

    def abort(self) -> None:
        """Close without finishing the file: it gets no footer, so it cannot be opened
        (``CorruptionError``) and cannot pass for a complete file. A remote file is
        not uploaded. The ``with`` block does this when it raises, and a writer that
        is garbage-collected while open does it too. Repeated calls do nothing.

        >>> import os, tempfile, arrayds
        >>> path = os.path.join(tempfile.mkdtemp(), "a.ar")
        >>> w = arrayds.ArrayRecordWriter(path)
        >>> w.write(b"half of the data")
        >>> w.abort()
        >>> arrayds.ArrayRecordReader(path)
        Traceback (most recent call last):
        ...
        arrayds._native.CorruptionError: ...
        """
        if self._closed:
            return
        self._closed = True
        self._failed = True
        native = self._native
        if self._upload is not None:
            self._upload.abort()  # before the engine finishes the file into it
        engine_abort = getattr(native, "abort", None)
        if engine_abort is not None:
            engine_abort()
        elif self._upload is None and self._fs is None:
            # The engine finishes a file on close() and on destruction; it has no way
            # to drop one yet. Finish it, then empty it, so no footer survives.
            native.close()
            with open(self._inner, "r+b") as f:
                f.truncate(0)
        # Remote: the file was built in memory and is simply never uploaded (or its
        # streamed upload was cancelled above).

    def __del__(self) -> None:
        if getattr(self, "_closed", True):
            return
        try:
            warnings.warn(
                f"ArrayRecordWriter({self._path!r}) was garbage-collected without close(); "
                "the file is left incomplete",
                ResourceWarning,
                stacklevel=2,
            )
            self.abort()
        except Exception:  # noqa: BLE001 - never raise from a finalizer
            pass

    def __repr__(self) -> str:
        if not hasattr(self, "_native"):
            return f"ArrayRecordWriter({self._path!r}, <failed>)"
        state = "closed" if self._closed else "open"
        return (
            f"ArrayRecordWriter({self._path!r}, options={self._options!r}, "
            f"records={self.num_records()}, {state})"
        )

    def __getstate__(self) -> None:
        raise TypeError(f"ArrayRecordWriter({self._path!r}) cannot be pickled")
