"""arrayds.nodes.commit, the one commit path, on real local and memory:// stores:
checks, compare-and-swap conflicts and retries, idempotent retries, the parents it
creates, the roll forward and the removal of what a commit replaced."""

from __future__ import annotations

import os
import threading
import uuid

import pytest

from arrayds.abc.store import ABSENT
from arrayds.errors import CommitConflictError
from arrayds.nodes import commit
from arrayds.nodes import history as log
from arrayds.nodes.names import new_write_id
from arrayds.storage import get_store


@pytest.fixture(params=["local", "memory"])
def store(request, tmp_path):
    if request.param == "local":
        yield get_store(str(tmp_path / "ds"), None)
        return
    st = get_store(f"memory://commit-{uuid.uuid4().hex}", None)
    yield st
    st.delete_prefix("")


def _group(**extra):
    return {"format": "arrayds", "format_version": 1, "kind": "group", "attrs": {}, **extra}


def _node(*paths, kind="array"):
    """A manifest of ``kind`` listing the files ``paths`` as its shards."""
    return {
        "format": "arrayds",
        "format_version": 1,
        "kind": kind,
        "shards": [{"path": p} for p in paths],
    }


def _put(store, node, *rels):
    """Write the files ``rels`` (relative to ``node``), as a write's shard tasks do."""
    for rel in rels:
        store.put_if_match(f"{node}/{rel}" if node else rel, b"shard " + rel.encode(), ABSENT)


def _files(store, node):
    start = len(node) + 1 if node else 0
    return sorted(k[start:] for k, _, _ in store.list(node))


def _stale(base):
    raise CommitConflictError(f"stale: generation {base.generation}")


def test_commit_sets_generation_and_commit_id(store):
    m = commit.commit(store, "n", lambda base: _group(), write_id="w1")
    assert (m["generation"], m["commit"]) == (1, "w1")
    m = commit.commit(store, "n", lambda base: _group(generation=7), write_id="w2")
    assert m["generation"] == 7  # build may ask for more, never less than one more
    m = commit.commit(store, "n", lambda base: _group(generation=0), write_id="w3")
    v = commit.read(store, "n")
    assert (m["generation"], v.generation, v.commit, v.stamp) == (8, 8, "w3", (8, "w3"))
    assert commit.read(store, "").kind == "group"  # the root was created as a parent


def _keeps_every_replaced_head(store) -> None:
    heads = []
    for i in range(4):
        commit.commit(
            store, "n", lambda base, i=i: {**_group(), "attrs": {"i": i}}, write_id=f"w{i}"
        )
        heads.append(store.get("n/arrayds.json"))
    for g, head in enumerate(heads[:-1], start=1):
        assert store.get(f"n/{log.version_key(g)}") == head
    assert [v.generation for v in commit.versions(store, "n")] == [1, 2, 3, 4]
    assert commit.read(store, "n", version=2).raw["attrs"] == {"i": 1}


def test_a_commit_keeps_the_exact_bytes_of_the_head_it_replaces(store):
    """Each commit keeps the head it replaces as the version file of its generation
    (locally a hard link)."""
    _keeps_every_replaced_head(store)


def test_a_local_commit_copies_the_head_where_links_are_refused(tmp_path, monkeypatch):
    """A file system that refuses hard links (EPERM) gets a durable copy instead."""

    def refuse(*args, **kw):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "link", refuse)
    _keeps_every_replaced_head(get_store(str(tmp_path / "ds"), None))


def test_a_stale_check_conflicts_and_discards_the_written_files(store):
    first = commit.commit(store, "n", lambda base: _node("c/a-0"), write_id="w1")
    _put(store, "n", "c/a-0", "c/b-0", "c/b-1")
    with pytest.raises(CommitConflictError, match="stale: generation 1"):
        commit.commit(
            store,
            "n",
            lambda base: _node("c/a-0", "c/b-0", "c/b-1"),
            write_id="w2",
            check=_stale,
            written=["c/b-0", "c/b-1"],
        )
    assert commit.read(store, "n").raw == first
    assert _files(store, "n") == ["arrayds.json", "c/a-0"]


def test_written_files_the_current_manifest_references_are_never_discarded(store):
    commit.commit(store, "n", lambda base: _node("c/a-0"), write_id="w1")
    _put(store, "n", "c/a-0", "c/b-0")
    with pytest.raises(CommitConflictError):
        # a retried write names a file that is committed already: it stays
        commit.commit(
            store,
            "n",
            lambda base: _node("c/b-0"),
            write_id="w2",
            check=_stale,
            written=["c/a-0", "c/b-0"],
        )
    assert _files(store, "n") == ["arrayds.json", "c/a-0"]


