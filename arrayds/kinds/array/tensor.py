"""One chunk of an N-d array <-> one record: the ``.npy`` (format 1.0) encoding.

A record is exactly what ``numpy.save`` would write for the C-ordered chunk, with the
header padded by spaces so the data starts at a multiple of 64 bytes (docs/spec.md
section 6). Any ArrayRecord reader plus ``numpy.load`` decodes a chunk:

>>> import io
>>> rec = encode_chunk(np.arange(6, dtype="<i4").reshape(2, 3))
>>> len(npy_header(np.dtype("<i4"), (2, 3))), len(rec)
(128, 152)
>>> np.load(io.BytesIO(rec)).tolist()
[[0, 1, 2], [3, 4, 5]]
>>> decode_chunk(rec, np.dtype("<i4"), (2, 3)).tolist()
[[0, 1, 2], [3, 4, 5]]

The header for a (dtype, shape) is built once and cached. Decoding is
``np.frombuffer`` on the record bytes (no copy) after checking that the record starts
with the expected header; a record written by another implementation with a
different but valid header (other padding, ``.npy`` 2.0/3.0) is parsed and checked
field by field. A mismatch raises :class:`arrayds.CorruptionError`.
"""

from __future__ import annotations

import ast
import functools
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import _native
from ...errors import CorruptionError

__all__ = [
    "ALIGN",
    "MAGIC",
    "check_dtype",
    "decode_chunk",
    "encode_chunk",
    "new_buffer",
    "npy_header",
]

MAGIC = b"\x93NUMPY"
ALIGN = 64
POOL_MIN_BYTES = 1 << 20
MAX_HEADER_BYTES = 10000
"""The longest ``.npy`` header parsed, numpy's own default (``max_header_size``): a
longer one is a CorruptionError before it is decoded (docs/spec.md, "Bounds")."""
"""Buffers from this size on come from the engine's pool of reused memory blocks."""


def new_buffer(nbytes: int) -> np.ndarray:
    """A writable 1-d uint8 array of ``nbytes`` uninitialised bytes to decode into.

    From :data:`POOL_MIN_BYTES` on, the memory is a block of the engine's bounded pool
    (``_native.pooled_buffer``): freshly allocated large buffers page-fault on first
    touch (about 1,150 faults per 4.5 MiB), a block freed by an earlier result is
    reused without faults. The block returns to the pool when the array and every
    view of it are gone.

    >>> b = new_buffer(3 << 20)
    >>> b.dtype, b.shape, b.flags.writeable
    (dtype('uint8'), (3145728,), True)
    """
    if nbytes < POOL_MIN_BYTES:
        return np.empty(nbytes, dtype=np.uint8)
    return np.frombuffer(_native.pooled_buffer(nbytes), dtype=np.uint8)


def check_dtype(dtype: object, name: str = "array") -> np.dtype:
    """Normalize ``dtype`` and reject those format version 1 cannot store.

    Allowed: every fixed-size numpy dtype without fields (bool, ints, uints, floats,
    complex, datetime64/timedelta64 with a unit, fixed bytes ``S``, unicode ``U``,
    raw ``V``). Rejected: object, structured, subarray, zero-sized and unit-less
    datetime dtypes (``ValueError`` naming the array).

    >>> check_dtype("f4").str, check_dtype("M8[ns]").str
    ('<f4', '<M8[ns]')
    >>> check_dtype(object)
    Traceback (most recent call last):
    ...
    ValueError: array: dtype object is not supported (expected a fixed-size numpy dtype ...)
    """
    try:
        dt = np.dtype(dtype)  # type: ignore[call-overload]
    except TypeError as e:
        raise TypeError(f"{name}: {dtype!r} is not a numpy dtype ({e})") from None
    expected = "expected a fixed-size numpy dtype such as '<f4', '|b1', '<M8[ns]' or '|S8'"
    if dt.hasobject or dt.kind == "O":
        raise ValueError(f"{name}: dtype {dt} is not supported ({expected} ...)")
    if dt.fields is not None or dt.subdtype is not None:
        raise ValueError(
            f"{name}: structured or subarray dtype {dt} is not supported in format version 1 "
            f"({expected})"
        )
    if dt.itemsize == 0:
        raise ValueError(f"{name}: dtype {dt} has no size ({expected})")
    if dt.kind in "Mm" and np.datetime_data(dt)[0] == "generic":
        raise ValueError(f"{name}: dtype {dt} needs a unit, e.g. 'datetime64[ns]'")
    if np.dtype(dt.str) != dt:  # pragma: no cover - defensive
        raise ValueError(f"{name}: dtype {dt} does not round-trip through {dt.str!r}")
    return dt


