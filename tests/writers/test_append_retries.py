"""``retries=`` on the appends of dask arrays (``to_arrayrecord(x, url, mode="a")``)
and of xarray datasets (``append_dim=``): writer threads racing on one node of a local
folder and of moto S3 leave every appended row there exactly once; an append that
loses the compare-and-swap to another writer several times in a row (an exact
interleaving through the fault proxy: another writer commits while each of its
manifest PUTs is answered 503, so the client's resend is refused) commits once, after
the other writer's rows; an append that no longer fits the node (replaced by one of
another dtype or grid) raises ``CommitConflictError`` with nothing of it visible; a
budget that is not a count is a ``ValueError`` naming ``retries``."""

from __future__ import annotations

import itertools
import os
import threading
import uuid
from collections import Counter
from typing import Any

import dask.array as da
import numpy as np
import pytest
from faults.proxy import FaultProxy, Rule

import arrayds
from arrayds.errors import CommitConflictError
from arrayds.nodes import retry
from arrayds.verify import verify

from .conftest import BUCKET

xr = pytest.importorskip("xarray")

WRITERS, APPENDS = 4, 3
LOSSES = 3
"""Races the append under test loses in a row in the exact interleaving."""


def _rows(values: list[int]) -> Any:
    """xarray rows: coordinate ``time`` and variable ``v`` both hold ``values``."""
    return xr.Dataset({"v": (("time",), np.array(values, "i8"))}, coords={"time": values})


def _create(url: str, so: Any, kind: str) -> None:
    if kind == "dask":
        arrayds.to_arrayrecord(np.array([-1]), url, mode="w", chunks=1, storage_options=so)
    else:
        arrayds.to_arrayrecord(_rows([-1]), url, mode="w", storage_options=so)


def _append(url: str, so: Any, kind: str, value: int, **kw: Any) -> Any:
    if kind == "dask":
        x = da.from_array(np.full((2,), value, "i8"), chunks=1)
        return arrayds.to_arrayrecord(x, url, mode="a", storage_options=so, **kw)
    return arrayds.to_arrayrecord(
        _rows([value]), url, mode="a", append_dim="time", storage_options=so, **kw
    )


def _values(url: str, so: Any, kind: str) -> list[int]:
    """The rows as stored, without the first one (which marks the creation)."""
    if kind == "dask":
        return arrayds.open_array(url, storage_options=so)[:].tolist()[1:]
    ds = xr.open_dataset(url, engine="arrayds", storage_options=so).load()
    assert ds["time"].values.tolist() == ds["v"].values.tolist()  # never a mix of rows
    return ds["v"].values.tolist()[1:]


@pytest.mark.parametrize("where", ["local", "s3"], indirect=True)
@pytest.mark.parametrize("kind", ["dask", "xarray"])
def test_racing_writer_threads_append_every_row_once(where, kind):
    url, so = where
    _create(url, so, kind)
    start = threading.Barrier(WRITERS, timeout=60)
    failed: list[BaseException] = []

    def writer(k: int) -> None:
        try:
            start.wait()
            for j in range(APPENDS):
                _append(url, so, kind, 100 * k + j)
        except BaseException as e:  # noqa: BLE001 - reported below
            failed.append(e)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failed == []
    per = 2 if kind == "dask" else 1  # a dask append adds two equal rows
    want = Counter({100 * k + j: per for k in range(WRITERS) for j in range(APPENDS)})
    assert Counter(_values(url, so, kind)) == want
    assert verify(url, storage_options=so).ok


