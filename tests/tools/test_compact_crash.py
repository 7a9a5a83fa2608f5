"""Crash safety of compaction, with real processes and real SIGKILLs.

A child process compacts a fragmented dataset (an array of 40 appends, a records
dataset of 12 appends) into about ten new shards; the parent kills it (SIGKILL) as
soon as the first new shard file appears, once three of them exist, or right after
the manifest changed. The dataset then reads exactly the old state (the manifest
bytes unchanged) or, after the commit, the new one with the same content;
``arrayds verify`` passes, ``arrayds gc`` removes the leftovers, and compaction run
again succeeds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import arrayds
from arrayds import records as records
from arrayds.tools.gc import collect_garbage
from arrayds.tools.verify import verify

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = """
import sys
import arrayds
arrayds.compact(sys.argv[1], shard_size="2MiB")
print("done")
"""


def make_array(url: str) -> None:
    a = arrayds.open_array(url, mode="w", shape=(0, 256), dtype="f8", chunks=(4, 256))
    rng = np.random.default_rng(5)
    for _ in range(40):
        a.append(rng.normal(size=(256, 256)), compact=False)
    a[:600:7] = 1.0


def make_records(url: str) -> None:
    rng = np.random.default_rng(6)
    for k in range(12):
        items = [rng.bytes(int(n)) for n in rng.integers(10_000, 30_000, size=40)]
        records.write_records(items, url, mode="a" if k else "w-", serializer="raw")


def content(url: str, kind: str):
    if kind == "array":
        return arrayds.open_array(url)[...]
    return list(records.open_records(url).data_source())


def data_files(url: str, kind: str) -> set[str]:
    folder = os.path.join(url, "c") if kind == "array" else url
    return {n for n in os.listdir(folder) if "array_record" in n}


def manifest_bytes(url: str) -> bytes:
    with open(os.path.join(url, "arrayds.json"), "rb") as f:
        return f.read()


@pytest.mark.parametrize("kind", ["array", "records"])
@pytest.mark.parametrize("point", ["first shard", "three shards", "after the commit"])
def test_killed_compaction_leaves_old_or_new_state(tmp_path, kind, point):
    url = str(tmp_path / "ds")
    (make_array if kind == "array" else make_records)(url)
    want = content(url, kind)
    old_manifest = manifest_bytes(url)
    old_files = data_files(url, kind)

    def ready() -> bool:
        if point == "after the commit":
            return manifest_bytes(url) != old_manifest
        new = data_files(url, kind) - old_files
        return len(new) >= (1 if point == "first shard" else 3)

    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, url],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    try:
        while not ready():
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"compaction ended ({proc.returncode}) before the kill:\n{err}")
            assert time.monotonic() < deadline, "compaction made no progress"
            time.sleep(0.0005)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    now = manifest_bytes(url)
    if point == "after the commit":
        assert now != old_manifest
    else:
        assert now == old_manifest  # nothing of the compaction is visible
    got = content(url, kind)
    if kind == "array":
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want
    assert verify(url).ok
    assert old_files <= data_files(url, kind)  # old shards are never removed by it
    collect_garbage(url, min_age=0)
    report = arrayds.compact(url, shard_size="2MiB")
    if point != "after the commit":
        assert report.nodes[0].action == "compacted"
    got = content(url, kind)
    if kind == "array":
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want
    assert verify(url).ok
