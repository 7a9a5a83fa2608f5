"""Faults on the write kinds beyond arrays (records appends, ragged appends, xarray
``append_dim=`` and region writes, DataTree writes, ``arrayds.upgrade``) and on
records and xarray reads, through the proxy on moto S3 and on fake-gcs-server
(``backend``, from conftest.py).

Each append runs under a seeded schedule of transient faults that includes a lost
reply to the manifest PUT: it commits exactly once or raises, the node then reads
exactly as before or after it (straight on the server), and ``verify`` passes. Reads
through the proxy return exactly the stored values or raise.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import arrayds
from arrayds.nodes import shards as store_mod
from arrayds.verify import verify

from .proxy import Rule

WRITES = ("PUT", "POST")
SCHEDULE = (
    Rule("lost", methods=WRITES, keys="manifest", limit=1),
    Rule("503", rate=0.1, limit=2),
    Rule("reset", rate=0.05, limit=1),
    Rule("500", rate=0.05, methods=WRITES, limit=1),
)
"""Transient faults, one lost manifest reply among them (bounded: quick retries)."""

READS = (
    Rule("truncate", methods=("GET",), keys="shard", limit=1),
    Rule("503", methods=("GET",), keys="manifest", limit=1),
    Rule("reset", methods=("GET",), keys="shard", skip=1, limit=1),
    Rule("503", rate=0.1, methods=("GET",), limit=2),
)
"""A cut shard body, a 503 on a manifest, a reset on a shard, and a few 503s more."""


def _attempts(faulty, write: Callable[[int], Any], read: Callable[[], Any], n: int) -> None:
    """``n`` writes under :data:`SCHEDULE`: each committed once or raised, never mixed."""
    faulty.proxy.set_schedule(SCHEDULE, seed=28)
    committed = 0
    for i in range(n):
        store_mod.clear_reader_cache()
        before = read()
        try:
            want = write(i)
        except (OSError, arrayds.CommitConflictError):
            after, want = read(), before
        else:
            after = read()
            committed += 1
        assert after == want, f"write {i}: neither exactly before nor exactly after"
    assert faulty.proxy.injected["lost"] == 1
    assert committed > 0
    assert not verify(faulty.url, storage_options=faulty.direct).problems


def test_records_appends_under_faults(faulty) -> None:
    url, direct = faulty.url, faulty.direct
    arrayds.to_arrayrecord([{"i": -1}], url, mode="w", storage_options=direct)

    def read() -> list:
        store_mod.clear_reader_cache()
        return list(arrayds.open(url, storage_options=direct)[:])

    def write(i: int) -> list:
        want = read() + [{"i": i}, {"i": i + 100}]
        arrayds.to_arrayrecord(
            [{"i": i}, {"i": i + 100}], url, mode="a", storage_options=faulty.opts
        )
        return want

    _attempts(faulty, write, read, 4)


def test_ragged_appends_under_faults(faulty) -> None:
    url, direct = faulty.url, faulty.direct
    arrayds.to_arrayrecord([np.arange(3.0)], url, mode="w", storage_options=direct)

    def read() -> list:
        store_mod.clear_reader_cache()
        return [a.tolist() for a in arrayds.open_ragged(url, storage_options=direct)[:]]

    def write(i: int) -> list:
        items = [np.full(i + 1, float(i)), np.arange(float(i + 2))]
        want = read() + [a.tolist() for a in items]
        arrayds.to_arrayrecord(items, url, mode="a", storage_options=faulty.opts)
        return want

    _attempts(faulty, write, read, 4)


def test_xarray_append_dim_under_faults(faulty) -> None:
    xr = pytest.importorskip("xarray")
    url, direct = faulty.url, faulty.direct

    def ds(start: int, n: int) -> Any:
        t = np.arange(start, start + n)
        return xr.Dataset(
            {"v": (("time", "x"), np.outer(t, [1.0, 2.0]))}, coords={"time": t, "x": [0, 1]}
        )

    arrayds.to_arrayrecord(ds(0, 2), url, mode="w", storage_options=direct)

    def read() -> dict:
        store_mod.clear_reader_cache()
        return xr.open_dataset(url, engine="arrayds", storage_options=direct).load().to_dict()

    def write(i: int) -> dict:
        cur = xr.Dataset.from_dict(read())
        more = ds(int(cur.sizes["time"]), 2)
        arrayds.to_arrayrecord(more, url, mode="a", append_dim="time", storage_options=faulty.opts)
        return xr.concat([cur, more], "time").to_dict()

    _attempts(faulty, write, read, 3)


def test_reads_under_faults(faulty) -> None:
    """A records data source batch and ``xr.open_dataset(...).load()`` through the
    proxy, under transient faults and truncated bodies: exactly the stored values (the
    faults are retried, short bodies never decoded)."""
    xr = pytest.importorskip("xarray")
    url, direct = faulty.url, faulty.direct
    records = [f"rec-{i}".encode() * (i + 1) for i in range(40)]
    arrayds.to_arrayrecord(records, f"{url}/r", mode="w", storage_options=direct)
    data = xr.Dataset({"v": (("t",), np.arange(50.0))}).chunk({"t": 10})
    arrayds.to_arrayrecord(data, f"{url}/x", mode="w", storage_options=direct)
    faulty.proxy.set_schedule(READS, seed=3)
    store_mod.clear_reader_cache()
    src = arrayds.ArrayRecordDataSource(f"{url}/r", storage_options=faulty.opts)
    idx = [0, 39, 7, 7, 20, 3]
    assert src.__getitems__(idx) == [records[i] for i in idx]  # transient: retried
    loaded = xr.open_dataset(f"{url}/x", engine="arrayds", storage_options=faulty.opts)
    np.testing.assert_array_equal(loaded.load()["v"].values, np.arange(50.0))
    assert faulty.proxy.injected["truncate"] == 1 and faulty.proxy.injected["503"] >= 1


def _xarray_with_a_commit_between_member_reads(faulty, version: bool) -> Any:
    """``xr.open_dataset`` through the proxy, of the version current when it starts
    (``version``) or of the current state, while another writer appends two time steps
    to the two-step dataset exactly between its reads of the members' manifests."""
    xr = pytest.importorskip("xarray")
    url, direct = faulty.url, faulty.direct

    def ds(start: int) -> Any:
        t = np.arange(start, start + 2)
        return xr.Dataset({"v": (("time",), t * 10)}, coords={"time": t})

    arrayds.to_arrayrecord(ds(0), url, mode="w", storage_options=direct)
    gen = arrayds.versions(url, storage_options=direct)[-1].generation

    def append() -> None:
        arrayds.to_arrayrecord(ds(2), url, mode="a", append_dim="time", storage_options=direct)

    member = r"/(time|v)/arrayds\.json$"
    rule = Rule("slow", delay=0, methods=("GET",), keys=member, limit=1, then=append)
    faulty.proxy.set_schedule([rule])
    store_mod.clear_reader_cache()
    got = xr.open_dataset(
        url, engine="arrayds", version=gen if version else None, storage_options=faulty.opts
    ).load()
    assert faulty.proxy.injected["slow"] == 1  # the other writer did commit in between
    return got