@functools.lru_cache(maxsize=1024)
def npy_header(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """The ``.npy`` 1.0 header for a C-ordered array, padded so its length is a
    multiple of 64 (cached per (dtype, shape)).

    The shape is written with Python ints: ``(np.int64(2),)`` and ``(2,)`` are one
    cache key, and numpy's reader rejects ``np.int64(2)`` in a header."""
    d = f"{{'descr': {dtype.str!r}, 'fortran_order': False, 'shape': {tuple(map(int, shape))!r}, }}"
    body_len = len(d) + 1  # + "\n"
    total = 10 + body_len
    pad = (-total) % ALIGN
    text = (d + " " * pad + "\n").encode("latin1")
    if len(text) > 0xFFFF:
        raise ValueError(f"npy header for shape {shape} is too long for format 1.0")
    return MAGIC + b"\x01\x00" + struct.pack("<H", len(text)) + text


def encode_chunk(arr: np.ndarray, dtype: np.dtype | None = None) -> np.ndarray:
    """The record for one chunk: header + C-ordered data, built with one copy.

    Returns a 1-d uint8 numpy array (a bytes-like buffer the writer takes as is).
    ``arr`` is converted to ``dtype`` if given.
    """
    if dtype is None:
        dtype = arr.dtype
    header = npy_header(dtype, tuple(arr.shape))
    h = len(header)
    nbytes = arr.size * dtype.itemsize
    buf = np.empty(h + nbytes, dtype=np.uint8)
    buf[:h] = np.frombuffer(header, dtype=np.uint8)
    if nbytes:
        np.frombuffer(buf.data, dtype=dtype, count=arr.size, offset=h).reshape(arr.shape)[...] = arr
    return buf


def decode_chunk(
    record: Any,
    dtype: np.dtype,
    shape: Sequence[int],
    what: str | Callable[[], str] = "chunk",
) -> np.ndarray:
    """Decode one record into a read-only array view of ``record`` (no copy).

    ``what`` names the array and chunk in error messages (a string, or a callable
    building it, called only on error). A header that does not
    describe ``dtype``/``shape`` in C order, or data of the wrong length, is a
    :class:`CorruptionError`.
    """
    shape = tuple(shape)
    header = npy_header(dtype, shape)
    h = len(header)
    count = 1
    for n in shape:
        count *= n
    if isinstance(record, bytes):
        ok = record.startswith(header)
        size = len(record)
    else:
        record = memoryview(record).cast("B")
        ok = record[:h] == header
        size = record.nbytes
    if ok and size == h + count * dtype.itemsize:
        if count == 0:
            return np.empty(shape, dtype=dtype)
        return np.frombuffer(record, dtype=dtype, count=count, offset=h).reshape(shape)
    return _decode_slow(record, dtype, shape, count, what if isinstance(what, str) else what())


def _decode_slow(
    record: Any, dtype: np.dtype, shape: tuple[int, ...], count: int, what: str
) -> np.ndarray:
    """Any valid ``.npy`` 1.0/2.0/3.0 header; every field checked."""
    mv = memoryview(record)
    if len(mv) < 10 or bytes(mv[:6]) != MAGIC:
        raise CorruptionError(
            f"{what}: record is not a .npy array (no '\\x93NUMPY' magic; {len(mv)} bytes)"
        )
    major = mv[6]
    if major == 1:
        hlen = struct.unpack("<H", mv[8:10])[0]
        start = 10
    elif major in (2, 3) and len(mv) >= 12:
        hlen = struct.unpack("<I", mv[8:12])[0]
        start = 12
    else:
        raise CorruptionError(f"{what}: unsupported .npy format version {major}.{mv[7]}")
    if hlen > MAX_HEADER_BYTES:
        raise CorruptionError(
            f"{what}: .npy header of {hlen} bytes is longer than the {MAX_HEADER_BYTES} "
            f"allowed (numpy's own limit)"
        )
    end = start + hlen
    if end > len(mv):
        raise CorruptionError(f"{what}: .npy header runs past the record ({len(mv)} bytes)")
    try:
        text = bytes(mv[start:end]).decode("latin1" if major < 3 else "utf8")
        meta = ast.literal_eval(text)
        descr = np.dtype(meta["descr"])
        fortran = meta["fortran_order"]
        got_shape = tuple(int(n) for n in meta["shape"])
    except Exception as e:
        raise CorruptionError(f"{what}: unreadable .npy header ({e})") from None
    if descr != dtype or got_shape != shape or (fortran and len(shape) > 1 and count > 1):
        raise CorruptionError(
            f"{what}: record holds dtype {descr.str} shape {got_shape}"
            f"{' (Fortran order)' if fortran else ''}, expected dtype {dtype.str} shape "
            f"{shape} in C order"
        )
    if len(mv) - end != count * dtype.itemsize:
        raise CorruptionError(
            f"{what}: record has {len(mv) - end} data bytes, expected "
            f"{count * dtype.itemsize} for dtype {dtype.str} shape {shape}"
        )
    if count == 0:
        return np.empty(shape, dtype=dtype)
    return np.frombuffer(record, dtype=dtype, count=count, offset=end).reshape(shape)
