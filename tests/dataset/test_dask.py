"""to_arrayrecord / from_arrayrecord for arrays, with real dask schedulers."""

from __future__ import annotations

import os
import pickle
import textwrap

import dask
import dask.array as da
import numpy as np
import pytest
from dask.delayed import Delayed

import arrayds
from arrayds.kinds.array.dask import group_blocks
from arrayds.nodes import commit

from .conftest import run_with_query_planning


def test_round_trip_preserves_irregular_chunks_exactly(url):
    x = da.from_array(
        np.arange(37 * 11, dtype="f8").reshape(37, 11), chunks=((5, 1, 20, 11), (3, 8))
    )
    a = arrayds.to_arrayrecord(x, url, "x", mode="w")
    assert a.chunks == x.chunks
    y = arrayds.from_arrayrecord(url, "x")
    assert y.chunks == x.chunks and y.dtype == x.dtype
    np.testing.assert_array_equal(y.compute(), x.compute())
    np.testing.assert_array_equal(arrayds.open_array(url, "x").to_dask().compute(), x.compute())


def test_zero_length_dask_chunks_are_dropped(url):
    x = da.arange(10, chunks=3)[np.array([True] * 4 + [False] * 3 + [True] * 3)]
    x = x.compute_chunk_sizes()
    assert 0 in x.chunks[0] or True
    a = arrayds.to_arrayrecord(x, url, mode="w")
    assert 0 not in a.chunks[0]
    np.testing.assert_array_equal(a[...], x.compute())


def test_graph_has_one_task_per_shard_plus_commit(url):
    x = da.ones((8, 8), chunks=2, dtype="u1")  # 16 blocks of 4 bytes
    d = arrayds.to_arrayrecord(x, url, mode="w", compute=False, shard_size=2 * 8)  # 2 rows
    assert isinstance(d, Delayed)
    keys = [k for k in dict(d.__dask_graph__()) if isinstance(k, str)]
    shard_keys = [k for k in keys if k.startswith("arrayds-shard-")]
    commit_keys = [k for k in keys if k.startswith("arrayds-commit-")]
    assert len(shard_keys) == 4 and len(commit_keys) == 1
    a = d.compute()
    assert a.nshards == 4
    assert sorted(tuple(e.start) + tuple(e.stop) for e in a.manifest.shards) == [
        (0, 0, 1, 4), (1, 0, 2, 4), (2, 0, 3, 4), (3, 0, 4, 4),
    ]  # fmt: skip


def test_compute_false_writes_nothing_visible_before_compute(url):
    x = da.random.default_rng(0).random((30, 30), chunks=10)
    arrayds.to_arrayrecord(np.zeros((30, 30)), url, "v", mode="w", chunks=10)
    d = arrayds.to_arrayrecord(x, url, "v", mode="w", compute=False)
    d2 = arrayds.to_arrayrecord(x, url, "new/deep", mode="w-", compute=False)
    assert arrayds.open_array(url, "v")[...].sum() == 0
    assert "new" not in arrayds.open(url)
    d.compute()
    d2.compute()
    np.testing.assert_array_equal(arrayds.open_array(url, "v")[...], x.compute())
    np.testing.assert_array_equal(arrayds.open_array(url, "new/deep")[...], x.compute())


def test_modes_w_minus_w_append_and_region(url):
    x = da.arange(24, chunks=5, dtype="i8").reshape(6, 4)
    arrayds.to_arrayrecord(x, url, mode="w-")
    with pytest.raises(FileExistsError, match="already exists"):
        arrayds.to_arrayrecord(x, url)
    a = arrayds.to_arrayrecord(x + 100, url, mode="w")
    np.testing.assert_array_equal(a[...], x.compute() + 100)
    # append along axis 0 keeps the new data's own chunks; other axes follow the store
    extra = da.from_array(np.full((5, 4), -1, "i8"), chunks=((2, 3), (1, 3)))
    a = arrayds.to_arrayrecord(extra, url, mode="a")
    assert a.shape == (11, 4)
    assert a.chunks[0] == x.chunks[0] + (2, 3) and a.chunks[1] == x.chunks[1]
    want = np.concatenate([x.compute() + 100, np.full((5, 4), -1)])
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)
    # region overwrite, aligned to the chunk grid
    grid0 = np.cumsum((0,) + a.chunks[0])
    r0, r1 = int(grid0[1]), int(grid0[3])
    patch = da.zeros((r1 - r0, 4), chunks=1, dtype="i8")
    arrayds.to_arrayrecord(patch, url, mode="r+", region=(slice(r0, r1),))
    want[r0:r1] = 0
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)
    # append to a missing node creates it
    b = arrayds.to_arrayrecord(x, url + "-other", mode="a")
    assert b.shape == (6, 4)