@pytest.mark.parametrize("kind", ["dask", "xarray"])
def test_an_append_that_loses_races_in_a_row_commits_once_after_the_others(
    writers_s3, monkeypatch, kind
):
    monkeypatch.setattr(retry, "MAX_BACKOFF", 0.001)  # the count matters here, not the clock
    url = f"s3://{BUCKET}/race-{uuid.uuid4().hex[:8]}"
    so = writers_s3.storage_options()
    _create(url, so, kind)
    values = itertools.count()

    def commit_first() -> None:  # another writer commits before the 503'd PUT is resent
        _append(url, so, kind, next(values), compact=False)

    # one 503 on each attempt's PUT of the node's manifest (not a member's): the client
    # resends it once the other writer committed, and the resend is refused; rule i
    # lets through the i resends before its PUT
    head = rf"/{url.split('://')[1]}/arrayds\.json$"
    rules = [
        Rule("503", methods=("PUT",), keys=head, skip=i, limit=1, then=commit_first)
        for i in range(LOSSES)
    ]
    with FaultProxy(writers_s3.endpoint_url, rules) as p:
        before = retry.retried()
        _append(url, writers_s3.storage_options(p.url), kind, 99, compact=False)
        assert p.injected["503"] == LOSSES
    assert retry.retried() - before == LOSSES
    per = 2 if kind == "dask" else 1
    assert _values(url, so, kind) == [v for v in [*range(LOSSES), 99] for _ in range(per)]
    assert verify(url, storage_options=so).ok


@pytest.mark.parametrize("kind", ["dask", "xarray"])
def test_an_append_lands_after_a_concurrent_append(tmp_path, kind):
    url = str(tmp_path / kind)
    _create(url, None, kind)
    pending = _append(url, None, kind, 7, compute=False)  # planned, not yet committed
    _append(url, None, kind, 5)
    pending.compute()  # the node moved on: placed after the other writer's rows
    per = 2 if kind == "dask" else 1
    assert _values(url, None, kind) == [5] * per + [7] * per
    assert verify(url).ok


def _files(url: str) -> set[str]:
    return {os.path.join(d, f) for d, _s, fs in os.walk(url) for f in fs if "_arrayds" not in d}


@pytest.mark.parametrize("kind", ["dask", "xarray"])
def test_an_append_that_no_longer_fits_raises_and_leaves_nothing(tmp_path, kind):
    url = str(tmp_path / kind)
    _create(url, None, kind)
    pending = _append(url, None, kind, 7, compute=False)
    if kind == "dask":  # replaced by an array of another dtype
        arrayds.to_arrayrecord(np.array([0.5]), url, mode="w", chunks=1)
        match = r"another writer replaced the array \(now dtype float64"
    else:  # replaced by a dataset whose v has another dtype
        arrayds.to_arrayrecord(_rows([1]).astype("f4"), url, mode="w")
        match = r"variable 'v' was replaced by another writer \(now dims \('time',\), dtype float32"
    committed = _files(url)
    with pytest.raises(CommitConflictError, match=match):
        pending.compute()
    assert _files(url) == committed  # the append's shards were removed
    assert verify(url).ok


@pytest.mark.parametrize("kind", ["dask", "xarray"])
def test_no_retries_raise_the_conflict_at_once(tmp_path, kind):
    url = str(tmp_path / kind)
    _create(url, None, kind)
    pending = _append(url, None, kind, 7, compute=False, retries=0)
    _append(url, None, kind, 5)
    with pytest.raises(CommitConflictError, match="nothing of this write is visible"):
        pending.compute()
    assert _values(url, None, kind) == [5] * (2 if kind == "dask" else 1)


@pytest.mark.parametrize("bad", [-1, 1.5, "3", None, True])
def test_retries_must_be_a_count(tmp_path, bad):
    url = str(tmp_path / "d")
    _create(url, None, "dask")
    with pytest.raises(ValueError, match=r"array .*retries must be an integer >= 0"):
        _append(url, None, "dask", 1, retries=bad)
    xurl = str(tmp_path / "x")
    _create(xurl, None, "xarray")
    with pytest.raises(ValueError, match=r"dataset .*retries must be an integer >= 0"):
        _append(xurl, None, "xarray", 1, retries=bad)
    tree = xr.DataTree.from_dict({"/": _rows([1])})
    with pytest.raises(ValueError, match=r"datatree .*retries must be an integer >= 0"):
        arrayds.to_arrayrecord(tree, str(tmp_path / "t"), retries=bad)
    assert _values(url, None, "dask") == [] and _values(xurl, None, "xarray") == []
    assert not os.path.exists(tmp_path / "t")
