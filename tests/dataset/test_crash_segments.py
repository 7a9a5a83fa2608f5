"""Crash safety of long shard lists (docs/spec.md 14.3.1, 14.3.2, 14.4, 14.7), with
real processes and real SIGKILLs: a writer killed while it writes the segments and
indexes of a long list, or between the region writes that rewrite some of them,
leaves exactly a committed state (the last one or the one before), every segment and
index a head names intact, and the next write and ``verify`` succeed."""

from __future__ import annotations

import json
import os

import numpy as np

import arrayds
from arrayds.nodes import history as log
from arrayds.verify import verify
from dataset.test_crash import kill_when, run_child

N = 2048
BLOCK = 16
WRITES = 400

SETUP = f"""
import sys
import numpy as np
import arrayds
from arrayds.nodes import history
history.SEGMENT_LIMIT = 64
history.INDEX_LIMIT = 4  # 16 segments: indexes of 4 and at most 4 segments in the head
url = sys.argv[1]
a = arrayds.open_array(url, mode="w", shape=({N},), dtype="i8", chunks=1, fill_value=-1)
for b in range(0, {N}, {BLOCK}):
    a[b : b + {BLOCK} : 2] = np.arange(b, b + {BLOCK}, 2)
"""

REGION_WRITES = (
    SETUP.replace('mode="w"', 'mode="r+"').split("for b in")[0]
    + f"""
for k in range({WRITES}):
    lo = (k * 37) % ({N} - 8)
    a[lo : lo + 8 : 2] = 10_000 + k
    print(k + 1, flush=True)  # k + 1 region writes committed
    a = arrayds.open_array(url, mode="r+") if k % 5 == 4 else a
"""
)


def state_after(j: int) -> np.ndarray:
    """The array after the setup and the first ``j`` region writes."""
    want = np.full(N, -1, "i8")
    for b in range(0, N, BLOCK):
        want[b : b + BLOCK : 2] = np.arange(b, b + BLOCK, 2)
    for k in range(j):
        lo = (k * 37) % (N - 8)
        want[lo : lo + 8 : 2] = 10_000 + k
    return want


def assert_indexed(url: str) -> None:
    """The setup's list has indexes (what these crashes must keep intact)."""
    head = json.loads(open(os.path.join(url, "arrayds.json"), "rb").read())
    assert sum("refs" in r for r in head["shards"]["segments"]) >= 2


def check_committed(url: str, first: int, last: int) -> int:
    """The array reads as after exactly j region writes, first <= j <= last; returns j."""
    log.clear_cache()
    got = arrayds.open_array(url)[...]
    for j in range(last, first - 1, -1):
        if np.array_equal(got, state_after(j)):
            return j
    raise AssertionError("the array is no committed state")


def test_killed_while_writing_the_segments_of_a_long_list(tmp_path):
    url = str(tmp_path / "a")
    setup = run_child(SETUP, url)
    assert setup.wait(timeout=120) == 0, setup.stderr.read()
    assert_indexed(url)
    head = open(os.path.join(url, "arrayds.json"), "rb").read()
    log_dir = os.path.join(url, log.LOG_DIR)
    before = set(os.listdir(log_dir))
    # the child writes the list anew (a strided write over every chunk hides every
    # entry: all of its segments rewritten, at once) and is killed as they appear
    code = SETUP.replace('mode="w"', 'mode="r+"').split("for b in")[0] + (
        f"a[0:{N}:2] = np.arange(0, {N}, 2) * 3\n"
    )
    proc = run_child(code, url)
    kill_when(proc, lambda: len(set(os.listdir(log_dir)) - before) >= 2)
    log.clear_cache()
    got = arrayds.open_array(url)[...]
    after = state_after(0)
    after[0:N:2] = np.arange(0, N, 2) * 3
    if open(os.path.join(url, "arrayds.json"), "rb").read() == head:
        np.testing.assert_array_equal(got, state_after(0))  # killed before its commit
        want = state_after(0)
    else:  # the commit had landed (a loaded machine let the child run on)
        np.testing.assert_array_equal(got, after)
        want = after
    assert verify(url).ok
    a = arrayds.open_array(url, mode="r+")
    a[0:8:2] = 5
    want[0:8:2] = 5
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)


def test_killed_between_and_during_region_writes_that_rewrite_segments(tmp_path):
    url = str(tmp_path / "a")
    for stop in (7, 40):
        setup = run_child(SETUP, url)
        assert setup.wait(timeout=120) == 0, setup.stderr.read()
        assert_indexed(url)
        proc = run_child(REGION_WRITES, url)
        # kill as soon as the child says it committed `stop` writes: it may have made
        # one or two more, or be in the middle of the next one
        kill_when(proc, lambda s=stop, p=proc: int(p.stdout.readline() or 0) >= s)
        j = check_committed(url, stop, stop + 20)
        assert j >= stop
        report = verify(url)
        assert report.ok, report.problems
