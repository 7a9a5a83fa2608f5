"""Manifest format 2 (arrayds/nodes/history.py) on real stores: the shard log encoding
reads back every list it stored, at every step and at every retained version; its
segment count stays within the binary-counter bound; a change that is not an append
writes a fresh list; damaged or forged segments and version files are
:class:`arrayds.CorruptionError` naming them, before any large allocation; concurrent
appenders (threads, processes, S3) all land; xarray snapshot members with long shard
lists are encoded and resolved (docs/spec.md, "Format version 2")."""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys
import textwrap
import threading
import tracemalloc
import uuid

import numpy as np
import pytest
from conformance.servers import moto_bucket

import arrayds
from arrayds.errors import CorruptionError
from arrayds.nodes import commit
from arrayds.nodes import history as log
from arrayds.nodes.names import dump_json
from arrayds.storage import get_store

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(params=["local", "memory"])
def store(request, tmp_path):
    if request.param == "local":
        yield get_store(str(tmp_path / "ds"), None)
        return
    st = get_store(f"memory://log-{uuid.uuid4().hex}", None)
    yield st
    st.delete_prefix("")


def _array(shards, **extra):
    """A manifest of kind array (commit never parses it) with these shard entries."""
    return {"format": "arrayds", "kind": "array", "attrs": {}, "shards": shards, **extra}


def _entry(i: int) -> dict:
    return {"path": f"c/{i:06d}-0.array_record", "records": 1, "start": [i], "stop": [i + 1]}


def _head(store, node) -> dict:
    return commit.read(store, node).head


def _segments(head) -> list[dict]:
    shards = head["shards"]
    return shards["segments"] if isinstance(shards, dict) else []


def _check_bound(head: dict, n: int) -> None:
    """The segments after the last index: each at least twice the next unless the two
    would not fit in one (SEGMENT_LIMIT), so at most n / (SEGMENT_LIMIT / 2) +
    log2(SEGMENT_LIMIT / TAIL_LIMIT) + 1 of them, and at most INDEX_LIMIT; the tail
    holds at most TAIL_LIMIT entries; and the head stays small."""
    segs = _segments(head)
    shards = head["shards"]
    tail = shards["tail"] if isinstance(shards, dict) else shards
    assert len(tail) <= log.TAIL_LIMIT
    if segs:
        last = max((i for i, s in enumerate(segs) if "refs" in s), default=-1)
        counts = [s["count"] for s in segs[last + 1 :]]
        limit, half = log.SEGMENT_LIMIT, log.SEGMENT_LIMIT // 2
        assert len(counts) <= min(
            log.INDEX_LIMIT, n / half + math.log2(limit / log.TAIL_LIMIT) + 1
        ), (n, counts)
        assert all(a >= 2 * b or a + b > limit for a, b in zip(counts, counts[1:], strict=False))
        assert sum(s["count"] for s in segs) + len(tail) == n
    assert len(dump_json(head)) < 200 * (log.TAIL_LIMIT + 2 * len(segs) + 10)


def _append_history(store, node, total: int, seed: int) -> dict[int, list]:
    """Append ``total`` entries in random batches (1..12), alternating whole
    manifests and :class:`commit.Extend` changes; after every commit the node reads
    back the list so far and the bound holds. Returns {generation: list}."""
    rng = np.random.default_rng(seed)
    want: list = []
    at: dict[int, list] = {}
    commit.commit(store, node, lambda b: _array([]), write_id=uuid.uuid4().hex)
    at[1] = []
    while len(want) < total:
        k = int(min(rng.integers(1, 13), total - len(want)))
        new = [_entry(len(want) + j) for j in range(k)]
        if rng.random() < 0.5:
            change = commit.Extend({"shape": [len(want) + k]}, new)
            m = commit.commit(store, node, lambda b, c=change: c, write_id=uuid.uuid4().hex)
        else:
            old = list(want)
            m = commit.commit(
                store,
                node,
                lambda b, o=old, n=new: _array([*o, *n], shape=[len(o) + len(n)]),
                write_id=uuid.uuid4().hex,
            )
        want.extend(new)
        at[m["generation"]] = list(want)
        cur = commit.read(store, node)
        assert cur.format_version == 2 and cur.raw["shards"] == want
        _check_bound(cur.head, len(want))
    return at