def test_bad_input_is_rejected_before_anything_is_written(url):
    x = da.ones((6, 4), chunks=(3, 2), dtype="f4")
    arrayds.to_arrayrecord(x, url, mode="w")
    gen = arrayds.open_array(url).generation
    cases = [
        (dict(data=da.ones((2, 5), chunks=1, dtype="f4"), mode="a"),
         ValueError, r"shape \(2, 5\) along axis 0: expected shape \(n, 4\)"),
        (dict(data=da.ones((2, 4), chunks=1, dtype="c8"), mode="a"),
         ValueError, "dtype complex64 cannot be written to an array of dtype float32"),
        (dict(data=da.ones((3, 4), chunks=3, dtype="f4"), mode="r+", region=(slice(1, 4),)),
         ValueError, r"not aligned to the chunk grid: 1 on axis 0 is inside the chunk \[0, 3\)"),
        (dict(data=da.ones((3, 3), chunks=3, dtype="f4"), mode="r+", region=(slice(0, 3),)),
         ValueError, r"data of shape \(3, 3\) does not match region"),
        (dict(data=x, mode="w", compression="zstd:77"), ValueError, "out of range"),
        (dict(data=x, mode="w", compression="lz4"), ValueError, "unknown compression"),
        (dict(data=x, mode="a", region=(slice(0, 3),)), ValueError, r"region= needs mode 'r\+'"),
        (dict(data=x, mode="w", group_size=4), ValueError, "group_size 1"),
        (dict(data=x, mode="w", serializer="json"), ValueError, "applies to records"),
        (dict(data=x, mode="w", bogus=1), TypeError, "unexpected keyword"),
        (dict(data=x, mode="w", shard_size="lots"), ValueError, "not a size"),
        (dict(data=x, mode="zz"), ValueError, "mode must be one of"),
        (dict(data=da.ones((2,), chunks=1, dtype=object), mode="w"), ValueError, "not supported"),
        (dict(data={"a": 1}, mode="w"), TypeError, "cannot write data of type builtins.dict"),
    ]  # fmt: skip
    for kwargs, err, msg in cases:
        data = kwargs.pop("data")
        with pytest.raises(err, match=msg):
            arrayds.to_arrayrecord(data, url, **kwargs)
    a = arrayds.open_array(url)
    assert a.generation == gen and a.shape == (6, 4)
    np.testing.assert_array_equal(a[...], np.ones((6, 4)))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        arrayds.to_arrayrecord(x, url + "-2", "missing", mode="r+")
    with pytest.raises(ValueError, match="is an array node, not a group"):
        arrayds.to_arrayrecord(x, url, "under/array", mode="w", compute=False)


def test_failed_task_commits_nothing_and_keeps_previous_state(url):
    arrayds.to_arrayrecord(np.arange(20.0).reshape(4, 5), url, mode="w", chunks=2)

    def boom(block, block_info=None):
        if block_info[0]["chunk-location"] == (1, 1):
            raise RuntimeError("task failed on purpose")
        return block * 0

    x = da.zeros((4, 5), chunks=2).map_blocks(boom, dtype="f8")
    with pytest.raises(RuntimeError, match="on purpose"):
        arrayds.to_arrayrecord(x, url, mode="w", shard_size=8)
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.arange(20.0).reshape(4, 5))
    # a block whose shape disagrees with its dask chunks is refused by its shard task
    lying = da.zeros((4, 5), chunks=2).map_blocks(lambda b: np.zeros((1, 1)), dtype="f8")
    with pytest.raises(ValueError, match=r"has shape \(1, 1\), but the array's chunks say"):
        arrayds.to_arrayrecord(lying, url, mode="w")
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.arange(20.0).reshape(4, 5))


