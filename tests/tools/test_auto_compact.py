"""Automatic compaction: ``to_arrayrecord(..., compact=True)``."""

from __future__ import annotations

import numpy as np
import pytest

import arrayds
from arrayds.nodes.merge import AUTO_COMPACT_FILES
from arrayds.tools.compact import compact


def test_records_appends_are_compacted_once_enough_small_files_gather(tmp_path):
    url = str(tmp_path / "r")
    batches = [[f"{i}-{k}".encode() for k in range(3)] for i in range(AUTO_COMPACT_FILES + 5)]
    shards = []
    for i, b in enumerate(batches):
        arrayds.to_arrayrecord(b, url, mode="a" if i else "w", compact=True)
        shards.append(arrayds.open(url).num_shards)
    # one file per append until the threshold, then one compacted shard plus the rest
    assert shards[: AUTO_COMPACT_FILES - 1] == list(range(1, AUTO_COMPACT_FILES))
    assert shards[AUTO_COMPACT_FILES - 1] == 1
    assert shards[-1] == 1 + 5
    assert arrayds.open(url).data_source()[:] == [r for b in batches for r in b]


def test_array_appends_with_compact_keep_every_value(tmp_path):
    url = str(tmp_path / "a")
    rows = np.arange((AUTO_COMPACT_FILES + 3) * 4, dtype="i4").reshape(-1, 4)
    arrayds.to_arrayrecord(rows[:1], url, mode="w", chunks=(1, 4), compact=True)
    for i in range(1, len(rows)):
        arrayds.to_arrayrecord(rows[i : i + 1], url, mode="a", chunks=(1, 4), compact=True)
    a = arrayds.open_array(url)
    np.testing.assert_array_equal(a[...], rows)
    assert a.nshards < AUTO_COMPACT_FILES


def test_without_compact_nothing_is_rewritten(tmp_path):
    url = str(tmp_path / "r")
    for i in range(AUTO_COMPACT_FILES + 1):
        arrayds.to_arrayrecord([b"x"], url, mode="a" if i else "w", compact=False)
    assert arrayds.open(url).num_shards == AUTO_COMPACT_FILES + 1


def test_compact_needs_compute(tmp_path):
    with pytest.raises(ValueError, match="compact=True .* needs compute=True"):
        arrayds.to_arrayrecord([b"x"], str(tmp_path / "r"), compute=False, compact=True)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("bad, err", [(1, ValueError), (1.5, TypeError), (True, TypeError)])
def test_min_small_files_is_checked(tmp_path, bad, err):
    url = str(tmp_path / "r")
    arrayds.to_arrayrecord([b"x"], url)
    with pytest.raises(err, match="min_small_files"):
        compact(url, min_small_files=bad)
