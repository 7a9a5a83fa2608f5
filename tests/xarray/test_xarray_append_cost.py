"""An xarray append costs what it writes, not what was written before.

* An append reads no stored data: with the old shard files of ``time`` and ``t2m``
  deleted, the append still succeeds, and the appended times are encoded with the
  stored units, calendar and dtype.
* The commit of an append (the group snapshot, then the roll forward of each member)
  extends the stored shard logs without resolving or comparing the entries before
  the new ones (:class:`arrayds.nodes.history.Appended`); a list that is not the one
  the writer extended is still compared and written anew.
* Small in-memory steps run without a dask graph; dask data still goes through one.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import arrayds
from arrayds.nodes import history as log
from arrayds.storage import get_store

GRID = (4, 5)


def step(i: int, n: int = 1) -> xr.Dataset:
    """``n`` time steps starting at hour ``i``, as bench_scale's xarray steps."""
    rng = np.random.default_rng(i)
    ds = xr.Dataset(
        {"t2m": (("time", "lat", "lon"), rng.standard_normal((n, *GRID), dtype="f4"))},
        coords={
            "time": np.datetime64("2020-01-01T00", "h") + np.arange(i, i + n).astype("m8[h]"),
            "lat": np.linspace(-90, 90, GRID[0]),
            "lon": np.linspace(0, 360, GRID[1], endpoint=False),
        },
    )
    ds["time"].encoding = {"units": "hours since 2020-01-01", "dtype": "int64"}
    return ds


def grow(url: str, n: int) -> xr.Dataset:
    """Write step 0, append steps 1..n-1; returns the whole dataset written."""
    step(0).arrayds.to_arrayrecord(url, mode="w")
    for i in range(1, n):
        step(i).arrayds.to_arrayrecord(url, append_dim="time", compact=False)
    return xr.concat([step(i) for i in range(n)], dim="time")


def head(url: str, node: str = "") -> dict:
    with open(os.path.join(url, node, "arrayds.json")) as f:
        return json.load(f)


def test_append_reads_no_stored_data(tmp_path):
    url = str(tmp_path / "x.ads")
    grow(url, 3)
    for var in ("time", "t2m"):
        folder = os.path.join(url, var, "c")
        for name in os.listdir(folder):
            os.remove(os.path.join(folder, name))
    step(3).arrayds.to_arrayrecord(url, append_dim="time", compact=False)
    t = arrayds.open_array(url, "time")
    assert t.shape == (4,)
    assert t.attrs["units"] == "hours since 2020-01-01"
    assert t.dtype == np.dtype("int64")
    assert t[3:].tolist() == [3]  # hours since 2020-01-01, in the stored encoding
    assert arrayds.open_array(url, "t2m")[3].tolist() == step(3)["t2m"].values[0].tolist()


def test_long_history_appends_round_trip(tmp_path):
    """Across several tail flushes and segment merges (TAIL_LIMIT entries each), the
    group snapshot, the members' own manifests and the data agree."""
    url = str(tmp_path / "x.ads")
    n = 3 * log.TAIL_LIMIT + 5
    want = grow(url, n)
    got = xr.open_dataset(url, engine="arrayds")
    xr.testing.assert_identical(got.load(), want.load())
    snap = head(url)["snapshot"]["members"]
    for var in ("time", "t2m"):
        own = head(url, var)
        assert isinstance(own["shards"], dict) and own["shards"]["segments"]
        assert (own["generation"], own["commit"]) == (
            snap[var]["generation"],
            snap[var]["commit"],
        )
        store = get_store(url)
        # the snapshot's copy and the member's own manifest list the same shards
        assert (
            log.resolve(store, "", head(url), "g")["snapshot"]["members"][var]["shards"]
            == (log.resolve(store, var, own, var)["shards"])
        )
        assert arrayds.open_array(url, var).shape[0] == n


def test_appended_list_extends_without_reading_the_old_entries():
    store = get_store("memory://xr-append-cost-encode")
    entries = [{"path": f"c/{i}", "start": [i], "stop": [i + 1]} for i in range(40)]
    base_head, segs = log.encode(
        store, "n", {"generation": 3, "commit": "w3", "shards": entries}, None
    )
    assert segs and base_head["shards"]["segments"]  # a long list: a segment and a tail
    new_entry = {"path": "c/40", "start": [40], "stop": [41]}
    full = [*entries, new_entry]

    # the segment is gone (and not cached): only a commit that never reads it works
    store.delete([f"n/{p}" for p in segs])
    log.clear_cache()
    new = {"generation": 4, "commit": "w4", "shards": log.Appended(full[:40], full[40:], (3, "w3"))}
    added: dict = {}
    got, _ = log.encode(store, "n", new, base_head, lambda: None, added)
    assert added[""] == [new_entry]
    assert got["shards"]["segments"] == base_head["shards"]["segments"]
    assert got["shards"]["tail"] == [*base_head["shards"]["tail"], new_entry]
    with pytest.raises(arrayds.CorruptionError, match="missing"):
        # a list of another manifest (another stamp) is compared with the stored one
        other = dict(new, shards=log.Appended(full[:40], full[40:], (2, "w2")))
        log.encode(store, "n", other, base_head, lambda: None, added)


