"""Ragged arrays: layout, selections vs numpy per item, partial reads, bags, errors."""

from __future__ import annotations

import io
import pickle

import dask.bag as db
import numpy as np
import pytest
from array_record.python import array_record_module as official
from dask.delayed import Delayed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import arrayds
from arrayds import ragged as rg
from arrayds.kinds.ragged import handle as rg_handle
from arrayds.nodes.shards import clear_reader_cache, io_stats, reset_io_stats


def clips(n: int = 12, seed: int = 0, ch: int = 2, dtype: str = "f4") -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((ch, int(rng.integers(0, 300)))).astype(dtype) for _ in range(n)]


@pytest.fixture
def items() -> list[np.ndarray]:
    return clips()


@pytest.fixture
def ra(tmp_path, items) -> rg.RaggedArray:
    # small pieces and shards so that selections cross pieces and shard files
    return rg.write_ragged(items, tmp_path / "clips", piece_len=32, shard_size=4000)


def test_round_trip_metadata_and_items(ra, items):
    assert len(ra) == len(items)
    assert ra.dtype == np.float32 and ra.ndim == 2 and ra.axis == 1 and ra.piece_len == 32
    assert ra.nshards > 2
    assert ra.shapes == [x.shape for x in items]
    assert ra.lengths.tolist() == [x.shape[1] for x in items]
    for i, x in enumerate(items):
        got = ra[i]
        assert got.dtype == x.dtype and got.shape == x.shape
        np.testing.assert_array_equal(got, x)
    np.testing.assert_array_equal(ra[-1], items[-1])
    for got, x in zip(ra, items, strict=True):
        np.testing.assert_array_equal(got, x)
    assert [a.shape for a in ra[[3, 0, 3]]] == [items[3].shape, items[0].shape, items[3].shape]
    assert len(ra[2:9:3]) == 3
    assert ra.nbytes == sum(x.nbytes for x in items)
    reopened = arrayds.ragged.open_ragged(ra.url)
    np.testing.assert_array_equal(reopened[5], items[5])
    assert "RaggedArray" in repr(ra) and "<table>" in ra._repr_html_()


def test_results_are_writable_copies(ra, items):
    x = ra[0, :, :10]
    x[...] = 7  # not a view of the engine's buffer
    np.testing.assert_array_equal(ra[0, :, :10], items[0][:, :10])


def test_awkward_style_selection_truncates_per_item(ra, items):
    got = ra[[1, 4, 7], 0, 10:100]
    for g, i in zip(got, [1, 4, 7], strict=True):
        np.testing.assert_array_equal(g, items[i][0, 10:100])
    # no padding: each result has its own length
    assert [g.shape for g in got] == [items[i][0, 10:100].shape for i in [1, 4, 7]]
    np.testing.assert_array_equal(ra[3, ..., -5:], items[3][..., -5:])
    mask = np.zeros(len(items), dtype=bool)
    mask[[2, 5]] = True
    assert len(ra[mask, 1]) == 2


def test_pad(ra, items):
    dense = ra.pad(50, fill=-1)
    assert dense.shape == (len(items), 2, 50) and dense.dtype == np.float32
    for i, x in enumerate(items):
        n = min(50, x.shape[1])
        np.testing.assert_array_equal(dense[i, :, :n], x[:, :n])
        assert (dense[i, :, n:] == -1).all()
    full = ra.pad()
    assert full.shape == (len(items), 2, max(x.shape[1] for x in items))
    sub = ra.pad(5, items=[2, 0])
    np.testing.assert_array_equal(sub[1, :, : min(5, items[0].shape[1])], items[0][:, :5])
    with pytest.raises(ValueError, match="pad length"):
        ra.pad(-1)


