"""Shared by the tests of long dask writes whose tasks write the manifest segments
(tests/records/test_records_segment_writes.py, tests/ragged/test_ragged_segment_writes.py,
docs/spec.md 14.4.1): ``SEGMENT_LIMIT`` made small so a few dozen partitions make
several segments, and the bags, heads, files and task keys those tests look at."""

from __future__ import annotations

import os

import dask
import dask.bag as db

from arrayds.nodes import commit
from arrayds.nodes import history as log
from arrayds.storage import get_store

LIMIT = 4
N = 6 * LIMIT + 3  # partitions: 7 runs, the last of 3


def small_segments(monkeypatch) -> None:
    """Segments of :data:`LIMIT` entries for this test (the segment cache emptied)."""
    monkeypatch.setattr(log, "SEGMENT_LIMIT", LIMIT)
    log.clear_cache()


def bag(parts: list[list]) -> db.Bag:
    """A bag of the partitions ``parts``."""
    return db.from_delayed([dask.delayed(p) for p in parts])


def flat(parts: list[list]) -> list:
    return [x for p in parts for x in p]


def head(url: str) -> dict:
    """The head (the manifest as stored) of the node at ``url``."""
    return commit.read(get_store(url), "").head


def files(url: str) -> set[str]:
    """Every file below ``url``, relative to it."""
    return {os.path.relpath(os.path.join(d, f), url) for d, _, fs in os.walk(url) for f in fs}


def ordered(keys) -> list:
    """Dask keys ``name-<k>`` in the order of ``k``."""
    return sorted(keys, key=lambda k: int(str(k).rsplit("-", 1)[1]))