def test_a_current_xarray_read_is_one_commit_while_a_writer_appends(faulty) -> None:
    got = _xarray_with_a_commit_between_member_reads(faulty, version=False)
    assert got["time"].values.tolist() in ([0, 1], [0, 1, 2, 3])
    np.testing.assert_array_equal(got["v"].values, got["time"].values * 10)


def test_a_version_read_is_that_version_while_a_writer_appends(faulty) -> None:
    """The version current when the read starts, while another writer commits between
    the reads of its members: exactly that version (read again as a kept one)."""
    got = _xarray_with_a_commit_between_member_reads(faulty, version=True)
    assert got["time"].values.tolist() == [0, 1]
    assert got["v"].values.tolist() == [0, 10]


def _tree_read(url: str, direct: dict) -> dict:
    """Every group of the tree at ``url``, read straight from the server."""
    xr = pytest.importorskip("xarray")
    store_mod.clear_reader_cache()
    return {
        g: xr.open_dataset(url, engine="arrayds", group=g, storage_options=direct).load().to_dict()
        for g in (None, "g")
    }


def test_xarray_region_writes_under_faults(faulty) -> None:
    xr = pytest.importorskip("xarray")
    url, direct = faulty.url, faulty.direct
    t = np.arange(8)
    base = xr.Dataset({"v": (("time",), t * 1.0)}, coords={"time": t}).chunk({"time": 2})
    arrayds.to_arrayrecord(base, url, mode="w", storage_options=direct)

    def read() -> dict:
        store_mod.clear_reader_cache()
        return xr.open_dataset(url, engine="arrayds", storage_options=direct).load().to_dict()

    def write(i: int) -> dict:
        cur = xr.Dataset.from_dict(read())
        where = slice(2 * (i % 4), 2 * (i % 4) + 2)
        part = xr.Dataset({"v": (("time",), np.full(2, 100.0 + i))})
        arrayds.to_arrayrecord(
            part, url, mode="r+", region={"time": where}, storage_options=faulty.opts
        )
        cur["v"][where] = 100.0 + i
        return cur.to_dict()

    _attempts(faulty, write, read, 3)


