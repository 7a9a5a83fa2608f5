"""The retry knob of appends (``retries=``): how often an append that lost a commit
race to another writer is tried again from a fresh read of the node.

Appends commute (each adds rows after whatever is there), so an append whose
compare-and-swap was refused reads the node again and commits its rows after the
other writer's; nothing of the refused attempt is visible (its shards are removed).
Between attempts it sleeps a random time that grows with the attempt and is bounded
by :data:`MAX_BACKOFF` seconds, so many writers spread out instead of colliding again.
"""

from __future__ import annotations

import random
import time

__all__ = ["APPEND_RETRIES", "MAX_BACKOFF", "backoff", "check_retries", "retried"]

APPEND_RETRIES = 19
"""The default ``retries=`` of every append: 20 attempts in all."""

MAX_BACKOFF = 0.5
"""The longest sleep (seconds) between two attempts of an append."""


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


_retried = 0


def retried() -> int:
    """How many retries (:func:`backoff` calls) this process has made so far: the
    commit races its writers lost and tried again.

    >>> before = retried(); backoff(1); retried() - before
    1
    """
    return _retried


def backoff(attempt: int) -> None:
    """Sleep before retry number ``attempt`` (1, 2, ...): a random time of up to
    10 ms times ``2 ** (attempt - 1)``, at most :data:`MAX_BACKOFF` seconds.

    >>> backoff(1)
    """
    global _retried
    _retried += 1
    time.sleep(random.uniform(0.0, min(MAX_BACKOFF, 0.01 * 2 ** min(attempt - 1, 16))))
