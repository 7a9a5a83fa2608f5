"""The dask read graph on object stores: one read task per shard box (bounded by
READ_TASK_BYTES), the user's blocks slices of it; local stores keep a task per block."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

import arrayds
from arrayds.kinds.array import to_dask as dask_array


def _array(url: str, shard_size: int | None = None):
    import dask.array as da

    data = np.arange(64 * 64, dtype="f4").reshape(64, 64)
    arrayds.to_arrayrecord(da.from_array(data, chunks=(8, 8)), url, shard_size=shard_size)
    return data, arrayds.open_array(url)


def _reads(x) -> int:
    return sum(1 for k in dict(x.__dask_graph__()) if k[0].startswith("arrayds-read-"))


def test_remote_read_is_one_task_per_shard_and_blocks_stay_stored_chunks():
    url = f"memory://coalesce-graph-{uuid.uuid4().hex[:8]}/a"
    data, a = _array(url, shard_size=16 * 8 * 8 * 4)  # 4 shards of 16 chunks
    x = arrayds.from_arrayrecord(url)
    assert x.chunks == ((8,) * 8, (8,) * 8)
    assert _reads(x) == a.nshards == 4
    np.testing.assert_array_equal(x.compute(scheduler="sync"), data)
    np.testing.assert_array_equal(x[5:40, 3:61].compute(scheduler="sync"), data[5:40, 3:61])


def test_read_tasks_are_bounded_by_memory(monkeypatch):
    url = f"memory://coalesce-graph-{uuid.uuid4().hex[:8]}/a"
    data, a = _array(url)  # one shard
    monkeypatch.setattr(dask_array, "READ_TASK_BYTES", 16 * 64 * 4)  # 16 rows
    assert dask_array.io_chunks(a, a.chunks) == ((16, 16, 16, 16), (64,))
    x = arrayds.from_arrayrecord(url)
    assert _reads(x) == 4 and x.chunks == a.chunks
    np.testing.assert_array_equal(x.compute(scheduler="sync"), data)


def test_blocks_across_shards_and_local_stores_keep_one_task_per_block(tmp_path):
    url = f"memory://coalesce-graph-{uuid.uuid4().hex[:8]}/a"
    data, a = _array(url, shard_size=16 * 8 * 8 * 4)
    x = arrayds.from_arrayrecord(url, chunks=(64, 64))  # one block over all 4 shards
    assert _reads(x) == 0 and x.numblocks == (1, 1)
    np.testing.assert_array_equal(x.compute(scheduler="sync"), data)
    local = str(tmp_path / "a")
    _, b = _array(local, shard_size=16 * 8 * 8 * 4)
    y = arrayds.from_arrayrecord(local)
    assert _reads(y) == 0 and y.numblocks == (8, 8)
    np.testing.assert_array_equal(y.compute(scheduler="sync"), data)


def test_read_tasks_run_with_every_option_of_the_block_their_graph_was_made_in():
    from arrayds.storage.coalesce import coalesce_options, coalescing

    url = f"memory://coalesce-graph-{uuid.uuid4().hex[:8]}/a"
    _, a = _array(url)
    with coalescing(gap=0, max_size="2K", max_ratio=3):
        src = dask_array.ArraySource(a)
    seen = []

    def read_block(key, zero_copy=False):
        seen.append(coalesce_options())
        return np.zeros((1,))

    a.read_block = read_block  # what the task's read sees, outside the block
    src[(slice(0, 8), slice(0, 8))]
    assert (seen[0].gap, seen[0].max_size, seen[0].max_ratio) == (0, 2048, 3.0)


def _read_keys(graph) -> list:
    return sorted(k for k in dict(graph) if k[0].startswith("arrayds-read-"))


def test_culled_graph_reads_only_the_chunks_of_the_blocks_kept():
    import dask

    url = f"memory://coalesce-graph-{uuid.uuid4().hex[:8]}/a"
    data, a = _array(url, shard_size=16 * 8 * 8 * 4)  # 4 shards of 16 chunks
    x = arrayds.from_arrayrecord(url)
    boxes = dask_array.io_chunks(a, x.chunks)
    assert len(boxes[0]) * len(boxes[1]) == 4
    y = x.blocks[2:4, 0:2]  # part of one shard's box
    culled = y.__dask_graph__().cull(set(dask.core.flatten(y.__dask_keys__())))
    reads = _read_keys(culled)
    assert len(reads) == 1
    # the read covers the 2 x 2 blocks asked for: (name, *box, *first block, *count)
    assert reads[0][-4:] == (2, 0, 2, 2)
    np.testing.assert_array_equal(y.compute(scheduler="sync"), data[16:32, 0:16])
    # a region of the array is an array of its own whose one read is the region
    y = x[20:30, 3:12]
    culled = dict(y.__dask_graph__().cull(set(dask.core.flatten(y.__dask_keys__()))))
    (read,) = _read_keys(culled)
    assert read[-4:] == (0, 0, 2, 2) and culled[read][2] == (slice(20, 30), slice(3, 12))
    np.testing.assert_array_equal(y.compute(scheduler="sync"), data[20:30, 3:12])
    # every block of the array: each shard's box read whole, one read per shard
    full = x.__dask_graph__().cull(set(dask.core.flatten(x.__dask_keys__())))
    assert len(_read_keys(full)) == 4 and _read_keys(full) == _read_keys(x.__dask_graph__())
    np.testing.assert_array_equal(x.compute(scheduler="threads"), data)


def test_blocks_are_views_of_their_shards_read():
    from dask.local import get_sync

    url = f"memory://coalesce-graph-{uuid.uuid4().hex[:8]}/a"
    data, a = _array(url, shard_size=16 * 8 * 8 * 4)
    x = arrayds.from_arrayrecord(url)
    keys = [(x.name, 0, 0), (x.name, 0, 1), (x.name, 7, 7)]
    b00, b01, b77 = get_sync(dict(x.__dask_graph__()), keys)
    assert b00.base is not None and b00.base is b01.base  # one read, no copies
    assert not np.shares_memory(b00, b77)  # another shard: another read
    np.testing.assert_array_equal(b01, data[0:8, 8:16])
    np.testing.assert_array_equal(b77, data[56:64, 56:64])


def test_read_boxes_must_hold_whole_blocks():
    from arrayds.kinds.array.read_layer import BoxReadLayer

    with pytest.raises(ValueError, match="do not hold whole blocks"):
        BoxReadLayer("x", "x-read", np.arange(8), ((2, 2, 2, 2),), ((3, 5),))


def test_compute_of_the_whole_array_reads_into_one_result():
    import dask

    from arrayds.kinds.array.read_layer import BoxReadArray

    url = f"memory://coalesce-graph-{uuid.uuid4().hex[:8]}/a"
    data, a = _array(url, shard_size=16 * 8 * 8 * 4)
    arrayds.open_array(url, mode="r+")[0:8, 0:8] = np.full((8, 8), -1, dtype="f4")  # new shard
    data[0:8, 0:8] = -1
    x = arrayds.from_arrayrecord(url)
    assert isinstance(x, BoxReadArray)
    for scheduler in ("sync", "threads"):
        got = x.compute(scheduler=scheduler)
        assert type(got) is np.ndarray and got.flags.c_contiguous and got.flags.writeable
        np.testing.assert_array_equal(got, data)
    with dask.config.set(scheduler="threads", num_workers=3):
        np.testing.assert_array_equal(np.asarray(x), data)
    # derived arrays and other schedulers compute as dask does
    np.testing.assert_array_equal((x + 1).compute(scheduler="threads"), data + 1)
    assert type(x + 1) is not BoxReadArray
    np.testing.assert_array_equal(x.compute(scheduler="threads", optimize_graph=False), data)


def test_a_region_reads_straight_into_one_result_with_the_blocks_dask_would_give():
    import dask.array as da

    from arrayds.kinds.array.read_layer import BoxReadArray

    url = f"memory://coalesce-graph-{uuid.uuid4().hex[:8]}/a"
    data, a = _array(url, shard_size=16 * 8 * 8 * 4)
    x = arrayds.from_arrayrecord(url)
    plain = da.from_array(data, chunks=x.chunks)
    regions = [
        np.s_[20:30, 3:12],
        np.s_[5:64, :],
        np.s_[..., 40:],
        np.s_[-10:, -33:-1],
        np.s_[3:4],
        (slice(np.int64(2), np.int64(60)), Ellipsis),
        np.s_[0:64, 0:64:1],
    ]
    for key in regions:
        y = x[key]
        assert isinstance(y, BoxReadArray), key
        assert y.chunks == plain[key].chunks and y.name == x[key].name, key
        for scheduler in ("sync", "threads"):
            ran = _tasks_run(lambda y=y, s=scheduler: y.compute(scheduler=s))
            assert ran and all(n.endswith("-into") for n in ran), (key, ran)
        np.testing.assert_array_equal(y.compute(scheduler="threads"), data[key])
        np.testing.assert_array_equal(
            y.compute(scheduler="threads", optimize_graph=False), data[key]
        )
        # a region of a region, and dask's own operations on it
        np.testing.assert_array_equal(y[1:, :2].compute(), data[key][1:, :2])
        np.testing.assert_array_equal((y + 1).sum().compute(), (data[key] + 1).sum())
    assert x[...] is x and x[:, :] is x
    # any other index is dask's: same values, a plain dask array
    others = (np.s_[::2, 3], np.s_[5], np.s_[None, 4:9], np.s_[[1, 5, 9]], np.s_[10:10], np.s_[9:3])
    for key in others:
        y = x[key]
        assert type(y) is not BoxReadArray, key
        np.testing.assert_array_equal(y.compute(), data[key])
    with pytest.raises(IndexError):
        x[1:2, 3:4, 5:6]


_NO_DISTRIBUTED = """
import sys
from concurrent.futures import ThreadPoolExecutor
import dask, numpy as np, arrayds
url = sys.argv[1]
a = arrayds.open_array(url, mode="w", shape=(64,), dtype="i4", chunks=8)
a[:32] = np.arange(32, dtype="i4")  # a shard per write
a[32:] = np.arange(32, 64, dtype="i4")
x = arrayds.from_arrayrecord(url)
assert "distributed" not in sys.modules
assert type(x).__name__ == "BoxReadArray" and x.dask.layers[x.name].boxes()[1:]
got = [x.compute().sum(), x.compute(scheduler="sync").sum(), x[3:40].compute().sum()]
with dask.config.set(scheduler="single-threaded"):
    got.append(x.compute().sum())