@pytest.mark.parametrize("total", [1, 33, 200])
def test_appends_read_back_at_every_step_and_every_version(store, total):
    at = _append_history(store, "n", total, seed=total)
    vs = commit.versions(store, "n")
    assert [v.generation for v in vs] == sorted(at)  # every commit is kept
    assert vs[-1].current and not any(v.current for v in vs[:-1])
    assert all(v.time is not None for v in vs)
    for g, want in at.items():
        assert commit.read(store, "n", version=g).raw["shards"] == want, g
    if total == 200:
        assert _segments(_head(store, "n"))  # the log was exercised
        # as_of the time of version g gives version g
        g = sorted(at)[len(at) // 2]
        t = next(v.time for v in vs if v.generation == g)
        assert commit.read(store, "n", as_of=t).generation == g


def test_segments_merge_as_a_binary_counter(store, monkeypatch):
    """33 entries at a time: a segment per commit; the second merges into the first
    (33 < 2 * 33), the third stays (66 >= 2 * 33), the fourth merges all (132; with
    segments of up to 256 entries)."""
    monkeypatch.setattr(log, "SEGMENT_LIMIT", 256)
    n = 0
    commit.commit(store, "n", lambda b: _array([]), write_id="w0")
    counts = []
    for i in range(4):
        new = [_entry(n + j) for j in range(33)]
        commit.commit(store, "n", lambda b, s=new: commit.Extend({}, s), write_id=f"w{i + 1}")
        n += 33
        counts.append([s["count"] for s in _segments(_head(store, "n"))])
    assert counts == [[33], [66], [66, 33], [132]]
    assert commit.read(store, "n").raw["shards"] == [_entry(i) for i in range(132)]
    # every segment file that any retained version names still exists
    for v in commit.versions(store, "n"):
        for p in log.log_files(store, "n", commit.read(store, "n", version=v.generation).head):
            assert store.exists(f"n/{p}"), p


def _named_segments(store, node) -> set[str]:
    out = set()
    for v in commit.versions(store, node):
        out |= log.log_files(store, node, commit.read(store, node, version=v.generation).head)
    return out


def test_a_merging_commit_writes_only_segments_its_head_names(store):
    commit.commit(store, "n", lambda b: _array([]), write_id="w0")
    for i in range(4):
        new = [_entry(33 * i + j) for j in range(33)]
        commit.commit(store, "n", lambda b, s=new: commit.Extend({}, s), write_id=f"w{i + 1}")
    on_disk = {k[2:] for k, _, _ in store.list(f"n/{log.LOG_DIR}")}
    assert on_disk == _named_segments(store, "n")


def test_a_change_that_is_not_an_append_writes_a_fresh_list(store):
    _append_history(store, "n", 80, seed=1)
    before = _head(store, "n")
    old = commit.read(store, "n").raw["shards"]
    assert _segments(before)
    kept = old[:10] + old[11:]  # an entry removed (a hidden entry dropped)
    commit.commit(store, "n", lambda b: _array(kept), write_id="wfresh")
    after = _head(store, "n")
    assert commit.read(store, "n").raw["shards"] == kept
    # all written anew
    assert not log.log_files(store, "n", after) & log.log_files(store, "n", before)
    _check_bound(after, len(kept))
    assert commit.read(store, "n", version=after["generation"] - 1).raw["shards"] == old
    # a list that only changes an entry's field is no append either
    changed = [dict(kept[0], records=2), *kept[1:]]
    commit.commit(store, "n", lambda b: _array(changed), write_id="wchanged")
    assert commit.read(store, "n").raw["shards"] == changed
    # a short list goes back inline, as in format 1
    commit.commit(store, "n", lambda b: _array(changed[:3]), write_id="wshort")
    assert _head(store, "n")["shards"] == changed[:3]


# ------------------------------------------------------------------ damage


def _forge(store, node: str, **shards_log) -> None:
    """Replace the head of ``node`` by one whose shard log is ``shards_log``."""
    head = _head(store, node)
    commit.replace(store, node, dict(head, generation=head["generation"] + 1, shards=shards_log))


def _segment_node(store) -> tuple[dict, bytes]:
    """A node whose head names one segment: (its reference, the segment's bytes)."""
    commit.commit(store, "n", lambda b: _array([_entry(i) for i in range(40)]), write_id="w1")
    ref = _segments(_head(store, "n"))[0]
    return ref, store.get(f"n/{ref['path']}")


def _fresh_copy(store, data: bytes) -> str:
    """A segment path no reader has cached yet, holding ``data``."""
    path = f"{log.LOG_DIR}/{uuid.uuid4().hex}.json"
    store.put(f"n/{path}", data)
    return path


def _raises_naming(store, text: str, match: str) -> None:
    with pytest.raises(CorruptionError, match=match) as e:
        _ = commit.read(store, "n").raw
    assert text in str(e.value)


def test_a_missing_segment_is_corruption_naming_it(store):
    ref, _ = _segment_node(store)
    path = f"{log.LOG_DIR}/{uuid.uuid4().hex}.json"
    _forge(store, "n", segments=[dict(ref, path=path)], tail=[])
    _raises_naming(store, path, "is missing")


@pytest.mark.parametrize(
    "doc, match",
    [
        ({"format": "arrayds-segment", "count": 39, "entries": None}, "not an arrayds segment"),
        ({"format": "zarr", "count": 40, "entries": []}, "not an arrayds segment"),
        ({"count": 40, "entries": []}, "not an arrayds segment"),
        ("not json", "JSON|json"),
        ([1, 2], "object|JSON"),
    ],
)
def test_a_damaged_segment_file_is_corruption_naming_it(store, doc, match):
    ref, _ = _segment_node(store)
    data = doc.encode() if isinstance(doc, str) else dump_json(doc)
    path = _fresh_copy(store, data)
    _forge(store, "n", segments=[dict(ref, path=path)], tail=[])
    _raises_naming(store, path, match)


def test_a_segment_count_mismatch_is_corruption_naming_it(store):
    ref, data = _segment_node(store)
    path = _fresh_copy(store, data)
    _forge(store, "n", segments=[dict(ref, path=path, count=41)], tail=[])
    _raises_naming(store, path, "holds 40 entries; the manifest says 41")


def test_a_segment_whose_own_count_disagrees_is_corruption_naming_it(store):
    ref, data = _segment_node(store)
    doc = json.loads(data)
    doc["count"] = 41  # the file's own count disagrees with its entries
    path = _fresh_copy(store, dump_json(doc))
    _forge(store, "n", segments=[dict(ref, path=path)], tail=[])
    _raises_naming(store, path, "holds 40 entries")


@pytest.mark.parametrize(
    "path",
    [
        "c/segment.json",
        "_arrayds/versions/000000000001.json",
        "_arrayds/log/../../c/x.json",
        "_arrayds/log/..json",
        "_arrayds/log/sub/x.json",
        "/etc/passwd",
        "_arrayds/log",
        "../_arrayds/log/x.json",
    ],
)
def test_a_segment_path_outside_the_log_folder_is_refused(store, path):
    ref, data = _segment_node(store)
    _forge(store, "n", segments=[dict(ref, path=path)], tail=[])
    with pytest.raises(CorruptionError, match="manifest segment reference .* is invalid") as e:
        _ = commit.read(store, "n").raw
    assert path in str(e.value)


@pytest.mark.parametrize("ref", [{"path": "_arrayds/log/x.json"}, "x", {"count": 3}, None])
def test_a_malformed_segment_reference_is_refused(store, ref):
    _segment_node(store)
    _forge(store, "n", segments=[ref], tail=[])
    with pytest.raises(CorruptionError, match="invalid"):
        _ = commit.read(store, "n").raw


@pytest.mark.parametrize("count", [-1, True, 1.5, "3"])
def test_a_bad_segment_count_is_refused(store, count):
    ref, _ = _segment_node(store)
    _forge(store, "n", segments=[dict(ref, count=count)], tail=[])
    with pytest.raises(CorruptionError, match="invalid"):
        _ = commit.read(store, "n").raw


@pytest.mark.parametrize(
    "value", [{"segments": [], "tail": [], "x": 1}, {"segments": "a", "tail": []}, {"tail": []}]
)
def test_a_shard_log_of_the_wrong_shape_is_refused(store, value):
    _segment_node(store)
    head = _head(store, "n")
    commit.replace(store, "n", dict(head, generation=head["generation"] + 1, shards=value))
    with pytest.raises(CorruptionError, match="not a shard list"):
        _ = commit.read(store, "n").raw


def test_an_oversized_segment_is_refused_before_it_is_read(tmp_path):
    """A sparse file just over MAX_SEGMENT_BYTES: refused from its size alone (no
    allocation of its size; its bytes are never read)."""
    store = get_store(str(tmp_path / "ds"), None)
    ref, _ = _segment_node(store)
    path = f"{log.LOG_DIR}/{uuid.uuid4().hex}.json"
    with open(tmp_path / "ds" / "n" / path, "wb") as f:
        f.truncate(log.MAX_SEGMENT_BYTES + 1)
    _forge(store, "n", segments=[dict(ref, path=path)], tail=[])
    tracemalloc.start()
    try:
        _raises_naming(store, path, f"holds {log.MAX_SEGMENT_BYTES + 1} bytes, more than")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20


def test_a_damaged_segment_of_a_member_names_the_member(store):
    members = {"x": _array([_entry(i) for i in range(40)])}
    group = {"format": "arrayds", "kind": "group", "attrs": {}, "snapshot": {"members": members}}
    commit.commit(store, "n", lambda b: group, write_id="w1")
    head = _head(store, "n")
    ref = head["snapshot"]["members"]["x"]["shards"]["segments"][0]
    path = f"{log.LOG_DIR}/{uuid.uuid4().hex}.json"
    forged = json.loads(dump_json(head))
    forged["generation"] += 1
    forged["snapshot"]["members"]["x"]["shards"]["segments"] = [dict(ref, path=path)]
    commit.replace(store, "n", forged)
    with pytest.raises(CorruptionError, match=r"\(x\).*is missing") as e:
        _ = commit.read(store, "n").raw
    assert path in str(e.value)


def test_a_version_file_holding_another_generation_is_corruption(store):
    for i in range(5):
        commit.commit(store, "n", lambda b, i=i: _array([_entry(i)]), write_id=f"w{i}")
    g = commit.read(store, "n").generation
    two = store.get(f"n/{log.version_key(2)}")
    store.put(f"n/{log.version_key(3)}", two)  # version 3's file holds generation 2
    with pytest.raises(CorruptionError, match="history file of version 3 holds generation 2"):
        commit.read(store, "n", version=3)
    with pytest.raises(CorruptionError, match="version 3"):
        commit.versions(store, "n")
    store.put(f"n/{log.version_key(3)}", b"{not json")
    with pytest.raises(CorruptionError, match=r"\(version 3\)"):
        commit.read(store, "n", version=3)
    assert commit.read(store, "n", version=2).generation == 2  # others still read
    assert commit.read(store, "n", version=g).generation == g


def test_asking_for_a_version_that_is_not_kept(store):
    for i in range(5):
        commit.commit(store, "n", lambda b, i=i: _array([_entry(i)]), write_id=f"w{i}")
    g = commit.read(store, "n").generation
    with pytest.raises(ValueError, match=f"no version {g + 1}; the versions kept are 1, 2"):
        commit.read(store, "n", version=g + 1)
    with pytest.raises(ValueError, match="no version 0"):
        commit.read(store, "n", version=0)
    with pytest.raises(TypeError, match="version must be an int"):
        commit.read(store, "n", version="2")
    with pytest.raises(ValueError, match="not both"):
        commit.read(store, "n", version=1, as_of=commit.read(store, "n").time)


# ------------------------------------------------------------------ concurrency


def _appender_ids(raw, who: str) -> list[str]:
    return [s["path"] for s in raw["shards"] if s["path"].startswith(f"c/{who}-")]


def test_concurrent_appending_threads_all_land(tmp_path):
    store = get_store(str(tmp_path / "ds"), None)
    commit.commit(store, "n", lambda b: _array([]), write_id="w0")
    threads, per = 6, 12

    def run(t: int) -> None:
        for i in range(per):
            new = [{"path": f"c/t{t}-{i:03d}-{k}"} for k in range(1 + (i % 4))]
            commit.commit(
                store,
                "n",
                lambda b, s=new: commit.Extend({}, s),
                write_id=uuid.uuid4().hex,
                retries=200,
            )

    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    raw = commit.read(store, "n").raw
    want = {
        f"c/t{t}-{i:03d}-{k}" for t in range(threads) for i in range(per) for k in range(1 + i % 4)
    }
    paths = [s["path"] for s in raw["shards"]]
    assert len(paths) == len(want) and set(paths) == want
    for t in range(threads):  # each appender's entries in its own order
        mine = _appender_ids(raw, f"t{t}")
        assert mine == sorted(mine)
    _check_bound(_head(store, "n"), len(want))
    _prefix_history(store, "n", paths)


def _prefix_history(store, node, final: list[str]) -> None:
    """Every retained version of an append-only node lists a prefix of ``final``."""
    vs = commit.versions(store, node)
    assert len(vs) == vs[-1].generation  # none lost
    for v in vs:
        got = [s["path"] for s in commit.read(store, node, version=v.generation).raw["shards"]]
        assert got == final[: len(got)]


APPENDER = textwrap.dedent(
    """
    import sys, uuid
    from arrayds.nodes import commit
    from arrayds.storage import get_store
    url, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = get_store(url, None)
    for i in range(n):
        new = [{"path": f"c/{who}-{i:03d}-{k}"} for k in range(1 + (i % 3))]
        commit.commit(store, "n", lambda b, s=new: commit.Extend({}, s),
                      write_id=uuid.uuid4().hex, retries=500)
    """
)


def test_concurrent_appending_processes_all_land(tmp_path):
    url = str(tmp_path / "ds")
    store = get_store(url, None)
    commit.commit(store, "n", lambda b: _array([]), write_id="w0")
    procs, per = 4, 15
    ps = [
        subprocess.Popen([sys.executable, "-c", APPENDER, url, f"p{p}", str(per)], cwd=ROOT)
        for p in range(procs)
    ]
    assert [p.wait(timeout=120) for p in ps] == [0] * procs
    raw = commit.read(store, "n").raw
    want = {
        f"c/p{p}-{i:03d}-{k}" for p in range(procs) for i in range(per) for k in range(1 + i % 3)
    }
    paths = [s["path"] for s in raw["shards"]]
    assert len(paths) == len(want) and set(paths) == want
    for p in range(procs):
        mine = _appender_ids(raw, f"p{p}")
        assert mine == sorted(mine)
    _check_bound(_head(store, "n"), len(want))
    _prefix_history(store, "n", paths)


# ------------------------------------------------------------------ S3


@pytest.fixture(scope="module")
def s3_opts():
    with moto_bucket("arrayds-log") as server:
        yield server.storage_options()


def test_appends_and_history_on_s3(s3_opts):
    """The same encoding on S3 (conditional PUTs): appends read back at every step
    and version, racing appenders all land."""
    store = get_store(f"s3://arrayds-log/{uuid.uuid4().hex}", s3_opts)
    at = _append_history(store, "n", 90, seed=9)
    assert _segments(_head(store, "n"))
    for g, want in at.items():
        assert commit.read(store, "n", version=g).raw["shards"] == want
    errors = []

    def run(t: int) -> None:
        try:
            for i in range(4):
                new = [{"path": f"c/t{t}-{i}"}]
                commit.commit(
                    store,
                    "n",
                    lambda b, s=new: commit.Extend({}, s),
                    write_id=uuid.uuid4().hex,
                    retries=100,
                )
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=run, args=(t,)) for t in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    paths = [s["path"] for s in commit.read(store, "n").raw["shards"]]
    assert paths[:90] == [e["path"] for e in at[max(at)]]
    assert set(paths[90:]) == {f"c/t{t}-{i}" for t in range(3) for i in range(4)}


