"""Tiered merging of appended shards (``compact="tiered"``, the default of
appends): the rule, and real appends on local, memory:// and S3 stores.

* the rule (:func:`tail_to_merge`): equal appends merge as a base-8 counter; with
  appends of random or growing sizes every byte is copied at most
  ``log_2(total / smallest)`` times and the newest end stays short;
* arrays (``Array.append``, ``to_arrayrecord(mode="a")``), records, ragged arrays
  and xarray datasets appended to in a loop hold a few dozen files and read exactly
  what was written; region writes between appends keep their precedence; every retained
  version reads back as it was; ``verify`` passes; gc keeps the merged-away shards
  while a version names them;
* a merge whose node another writer committed to meanwhile is dropped, nothing of it
  left; an append that fills a tier merges in its own commit (one version), and a
  stale handle's such append conflicts and leaves no file; ``compact=False`` merges
  nothing; bad ``compact`` values are errors.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import arrayds
from arrayds.errors import CommitConflictError
from arrayds.kinds.array.manifest import ShardEntry
from arrayds.nodes import commit
from arrayds.nodes.merge import MAX_TAIL, MERGE_FACTOR, _merged_away, tail_to_merge, tiered
from arrayds.storage import get_store
from arrayds.tools.gc import collect_garbage
from arrayds.tools.verify import verify

LIMIT = 32 << 20


def _simulate(sizes: list[int]) -> tuple[list[int], list[int], int]:
    """Appends of ``sizes`` under the rule -> (final shard sizes, copies per append,
    the most shards the node held)."""
    shards: list[tuple[int, list[int]]] = []  # (payload, the appends it holds)
    copies = [0] * len(sizes)
    most = 0
    for i, nbytes in enumerate(sizes):
        shards.append((nbytes, [i]))
        n = tail_to_merge([b for b, _ in shards], LIMIT)
        if n:
            tail = shards[-n:]
            held = [k for _, ks in tail for k in ks]
            for k in held:
                copies[k] += 1
            shards[-n:] = [(sum(b for b, _ in tail), held)]
        most = max(most, len(shards))
    return [b for b, _ in shards], copies, most


def test_equal_appends_merge_as_a_base_8_counter():
    final, copies, most = _simulate([1024] * 10_000)
    # 10,000 in base 8 is 23420: that many shards of 8**4, 8**3, ... appends
    assert final == [8**4 * 1024] * 2 + [8**3 * 1024] * 3 + [8**2 * 1024] * 4 + [8 * 1024] * 2
    assert max(copies) <= math.ceil(math.log(10_000, MERGE_FACTOR))
    assert most < 5 * MERGE_FACTOR


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_appends_copy_each_byte_a_logarithmic_number_of_times(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.choice([10, 100, 1000, 50_000], size=4000, p=[0.4, 0.3, 0.2, 0.1]).tolist()
    if seed == 2:  # growing appends: each about the sum of all before
        sizes = [int(1.1**k) + 1 for k in range(150)]
    final, copies, most = _simulate(sizes)
    assert max(copies) <= math.log2(sum(sizes) / min(sizes))
    assert len(final) <= MAX_TAIL and most <= MAX_TAIL + MERGE_FACTOR
    assert sum(final) == sum(sizes)


def test_large_shards_are_never_merged():
    assert tail_to_merge([LIMIT] * 20, LIMIT) == 0
    assert tail_to_merge([1] * 7 + [LIMIT] + [1] * 7, LIMIT) == 0
    assert tail_to_merge([1] * 7 + [LIMIT] + [1] * 8, LIMIT) == 8


def _files(where, node: str = "") -> set[str]:
    store = get_store(where.url, where.so)
    return {k for k, _, _ in store.list(node)}


def _appends(where, n: int) -> int:
    """How many appends a loop below makes: ``n``, and on S3 (moto answers in about
    8 ms a request, an append makes about ten) at least ``MERGE_FACTOR**2 + MERGE_FACTOR``
    (72): merges of both tiers, what the S3 variant checks against the store; the
    rule itself is store-independent and the local and memory:// variants run ``n``."""
    return min(n, MERGE_FACTOR**2 + MERGE_FACTOR) if where.url.startswith("s3://") else n