_item_axis = st.one_of(
    st.integers(-3, 2),
    st.builds(
        slice,
        st.none() | st.integers(-400, 400),
        st.none() | st.integers(-400, 400),
        st.none() | st.integers(-70, 70).filter(lambda s: s != 0),
    ),
    st.lists(st.integers(-2, 1), min_size=0, max_size=3),
)
_time_axis = st.one_of(
    st.builds(
        slice,
        st.none() | st.integers(-400, 400),
        st.none() | st.integers(-400, 400),
        st.none() | st.integers(-70, 70).filter(lambda s: s != 0),
    ),
    st.lists(st.integers(0, 20), min_size=0, max_size=4),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    sel=st.one_of(
        st.integers(-12, 11),
        st.lists(st.integers(-12, 11), max_size=5),
        st.builds(
            slice,
            st.none() | st.integers(-14, 14),
            st.none() | st.integers(-14, 14),
            st.none() | st.integers(-4, 4).filter(lambda s: s != 0),
        ),
    ),
    ch=_item_axis,
    t=_time_axis,
    nkeys=st.integers(0, 2),
)
def test_selections_match_numpy_per_item(ra, items, sel, ch, t, nkeys):
    key = (sel, ch, t)[: nkeys + 1]
    if isinstance(sel, int):
        picked = [sel]
    else:
        picked = np.arange(len(items))[sel].tolist()
    rest = key[1:]

    def expect(x):
        return x[rest] if rest else x

    # numpy decides which per-item keys are errors; so do we, naming the item
    want: list = []
    numpy_error = None
    for i in picked:
        try:
            want.append(expect(items[i]))
        except IndexError as e:
            numpy_error = e
            break
    if numpy_error is not None:
        with pytest.raises(IndexError):
            ra[key if nkeys else sel]
        return
    got = ra[key if nkeys else sel]
    if isinstance(sel, int):
        got = [got]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_partial_read_of_long_item_touches_only_needed_pieces(tmp_path):
    sr = 48_000
    long = np.random.default_rng(1).standard_normal((2, sr * 60)).astype("f4")  # one minute
    ra = rg.write_ragged([long, long[:, :sr]], tmp_path / "long", piece_len=sr // 2)
    assert ra.piece_len == sr // 2
    clear_reader_cache()
    ra = rg.open_ragged(tmp_path / "long")
    assert len(ra.shapes) == 2  # loads the shard index (one record) first
    reset_io_stats()
    first_second = ra[0, 0, :sr]
    np.testing.assert_array_equal(first_second, long[0, :sr])
    assert io_stats()["records_read"] == 2  # 2 pieces of half a second, nothing else
    reset_io_stats()
    mid = ra[0, 1, 10 * sr + 5 : 10 * sr + 7]
    np.testing.assert_array_equal(mid, long[1, 10 * sr + 5 : 10 * sr + 7])
    assert io_stats()["records_read"] == 1
    reset_io_stats()
    np.testing.assert_array_equal(ra[0], long)
    assert io_stats()["records_read"] == 120


def test_default_piece_len_is_about_one_mebibyte(tmp_path):
    x = np.zeros((2, 1_000_000), "f4")
    ra = rg.write_ragged([x, x[:, :10]], tmp_path / "auto")
    assert ra.axis == 1
    assert ra.piece_len == rg.PIECE_BYTES // (2 * 4)
    # (T, channels) layout: the longest axis is the first one
    ra2 = rg.write_ragged([x.T, x.T[:7]], tmp_path / "auto2")
    assert ra2.axis == 0 and ra2.piece_len == rg.PIECE_BYTES // 8


def test_shards_are_plain_arrayrecord_files_of_npy_records(tmp_path, items):
    ra = rg.write_ragged(items[:3], tmp_path / "plain", piece_len=100, compression="zstd:1")
    sh = ra.manifest.shards[0]
    r = official.ArrayRecordReader(str(tmp_path / "plain" / sh.path))
    recs = list(r.read_all())
    r.close()
    assert len(recs) == sh.records
    shapes = np.load(io.BytesIO(recs[-1]))
    assert shapes.tolist() == [list(x.shape) for x in items[:3]]
    first = np.load(io.BytesIO(recs[0]))
    np.testing.assert_array_equal(first, items[0][:, :100])


def test_append_and_replace(tmp_path, items):
    url = tmp_path / "grow"
    rg.write_ragged(items[:5], url, piece_len=16)
    ra = rg.write_ragged(items[5:], url, mode="a")
    assert len(ra) == len(items) and ra.piece_len == 16
    for i in (0, 4, 5, len(items) - 1):
        np.testing.assert_array_equal(ra[i], items[i])
    with pytest.raises(FileExistsError, match="already exists"):
        rg.write_ragged(items, url)
    ra = rg.write_ragged(items[:2], url, mode="w")
    assert len(ra) == 2
    files = sorted(p.name for p in (url / "c").iterdir())
    assert len(files) == ra.nshards  # the replaced shards were removed


def test_bad_items_name_the_item_and_write_nothing(tmp_path, items):
    url = tmp_path / "bad"
    with pytest.raises(ValueError, match=r"ragged item 2 has ndim 1"):
        rg.write_ragged([items[0], items[1], np.zeros(3, "f4")], url)
    with pytest.raises(ValueError, match=r"ragged item 1 has ndim 2 and dtype float64"):
        rg.write_ragged([items[0], items[1].astype("f8")], url)
    with pytest.raises(TypeError, match="ragged item 0"):
        rg.write_ragged([np.array([object()], dtype=object)], url)
    with pytest.raises(ValueError, match="0-d"):
        rg.write_ragged([np.float32(1.0)], url)
    assert not url.exists() or not (url / "arrayds.json").exists()
    rg.write_ragged(items[:2], url)
    with pytest.raises(ValueError, match="ragged item 0 has ndim 2 and dtype int16"):
        rg.write_ragged([items[0].astype("i2")], url, mode="a")
    assert len(rg.open_ragged(url)) == 2
    with pytest.raises(ValueError, match="piece_len"):
        rg.write_ragged(items[:2], url, mode="a", piece_len=3)


def test_bag_round_trip_and_errors(tmp_path, items):
    url = tmp_path / "bag"
    bag = db.from_sequence(items, npartitions=4)
    ra = rg.write_ragged(bag, url, piece_len=20, shard_size=3000)
    assert len(ra) == len(items)
    out = rg.read_ragged(url)
    assert out.npartitions == ra.nshards
    for got, x in zip(out.compute(scheduler="threads"), items, strict=True):
        np.testing.assert_array_equal(got, x)
    # processes: the handle pickles and reopens
    got = out.compute(scheduler="processes", num_workers=2)
    np.testing.assert_array_equal(got[7], items[7])
    bad = db.from_sequence([*items[:5], items[5].astype("f8")], npartitions=3)
    with pytest.raises(ValueError, match="ragged item 1 of partition 2"):
        rg.write_ragged(bad, tmp_path / "badbag")
    assert not (tmp_path / "badbag" / "arrayds.json").exists()


def test_compute_false_returns_delayed(tmp_path, items):
    url = tmp_path / "lazy"
    d = rg.write_ragged(items, url, compute=False)
    assert isinstance(d, Delayed)
    assert not (url / "arrayds.json").exists()
    man = d.compute()
    assert man["count"] == len(items)
    np.testing.assert_array_equal(rg.open_ragged(url)[3], items[3])


def test_pickle_and_group_access(tmp_path, items):
    root = tmp_path / "ds"
    arrayds.dataset.open(root, mode="w")
    rg.write_ragged(items, root, "audio/clips")
    g = arrayds.dataset.open(root)
    ra = g["audio/clips"]
    assert isinstance(ra, rg.RaggedArray)
    ra2 = pickle.loads(pickle.dumps(ra))
    np.testing.assert_array_equal(ra2[1], items[1])


def test_to_awkward(ra, items):
    ak = pytest.importorskip("awkward")
    arr = ra.to_awkward()
    assert str(arr.type) == f"{len(items)} * 2 * var * float32"
    assert ak.to_list(arr[3]) == items[3].tolist()
    assert ak.to_list(ra.to_awkward(items=[5, 1])) == [items[5].tolist(), items[1].tolist()]
    # every axis variable
    var = [np.ones((2, 3), "i4"), np.ones((4, 1), "i4")]
    a2 = rg.write_ragged(var, ra.url + "-var").to_awkward()
    assert str(a2.type) == "2 * var * var * int32"
    assert ak.to_list(a2) == [v.tolist() for v in var]


def test_index_errors_name_the_item(ra, items):
    with pytest.raises(IndexError, match="item 99 is out of range"):
        ra[99]
    short = min(range(len(items)), key=lambda i: items[i].shape[1])
    n = items[short].shape[1]
    with pytest.raises(IndexError, match=f"item {short}"):
        ra[short, 0, n + 5]
    with pytest.raises(IndexError, match="boolean masks"):
        ra[0, 0, np.ones(items[0].shape[1], bool)]
    with pytest.raises(IndexError, match="too many indices"):
        ra[0, 0, 0, 0]


def test_corrupt_manifest_and_missing_shard(tmp_path, items):
    import json

    ra = rg.write_ragged(items[:3], tmp_path / "c1")
    man = json.loads((tmp_path / "c1" / "arrayds.json").read_text())
    man["shards"][0]["records"] += 1
    (tmp_path / "c1" / "arrayds.json").write_text(json.dumps(man))
    clear_reader_cache()
    with pytest.raises(arrayds.CorruptionError, match="holds .* records, the manifest says"):
        rg.open_ragged(tmp_path / "c1")[0]
    (tmp_path / "c1" / ra.manifest.shards[0].path).unlink()
    clear_reader_cache()
    rg_handle._indexes.clear()
    with pytest.raises(FileNotFoundError, match="missing"):
        rg.open_ragged(tmp_path / "c1")[0]
    man["shards"][0]["items"] = [1, 3]
    (tmp_path / "c1" / "arrayds.json").write_text(json.dumps(man))
    with pytest.raises(arrayds.CorruptionError, match="tile the items"):
        rg.open_ragged(tmp_path / "c1")


def test_to_and_from_arrayrecord_dispatch(tmp_path, items):
    url = str(tmp_path / "api")
    ra = arrayds.to_arrayrecord(items, url, piece_len=64, compression="zstd:1")
    assert isinstance(ra, rg.RaggedArray) and ra.piece_len == 64
    assert isinstance(arrayds.open_ragged(url), rg.RaggedArray)
    bag = arrayds.from_arrayrecord(url)
    assert isinstance(bag, db.Bag) and bag.npartitions == ra.nshards
    for got, x in zip(bag.compute(scheduler="threads"), items, strict=True):
        np.testing.assert_array_equal(got, x)
    # a bag of arrays is ragged, a bag of bytes stays a records dataset
    bag_url = str(tmp_path / "api-bag")
    arrayds.to_arrayrecord(db.from_sequence(items, npartitions=3), bag_url, axis=1)
    assert len(arrayds.open_ragged(bag_url)) == len(items)
    rec_url = str(tmp_path / "api-records")
    arrayds.to_arrayrecord(db.from_sequence([b"a", b"b"], npartitions=2), rec_url)
    assert arrayds.from_arrayrecord(rec_url).compute(scheduler="sync") == [b"a", b"b"]
    with pytest.raises(ValueError, match="region= applies to N-d arrays"):
        arrayds.to_arrayrecord(items, url + "x", region=(slice(0, 1),))
    with pytest.raises(TypeError, match="unexpected keyword arguments"):
        arrayds.to_arrayrecord(items, url + "x", piece_length=3)
    with pytest.raises(ValueError, match="chunks= applies to N-d arrays"):
        arrayds.from_arrayrecord(url, chunks=3)
    d = arrayds.to_arrayrecord(items, url, mode="a", compute=False)
    assert isinstance(d, Delayed)
    d.compute()
    assert len(arrayds.open_ragged(url)) == 2 * len(items)
