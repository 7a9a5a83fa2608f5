"""Serializers for records datasets: how a Python object becomes the bytes of one record.

A records dataset stores the *name* of its serializer in its manifest, and readers apply
the inverse.  Built in:

``raw``
    bytes-like items (``bytes``, ``bytearray``, ``memoryview``) stored unchanged;
    reading returns ``bytes``.
``msgpack``
    dicts, lists, strings, numbers, booleans, ``None`` and bytes, plus numpy arrays of
    any fixed-size dtype and shape (0-d included: numeric, bool, complex, datetime64,
    timedelta64, fixed-width strings/bytes, void and structured dtypes) and numpy
    scalars, all restored exactly (dtype, byte order, shape and values).  Python
    ``complex`` is supported too.  Tuples come back as lists (like JSON).
``json``
    JSON-compatible objects, UTF-8 encoded.
``pickle``
    any picklable object.  Never chosen by ``auto``; reading it requires
    ``allow_pickle=True`` because unpickling runs arbitrary code.
``auto``
    resolved when writing: ``raw`` when every item is bytes-like, ``msgpack`` otherwise.
    The resolved name (never ``auto``) is what the manifest records.

A user serializer is a pair of callables ``(encode, decode)``, a :class:`Serializer`, or a
name registered with :func:`register`.  Registered names are stored in the manifest and
resolved again when reading; an unregistered pair is stored as ``"custom"`` and the
reader must pass the same pair back.

Example:
    >>> import numpy as np
    >>> from arrayds import serializers
    >>> s = serializers.get("msgpack")
    >>> out = s.decode(s.encode({"x": np.arange(3, dtype="<u2"), "label": 1}))
    >>> out["x"].dtype, out["x"].tolist(), out["label"]
    (dtype('uint16'), [0, 1, 2], 1)
"""

from __future__ import annotations

import ast
import functools
import json
import math
import pickle
import struct
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np
from numpy.lib import format as _npformat

__all__ = [
    "BUILTIN",
    "Serializer",
    "SerializerSpec",
    "choose_auto",
    "get",
    "is_bytes_like",
    "register",
    "registered",
    "resolve_for_read",
    "resolve_for_write",
]

#: msgpack extension type codes used by the ``msgpack`` serializer.
EXT_NDARRAY = 1
EXT_NUMPY_SCALAR = 2
EXT_COMPLEX = 3

_COMPLEX = struct.Struct("<dd")


@dataclass(frozen=True)
class Serializer:
    """A named pair of functions turning one object into the bytes of one record.

    ``encode`` must raise ``TypeError`` (or ``ValueError``/``OverflowError``) for an
    object it cannot encode; writers turn that into a ``TypeError`` naming the
    partition and the item index.

    Example:
        >>> from arrayds.kinds.records.serializers import Serializer
        >>> upper = Serializer("upper", lambda s: s.upper().encode(), lambda b: b.decode())
        >>> upper.decode(upper.encode("abc"))
        'ABC'
    """

    name: str
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]


SerializerSpec = str | Serializer | tuple[Callable[[Any], bytes], Callable[[bytes], Any]]


def is_bytes_like(obj: object) -> bool:
    """True for the item types the ``raw`` serializer stores unchanged.

    Example:
        >>> from arrayds.kinds.records.serializers import is_bytes_like
        >>> is_bytes_like(b"x"), is_bytes_like("x")
        (True, False)
    """
    return isinstance(obj, bytes | bytearray | memoryview)


# ---------------------------------------------------------------------------- raw


def _raw_encode(obj: Any) -> bytes:
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, bytearray | memoryview):
        return bytes(obj)
    raise TypeError(
        f"the raw serializer stores bytes-like items only, got {type(obj).__name__}; "
        "use serializer='msgpack' (or 'auto') for objects"
    )


def _raw_decode(data: bytes) -> bytes:
    return bytes(data)


# ------------------------------------------------------------------------- msgpack


@functools.lru_cache(maxsize=512)
def _dtype_from_descr(text: str) -> np.dtype:
    try:
        return _npformat.descr_to_dtype(ast.literal_eval(text))
    except (ValueError, TypeError, SyntaxError) as exc:
        raise ValueError(f"msgpack record holds an invalid numpy dtype {text!r}") from exc


@functools.lru_cache(maxsize=1024)
def _descr_of(dtype: np.dtype) -> str:
    if dtype.hasobject:
        raise TypeError(f"numpy dtype {dtype} holds Python objects and cannot be serialized")
    return repr(_npformat.dtype_to_descr(dtype))


def _bin_header(n: int) -> bytes:
    if n < 1 << 8:
        return b"\xc4" + n.to_bytes(1, "big")
    if n < 1 << 16:
        return b"\xc5" + n.to_bytes(2, "big")
    return b"\xc6" + n.to_bytes(4, "big")


