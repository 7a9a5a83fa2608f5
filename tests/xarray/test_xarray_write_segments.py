"""xarray dataset writes of many chunks commit segment references, not entries: the
tasks that wrote a variable's shards write its manifest segments (one in the member,
one in the group, each node storing its copy of the member's list), and the commit
task receives only their references, in every mode that adds entries (a new dataset,
mode ``"w"`` over an old one, appends along a dimension, an append placed after
another writer's). Real writes on local folders, ``SEGMENT_LIMIT`` made small and
the graphs run in this process (so the tasks see it); one write of more than the
real limit runs on a dask.distributed cluster of processes."""

from __future__ import annotations

import glob
import json
import os

import dask
import dask.array as da
import numpy as np
import pytest
import xarray as xr

import arrayds
from arrayds.errors import CommitConflictError
from arrayds.nodes import history as log
from arrayds.storage import get_store
from arrayds.tools.verify import verify

LIMIT = 8
N = 5 * LIMIT + 3


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setattr(log, "SEGMENT_LIMIT", LIMIT)
    with dask.config.set(scheduler="sync"):
        yield


def _dataset(n: int, start: int = 0) -> xr.Dataset:
    t = da.arange(start, start + n, chunks=1)
    return xr.Dataset(
        {"v": (("t",), t), "w": (("t",), t * 2), "c": ((), 7)},
        coords={"t": np.arange(start, start + n)},
    )


def _head(url: str, node: str = "") -> dict:
    with open(os.path.join(url, node, "arrayds.json")) as f:
        return json.load(f)


def _check(url: str, n: int) -> None:
    got = xr.open_dataset(url, engine="arrayds").load()
    np.testing.assert_array_equal(got.v.values, np.arange(n))
    np.testing.assert_array_equal(got.w.values, 2 * np.arange(n))
    store = get_store(url)
    snap = log.resolve(store, "", _head(url), "g")["snapshot"]["members"]
    for var in ("v", "w"):
        own = _head(url, var)
        assert (own["generation"], own["commit"]) == (
            snap[var]["generation"],
            snap[var]["commit"],
        )
        assert snap[var]["shards"] == log.resolve(store, var, own, var)["shards"]
    assert verify(url, progress=False).ok


def _commit_inputs(delayed) -> list[str]:
    """The keys the commit task of a dataset write's graph depends on."""
    graph = dict(delayed.__dask_graph__())
    return [str(k) for k in graph[delayed.key].dependencies]


