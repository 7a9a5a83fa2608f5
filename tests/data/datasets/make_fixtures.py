"""Write the dataset fixtures of tests/data/datasets (README.md there).

    python tests/data/datasets/make_fixtures.py v2 tests/data/datasets/v2
    python tests/data/datasets/make_fixtures.py v3 tests/data/datasets/v3
    python tests/data/datasets/make_fixtures.py v1 tests/data/datasets/v1
    python tests/data/datasets/make_fixtures.py tree tests/data/datasets/tree

``v2`` runs the steps of :func:`build` with the arrayds the interpreter imports (this
release: every new node is format 2); ``v3`` the same with segments of 4 entries and
indexes of 2 references (:data:`INDEXED_LIMITS`), so its long lists have indexes and
their heads format version 3 (docs/spec.md 14.3.2). ``v1`` runs the same steps with
the last format 1 release, commit ``645e254`` (its Python sources from ``git
archive``, the engine of this build: the engine did not change since), in a child
interpreter. ``tree`` (:func:`build_tree`, the limits of ``v3``) pins a DataTree
commit whose roll forward is pending. The tests
(tests/nodes/test_fixtures.py) import this module for :data:`STEPS` and
:func:`expected`, the content of every node after every step.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

INDEXED_LIMITS = (4, 2, 2)
"""SEGMENT_LIMIT, INDEX_LIMIT and TAIL_LIMIT of the ``v3`` fixture's writer."""
V2_RELEASE = "0de3c60"
"""The last commit whose arrayds writes and reads format 2 without indexes."""
V1_RELEASE = "645e254"
"""The last commit whose arrayds writes (and reads only) format 1."""
N_APPENDS = 6


def _odd(a: int, b: int) -> slice:
    return slice(a, b, 2)


# Every step that changes the array "x" (chunks of 1 element, so a strided write makes
# one shard entry per element): appends add one entry each, the strided writes one per
# element; the tail passes TAIL_LIMIT (32) at step 8 (a segment of 36 entries) and
# again at step 11 (33 entries, merged with the first: one segment of 69).
STEPS: list[tuple[str, Any]] = [
    *[("append", 10) for _ in range(N_APPENDS)],  # generations 2..7: 60 elements
    ("neg", slice(0, 60, 2)),  # 8: 30 entries
    ("append", 40),  # 9
    ("neg", _odd(61, 100)),  # 10: 20 entries
    ("neg", _odd(1, 25)),  # 11: 12 entries, the tail reaches 33: a merge
    ("append", 5),  # 12
    ("attrs", {"units": "m"}),  # 13: no entry
]


def x_after(step: int) -> np.ndarray:
    """The content of "x" after ``step`` steps of :data:`STEPS` (0: just created)."""
    x = np.zeros(0, "i8")
    for op, arg in STEPS[:step]:
        if op == "append":
            x = np.concatenate([x, np.arange(x.size, x.size + arg, dtype="i8")])
        elif op == "neg":
            x[arg] = -np.arange(x.size)[arg]
    return x


RECORDS = [5, 3, 4]
"""The records node "r": one write, then two appends, of these many records."""


def record(i: int) -> bytes:
    return f"record-{i:03d}".encode() * (1 + i % 3)


def y_value() -> np.ndarray:
    return (np.arange(12, dtype="f4").reshape(3, 4) + 0.5) ** 2


def expected() -> dict[str, Any]:
    """{node: {"kind", "versions": [content after each commit, oldest first], attrs}}:
    what the fixture holds, in both format versions (format 1 keeps only the last)."""
    x = [x_after(i) for i in range(len(STEPS) + 1)]
    r = [[record(i) for i in range(sum(RECORDS[: k + 1]))] for k in range(len(RECORDS))]
    return {
        "": {
            "kind": "group",
            "versions": [{}, {"title": "fixture"}, {"title": "fixture", "step": 2}],
        },
        "x": {"kind": "array", "versions": x, "attrs": {"units": "m"}},
        "r": {"kind": "records", "versions": r, "attrs": {}},
        "g": {"kind": "group", "versions": [{}, {"about": "a subgroup"}]},
        "g/y": {
            "kind": "array",
            "versions": [np.zeros((3, 4), "f4"), y_value(), y_value()],
            "attrs": {"k": 1},
        },
    }


