"""Long dask writes of records datasets (more than ``SEGMENT_LIMIT`` partitions,
docs/spec.md 14.4.1): tasks over runs of partitions write the manifest entries as
segments, the commit task receives only their references, and an ``auto`` serializer
is decided by a small task from the serializers each run chose. Real bags and
sources written to local folders on the sync and threaded schedulers, with
``SEGMENT_LIMIT`` made small so a few dozen partitions make several segments; every
result is read back record by record and checked by ``verify``."""

from __future__ import annotations

import os

import dask
import pytest
import segment_writes as sw
from dask.core import get_dependencies
from segment_writes import LIMIT, N

from arrayds import records
from arrayds.errors import CorruptionError
from arrayds.kinds.records import write as rw
from arrayds.nodes import commit
from arrayds.nodes import history as log
from arrayds.nodes.options import WriterOptions
from arrayds.storage import get_store
from arrayds.verify import verify


@pytest.fixture(autouse=True)
def _small_segments(monkeypatch):
    sw.small_segments(monkeypatch)


def _parts(n: int = N, tag: bytes = b"r", dicts: set[int] = frozenset()) -> list[list]:
    """``n`` partitions of 0 to 2 records (byte strings; dicts for those in ``dicts``)."""
    return [
        [{"k": k, "i": i} if k in dicts else b"%s%d.%d" % (tag, k, i) for i in range(k % 3)]
        for k in range(n)
    ]


def _read(url: str) -> list:
    log.clear_cache()
    return list(records.open_records(url).data_source(decode=True))


def _write_id(d) -> str:
    return str(d.key).rsplit("-", 1)[1]


def test_the_commit_receives_segment_references_not_entries(tmp_path, task_results):
    url = str(tmp_path / "r")
    parts = _parts()
    d = records.write_records(sw.bag(parts), url, serializer="raw", compute=False)
    deps = get_dependencies(dict(d.__dask_graph__()), d.key)
    assert len(deps) == 7 and all(str(k).startswith("records-segment-") for k in deps)
    with task_results() as seen, dask.config.set(scheduler="threads"):
        d.compute()
    refs = [r for k in sw.ordered(deps) for r in seen.got[k]]
    assert [r["count"] for r in refs] == [LIMIT] * 6 + [3]
    assert all(set(r) == {"path", "count", "records"} for r in refs)  # no entries
    assert sum(r["records"] for r in refs) == len(sw.flat(parts))
    head = sw.head(url)
    assert head["shards"] == {"segments": refs, "tail": []}
    assert head["num_records"] == len(sw.flat(parts)) and head["serializer"] == "raw"
    assert _read(url) == sw.flat(parts)
    assert verify(url).ok


def test_short_writes_keep_one_commit_task_over_the_shards(tmp_path):
    d = records.write_records(sw.bag(_parts(LIMIT)), str(tmp_path / "r"), compute=False)
    deps = get_dependencies(dict(d.__dask_graph__()), d.key)
    assert len(deps) == LIMIT and not any("segment" in str(k) for k in deps)
    d.compute(scheduler="sync")
    assert isinstance(sw.head(str(tmp_path / "r"))["shards"], list)  # a short inline list