def test_a_new_dataset_commits_segment_references(tmp_path, small):
    url = str(tmp_path / "ds")
    delayed = arrayds.to_arrayrecord(_dataset(N), url, shard_size=1, compute=False)
    inputs = _commit_inputs(delayed)
    segs = [k for k in inputs if "segment" in k]
    # v, w and the coordinate t (chunked as they are): a reference per LIMIT shards
    assert len(segs) == 3 * -(-N // LIMIT)
    assert len(inputs) - len(segs) == 1  # the one shard of c: its entry
    delayed.compute()
    for var in ("v", "w"):
        group_refs = _head(url)["snapshot"]["members"][var]["shards"]["segments"]
        own_refs = _head(url, var)["shards"]["segments"]
        assert [r["count"] for r in group_refs] == [r["count"] for r in own_refs]
        assert sum(r["count"] for r in own_refs) == N
    _check(url, N)


def test_appends_add_segments_after_the_stored_lists(tmp_path, small):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(_dataset(N), url, shard_size=1)
    before = {var: _head(url, var)["shards"]["segments"] for var in ("v", "w")}
    arrayds.to_arrayrecord(_dataset(N, N), url, mode="a", append_dim="t", shard_size=1)
    for var in ("v", "w"):
        after = _head(url, var)["shards"]["segments"]
        assert after[: len(before[var])] == before[var]  # nothing stored rewritten
    _check(url, 2 * N)
    # an append of a few chunks (a commit holding the entries) after it
    arrayds.to_arrayrecord(_dataset(3, 2 * N), url, mode="a", append_dim="t", shard_size=1)
    _check(url, 2 * N + 3)


def test_mode_w_replaces_a_dataset_and_removes_its_files(tmp_path, small):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(_dataset(N), url, shard_size=1)
    old = set(glob.glob(os.path.join(url, "*", "c", "*")))
    arrayds.to_arrayrecord(_dataset(N + 4), url, mode="w", shard_size=1)
    assert not old & set(glob.glob(os.path.join(url, "*", "c", "*")))
    _check(url, N + 4)


def test_an_append_placed_after_another_writers_moves_its_segments(tmp_path, small):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(_dataset(N), url, shard_size=1)
    # planned on N rows; another writer appends first: this one goes after it
    late = arrayds.to_arrayrecord(
        _dataset(N, N).assign_coords(t=np.arange(N + 2, 2 * N + 2)),
        url,
        mode="a",
        append_dim="t",
        shard_size=1,
        compute=False,
    )
    arrayds.to_arrayrecord(_dataset(2, N), url, mode="a", append_dim="t", shard_size=1)
    late.compute()
    got = xr.open_dataset(url, engine="arrayds").load()
    want = np.concatenate([np.arange(N), np.arange(N, N + 2), np.arange(N, 2 * N)])
    np.testing.assert_array_equal(got.v.values, want)
    np.testing.assert_array_equal(got.t.values, np.arange(2 * N + 2))
    assert verify(url, progress=False).ok


def test_a_refused_commit_removes_its_segments(tmp_path, small):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(_dataset(N), url, shard_size=1)
    logs = glob.glob(os.path.join(url, "**", "_arrayds", "log", "*"), recursive=True)
    late = arrayds.to_arrayrecord(
        _dataset(N, N), url, mode="a", append_dim="t", shard_size=1, retries=0, compute=False
    )
    arrayds.to_arrayrecord(_dataset(N + 1), url, mode="w", shard_size=1)
    committed = set(glob.glob(os.path.join(url, "**", "_arrayds", "log", "*"), recursive=True))
    with pytest.raises(CommitConflictError, match="another writer"):
        late.compute()
    now = set(glob.glob(os.path.join(url, "**", "_arrayds", "log", "*"), recursive=True))
    assert now == committed and logs  # its segments (group and members) are gone
    _check(url, N + 1)


def test_a_long_write_on_a_cluster_of_processes(tmp_path):
    distributed = pytest.importorskip("distributed", reason="distributed is in [dask]")
    url = str(tmp_path / "ds")
    n = log.SEGMENT_LIMIT + 40
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
            silence_logs=40,
        ) as cluster,
        distributed.Client(cluster),
    ):  # fmt: skip
        arrayds.to_arrayrecord(_dataset(n), url, shard_size=1)
        arrayds.to_arrayrecord(_dataset(n, n), url, mode="a", append_dim="t", shard_size=1)
    assert len(_head(url, "v")["shards"]["segments"]) >= 4
    _check(url, 2 * n)


def test_a_region_write_rewrites_only_the_segments_it_cuts(tmp_path, small):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(_dataset(N), url, shard_size=1)
    own = _head(url, "v")["shards"]["segments"]
    copy = _head(url)["snapshot"]["members"]["v"]["shards"]["segments"]
    lo, hi = 2 * LIMIT + 2, 2 * LIMIT + 5  # inside the third segment of each copy
    patch = (_dataset(N).isel(t=slice(lo, hi))[["v"]] * 0 - 1).drop_vars("t")
    log.clear_cache()
    arrayds.to_arrayrecord(patch, url, mode="r+", region={"t": slice(lo, hi)}, shard_size=1)
    # the segment the region meets (read once), and the new one of each copy
    assert len(log._cache) <= 3
    for before, after in (
        (own, _head(url, "v")["shards"]["segments"]),
        (copy, _head(url)["snapshot"]["members"]["v"]["shards"]["segments"]),
    ):
        same = [i for i, r in enumerate(before) if r in after]
        assert same == [i for i in range(len(before)) if i != 2]
    got = xr.open_dataset(url, engine="arrayds").load()
    want = np.arange(N)
    want[lo:hi] = -1
    np.testing.assert_array_equal(got.v.values, want)
    np.testing.assert_array_equal(got.w.values, 2 * np.arange(N))
    assert verify(url, progress=False).ok


def test_a_group_attribute_change_keeps_the_member_lists_unread(tmp_path, small):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(_dataset(N), url, shard_size=1)
    copy = _head(url)["snapshot"]["members"]["v"]["shards"]
    log.clear_cache()
    arrayds.open(url, mode="r+").attrs["title"] = "t"
    assert len(log._cache) == 0
    assert _head(url)["snapshot"]["members"]["v"]["shards"] == copy
    assert xr.open_dataset(url, engine="arrayds").attrs["title"] == "t"
    _check(url, N)