@functools.lru_cache(maxsize=4096)
def _array_prefix(dtype: np.dtype, shape: tuple[int, ...]) -> bytes:
    """The msgpack bytes of ``[descr, shape, <bin header>]`` for an array payload: the
    payload is this prefix followed by the array's C-order bytes."""
    nbytes = dtype.itemsize * math.prod(shape)
    return (
        b"\x93"
        + msgpack.packb(_descr_of(dtype), use_bin_type=True)
        + msgpack.packb(list(shape), use_bin_type=True)
        + _bin_header(nbytes)
    )


def _msgpack_default(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        prefix = _array_prefix(obj.dtype, obj.shape)
        return msgpack.ExtType(EXT_NDARRAY, prefix + np.ascontiguousarray(obj).tobytes())
    if isinstance(obj, np.generic):
        descr = _descr_of(obj.dtype)
        payload = msgpack.packb([descr, np.asarray(obj).tobytes()], use_bin_type=True)
        return msgpack.ExtType(EXT_NUMPY_SCALAR, payload)
    if isinstance(obj, complex):
        return msgpack.ExtType(EXT_COMPLEX, _COMPLEX.pack(obj.real, obj.imag))
    if isinstance(obj, int):
        raise TypeError(f"msgpack integers must lie in [-2**63, 2**64), got {obj}")
    raise TypeError(f"msgpack cannot serialize an object of type {type(obj).__name__}")


def _array_from(dtype: np.dtype, shape: tuple[int, ...], data: bytes) -> np.ndarray:
    count = 1
    for n in shape:
        count *= n
    if len(data) != count * dtype.itemsize:
        raise ValueError(
            f"msgpack record holds a numpy array of shape {shape} and dtype {dtype} "
            f"with {len(data)} data bytes, expected {count * dtype.itemsize}"
        )
    if dtype.itemsize == 0 or count == 0:
        return np.zeros(shape, dtype)
    # bytearray: one writable, exact copy (padding bytes of structured dtypes included)
    return np.frombuffer(bytearray(data), dtype=dtype, count=count).reshape(shape)


def _msgpack_ext_hook(code: int, data: bytes) -> Any:
    if code == EXT_NDARRAY:
        descr, shape, raw = msgpack.unpackb(data, raw=False)
        return _array_from(_dtype_from_descr(descr), tuple(shape), raw)
    if code == EXT_NUMPY_SCALAR:
        descr, raw = msgpack.unpackb(data, raw=False)
        return _array_from(_dtype_from_descr(descr), (), raw)[()]
    if code == EXT_COMPLEX:
        real, imag = _COMPLEX.unpack(data)
        return complex(real, imag)
    return msgpack.ExtType(code, data)


_local = threading.local()


def _packer() -> msgpack.Packer:
    p = getattr(_local, "packer", None)
    if p is None:
        p = _local.packer = msgpack.Packer(
            default=_msgpack_default, use_bin_type=True, datetime=False, autoreset=True
        )
    return p


def _msgpack_encode(obj: Any) -> bytes:
    try:
        return _packer().pack(obj)
    except (OverflowError, ValueError) as exc:
        _local.packer = None  # never reuse a packer that failed half way
        raise TypeError(f"msgpack cannot serialize this value: {exc}") from exc
    except BaseException:
        _local.packer = None
        raise


def _msgpack_decode(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_msgpack_ext_hook, raw=False, strict_map_key=False)


# ---------------------------------------------------------------------------- json


def _json_encode(obj: Any) -> bytes:
    try:
        return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except ValueError as exc:  # circular references
        raise TypeError(f"json cannot serialize this value: {exc}") from exc


def _json_decode(data: bytes) -> Any:
    return json.loads(bytes(data).decode("utf-8"))


# -------------------------------------------------------------------------- pickle


def _pickle_encode(obj: Any) -> bytes:
    try:
        return pickle.dumps(obj, protocol=5)
    except (pickle.PicklingError, AttributeError) as exc:
        raise TypeError(f"pickle cannot serialize this value: {exc}") from exc


def _pickle_decode(data: bytes) -> Any:
    return pickle.loads(data)


# ------------------------------------------------------------------------ registry

RAW = Serializer("raw", _raw_encode, _raw_decode)
MSGPACK = Serializer("msgpack", _msgpack_encode, _msgpack_decode)
JSON = Serializer("json", _json_encode, _json_decode)
PICKLE = Serializer("pickle", _pickle_encode, _pickle_decode)

#: The names that are part of the format (docs/spec.md); they cannot be re-registered.
BUILTIN: dict[str, Serializer] = {s.name: s for s in (RAW, MSGPACK, JSON, PICKLE)}
_REGISTRY: dict[str, Serializer] = dict(BUILTIN)
_RESERVED = {"auto", "custom"}


def register(
    name: str,
    encode: Callable[[Any], bytes],
    decode: Callable[[bytes], Any],
    *,
    overwrite: bool = False,
) -> Serializer:
    """Register a user serializer under ``name`` so datasets can record and find it.

    The name is stored in the manifest of every dataset written with it; a reader
    resolves it from this registry (register it again in the reading process).

    Example:
        >>> from arrayds import serializers
        >>> s = serializers.register(
        ...     "utf8-doc", str.encode, lambda b: bytes(b).decode(), overwrite=True
        ... )
        >>> serializers.get("utf8-doc").decode(s.encode("hé"))
        'hé'
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a serializer name must be a non-empty string, got {name!r}")
    if name in BUILTIN or name in _RESERVED:
        raise ValueError(f"serializer name {name!r} is reserved")
    if not (callable(encode) and callable(decode)):
        raise TypeError("register() needs callable encode and decode functions")
    if name in _REGISTRY and not overwrite:
        raise ValueError(f"serializer {name!r} is already registered (pass overwrite=True)")
    ser = Serializer(name, encode, decode)
    _REGISTRY[name] = ser
    return ser


def registered() -> list[str]:
    """Names of all known serializers, built-in first.

    Example:
        >>> from arrayds import serializers
        >>> serializers.registered()[:4]
        ['raw', 'msgpack', 'json', 'pickle']
    """
    return list(_REGISTRY)


def get(name: str) -> Serializer:
    """The serializer registered under ``name`` (``KeyError`` naming the known ones).

    Example:
        >>> from arrayds import serializers
        >>> serializers.get("json").encode({"a": 1})
        b'{"a":1}'
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(
            f"unknown serializer {name!r}; known: {', '.join(_REGISTRY)} "
            "(register user serializers with arrayds.serializers.register)"
        ) from None


def _from_spec(spec: SerializerSpec) -> Serializer:
    if isinstance(spec, Serializer):
        return spec
    if isinstance(spec, str):
        return get(spec)
    if isinstance(spec, tuple) and len(spec) == 2 and all(callable(f) for f in spec):
        return Serializer("custom", spec[0], spec[1])
    raise TypeError(
        "serializer must be a name ('auto', 'raw', 'msgpack', 'json', 'pickle' or a "
        f"registered one), a Serializer or an (encode, decode) pair, got {spec!r}"
    )


def choose_auto(items: Iterable[Any]) -> Serializer:
    """Resolve ``auto`` for a batch of items: ``raw`` if all are bytes-like, else ``msgpack``.

    Example:
        >>> from arrayds import serializers
        >>> serializers.choose_auto([b"a", b"b"]).name, serializers.choose_auto([b"a", 1]).name
        ('raw', 'msgpack')
    """
    return RAW if all(is_bytes_like(x) for x in items) else MSGPACK


def resolve_for_write(spec: SerializerSpec) -> Serializer | None:
    """The serializer a write uses; ``None`` means ``auto`` (decided from the data).

    Example:
        >>> from arrayds import serializers
        >>> serializers.resolve_for_write("auto") is None
        True
        >>> serializers.resolve_for_write("json").name
        'json'
    """
    if isinstance(spec, str) and spec == "auto":
        return None
    return _from_spec(spec)


def resolve_for_read(
    stored: str,
    *,
    override: SerializerSpec | None = None,
    allow_pickle: bool = False,
    where: str = "<dataset>",
) -> Serializer:
    """The serializer that decodes a dataset whose manifest records ``stored``.

    ``override`` supplies the decoder of a ``custom`` (or unregistered) serializer;
    it cannot replace a built-in one (that would decode with the wrong inverse).
    Pickle is only ever used when the dataset itself says ``pickle`` and the caller
    passes ``allow_pickle=True``.

    Example:
        >>> from arrayds import serializers
        >>> serializers.resolve_for_read("msgpack").name
        'msgpack'
        >>> serializers.resolve_for_read("pickle", where="data/x")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: records dataset data/x was written with the pickle serializer; ...
    """
    if stored == "pickle":
        if not allow_pickle:
            raise ValueError(
                f"records dataset {where} was written with the pickle serializer; "
                "unpickling runs arbitrary code; pass allow_pickle=True (to "
                "arrayds.records.read_records, open_records or data_source) only if you trust it"
            )
        if override is not None and _from_spec(override).name != "pickle":
            raise ValueError(f"records dataset {where} uses pickle; serializer= cannot replace it")
        return PICKLE
    if stored in BUILTIN:
        if override is not None:
            ser = _from_spec(override)
            if ser.name != stored:
                raise ValueError(
                    f"records dataset {where} was written with the {stored!r} serializer, "
                    f"it cannot be read with {ser.name!r}"
                )
        return BUILTIN[stored]
    if override is not None:
        ser = _from_spec(override)
        if ser.name == "pickle" or ser.name in BUILTIN:
            raise ValueError(
                f"records dataset {where} was written with the user serializer {stored!r}; "
                f"pass its decoder, not the built-in {ser.name!r}"
            )
        return ser
    if stored in _REGISTRY:
        return _REGISTRY[stored]
    raise ValueError(
        f"records dataset {where} was written with the user serializer {stored!r}, which is "
        "not registered in this process; register it with arrayds.serializers.register() or "
        "pass serializer=(encode, decode)"
    )
