"""The retry policy of appends (arrayds.nodes.retry): full-jitter waits that double up to a
ceiling, a budget that outlasts a long run of lost races, and bad input.

The long run of lost races is an exact interleaving, not a race: the writer under test
goes through a :class:`FaultProxy` whose rule makes another writer commit while each
of its attempts is in flight (after the server stored the attempt's shard, before the
writer hears back), so its compare-and-swap is refused ``LOSSES`` times in a row."""

from __future__ import annotations

import itertools
import random
import uuid

import numpy as np
import pytest
from faults.proxy import FaultProxy, Rule

import arrayds
from arrayds.nodes import retry
from arrayds.verify import verify

from .conftest import BUCKET

LOSSES = 30
"""Races lost in a row: more than the old default budget of 19 retries allowed."""


def test_waits_are_full_jitter_doubling_up_to_the_ceiling():
    rng = random.Random(28)
    for attempt in range(1, 40):
        ceiling = min(retry.MAX_BACKOFF, retry.FIRST_BACKOFF * 2 ** (attempt - 1))
        draws = [retry.delay(attempt, rng) for _ in range(200)]
        assert all(0.0 <= d <= ceiling for d in draws), attempt
        assert min(draws) < 0.1 * ceiling and max(draws) > 0.9 * ceiling, attempt  # spread
    assert retry.delay(10**6, rng) <= retry.MAX_BACKOFF  # no overflow on huge attempts


def test_the_default_budget_waits_long_enough_for_many_writers():
    # the ceilings of all waits: 2 s from the 9th retry on
    assert retry.budget() == pytest.approx(
        sum(min(retry.MAX_BACKOFF, retry.FIRST_BACKOFF * 2**n) for n in range(100))
    )
    assert retry.APPEND_RETRIES >= LOSSES
    assert retry.budget() > 150.0  # half of it (the mean) covers a minute of others' commits
    assert retry.budget(0) == 0.0


@pytest.mark.parametrize("bad", [0, -1, 1.5, None, True])
def test_delay_wants_an_attempt_of_1_or_more(bad):
    with pytest.raises(ValueError, match=r"attempt must be an integer >= 1"):
        retry.delay(bad)


@pytest.mark.parametrize("bad", [-1, 2.0, "3"])
def test_budget_wants_a_count(bad):
    with pytest.raises(ValueError, match=r"budget: retries must be an integer >= 0"):
        retry.budget(bad)


def test_backoff_counts_retries_and_seconds_waited(monkeypatch):
    monkeypatch.setattr(retry, "FIRST_BACKOFF", 0.002)
    before, waited = retry.retried(), retry.slept()
    for attempt in (1, 2, 3):
        retry.backoff(attempt)
    assert retry.retried() == before + 3
    assert 0.0 <= retry.slept() - waited <= 0.002 + 0.004 + 0.008


@pytest.fixture
def racing(writers_s3, monkeypatch):
    """(url, storage_options straight to moto, the proxy factory): the waits are cut to
    at most 1 ms (this checks the budget's count, not the clock)."""
    monkeypatch.setattr(retry, "MAX_BACKOFF", 0.001)
    url = f"s3://{BUCKET}/race-{uuid.uuid4().hex[:8]}"

    def proxy(rule: Rule) -> FaultProxy:
        return FaultProxy(writers_s3.endpoint_url, [rule])

    return url, writers_s3.storage_options(), proxy


@pytest.mark.parametrize("chunk", [1, 4], ids=["whole-chunks", "partial-last-chunk"])
def test_an_array_append_that_loses_many_races_in_a_row_commits_once(racing, writers_s3, chunk):
    url, so, proxy = racing
    arrayds.open_array(url, mode="w", shape=(0,), dtype="i8", chunks=(chunk,), storage_options=so)
    other = arrayds.open_array(url, mode="a", storage_options=so)
    other.append(np.array([-2]))  # chunk 4: the loser completes a partly filled chunk
    values = itertools.count()

    def commit_first() -> None:  # another writer commits after each manifest read
        other.append(np.array([next(values)]), compact=False)

    # an attempt reads the manifest twice (its commit, the check of a refused put): a
    # commit after each of 2 x LOSSES reads makes it lose at least LOSSES - 1 races
    firings = 2 * LOSSES
    rule = Rule(
        "slow", delay=0, methods=("GET",), keys="manifest", limit=firings, then=commit_first
    )
    with proxy(rule) as p:
        stale = arrayds.open_array(url, mode="a", storage_options=writers_s3.storage_options(p.url))
        before = retry.retried()
        stale.append(np.array([-1]), compact=False)
        lost = retry.retried() - before
        shard_puts = p.requests[("PUT", "shard")]
    assert lost > 19  # more races lost than the old default allowed
    got = arrayds.open_array(url, storage_options=so)[:].tolist()
    assert got == [-2, *range(firings), -1]  # every row once, the loser's last
    assert verify(url, storage_options=so).ok
    # the commit's own retries (arrayds.nodes.retry through nodes.commit): a shard of
    # whole new chunks is written once and only its entry moves; one that completed a
    # partly filled last chunk is written again over the rows there now
    assert shard_puts == 1 if chunk == 1 else shard_puts > 1


def test_a_records_append_that_loses_many_races_in_a_row_commits_once(racing, writers_s3):
    url, so, proxy = racing
    arrayds.to_arrayrecord([-1], url, mode="w", serializer="msgpack", storage_options=so)
    values = itertools.count()

    def commit_first() -> None:  # another writer commits after each manifest read
        arrayds.to_arrayrecord([next(values)], url, mode="a", storage_options=so)

    # an attempt reads the manifest more than once (its commit, the tiered merge's
    # look at the tail, the check of a refused put): a commit after each of 4 x LOSSES
    # reads makes it lose at least LOSSES races
    firings = 4 * LOSSES
    rule = Rule(
        "slow", delay=0, methods=("GET",), keys="manifest", limit=firings, then=commit_first
    )
    with proxy(rule) as p:
        before = retry.retried()
        arrayds.to_arrayrecord(
            [-2], url, mode="a", storage_options=writers_s3.storage_options(p.url)
        )
        lost = retry.retried() - before
    assert lost > 19  # more races lost than the old default allowed
    got = [int(v) for v in arrayds.open(url, storage_options=so)[:]]
    assert sorted(got) == [-2, -1, *range(firings)]  # every record once
    assert got[-1] == -2  # committed after all the others
