"""A real SIGKILL of a ragged bag writer process after its workers wrote every segment
and before its commit (docs/spec.md 14.4.1): the ragged array is left as it was, and
gc (once the crashed write's pending marker may be taken) removes the orphan segments
and shards."""

from __future__ import annotations

import os

import numpy as np
import pytest
from dataset.test_crash import run_child

import arrayds.ragged as rg
from arrayds.nodes import history as log
from arrayds.tools.gc import collect_garbage
from arrayds.verify import verify

LIMIT = 4
PARTS = 5 * LIMIT + 1  # 6 segments of one item per partition

CHILD = f"""
import sys, threading
import dask, dask.bag as db, numpy as np
import arrayds.ragged as rg
from arrayds.kinds.ragged import write as rw
from arrayds.nodes import history
history.SEGMENT_LIMIT = {LIMIT}

def stop_at_commit(segments, *args):
    print(sum(len(s) for s in segments), flush=True)  # every segment written: now kill me
    threading.Event().wait()

rw._commit_segments = stop_at_commit
parts = [[np.full(1 + k % 3, k, dtype=np.int32)] for k in range({PARTS})]
with dask.config.set(scheduler="threads"):
    bag = db.from_delayed([dask.delayed(p) for p in parts])
    rg.write_ragged(bag, sys.argv[1], mode=sys.argv[2])
"""


def _read(url: str) -> list[np.ndarray]:
    log.clear_cache()
    ra = rg.open_ragged(url)
    return [np.asarray(ra[i]) for i in range(len(ra))]


@pytest.mark.parametrize("mode", ["a", "w"])
def test_killed_after_writing_segments_before_the_commit(tmp_path, mode):
    url = str(tmp_path / "r")
    first = [np.arange(k + 1, dtype=np.int32) for k in range(3)]
    rg.write_ragged(first, url)
    head = open(os.path.join(url, "arrayds.json"), "rb").read()
    log_dir = os.path.join(url, log.LOG_DIR)
    named = set(os.listdir(log_dir)) if os.path.isdir(log_dir) else set()
    shards = set(os.listdir(os.path.join(url, "c")))
    proc = run_child(CHILD, url, mode)
    try:
        line = proc.stdout.readline()
        assert line.strip() == str(-(-PARTS // LIMIT)), proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    orphans = set(os.listdir(log_dir)) - named
    assert len(orphans) == -(-PARTS // LIMIT)  # written, never named
    assert open(os.path.join(url, "arrayds.json"), "rb").read() == head
    got = _read(url)
    assert len(got) == 3 and all(np.array_equal(a, b) for a, b in zip(got, first, strict=True))
    assert verify(url).ok
    kept = collect_garbage(url, min_age=0)  # the pending marker keeps them
    assert not {p for p in kept.removed if log.LOG_DIR in p or p.endswith(".array_record")}
    report = collect_garbage(url, min_age=0, max_write_age=0)
    assert {os.path.basename(p) for p in report.removed if log.LOG_DIR in p} == orphans
    assert len([p for p in report.removed if p.endswith(".array_record")]) == PARTS
    assert set(os.listdir(log_dir)) == named
    assert set(os.listdir(os.path.join(url, "c"))) == shards
    assert len(_read(url)) == 3 and verify(url).ok
