"""Crash consistency of format 2 commits, with real processes and real SIGKILLs.

A child process appends to an array in a loop, so that its commits write segments and
merge them (docs/spec.md, "Format version 2"), or (``compact="tiered"``, the default of
appends) so that its appends merge their newest shards by tiers; it is killed after a
random number of appends (it reports each one: a count, not a delay), wherever it then
is in the next. After every kill the array opens, its shape is one the child
committed, every row holds the value written, every retained version reads back a
committed prefix, ``verify`` passes, and ``gc`` removes only what the killed commit
left unreferenced.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import arrayds
from arrayds.nodes import commit, pending
from arrayds.nodes import history as log
from arrayds.nodes import registry as kinds
from arrayds.nodes import shards as store_mod
from arrayds.storage import get_store
from arrayds.tools.gc import collect_garbage
from arrayds.tools.verify import verify

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHUNK = 4
SIZES = [CHUNK * (1 + i % 3) for i in range(100_000)]
"""The child's append sizes, in order: whole chunks (1, 2, 3 chunks), so every
committed shape is a prefix sum of them."""
PREFIXES = set(np.cumsum([0, *SIZES]).tolist())

APPENDER = textwrap.dedent(
    f"""
    import sys
    import numpy as np
    import arrayds
    url = sys.argv[1]
    compact = {{"tiered": "tiered", "off": False}}[sys.argv[2]]
    a = arrayds.open_array(url, "x", mode="r+")
    sizes = [{CHUNK} * (1 + i % 3) for i in range(100_000)]
    n = a.shape[0]
    i, total = 0, 0
    while total < n:  # continue the sequence where the last child stopped
        total += sizes[i]
        i += 1
    assert total == n, (total, n)
    print("ready", flush=True)
    while True:
        k = sizes[i]
        a.append(np.arange(n, n + k, dtype="i8"), compact=compact)
        n += k
        i += 1
        print(n, flush=True)
    """
)


def _new_array(url: str, prefill: int = 0, compact: bool | str = False) -> None:
    """The array, with the first ``prefill`` appends of :data:`SIZES` made."""
    a = arrayds.open_array(url, "x", mode="w", shape=(0,), dtype="i8", chunks=CHUNK)
    for k in SIZES[:prefill]:
        a.append(np.arange(a.shape[0], a.shape[0] + k, dtype="i8"), compact=compact)


def _run_and_kill(url: str, appends: int, compact: str = "off") -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", APPENDER, url, compact],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        for _ in range(appends):  # each line: an append committed
            assert proc.stdout.readline(), proc.stderr.read()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


def _open_version(store, generation: int):
    v = commit.read(store, "x", version=generation)
    kind = kinds.get(v.kind)
    return kind.open(store, "x", kind.parse(v.raw, "x"), "r")


def _check_state(url: str, prefixes: set[int] = PREFIXES) -> int:
    """The array and each retained version hold a committed prefix (a length of
    ``prefixes``); returns the current length."""
    store_mod.clear_reader_cache()
    a = arrayds.open_array(url, "x")
    n = a.shape[0]
    assert n in prefixes
    np.testing.assert_array_equal(a[...], np.arange(n))
    store = get_store(url, None)
    vs = commit.versions(store, "x")
    assert len(vs) == vs[-1].generation  # no version lost
    last = -1
    # every version is listed; a sample of them (first, last and evenly between) is
    # read whole: reading all of them costs versions x shards opens
    picks = sorted({int(i) for i in np.linspace(0, len(vs) - 1, min(len(vs), 24))})
    for v in (vs[i] for i in picks):
        old = _open_version(store, v.generation)
        m = old.shape[0]
        assert m in prefixes and m >= last
        last = m
        np.testing.assert_array_equal(old[...], np.arange(m))
    report = verify(url, progress=False)
    assert report.ok, report.problems
    return n


def _files(url: str) -> set[str]:
    return {os.path.relpath(os.path.join(d, f), url) for d, _, fs in os.walk(url) for f in fs}


def _kept_shards(url: str) -> set[str]:
    """The shard files some retained version of ``x`` names."""
    store = get_store(url, None)
    out: set[str] = set()
    for v in commit.versions(store, "x"):
        out |= {f"x/{e.path}" for e in _open_version(store, v.generation).manifest.shards}
    return out


@pytest.mark.parametrize("seed, compact", [(0, "off"), (1, "off"), (2, "tiered")])
def test_appender_killed_at_random_times(tmp_path, seed, compact):
    url = str(tmp_path / "ds")
    # the child's first appends make a segment (or a merge), however slow
    _new_array(url, prefill=30, compact=compact == "tiered")
    rng = np.random.default_rng(seed)
    lengths = []
    for _round in range(3):
        _run_and_kill(url, int(rng.integers(8, 40)), compact)
        before = _files(url)
        n = _check_state(url)
        lengths.append(n)
        report = collect_garbage(url, min_age=0)
        removed = {os.path.relpath(p, url) for p in report.removed}
        assert removed <= before
        # only shards no manifest names went: everything reads as before
        store_mod.clear_reader_cache()
        assert _check_state(url) == n
        a = arrayds.open_array(url, "x")
        named = {f"x/{e.path}" for e in a.manifest.shards}
        assert not removed & named
        kept = named if compact == "off" else _kept_shards(url)
        # the files of the killed write, if it was killed after its marker: kept, as
        # a write under way's (docs/reliability.md "gc beside writers")
        markers = {f for f in _files(url) if f.startswith(f"x/{pending.WRITES_DIR}/")}
        live = {f.rpartition("/")[2].split(".")[0] for f in markers}
        under_way = {os.path.relpath(p, url) for p in report.under_way}
        # (a killed commit's temporary manifest too: gc keeps it beside a live marker)
        assert all(
            pending.write_id_of(f[2:]) in live or f.startswith("x/.arrayds.json.")
            for f in under_way
        ), (under_way, live)
        left = {f for f in _files(url) if f.startswith("x/c/")}
        # no other unreferenced shard is left: a merged shard stays while a retained
        # version names it
        assert left == kept | {f for f in under_way if f.startswith("x/c/")}
        # the child is dead: with its marker taken for a crashed writer's, its files go
        # too (a marker it was still writing as well)
        report = collect_garbage(url, min_age=0, max_write_age=0)
        assert {os.path.relpath(p, url) for p in report.removed} == under_way - kept
        assert {os.path.relpath(p, url) for p in report.abandoned} == markers
        assert {f for f in _files(url) if f.startswith("x/c/")} == kept
        assert not {f for f in _files(url) if f.startswith(f"x/{pending.WRITES_DIR}/")}
        assert _check_state(url) == n
    assert lengths == sorted(lengths) and lengths[-1] > 0
    head = commit.read(get_store(url, None), "x").head
    if compact == "off":
        assert isinstance(head["shards"], dict) and head["shards"]["segments"]  # the log ran
    else:  # the merges ran: a few dozen files hold the appends
        assert (
            len(arrayds.open_array(url, "x").manifest.shards)
            < 40
            < len(commit.versions(get_store(url, None), "x"))
        )


def test_a_commit_killed_before_its_head_leaves_only_unreferenced_files(tmp_path):
    """The window between a commit's segment and history writes and its head's
    compare-and-swap: a child stops itself (SIGKILL) right before the put of a commit
    that writes a segment; what it wrote is named by nothing, the state is the one
    before, and the next commit succeeds."""
    url = str(tmp_path / "ds")
    _new_array(url)
    a = arrayds.open_array(url, "x", mode="r+")
    for i in range(32):
        # a tail of 32 entries: the next makes a segment
        a.append(np.arange(4 * i, 4 * i + 4), compact=False)
    store = get_store(url, None)
    before = commit.read(store, "x")
    child = textwrap.dedent(
        """
        import os, signal, sys
        import numpy as np
        import arrayds
        from arrayds.storage.local import LocalStore
        real = LocalStore.put_if_match
        def put_if_match(self, key, data, version, **kw):
            if key.endswith("x/arrayds.json"):
                os.kill(os.getpid(), signal.SIGKILL)
            return real(self, key, data, version, **kw)
        LocalStore.put_if_match = put_if_match
        a = arrayds.open_array(sys.argv[1], "x", mode="r+")
        a.append(np.arange(128, 132), compact=False)
        """
    )
    proc = subprocess.run([sys.executable, "-c", child, url], cwd=ROOT, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()
    after = commit.read(store, "x")
    assert after.data == before.data  # the head is untouched
    segs = {k for k, _, _ in store.list(f"x/{log.LOG_DIR}")}
    assert segs  # the killed commit wrote its segment before the put
    assert not {k.removeprefix("x/") for k in segs} & log.log_files(store, "x", after.head)
    fours = set(range(0, 1000, 4))
    assert _check_state(url, fours) == 128
    a = arrayds.open_array(url, "x", mode="r+")
    a.append(np.arange(128, 136))
    assert _check_state(url, fours) == 136


def _leftover_segment(tmp_path) -> tuple[str, str]:
    url = str(tmp_path / "ds")
    _new_array(url)
    a = arrayds.open_array(url, "x", mode="r+")
    a.append(np.arange(4))
    store = get_store(url, None)
    orphan = f"x/{log.LOG_DIR}/{'ab' * 12}.json"
    store.put(orphan, b'{"format":"arrayds-segment","count":0,"entries":[]}')
    old = time.time() - 7200
    os.utime(os.path.join(url, orphan), (old, old))
    return url, orphan


def test_gc_removes_a_segment_that_nothing_names(tmp_path):
    url, orphan = _leftover_segment(tmp_path)
    collect_garbage(url, min_age=3600)
    assert not os.path.exists(os.path.join(url, orphan))


def test_gc_keeps_the_shards_retained_versions_name(tmp_path):
    url = str(tmp_path / "ds")
    _new_array(url)
    a = arrayds.open_array(url, "x", mode="r+")
    a.append(np.arange(8))
    a.append(np.arange(8, 11))  # a partial last chunk
    a.append(np.arange(11, 16))  # completes it: the entry of the partial chunk is hidden
    collect_garbage(url, min_age=0)
    store_mod.clear_reader_cache()
    old = _open_version(get_store(url, None), 3)
    np.testing.assert_array_equal(old[...], np.arange(11))