def build(url: str) -> None:
    """Write the fixture at ``url`` with the arrayds this interpreter imports."""
    import arrayds

    root = arrayds.open_group(url, mode="w-")
    x = arrayds.open_array(url, "x", mode="w-", shape=(0,), dtype="i8", chunks=1)
    # one shard entry per step: without the tiered merge of appends (a release that
    # has it merges by default; the format 1 release has no such keyword)
    unmerged = {"compact": False} if "compact" in inspect.signature(x.append).parameters else {}
    for op, arg in STEPS:
        if op == "append":
            x.append(np.arange(x.shape[0], x.shape[0] + arg, dtype="i8"), **unmerged)
        elif op == "neg":
            x[arg] = -np.arange(x.shape[0])[arg]
        else:
            x.attrs.update(arg)
    done = 0
    for k, n in enumerate(RECORDS):
        items = [record(i) for i in range(done, done + n)]
        arrayds.to_arrayrecord(items, url, "r", mode="w-" if k == 0 else "a")
        done += n
    g = arrayds.open_group(url, "g", mode="w-")
    g.attrs.update({"about": "a subgroup"})
    y = arrayds.open_array(url, "g/y", mode="w-", shape=(3, 4), dtype="f4", chunks=(2, 4))
    y[...] = y_value()
    y.attrs.update({"k": 1})
    root.attrs.update({"title": "fixture"})
    root.attrs.update({"step": 2})


TREE_N = 11
"""The chunks (and shards) of the variable ``v`` of the ``tree`` fixture's group
``a/b``: with :data:`INDEXED_LIMITS`, three segments written by the shard tasks,
two of them moved into an index by the commit."""


def tree_value(scale: int) -> np.ndarray:
    """The values of ``a/b/v`` in the ``tree`` fixture's write ``scale`` (1, then 2)."""
    return np.arange(TREE_N, dtype="i8") * scale


def build_tree(url: str) -> None:
    """Write the ``tree`` fixture at ``url``: a DataTree (root, ``a``, ``a/b`` with a
    long variable) written whole, then written again with mode ``"w"`` and the
    process "killed" right after the commit point (the roll forward raises): the
    root's head lists the new tree, every other node's own manifest is the first
    tree's, and readers see the new one through the root's snapshot, whose nested
    member lists are shard logs in the root's folder (docs/spec.md 10.4)."""
    import dask
    import dask.array as da
    import xarray as xr

    import arrayds
    import arrayds.xarray.tree as xtree

    def tree(scale: int) -> Any:
        v = da.from_array(tree_value(scale), chunks=1)
        return xr.DataTree.from_dict(
            {
                "/": xr.Dataset({"r": ("y", [1, 2])}, attrs={"title": f"tree {scale}"}),
                "/a": xr.Dataset(attrs={"level": 1}),
                "/a/b": xr.Dataset({"v": ("x", v)}),
            }
        )

    class Killed(BaseException):
        pass

    def killed(*args: Any, **kwargs: Any) -> None:
        raise Killed

    with dask.config.set(scheduler="sync"):
        arrayds.to_arrayrecord(tree(1), url, shard_size=1)
        real, xtree.roll_forward = xtree.roll_forward, killed
        try:
            arrayds.to_arrayrecord(tree(2), url, shard_size=1, mode="w")
        except Killed:
            pass
        finally:
            xtree.roll_forward = real


def v1_release(work: Path, commit: str = V1_RELEASE) -> Path:
    """The Python sources of :data:`V1_RELEASE` (or of ``commit``: an earlier release)
    with this build's engine."""
    repo = Path(__file__).resolve().parents[3]
    work.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", commit, "arrayds"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)
    import arrayds._native as native

    shutil.copy(native.__file__, work / "arrayds")
    return work


def main(argv: list[str]) -> None:
    version, out = argv
    out = os.path.abspath(out)
    if os.path.exists(out):
        raise SystemExit(f"{out} exists: remove it first")
    if version in ("v2", "v3", "tree"):
        from arrayds.nodes import history
        from arrayds.nodes.commit import NEWEST
        from arrayds.nodes.names import FORMAT_VERSION

        assert (NEWEST, FORMAT_VERSION) == (2, 3), (NEWEST, FORMAT_VERSION)
        if version != "v2":  # small levels: "x" gets indexes at 13 commits
            history.SEGMENT_LIMIT, history.INDEX_LIMIT, history.TAIL_LIMIT = INDEXED_LIMITS
        (build_tree if version == "tree" else build)(out)
        return
    if version != "v1":
        raise SystemExit("usage: make_fixtures.py v1|v2|v3|tree OUT")
    if os.environ.get("ARRAYDS_FIXTURE_V1"):  # the child: the old release
        # an editable install's import hook would find this release's sources first
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__module__]
        sys.path.insert(0, os.environ["ARRAYDS_FIXTURE_V1"])
        from arrayds.nodes.names import FORMAT_VERSION

        assert FORMAT_VERSION == 1, FORMAT_VERSION
        build(out)
        return
    with tempfile.TemporaryDirectory() as tmp:
        src = v1_release(Path(tmp))
        env = dict(os.environ, ARRAYDS_FIXTURE_V1=str(src))
        subprocess.run([sys.executable, __file__, "v1", out], env=env, check=True, cwd=tmp)


if __name__ == "__main__":
    main(sys.argv[1:])
