"""The plan of reading along (arrayds/files/read_along.py), group by group over real
ArrayRecord files: every group gets its records in order, what is kept stays within
``keep_bytes``, and a file's later records are read along whole when they fit.
(tests/s3/test_s3_read_along.py counts the requests on S3.)"""

from __future__ import annotations

import os

import numpy as np
import pytest

from arrayds import ArrayRecordDataSource, ArrayRecordWriter
from arrayds.files.read_along import ReadAlong
from arrayds.sampler import BlockShuffleSampler

FILES, PER_FILE, SIZE = 4, 500, 100  # records of 100 B: "record bytes" known exactly


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("read-along")
    recs = [b"%05d" % i * (SIZE // 5) for i in range(FILES * PER_FILE)]
    for k in range(FILES):
        with ArrayRecordWriter(os.path.join(d, f"part-{k}.array_record"), "uncompressed") as w:
            w.write_many(recs[k * PER_FILE : (k + 1) * PER_FILE])
    return ArrayRecordDataSource(os.path.join(d, "part-*.array_record")), recs


def _locate(idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return idx // PER_FILE, idx % PER_FILE


def _epoch(src, order: np.ndarray, step: int, keep: int, gap: int) -> tuple[list, list, list]:
    """Every group of ``order`` through one ReadAlong: the items, the records each
    group read from the files and what was kept after each group."""
    along = ReadAlong(order, step, keep)
    items, reads, kept = [], [], []

    def read(idx: np.ndarray) -> list[bytes]:
        reads.append(idx)
        return src[idx]

    for k, start in enumerate(range(0, order.size, step)):
        items += along.read(k, order[start : start + step], read, _locate, lambda f: SIZE, gap)
        kept.append(along.kept_bytes)
    return items, reads, kept


@pytest.mark.parametrize("keep", [0, 1000, 20_000, 1 << 20])
@pytest.mark.parametrize("gap", [0, 500, 5000])
def test_every_group_gets_its_records_within_keep_bytes(files, keep, gap):
    src, recs = files
    rng = np.random.default_rng(keep + gap)
    n = FILES * PER_FILE
    orders = [
        BlockShuffleSampler(n, 25, 4, seed=1).epoch_order(0),
        rng.permutation(n),
        np.concatenate([rng.integers(0, n, 700), rng.permutation(n)[:300]]),  # repeats
    ]
    for order in orders:
        items, reads, kept = _epoch(src, order, 200, keep, gap)
        assert items == [recs[i] for i in order]
        assert max(kept) <= keep and kept[-1] == 0
        read_twice = sum(r.size for r in reads) - np.unique(np.concatenate(reads)).size
        assert read_twice <= order.size - np.unique(order).size  # kept ones: never again


def test_a_file_is_read_along_whole_when_it_fits(files):
    src, _ = files
    order = BlockShuffleSampler(FILES * PER_FILE, 25, 4, seed=2).epoch_order(0)
    _, reads, _ = _epoch(src, order, 200, 1 << 20, 0)
    # the epoch (200 kB) fits: the first group that reads from a file reads all of it,
    # so every record is read once and no file is read by two groups
    assert sum(r.size for r in reads) == FILES * PER_FILE
    files_read = [set(_locate(r)[0].tolist()) for r in reads]
    assert sum(len(f) for f in files_read) == FILES == len(set().union(*files_read))


def test_nothing_is_kept_for_records_no_later_group_reads(files):
    src, recs = files
    # the group reads 0 and 10 of file 0; 1..9 are read by no later group: waste, so
    # with a gap of 5 records no join; with a gap of 9 records the gap joins, nothing kept
    order = np.array([0, 10, 500, 501])
    for gap in (5 * SIZE, 9 * SIZE):
        along = ReadAlong(order, 2, 1 << 20)
        assert along.plan(0, order[:2], _locate, lambda f: SIZE, gap).size == 0
    # the later records in between are kept once the waste fits the gap
    order = np.array([0, 10, 3, 7])
    along = ReadAlong(order, 2, 1 << 20)
    assert along.plan(0, order[:2], _locate, lambda f: SIZE, 7 * SIZE).tolist() == [3, 7]
    assert along.plan(0, order[:2], _locate, lambda f: None, 7 * SIZE).size == 0  # no size
