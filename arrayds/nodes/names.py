"""Node names and manifest JSON, shared by every kind: the reserved names of a node
folder, node path components, write ids, the format's name and version, and the JSON
helpers of manifests.

>>> join_component("a", "b"), check_component("a/b"), is_reserved_name(MANIFEST)
('a/b', 'a/b', True)
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Mapping
from typing import Any

from ..errors import BlindCommitWarning, CommitLockError, CorruptionError
from ..storage.base import BaseStore as Store
from ..storage.base import options_token
from ..storage.local import local_file as local_shard
from ..storage.local import make_folders, sync_file, sync_folder

__all__ = [
    "MANIFEST",
    "META_DIR",
    "SHARD_DIR",
    "BlindCommitWarning",
    "CommitLockError",
    "Store",
    "check_component",
    "is_reserved_name",
    "join_component",
    "local_shard",
    "make_folders",
    "new_write_id",
    "options_token",
    "sync_file",
    "sync_folder",
]

MANIFEST = "arrayds.json"
"""The file name of every node's manifest."""
SHARD_DIR = "c"
"""The folder (inside an array node) holding its shards."""
META_DIR = "_arrayds"
"""The folder inside every node that holds its manifest's segments and history
(:mod:`arrayds.nodes.history`); no node or shard may be named so."""
SHARD_SUFFIX = ".array_record"


# ----------------------------------------------------------------------- names


def check_component(component: str | None, what: str = "component") -> str:
    """Normalize a node name (``"a/b"``) relative to the dataset root.

    ``None`` and ``""`` are the root. Absolute paths, ``..`` or ``.`` segments, empty
    segments (``"a//b"``), backslashes, NUL characters and a segment named like the
    manifest are a ``ValueError``: a name can never leave the root.

    >>> check_component("a/b"), check_component(None), check_component("a/")
    ('a/b', '', 'a')
    >>> check_component("../x")
    Traceback (most recent call last):
    ...
    ValueError: component '../x': '..' segments are not allowed (names cannot leave ...)
    """
    if component is None:
        return ""
    if not isinstance(component, str):
        raise TypeError(f"{what} must be a str, got {type(component).__name__}")
    name = component
    if name.endswith("/"):
        name = name[:-1]
    if name == "":
        return ""
    if "\\" in name:
        raise ValueError(f"{what} {component!r}: backslashes are not allowed")
    if "\x00" in name:
        raise ValueError(f"{what} {component!r}: NUL characters are not allowed")
    if name.startswith("/"):
        raise ValueError(
            f"{what} {component!r}: absolute paths are not allowed (names are relative to "
            f"the dataset root)"
        )
    for seg in name.split("/"):
        if seg == "":
            raise ValueError(f"{what} {component!r}: empty path segments are not allowed")
        if seg in ("..", "."):
            raise ValueError(
                f"{what} {component!r}: {seg!r} segments are not allowed (names cannot leave "
                f"the dataset root)"
            )
        if seg in (MANIFEST, META_DIR):
            raise ValueError(f"{what} {component!r}: {seg!r} is reserved")
    return name


def is_reserved_name(segment: str) -> bool:
    """Whether a path segment is a name arrayds keeps for itself in node folders (the
    manifest, its temporary and lock files): no shard may be named so.

    >>> is_reserved_name("arrayds.json"), is_reserved_name(".arrayds.json.lock")
    (True, True)
    >>> is_reserved_name("_arrayds")
    True
    >>> is_reserved_name("0661702927ec82393c249537-0.array_record")
    False
    """
    return segment in (MANIFEST, META_DIR) or segment.startswith(f".{MANIFEST}.")


def join_component(parent: str, child: str) -> str:
    """``join_component("a", "b/c") == "a/b/c"``; the root is ``""``."""
    child = check_component(child)
    if not parent:
        return child
    if not child:
        return parent
    return f"{parent}/{child}"


def new_write_id() -> str:
    """A unique, time-sortable id for one write: 14 hex digits of microseconds since
    the epoch, then 10 random hex digits.

    >>> len(new_write_id())
    24
    """
    return f"{time.time_ns() // 1000:014x}{secrets.token_hex(5)}"


# ---------------------------------------------------------------- JSON helpers


def dump_json(obj: Mapping[str, Any]) -> bytes:
    """Strict JSON (no NaN/Infinity literals), compact, UTF-8."""
    return json.dumps(obj, allow_nan=False, separators=(",", ":"), ensure_ascii=False).encode(
        "utf8"
    )


def parse_json(raw: bytes, what: str) -> dict[str, Any]:
    from ..errors import CorruptionError

    try:
        obj = json.loads(raw.decode("utf8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptionError(f"{what}: the manifest {MANIFEST} is not valid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise CorruptionError(
            f"{what}: the manifest {MANIFEST} holds a JSON {type(obj).__name__}, expected an object"
        )
    return obj


FORMAT = "arrayds"
FORMAT_VERSION = 2
"""The newest manifest format version this release reads and writes (docs/spec.md)."""


# ---------------------------------------------------------------- manifests


def require_field(d: Mapping[str, Any], key: str, types: Any, what: str) -> Any:
    if key not in d:
        raise CorruptionError(f"{what}: the manifest has no {key!r}")
    v = d[key]
    if not isinstance(v, types) or isinstance(v, bool):
        raise CorruptionError(f"{what}: manifest field {key!r} has a bad value {v!r}")
    return v


def check_attrs(attrs: Mapping[str, Any] | None, name: str) -> dict[str, Any]:
    """``attrs`` as a new dict, checked to be a mapping of strict JSON values
    (``TypeError`` naming ``name`` otherwise); ``None`` is ``{}``.

    >>> check_attrs({"units": "m"}, "array 'x'"), check_attrs(None, "x")
    ({'units': 'm'}, {})
    """
    if attrs is None:
        return {}
    if not isinstance(attrs, Mapping):
        raise TypeError(f"{name}: attrs must be a mapping, got {type(attrs).__name__}")
    out = dict(attrs)
    check_json_value(out, name)
    return out


def check_json_value(value: Any, name: str) -> None:
    """Raise ``TypeError`` naming the key if ``value`` is not strict JSON."""
    import json

    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{name}: attributes must be JSON-serializable (str keys, no NaN/inf): {e}"
        ) from None
