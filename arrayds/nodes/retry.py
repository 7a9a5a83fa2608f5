"""The retry policy of appends (``retries=``): how often, and after what wait, an
append that lost a commit race to another writer is tried again from a fresh read.

Appends commute (each adds rows after whatever is there), so an append whose
compare-and-swap was refused reads the node again and commits its rows after the
other writer's; nothing of the refused attempt is visible (its shards are removed).

The waits are "full jitter" exponential backoff: before retry ``n`` a writer sleeps a
uniformly random time of up to ``FIRST_BACKOFF * 2 ** (n - 1)`` seconds, at most
:data:`MAX_BACKOFF`. The budget is sized by the time a writer may have to wait, not by
a small count: a writer that just committed starts its next append at once, from the
node it wrote, so it tends to win again, and a writer that lost may have to wait until
the others have written all they had (with 16 writers on one node of an object store
in ``benchmarks/bench_writers.py``, one append in six lost 20 races in a row; see
docs/reliability.md). The default :data:`APPEND_RETRIES` retries wait :func:`budget`
seconds at most (about 187 s; half that on average), and the long waits keep the
losers from spending the store's and the machine's time on attempts that are refused
anyway.
"""

from __future__ import annotations

import random
import time

__all__ = [
    "APPEND_RETRIES",
    "FIRST_BACKOFF",
    "MAX_BACKOFF",
    "backoff",
    "budget",
    "check_retries",
    "delay",
    "retried",
    "slept",
]

APPEND_RETRIES = 100
"""The default ``retries=`` of every append: 101 attempts in all."""

FIRST_BACKOFF = 0.01
"""The longest wait (seconds) before the first retry; it doubles with each retry."""

MAX_BACKOFF = 2.0
"""The longest wait (seconds) between two attempts of an append."""


def check_retries(retries: object, what: str) -> int:
    """``retries`` as a count of retries, or ``ValueError`` naming it (and ``what``)
    if it is not an integer of 0 or more.

    >>> check_retries(3, "append")
    3
    >>> check_retries(-1, "append")
    Traceback (most recent call last):
    ...
    ValueError: append: retries must be an integer >= 0, got -1
    """
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"{what}: retries must be an integer >= 0, got {retries!r}")
    return retries


def delay(attempt: int, rng: random.Random | None = None) -> float:
    """The wait (seconds) before retry number ``attempt`` (1, 2, ...): uniform in
    ``[0, min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** (attempt - 1))]``, drawn from ``rng``
    (default: the module ``random``). ``ValueError`` for an attempt below 1.

    >>> 0.0 <= delay(1) <= FIRST_BACKOFF, 0.0 <= delay(50) <= MAX_BACKOFF
    (True, True)
    """
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise ValueError(f"backoff: attempt must be an integer >= 1, got {attempt!r}")
    ceiling = min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** min(attempt - 1, 32))
    return (rng or random).uniform(0.0, ceiling)


def budget(retries: int = APPEND_RETRIES) -> float:
    """The longest time (seconds) the waits of ``retries`` retries can add up to (the
    sum of their ceilings; the mean is half of it).

    >>> round(budget(3), 2), round(budget(), 1)
    (0.07, 186.6)
    """
    retries = check_retries(retries, "budget")
    return sum(min(MAX_BACKOFF, FIRST_BACKOFF * 2 ** min(n, 32)) for n in range(retries))


_retried = 0
_slept = 0.0


def retried() -> int:
    """How many retries (:func:`backoff` calls) this process has made so far: the
    commit races its writers lost and tried again.

    >>> before = retried(); backoff(1); retried() - before
    1
    """
    return _retried


def slept() -> float:
    """How many seconds this process has waited in :func:`backoff` so far.

    >>> before = slept(); backoff(1); 0.0 <= slept() - before <= FIRST_BACKOFF
    True
    """
    return _slept


def backoff(attempt: int) -> None:
    """Sleep before retry number ``attempt`` (1, 2, ...) for :func:`delay` seconds,
    and count it (:func:`retried`, :func:`slept`).

    >>> backoff(1)
    """
    global _retried, _slept
    wait = delay(attempt)
    _retried += 1
    _slept += wait
    time.sleep(wait)
