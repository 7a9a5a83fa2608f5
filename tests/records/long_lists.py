"""Shared by the tests of long shard lists (tests/nodes/test_split_manifests.py,
test_index_segments.py, tests/records/test_records_segments.py): a records dataset
of many shards written by dask, and the small limits that make segments and indexes
appear at a few hundred entries."""

from __future__ import annotations

import dask
import dask.bag as db
import pytest

from arrayds import records
from arrayds.nodes import history as log


def dask_records(tmp_path, n: int) -> tuple[str, list[bytes]]:
    """A records dataset of ``n`` shards of 1 to 3 records each, written by dask (its
    segments by its tasks, with this process's limits: the sync scheduler) -> (url,
    every record)."""
    url = str(tmp_path / "r")
    sizes = [1 + i % 3 for i in range(n)]
    data = [b"r%d" % i for i in range(sum(sizes))]
    parts, at = [], 0
    for s in sizes:
        parts.append(data[at : at + s])
        at += s
    bag = db.from_delayed([dask.delayed(p) for p in parts])
    with dask.config.set(scheduler="sync"):
        records.write_records(bag, url, serializer="raw")
    return url, data


def small_levels(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments of 8 entries, indexes of 4 references, a tail of 4; no segment cached."""
    monkeypatch.setattr(log, "SEGMENT_LIMIT", 8)
    monkeypatch.setattr(log, "INDEX_LIMIT", 4)
    monkeypatch.setattr(log, "TAIL_LIMIT", 4)
    log.clear_cache()