def test_array_appends_merge_and_read_back(where):
    a = arrayds.open_array(
        where.url, mode="w", shape=(0, 3), dtype="i4", chunks=(1, 3), storage_options=where.so
    )
    half = _appends(where, 150)  # on S3 72: the region write follows a merge of each tier
    rows = np.arange(2 * half * 3, dtype="i4").reshape(2 * half, 3)
    for i in range(half):
        a.append(rows[i : i + 1])
    a[5:7] = -1  # a region write between appends keeps its precedence over merges
    region = a.manifest.generation
    want = rows.copy()
    want[5:7] = -1
    for i in range(half, 2 * half):
        a.append(rows[i : i + 1])
    np.testing.assert_array_equal(a[...], want)
    fresh = arrayds.open_array(where.url, storage_options=where.so)
    np.testing.assert_array_equal(fresh[...], want)
    assert fresh.nshards < 3 * MERGE_FACTOR  # a base-8 counter and the region write
    assert verify(where.url, storage_options=where.so, progress=False).ok
    # every version reads back as it was, including those the merges replaced
    store = get_store(where.url, where.so)
    versions = commit.versions(store, "")
    # one commit each: the creation, the appends (merges folded in) and the region write
    assert len(versions) == 1 + 2 * half + 1
    for v in [*versions[:: max(1, len(versions) // 12)], versions[-1]]:
        old = arrayds.open_array(where.url, version=v.generation, storage_options=where.so)
        n = old.shape[0]
        expect = (want if v.generation >= region else rows)[:n]
        np.testing.assert_array_equal(old[...], expect)


def test_merged_away_shards_stay_while_a_version_names_them(tmp_path):
    url = str(tmp_path / "a")
    a = arrayds.open_array(url, mode="w", shape=(0,), dtype="f8", chunks=1)
    for i in range(MERGE_FACTOR):
        a.append(np.array([float(i)]))
    assert a.nshards == 1  # the eighth append merged all eight, in its own commit
    assert a.manifest.generation == 1 + MERGE_FACTOR
    on_disk = set(os.listdir(os.path.join(url, "c")))
    # seven appends' files (their versions name them) and the merged one; the eighth
    # append's own file is named by no version and went once the commit landed
    assert len(on_disk) == MERGE_FACTOR
    collect_garbage(url, min_age=0)  # the versions of before the merge are retained
    assert set(os.listdir(os.path.join(url, "c"))) == on_disk
    old = arrayds.open_array(url, version=MERGE_FACTOR)  # the seventh append's commit
    assert old.nshards == MERGE_FACTOR - 1
    np.testing.assert_array_equal(old[:], np.arange(MERGE_FACTOR - 1, dtype="f8"))
    collect_garbage(url, min_age=0, keep_versions=1)
    assert len(os.listdir(os.path.join(url, "c"))) == 1
    np.testing.assert_array_equal(arrayds.open_array(url)[:], np.arange(MERGE_FACTOR, dtype="f8"))


def test_records_appends_merge_in_order(where):
    n = _appends(where, 200)
    batches = [[b"%d-%d" % (i, k) * (1 + i % 5) for k in range(3)] for i in range(n)]
    for i, b in enumerate(batches):
        arrayds.to_arrayrecord(b, where.url, mode="a" if i else "w", storage_options=where.so)
    ds = arrayds.open(where.url, storage_options=where.so)
    assert ds.data_source()[:] == [r for b in batches for r in b]
    assert ds.num_shards < 3 * MERGE_FACTOR
    assert verify(where.url, storage_options=where.so, progress=False).ok


def test_ragged_appends_merge_in_order(where):
    rng = np.random.default_rng(5)
    n = _appends(where, 120)
    clips = [rng.standard_normal((2, 40 + i % 7)).astype("f4") for i in range(3 * n)]
    for i in range(n):
        out = arrayds.to_arrayrecord(
            clips[3 * i : 3 * i + 3],
            where.url,
            mode="a" if i else "w",
            piece_len=16,
            storage_options=where.so,
        )
    ra = arrayds.open_ragged(where.url, storage_options=where.so)
    assert out.nshards == ra.nshards < 3 * MERGE_FACTOR  # the handle the write returned
    assert len(ra) == len(clips)
    shards = ra.manifest.shards
    assert [s.start for s in shards[1:]] == [s.stop for s in shards[:-1]]
    for k in (0, 1, 200, len(clips) - 1):
        np.testing.assert_array_equal(ra[k], clips[k])
        np.testing.assert_array_equal(ra[k, 1, 5:30], clips[k][1, 5:30])  # across pieces
    assert verify(where.url, storage_options=where.so, progress=False).ok
    # the versions before a merge still read their items from the merged-away shards
    store = get_store(where.url, where.so)
    versions = commit.versions(store, "")
    assert len(versions) == n  # one commit per write, its merge folded in
    for v in versions[1 :: max(1, len(versions) // 8)]:
        old = arrayds.open_ragged(where.url, version=v.generation, storage_options=where.so)
        for k in (0, len(old) - 1):
            np.testing.assert_array_equal(old[k], clips[k])


def test_ragged_shards_of_unrecorded_size_are_left_to_compaction(tmp_path):
    from dataclasses import replace

    from arrayds.nodes.merge import UNWEIGHED, entry_sizes

    url = str(tmp_path / "clips")
    for i in range(MERGE_FACTOR):
        arrayds.to_arrayrecord([np.ones(3 + i, "f4")], url, mode="a" if i else "w", compact=False)
    m = arrayds.open_ragged(url).manifest
    assert tail_to_merge(entry_sizes(m), LIMIT) == MERGE_FACTOR
    unknown = replace(m, shards=[replace(s, bytes=None) for s in m.shards])
    assert entry_sizes(unknown) == [UNWEIGHED] * MERGE_FACTOR
    assert tail_to_merge(entry_sizes(unknown), LIMIT) == 0


def test_dask_array_appends_merge(tmp_path):
    da = pytest.importorskip("dask.array")
    url = str(tmp_path / "d")
    rows = np.arange(40 * 2, dtype="f4").reshape(40, 2)
    for i in range(40):
        x = da.from_array(rows[i : i + 1], chunks=(1, 2))
        out = arrayds.to_arrayrecord(x, url, mode="a" if i else "w")
    assert out.nshards == arrayds.open_array(url).nshards < MERGE_FACTOR
    np.testing.assert_array_equal(arrayds.open_array(url)[...], rows)


def test_xarray_appends_merge_the_members(tmp_path):
    xr = pytest.importorskip("xarray")
    url = str(tmp_path / "era")
    steps = [
        xr.Dataset(
            {"t2m": (("time", "x"), np.full((1, 4), t, "f4"))},
            coords={"time": [t], "x": np.arange(4)},
        )
        for t in range(40)
    ]
    for t, ds in enumerate(steps):
        if t == 0:
            ds.arrayds.to_arrayrecord(url, mode="w")
        else:
            ds.arrayds.to_arrayrecord(url, append_dim="time")
    got = xr.open_dataset(url, engine="arrayds").load()
    xr.testing.assert_identical(got, xr.concat(steps, dim="time"))
    for name in ("t2m", "time"):
        assert arrayds.open_array(url, name).nshards < MERGE_FACTOR
    assert arrayds.open_array(url, "x").nshards == 1
    assert verify(url, progress=False).ok


def test_a_merge_after_another_commit_is_dropped(tmp_path):
    """The merge hook of a commit whose put another writer beat: the merged shard
    goes, nothing of it is visible (the merge runs inside the commit)."""
    url = str(tmp_path / "a")
    a = arrayds.open_array(url, mode="w", shape=(0,), dtype="i2", chunks=1)
    for i in range(MERGE_FACTOR):
        a.append(np.array([i], "i2"), compact=False)
    other = arrayds.open_array(url, mode="a")
    before = set(os.listdir(os.path.join(url, "c")))
    hook = tiered(a._store, "", ())

    def build(base):
        other.append(np.array([99], "i2"), compact=False)  # between read and put
        return base.raw

    with pytest.raises(CommitConflictError):
        commit.commit(a._store, "", build, write_id="merge-1", merge=hook)
    assert hook.merged is not None and hook.merged.written  # it merged, then lost
    now = set(os.listdir(os.path.join(url, "c")))
    assert now - before == {other.manifest.shards[-1].path.split("/")[-1]}  # its shard removed
    np.testing.assert_array_equal(arrayds.open_array(url)[:], [*range(MERGE_FACTOR), 99])


def test_a_stale_handle_s_folded_merge_conflicts_and_leaves_nothing(tmp_path):
    url = str(tmp_path / "a")
    a = arrayds.open_array(url, mode="w", shape=(0,), dtype="i2", chunks=1)
    for i in range(MERGE_FACTOR - 1):
        a.append(np.array([i], "i2"))
    stale = arrayds.open_array(url, mode="a")
    a.append(np.array([MERGE_FACTOR - 1], "i2"))  # fills the tier: merged, one commit
    assert a.nshards == 1
    before = set(os.listdir(os.path.join(url, "c")))
    # the stale handle's append would fill a tier too: its merge is folded into a
    # commit that finds the node moved on
    with pytest.raises(CommitConflictError, match="another writer committed generation"):
        stale.append(np.array([99], "i2"), retries=0)
    assert set(os.listdir(os.path.join(url, "c"))) == before  # neither merged nor small
    fresh = arrayds.open_array(url)
    np.testing.assert_array_equal(fresh[:], np.arange(MERGE_FACTOR))
    assert fresh.manifest.generation == 1 + MERGE_FACTOR


def test_merged_away_files_are_those_wholly_in_the_merged_tail():
    def entries(*paths):
        return [ShardEntry(p, (i,), (i + 1,)) for i, p in enumerate(paths)]

    shards = entries("a", "b", "c", "c")  # the append wrote "c" as two entries
    assert _merged_away(shards, 1, ["c"]) == []  # one entry of "c" left unmerged
    assert _merged_away(shards, 2, ["c"]) == ["c"]
    assert _merged_away(shards, 4, ["c"]) == ["c"]
    assert _merged_away(shards, 4, []) == []  # after a commit: no file of its own


def test_compact_false_merges_nothing(tmp_path):
    url = str(tmp_path / "r")
    for i in range(2 * MERGE_FACTOR):
        arrayds.to_arrayrecord([b"x"], url, mode="a" if i else "w", compact=False)
    assert arrayds.open(url).num_shards == 2 * MERGE_FACTOR


def test_writes_that_are_not_appends_merge_nothing(tmp_path):
    url = str(tmp_path / "r")
    arrayds.to_arrayrecord([b"x"] * 40, url, num_shards=20)
    assert arrayds.open(url).num_shards == 20


@pytest.mark.parametrize("bad", ["yes", 1, None, "Tiered"])
def test_bad_compact_values(tmp_path, bad):
    url = str(tmp_path / "a")
    with pytest.raises(ValueError, match="compact must be 'tiered'.*got"):
        arrayds.to_arrayrecord([b"x"], url, compact=bad)
    assert not os.path.exists(url)
    a = arrayds.open_array(url, mode="w", shape=(0,), dtype="i1", chunks=1)
    with pytest.raises(ValueError, match="compact must be 'tiered'.*got"):
        a.append(np.array([1], "i1"), compact=bad)
    assert a.shape == (0,)


def test_array_append_with_compact_true_compacts_the_handle_s_node(tmp_path):
    from arrayds.nodes.merge import AUTO_COMPACT_FILES

    url = str(tmp_path / "a")
    a = arrayds.open_array(url, mode="w", shape=(0,), dtype="i4", chunks=1)
    for i in range(AUTO_COMPACT_FILES - 1):
        a.append(np.array([i], "i4"), compact=False)
    assert a.nshards == AUTO_COMPACT_FILES - 1
    a.append(np.array([AUTO_COMPACT_FILES - 1], "i4"), compact=True)
    assert a.nshards == 1  # the handle sees the compacted manifest ...
    a.append(np.array([-1], "i4"), compact=True)  # ... so its next append commits
    np.testing.assert_array_equal(arrayds.open_array(url)[:], [*range(AUTO_COMPACT_FILES), -1])


def test_merged_shards_holding_a_since_completed_edge_chunk_verify(tmp_path):
    """Appends of 2 rows into chunks of 4: a tiered merge made while the last chunk was
    half full keeps that half chunk in its shard, and the next append completes the
    chunk in a newer shard that hides it. Reads select the newer one; verify accepts
    the hidden record as the partial chunk it was (it reported it as damaged)."""
    from arrayds.verify import verify

    url = str(tmp_path / "a")
    a = arrayds.open_array(url, mode="w", shape=(0,), dtype="i8", chunks=(4,))
    for i in range(80):
        a.append(np.arange(2 * i, 2 * i + 2))
    b = arrayds.open_array(url)
    assert len(b.manifest.shards) < 40  # merged
    np.testing.assert_array_equal(b[:], np.arange(160))
    report = verify(url)
    assert report.ok, report.problems


def test_a_hidden_record_must_still_be_a_chunk_of_the_array():
    """A hidden record's shape may be smaller than its grid position (a chunk as it
    was when written), never larger, and its dtype must be the array's."""
    import io

    from arrayds.tools.verify import _hidden_shape

    def npy(x):
        buf = io.BytesIO()
        np.save(buf, x)
        return buf.getvalue()

    i8 = np.dtype("i8")
    assert _hidden_shape(npy(np.zeros(2, "i8")), i8, (4,)) == (2,)
    assert _hidden_shape(npy(np.zeros(6, "i8")), i8, (4,)) == (4,)  # larger: checked as (4,)
    assert _hidden_shape(npy(np.zeros(2, "f8")), i8, (4,)) == (4,)
    assert _hidden_shape(npy(np.zeros((2, 1), "i8")), i8, (4,)) == (4,)
    assert _hidden_shape(b"not a npy record", i8, (4,)) == (4,)
