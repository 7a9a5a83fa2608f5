"""Durable local commits (issue 10, item 5): before the rename that makes a manifest
visible, every shard it adds has had its bytes synced (before its own rename into
place), its folder synced (after that rename) and every folder the write created has
had its parent synced; after the manifest rename the node folder is synced.

The real os.fsync / os.fdatasync / os.replace run; a recorder wrapped around them
notes which path each one touched, in order (the path of a synced descriptor is read
from /proc/self/fd), for writes of every kind: numpy and dask arrays, records,
ragged arrays, an xarray dataset.
"""

from __future__ import annotations

import json
import os
import threading

import dask
import dask.array as da
import dask.bag as db
import numpy as np
import pytest

import arrayds
from arrayds import store as store_mod

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")


class Recorder:
    """Wraps os.fsync, os.fdatasync and os.replace; ``events`` is the ordered list of
    ("sync", path) and ("replace", src, dst)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, ...]] = []
        self._lock = threading.Lock()
        for name in ("fsync", "fdatasync"):
            if hasattr(os, name):
                monkeypatch.setattr(os, name, self._wrap_sync(getattr(os, name)))
        real_replace = os.replace

        def replace(src, dst, *args, **kwargs):
            real_replace(src, dst, *args, **kwargs)
            self._add(("replace", os.fspath(src), os.fspath(dst)))

        monkeypatch.setattr(os, "replace", replace)

    def _add(self, event: tuple[str, ...]) -> None:
        with self._lock:
            self.events.append(event)

    def _wrap_sync(self, real):
        def sync(fd):
            path = os.readlink(f"/proc/self/fd/{fd}")
            real(fd)
            self._add(("sync", path))

        return sync

    def index(self, pred, start: int = 0, stop: int | None = None) -> int:
        """First event index in [start, stop) matching ``pred``, or -1."""
        stop = len(self.events) if stop is None else stop
        for i in range(start, stop):
            if pred(self.events[i]):
                return i
        return -1

    def check_commit(self, root: str, node_folder: str) -> int:
        """Assert the last commit of ``node_folder`` was durable; returns how many
        shards it names."""
        manifest = os.path.join(node_folder, "arrayds.json")
        commits = [i for i, e in enumerate(self.events) if e[0] == "replace" and e[2] == manifest]
        assert commits, f"no manifest rename of {manifest}"
        c = commits[-1]
        tmp = self.events[c][1]
        assert self.index(lambda e: e == ("sync", tmp), 0, c) >= 0, "manifest tmp not synced"
        assert self.index(lambda e: e == ("sync", node_folder), c + 1) >= 0, (
            "the node folder is not synced after the manifest rename"
        )
        with open(manifest, "rb") as f:
            doc = json.loads(f.read())
        shards = sorted(store_mod.manifest_shard_paths(doc))
        for rel in shards:
            final = os.path.join(node_folder, *rel.split("/"))
            r = self.index(lambda e, final=final: e[0] == "replace" and e[2] == final, 0, c)
            assert r >= 0, f"{rel}: not renamed into place before the manifest"
            src = self.events[r][1]
            assert self.index(lambda e, src=src: e == ("sync", src), 0, r) >= 0, (
                f"{rel}: its bytes were not synced before its rename"
            )
            folder = os.path.dirname(final)
            assert self.index(lambda e, folder=folder: e == ("sync", folder), r + 1, c) >= 0, (
                f"{rel}: its folder was not synced between its rename and the manifest's"
            )
            # every folder from the shard's up to the root was created by this test's
            # writes: each one's parent must be synced before the commit
            d = folder
            while len(d) > len(os.path.dirname(root)):
                parent = os.path.dirname(d)
                assert self.index(lambda e, parent=parent: e == ("sync", parent), 0, c) >= 0, (
                    f"{d}: created, but its parent {parent} was not synced before the commit"
                )
                d = parent
        return len(shards)


@pytest.fixture
def rec(monkeypatch):
    return Recorder(monkeypatch)


def test_numpy_array_write_is_durable(rec, tmp_path):
    root = str(tmp_path / "ds")
    arrayds.to_arrayrecord(np.arange(4000.0).reshape(40, 100), root, "g/x", chunks=(10, 100))
    assert rec.check_commit(root, os.path.join(root, "g", "x")) >= 1
    a = arrayds.open_array(root, "g/x", mode="r+")
    a[3:5] = -1.0  # a selection write: one more shard, one more commit
    assert rec.check_commit(root, os.path.join(root, "g", "x")) >= 2


def test_dask_array_write_is_durable(rec, tmp_path):
    root = str(tmp_path / "ds")
    x = da.arange(64 * 64, chunks=512).reshape(64, 64).rechunk((8, 64))
    with dask.config.set(scheduler="threads"):
        arrayds.to_arrayrecord(x, root, shard_size="16KiB")
    assert rec.check_commit(root, root) >= 2


def test_records_write_is_durable(rec, tmp_path):
    root = str(tmp_path / "recs")
    items = [{"i": i, "v": np.full(20, i)} for i in range(300)]
    with dask.config.set(scheduler="threads"):
        arrayds.to_arrayrecord(db.from_sequence(items, npartitions=4), root)
    assert rec.check_commit(root, root) == 4
    arrayds.records.write_records(items[:10], root, mode="a", num_shards=2)
    assert rec.check_commit(root, root) == 6


def test_ragged_write_is_durable(rec, tmp_path):
    root = str(tmp_path / "clips")
    clips = [np.ones((2, 10 + 7 * i), np.float32) for i in range(12)]
    arrayds.to_arrayrecord(clips, root, piece_len=16)
    assert rec.check_commit(root, root) >= 1


def test_xarray_write_is_durable(rec, tmp_path):
    xr = pytest.importorskip("xarray")
    root = str(tmp_path / "era")
    ds = xr.Dataset(
        {"t": (("time", "x"), np.arange(60.0).reshape(6, 10)), "p": ("time", np.arange(6.0))},
        coords={"time": np.arange(6)},
    )
    arrayds.to_arrayrecord(ds, root)
    # the group snapshot names the members' shards (in <member>/c/): all synced
    assert rec.check_commit(root, root) >= 3
