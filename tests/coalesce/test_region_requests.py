"""Region reads of a 16-shard array on S3 fetch only the shards they touch: the footer
prefetch covers the shards of the read's own plan (direct slicing, ``oindex``, each
dask task's box, ragged reads), never the rest of the node. Requests are counted by
the proxy in front of moto; the target for a region (docs/performance.md, Object
stores) is at most two requests per shard touched plus one per 8 MiB.
"""

from __future__ import annotations

import math
import threading

import dask.array as da
import numpy as np
import pytest

import arrayds
from arrayds.nodes import shards as store_mod

MIB8 = 8 << 20
CHUNK = 32


@pytest.fixture
def grid16(s3_url, s3_opts):
    """A 256 x 256 float32 array in 64 chunks of 32 x 32 and 16 shards of 4 chunks
    (each a row of 4 chunks) on S3 -> (url, data, manifest entries)."""
    data = np.random.default_rng(1).random((256, 256), dtype="f4")
    arrayds.to_arrayrecord(
        da.from_array(data, chunks=(CHUNK, CHUNK)),
        s3_url,
        shard_size=4 * CHUNK * CHUNK * 4,
        storage_options=s3_opts,
    )
    entries = arrayds.open_array(s3_url, storage_options=s3_opts).manifest.shards
    assert len({e.path for e in entries}) == 16
    return s3_url, data, entries


def _touched(entries, rows: slice, cols: slice) -> dict[str, int]:
    """The shards (name -> stored bytes) whose chunk box meets ``[rows, cols]``."""
    r0, r1 = rows.start // CHUNK, (rows.stop - 1) // CHUNK + 1
    c0, c1 = cols.start // CHUNK, (cols.stop - 1) // CHUNK + 1
    return {
        e.path.rsplit("/", 1)[-1]: e.bytes
        for e in entries
        if e.start[0] < r1 and e.stop[0] > r0 and e.start[1] < c1 and e.stop[1] > c0
    }


class _Targets:
    """Which objects the proxy was asked for (the proxy's ``hold`` hook, never
    holding): the last path component of every request's target."""

    def __init__(self, proxy) -> None:
        self.names: list[str] = []
        self._lock = threading.Lock()
        proxy.hold = self._see

    def _see(self, request: bytes) -> bool:
        target = request.split(b" ", 2)[1].split(b"?", 1)[0].decode()
        with self._lock:
            self.names.append(target.rsplit("/", 1)[-1])
        return False

    def clear(self) -> None:
        with self._lock:
            self.names.clear()

    def shards(self) -> set[str]:
        with self._lock:
            return {n for n in self.names if n.endswith(".array_record")}


def _bound(touched: dict[str, int]) -> int:
    return 2 * len(touched) + math.ceil(sum(touched.values()) / MIB8)


# a region of 2 x 2 chunks crossing 4 shards (one chunk of each: none read whole),
# and one of 3 x 2 chunks crossing 6
REGIONS = [
    (slice(40, 90), slice(100, 150)),
    (slice(40, 120), slice(100, 150)),
]


@pytest.mark.parametrize("region", REGIONS, ids=["4-shards", "6-shards"])
def test_region_slice_fetches_only_the_shards_it_touches(s3, grid16, proxy, region):
    url, data, entries = grid16
    touched = _touched(entries, *region)
    assert 4 <= len(touched) <= 6
    a = arrayds.open_array(url, storage_options=s3.storage_options(proxy.url))
    seen = _Targets(proxy)
    store_mod.reset_io_stats()
    proxy.stats.reset()
    np.testing.assert_array_equal(a[region], data[region])
    got = proxy.stats.snapshot()
    assert set(got["methods"]) == {"GET"}, got
    # each shard: its footer (128 KiB tail), then its chunk: no footer of the other
    # shards of the node (before: all 16 once the read opened a second shard)
    assert got["requests"] <= _bound(touched), got
    assert seen.shards() == set(touched)
    assert store_mod.io_stats()["reader_opens"] == len(touched)