def test_a_conflicting_put_is_retried_only_with_retries(store):
    """A commit lands between this write's read and its conditional put (made from
    inside ``build``, so the race is deterministic): without retries the write
    conflicts and its files go; with a retry it re-reads and commits on top."""
    commit.commit(store, "n", lambda base: _node("c/a"), write_id="w0")

    def racing(rel, write_id):
        raced = []

        def build(base):
            if not raced:  # the first attempt: another writer commits meanwhile
                raced.append(base.generation)
                commit.commit(store, "n", lambda b: _node(*_paths(b), "c/x"), write_id="x" + rel)
            return _node(*_paths(base), rel)

        return build

    _put(store, "n", "c/b")
    with pytest.raises(CommitConflictError, match="another writer committed to it"):
        commit.commit(store, "n", racing("c/b", "w1"), write_id="w1", written=["c/b"])
    assert not store.exists("n/c/b")
    assert sorted(commit.referenced_files(commit.read(store, "n").raw)) == ["c/a", "c/x"]

    _put(store, "n", "c/d")
    m = commit.commit(store, "n", racing("c/d", "w2"), write_id="w2", written=["c/d"], retries=1)
    assert [s["path"] for s in m["shards"]] == ["c/a", "c/x", "c/x", "c/d"]
    assert store.exists("n/c/d") and commit.read(store, "n").commit == "w2"


def test_retries_let_commuting_writes_of_racing_threads_all_commit(store):
    commit.commit(store, "n", lambda base: _node(), write_id="w0")
    n, errors = 8, []
    barrier = threading.Barrier(n)

    def append(i):
        barrier.wait()
        try:
            commit.commit(
                store,
                "n",
                lambda base: _node(*_paths(base), f"c/{i}"),
                write_id=f"t{i}",
                retries=100,
            )
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    v = commit.read(store, "n")
    assert sorted(_paths(v)) == sorted(f"c/{i}" for i in range(n))
    assert v.generation == n + 1


def _paths(base):
    return [s["path"] for s in (base.raw or {}).get("shards", [])]


def _shard(write_id: str) -> str:
    return f"c/{write_id}-0.array_record"


def test_a_refused_put_is_not_taken_for_landed_by_files_it_only_lists_anew(store):
    """A write whose head lists the shards of other writes anew (a merge rewrites
    the list) loses its race; gc then
    removes the version file of the generation it took. The current head names those
    other shards, but not this write's own: a conflict, not a landed commit (before
    the fix it returned as committed and its change was lost: 16 writers appending
    beside gc with ``min_age=0`` lost rows, benchmarks/bench_writers.py)."""
    first, other, mine = (
        "0661702927ec82393c24aaaa",
        "0661702927ec82393c24bbbb",
        "0661702927ec82393c24cccc",
    )
    _put(store, "n", _shard(first), _shard(mine))
    commit.commit(store, "n", lambda b: _node(_shard(first)), write_id=first, format_version=2)

    def build(base):
        if base.generation == 1:  # another writer commits twice meanwhile, then gc runs
            for k in range(2):
                wid = other[:-1] + str(k)
                _put(store, "n", _shard(wid))
                grown = _node(*_paths(commit.read(store, "n")), _shard(wid))
                commit.commit(store, "n", lambda b, m=grown: m, write_id=wid)
            store.delete([f"n/{log.version_key(2)}"])  # gc (keep_versions=1) expired it
        # a list that does not extend the one read (as a merge's): written anew, its
        # every entry counts as added
        return _node(_shard(mine), *_paths(base))

    with pytest.raises(CommitConflictError, match="another writer committed to it"):
        commit.commit(store, "n", build, write_id=mine, written=[_shard(mine)])
    now = commit.read(store, "n")
    assert now.generation == 3 and _shard(mine) not in _paths(now)


def test_a_commit_repeated_with_its_write_id_returns_the_committed_manifest(store):
    m = commit.commit(store, "n", lambda base: _node("c/a"), write_id="w1")

    def never(base):
        raise AssertionError("a committed write is not built again")

    again = commit.commit(store, "n", never, write_id="w1", check=never, written=["c/a"])
    assert again == m and commit.read(store, "n").generation == 1


def test_build_may_raise_and_nothing_is_written(store):
    _put(store, "a/b", "c/new")

    def build(base):
        raise ValueError("bad data")

    with pytest.raises(ValueError, match="bad data"):
        commit.commit(store, "a/b", build, write_id="w1", written=["c/new"])
    assert store.list("") == []  # no manifest, no parent group, no shard left


def test_ensure_parents_of_racing_threads_create_each_group_once(store):
    barrier = threading.Barrier(2)
    errors = []

    def create():
        barrier.wait()
        try:
            commit.ensure_parents(store, "a/b/c")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=create) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    stamps = [commit.read(store, p).stamp for p in ("", "a", "a/b")]
    assert [commit.read(store, p).kind for p in ("", "a", "a/b")] == ["group"] * 3
    assert [s[0] for s in stamps] == [1, 1, 1]  # each created once
    assert not commit.read(store, "a/b/c").exists
    commit.ensure_parents(store, "a/b/c")  # again: the groups are there and kept
    assert [commit.read(store, p).stamp for p in ("", "a", "a/b")] == stamps