# ------------------------------------------------------------------ snapshots


def test_group_snapshot_members_with_long_shard_lists(store):
    """A group's snapshot lists member manifests whose shard lists grow past the
    tail: each member's list is a log of its own, resolved on read."""
    commit.commit(
        store, "g", lambda b: {"format": "arrayds", "kind": "group", "attrs": {}}, write_id="w0"
    )
    want = {"a": [], "b": []}
    for i in range(30):
        want["a"] += [_entry(i * 3 + k) for k in range(3)]
        if i % 2:
            want["b"] += [_entry(1000 + i)]
        members = {name: _array(list(sh)) for name, sh in want.items()}
        doc = {
            "format": "arrayds",
            "kind": "group",
            "attrs": {"i": i},
            "snapshot": {"commit": f"w{i + 1}", "members": members},
        }
        commit.commit(store, "g", lambda b, d=doc: d, write_id=f"w{i + 1}")
        raw = commit.read(store, "g").raw
        for name in want:
            assert raw["snapshot"]["members"][name]["shards"] == want[name]
    head = _head(store, "g")
    a = head["snapshot"]["members"]["a"]["shards"]
    assert isinstance(a, dict) and a["segments"]  # 90 entries: segments
    assert isinstance(head["snapshot"]["members"]["b"]["shards"], list)  # 15: inline
    assert log.log_files(store, "g", head) == {s["path"] for s in a["segments"]}
    old = commit.read(store, "g", version=5).raw  # generation 5: the fourth snapshot
    assert old["snapshot"]["members"]["a"]["shards"] == want["a"][:12]


