"""Reading old versions (docs/guide.md, Versions and time travel): ``version=`` /
``as_of=`` on every entry point that opens a node by URL, on local, memory://, S3 (moto)
and GCS (fake-gcs-server) stores; old handles are read only; bad input is refused with the
message that names the versions kept."""

from __future__ import annotations

import pickle
import re
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

import arrayds
from arrayds import ragged as rg
from arrayds import records as records


def _array_history(w):
    """An array with appends, a region overwrite and an attrs change; returns
    {generation: (values, attrs)} of every version."""
    a = arrayds.open_array(
        w.url, "x", mode="w", shape=(0, 3), dtype="i4", chunks=(2, 3), storage_options=w.so
    )
    out = {a.generation: (np.zeros((0, 3), "i4"), {})}
    for i in range(3):
        a.append(np.full((2, 3), i, "i4"))
        out[a.generation] = (a[:], {})
    a[0:2] = 9  # a region overwrite
    out[a.generation] = (a[:], {})
    a.attrs["units"] = "m"
    out[a.generation] = (a[:], {"units": "m"})
    return out


def test_every_array_version_reads_as_it_was(where):
    hist = _array_history(where)
    vs = arrayds.versions(where.url, "x", storage_options=where.so)
    assert [v.generation for v in vs] == sorted(hist)
    assert [v.current for v in vs] == [False] * (len(hist) - 1) + [True]
    assert all(v.time is not None and v.time.tzinfo is not None for v in vs)
    for g, (values, attrs) in hist.items():
        a = arrayds.open_array(where.url, "x", version=g, storage_options=where.so)
        np.testing.assert_array_equal(a[:], values)
        assert dict(a.attrs) == attrs and a.version == g and a.read_only
        d = arrayds.from_arrayrecord(where.url, "x", version=g, storage_options=where.so)
        np.testing.assert_array_equal(d.compute(), values)
    # a pinned array pickles as its snapshot (dask workers read the same version)
    old = arrayds.open_array(where.url, "x", version=2, storage_options=where.so)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(old))[:], hist[2][0])


def test_as_of_picks_the_newest_version_committed_by_then(quick):
    hist = _array_history(quick)
    vs = arrayds.versions(quick.url, "x")
    for v in vs:
        a = arrayds.open_array(quick.url, "x", as_of=v.time)
        assert a.version == v.generation
        np.testing.assert_array_equal(a[:], hist[v.generation][0])
    # a naive datetime is UTC
    naive = vs[1].time.astimezone(timezone.utc).replace(tzinfo=None)
    assert arrayds.open_array(quick.url, "x", as_of=naive).version == vs[1].generation
    # later than the newest commit: the current version
    later = datetime.now(timezone.utc) + timedelta(days=1)
    assert arrayds.open_array(quick.url, "x", as_of=later).version == vs[-1].generation
    with pytest.raises(ValueError, match="no version was committed at or before"):
        arrayds.open_array(quick.url, "x", as_of=vs[0].time - timedelta(seconds=1))


def test_old_handles_are_read_only_and_say_which_version(quick):
    _array_history(quick)
    a = arrayds.open_array(quick.url, "x", version=2)
    with pytest.raises(PermissionError, match="at version 2 is open read-only"):
        a[0] = 1
    with pytest.raises(PermissionError, match="at version 2"):
        a.append(np.zeros((2, 3), "i4"))
    with pytest.raises(PermissionError, match="at version 2"):
        a.attrs["k"] = 1
    g = arrayds.open(quick.url, version=1)
    with pytest.raises(PermissionError, match="at version 1"):
        g.attrs["k"] = 1
    with pytest.raises(PermissionError, match="at version 1"):
        g.create_group("new")
    # a version is opened read only: another mode is refused before anything is read
    for mode in ("r+", "a", "w", "w-"):
        with pytest.raises(ValueError, match=re.escape(f"read only (mode 'r'), got mode '{mode}'")):
            arrayds.open_array(quick.url, "x", mode=mode, version=2)
        with pytest.raises(ValueError, match="read only"):
            arrayds.open(quick.url, mode=mode, version=1)
    assert arrayds.open_array(quick.url, "x").generation == 6  # nothing was written


