"""Readers for record inputs that are not ArrayRecord: TFRecord files and JSON lines.

TFRecord framing (one record)::

    uint64 length            little endian
    uint32 masked_crc32c(length bytes)
    byte   data[length]
    uint32 masked_crc32c(data)

``masked_crc(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8`` (mod 2**32), with CRC-32C
(Castagnoli) computed by the ``crc32c`` package (hardware accelerated where available).
Every CRC is verified; a bad CRC or a truncated file raises
:class:`arrayds.CorruptionError` naming the file and the byte offset of the record.

:func:`iter_tfrecord` / :func:`iter_jsonlines` stream one file in constant memory;
:func:`read_tfrecord` / :func:`read_jsonlines` build a ``dask.bag.Bag`` with one
partition (one task) per input file, in sorted file order.

Example:
    >>> import os, tempfile, arrayds
    >>> from arrayds.files.tfrecord import write_tfrecord, iter_tfrecord
    >>> path = os.path.join(tempfile.mkdtemp(), "x.tfrecord")
    >>> write_tfrecord(path, [b"a", b"bc"])
    2
    >>> list(iter_tfrecord(path))
    [b'a', b'bc']
    >>> arrayds.read_tfrecord(path).compute(scheduler="sync")
    [b'a', b'bc']
"""

from __future__ import annotations

import json
import struct
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import crc32c as _crc32c
import fsspec

from ..errors import CorruptionError

if TYPE_CHECKING:
    import dask.bag

__all__ = [
    "expand_paths",
    "iter_jsonlines",
    "iter_tfrecord",
    "masked_crc32c",
    "read_jsonlines",
    "read_tfrecord",
    "write_tfrecord",
]

_HEADER = struct.Struct("<QI")
_CRC = struct.Struct("<I")
_MASK_DELTA = 0xA282EAD8
_BLOCK = 1 << 22  # bytes fetched per read from the input file
_GLOB_CHARS = frozenset("*?[")


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """The masked CRC-32C TFRecord stores after the length and after the data.

    Example:
        >>> from arrayds.files.tfrecord import masked_crc32c
        >>> hex(masked_crc32c(b""))
        '0xa282ead8'
    """
    crc = _crc32c.crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


def expand_paths(
    paths_or_glob: str | Iterable[str], *, storage_options: dict[str, Any] | None = None
) -> list[tuple[fsspec.AbstractFileSystem, str]]:
    """Resolve one path, a list of paths or a glob pattern to ``(filesystem, path)`` pairs.

    A glob expands in sorted order; a glob matching nothing, an empty list or a single
    missing path is ``FileNotFoundError``.

    Example:
        >>> import os, tempfile
        >>> from arrayds.files.tfrecord import expand_paths
        >>> d = tempfile.mkdtemp()
        >>> for n in ("b", "a"):
        ...     open(os.path.join(d, n + ".tfrecord"), "wb").close()
        >>> [os.path.basename(p) for _, p in expand_paths(os.path.join(d, "*.tfrecord"))]
        ['a.tfrecord', 'b.tfrecord']
    """
    opts = dict(storage_options or {})
    items = [paths_or_glob] if isinstance(paths_or_glob, str) else list(paths_or_glob)
    if not items:
        raise FileNotFoundError("no input files given (an empty list of paths)")
    out: list[tuple[fsspec.AbstractFileSystem, str]] = []
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"input paths must be strings, got {item!r}")
        fs, path = fsspec.core.url_to_fs(item, **opts)
        if _GLOB_CHARS & set(path):
            matches = sorted(fs.glob(path))
            if not matches:
                raise FileNotFoundError(f"no input file matches {item!r}")
            out.extend((fs, m) for m in matches)
        else:
            out.append((fs, path))
    if len(items) == 1 and len(out) == 1 and not out[0][0].exists(out[0][1]):
        raise FileNotFoundError(f"input file {items[0]!r} does not exist")
    return out


def _display(fs: fsspec.AbstractFileSystem, path: str) -> str:
    try:
        return fs.unstrip_protocol(path)
    except Exception:  # pragma: no cover - exotic filesystems
        return path


