"""Reads run on the shared pool end before the request that made them returns or
raises: a failed read leaves no other read running (writing into its output, or
counted in io_stats after the error), nor does a loop over items left early."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import arrayds
from arrayds import CorruptionError
from arrayds import ragged as rg
from arrayds.files.common import run_each
from arrayds.nodes import shards
from arrayds.nodes.shards import clear_reader_cache, io_pool, io_stats, reset_io_stats
from arrayds.storage import new_store


def test_run_each_returns_results_in_order_and_runs_on_the_pool():
    names: set[str] = set()

    def f(x):
        names.add(threading.current_thread().name)
        time.sleep(0.01)
        return x * 10

    assert run_each(io_pool(), f, list(range(6))) == [0, 10, 20, 30, 40, 50]
    assert any(n.startswith("arrayds-io") for n in names)
    assert run_each(io_pool(), f, []) == [] and run_each(io_pool(), f, [7]) == [70]


def test_run_each_raises_the_first_failure_after_every_call_has_ended():
    started, ended = [], []
    lock = threading.Lock()

    def f(x):
        with lock:
            started.append(x)
        if x == 0:
            raise ValueError("read 0 failed")
        time.sleep(0.05)
        with lock:
            ended.append(x)
        return x

    n = 4 * shards.IO_THREADS
    with pytest.raises(ValueError, match="read 0 failed"):
        run_each(io_pool(), f, list(range(n)))
    snapshot = (list(started), list(ended))
    time.sleep(0.2)
    # nothing started or ended after the raise; the calls not yet started were cancelled
    assert (started, ended) == snapshot
    assert len(ended) == len(started) - 1 < n - 1


def _sharded_array(url: str):
    a = arrayds.open_array(url, mode="w", shape=(64, 4096), dtype="f4", chunks=(8, 8))
    for i in range(8):  # one shard per band of rows
        a[i * 8 : (i + 1) * 8] = np.full((8, 4096), i, "f4")
    return a


def test_a_failed_array_read_leaves_no_read_running(tmp_path):
    url = str(tmp_path / "a")
    _sharded_array(url)
    st = new_store(url)
    key = sorted(k for k, _, _ in st.list("c/") if k.endswith(".array_record"))[0]
    raw = bytearray(st.get(key))
    raw[300:320] = b"\xff" * 20  # inside the first chunk of records
    with open(st.path(key), "r+b") as f:
        f.write(raw)
    clear_reader_cache()
    reset_io_stats()
    with pytest.raises(CorruptionError, match="is damaged"):
        arrayds.open_array(url)[...]
    after = io_stats()
    time.sleep(0.5)
    assert io_stats() == after


def test_leaving_a_loop_over_a_ragged_array_stops_its_read_ahead(tmp_path):
    items = [np.full((2, 500 + i), i, "f4") for i in range(40)]
    ra = rg.write_ragged(items, tmp_path / "r", piece_len=64, shard_size=4)
    clear_reader_cache()
    reset_io_stats()
    for item in ra:
        assert item.shape == (2, 500)
        break
    after = io_stats()
    time.sleep(0.3)
    assert io_stats() == after
