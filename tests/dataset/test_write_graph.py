"""The task graph of a dask write (arrayds.kinds.array.dask.write_graph).

Every source task that only one shard task needs is fused into that shard task, so a
write of generated data is exactly one task per shard plus the commit, and on a
cluster a shard's blocks are computed where the shard is written. Source tasks that
several shard tasks need (a shared input object, a reduction over the whole array, a
block split across shards by a rechunk) stay tasks of their own and are computed once.
These tests count the tasks of the real graphs and the calls of the real block
functions on dask's threaded and synchronous schedulers.
"""

from __future__ import annotations

import pickle
import textwrap
import threading
from collections import Counter

import dask
import dask.array as da
import numpy as np
import pytest

import arrayds

from .conftest import run_with_query_planning


def graph_of(d) -> dict:
    return dict(d.__dask_graph__())


def task_kinds(g: dict) -> Counter:
    kinds: Counter = Counter()
    for k in g:
        s = str(k)
        if "arrayds-shard-" in s or "arrayds-xr-shard-" in s:
            kinds["shard"] += 1
        elif "commit" in s:
            kinds["commit"] += 1
        else:
            kinds["other"] += 1
    return kinds


class Calls:
    """Counts the calls of a block function per block (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.count: Counter = Counter()

    def block(self, block_info=None) -> np.ndarray:
        info = block_info[None]
        loc = tuple(info["chunk-location"])
        with self.lock:
            self.count[loc] += 1
        (i0, _), (j0, _) = info["array-location"]
        shape = info["chunk-shape"]
        r = np.arange(i0, i0 + shape[0], dtype=np.float64)[:, None]
        c = np.arange(j0, j0 + shape[1], dtype=np.float64)[None, :]
        return r * 1000 + c


def expected(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float64)[:, None] * 1000 + np.arange(n, dtype=np.float64)


class Wrapped:
    """A non-numpy array-like (what ``from_array`` keeps as one shared graph key)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a
        self.shape = a.shape
        self.dtype = a.dtype
        self.ndim = a.ndim

    def __getitem__(self, key):
        return self.a[key]


def test_generated_blocks_are_one_task_per_shard_plus_commit(tmp_path):
    calls = Calls()
    x = da.map_blocks(calls.block, chunks=((8,) * 4, (8,) * 4), dtype=np.float64)
    d = arrayds.to_arrayrecord(
        x, str(tmp_path / "ds"), mode="w", shard_size=4 * 8 * 8 * 8, compute=False
    )
    g = graph_of(d)
    # 16 blocks of 512 bytes, 4 per shard: 4 shard tasks + 1 commit, nothing else
    assert task_kinds(g) == Counter(shard=4, commit=1)
    a = d.compute()
    assert a.nshards == 4
    np.testing.assert_array_equal(a[...], expected(32))
    assert sorted(calls.count.values()) == [1] * 16  # every block computed once


def test_random_source_is_fused_and_matches(tmp_path):
    x = da.random.default_rng(7).random((64, 64), chunks=16)
    # float64 blocks of 2 KiB, 2 per shard
    d = arrayds.to_arrayrecord(x, str(tmp_path / "r"), mode="w", shard_size=4096, compute=False)
    assert task_kinds(graph_of(d)) == Counter(shard=8, commit=1)
    a = d.compute()
    np.testing.assert_array_equal(a[...], x.compute())


def test_numpy_source_is_embedded_once(tmp_path):
    src = np.random.default_rng(0).random((400, 400))
    x = da.from_array(src, chunks=100)
    d = arrayds.to_arrayrecord(
        x, str(tmp_path / "n"), mode="w", shard_size=2 * 80_000, compute=False
    )
    g = graph_of(d)
    assert task_kinds(g) == Counter(shard=8, commit=1)
    assert len(pickle.dumps(g)) < 1.1 * src.nbytes  # each block's data once, not per task
    np.testing.assert_array_equal(d.compute()[...], src)


@pytest.mark.parametrize("inline_array", [False, True])
def test_shared_source_object_is_not_copied_into_every_shard(tmp_path, inline_array):
    src = Wrapped(np.random.default_rng(1).random((400, 400)))
    x = da.from_array(src, chunks=100, inline_array=inline_array)
    d = arrayds.to_arrayrecord(
        x, str(tmp_path / "w"), mode="w", shard_size=2 * 80_000, compute=False
    )
    g = graph_of(d)
    size = len(pickle.dumps(g))
    if inline_array:
        # dask puts the object into every block task; fused, each shard task holds it
        # once (8 shards), not once per block (16 blocks)
        assert task_kinds(g) == Counter(shard=8, commit=1)
        assert size < 8.5 * src.a.nbytes
    else:
        # the object is one key that every shard task depends on
        assert task_kinds(g) == Counter(shard=8, commit=1, other=1)
        assert size < 1.1 * src.a.nbytes
    np.testing.assert_array_equal(d.compute()[...], src.a)


