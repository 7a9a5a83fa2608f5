"""Typed attribute values in JSON manifests (docs/spec.md, "Xarray datasets").

xarray attributes and CF encodings hold numpy scalars (``np.float32(nan)`` as a
``_FillValue``, an ``np.int16`` ``scale_factor``), numpy arrays (``valid_range``),
tuples, bytes and non-finite floats. Manifests are strict JSON, so every value that
plain JSON would not return with the same type is stored as a tagged object
``{"__arrayds__": <type>, ...}``; everything else (str, bool, int, finite float,
None, lists and dicts of those) is stored as is. Decoding restores the exact type,
so CF decoding (which looks at the dtype of ``scale_factor``) behaves as before.

>>> import numpy as np
>>> enc = encode_attrs({"_FillValue": np.float32("nan"), "range": np.array([0, 9], "i2"),
...                     "units": "K", "pair": (1, 2)}, "variable 't'")
>>> enc["_FillValue"]
{'__arrayds__': 'scalar', 'dtype': '<f4', 'value': 'NaN'}
>>> dec = decode_attrs(enc)
>>> type(dec["_FillValue"]), dec["range"].dtype, dec["pair"]
(<class 'numpy.float32'>, dtype('int16'), (1, 2))
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..kinds.array.manifest import decode_fill_value, encode_fill_value

__all__ = ["TAG", "decode_attrs", "decode_value", "encode_attrs", "encode_value"]

TAG = "__arrayds__"


def _enc_element(x: Any, dt: np.dtype) -> Any:
    return encode_fill_value(np.array(x, dtype=dt))


def encode_value(v: Any, where: str) -> Any:
    """One attribute value -> its JSON form (``TypeError`` naming ``where``)."""
    if v is None or isinstance(v, (str, bool)):
        return v
    if isinstance(v, int) and not isinstance(v, np.generic):
        return v
    if isinstance(v, float) and not isinstance(v, np.generic):
        if math.isfinite(v):
            return v
        return {TAG: "float", "value": encode_fill_value(np.array(v))}
    if isinstance(v, np.generic):
        dt = v.dtype
        if dt.kind == "O":  # pragma: no cover - numpy never makes object scalars
            return encode_value(v.item(), where)
        return {TAG: "scalar", "dtype": dt.str, "value": encode_fill_value(np.array(v))}
    if isinstance(v, np.ndarray):
        if v.dtype.kind == "O":
            return {
                TAG: "ndarray",
                "dtype": "|O",
                "shape": list(v.shape),
                "data": [encode_value(x, where) for x in v.reshape(-1).tolist()],
            }
        if v.dtype.fields is not None:
            raise TypeError(f"{where}: structured array attributes cannot be stored")
        return {
            TAG: "ndarray",
            "dtype": v.dtype.str,
            "shape": list(v.shape),
            "data": [_enc_element(x, v.dtype) for x in v.reshape(-1)],
        }
    if isinstance(v, (bytes, bytearray)):
        return {TAG: "bytes", "base64": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, tuple):
        return {TAG: "tuple", "items": [encode_value(x, where) for x in v]}
    if isinstance(v, list):
        return [encode_value(x, where) for x in v]
    if isinstance(v, Mapping):
        out = {}
        for k, x in v.items():
            if not isinstance(k, str):
                raise TypeError(f"{where}: attribute dict keys must be str, got {k!r}")
            out[k] = encode_value(x, f"{where}[{k!r}]")
        if TAG in out:
            return {TAG: "dict", "items": out}
        return out
    raise TypeError(
        f"{where}: an attribute value of type {type(v).__name__} ({v!r:.60}) cannot be stored "
        f"(expected str, numbers, bools, numpy scalars/arrays, bytes, lists, tuples or dicts)"
    )


def decode_value(v: Any) -> Any:
    """The inverse of :func:`encode_value`."""
    if isinstance(v, list):
        return [decode_value(x) for x in v]
    if not isinstance(v, dict):
        return v
    tag = v.get(TAG)
    if tag is None:
        return {k: decode_value(x) for k, x in v.items()}
    if tag == "float":
        return float(decode_fill_value(v["value"], np.dtype("f8")))
    if tag == "scalar":
        dt = np.dtype(v["dtype"])
        return decode_fill_value(v["value"], dt)[()]
    if tag == "ndarray":
        shape = tuple(v["shape"])
        if v["dtype"] == "|O":
            out = np.empty(len(v["data"]), dtype=object)
            for i, x in enumerate(v["data"]):
                out[i] = decode_value(x)
            return out.reshape(shape)
        dt = np.dtype(v["dtype"])
        arr = np.empty(len(v["data"]), dtype=dt)
        for i, x in enumerate(v["data"]):
            arr[i] = decode_fill_value(x, dt)[()]
        return arr.reshape(shape)
    if tag == "bytes":
        return base64.b64decode(v["base64"])
    if tag == "tuple":
        return tuple(decode_value(x) for x in v["items"])
    if tag == "dict":
        return {k: decode_value(x) for k, x in v["items"].items()}
    raise ValueError(f"unknown tagged attribute type {tag!r}")


def encode_attrs(attrs: Mapping[Any, Any], what: str) -> dict[str, Any]:
    """All attributes of one variable (or the dataset) -> JSON; ``TypeError`` names
    ``what`` and the key for a value that cannot be stored."""
    out: dict[str, Any] = {}
    for k, v in attrs.items():
        if not isinstance(k, str):
            raise TypeError(f"{what}: attribute names must be str, got {k!r}")
        out[k] = encode_value(v, f"{what}: attribute {k!r}")
    return out


def decode_attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: decode_value(v) for k, v in attrs.items()}