def test_the_committed_dataset_opens_lazily_and_reads_by_record_index(tmp_path):
    url = str(tmp_path / "r")
    parts = _parts()
    with dask.config.set(scheduler="sync"):
        ds = records.write_records(sw.bag(parts), url)
    want = sw.flat(parts)
    log.clear_cache()
    last = sw.head(url)["shards"]["segments"][-1]["path"]
    os.remove(os.path.join(url, last))  # the segment of the last 3 partitions, gone
    # the dataset the write returned loads only the segments a read needs
    assert ds.num_records == len(want) and ds.serializer == "raw"
    src = ds.data_source()
    n = len(want) - 3  # the records of the other segments (partitions 24 and 25 hold 3)
    assert src[list(range(n))] == want[:n]
    assert src[n // 2] == want[n // 2]
    with pytest.raises(CorruptionError, match="segment"):
        src[len(want) - 1]


def test_auto_with_mixed_partitions_re_encodes_the_raw_ones_in_the_segment_tasks(
    tmp_path, task_results
):
    url = str(tmp_path / "r")
    parts = _parts(dicts={5, 17})  # two runs hold a partition of dicts, the others bytes
    d = records.write_records(sw.bag(parts), url, compute=False)
    graph = dict(d.__dask_graph__())
    deps = get_dependencies(graph, d.key)
    decide = [k for k in deps if str(k).startswith("records-serializer-")]
    assert len(decide) == 1 and len(deps) == 8  # 7 segment tasks and the decision
    chosen = get_dependencies(graph, decide[0])
    assert len(chosen) == 7 and all(str(k).startswith("records-chosen-") for k in chosen)
    with task_results() as seen, dask.config.set(scheduler="threads"):
        ds = d.compute()
    assert seen.got[decide[0]] == "msgpack"
    assert sorted(map(tuple, (seen.got[k] for k in chosen))) == sorted(
        [("msgpack", "raw")] * 2 + [("raw",)] * 5
    )
    assert ds["serializer"] == "msgpack"
    assert _read(url) == sw.flat(parts)  # the bytes re-encoded as msgpack read back as bytes
    assert verify(url).ok


def test_auto_with_empty_and_byte_partitions_is_raw(tmp_path):
    url = str(tmp_path / "r")
    parts = [[] for _ in range(N)]
    parts[9] = [b"x"]
    with dask.config.set(scheduler="sync"):
        ds = records.write_records(sw.bag(parts), url)
    assert ds.serializer == "raw" and _read(url) == [b"x"]


def test_mode_w_over_a_long_dataset_keeps_nothing_of_it(tmp_path):
    url = str(tmp_path / "r")
    with dask.config.set(scheduler="sync"):
        records.write_records(sw.bag(_parts(tag=b"old")), url)
    old = {f for f in sw.files(url) if ".array_record" in f}
    assert len(old) == N
    parts = _parts(2 * N, dicts={4})
    d = records.write_records(sw.bag(parts), url, mode="w", compute=False, attrs={"v": 2})
    assert all(
        str(k).startswith(("records-segment-", "records-serializer-"))
        for k in get_dependencies(dict(d.__dask_graph__()), d.key)
    )
    with dask.config.set(scheduler="threads"):
        d.compute()
    assert _read(url) == sw.flat(parts)
    files = sw.files(url)
    assert not files & old  # every replaced shard gone
    head = sw.head(url)
    assert head["serializer"] == "msgpack" and head["attrs"] == {"v": 2}
    named = log.log_files(get_store(url), "", head)
    assert {f for f in files if f.startswith(log.LOG_DIR)} == named  # the old segments too
    assert len(commit.versions(get_store(url), "")) == 1  # a replaced node: a new history
    assert verify(url).ok


def test_two_long_appends_after_an_existing_dataset(tmp_path):
    url = str(tmp_path / "r")
    first = [[b"a%d" % i] for i in range(3)]
    records.write_records(sw.flat(first), url, num_shards=3, attrs={"a": 1})
    one, two = _parts(tag=b"x"), _parts(N + 5, tag=b"y")
    with dask.config.set(scheduler="threads"):
        records.write_records(sw.bag(one), url, mode="a", attrs={"b": 2})
        ds = records.write_records(sw.bag(two), url, mode="a")
    want = sw.flat(first) + sw.flat(one) + sw.flat(two)
    assert ds.num_records == len(want) and ds.num_shards == 3 + N + N + 5
    assert _read(url) == want
    head = sw.head(url)
    assert head["attrs"] == {"a": 1, "b": 2} and head["num_records"] == len(want)
    assert len(commit.versions(get_store(url), "")) == 3
    assert verify(url).ok


def test_a_long_append_that_lost_the_race_lands_after_the_other_records(tmp_path, monkeypatch):
    """Another append commits after this commit read the head and before its put: the
    put is refused and the append is committed again after the other's records (its
    segments as they are: a records entry holds no position)."""
    url = str(tmp_path / "r")
    records.write_records([b"base"], url)
    parts = _parts(tag=b"m")
    d = records.write_records(sw.bag(parts), url, mode="a", compute=False)
    real, raced = rw.head_serializer, []

    def racing(head, where):
        if not raced:  # the first check of the commit: another writer lands now
            raced.append(True)
            records.write_records([b"other"], url, mode="a")
        return real(head, where)

    monkeypatch.setattr(rw, "head_serializer", racing)
    with dask.config.set(scheduler="sync"):
        d.compute()
    assert raced
    assert _read(url) == [b"base", b"other", *sw.flat(parts)]
    assert sw.head(url)["num_records"] == 2 + len(sw.flat(parts))
    assert verify(url).ok


def test_a_w_minus_write_that_lost_the_race_leaves_nothing(tmp_path):
    url = str(tmp_path / "r")
    d = records.write_records(sw.bag(_parts()), url, compute=False)
    wid = _write_id(d)
    records.write_records([b"winner"], url)  # another writer created it meanwhile
    before = sw.head(url)
    with pytest.raises(FileExistsError, match="already exists"), dask.config.set(scheduler="sync"):
        d.compute()
    assert sw.head(url) == before and _read(url) == [b"winner"]
    assert not [f for f in sw.files(url) if wid in f]  # no shard, segment or marker of it
    assert verify(url).ok


def test_a_refused_append_removes_its_segments_and_shards(tmp_path):
    url = str(tmp_path / "r")
    records.write_records([b"a"], url)
    d = records.write_records(sw.bag(_parts()), url, mode="a", compute=False)
    records.write_records([{"x": 1}], url, mode="w")  # msgpack now
    with pytest.raises(ValueError, match="now uses the 'msgpack' serializer"):
        d.compute(scheduler="sync")
    assert not [f for f in sw.files(url) if _write_id(d) in f]
    assert _read(url) == [{"x": 1}]


def test_a_failing_partition_commits_nothing(tmp_path):
    url = str(tmp_path / "r")
    records.write_records([b"a"], url)
    before = sw.head(url)
    bag = sw.bag(_parts()).map(lambda x: x if x != b"r8.1" else object())
    with pytest.raises(TypeError, match="item 1 of partition 8"), dask.config.set(scheduler="sync"):
        records.write_records(bag, url, mode="a", serializer="raw")
    assert sw.head(url) == before and _read(url) == [b"a"]


def test_write_from_sources_of_many_sources(tmp_path):
    url = str(tmp_path / "r")
    sources = [(range, (k, k + k % 3)) for k in range(N)]
    with dask.config.set(scheduler="threads"):
        ds = records.write_from_sources(sources, url, serializer="msgpack")
    assert ds.num_shards == N
    assert _read(url) == [i for k in range(N) for i in range(k, k + k % 3)]
    assert len(sw.head(url)["shards"]["segments"]) == 7
    assert verify(url).ok


def test_the_task_functions_on_their_own(tmp_path):
    url = str(tmp_path / "r")
    plan, expected = rw.prepare_write(url, None, "w-", WriterOptions(""), "auto", None, 3)
    assert expected is None
    res = [
        rw.write_records_shard(items, k, plan) for k, items in enumerate([[b"a"], [{"b": 1}], []])
    ]
    chosen = [rw.chosen_serializers(res[:2]), rw.chosen_serializers(res[2:])]
    assert chosen == [["msgpack", "raw"], []]
    ser = rw.decide_serializer(chosen)
    assert ser == "msgpack" and rw.decide_serializer([[], []]) == "msgpack"
    refs = [rw.write_segment(res[:2], plan, ser), rw.write_segment(res[2:], plan, ser)]
    assert [r["records"] for seg in refs for r in seg] == [2, 0]
    rw.commit_segments(refs, plan, "w-", None, ser)
    assert _read(url) == [b"a", {"b": 1}]
    # committed once: a second commit of the same write returns that manifest
    assert rw.commit_segments(refs, plan, "w-", None, ser)["commit"] == plan.write_id


def _planned(url: str, mode: str = "w-"):
    """A long write done by hand with the task functions: its plan, segment
    references and records."""
    plan, _ = rw.prepare_write(url, None, mode, WriterOptions(""), "raw", None, N)
    parts = _parts()
    res = [rw.write_records_shard(p, k, plan) for k, p in enumerate(parts)]
    refs = [rw.write_segment(res[i : i + LIMIT], plan, "raw") for i in range(0, N, LIMIT)]
    return plan, refs, sw.flat(parts)


def test_a_commit_task_run_again_after_it_landed_commits_nothing_twice(tmp_path):
    url = str(tmp_path / "r")
    records.write_records([b"first"], url)
    plan, refs, want = _planned(url, "a")
    rw.commit_segments(refs, plan, "a", None, "raw")
    records.write_records([b"other"], url, mode="a")
    head = rw.commit_segments(refs, plan, "a", None, "raw")  # a lost worker's rerun
    assert head == sw.head(url) and head["num_records"] == 2 + len(want)
    assert _read(url) == [b"first", *want, b"other"]


def test_a_rerun_long_after_it_landed_commits_nothing_and_keeps_the_committed_files(tmp_path):
    url = str(tmp_path / "r")
    plan, refs, want = _planned(url)
    rw.commit_segments(refs, plan, "w-", None, "raw")
    files = sw.files(url)
    store = get_store(url)
    for k in range(65):  # more commits than a head's ``recent`` names (no merge)
        rw.write([b"%d" % k], store, "", mode="a", compact=False)
    # its marker is gone and a version of the dataset is its commit: nothing again
    again = rw.commit_segments(refs, plan, "w-", None, "raw")
    assert again["num_records"] == len(want) + 65
    assert files <= sw.files(url)  # the version that names the write keeps its files
    assert _read(url) == want + [b"%d" % k for k in range(65)]
    assert verify(url).ok