def test_blocks_shared_with_a_reduction_are_computed_once(tmp_path):
    calls = Calls()
    x = da.map_blocks(calls.block, chunks=((8,) * 4, (8,) * 4), dtype=np.float64)
    y = x - x.mean()  # every block feeds the mean (shared by all shards) and its shard
    d = arrayds.to_arrayrecord(y, str(tmp_path / "m"), mode="w", shard_size=4 * 512, compute=False)
    kinds = task_kinds(graph_of(d))
    assert kinds["shard"] == 4 and kinds["commit"] == 1
    # the 16 blocks of x and the reduction's tasks stay separate (needed twice)
    assert kinds["other"] >= 16
    with dask.config.set(scheduler="threads"):
        a = d.compute()
    assert sorted(calls.count.values()) == [1] * 16
    e = expected(32)
    np.testing.assert_allclose(a[...], e - e.mean())


def test_rechunk_split_blocks_are_computed_once(tmp_path):
    calls = Calls()
    # input blocks of 12 rows, written as 8-row blocks, one block per shard: the input
    # block of rows 0:12 feeds the shards of rows 0:8 and 8:16 (shared), ...
    x = da.map_blocks(calls.block, chunks=((12,) * 4, (48,)), dtype=np.float64)
    y = x.rechunk((8, 48))
    d = arrayds.to_arrayrecord(
        y, str(tmp_path / "rc"), mode="w", shard_size=8 * 48 * 8, compute=False
    )
    kinds = task_kinds(graph_of(d))
    assert kinds["shard"] == 6 and kinds["commit"] == 1
    with dask.config.set(scheduler="sync"):
        a = d.compute()
    assert sorted(calls.count.values()) == [1] * 4
    np.testing.assert_array_equal(a[...], expected(48))


def test_aligned_rechunk_is_fused_completely(tmp_path):
    calls = Calls()
    # 8 x 8 blocks merged into 16 x 16 blocks, one per shard: no input block is shared
    x = da.map_blocks(calls.block, chunks=((8,) * 4, (8,) * 4), dtype=np.float64)
    y = x.rechunk(16)
    d = arrayds.to_arrayrecord(
        y, str(tmp_path / "ar"), mode="w", shard_size=16 * 16 * 8, compute=False
    )
    assert task_kinds(graph_of(d)) == Counter(shard=4, commit=1)
    a = d.compute()
    assert sorted(calls.count.values()) == [1] * 16
    np.testing.assert_array_equal(a[...], expected(32))


def test_append_and_region_writes_are_fused(tmp_path):
    url = str(tmp_path / "ap")
    arrayds.to_arrayrecord(da.zeros((16, 16), chunks=8), url, mode="w", shard_size=512)
    d = arrayds.to_arrayrecord(
        da.ones((16, 16), chunks=8), url, mode="a", shard_size=512, compute=False
    )
    assert task_kinds(graph_of(d)) == Counter(shard=4, commit=1)
    d.compute()
    d = arrayds.to_arrayrecord(
        da.full((8, 16), 2.0, chunks=8),
        url,
        mode="r+",
        region=(slice(8, 16),),
        shard_size=512,
        compute=False,
    )
    assert task_kinds(graph_of(d)) == Counter(shard=2, commit=1)
    a = d.compute()
    want = np.concatenate([np.zeros((8, 16)), np.full((8, 16), 2.0), np.ones((16, 16))])
    np.testing.assert_array_equal(a[...], want)


def test_xarray_variables_sharing_an_input_compute_it_once(tmp_path):
    xr = pytest.importorskip("xarray")
    calls = Calls()
    x = da.map_blocks(calls.block, chunks=((8,) * 4, (8,) * 4), dtype=np.float64)
    ds = xr.Dataset({"a": (("y", "x"), x), "b": (("y", "x"), x * 2), "c": (("y", "x"), x + 1)})
    d = arrayds.to_arrayrecord(ds, str(tmp_path / "xr"), mode="w", compute=False)
    g = graph_of(d)
    kinds = task_kinds(g)
    assert kinds["commit"] == 1
    # each block of x feeds one shard of each of the three variables: it stays a task
    assert kinds["other"] == 16
    with dask.config.set(scheduler="threads"):
        d.compute()
    assert sorted(calls.count.values()) == [1] * 16
    out = xr.open_dataset(str(tmp_path / "xr"), engine="arrayds")
    np.testing.assert_array_equal(out["b"].values, 2 * expected(32))


