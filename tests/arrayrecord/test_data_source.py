"""ArrayRecordDataSource: paths and globs, indexing, batches, iteration, pickling, fork."""

from __future__ import annotations

import multiprocessing
import pickle

import numpy as np
import pytest

import arrayds

from .conftest import official_write

COUNTS = [5, 0, 17, 1, 40]


@pytest.fixture
def shards(tmp_path) -> tuple[list[str], list[bytes]]:
    paths, records = [], []
    for k, n in enumerate(COUNTS):
        recs = [b"shard%d-rec%d-" % (k, i) * (i % 5) for i in range(n)]
        path = str(tmp_path / f"part-{k:05d}.array_record")
        if k % 2:  # mix files from the official writer in
            official_write(path, recs, "group_size:1")
        else:
            with arrayds.ArrayRecordWriter(path, f"group_size:{k + 1}") as w:
                w.write_many(recs)
        paths.append(path)
        records.extend(recs)
    return paths, records


def test_list_glob_and_single_path(shards, tmp_path) -> None:
    paths, records = shards
    by_list = arrayds.ArrayRecordDataSource(paths)
    by_glob = arrayds.ArrayRecordDataSource(str(tmp_path / "part-*.array_record"))
    assert by_glob.paths == paths  # sorted
    for src in (by_list, by_glob):
        assert len(src) == len(records) == src.num_records()
        assert list(src) == records
        assert [src[i] for i in range(len(records))] == records
    single = arrayds.ArrayRecordDataSource(paths[4])
    assert len(single) == COUNTS[4]
    assert single[3] == records[-COUNTS[4] + 3]
    from pathlib import Path

    assert len(arrayds.ArrayRecordDataSource(Path(paths[2]))) == COUNTS[2]
    assert len(arrayds.ArrayRecordDataSource([Path(p) for p in paths])) == len(records)


def test_glob_is_sorted_not_listing_order(tmp_path) -> None:
    for name in ["c", "a", "b"]:
        with arrayds.ArrayRecordWriter(str(tmp_path / f"{name}.ar")) as w:
            w.write(name.encode())
    src = arrayds.ArrayRecordDataSource(str(tmp_path / "?.ar"))
    assert list(src) == [b"a", b"b", b"c"]


def test_indexing(shards) -> None:
    paths, records = shards
    src = arrayds.ArrayRecordDataSource(paths)
    n = len(records)
    assert src[-1] == records[-1]
    assert src[-n] == records[0]
    assert src[np.int64(7)] == records[7]
    rng = np.random.default_rng(5)
    idx = rng.integers(-n, n, size=500)
    expected = [records[i] for i in idx]
    assert src[idx] == expected
    assert src[idx.tolist()] == expected
    assert src.__getitems__(idx) == expected
    assert src._getitems(idx.tolist()) == expected
    assert src[tuple(idx.tolist())] == expected
    assert src[np.array([], dtype=np.int64)] == [] == src[[]]
    assert src[10:20] == records[10:20]
    assert src[::-7] == records[::-7]
    # A batch entirely inside one file, and one that visits files in reverse.
    assert src[[30, 31, 29]] == [records[30], records[31], records[29]]
    assert src[list(range(n))[::-1]] == records[::-1]


@pytest.mark.parametrize(
    "key",
    [
        lambda n: n,
        lambda n: -n - 1,
        lambda n: [0, n],
        lambda n: np.array([n + 5]),
        lambda n: 10**20,
    ],
)
def test_out_of_range(shards, key) -> None:
    src = arrayds.ArrayRecordDataSource(shards[0])
    k = key(len(src))
    with pytest.raises(IndexError, match="out of range"):
        src[k]


@pytest.mark.parametrize("key", ["0", 1.0, None, [0.5], np.zeros((2, 2), dtype=int)])
def test_bad_keys(shards, key) -> None:
    src = arrayds.ArrayRecordDataSource(shards[0])
    with pytest.raises(TypeError):
        src[key]


def test_bad_paths(tmp_path, shards) -> None:
    with pytest.raises(FileNotFoundError, match="no-match"):
        arrayds.ArrayRecordDataSource(str(tmp_path / "no-match-*.array_record"))
    with pytest.raises(FileNotFoundError):
        arrayds.ArrayRecordDataSource([shards[0][0], str(tmp_path / "missing.array_record")])
    with pytest.raises(ValueError, match="empty"):
        arrayds.ArrayRecordDataSource([])
    with pytest.raises(TypeError, match="paths"):
        arrayds.ArrayRecordDataSource(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="path"):
        arrayds.ArrayRecordDataSource([shards[0][0], 3])  # type: ignore[list-item]
    bad = tmp_path / "not-arrayrecord.bin"
    bad.write_bytes(b"x" * 1000)
    with pytest.raises(arrayds.CorruptionError, match="not-arrayrecord.bin"):
        arrayds.ArrayRecordDataSource([shards[0][0], str(bad)])


