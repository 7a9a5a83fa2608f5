"""Node names and manifest JSON, shared by every kind: the reserved names of a node
folder, node path components, write ids, the one shard-name grammar (built by
:func:`shard_name`, read back by :func:`parse_shard_name`), the format's name and
version, and the JSON helpers of manifests.

>>> join_component("a", "b"), check_component("a/b"), is_reserved_name(MANIFEST)
('a/b', 'a/b', True)
"""

from __future__ import annotations

import json
import re
import secrets
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

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
    "ShardName",
    "Store",
    "check_component",
    "is_reserved_name",
    "join_component",
    "local_shard",
    "make_folders",
    "new_write_id",
    "options_token",
    "parse_shard_name",
    "shard_name",
    "shard_stem",
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
"""The suffix of every shard name (docs/spec.md 6.1, spec-records.md "Shard files")."""


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


# ---------------------------------------------------------------- shard names
#
# Two shapes, one grammar (docs/spec.md 6.1 and 7.2, spec-ragged.md, spec-records.md):
#   in a kind's shard folder:  <folder>/<write id>-<n>[-<k>].array_record   (array, ragged)
#   in the node's own folder:  <stem>.array_record-<iiiii>-of-<nnnnn>       (records)
# where a records <stem> is <name>-<write id>, or <name>-<write id>-<12 hex> for a Beam
# shard written once per bundle attempt. A shard being written locally is its name
# followed by ".<12 hex>.tmp" (arrayds.storage.local).

_WRITE_ID = r"[0-9a-f]{24}"
_NUM = r"(?:0|[1-9][0-9]*)"
_FIXED = r"(?:[0-9]{5}|[1-9][0-9]{5,})"  # what "{:05d}" prints
_STEM_CHARS = r"[A-Za-z0-9_.-]"
_TMP = r"(?P<tmp>\.[0-9a-f]{12}\.tmp)?"
_SUFFIX = re.escape(SHARD_SUFFIX)
_IN_FOLDER = re.compile(
    rf"(?P<folder>[A-Za-z0-9][A-Za-z0-9_.-]*)/(?P<wid>{_WRITE_ID})"
    rf"(?P<index>(?:-{_NUM}){{1,2}}){_SUFFIX}{_TMP}"
)
_IN_NODE = re.compile(
    rf"(?P<stem>{_STEM_CHARS}+-(?P<wid>{_WRITE_ID})(?:-[0-9a-f]{{12}})?)"
    rf"{_SUFFIX}-(?P<index>{_FIXED})-of-(?P<total>{_FIXED}){_TMP}"
)


class ShardName(NamedTuple):
    """The parts of a shard name (:func:`parse_shard_name`); ``shard_name(stem, *index,
    total=total, folder=folder)`` builds the name back (without a ``.tmp`` ending)."""

    folder: str
    """The shard folder (``"c"``), ``""`` for a shard in the node's own folder."""
    stem: str
    """What precedes the numbers: the write id, or a records stem ``<name>-<write id>``."""
    write_id: str
    """The write that produced the shard."""
    index: tuple[int, ...]
    """The shard's numbers within its write: ``(n,)``, ``(n, k)`` (ragged) or ``(i,)``."""
    total: int | None
    """The number of shards of the write (records names), else ``None``."""
    temporary: bool
    """Whether this is the temporary file of a shard being written (``.<12 hex>.tmp``)."""


def shard_stem(name: str, write_id: str) -> str:
    """The stem of the shards a write of a records node named ``name`` (a node path or
    the dataset's URL: its last segment counts) writes: ``<name>-<write id>``, the name
    reduced to letters, digits, ``_``, ``.`` and ``-`` (``records`` when none is left).

    >>> shard_stem("data/train", "ab" * 12), shard_stem("s3://b/?!/", "0" * 24)[:8]
    ('train-abababababababababababab', 'records-')
    """
    base = name.rstrip("/").replace("\\", "/").rsplit("/", 1)[-1]
    base = re.sub(r"[^A-Za-z0-9_.-]+", "_", base).strip("._") or "records"
    return f"{base}-{write_id}"