def test_datatree_writes_under_faults(faulty) -> None:
    xr = pytest.importorskip("xarray")
    url, direct = faulty.url, faulty.direct

    def tree(i: int) -> Any:
        return xr.DataTree.from_dict(
            {
                "/": xr.Dataset({"a": (("x",), np.arange(3.0) + i)}),
                "/g": xr.Dataset({"b": (("y",), np.arange(2) * i)}),
            }
        )

    arrayds.to_arrayrecord(tree(0), url, mode="w", storage_options=direct)

    def write(i: int) -> dict:
        arrayds.to_arrayrecord(tree(i + 1), url, mode="w", storage_options=faulty.opts)
        return {
            None: tree(i + 1).to_dataset().to_dict(),
            "g": tree(i + 1)["g"].to_dataset(inherit=False).to_dict(),
        }

    _attempts(faulty, write, lambda: _tree_read(url, direct), 3)


V1 = Path(__file__).resolve().parents[1] / "data" / "datasets" / "v1"
"""A committed format 1 dataset (tests/data/datasets)."""
V1_NODES = ("", "g", "g/y", "r", "x")


def test_upgrade_under_faults(faulty) -> None:
    """``arrayds.upgrade`` through the proxy under :data:`SCHEDULE`, run until it
    succeeds: every run upgrades each node once or raises; after each, every node is
    whole in format 1 or 2, the data reads as before and ``verify`` passes."""
    import fsspec

    from arrayds.nodes import commit as commit_mod
    from arrayds.storage import get_store

    url, direct = faulty.url, faulty.direct
    fs, root = fsspec.core.url_to_fs(url, **direct)
    fs.put(str(V1), root, recursive=True)

    def read() -> tuple[Any, ...]:
        store_mod.clear_reader_cache()
        g = arrayds.open(url, storage_options=direct)
        return (g["x"][:].tolist(), list(g["r"][:]), g["g/y"][:].tolist())

    def versions() -> list[int]:
        st = get_store(url, direct)
        return [commit_mod.read(st, n).format_version for n in V1_NODES]

    data = read()
    assert versions() == [1] * len(V1_NODES)
    faulty.proxy.set_schedule(SCHEDULE, seed=28)
    for _ in range(4):
        try:
            arrayds.upgrade(url, storage_options=faulty.opts)
        except (OSError, arrayds.CommitConflictError):
            pass
        else:
            break
        assert set(versions()) <= {1, 2}
        assert read() == data
        assert not verify(url, storage_options=direct).problems
    assert faulty.proxy.injected["lost"] == 1
    assert versions() == [2] * len(V1_NODES)  # each node upgraded exactly once
    assert read() == data
    assert not verify(url, storage_options=direct).problems
    assert arrayds.upgrade(url, storage_options=direct) == []  # nothing left to upgrade