def test_xarray_variables_from_generated_data_are_fused(tmp_path):
    xr = pytest.importorskip("xarray")
    a = da.random.default_rng(3).random((32, 32), chunks=8)
    b = da.random.default_rng(4).random((32, 32), chunks=8)
    ds = xr.Dataset({"a": (("y", "x"), a), "b": (("y", "x"), b)})
    d = arrayds.to_arrayrecord(ds, str(tmp_path / "xr2"), mode="w", compute=False)
    kinds = task_kinds(graph_of(d))
    assert kinds["other"] == 0 and kinds["commit"] == 1 and kinds["shard"] >= 2


def test_fused_graph_under_array_query_planning(tmp_path):
    script = textwrap.dedent(
        f"""
        import numpy as np, dask, dask.array as da, arrayds
        assert dask.array._array_expr_enabled()
        url = {str(tmp_path / "qp")!r}
        x = da.random.default_rng(5).random((64, 64), chunks=16) + 1
        d = arrayds.to_arrayrecord(x, url, mode="w", shard_size=4096, compute=False)
        keys = [str(k) for k in dict(d.__dask_graph__())]
        shards = [k for k in keys if k.startswith("arrayds-shard-")]
        others = [k for k in keys if not k.startswith(("arrayds-shard-", "arrayds-commit-"))]
        assert len(shards) == 8, keys  # 8 shards of 2 blocks
        # under query planning the generator states are one small array every
        # block reads (shared, so not fused); no block task is left
        assert len(others) <= 1 and all("fromarray" in k for k in others), keys
        a = d.compute()
        np.testing.assert_array_equal(a[...], x.compute())
        y = da.ones((64, 64), chunks=16)
        y = y - y.mean()
        d = arrayds.to_arrayrecord(y, url + "-m", mode="w", shard_size=4096, compute=False)
        np.testing.assert_array_equal(d.compute()[...], np.zeros((64, 64)))
        print("ok")
        """
    )
    assert run_with_query_planning(script).startswith("ok")


def test_blocks_shared_inside_one_shard_are_fused_and_computed_once(tmp_path):
    calls = Calls()
    # map_overlap: every output block reads its neighbours. A shard is a row of 4
    # blocks: neighbours in the same row are fused into the shard task (computed once
    # inside it), neighbours in the rows above and below are shared between shards
    x = da.map_blocks(calls.block, chunks=((8,) * 4, (8,) * 4), dtype=np.float64)
    y = x.map_overlap(lambda b: b * 2, depth=1, boundary="none")
    d = arrayds.to_arrayrecord(y, str(tmp_path / "ov"), mode="w", shard_size=4 * 512, compute=False)
    kinds = task_kinds(graph_of(d))
    assert kinds["shard"] == 4 and kinds["commit"] == 1
    assert 0 < kinds["other"]
    with dask.config.set(scheduler="sync"):
        a = d.compute()
    assert sorted(calls.count.values()) == [1] * 16
    np.testing.assert_array_equal(a[...], 2 * expected(32))


def test_a_shard_task_makes_its_blocks_as_the_writer_takes_them(tmp_path):
    """A fused shard task hands its blocks to the writer one by one, making each when
    it is taken: while 24 blocks of 8 MiB are written as one shard, at most a writer
    batch of them (64 MiB) is alive at once; before, all 24 were made first."""
    import weakref

    alive: list[weakref.ref] = []
    most = 0

    def make(block_id=None):
        nonlocal most
        blk = np.full((1, 8 << 20), block_id[0] % 251, dtype=np.uint8)
        alive.append(weakref.ref(blk))
        most = max(most, sum(r() is not None for r in alive))
        return blk

    x = da.map_blocks(make, chunks=((1,) * 24, (8 << 20,)), dtype=np.uint8)
    url = str(tmp_path / "s.ads")
    arrayds.to_arrayrecord(x, url, "a", compression="uncompressed", shard_size="1GiB")
    a = arrayds.open_array(url, "a")
    assert len(a.manifest.shards) == 1 and len(alive) == 24
    assert most <= (64 << 20) // (8 << 20) + 1, most
    assert a[23, :3].tolist() == [23, 23, 23] and a[5, -1] == 5