def attempt_stem(stem: str) -> str:
    """A stem unique to one attempt of a task that may run more than once (a Beam
    bundle): ``stem`` plus ``-`` and 12 random hex digits; only the attempt the commit
    names stays (:func:`parse_shard_name` reads its names as the write's).

    >>> s = attempt_stem("train-" + "0" * 24)
    >>> len(s) == len("train-" + "0" * 24) + 13, s != attempt_stem("train-" + "0" * 24)
    (True, True)
    """
    return f"{stem}-{secrets.token_hex(6)}"


def shard_name(stem: str, *index: int, total: int | None = None, folder: str = "") -> str:
    """The name of a shard relative to its node's folder: ``<folder>/<stem>-<n>[-<k>]
    .array_record`` for a shard of a kind's shard folder (``stem`` is the write id), or
    with ``total`` the TFDS/Grain name ``<stem>.array_record-<i:05d>-of-<total:05d>`` of
    shard ``i`` of ``total`` in the node's own folder (records). Every writer and every
    compaction names its shards with this function; :func:`parse_shard_name` reads them.

    >>> wid = "0661702927ec82393c249537"
    >>> shard_name(wid, 3, folder="c"), shard_name(wid, 0, 2, folder="c")
    ('c/0661702927ec82393c249537-3.array_record', 'c/0661702927ec82393c249537-0-2.array_record')
    >>> shard_name(shard_stem("train", wid), 1, total=8)
    'train-0661702927ec82393c249537.array_record-00001-of-00008'
    >>> shard_name(wid, 1, total=2, folder="c")
    Traceback (most recent call last):
    ...
    ValueError: a shard name has a folder or a total, not both
    """
    if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in index):
        raise ValueError(f"shard numbers must be integers >= 0, got {index!r}")
    if total is None:
        if not folder or len(index) not in (1, 2):
            raise ValueError("a shard name in a shard folder has a folder and one or two numbers")
        return f"{folder}/{stem}{''.join(f'-{i}' for i in index)}{SHARD_SUFFIX}"
    if folder:
        raise ValueError("a shard name has a folder or a total, not both")
    if len(index) != 1 or not 0 <= index[0] < total:
        raise ValueError(f"a records shard name has one number below total={total}, got {index}")
    return f"{stem}{SHARD_SUFFIX}-{index[0]:05d}-of-{total:05d}"


def parse_shard_name(rel: str) -> ShardName | None:
    """The parts of ``rel`` (a path relative to a node's folder) if it is a name that
    :func:`shard_name` builds, or the temporary name of one being written; else ``None``
    (any other file, reserved names included, is not a shard name).

    >>> p = parse_shard_name("c/0661702927ec82393c249537-0-2.array_record")
    >>> p.folder, p.write_id, p.index, p.total, p.temporary
    ('c', '0661702927ec82393c249537', (0, 2), None, False)
    >>> parse_shard_name("r-0661702927ec82393c249537.array_record-00000-of-00001").stem
    'r-0661702927ec82393c249537'
    >>> parse_shard_name("arrayds.json"), parse_shard_name("c/x.array_record")
    (None, None)
    """
    m = _IN_FOLDER.fullmatch(rel)
    if m is not None:
        wid = m["wid"]
        index = tuple(int(i) for i in m["index"][1:].split("-"))
        return ShardName(m["folder"], wid, wid, index, None, m["tmp"] is not None)
    m = _IN_NODE.fullmatch(rel)
    if m is not None:
        index, total = int(m["index"]), int(m["total"])
        if index >= total:
            return None
        return ShardName("", m["stem"], m["wid"], (index,), total, m["tmp"] is not None)
    return None


# ---------------------------------------------------------------- JSON helpers


def dump_json(obj: Mapping[str, Any]) -> bytes:
    """Strict JSON (no NaN/Infinity literals), compact, UTF-8."""
    return json.dumps(obj, allow_nan=False, separators=(",", ":"), ensure_ascii=False).encode(
        "utf8"
    )


def parse_json(raw: bytes, what: str) -> dict[str, Any]:

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
FORMAT_VERSION = 3
"""The newest manifest format version this release reads and writes (docs/spec.md):
3 is version 2 with indexes (docs/spec.md 14.3.2), what a head is stored in once one
of its shard lists has an index; new nodes start in version 2
(:data:`arrayds.nodes.commit.NEWEST`)."""


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
