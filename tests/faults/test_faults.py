"""Writes and reads through a fault-injecting proxy (proxy.py) on S3 (moto) and GCS
(fake-gcs-server).

Each write under faults either commits exactly once or raises; the dataset then reads
exactly as before or exactly as after it (checked straight on the server, past the
proxy), ``verify`` passes and nothing committed is lost. A commit whose reply was lost
is recognised as committed (its write id), even when another writer committed on top
of it before the retry. Reads through the proxy return exactly the stored values or
raise: transient errors are retried, short bodies are never decoded.
"""

from __future__ import annotations

import numpy as np
import pytest
from conformance.servers import load_helper

import arrayds
from arrayds.errors import CommitConflictError
from arrayds.nodes import commit as commit_mod
from arrayds.nodes import shards as store_mod
from arrayds.storage import new_store
from arrayds.tools.verify import verify

from .proxy import FaultProxy, Rule, key_kind

WRITES = ("PUT", "POST")

SCHEDULE = (
    Rule("503", rate=0.06, limit=3),
    Rule("500", rate=0.03, limit=2),
    Rule("429", rate=0.03, limit=2),
    Rule("reset", rate=0.03, limit=2),
    Rule("slow", rate=0.05, delay=0.01),
    Rule("lost", rate=0.05, methods=WRITES, limit=3),
    Rule("truncate", rate=0.05, methods=("GET",), limit=3),
)
"""The bounded seeded schedule of the write test: every kind of fault, few enough
that the clients' own retries (with their backoff) stay within a few seconds."""


def _read(url: str, opts: dict) -> np.ndarray:
    store_mod.clear_reader_cache()
    return arrayds.open_array(url, "x", storage_options=opts)[:]


def test_lost_reply_under_another_writer_is_committed(faulty) -> None:
    """The manifest PUT lands, another writer commits on top of it, then the reply is
    lost: the client's retry is refused (412), yet the append committed exactly once
    and raises nothing (before the fix: CommitConflictError saying nothing of it was
    visible, and a retried append would have appended twice)."""
    url, direct = faulty.url, faulty.direct
    arrayds.to_arrayrecord(np.zeros((2, 3)), url, "x", storage_options=direct)

    def other_writer() -> None:
        arr = arrayds.open_array(url, "x", mode="a", storage_options=direct)
        arr.append(np.full((1, 3), 7.0))

    faulty.proxy.set_schedule(
        [Rule("lost", methods=WRITES, keys="manifest", limit=1, then=other_writer)]
    )
    arr = arrayds.open_array(url, "x", mode="a", storage_options=faulty.opts)
    arr.append(np.ones((1, 3)))
    assert faulty.proxy.injected["lost"] == 1
    got = _read(url, direct)
    np.testing.assert_array_equal(got, np.array([[0.0] * 3, [0.0] * 3, [1.0] * 3, [7.0] * 3]))
    assert not verify(url, storage_options=direct).problems


def test_refused_put_that_did_not_land_is_a_conflict(faulty) -> None:
    """The manifest PUT gets a 503 and another writer commits before the client's
    retry: the retry is refused and this time it is a real conflict (a region write,
    which does not commute): CommitConflictError, and only the other write is there."""
    url, direct = faulty.url, faulty.direct
    arrayds.to_arrayrecord(np.zeros((2, 3)), url, "x", storage_options=direct)

    def other_writer() -> None:
        arr = arrayds.open_array(url, "x", mode="r+", storage_options=direct)
        arr[1:2] = np.full((1, 3), 7.0)

    faulty.proxy.set_schedule(
        [Rule("503", methods=WRITES, keys="manifest", limit=1, then=other_writer)]
    )
    arr = arrayds.open_array(url, "x", mode="r+", storage_options=faulty.opts)
    with pytest.raises(CommitConflictError, match="nothing of this write is visible"):
        arr[0:1] = np.ones((1, 3))
    assert faulty.proxy.injected["503"] == 1
    np.testing.assert_array_equal(_read(url, direct), [[0.0] * 3, [7.0] * 3])
    assert not verify(url, storage_options=direct).problems


def test_truncated_bodies_are_never_decoded(faulty) -> None:
    """The first GET of a manifest and up to two GETs of shards are cut to half their body
    (the server's Content-Length kept): the clients see the short body and retry, and
    the reads (slices, dask, verify) return exactly the stored values."""
    url, direct = faulty.url, faulty.direct
    want = np.arange(60.0).reshape(20, 3)
    arrayds.to_arrayrecord(want, url, "x", storage_options=direct, shard_size=5)
    faulty.proxy.set_schedule(
        [
            Rule("truncate", methods=("GET",), keys="manifest", limit=1),
            Rule("truncate", methods=("GET",), keys="shard", limit=1),
            Rule("truncate", methods=("GET",), keys="shard", skip=3, limit=1),
        ]
    )
    np.testing.assert_array_equal(_read(url, faulty.opts)[3:17], want[3:17])
    store_mod.clear_reader_cache()
    got = arrayds.from_arrayrecord(url, "x", storage_options=faulty.opts).compute()
    np.testing.assert_array_equal(got, want)
    assert not verify(url, storage_options=faulty.opts).problems
    # the manifest's first GET and at least one shard GET were cut (a read of most of a
    # shard fetches it whole: how many shard GETs a read makes depends on the client)
    assert faulty.proxy.injected["truncate"] >= 2