def test_concurrent_commit_is_detected(url):
    arrayds.to_arrayrecord(np.zeros((4,)), url, mode="w", chunks=2)
    d = arrayds.to_arrayrecord(da.ones(2, chunks=2), url, mode="a", retries=0, compute=False)
    arrayds.open_array(url, mode="r+")[0] = 5  # another writer commits first
    from arrayds.errors import CommitConflictError

    with pytest.raises(CommitConflictError, match="another writer committed"):
        d.compute()
    assert arrayds.open_array(url)[...].tolist() == [5, 0, 0, 0]


def test_shard_grouping():
    mib = 1 << 20
    # 64x64 blocks of 16 KiB -> 16 MiB shards of whole rows
    boxes = group_blocks((64, 64), ((64,) * 64, (64,) * 64), 4)
    assert len(boxes) == 4 and boxes[0] == ((0, 0), (16, 64))
    # big blocks are their own shards by default, grouped when asked
    assert len(group_blocks((4, 4), ((1024,) * 4, (4096,) * 4), 4)) == 16
    assert group_blocks((4, 4), ((1024,) * 4, (4096,) * 4), 4, "32MiB")[0] == ((0, 0), (1, 2))
    assert len(group_blocks((3,), ((5, 5, 5),), 8, 1)) == 3
    assert group_blocks((), (), 8) == [((), ())]
    assert group_blocks((0, 3), ((0,), (1, 1, 1)), 8) == []
    assert group_blocks((2, 3), ((1, 1), (1, 1, 1)), mib, "5MiB") == [
        ((0, 0), (1, 3)), ((1, 0), (2, 3)),
    ]  # fmt: skip


def test_from_arrayrecord_chunks_multiples_shards_auto(url):
    x = da.from_array(np.arange(40 * 30).reshape(40, 30), chunks=(10, 10))
    arrayds.to_arrayrecord(x, url, mode="w", shard_size=10 * 30 * 8)  # one shard per row
    assert arrayds.from_arrayrecord(url, chunks=(20, 30)).chunks == ((20, 20), (30,))
    assert arrayds.from_arrayrecord(url, chunks="shards").chunks == ((10,) * 4, (30,))
    auto = arrayds.from_arrayrecord(url, chunks="auto")
    assert auto.chunks == ((40,), (30,))
    for c in [(20, 30), "shards", "auto", {0: -1}]:
        np.testing.assert_array_equal(
            arrayds.from_arrayrecord(url, chunks=c).compute(), x.compute()
        )
    with pytest.raises(
        ValueError, match=r"block boundary at 15 on axis 0, inside the stored chunk \[10, 20\)"
    ):
        arrayds.from_arrayrecord(url, chunks=(15, 30))


def test_dask_names_are_deterministic_and_change_with_commits(url):
    arrayds.to_arrayrecord(np.zeros(10), url, mode="w", chunks=5)
    n1 = arrayds.from_arrayrecord(url).name
    assert arrayds.from_arrayrecord(url).name == n1
    assert dask.base.tokenize(arrayds.from_arrayrecord(url)) == dask.base.tokenize(
        arrayds.from_arrayrecord(url)
    )
    assert arrayds.from_arrayrecord(url, chunks=10).name != n1
    arrayds.open_array(url, mode="r+")[0] = 1
    assert arrayds.from_arrayrecord(url).name != n1
    assert arrayds.from_arrayrecord(url, name="mine").name == "mine"


def test_reads_with_processes_scheduler_and_pickled_sources(local_url):
    x = da.random.default_rng(3).random((60, 50), chunks=(20, 25))
    arrayds.to_arrayrecord(x, local_url, mode="w")
    y = arrayds.from_arrayrecord(local_url)
    want = x.compute()
    np.testing.assert_allclose(y.sum().compute(scheduler="processes"), want.sum())
    np.testing.assert_array_equal(y.compute(scheduler="threads"), want)
    # the graph pickles (what the processes and distributed schedulers do)
    dsk = dict(y.__dask_graph__())
    pickle.loads(pickle.dumps(dsk))
    # writes work on the processes scheduler too
    with dask.config.set(scheduler="processes"):
        a = arrayds.to_arrayrecord(x * 2, local_url + "-p", mode="w")
    np.testing.assert_array_equal(a[...], want * 2)