def test_appended_list_of_another_manifest_is_compared():
    store = get_store("memory://xr-append-cost-compare")
    entries = [{"path": f"c/{i}", "start": [i], "stop": [i + 1]} for i in range(40)]
    base_head, _ = log.encode(
        store, "n", {"generation": 3, "commit": "w3", "shards": entries}, None
    )
    new_entry = {"path": "c/40", "start": [40], "stop": [41]}
    added: dict = {}
    other = {"generation": 4, "commit": "w4"}
    # another stamp, but an append of the stored list: appended
    other["shards"] = log.Appended(entries, [new_entry], (2, "w2"))
    got, _ = log.encode(store, "n", other, base_head, lambda: None, added)
    assert added[""] == [new_entry]
    assert log.resolve(store, "n", got, "n")["shards"] == [*entries, new_entry]
    # another stamp and not an append of it: written anew
    changed = [dict(entries[0], path="c/x"), *entries[1:], new_entry]
    other["shards"] = log.Appended(changed[:40], changed[40:], (2, "w2"))
    got, _ = log.encode(store, "n", other, base_head, lambda: None, added)
    assert added[""] == changed
    assert log.resolve(store, "n", got, "n")["shards"] == changed
    # the right stamp but another count: compared too
    other["shards"] = log.Appended(changed[:39], changed[39:], (3, "w3"))
    got, _ = log.encode(store, "n", other, base_head, lambda: None, added)
    assert log.resolve(store, "n", got, "n")["shards"] == changed


def test_append_after_an_array_api_write_to_a_member(tmp_path):
    """A member changed through the array API after the dataset commit has a newer
    own manifest than the snapshot's copy: the next dataset append extends that one,
    and the snapshot's older list is replaced, not appended to."""
    url = str(tmp_path / "x.ads")
    want = grow(url, log.TAIL_LIMIT + 3)
    t2m = arrayds.open_array(url, "t2m", mode="r+")
    t2m[0] = np.full(GRID, 7.0, "f4")
    want["t2m"][0] = 7.0
    step(log.TAIL_LIMIT + 3).arrayds.to_arrayrecord(url, append_dim="time", compact=False)
    want = xr.concat([want, step(log.TAIL_LIMIT + 3)], dim="time")
    got = xr.open_dataset(url, engine="arrayds").load()
    xr.testing.assert_identical(got, want.load())
    own, snap = head(url, "t2m"), head(url)["snapshot"]["members"]["t2m"]
    assert (own["generation"], own["commit"]) == (snap["generation"], snap["commit"])


def test_in_memory_step_returns_the_committed_group(tmp_path):
    url = str(tmp_path / "x.ads")
    step(0).arrayds.to_arrayrecord(url, mode="w")
    g = step(1).arrayds.to_arrayrecord(url, append_dim="time", compact=False)
    assert isinstance(g, arrayds.Group)
    assert g == arrayds.open_group(url)
    assert sorted(g) == ["lat", "lon", "t2m", "time"]
    assert g["t2m"].shape == (2, *GRID)


def test_dask_and_numpy_steps_store_the_same(tmp_path):
    a, b = str(tmp_path / "a.ads"), str(tmp_path / "b.ads")
    two = step(0, 2)
    two.arrayds.to_arrayrecord(a, mode="w")
    two.chunk({"time": 1}).arrayds.to_arrayrecord(b, mode="w")
    for i in (2, 3):
        step(i).arrayds.to_arrayrecord(a, append_dim="time", compact=False)
        step(i).chunk({"time": 1}).arrayds.to_arrayrecord(b, append_dim="time", compact=False)
    xa = xr.open_dataset(a, engine="arrayds").load()
    xb = xr.open_dataset(b, engine="arrayds").load()
    xr.testing.assert_identical(xa, xb)
    assert xa.sizes["time"] == 4
    np.testing.assert_array_equal(
        xa["time"].values, pd.date_range("2020-01-01", periods=4, freq="h").values
    )
