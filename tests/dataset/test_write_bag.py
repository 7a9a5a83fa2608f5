"""The graph of a bag write (arrayds.dask.graph.write_bag), which the records and the
ragged writers share: one task per partition (the bag's own tasks fused into it) that
writes the partition, then one commit task given their results in partition order.

The partition tasks here write real files and the commit writes a real manifest file
listing them, so "nothing visible" is checked on disk.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import dask
import dask.bag as db
import pytest
from dask.delayed import Delayed

from arrayds.dask.graph import commit_after, write_bag


def write_part(items, k: int, folder: Path) -> dict:
    """Partition task: the items as one file of partition ``k``."""
    items = list(items)
    if "boom" in items:
        raise ValueError(f"partition {k} has a bad item")
    path = folder / f"part-{k}.json"
    path.write_text(json.dumps(items))
    return {"part": k, "file": path.name, "count": len(items)}


def commit(results: list, folder: Path) -> dict:
    """Commit task: the manifest naming every partition's file, written last."""
    man = {"parts": results}
    tmp = folder / "manifest.json.tmp"
    tmp.write_text(json.dumps(man))
    os.replace(tmp, folder / "manifest.json")
    return man


def upper(s: str) -> str:
    return s.upper()


def write(bag, folder: Path, name: str = "w", commit_key: str = "c", **kw):
    """The bag's partitions as files in ``folder``, then the manifest."""
    return write_bag(
        bag, write_part, (folder,), commit, (folder,), name=name, commit_key=commit_key, **kw
    )


def test_one_task_per_partition_plus_commit_and_delayed(tmp_path):
    bag = db.from_sequence([f"x{i}" for i in range(10)], npartitions=4).map(upper)
    d = write(bag, tmp_path, "w-test", "c-test", compute=False)
    assert isinstance(d, Delayed) and d.key == "c-test"
    graph = dict(d.__dask_graph__())
    # the bag's from_sequence and map tasks are fused into the partition tasks: one task
    # each (dask names a fused task after its parts and keeps its key as an alias, a
    # key rename, not work)
    tasks = [k for k, v in graph.items() if type(v).__name__ != "Alias"]
    parts = sorted(k for k in tasks if k != "c-test")
    assert len(tasks) == 4 + 1 and "c-test" in tasks
    assert [k[1] for k in parts] == [0, 1, 2, 3]
    assert all(k[0].endswith("-w-test") and "upper" in k[0] for k in parts)
    assert all(("w-test", k) in graph for k in range(4))
    assert os.listdir(tmp_path) == []  # nothing runs before compute
    man = d.compute(scheduler="threads")
    # results in partition order, each partition's items in bag order
    assert [p["part"] for p in man["parts"]] == [0, 1, 2, 3]
    back = [x for p in man["parts"] for x in json.loads((tmp_path / p["file"]).read_text())]
    assert back == [f"X{i}" for i in range(10)]
    assert json.loads((tmp_path / "manifest.json").read_text()) == man


def test_compute_runs_on_the_configured_scheduler_and_returns_the_commit(tmp_path):
    bag = db.from_sequence(["a", "b", "c"], npartitions=3)
    with dask.config.set(scheduler="sync"):
        man = write(bag, tmp_path)
    assert [p["count"] for p in man["parts"]] == [1, 1, 1]
    assert (tmp_path / "manifest.json").exists()


def test_failing_partition_leaves_no_manifest(tmp_path):
    bag = db.from_sequence(["a", "b", "boom", "d"], npartitions=4)
    # on the bag's own scheduler (processes)
    with pytest.raises(ValueError, match="partition 2 has a bad item"):
        write(bag, tmp_path, compute=True, progress=False)
    assert not (tmp_path / "manifest.json").exists()  # the commit never ran


def test_commit_after_takes_write_results_in_order(tmp_path):
    writes = [dask.delayed(write_part)([s], k, tmp_path) for k, s in enumerate("pq")]
    d = commit_after(writes, commit, (tmp_path,), key="c-after", compute=False)
    assert isinstance(d, Delayed) and d.key == "c-after"
    assert not (tmp_path / "manifest.json").exists()
    man = commit_after(writes, commit, (tmp_path,), key="c-after", scheduler="sync")
    assert [p["part"] for p in man["parts"]] == [0, 1]
    bad = [dask.delayed(write_part)(["boom"], 0, tmp_path)]
    (tmp_path / "manifest.json").unlink()
    with pytest.raises(ValueError, match="partition 0 has a bad item"):
        commit_after(bad, commit, (tmp_path,), key="c-bad", scheduler="sync")
    assert not (tmp_path / "manifest.json").exists()
