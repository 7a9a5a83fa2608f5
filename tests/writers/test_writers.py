"""Many writers: four writer processes append to one array, one
records dataset and one xarray dataset (``append_dim=``) on local disk, S3 (moto) and
GCS (fake-gcs-server), while the test reads and runs gc beside them
(benchmarks/bench_writers.py ``run``: every row present exactly once, no append gives
up (none fails or ends of unknown outcome), reads see committed states in increasing
order and never pair an xarray coordinate with another row's value, every retained
version opens and verifies). The writers retry with the default ``retries=``. Then the
retry knob's bad input and the conflict it turns into a retry, in one process (dask
and xarray appends: test_append_retries.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import arrayds
from arrayds import records
from arrayds.errors import CommitConflictError
from arrayds.nodes import retry
from arrayds.verify import collect_garbage, verify


@pytest.mark.parametrize("kind", ["array", "records", "xarray"])
def test_four_writers_append_every_row_once(bench, where, kind):
    url, so = where
    r = bench.run(f"{url}/{kind}", so, kind, writers=4, appends=3)
    assert (r["lost"], r["duplicated"], r["failed"], r["unknown"]) == (0, 0, 0, 0)
    assert r["reads"] >= 1


def test_gc_listing_leaves_no_stale_folder_listing(where):
    # gc beside writers in one process: its listing must not hide a shard written after
    # it from size() (verify's "missing" on S3 before the fix in FsspecStore.list)
    url, so = where
    a = arrayds.open_array(url, mode="w", shape=(0,), dtype="i8", chunks=(4,), storage_options=so)
    a.append(np.arange(3))
    collect_garbage(url, storage_options=so, min_age=60)
    code = (
        "import arrayds, json, sys, numpy as np; "
        "arrayds.open_array(sys.argv[1], mode='a', storage_options=json.loads(sys.argv[2]))"
        ".append(np.arange(3))"
    )  # another writer process: this one's cached listings know nothing of its shard
    subprocess.run([sys.executable, "-c", code, url, json.dumps(so)], check=True)
    assert verify(url, storage_options=so).ok
    assert arrayds.open_array(url, storage_options=so)[:].tolist() == [0, 1, 2] * 2


def _two_handles(tmp_path):
    url = str(tmp_path / "a")
    arrayds.open_array(url, mode="w", shape=(0,), dtype="i8", chunks=(4,))
    return url, arrayds.open_array(url, mode="a"), arrayds.open_array(url, mode="a")


def test_stale_handle_append_retries_after_the_other_writer(tmp_path):
    url, a, b = _two_handles(tmp_path)
    a.append(np.array([1, 1]))
    before = retry.retried()
    assert b.append(np.array([2, 2, 2])) == (5,)  # read again, appended after a's rows
    # its commit found a's commit at once and placed its rows after a's (no put was
    # refused: no retry, as for a dask append planned before another commit)
    assert retry.retried() == before
    assert arrayds.open_array(url)[:].tolist() == [1, 1, 2, 2, 2]
    assert [v.generation for v in arrayds.versions(url)] == [1, 2, 3]


def test_append_without_retries_raises_a_conflict_that_says_how_to_retry(tmp_path):
    url, a, b = _two_handles(tmp_path)
    a.append(np.array([1]))
    with pytest.raises(CommitConflictError, match=r"retries=N"):
        b.append(np.array([2]), retries=0)
    assert arrayds.open_array(url)[:].tolist() == [1]  # nothing of b's write is visible
    assert len(list((tmp_path / "a").rglob("*.array_record"))) == 1  # b's shard removed


@pytest.mark.parametrize("bad", [-1, 1.5, "3", None, True])
def test_append_retries_must_be_a_count(tmp_path, bad):
    url, a, _ = _two_handles(tmp_path)
    with pytest.raises(ValueError, match=r"retries must be an integer >= 0"):
        a.append(np.array([1]), retries=bad)
    assert arrayds.open_array(url).shape == (0,)


@pytest.mark.parametrize("bad", [-2, 0.5, "x"])
def test_records_append_retries_must_be_a_count(tmp_path, bad):
    url = str(tmp_path / "r")
    records.write_records([b"a"], url)
    with pytest.raises(ValueError, match=r"records dataset .*retries must be an integer >= 0"):
        arrayds.to_arrayrecord([b"b"], url, mode="a", retries=bad)
    with pytest.raises(ValueError, match=r"retries must be an integer >= 0"):
        records.write_records([b"b"], url, mode="a", retries=bad)
    assert records.read_records(url).compute(scheduler="sync") == [b"a"]


def test_a_stale_append_whose_merge_conflicts_retries_and_keeps_every_row(tmp_path):
    # the folded tiered merge of a stale handle meets the other writer's merge: the
    # retry reads the node again, so the other writer's rows are never merged away
    from arrayds.nodes.merge import MERGE_FACTOR

    url = str(tmp_path / "a")
    a = arrayds.open_array(url, mode="w", shape=(0,), dtype="i2", chunks=1)
    for i in range(MERGE_FACTOR - 1):
        a.append(np.array([i], "i2"))
    stale = arrayds.open_array(url, mode="a")
    a.append(np.array([MERGE_FACTOR - 1], "i2"))  # fills the tier: merged
    stale.append(np.array([99], "i2"))
    got = arrayds.open_array(url)[:].tolist()
    assert got == [*range(MERGE_FACTOR), 99]
    assert verify(url).ok
