"""Coalesced range reads: the one planner every remote read path uses.

A read of a remote shard needs some byte ranges of it (the chunks holding the
records asked for). Each request to an object store costs a round trip, so nearby
ranges are merged into few requests: two ranges whose gap is at most
:attr:`Coalesce.gap` bytes become one request (the gap's bytes are fetched and
dropped), and no merged request grows past :attr:`Coalesce.max_size` bytes (a single
range longer than that stays one request), and no merged request fetches more than
:attr:`Coalesce.max_ratio` times the bytes it needs. The merged requests of one read are
fetched concurrently (:meth:`arrayds.storage.base.BaseStore.get_ranges`), and every
response is checked to hold exactly the bytes asked for: a shorter or longer one is
an :class:`arrayds.CorruptionError` naming the file and the range, never wrong data.

Per call: a :func:`coalescing` block (``with coalescing(gap=0): a[...]``). The
defaults come from the environment (read when a read starts):
``ARRAYDS_COALESCE_GAP`` (bytes, default 1 MiB; ``0`` merges only touching ranges),
``ARRAYDS_COALESCE_MAX`` (bytes, default 8 MiB) and ``ARRAYDS_COALESCE_RATIO`` (a
number >= 1 or ``inf``, the default). Sizes may carry a ``K``/``M``/``G`` suffix
(powers of 1024). Local files are not affected: they are memory-mapped or read with
``pread``.

The ratio is a cap on what sparse reads move, off by default: the ranges of a
shuffled batch (a few records of 1 KiB from every shard, each some hundred KiB from
the next) chain, gap by gap, into requests of most of a shard, which move many times
the bytes wanted (256 records of a 100,000-record dataset: 64 MB for 0.2 MB). On
the S3 benchmark (docs/performance.md) that is still the fastest plan: every request
saved costs the client more time than the megabytes it moves, and a cap of 16 made
such batches many times slower, with tens of times the requests. Where bytes cost more
than requests (egress billed, memory tight), set it; dense reads (a whole array, a
region) stay far below any cap.

>>> opts = Coalesce(gap=100, max_size=1000)
>>> plan_ranges([(0, 10), (50, 60), (500, 600), (2000, 3500)], opts)
[(0, 60), (500, 600), (2000, 3500)]
>>> Coalesce(gap=-1)
Traceback (most recent call last):
...
ValueError: coalescing gap must be a non-negative number of bytes, got -1
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptionError

__all__ = [
    "DEFAULT_GAP",
    "DEFAULT_MAX_RATIO",
    "DEFAULT_MAX_SIZE",
    "Coalesce",
    "coalesce_options",
    "coalescing",
    "explicit_options",
    "fetch_spans",
    "plan_ranges",
]

DEFAULT_GAP = 1 << 20
"""Ranges at most this many bytes apart are fetched as one request (1 MiB: on an
object store a request costs about as much as transferring a megabyte)."""
DEFAULT_MAX_SIZE = 8 << 20
"""No merged request grows past this many bytes (8 MiB)."""
DEFAULT_MAX_RATIO = float("inf")
"""No cap on the bytes a merged request fetches over those it needs (see above)."""

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def _parse_bytes(value: Any, what: str, *, positive: bool) -> int:
    """An int of bytes from an int or a string such as ``"512K"``."""
    v = value
    if isinstance(v, str):
        s = v.strip().upper().removesuffix("IB").removesuffix("B")
        unit = s[-1:] if s[-1:] in _UNITS else ""
        try:
            v = int(s[: len(s) - len(unit)]) * _UNITS[unit]
        except ValueError:
            raise ValueError(f"{what} must be a number of bytes, got {value!r}") from None
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"{what} must be an int number of bytes, got {value!r}")
    if v < 0 or (positive and v == 0):
        kind = "positive" if positive else "non-negative"
        raise ValueError(f"{what} must be a {kind} number of bytes, got {value!r}")
    return v


def _parse_ratio(value: Any, what: str) -> float:
    """A float >= 1 from a number or a numeric string."""
    v = value
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            raise ValueError(f"{what} must be a number >= 1, got {value!r}") from None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 1:
        raise ValueError(f"{what} must be a number >= 1, got {value!r}")
    return float(v)


@dataclass(frozen=True)
class Coalesce:
    """How the byte ranges of one remote read are merged into requests.

    ``gap``: ranges at most this many bytes apart become one request (``0``: only
    touching or overlapping ones). ``max_size``: no merged request grows past this
    many bytes. ``max_ratio``: no merged request fetches more than this many times
    the bytes of the ranges it serves (``1``: only touching or overlapping ranges
    join; ``float("inf")``, the default: no cap). A negative
    gap, a size that is not positive or a ratio below 1 (or not a number) is a
    ``ValueError`` naming the setting.

    >>> Coalesce(gap="64K", max_size="4M")
    Coalesce(gap=65536, max_size=4194304, max_ratio=inf)
    >>> Coalesce(max_size=0)
    Traceback (most recent call last):
    ...
    ValueError: coalescing max_size must be a positive number of bytes, got 0
    """

    gap: int = DEFAULT_GAP
    max_size: int = DEFAULT_MAX_SIZE
    max_ratio: float = DEFAULT_MAX_RATIO

    def __post_init__(self) -> None:
        object.__setattr__(self, "gap", _parse_bytes(self.gap, "coalescing gap", positive=False))
        object.__setattr__(
            self, "max_size", _parse_bytes(self.max_size, "coalescing max_size", positive=True)
        )
        object.__setattr__(self, "max_ratio", _parse_ratio(self.max_ratio, "coalescing max_ratio"))


_current: contextvars.ContextVar[Coalesce | None] = contextvars.ContextVar(
    "arrayds_coalesce", default=None
)


@contextlib.contextmanager
def coalescing(
    gap: int | str | None = None,
    max_size: int | str | None = None,
    max_ratio: float | str | None = None,
) -> Iterator[Coalesce]:
    """Within the block, remote reads of this thread (and of the pools and dask
    arrays it starts: :func:`arrayds.from_arrayrecord` keeps the ``gap`` and
    ``max_size`` of the block it is called in) coalesce with ``gap``, ``max_size``
    and ``max_ratio`` (``None``: the value outside the block). Yields the options in
    force.

    >>> with coalescing(gap=0) as opts:
    ...     opts.gap, coalesce_options().gap
    (0, 0)
    >>> with coalescing(max_size=-1):
    ...     pass
    Traceback (most recent call last):
    ...
    ValueError: coalescing max_size must be a positive number of bytes, got -1
    """
    outer = coalesce_options()
    opts = Coalesce(
        gap=outer.gap if gap is None else gap,
        max_size=outer.max_size if max_size is None else max_size,
        max_ratio=outer.max_ratio if max_ratio is None else max_ratio,
    )
    token = _current.set(opts)
    try:
        yield opts
    finally:
        _current.reset(token)


def explicit_options() -> Coalesce | None:
    """The options of the innermost :func:`coalescing` block, or None (for
    capturing them where reads will run in other threads or processes)."""
    return _current.get()


def coalesce_options(coalesce: Coalesce | dict[str, Any] | None = None) -> Coalesce:
    """The options of one read: ``coalesce`` as given (a :class:`Coalesce` or a dict
    of its fields), else those of the innermost :func:`coalescing` block, else from
    ``ARRAYDS_COALESCE_GAP`` / ``ARRAYDS_COALESCE_MAX`` / ``ARRAYDS_COALESCE_RATIO``
    (their names appear in the ``ValueError`` of a bad value), else the defaults.

    >>> coalesce_options({"gap": 0}).gap
    0
    """
    if isinstance(coalesce, Coalesce):
        return coalesce
    if coalesce is not None:
        if not isinstance(coalesce, dict):
            raise TypeError(f"coalesce must be a Coalesce or a dict, got {type(coalesce).__name__}")
        return Coalesce(**coalesce)
    current = _current.get()
    if current is not None:
        return current
    gap = os.environ.get("ARRAYDS_COALESCE_GAP")
    size = os.environ.get("ARRAYDS_COALESCE_MAX")
    ratio = os.environ.get("ARRAYDS_COALESCE_RATIO")
    return Coalesce(
        gap=DEFAULT_GAP
        if gap is None
        else _parse_bytes(gap, "ARRAYDS_COALESCE_GAP", positive=False),
        max_size=DEFAULT_MAX_SIZE
        if size is None
        else _parse_bytes(size, "ARRAYDS_COALESCE_MAX", positive=True),
        max_ratio=DEFAULT_MAX_RATIO
        if ratio is None
        else _parse_ratio(ratio, "ARRAYDS_COALESCE_RATIO"),
    )


def plan_ranges(spans: Sequence[tuple[int, int]], opts: Coalesce) -> list[tuple[int, int]]:
    """Merge byte ranges ``[begin, end)`` into requests (sorted, disjoint): ranges
    that overlap, touch or lie at most ``opts.gap`` bytes apart join while the
    request stays within ``opts.max_size`` bytes and within ``opts.max_ratio`` times
    the bytes of its ranges; a longer range is one request.

    >>> o = Coalesce(gap=0, max_size=100)
    >>> plan_ranges([(10, 20), (0, 10), (15, 30), (31, 40)], o)
    [(0, 30), (31, 40)]
    >>> plan_ranges([(0, 60), (60, 120), (120, 300)], o)
    [(0, 60), (60, 120), (120, 300)]
    >>> plan_ranges([(0, 10), (30, 40), (90, 100)], Coalesce(gap=100, max_ratio=2))
    [(0, 40), (90, 100)]
    """
    out: list[tuple[int, int]] = []
    needed = 0  # bytes of the ranges the last request serves
    for begin, end in sorted(spans):
        if end < begin or begin < 0:
            raise ValueError(f"bad byte range [{begin}, {end})")
        if out:
            b0, e0 = out[-1]
            new = max(0, end - max(begin, e0))  # bytes of this range not yet served
            stop = max(e0, end)
            if (
                begin <= e0 + opts.gap
                and stop - b0 <= opts.max_size
                and stop - b0 <= opts.max_ratio * (needed + new)
            ):
                out[-1] = (b0, stop)
                needed += new
                continue
            if end <= e0:  # inside a request already planned (one too long to grow)
                continue
        out.append((begin, end))
        needed = end - begin
    return out


def fetch_spans(
    spans: Sequence[tuple[int, int]],
    get_ranges: Callable[[list[tuple[int, int]]], Sequence[Any]],
    name: str,
    opts: Coalesce | None = None,
) -> list[tuple[int, memoryview]]:
    """The bytes of each span ``(begin, end)`` of file ``name`` as ``(begin, view)``
    pairs: the spans are merged (:func:`plan_ranges`), a merged range longer than
    ``max_size`` cut into ``max_size`` pieces, the requests fetched with one
    ``get_ranges(requests)`` call (concurrently: it returns one bytes object per
    request), each response's length checked, and the spans sliced out of them.

    >>> data = bytes(range(100))
    >>> got = fetch_spans([(0, 2), (5, 7)], lambda rs: [data[b:e] for b, e in rs], "f")
    >>> [(b, bytes(v)) for b, v in got]
    [(0, b'\\x00\\x01'), (5, b'\\x05\\x06')]
    >>> fetch_spans([(0, 2)], lambda rs: [b"x"], "f")
    Traceback (most recent call last):
    ...
    arrayds._native.CorruptionError: f: asked for bytes [0, 2) (2 bytes) and got 1 bytes ...
    """
    if not spans:
        return []
    opts = opts or coalesce_options()
    merged = plan_ranges(spans, opts)
    # a merged range longer than max_size (one long span: the engine hands over a run
    # of touching chunks as one span) is fetched in max_size pieces, at once
    requests = [
        (p, min(p + opts.max_size, e)) for b, e in merged for p in range(b, e, opts.max_size)
    ]
    datas = get_ranges(requests)
    for (b, e), data in zip(requests, datas, strict=True):
        if isinstance(data, BaseException):
            raise data
        if len(data) != e - b:
            raise CorruptionError(
                f"{name}: asked for bytes [{b}, {e}) ({e - b} bytes) and got {len(data)} bytes "
                f"(the file is shorter or longer than its footer says, or the store answered "
                f"a range wrongly)"
            )
    if len(requests) == len(merged):
        views = [memoryview(d) for d in datas]
    else:
        views = []
        k = 0
        for b, e in merged:
            n = -(-(e - b) // opts.max_size)
            views.append(memoryview(datas[k] if n == 1 else b"".join(datas[k : k + n])))
            k += n
    starts = [b for b, _ in merged]
    out = []
    for begin, end in spans:
        j = bisect.bisect_right(starts, begin) - 1  # the merged range that holds the span
        r0 = starts[j]
        out.append((begin, views[j][begin - r0 : end - r0]))
    return out