ENTRY_POINTS = {
    "open": lambda w, **kw: arrayds.open(w.url + "/x", **kw),
    "open_array": lambda w, **kw: arrayds.open_array(w.url, "x", **kw),
    "open_group": lambda w, **kw: arrayds.open_group(w.url, **kw),
    "from_arrayrecord": lambda w, **kw: arrayds.from_arrayrecord(w.url, "x", **kw),
    "xarray": lambda w, **kw: __import__("xarray").open_dataset(
        w.url, engine="arrayds", group="x", **kw
    ),
}


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_bad_versions_are_refused_by_every_entry_point(quick, entry):
    _array_history(quick)
    if entry == "open_group":  # the root group: versions 1 and 2
        arrayds.open(quick.url, mode="r+").attrs["k"] = 1
    open_ = ENTRY_POINTS[entry]
    with pytest.raises(ValueError, match=r"no version 99; the versions kept are 1, 2") as e:
        open_(quick, version=99)
    assert "versions, committed" in str(e.value)
    with pytest.raises(ValueError, match="no version 0"):
        open_(quick, version=0)
    with pytest.raises(TypeError, match="version must be an int, got '2'"):
        open_(quick, version="2")
    with pytest.raises(TypeError, match="version must be an int"):
        open_(quick, version=True)
    with pytest.raises(TypeError, match="as_of must be a datetime"):
        open_(quick, as_of="2026-01-01")
    with pytest.raises(ValueError, match="give version= or as_of=, not both"):
        open_(quick, version=1, as_of=datetime.now(timezone.utc))
    with pytest.raises(ValueError, match="no version was committed at or before"):
        open_(quick, as_of=datetime(2000, 1, 1))


@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_a_missing_node_is_file_not_found_with_a_version(quick, entry):
    arrayds.open(quick.url, mode="w")
    w = type(quick)(quick.url + "/nothing") if entry == "open_group" else quick
    with pytest.raises(FileNotFoundError):
        ENTRY_POINTS[entry](w, version=1)


def test_versions_of_a_missing_node_is_file_not_found(quick):
    with pytest.raises(FileNotFoundError, match="no arrayds node"):
        arrayds.versions(quick.url)
    arrayds.open(quick.url, mode="w")
    with pytest.raises(FileNotFoundError):
        arrayds.versions(quick.url, "x")
    with pytest.raises(ValueError, match="reserved"):
        arrayds.versions(quick.url, "_arrayds")


def test_a_group_version_reads_its_children_as_they_were_then(quick):
    g = arrayds.open(quick.url, mode="w")  # the root: version 1
    a = g.create_array("x", shape=(0,), dtype="i2", chunks=2)
    a.append(np.arange(2, dtype="i2"))
    g.attrs["step"] = 1  # the root: version 2
    a.append(np.arange(2, dtype="i2"))
    g.create_array("later", shape=(1,), dtype="i2", chunks=1)
    g.attrs["step"] = 2  # the root: version 3
    a.append(np.arange(2, dtype="i2"))
    # version N stands for the last moment it was current
    one = arrayds.open(quick.url, version=1)
    assert one["x"].shape == (2,) and one["x"].version == 2 and one["x"].read_only
    with pytest.raises(KeyError, match="'later' is not a node"):
        one["later"]
    two = arrayds.open(quick.url, version=2)
    assert dict(two.attrs) == {"step": 1} and two["x"].shape == (4,)
    assert two["later"].shape == (1,)
    three = arrayds.open(quick.url, version=3)  # the current version: children now
    assert three["x"].shape == (6,) and three.read_only and three.version == 3
    with pytest.raises(PermissionError):
        three["x"][0] = 1
    # as_of: the children as of that time too
    t = arrayds.versions(quick.url, "x")[2].time  # x after its 2nd append
    at = arrayds.open_group(quick.url, as_of=t)
    assert at.version == 2 and at["x"].shape == (4,)
    # a pinned group pickles as the same version
    back = pickle.loads(pickle.dumps(one))
    assert back.version == 1 and back["x"].shape == (2,)