def _iter_frames(f: Any, name: str, verify: bool, copy: bool = True) -> Iterator[Any]:
    """Parse TFRecord frames from the binary file object ``f``.

    Reads blocks of ``_BLOCK`` bytes and walks the complete frames of each block in a
    tight loop.  ``copy=False`` yields read-only ``memoryview`` slices of the blocks
    (for writers that consume them at once) instead of ``bytes``.
    """
    crc = _crc32c.crc32c
    unpack_header = _HEADER.unpack_from
    unpack_crc = _CRC.unpack_from
    mask, delta = 0xFFFFFFFF, _MASK_DELTA
    buf = b""
    pos = 0  # position of the next frame inside buf
    base = 0  # file offset of buf[0]
    eof = False
    need = _HEADER.size  # bytes from pos that the next step needs
    while True:
        if len(buf) - pos < need:
            if eof:
                have = len(buf) - pos
                if have == 0:
                    return
                if have < _HEADER.size:
                    raise CorruptionError(
                        f"TFRecord file {name}: truncated record header at byte offset "
                        f"{base + pos}: expected 12 bytes, the file ends after {have}"
                    )
                raise CorruptionError(
                    f"TFRecord file {name}: truncated record at byte offset {base + pos}: "
                    f"expected {need - 16} data bytes plus a 4-byte CRC, the file ends "
                    f"{have - _HEADER.size} bytes after the header"
                )
            chunks = [buf[pos:]]
            have = len(chunks[0])
            base += pos
            pos = 0
            while have < need or have < _BLOCK:
                chunk = f.read(max(_BLOCK, need - have))
                if not chunk:
                    eof = True
                    break
                chunks.append(chunk)
                have += len(chunk)
            buf = b"".join(chunks)
            continue
        n = len(buf)
        view = memoryview(buf)
        while pos + 12 <= n:
            length, length_crc = unpack_header(buf, pos)
            if verify:
                c = crc(view[pos : pos + 8])
                if (((c >> 15) | (c << 17)) + delta) & mask != length_crc:
                    raise CorruptionError(
                        f"TFRecord file {name}: length CRC mismatch in the record at byte "
                        f"offset {base + pos} (not a TFRecord file, or damaged)"
                    )
            start = pos + 12
            stop = start + length
            if stop + 4 > n:
                break
            data = view[start:stop]
            if verify:
                c = crc(data)
                if (((c >> 15) | (c << 17)) + delta) & mask != unpack_crc(buf, stop)[0]:
                    raise CorruptionError(
                        f"TFRecord file {name}: data CRC mismatch in the record at byte "
                        f"offset {base + pos} ({length} bytes)"
                    )
            pos = stop + 4
            yield bytes(data) if copy else data
        if n - pos >= 12:
            need = 16 + unpack_header(buf, pos)[0]
        else:
            need = _HEADER.size


def iter_tfrecord(
    path: str,
    *,
    storage_options: dict[str, Any] | None = None,
    compression: str | None = None,
    verify: bool = True,
    _fs: fsspec.AbstractFileSystem | None = None,
    _copy: bool = True,
) -> Iterator[bytes]:
    """Stream the records of one TFRecord file (any fsspec URL), verifying every CRC.

    ``compression`` is passed to fsspec (``"gzip"`` for ``GZIP`` TFRecords, ``"infer"``
    to decide from the suffix).  ``verify=False`` skips the CRC checks (framing and
    truncation are still checked).

    Example:
        >>> import os, tempfile
        >>> from arrayds.files.tfrecord import write_tfrecord, iter_tfrecord
        >>> p = os.path.join(tempfile.mkdtemp(), "a.tfrecord")
        >>> write_tfrecord(p, [b"x" * 3])
        1
        >>> next(iter_tfrecord(p))
        b'xxx'
    """
    if _fs is None:
        fs, fpath = fsspec.core.url_to_fs(path, **(storage_options or {}))
    else:
        fs, fpath = _fs, path
    name = _display(fs, fpath)
    with fs.open(fpath, "rb", compression=compression) as f:
        yield from _iter_frames(f, name, verify, _copy)


def write_tfrecord(
    path: str, records: Iterable[bytes], *, storage_options: dict[str, Any] | None = None
) -> int:
    """Write ``records`` as an (uncompressed) TFRecord file; returns the record count.

    Provided for tests and round trips; the conversion direction arrayds cares about
    is TFRecord -> ArrayRecord.

    Example:
        >>> import os, tempfile
        >>> from arrayds.files.tfrecord import write_tfrecord
        >>> write_tfrecord(os.path.join(tempfile.mkdtemp(), "t.tfrecord"), [b"a", b""])
        2
    """
    n = 0
    with fsspec.open(path, "wb", **(storage_options or {})) as f:
        for rec in records:
            data = bytes(rec)
            head = struct.pack("<Q", len(data))
            f.write(head)
            f.write(_CRC.pack(masked_crc32c(head)))
            f.write(data)
            f.write(_CRC.pack(masked_crc32c(data)))
            n += 1
    return n