got = [int(n) for n in got]
print(got, "distributed" in sys.modules)
with ThreadPoolExecutor(2) as pool:
    print(x.compute(scheduler=pool).sum())  # dask's own path
"""


def test_compute_on_threads_or_sync_does_not_import_distributed():
    """No distributed Client can exist before distributed is imported, so the
    array's own compute resolves the scheduler without importing it (dask's
    get_scheduler would); other schedulers take dask's path."""
    import subprocess
    import sys

    url = f"memory://coalesce-graph-{uuid.uuid4().hex[:8]}/a"
    out = subprocess.run(
        [sys.executable, "-c", _NO_DISTRIBUTED, url], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    total = sum(range(64))
    assert out[0] == f"[{total}, {total}, {sum(range(3, 40))}, {total}] False"
    assert out[1] == f"{total}"


def _tasks_run(fn):
    """The names of the tasks dask ran during ``fn()``."""
    from dask.callbacks import Callback

    names: set[str] = set()
    with Callback(pretask=lambda key, dsk, state: names.add(key[0] if type(key) is tuple else key)):
        fn()
    return names


def test_store_into_a_numpy_array_reads_every_box_straight_into_it():
    import threading

    import dask

    url = f"memory://coalesce-graph-{uuid.uuid4().hex[:8]}/a"
    data, a = _array(url, shard_size=16 * 8 * 8 * 4)
    x = arrayds.from_arrayrecord(url)
    for kwargs in ({}, {"lock": False}, {"lock": True, "scheduler": "sync"}):
        target = np.zeros(data.shape, data.dtype)
        ran = _tasks_run(lambda kw=kwargs, t=target: x.store(t, **kw))
        np.testing.assert_array_equal(target, data)
        assert all(n.endswith("-into") for n in ran), ran  # no block, no store task
    with dask.config.set(scheduler="threads", num_workers=2):
        target = np.zeros(data.shape, data.dtype)
        assert x.store(target) is None
        np.testing.assert_array_equal(target, data)
    # other targets and options: dask's path, same values
    for target, kwargs in (
        (np.zeros(data.shape, "f8"), {}),  # a cast
        (np.zeros(data.shape, data.dtype), {"lock": threading.Lock()}),
        (np.zeros(data.shape, data.dtype), {"scheduler": "threads", "optimize_graph": False}),
    ):
        ran = _tasks_run(lambda kw=kwargs, t=target: x.store(t, **kw))
        np.testing.assert_array_equal(target, data)
        assert any(n.startswith("store-map") for n in ran), ran
    target = np.zeros(data.shape, data.dtype)
    stored = x.store(target, return_stored=True)
    np.testing.assert_array_equal(stored.compute(), data)
    target = np.zeros(data.shape, data.dtype)
    later = x.store(target, compute=False)
    assert not target.any()
    later.compute()
    np.testing.assert_array_equal(target, data)
    with pytest.raises(ValueError):  # a target of another shape: dask's own error
        x.store(np.zeros((3, 3), data.dtype))


def test_compute_reads_as_many_boxes_at_once_as_the_fetch_budget_holds(monkeypatch):
    from arrayds.kinds.array import read_layer

    url = f"memory://coalesce-graph-{uuid.uuid4().hex[:8]}/a"
    data, a = _array(url, shard_size=16 * 8 * 8 * 4)  # 4 boxes of 4 KiB decoded
    x = arrayds.from_arrayrecord(url)
    layer = x.dask.layers[x.name]
    out = np.empty(data.shape, data.dtype)
    boxes = layer.boxes()
    decoded = 16 * 8 * 8 * 4
    fetched = decoded * a.stored_bytes / data.nbytes  # a box's share of the stored bytes
    monkeypatch.setattr(read_layer, "INTO_FETCH_SHARE", 1 << 40)  # no share of the result
    monkeypatch.setattr(read_layer, "INTO_FETCH_BYTES", 1)
    assert read_layer._fitting(layer.source, boxes, out) == 1  # at least one
    monkeypatch.setattr(read_layer, "INTO_FETCH_BYTES", int(2.5 * fetched))
    assert read_layer._fitting(layer.source, boxes, out) == 2
    monkeypatch.setattr(read_layer, "INTO_FETCH_BYTES", 1)
    share = data.nbytes / (2.5 * fetched)  # the result's share: two and a half boxes
    monkeypatch.setattr(read_layer, "INTO_FETCH_SHARE", share)
    assert read_layer._fitting(layer.source, boxes, out) == 2
    # a source that knows no stored bytes: a box fetches its decoded bytes
    assert read_layer._fitting(np.empty(0), boxes, out) == max(1, int(2.5 * fetched // decoded))