def test_a_parent_that_is_not_a_group_is_refused(store):
    commit.commit(store, "a", lambda base: _node(), write_id="w1")
    for f in (commit.ensure_parents, commit.check_parents):
        with pytest.raises(ValueError, match=r"/a' is an array node, not a group"):
            f(store, "a/x/y")
    with pytest.raises(ValueError, match="not a group"):
        commit.commit(store, "a/x", lambda base: _group(), write_id="w2")
    assert _files(store, "a") == ["arrayds.json"]
    commit.check_parents(store, "free/x")  # read only: creates nothing
    assert not commit.read(store, "free").exists


def test_put_if_newer_writes_only_newer_generations(store):
    commit.commit(store, "m", lambda base: _group(generation=3, attrs={"v": 3}), write_id="w3")
    assert not commit.put_if_newer(store, "m", _group(generation=2, attrs={"v": 2}))
    assert not commit.put_if_newer(store, "m", _group(generation=3, attrs={"v": "other"}))
    assert commit.read(store, "m").raw["attrs"] == {"v": 3}
    assert commit.put_if_newer(store, "m", _group(generation=4, attrs={"v": 4}))
    assert commit.read(store, "m").raw["attrs"] == {"v": 4}
    assert commit.put_if_newer(store, "fresh", _group(generation=1))
    assert commit.read(store, "fresh").generation == 1


def test_remove_replaced_removes_only_what_the_new_manifest_does_not_reference(store):
    _put(store, "n", "c/a", "c/b", "c/c", "c/orphan")
    old, new = _node("c/a", "c/b"), _node("c/b", "c/c")
    commit.remove_replaced(store, "n", old, new)
    assert _files(store, "n") == ["c/b", "c/c", "c/orphan"]
    commit.remove_replaced(store, "n", old, new, folders=["c"])  # the folder's leftovers too
    assert _files(store, "n") == ["c/b", "c/c"]
    commit.remove_replaced(store, "n", new, _node("d/x"), folders=["c"])  # nothing kept in c
    assert _files(store, "n") == []


def _stored_list(store, node, n):
    """A node whose manifest stores ``n`` shard files as a log of segments; returns
    the old files and the node's manifest as ``lazy_raw`` gives it, with a store
    ``delete`` that also records how many keys each call removes."""
    paths = [f"c/{i:04d}" for i in range(n)]
    _put(store, node, *paths)
    commit.commit(store, node, lambda base: _node(*paths), write_id=new_write_id())
    old = commit.read(store, node).lazy_raw
    assert isinstance(old["shards"], log.ShardLog) and old["shards"].nsegments >= 2
    return paths, old


def _recording(store, monkeypatch):
    calls, delete = [], store.delete

    def recorded(keys):
        keys = list(keys)
        calls.append(len(keys))
        return delete(keys)

    monkeypatch.setattr(store, "delete", recorded)
    return calls


def test_remove_replaced_reads_a_stored_list_one_segment_at_a_time(store, monkeypatch):
    paths, old = _stored_list(store, "n", 3 * log.SEGMENT_LIMIT + 5)
    before = set(_files(store, "n"))
    wid = new_write_id()  # a fresh write: the new manifest names only its files
    mine = f"c/{wid}-0.array_record"
    _put(store, "n", mine)
    calls = _recording(store, monkeypatch)
    commit.remove_replaced(store, "n", old, None, written_by=wid)
    assert set(_files(store, "n")) == before - set(paths) | {mine}
    assert sum(calls) == len(paths) and max(calls) <= log.SEGMENT_LIMIT
    assert old["shards"]._all is None  # the list was never read whole


def test_remove_replaced_of_a_stored_list_keeps_what_the_new_manifest_names(store, monkeypatch):
    paths, old = _stored_list(store, "n", 2 * log.SEGMENT_LIMIT + 1)
    before = set(_files(store, "n"))
    calls = _recording(store, monkeypatch)
    commit.remove_replaced(store, "n", old, _node(*paths[200:]))
    assert set(_files(store, "n")) == before - set(paths[:200])
    assert sum(calls) == 200 and max(calls) <= log.SEGMENT_LIMIT


def test_remove_replaced_of_a_group_removes_the_children_the_new_node_does_not_use(store):
    commit.commit(store, "g", lambda base: _group(), write_id="w1")
    for child in ("x", "c"):
        commit.commit(store, f"g/{child}", lambda base: _node("c/0"), write_id="w-" + child)
        _put(store, f"g/{child}", "c/0")
    _put(store, "g", "c/new")
    old = commit.read(store, "g").raw
    # the new node is an array whose shard folder has the name of an old child node
    new = commit.commit(store, "g", lambda base: _node("c/new"), write_id="w2", replaces=True)
    assert commit.child_nodes(store, "g") == []
    assert _files(store, "g") == ["arrayds.json", "c/new"]
    commit.remove_replaced(store, "g", old, new)  # again: nothing more to remove
    assert _files(store, "g") == ["arrayds.json", "c/new"]


def test_child_nodes_lists_only_folders_with_a_manifest(store):
    commit.commit(store, "g/b", lambda base: _group(), write_id="w1")
    commit.commit(store, "g/a", lambda base: _group(), write_id="w2")
    _put(store, "g", "c/shard")
    assert commit.child_nodes(store, "g") == ["a", "b"]
    assert commit.child_nodes(store, "nothing") == []