def test_records_versions(where):
    url = where.url + "/r"
    records.write_records([{"i": i} for i in range(4)], url, storage_options=where.so)
    records.write_records([{"i": 4}], url, mode="a", storage_options=where.so)
    records.write_records([{"i": 5}, {"i": 6}], url, mode="a", storage_options=where.so)
    lens = {1: 4, 2: 5, 3: 7}
    for g, n in lens.items():
        ds = records.open_records(url, version=g, storage_options=where.so)
        assert len(ds) == n
        got = records.read_records(url, version=g, storage_options=where.so).compute(
            scheduler="sync"
        )
        assert [x["i"] for x in got] == list(range(n))
        src = records.data_source(url, version=g, decode=True, storage_options=where.so)
        assert len(src) == n and src[n - 1] == {"i": n - 1}
        bag = arrayds.from_arrayrecord(url, version=g, storage_options=where.so)
        assert [x["i"] for x in bag.compute(scheduler="sync")] == list(range(n))
        src = arrayds.ArrayRecordDataSource(url, version=g, storage_options=where.so)
        assert len(src) == n
        assert ds[n - 1] == {"i": n - 1} and ds.version == g  # random access: that version
    assert records.open_records(url, storage_options=where.so).version is None
    with pytest.raises(ValueError, match="no version 4; the versions kept are 1, 2, 3"):
        records.open_records(url, version=4, storage_options=where.so)
    with pytest.raises(ValueError, match="no version 4; the versions kept are 1, 2, 3"):
        arrayds.ArrayRecordDataSource(url, version=4, storage_options=where.so)
    with pytest.raises(ValueError, match="not both"):
        arrayds.ArrayRecordDataSource(
            url, version=1, as_of=datetime.now(timezone.utc), storage_options=where.so
        )
    with pytest.raises(TypeError, match="version must be an int"):
        records.RecordsDataset(url, version=1.0, storage_options=where.so)
    with pytest.raises(FileNotFoundError):
        records.open_records(where.url + "/none", version=1, storage_options=where.so)
    shard = records.open_records(url, storage_options=where.so).shard_paths[0]
    with pytest.raises(ValueError, match="need the URL of a records dataset"):
        arrayds.ArrayRecordDataSource(shard, version=1, storage_options=where.so)


def test_ragged_versions(quick):
    url = quick.url + "/rg"
    rg.write_ragged([np.arange(3), np.arange(5)], url)
    rg.write_ragged([np.arange(1)], url, mode="a")
    assert len(rg.open_ragged(url, version=1)) == 2
    old = rg.open_ragged(url, version=1)
    assert old.version == 1 and old.read_only
    assert [x.tolist() for x in rg.read_ragged(url, version=1).compute(scheduler="sync")] == [
        [0, 1, 2],
        [0, 1, 2, 3, 4],
    ]
    assert len(rg.open_ragged(url, version=2)) == 3 and rg.open_ragged(url).version is None
    assert len(arrayds.from_arrayrecord(url, version=1).compute(scheduler="sync")) == 2
    with pytest.raises(ValueError, match="no version 3; the versions kept are 1, 2"):
        rg.open_ragged(url, version=3)
    with pytest.raises(ValueError, match="not both"):
        rg.open_ragged(url, version=1, as_of=datetime.now(timezone.utc))
    with pytest.raises(FileNotFoundError):
        rg.open_ragged(quick.url + "/none", version=1)
    records.write_records([b"x"], quick.url + "/rec")
    with pytest.raises(ValueError, match="not a ragged array"):
        rg.open_ragged(quick.url + "/rec", version=1)


def test_mode_w_starts_a_new_history(quick):
    a = arrayds.open_array(quick.url, mode="w", shape=(2,), dtype="i1", chunks=1)
    a[:] = 1
    a[:] = 2
    assert len(arrayds.versions(quick.url)) == 3
    arrayds.open_array(quick.url, mode="w", shape=(3,), dtype="i1", chunks=1)
    vs = arrayds.versions(quick.url)
    assert len(vs) == 1 and vs[0].current
    with pytest.raises(ValueError, match="keeps only the current version"):
        arrayds.open_array(quick.url, version=1)


def test_format_1_nodes_keep_only_their_current_version(quick):
    from arrayds.kinds.array.create import new_array_manifest
    from arrayds.nodes import commit
    from arrayds.storage import get_store

    st = get_store(quick.url, None)
    m = new_array_manifest((4,), "i4", 2).to_json()
    commit.commit(st, "v1", lambda b: m, write_id=commit.new_write_id(), format_version=1)
    a = arrayds.open_array(quick.url, "v1", mode="r+")
    a[:] = [1, 2, 3, 4]
    a[:2] = 0
    vs = arrayds.versions(quick.url, "v1")
    assert [(v.generation, v.current) for v in vs] == [(3, True)] and vs[0].time is None
    assert arrayds.open_array(quick.url, "v1", version=3)[:].tolist() == [0, 0, 3, 4]
    with pytest.raises(ValueError, match="no version 2; the history keeps only"):
        arrayds.open_array(quick.url, "v1", version=2)
    # as_of on a node without commit times: its current state
    assert arrayds.open_array(quick.url, "v1", as_of=datetime(2000, 1, 1)).version == 3


def test_time_moves_forward_between_versions(quick):
    a = arrayds.open_array(quick.url, mode="w", shape=(1,), dtype="i1", chunks=1)
    a[:] = 1
    a[:] = 2
    t = [v.time for v in arrayds.versions(quick.url)]
    assert t == sorted(t)
