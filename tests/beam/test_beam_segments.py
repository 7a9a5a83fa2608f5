"""Beam writes of more shards than a manifest segment holds (``SEGMENT_LIMIT``, made
small here) on the in-process DirectRunner: the commit step receives the references
of segments the runs wrote, never the shard entries, and the dataset is the same as a
short write's. Real files; the committed head and the records are read back."""

from __future__ import annotations

import glob
import os

import apache_beam as beam
import pytest

from arrayds import beam as abeam
from arrayds import records
from arrayds.kinds.records import write as records_write
from arrayds.nodes import commit
from arrayds.nodes import history as log
from arrayds.storage import get_store
from arrayds.verify import verify

LIMIT = 4


@pytest.fixture(autouse=True)
def small(monkeypatch):
    monkeypatch.setattr(log, "SEGMENT_LIMIT", LIMIT)


@pytest.fixture
def committed(monkeypatch):
    """What each commit function received: ``("segments", refs)`` or ``("shards", n)``."""
    seen: list[tuple[str, int]] = []
    by_refs, by_shards = records_write.commit_segments, records_write.commit_shards

    def segments(refs, *args):
        seen.append(("segments", [r for run in refs for r in run]))
        return by_refs(refs, *args)

    def shards(results, *args):
        seen.append(("shards", len(results)))
        return by_shards(results, *args)

    monkeypatch.setattr(records_write, "commit_segments", segments)
    monkeypatch.setattr(records_write, "commit_shards", shards)
    return seen


def _write(url, recs, **kw):
    with beam.Pipeline() as p:
        _ = p | beam.Create(recs) | abeam.WriteToArrayRecord(url, **kw)


def _segments(url):
    head = commit.read(get_store(url), "").head
    return head["shards"]["segments"]


RECS = [b"r%03d" % i for i in range(60)]


class Opaque:
    """A record no serializer of an ``auto`` write encodes."""


def test_the_commit_receives_segment_references_not_entries(tmp_path, committed):
    url = str(tmp_path / "r")
    _write(url, RECS, num_shards=14)
    [(how, refs)] = committed
    assert how == "segments" and sum(r["count"] for r in refs) == 14
    assert all(set(r) >= {"path", "count", "records"} for r in refs)  # references only
    ds = records.open_records(url)
    assert ds.num_shards == 14 and sorted(ds) == RECS and ds.serializer == "raw"
    assert sum(r["count"] for r in _segments(url)) == 14 and verify(url).ok


def test_short_writes_keep_one_commit_of_the_shard_list(tmp_path, committed):
    url = str(tmp_path / "r")
    _write(url, RECS, num_shards=LIMIT)
    assert committed == [("shards", LIMIT)]
    assert sorted(records.open_records(url)) == RECS


def test_runs_whose_shards_received_no_record_get_empty_shards(tmp_path, committed):
    url = str(tmp_path / "r")
    _write(url, [b"only"], num_shards=3 * LIMIT + 1)  # most runs receive nothing
    ds = records.open_records(url)
    assert ds.num_shards == 3 * LIMIT + 1 and list(ds) == [b"only"]
    assert committed[0][0] == "segments" and verify(url).ok


def test_auto_with_bytes_and_dicts_across_runs_is_msgpack(tmp_path, committed):
    url = str(tmp_path / "r")
    mixed = [b"b%d" % i if i % 2 else {"i": i} for i in range(40)]
    _write(url, mixed, num_shards=12)
    ds = records.open_records(url)
    assert committed[0][0] == "segments" and ds.serializer == "msgpack"
    got = list(ds)
    assert sorted(g for g in got if isinstance(g, bytes)) == sorted(
        m for m in mixed if isinstance(m, bytes)
    )
    assert sorted(g["i"] for g in got if isinstance(g, dict)) == list(range(0, 40, 2))


def test_one_shard_per_bundle_beyond_a_segment(tmp_path, committed, monkeypatch):
    monkeypatch.setattr(abeam, "_BUNDLE_SHARD_BYTES", 10)  # a shard every two records
    url = str(tmp_path / "r")
    _write(url, [bytes([i]) * 6 for i in range(30)])
    ds = records.open_records(url)
    assert ds.num_shards == 15 and committed[0][0] == "segments"
    assert sorted(ds) == sorted(bytes([i]) * 6 for i in range(30)) and verify(url).ok


def test_append_then_replace_a_long_write(tmp_path, committed):
    url = str(tmp_path / "r")
    _write(url, RECS[:30], num_shards=10)
    first = {os.path.basename(p) for p in glob.glob(os.path.join(url, "*.array_record*"))}
    _write(url, RECS[30:], num_shards=10, mode="a")
    assert sorted(records.open_records(url)) == RECS
    _write(url, [b"new"], num_shards=9, mode="w")
    ds = records.open_records(url)
    assert list(ds) == [b"new"] and ds.num_shards == 9
    left = {os.path.basename(p) for p in glob.glob(os.path.join(url, "*.array_record*"))}
    assert not left & first and len(left) == 9  # the replaced shards are gone
    assert [how for how, _ in committed] == ["segments"] * 3 and verify(url).ok


def test_a_failing_record_commits_nothing(tmp_path, committed):
    url = str(tmp_path / "r")
    with pytest.raises(TypeError, match="Opaque"):
        with beam.Pipeline() as p:
            _ = (
                p
                | beam.Create(range(20))
                | beam.Map(lambda i: {"i": i} if i != 7 else Opaque())
                | abeam.WriteToArrayRecord(url, num_shards=12)
            )
    assert committed == [] and not records.is_records(url)
