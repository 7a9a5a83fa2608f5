"""A long records write on a real dask.distributed cluster (two worker processes):
more than ``SEGMENT_LIMIT`` partitions (made small in this process, where the graph is
built), so worker tasks write the manifest segments, decide the ``auto`` serializer of
mixed partitions and commit only references (docs/spec.md 14.4.1); then a long append.
Everything reads back in order and ``verify`` passes."""

from __future__ import annotations

import dask
import dask.bag as db
import pytest

from arrayds import records
from arrayds.nodes import commit
from arrayds.nodes import history as log
from arrayds.storage import get_store
from arrayds.verify import verify


@pytest.fixture
def on_cluster(client, monkeypatch):
    monkeypatch.setattr(log, "SEGMENT_LIMIT", 4)
    with client.as_current():
        yield client


def test_a_long_records_write_and_append_commit_segments_from_the_workers(tmp_path, on_cluster):
    url = str(tmp_path / "r")
    parts = [[b"p%d.%d" % (k, i) for i in range(k % 3)] for k in range(21)]
    parts[6] = [{"dict": 6}]  # one partition of objects: the bytes are re-encoded
    more = [[b"q%d" % k] for k in range(9)]
    records.write_records(db.from_delayed([dask.delayed(p) for p in parts]), url)
    ds = records.write_records(db.from_delayed([dask.delayed(p) for p in more]), url, mode="a")
    head = commit.read(get_store(url), "").head
    assert head["serializer"] == "msgpack" and len(head["shards"]["segments"]) == 6 + 3
    want = [x for p in parts + more for x in p]
    assert ds.num_records == len(want)
    log.clear_cache()
    assert list(records.open_records(url).data_source(decode=True)) == want
    assert verify(url).ok