def test_decode_needs_a_records_dataset(shards) -> None:
    with pytest.raises(ValueError, match="records dataset"):
        arrayds.ArrayRecordDataSource(shards[0], decode=True)


def test_slice_suffix_like_the_official_source(shards) -> None:
    paths, records = shards
    src = arrayds.ArrayRecordDataSource([f"{paths[4]}[10:15]", f"{paths[0]}[1:3]"])
    offset4 = sum(COUNTS[:4])
    expected = records[offset4 + 10 : offset4 + 15] + records[1:3]
    assert len(src) == 7
    assert list(src) == expected
    assert src[[6, 0]] == [expected[6], expected[0]]
    one = arrayds.ArrayRecordDataSource(f"{paths[2]}[3:9]")
    offset2 = sum(COUNTS[:2])
    assert [one[i] for i in range(len(one))] == records[offset2 + 3 : offset2 + 9]
    assert one[[0, 5]] == [records[offset2 + 3], records[offset2 + 8]]
    too_far = arrayds.ArrayRecordDataSource(f"{paths[0]}[0:99]")
    with pytest.raises(IndexError, match="fewer"):
        too_far[0]


def test_reader_options_reach_the_readers(shards) -> None:
    paths, records = shards
    for opts in ({"readahead_buffer_size": "0"}, "max_parallelism:0", None):
        src = arrayds.ArrayRecordDataSource(paths, opts)
        assert list(src) == records
    with pytest.raises(ValueError, match="nonsense"):
        arrayds.ArrayRecordDataSource(paths, {"nonsense": "1"})


def test_pickle_reopens_lazily(shards) -> None:
    paths, records = shards
    src = arrayds.ArrayRecordDataSource(paths)
    assert src[3] == records[3]
    clone = pickle.loads(pickle.dumps(src))
    assert not clone._readers
    assert len(clone) == len(records)
    assert clone[[len(records) - 1, 0]] == [records[-1], records[0]]
    assert list(clone) == records
    one = pickle.loads(pickle.dumps(arrayds.ArrayRecordDataSource(paths[2])))
    assert one[-1] == records[sum(COUNTS[:3]) - 1]


def test_close_and_context_manager(shards) -> None:
    paths, records = shards
    with arrayds.ArrayRecordDataSource(paths) as src:
        assert src[0] == records[0]
    assert not src._readers
    assert src[1] == records[1]  # reopens lazily, like the official source


def test_repr_and_str(shards) -> None:
    paths, records = shards
    src = arrayds.ArrayRecordDataSource(paths)
    text = str(src)
    assert "5 files" in text and f"{len(records)} records" in text
    assert "part-00000" in text and "2 more" in text
    assert repr(src) == f"ArrayRecordDataSource(hash_of_paths={src.hash_of_paths()})"
    assert text.endswith(f"hash_of_paths={src.hash_of_paths()})")


def _child_reads(src, queue) -> None:
    try:
        queue.put((src[0], src[[1, len(src) - 1]], sum(1 for _ in src)))
    except BaseException as e:
        queue.put(repr(e))


def test_readers_after_fork(shards) -> None:
    # A source used in the parent (readers open, engine threads started) keeps
    # working in a forked child.
    paths, records = shards
    src = arrayds.ArrayRecordDataSource(paths)
    assert src[[0, 5, 9]] == [records[0], records[5], records[9]]
    assert sum(1 for _ in src) == len(records)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child_reads, args=(src, queue))
    proc.start()
    result = queue.get(timeout=60)
    proc.join(60)
    assert proc.exitcode == 0
    assert result == (records[0], [records[1], records[-1]], len(records)), result


def _read_one(src, i):
    return src[i]


def test_in_dask_tasks_with_processes(shards) -> None:
    dask = pytest.importorskip("dask", reason="dask is part of the [dask] extra")
    paths, records = shards
    src = arrayds.ArrayRecordDataSource(paths)
    src[0]  # open readers in the parent; the tasks get pickled copies
    picks = list(range(0, len(records), 3))
    tasks = [dask.delayed(_read_one)(src, i) for i in picks]
    got = dask.compute(*tasks, scheduler="processes", num_workers=2)
    assert list(got) == [records[i] for i in picks]