def test_rule_and_proxy_errors() -> None:
    """Bad rules and schedules are errors naming what was wrong."""
    with pytest.raises(ValueError, match="fault must be one of"):
        Rule("404")
    with pytest.raises(ValueError, match="rate"):
        Rule("503", rate=1.5)
    with pytest.raises(ValueError, match="must not be negative"):
        Rule("503", limit=-1)
    with pytest.raises(TypeError, match="Rule objects"):
        FaultProxy(("127.0.0.1", 9), schedule=["503"])
    assert key_kind("/b/ds/x/arrayds.json") == "manifest"
    assert key_kind("/b/ds/x/_arrayds/log/1-abc.json") == "segment"
    assert key_kind("/upload/storage/v1/b/bkt/o/ds/c/a-0.array_record") == "shard"


def test_retry_budget_is_checked() -> None:
    """A retry budget that is negative or not a count is a ValueError naming it."""
    st = new_store("memory://faults-retries")
    for bad in (-1, 1.5, "3", True):
        with pytest.raises(ValueError, match="retries"):
            commit_mod.commit(st, "", lambda b: {"kind": "group"}, write_id="w", retries=bad)
    assert not st.exists("arrayds.json")


def test_seeded_schedule_writes_and_reads(faulty) -> None:
    """The bounded seeded schedule (every fault type, on every method and key kind,
    truncated bodies on reads): every write commits exactly once or fails cleanly,
    every read is exact or an error, verify passes."""
    workload = load_helper("faults", "workload")
    faulty.proxy.set_schedule(SCHEDULE, seed=7)
    tally = workload.run(faulty.url, faulty.opts, faulty.direct, ops=12, seed=7)
    assert tally.violations == 0, tally
    assert tally.committed + tally.failed == 12
    assert sum(faulty.proxy.injected.values()) > 0


@pytest.mark.parametrize("backend", ["s3"])
def test_a_commit_that_gives_up_says_the_dataset_is_as_before(faulty) -> None:
    """Every manifest PUT is reset: the client's retries run out, the append raises
    the client's error with a note that nothing was committed, and the array is as
    before (S3 only, botocore's own retries off to keep it short: gcsfs's backoff
    would take half a minute)."""
    url, direct = faulty.url, faulty.direct
    arrayds.to_arrayrecord(np.zeros((2, 3)), url, "x", storage_options=direct)
    faulty.proxy.set_schedule([Rule("reset", methods=WRITES, keys="manifest")])
    opts = dict(faulty.opts, config_kwargs={"retries": {"max_attempts": 1}})
    arr = arrayds.open_array(url, "x", mode="a", storage_options=opts)
    with pytest.raises(Exception) as info:
        arr.append(np.ones((1, 3)))
    assert not isinstance(info.value, CommitConflictError)
    assert any("not committed: the node is as before" in n for n in info.value.__notes__)
    np.testing.assert_array_equal(_read(url, direct), np.zeros((2, 3)))
    assert not verify(url, storage_options=direct).problems


def test_a_shard_upload_whose_last_reply_is_lost_commits(faulty) -> None:
    """The request that completes a shard's upload is applied and its reply lost: the
    client's resend fails (GCS: the resumable session is complete, 404), yet the shard
    is stored whole under its write's name, so the append commits once instead of
    failing (before the fix: FileNotFoundError "cannot write the shard", the append
    lost). On S3 the resend of a single PUT simply succeeds."""
    url, direct = faulty.url, faulty.direct
    arrayds.to_arrayrecord(np.zeros((2, 3)), url, "x", storage_options=direct)
    # GCS: the session's first request (POST) passes, its completing PUT is lost
    skip = 1 if url.startswith("gs://") else 0
    faulty.proxy.set_schedule([Rule("lost", methods=WRITES, keys="shard", skip=skip, limit=1)])
    arr = arrayds.open_array(url, "x", mode="a", storage_options=faulty.opts)
    arr.append(np.ones((1, 3)))
    assert faulty.proxy.injected["lost"] == 1
    np.testing.assert_array_equal(_read(url, direct), np.array([[0.0] * 3] * 2 + [[1.0] * 3]))
    assert not verify(url, storage_options=direct).problems


@pytest.mark.parametrize("backend", ["gs"])
def test_a_user_upload_whose_last_reply_is_lost_raises(faulty) -> None:
    """Only a shard, whose name is its write's alone, is taken as stored when the
    completing request's reply is lost and the object then holds as many bytes as were
    sent. A user's writer cannot know that an object of that size is its own (here an
    earlier upload of the same bytes under the same name): its close raises."""
    url = f"{faulty.url}/user.array_record"
    records = [b"record %d" % i for i in range(10)]
    with arrayds.ArrayRecordWriter(url, storage_options=faulty.direct) as w:
        w.write_many(records)
    before = w.upload_bytes
    faulty.proxy.set_schedule([Rule("lost", methods=WRITES, keys="shard", skip=1, limit=1)])
    w = arrayds.ArrayRecordWriter(url, storage_options=faulty.opts)
    w.write_many(records)
    with pytest.raises(OSError):
        w.close()
    assert faulty.proxy.injected["lost"] == 1
    assert w.upload_bytes == before > 0
    reader = arrayds.ArrayRecordReader(url, storage_options=faulty.direct)
    assert reader.read_all() == records
