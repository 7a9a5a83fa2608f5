"""Dask appends from several processes (multiprocessing, spawn) to one array on a local
folder and on moto S3: each writer appends through dask with ``retries=``, all start
together (a barrier), and afterwards every appended row is there exactly once and the
versions are consistent (one per commit, each the previous one plus one append's rows).
The thread-based races of the same appends: test_append_retries.py."""

from __future__ import annotations

import multiprocessing
import uuid
from collections import Counter
from typing import Any

import numpy as np
import pytest

import arrayds
from arrayds.verify import verify

from .conftest import BUCKET

WRITERS, APPENDS, STRIDE = 3, 3, 1000


def _writer(url: str, so: Any, k: int, start: Any, done: Any) -> None:
    """Writer ``k``: ``APPENDS`` dask appends of two rows holding ``k * STRIDE + j``."""
    import dask.array as da

    start.wait()
    for j in range(APPENDS):
        x = da.from_array(np.full((2,), k * STRIDE + j, "i8"), chunks=1)
        arrayds.to_arrayrecord(x, url, mode="a", retries=100, storage_options=so)
    done.put(k)


@pytest.fixture(params=["local", "s3"])
def place(request, tmp_path) -> tuple[str, Any]:
    if request.param == "local":
        return str(tmp_path / "a"), None
    server = request.getfixturevalue("writers_s3")
    return f"s3://{BUCKET}/p-{uuid.uuid4().hex[:8]}", server.storage_options()


def test_dask_appends_from_processes_keep_every_row_once(place):
    url, so = place
    arrayds.to_arrayrecord(np.array([-1]), url, mode="w", chunks=1, storage_options=so)
    ctx = multiprocessing.get_context("spawn")
    start, done = ctx.Barrier(WRITERS), ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(url, so, k, start, done)) for k in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0] * WRITERS
    assert sorted(done.get() for _ in procs) == list(range(WRITERS))

    rows = arrayds.open_array(url, storage_options=so)[:].tolist()
    want = Counter({k * STRIDE + j: 2 for k in range(WRITERS) for j in range(APPENDS)})
    assert rows[0] == -1 and Counter(rows[1:]) == want
    for k in range(WRITERS):  # one writer's appends land in its order
        mine = [v for v in rows if v // STRIDE == k and v >= 0]
        assert mine == sorted(mine)
    # one version per commit: the creation, then each append on top of the one before
    gens = [v.generation for v in arrayds.versions(url, storage_options=so)]
    assert gens == list(range(1, 2 + WRITERS * APPENDS))
    for g in gens:
        old = arrayds.open_array(url, version=g, storage_options=so)[:].tolist()
        assert old == rows[: 1 + 2 * (g - 1)]
    assert verify(url, storage_options=so).ok