def test_xarray_dataset_appends_with_long_shard_lists(tmp_path):
    """A real xarray dataset appended to 40 times: the group snapshot's member shard
    lists become logs, and the dataset reads back whole."""
    xr = pytest.importorskip("xarray")
    url = str(tmp_path / "ds.ads")
    rng = np.random.default_rng(0)
    parts = []
    for i in range(40):
        t = rng.standard_normal((2, 3)).astype("f4")
        ds = xr.Dataset({"t": (("time", "x"), t)}, coords={"time": np.arange(2 * i, 2 * i + 2)})
        extra = {} if i == 0 else {"append_dim": "time"}
        arrayds.to_arrayrecord(ds, url, mode="w" if i == 0 else "a", compact=False, **extra)
        parts.append(t)
    head = commit.read(get_store(url, None), "").head
    logs = [m["shards"] for m in head["snapshot"]["members"].values()]
    assert all(isinstance(s, dict) and s["segments"] for s in logs)
    got = xr.open_dataset(url, engine="arrayds")
    np.testing.assert_array_equal(got["t"].values, np.concatenate(parts))
    np.testing.assert_array_equal(got["time"].values, np.arange(80))
    assert arrayds.open_array(url, "t").shape == (80, 3)


# ------------------------------------------------------------------ found while testing


