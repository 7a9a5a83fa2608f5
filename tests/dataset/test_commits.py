"""Local commits are a compare-and-swap: of two committers that read the same
manifest generation, exactly one wins (docs/spec.md, "Commits").

The races run in real processes writing one folder, because that is how two dask
workers or two notebooks meet on a shared disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import arrayds
from arrayds import records as records
from arrayds.errors import CommitConflictError
from arrayds.nodes import commit
from arrayds.nodes.names import MANIFEST
from arrayds.storage import new_store


def _group(gen: int, **attrs: object) -> dict[str, object]:
    return {"format": "arrayds", "kind": "group", "generation": gen, "attrs": attrs}


def test_a_stale_generation_is_refused_and_changes_nothing(tmp_path):
    st = new_store(str(tmp_path / "ds"))
    commit.replace(st, "n", _group(1))
    commit.replace(st, "n", _group(2, by="first"))
    with pytest.raises(CommitConflictError, match="committed generation 2 while this write"):
        commit.replace(st, "n", _group(2, by="second"))
    assert commit.read(st, "n").raw["attrs"] == {"by": "first"}
    assert sorted(os.listdir(tmp_path / "ds" / "n")) == [MANIFEST]  # no temporary left


def test_the_empty_parent_group_does_not_replace_a_group_that_is_there(tmp_path):
    st = new_store(str(tmp_path / "ds"))
    commit.replace(st, "", _group(3, title="kept"))
    assert not commit.replace(st, "", {"format": "arrayds", "kind": "group", "generation": 1})
    commit.ensure_parents(st, "x")
    assert commit.read(st, "").raw["attrs"] == {"title": "kept"}
    assert sorted(os.listdir(tmp_path / "ds")) == [MANIFEST]


def test_a_commit_that_lost_the_race_changes_nothing_and_says_so(tmp_path):
    """A writer commits between another commit's read and its conditional put: the
    put is refused and nothing of the late write is visible."""
    st = new_store(str(tmp_path / "ds"))
    commit.commit(st, "n", lambda base: _group(1), write_id="first")

    def build(base):
        commit.commit(st, "n", lambda b: _group(0, by="other"), write_id="other")
        return _group(0, by="late")

    with pytest.raises(CommitConflictError, match="another writer committed to it"):
        commit.commit(st, "n", build, write_id="late", parents=False)
    assert commit.read(st, "n").raw["attrs"] == {"by": "other"}
    assert commit.read(st, "n").generation == 2


_RECORDS_CHILD = """
import sys, time, os
from arrayds import records
url, who, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
for k in range(n):
    records.write_records([b"%d-%d" % (who, k)], url, mode="a", num_shards=1)
"""

_ARRAY_CHILD = """
import sys, time, os
import numpy as np
import arrayds
from arrayds.errors import CommitConflictError
url, who, n, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
done = 0
for _ in range(n):
    a = arrayds.open_array(url, mode="a")
    try:
        a.append(np.full((2, 3), who, dtype="i4"))
        done += 1
    except CommitConflictError:
        pass
print(done)
"""


def _race(tmp_path, script: str, url: str, writers: int, n: int) -> list[str]:
    """Start ``writers`` processes running ``script``, release them at once, and
    return what each printed."""
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, url, str(w), str(n), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(1, writers + 1)
    ]
    for p in procs:  # each has imported what it needs
        assert p.stdout.readline() == "ready\n", p.communicate()[1]
    go.touch()
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err
        outs.append(out.strip())
    return outs


def test_processes_appending_records_at_once_lose_nothing(tmp_path):
    """Four processes append 6 times each to one dataset, starting together. Appends
    re-read the manifest after a lost race, so every record is there at the end."""
    url = str(tmp_path / "corpus")
    records.write_records([b"seed"], url)
    _race(tmp_path, _RECORDS_CHILD, url, 4, 6)
    got = records.read_records(url).compute(scheduler="sync")
    want = [b"seed"] + [b"%d-%d" % (w, k) for w in range(1, 5) for k in range(6)]
    assert sorted(got) == sorted(want)
    assert json.loads((tmp_path / "corpus" / MANIFEST).read_bytes())["generation"] == 1 + 24


def test_processes_appending_to_one_array_never_lose_a_commit(tmp_path):
    """Array appends start from the handle's snapshot, so a lost race is an error,
    never a silent loss: the array ends with exactly the rows of the appends that
    reported success."""
    url = str(tmp_path / "a")
    arrayds.open_array(url, mode="w", shape=(0, 3), dtype="i4", chunks=(2, 3))
    done = {w: int(out) for w, out in enumerate(_race(tmp_path, _ARRAY_CHILD, url, 3, 8), 1)}
    a = arrayds.open_array(url)
    assert a.shape == (2 * sum(done.values()), 3)
    values, counts = np.unique(a[:, 0], return_counts=True)
    assert dict(zip(values.tolist(), (counts // 2).tolist(), strict=True)) == {
        w: k for w, k in done.items() if k
    }
    # one commit per append, and the tiered merges that followed some of them
    assert a.generation >= 1 + sum(done.values())
