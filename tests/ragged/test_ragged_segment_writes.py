"""Long dask writes of ragged arrays (more than ``SEGMENT_LIMIT`` partitions,
docs/spec.md 14.4.1): tasks over runs of partitions write the shard entries as
segments (their items placed by a small task from each run's item count), and the
commit task receives only their references. Real bags written to local folders, with
``SEGMENT_LIMIT`` made small so a few dozen partitions make several segments; every
result is read back item by item and checked by ``verify``."""

from __future__ import annotations

import dask
import numpy as np
import pytest
import segment_writes as sw
from dask.core import get_dependencies
from segment_writes import LIMIT, N

import arrayds.ragged as rg
from arrayds.errors import CommitConflictError
from arrayds.nodes import history as log
from arrayds.verify import verify


@pytest.fixture(autouse=True)
def _small_segments(monkeypatch):
    sw.small_segments(monkeypatch)


def _parts(n: int = N, base: int = 0) -> list[list[np.ndarray]]:
    """``n`` partitions of 0 to 2 items (int32 of length 1 to 5, tagged by value)."""
    return [
        [np.full(1 + (k + i) % 5, base + 10 * k + i, dtype=np.int32) for i in range(k % 3)]
        for k in range(n)
    ]


def _read(url: str) -> list[np.ndarray]:
    log.clear_cache()
    ra = rg.open_ragged(url)
    return [np.asarray(ra[i]) for i in range(len(ra))]


def _same(got, want) -> bool:
    if len(got) != len(want):
        return False
    return all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_the_commit_receives_segment_references_not_entries(tmp_path, task_results):
    url = str(tmp_path / "r")
    parts = _parts()
    d = rg.write_ragged(sw.bag(parts), url, compute=False)
    deps = get_dependencies(dict(d.__dask_graph__()), d.key)
    assert len(deps) == 7 and all(str(k).startswith("ragged-segment-") for k in deps)
    with task_results() as seen, dask.config.set(scheduler="threads"):
        d.compute()
    refs = [r for k in sw.ordered(deps) for r in seen.got[k]]
    assert all("path" in r and "count" in r and "items" in r for r in refs)
    assert not any("shards" in r or "entries" in r for r in refs)  # no entries
    head = sw.head(url)
    assert head["shards"] == {"segments": refs, "tail": []}
    assert head["count"] == len(sw.flat(parts))
    assert _same(_read(url), sw.flat(parts))
    assert verify(url).ok


def test_short_writes_keep_one_commit_task_over_the_shards(tmp_path):
    d = rg.write_ragged(sw.bag(_parts(LIMIT)), str(tmp_path / "r"), compute=False)
    deps = get_dependencies(dict(d.__dask_graph__()), d.key)
    assert len(deps) == LIMIT and not any("segment" in str(k) for k in deps)


def test_long_appends_and_a_replace(tmp_path):
    url = str(tmp_path / "r")
    first = [np.arange(3, dtype=np.int32)]
    rg.write_ragged(first, url)
    a, b = _parts(), _parts(N + 5, base=1000)
    with dask.config.set(scheduler="sync"):
        rg.write_ragged(sw.bag(a), url, mode="a")
        rg.write_ragged(sw.bag(b), url, mode="a")
    assert _same(_read(url), first + sw.flat(a) + sw.flat(b))
    assert verify(url).ok
    c = _parts(N, base=5000)
    with dask.config.set(scheduler="sync"):
        rg.write_ragged(sw.bag(c), url, mode="w")
    assert _same(_read(url), sw.flat(c))
    assert verify(url).ok


def test_a_w_minus_write_that_lost_the_race_leaves_nothing(tmp_path):
    url = str(tmp_path / "r")
    d = rg.write_ragged(sw.bag(_parts()), url, compute=False)
    wid = str(d.key).rsplit("-", 1)[1]
    winner = [np.arange(2, dtype=np.int32)]
    rg.write_ragged(winner, url)
    before = sw.head(url)
    with pytest.raises(FileExistsError, match="already exists"), dask.config.set(scheduler="sync"):
        d.compute()
    assert sw.head(url) == before and _same(_read(url), winner)
    assert not [f for f in sw.files(url) if wid in f]  # no shard, segment or marker of it
    assert verify(url).ok


def test_a_long_append_that_lost_the_race_is_refused_and_leaves_nothing(tmp_path):
    url = str(tmp_path / "r")
    first = [np.arange(3, dtype=np.int32)]
    rg.write_ragged(first, url)
    d = rg.write_ragged(sw.bag(_parts()), url, mode="a", compute=False)
    wid = str(d.key).rsplit("-", 1)[1]
    other = [np.arange(4, dtype=np.int32)]
    rg.write_ragged(other, url, mode="a")  # its segments' item ranges no longer fit
    with pytest.raises(CommitConflictError), dask.config.set(scheduler="sync"):
        d.compute()
    assert _same(_read(url), first + other)
    assert not [f for f in sw.files(url) if wid in f]
    assert verify(url).ok


def test_a_commit_task_run_again_after_it_landed_commits_nothing_twice(tmp_path):
    url = str(tmp_path / "r")
    first = [np.arange(3, dtype=np.int32)]
    rg.write_ragged(first, url)
    parts = _parts()
    d = rg.write_ragged(sw.bag(parts), url, mode="a", compute=False)
    graph = dict(d.__dask_graph__())
    with dask.config.set(scheduler="sync"):
        d.compute()
    head = sw.head(url)
    rerun = dask.get(graph, d.key)  # the commit task (and its inputs) run again
    assert rerun == sw.head(url) == head
    assert _same(_read(url), first + sw.flat(parts))
    assert verify(url).ok