def test_a_segment_path_with_a_nul_byte_is_corruption(tmp_path):
    store = get_store(str(tmp_path / "ds"), None)
    ref, _ = _segment_node(store)
    _forge(store, "n", segments=[dict(ref, path="_arrayds/log/\x00.json")], tail=[])
    with pytest.raises(CorruptionError):
        _ = commit.read(store, "n").raw


def test_replace_rewrites_a_head_whose_segment_is_missing(store):
    ref, _ = _segment_node(store)
    good = commit.read(store, "n").raw
    missing = f"{log.LOG_DIR}/{uuid.uuid4().hex}.json"
    _forge(store, "n", segments=[dict(ref, path=missing)], tail=[])
    commit.replace(store, "n", dict(good, generation=good["generation"] + 5))
    assert commit.read(store, "n").raw["shards"] == good["shards"]


def test_as_of_finds_the_version_of_a_time(store):
    from datetime import timedelta

    for i in range(4):
        commit.commit(store, "n", lambda b, i=i: _array([_entry(i)]), write_id=f"w{i}")
    vs = commit.versions(store, "n")
    for v in vs:
        assert commit.read(store, "n", as_of=v.time).generation == v.generation
        later = v.time + timedelta(microseconds=1)
        assert commit.read(store, "n", as_of=later).generation == v.generation
    naive = vs[1].time.replace(tzinfo=None)  # a naive time is UTC
    assert commit.read(store, "n", as_of=naive).generation == vs[1].generation
    with pytest.raises(ValueError, match="no version was committed at or before"):
        commit.read(store, "n", as_of=vs[0].time - timedelta(seconds=1))
    with pytest.raises(TypeError, match="as_of must be a datetime"):
        commit.read(store, "n", as_of="2026-01-01")
