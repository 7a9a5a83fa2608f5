"""Local datasets and the shard sizes manifests record: reads open shards as before
(the engine reads the size itself; a wrong recorded size does not matter to them),
and ``verify`` reports a shard whose size differs from its manifest."""

from __future__ import annotations

import json
import os

import numpy as np

import arrayds
from arrayds.nodes import shards as store_mod
from arrayds.verify import verify


def test_wrong_recorded_size_reads_locally_and_verify_reports_it(tmp_path):
    url = str(tmp_path / "ds")
    data = np.arange(40.0).reshape(8, 5)
    arrayds.to_arrayrecord(data, url, "a", chunks=(2, 5))
    mpath = os.path.join(url, "a", "arrayds.json")
    with open(mpath) as f:
        m = json.load(f)
    entry = m["shards"][0]
    real = os.path.getsize(os.path.join(url, "a", entry["path"]))
    assert entry["bytes"] == real
    assert verify(url).ok
    entry["bytes"] = real + 7
    with open(mpath, "w") as f:
        json.dump(m, f)
    store_mod.clear_reader_cache()
    np.testing.assert_array_equal(arrayds.open_array(url, "a")[:], data)
    report = verify(url)
    assert [(p.where, p.message) for p in report.problems] == [
        ("file", f"has {real} bytes, the manifest says {real + 7}")
    ]
    assert report.problems[0].url.endswith(entry["path"])