def iter_jsonlines(
    path: str,
    *,
    storage_options: dict[str, Any] | None = None,
    compression: str | None = "infer",
    _fs: fsspec.AbstractFileSystem | None = None,
) -> Iterator[Any]:
    """Stream the JSON values of a JSON-lines file, one per non-blank line.

    A line that is not valid JSON is a ``ValueError`` naming the file and line number.

    Example:
        >>> import os, tempfile
        >>> from arrayds.files.tfrecord import iter_jsonlines
        >>> p = os.path.join(tempfile.mkdtemp(), "a.jsonl")
        >>> _ = open(p, "w").write('{"a": 1}\\n\\n[2]\\n')
        >>> list(iter_jsonlines(p))
        [{'a': 1}, [2]]
    """
    if _fs is None:
        fs, fpath = fsspec.core.url_to_fs(path, **(storage_options or {}))
    else:
        fs, fpath = _fs, path
    name = _display(fs, fpath)
    if compression == "infer":
        compression = fsspec.utils.infer_compression(fpath)
    with fs.open(fpath, "rb", compression=compression) as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except ValueError as exc:
                raise ValueError(
                    f"JSON-lines file {name}, line {lineno}: invalid JSON ({exc})"
                ) from None


def _read_tfrecord_file(
    fs: fsspec.AbstractFileSystem, path: str, compression: str | None, verify: bool
) -> list[bytes]:
    return list(iter_tfrecord(path, compression=compression, verify=verify, _fs=fs))


def _read_jsonlines_file(
    fs: fsspec.AbstractFileSystem, path: str, compression: str | None
) -> list[Any]:
    return list(iter_jsonlines(path, compression=compression, _fs=fs))


def _file_bag(func: Any, prefix: str, files: list[tuple[Any, str]], *args: Any) -> dask.bag.Bag:
    import dask.bag as db
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    name = f"{prefix}-" + tokenize([(type(fs).__name__, fs.protocol, p) for fs, p in files], *args)
    dsk = {(name, i): (func, fs, p, *args) for i, (fs, p) in enumerate(files)}
    graph = HighLevelGraph.from_collections(name, dsk, dependencies=[])
    return db.Bag(graph, name, len(files))


def read_tfrecord(
    paths_or_glob: str | Iterable[str],
    *,
    storage_options: dict[str, Any] | None = None,
    compression: str | None = None,
    verify: bool = True,
) -> dask.bag.Bag:
    """A ``dask.bag.Bag`` of the records (``bytes``) of TFRecord files.

    One partition per input file (one task each), files in sorted glob order, records
    in file order. Every CRC is verified inside the tasks; damage raises
    :class:`arrayds.CorruptionError` naming the file and byte offset when computed.
    Write the result with ``arrayds.to_arrayrecord(bag, url)`` (or use
    :func:`arrayds.convert.tfrecord_to_arrayrecord`, which streams).

    Example:
        >>> import os, tempfile, arrayds
        >>> from arrayds.files.tfrecord import write_tfrecord
        >>> d = tempfile.mkdtemp()
        >>> for i in range(3):
        ...     _ = write_tfrecord(os.path.join(d, f"part-{i}.tfrecord"), [b"r%d" % i] * 2)
        >>> bag = arrayds.read_tfrecord(os.path.join(d, "*.tfrecord"))
        >>> bag.npartitions, bag.compute(scheduler="sync")
        (3, [b'r0', b'r0', b'r1', b'r1', b'r2', b'r2'])
    """
    files = expand_paths(paths_or_glob, storage_options=storage_options)
    return _file_bag(_read_tfrecord_file, "read-tfrecord", files, compression, verify)


def read_jsonlines(
    paths_or_glob: str | Iterable[str],
    *,
    storage_options: dict[str, Any] | None = None,
    compression: str | None = "infer",
) -> dask.bag.Bag:
    """A ``dask.bag.Bag`` of the JSON values of JSON-lines files, one partition per file.

    Example:
        >>> import os, tempfile, arrayds
        >>> p = os.path.join(tempfile.mkdtemp(), "a.jsonl")
        >>> _ = open(p, "w").write('{"a": 1}\\n{"a": 2}\\n')
        >>> arrayds.read_jsonlines(p).pluck("a").compute(scheduler="sync")
        [1, 2]
    """
    files = expand_paths(paths_or_glob, storage_options=storage_options)
    return _file_bag(_read_jsonlines_file, "read-jsonlines", files, compression)