def test_progress_bar(url, capsys, monkeypatch):
    # captured output is not a terminal: quiet unless forced (arrayds.progress)
    monkeypatch.delenv("ARRAYDS_PROGRESS", raising=False)
    arrayds.to_arrayrecord(da.ones((10, 10), chunks=5), url, mode="w", progress=True)
    err = capsys.readouterr()
    assert "100%" not in err.out + err.err
    monkeypatch.setenv("ARRAYDS_PROGRESS", "1")
    arrayds.to_arrayrecord(da.ones((10, 10), chunks=5), url, mode="w", progress=True)
    err = capsys.readouterr()
    assert "100%" in err.out + err.err
    assert arrayds.open_array(url)[...].sum() == 100


def test_numpy_input_uses_auto_or_given_chunks(url):
    a = arrayds.to_arrayrecord(np.arange(10, dtype="i2"), url, "small", mode="w", chunks=3)
    assert a.chunks == ((3, 3, 3, 1),)
    b = arrayds.to_arrayrecord(np.zeros((2000, 2000), "f4"), url, "big", mode="w")
    assert max(b.chunks[0]) * max(b.chunks[1]) * 4 <= 8 << 20
    c = arrayds.to_arrayrecord(np.array(7.5), url, "scalar", mode="w")
    assert c[()] == 7.5 and arrayds.from_arrayrecord(url, "scalar").compute() == 7.5


def test_works_with_array_query_planning(tmp_path):
    script = textwrap.dedent(
        f"""
        import numpy as np, dask, dask.array as da, arrayds
        assert dask.array._array_expr_enabled()
        url = {str(tmp_path / "qp")!r}
        x = da.from_array(np.arange(100).reshape(10, 10), chunks=(3, 4)) + 1
        a = arrayds.to_arrayrecord(x, url, mode="w", shard_size=64)
        y = arrayds.from_arrayrecord(url)
        assert type(y).__module__.startswith("dask.array._array_expr"), type(y)
        assert y.chunks == x.chunks, (y.chunks, x.chunks)
        np.testing.assert_array_equal((y * 2).compute(), x.compute() * 2)
        z = arrayds.from_arrayrecord(url, chunks=(6, 8))
        np.testing.assert_array_equal(z.compute(), x.compute())
        print("ok", a.nshards)
        """
    )
    assert run_with_query_planning(script).startswith("ok")


def test_records_input_dispatches_to_records_datasets(local_url):
    # (local: dask bags compute on the processes scheduler by default)
    import dask.bag as db

    url = local_url
    bag = db.from_sequence([b"a", b"b", b"c"], npartitions=2)
    ds = arrayds.to_arrayrecord(bag, url, "rec", mode="w")
    assert ds.num_shards == 2
    assert arrayds.from_arrayrecord(url, "rec").compute() == [b"a", b"b", b"c"]
    with pytest.raises(ValueError, match="applies to arrays, not records"):
        arrayds.to_arrayrecord(bag, url, "rec2", region=(slice(0, 1),))
    with pytest.raises(ValueError, match="is a group; pass component="):
        arrayds.from_arrayrecord(url)


def test_w_replacing_a_group_with_a_child_named_like_the_shard_folder(url):
    g = arrayds.open(url, mode="w")
    g.create_array("c", (3,), "i4", 3)[:] = [1, 2, 3]
    g.create_array("other", (2,), "i4", 2)
    x = da.arange(10, chunks=5)
    a = arrayds.to_arrayrecord(x, url, mode="w")
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.arange(10))
    assert a.nchunks_initialized == 2
    assert isinstance(arrayds.open(url), arrayds.Array)  # the root is an array now
    assert not commit.read(a.store, "other").exists and not commit.read(a.store, "c").exists


@pytest.mark.parametrize("mode", ["w", "a"])
def test_a_committed_write_does_not_compute_twice(tmp_path, mode):
    url = str(tmp_path / "once")
    arrayds.to_arrayrecord(np.zeros((4, 4), "i4"), url, mode="w", chunks=2)
    d = arrayds.to_arrayrecord(da.ones((4, 4), dtype="i4", chunks=2), url, mode=mode, compute=False)
    d.compute()
    before = arrayds.open_array(url)[...]
    manifest = open(os.path.join(url, "arrayds.json"), "rb").read()
    with pytest.raises(RuntimeError, match="already committed"):
        d.compute()
    assert open(os.path.join(url, "arrayds.json"), "rb").read() == manifest
    np.testing.assert_array_equal(arrayds.open_array(url)[...], before)