def test_region_oindex_fetches_only_the_shards_it_touches(s3, grid16, proxy):
    url, data, entries = grid16
    rows, cols = [45, 70, 100], [110, 140]  # chunks (1..3, 3..4): 6 shards, 1 chunk each
    touched = _touched(entries, slice(45, 101), slice(110, 141))
    assert len(touched) == 6
    a = arrayds.open_array(url, storage_options=s3.storage_options(proxy.url))
    seen = _Targets(proxy)
    proxy.stats.reset()
    np.testing.assert_array_equal(a.oindex[rows, cols], data[np.ix_(rows, cols)])
    assert proxy.stats.snapshot()["requests"] <= _bound(touched)
    assert seen.shards() == set(touched)


def test_region_dask_read_fetches_only_the_shards_it_touches(s3, grid16, proxy):
    """Each dask task reads its own box (a part of one shard): its read needs that
    shard's footer only."""
    url, data, entries = grid16
    region = REGIONS[1]
    touched = _touched(entries, *region)
    x = arrayds.from_arrayrecord(url, storage_options=s3.storage_options(proxy.url))
    seen = _Targets(proxy)
    store_mod.reset_io_stats()
    proxy.stats.reset()
    np.testing.assert_array_equal(x[region].compute(scheduler="threads"), data[region])
    assert proxy.stats.snapshot()["requests"] <= _bound(touched)
    assert seen.shards() == set(touched)
    assert store_mod.io_stats()["reader_opens"] == len(touched)


def test_whole_array_read_of_16_shards_is_one_get_each(s3, grid16, proxy):
    """A read of every shard whole fetches each, footer included, in one GET (no
    footer fetched apart)."""
    url, data, entries = grid16
    a = arrayds.open_array(url, storage_options=s3.storage_options(proxy.url))
    proxy.stats.reset()
    np.testing.assert_array_equal(a[...], data)
    assert proxy.stats.snapshot()["requests"] == 16


def test_a_read_of_one_chunk_per_shard_prefetches_the_footers_it_needs(s3, grid16, proxy):
    """A read that needs a little of every shard opens them all: a footer and a
    chunk range each, and no more (the footers of the read's other shards fetched
    while it opens its first)."""
    url, data, entries = grid16
    a = arrayds.open_array(url, storage_options=s3.storage_options(proxy.url))
    rows = list(range(0, 256, CHUNK))
    cols = [0, 4 * CHUNK]  # one chunk of each shard (a row of 4 chunks)
    store_mod.reset_io_stats()
    proxy.stats.reset()
    np.testing.assert_array_equal(a.oindex[rows, cols], data[np.ix_(rows, cols)])
    assert proxy.stats.snapshot()["requests"] == 2 * 16
    assert store_mod.io_stats()["reader_opens"] == 16


def test_ragged_read_fetches_only_the_shards_it_touches(s3, s3_url, s3_opts, proxy):
    from arrayds.kinds.ragged.handle import open_ragged

    clips = [np.arange(2 * n, dtype="f4").reshape(2, n) for n in range(100, 260)]
    arrayds.to_arrayrecord(clips, s3_url, "audio", shard_size=8 << 10, storage_options=s3_opts)
    ra = open_ragged(s3_url, "audio", storage_options=s3.storage_options(proxy.url))
    shards = ra.manifest.shards
    assert len(shards) >= 8
    picks = [shards[k].start for k in (1, 3, 5)]  # the first item of three shards
    touched = {shards[k].path.rsplit("/", 1)[-1] for k in (1, 3, 5)}
    seen = _Targets(proxy)
    proxy.stats.reset()
    for i, g in zip(picks, ra.get(picks), strict=True):
        np.testing.assert_array_equal(g, clips[i])
    assert seen.shards() == touched
    # each shard: its footer, its index record, its pieces
    assert proxy.stats.snapshot()["requests"] <= 3 * len(touched)
