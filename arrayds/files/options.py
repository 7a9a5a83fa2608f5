"""Reader options: the official grammar (spec 12.2), parsed and normalised in Python.

Writer options are parsed by the engine (``_native.canonical_writer_options``), which
also produces the canonical string stored in the footer. Reader options change only
*how* a file is read, never what is read; the engine receives the normalised string
and Python keeps the two values it uses itself (the readahead size and the number of
readahead threads of sequential iteration).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ReaderOptions", "parse_reader_options"]

_GIB = 1 << 30
_INT32_MAX = 2**31 - 1
_SUFFIXES = {
    "": 1,
    "B": 1,
    "k": 1 << 10,
    "K": 1 << 10,
    "M": 1 << 20,
    "G": 1 << 30,
    "T": 1 << 40,
    "P": 1 << 50,
    "E": 1 << 60,
}
_BYTES_RE = re.compile(r"\s*(\d+)\s*([BkKMGTPE]?)\s*")
_INT_RE = re.compile(r"\s*(\d+)\s*")
_KEYS = (
    "readahead_buffer_size",
    "max_parallelism",
    "index_storage_option",
    "footer_prefetch_bytes",
)


@dataclass(frozen=True)
class ReaderOptions:
    """Parsed reader options.

    ``None`` means "not given" (``auto`` also maps to ``None``). ``string`` is the
    normalised options string, in the official grammar, that the engine receives.

    >>> parse_reader_options({"readahead_buffer_size": "1M"}).readahead_buffer_size
    1048576
    """

    string: str = ""
    readahead_buffer_size: int | None = None
    max_parallelism: int | None = None
    index_storage_option: str | None = None
    footer_prefetch_bytes: int | None = None


def _byte_count(key: str, value: str, where: str) -> int | None:
    if value.strip() == "auto":
        return None
    m = _BYTES_RE.fullmatch(value)
    if m is None:
        raise ValueError(
            f"{where}: reader option {key!r} has value {value!r}; expected 'auto' or a "
            "byte count with an optional suffix B, k, K, M, G, T, P or E (e.g. '16M')"
        )
    n = int(m.group(1)) * _SUFFIXES[m.group(2)]
    if n > _GIB:
        raise ValueError(f"{where}: reader option {key!r} is {value!r}; at most 1G is allowed")
    return n


def _int(key: str, value: str, where: str) -> int | None:
    if value.strip() == "auto":
        return None
    m = _INT_RE.fullmatch(value)
    if m is None or int(m.group(1)) > _INT32_MAX:
        raise ValueError(
            f"{where}: reader option {key!r} has value {value!r}; expected 'auto' or an "
            f"integer in [0, {_INT32_MAX}]"
        )
    return int(m.group(1))


def _items(options: str | Mapping[str, object] | None, where: str) -> list[tuple[str, str]]:
    if options is None:
        return []
    if isinstance(options, str):
        items = []
        for item in options.split(","):
            if not item:
                continue
            key, sep, value = item.partition(":")
            items.append((key, value if sep else ""))
        return items
    if isinstance(options, Mapping):
        items = []
        for key, value in options.items():
            if not isinstance(key, str):
                raise TypeError(f"{where}: reader option keys must be str, got {key!r}")
            if isinstance(value, bool) or not isinstance(value, (str, int)):
                raise TypeError(
                    f"{where}: reader option {key!r} must be a str (or int), got "
                    f"{type(value).__name__}"
                )
            items.append((key, str(value)))
        return items
    raise TypeError(
        f"{where}: reader options must be a str in the official grammar "
        f"('key:value,...') or a dict of str, got {type(options).__name__}"
    )


def parse_reader_options(
    options: str | Mapping[str, object] | None, where: str = "ArrayRecordReader"
) -> ReaderOptions:
    """Parse reader options given as the official string or as a dict of strings.

    Raises ``ValueError`` naming the key for an unknown key, a repeated key or a bad
    value; ``where`` (usually the file name) starts the message.

    >>> parse_reader_options("readahead_buffer_size:0,max_parallelism:0").string
    'readahead_buffer_size:0,max_parallelism:0'
    >>> parse_reader_options({"max_parallelism": "2"}).max_parallelism
    2
    >>> parse_reader_options("readahead:1")
    Traceback (most recent call last):
    ...
    ValueError: ArrayRecordReader: unknown reader option 'readahead'; valid options: \
readahead_buffer_size, max_parallelism, index_storage_option, footer_prefetch_bytes
    """
    seen: dict[str, str] = {}
    for key, value in _items(options, where):
        if key not in _KEYS:
            raise ValueError(
                f"{where}: unknown reader option {key!r}; valid options: {', '.join(_KEYS)}"
            )
        if key in seen:
            raise ValueError(f"{where}: reader option {key!r} is present more than once")
        seen[key] = value
    readahead = prefetch = parallelism = storage = None
    if "readahead_buffer_size" in seen:
        readahead = _byte_count("readahead_buffer_size", seen["readahead_buffer_size"], where)
    if "footer_prefetch_bytes" in seen:
        prefetch = _byte_count("footer_prefetch_bytes", seen["footer_prefetch_bytes"], where)
    if "max_parallelism" in seen:
        parallelism = _int("max_parallelism", seen["max_parallelism"], where)
    if "index_storage_option" in seen:
        storage = seen["index_storage_option"].strip() or "in_memory"
        if storage not in ("in_memory", "offloaded"):
            raise ValueError(
                f"{where}: reader option 'index_storage_option' is "
                f"{seen['index_storage_option']!r}; expected 'in_memory' or 'offloaded'"
            )
    if storage == "offloaded" and prefetch != 0:
        # The official reader's rule: the footer prefetch (1M unless 0) keeps the index.
        raise ValueError(
            f"{where}: reader option 'footer_prefetch_bytes' > 0 is only supported with "
            "index_storage_option:in_memory (give footer_prefetch_bytes:0 with offloaded)"
        )
    string = ",".join(f"{k}:{v.strip()}" if v.strip() else k for k, v in seen.items())
    return ReaderOptions(string, readahead, parallelism, storage, prefetch)
