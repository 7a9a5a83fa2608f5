"""Crash safety of array writes, with real processes and real SIGKILLs.

* a process killed (SIGKILL) in the middle of a large dask write (``"w"`` over an
  existing array, ``"w-"`` of a new one, ``"r+"`` region) or of an append (dask
  ``mode="a"`` and ``Array.append`` killed while its shard file is being written)
  leaves exactly the previous content: the same manifest bytes, the same data, and a
  later write succeeds;
* a reader in another process, looping while a writer appends and commits, always
  sees a complete old or new state, never a mix; a handle opened before keeps
  reading its snapshot;
* ``compute=False`` creates no file and changes nothing before ``compute()``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import dask.array as da
import numpy as np
import pytest

import arrayds
from arrayds.errors import CommitConflictError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The child's dask array: 64 blocks of 256 KiB in 32 shards. The block at (7, 7)
# never finishes, so the write can never reach its commit: the parent kills the child
# once shards of the write exist on disk (and, if it catches one, while a temporary
# shard file is open).
WRITER = """
import sys, threading
import dask, dask.array as da, numpy as np
import arrayds

url, node, mode = sys.argv[1:4]
n, c = 2048, 256

def block(block_info=None):
    (i0, _), (j0, _) = block_info[None]["array-location"]
    if (i0, j0) == (n - c, n - c):
        threading.Event().wait()  # never set
    r = np.arange(i0, i0 + c, dtype="f4")[:, None]
    return r * n + np.arange(j0, j0 + c, dtype="f4")[None, :] + 0.5

x = da.map_blocks(block, chunks=((c,) * (n // c),) * 2, dtype="f4")
if mode == "a":
    x = x[:1024]
region = (slice(0, n), slice(0, n)) if mode == "r+" else None
with dask.config.set(scheduler="threads", num_workers=2):
    arrayds.to_arrayrecord(
        x, url, node, mode=mode, region=region, compression="zstd:1", shard_size=512 << 10
    )
"""


def snapshot(url: str, node: str) -> tuple[bytes, np.ndarray, set[str]]:
    """(manifest bytes, content, shard files) of an array."""
    with open(os.path.join(url, node, "arrayds.json"), "rb") as f:
        raw = f.read()
    a = arrayds.open_array(url, node)
    return raw, a[...], {e.path for e in a.manifest.shards}


def shard_names(url: str, node: str) -> set[str]:
    try:
        return set(os.listdir(os.path.join(url, node, "c")))
    except FileNotFoundError:
        return set()


def kill_when(proc: subprocess.Popen, ready, timeout: float = 120.0) -> None:
    """Poll ``ready()`` every millisecond; SIGKILL the child as soon as it is true."""
    deadline = time.monotonic() + timeout
    try:
        while not ready():
            if proc.poll() is not None:
                out, err = proc.communicate()
                pytest.fail(f"the writer exited ({proc.returncode}) before the kill:\n{err}")
            if time.monotonic() > deadline:
                pytest.fail("the writer made no progress")
            time.sleep(0.001)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL


def run_child(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def previous_array(url: str, node: str) -> np.ndarray:
    """The state before the crash: three commits (a write, an append that completes a
    partial chunk, a region write) so the manifest stacks several shards."""
    base = np.arange(2000 * 2048, dtype="f4").reshape(2000, 2048) * -1
    a = arrayds.open_array(url, node, mode="w", shape=(0, 2048), dtype="f4", chunks=(256, 256))
    a.append(base[:1800])
    a.append(base[1800:])
    a[100:300, 700:900] = 7
    base[100:300, 700:900] = 7
    return base


@pytest.mark.parametrize("mode", ["w", "r+", "a"])
def test_killed_dask_write_leaves_the_previous_content(local_url, mode):
    url = local_url
    want = previous_array(url, "x")
    if mode == "r+":  # the region write needs an array of the written shape
        arrayds.to_arrayrecord(np.zeros((2048, 2048), "f4") - 1, url, "x", mode="w", chunks=256)
        want = np.zeros((2048, 2048), "f4") - 1
    raw, data, files = snapshot(url, "x")
    np.testing.assert_array_equal(data, want)
    before = shard_names(url, "x")

    proc = run_child(WRITER, url, "x", mode)

    def new_shards() -> set[str]:
        return {n for n in shard_names(url, "x") - before if n.endswith(".array_record")}

    kill_when(proc, lambda: len(new_shards()) >= 4)
    assert len(new_shards()) >= 4  # the write was under way: its shards are on disk

    raw2, data2, files2 = snapshot(url, "x")
    assert raw2 == raw  # the manifest is untouched, byte for byte
    assert files2 == files and all(os.path.exists(os.path.join(url, "x", p)) for p in files)
    np.testing.assert_array_equal(data2, want)
    np.testing.assert_array_equal(arrayds.from_arrayrecord(url, "x").compute(), want)
    # the orphans do not get in the way of the next write
    a = arrayds.to_arrayrecord(da.ones((64, 2048), "f4", chunks=(64, 256)), url, "x", mode="a")
    assert a.shape == (want.shape[0] + 64, 2048)
    np.testing.assert_array_equal(a[: want.shape[0]], want)


def test_killed_create_leaves_no_node(local_url):
    url = local_url
    arrayds.open(url, mode="w").create_array("kept", (10,), "i4", chunks=5)[:] = 3
    proc = run_child(WRITER, url, "g/new", "w-")
    kill_when(proc, lambda: len(shard_names(url, "g/new")) >= 4)
    g = arrayds.open(url)
    assert list(g) == ["kept"] and g["kept"][...].tolist() == [3] * 10
    with pytest.raises(FileNotFoundError):
        arrayds.open_array(url, "g/new")
    # nothing visible, so the same create can run again
    x = da.full((100, 10), 2.0, chunks=50)
    assert arrayds.to_arrayrecord(x, url, "g/new", mode="w-")[...].sum() == 2000


APPENDER = """
import sys
import numpy as np
import arrayds

url, node = sys.argv[1:3]
a = arrayds.open_array(url, node, mode="r+")
rng = np.random.default_rng(5)
data = rng.integers(0, 1 << 12, size=(16384, 2048)).astype("f4")  # 128 MiB, one shard
print("appending", flush=True)
a.append(data)
"""


def test_killed_append_while_its_shard_is_written(local_url):
    """``Array.append`` writes one large shard (temporary name, then rename) and then
    commits; the child is killed while the temporary file is being written (the
    leftover temporary file proves the timing; a lost race is retried)."""
    url = local_url
    want = previous_array(url, "x")  # last chunk row partial: the append rewrites it
    raw, _, files = snapshot(url, "x")
    for _attempt in range(3):
        before = shard_names(url, "x")
        proc = run_child(APPENDER, url, "x")

        def writing(before: set[str] = before) -> bool:
            return any(n.endswith(".tmp") for n in shard_names(url, "x") - before)

        kill_when(proc, writing)
        leftovers = [n for n in shard_names(url, "x") - before if n.endswith(".tmp")]
        if leftovers:
            break
    else:
        pytest.fail("could not kill the appender while it wrote its shard")
    raw2, data2, files2 = snapshot(url, "x")
    assert raw2 == raw and files2 == files
    np.testing.assert_array_equal(data2, want)
    assert arrayds.open_array(url, "x").shape == (2000, 2048)


# The reader loops without pause; it prints the row count of each state it sees first
# (the writer's handshake: the writer commits the next append only once the reader
# has seen the last one, while the reader keeps reading through that commit).
READER = """
import json, os, sys
import numpy as np
import arrayds

url, done, width = sys.argv[1], sys.argv[2], int(sys.argv[3])
full = np.arange(100000 * width, dtype="i8").reshape(-1, width)
seen = {}
reads = 0
while True:
    finished = os.path.exists(done)
    a = arrayds.open_array(url, "log")
    data = a[...]
    n = data.shape[0]
    if not np.array_equal(data, full[:n]):
        bad = np.flatnonzero((data != full[:n]).any(axis=1))
        print(json.dumps({"error": f"mixed state at shape {data.shape}, rows {bad[:5].tolist()}, "
                                   f"generation {a.generation}"}), flush=True)
        sys.exit(1)
    if str(n) not in seen:
        print(n, flush=True)
    seen[str(n)] = a.generation
    reads += 1
    if finished:
        break
print(json.dumps({"seen": seen, "reads": reads}), flush=True)
"""


def wait_seen(reader: subprocess.Popen, n: int) -> None:
    """Read the reader's lines until it reports having seen ``n`` rows."""
    while True:
        line = reader.stdout.readline()
        if not line:
            reader.wait()
            pytest.fail(f"the reader ended before it saw {n} rows:\n{reader.stderr.read()}")
        assert not line.startswith("{"), line  # its error report
        if int(line) == n:
            return


def test_concurrent_reader_sees_old_or_new_never_a_mix(local_url):
    url = local_url
    width = 64
    full = np.arange(100000 * width, dtype="i8").reshape(-1, width)
    a = arrayds.open_array(url, "log", mode="w", shape=(0, width), dtype="i8", chunks=(50, 16))
    stale = arrayds.open_array(url, "log")  # opened before any append
    done = os.path.join(os.path.dirname(url), "done")
    reader = run_child(READER, url, done, str(width))
    n = 0
    sizes = [37, 13, 50, 101, 7, 64] * 6  # partial chunks: most appends rewrite one
    try:
        wait_seen(reader, 0)
        for i, k in enumerate(sizes):
            if i % 3 == 2:  # every third append goes through dask (its own chunks)
                x = da.from_array(full[n : n + k], chunks=(20, 16))
                arrayds.to_arrayrecord(x, url, "log", mode="a")
                a.refresh()
            else:
                a.append(full[n : n + k])
            n += k
            wait_seen(reader, n)
    finally:
        open(done, "w").close()
        out, err = reader.communicate(timeout=120)
    assert reader.returncode == 0, out + err
    result = json.loads(out.strip().splitlines()[-1])
    seen = {int(k): v for k, v in result["seen"].items()}
    assert n in seen  # it read the final state
    assert len(seen) >= 5, seen  # and many intermediate ones while appends committed
    assert sorted(seen) == np.cumsum([0, *sizes]).tolist()  # each one, by the handshake
    np.testing.assert_array_equal(arrayds.open_array(url, "log")[...], full[:n])
    # a handle opened before keeps its snapshot (shards are never modified or removed)
    assert stale.shape == (0, width) and stale[...].shape == (0, width)
    snap = arrayds.open_array(url, "log")
    a.append(full[n : n + 3])
    np.testing.assert_array_equal(snap[...], full[:n])


def test_compute_false_creates_and_changes_nothing_before_compute(local_url):
    url = local_url
    arrayds.to_arrayrecord(np.arange(100.0).reshape(10, 10), url, "a", mode="w", chunks=5)

    def listing() -> dict[str, tuple[int, int]]:
        out = {}
        for folder, _dirs, names in os.walk(url):
            for name in names:
                st = os.stat(os.path.join(folder, name))
                out[os.path.relpath(os.path.join(folder, name), url)] = (st.st_mtime_ns, st.st_ino)
        return out

    before = listing()
    x = da.ones((10, 10), chunks=5)
    writes = [
        arrayds.to_arrayrecord(x, url, "a", mode="w", compute=False),
        arrayds.to_arrayrecord(x, url, "a", mode="a", retries=0, compute=False),
        arrayds.to_arrayrecord(x, url, "a", mode="r+", region=(slice(0, 10),), compute=False),
        arrayds.to_arrayrecord(x, url, "b/c", mode="w-", compute=False),
    ]
    # no shard, no manifest: only the pending markers of the planned writes (which
    # readers ignore; arrayds.nodes.pending)
    new = {k: v for k, v in listing().items() if "/_arrayds/writes/" not in f"/{k}"}
    assert new == before
    assert len(listing()) == len(before) + len(writes)
    check = run_child(
        "import sys, arrayds; g = arrayds.open(sys.argv[1]); "
        "print(sorted(g), float(g['a'][...].sum()))",
        url,
    )
    out, err = check.communicate(timeout=60)
    assert out.strip() == "['a'] 4950.0", err
    a = writes[0].compute()
    assert a[...].sum() == 100 and a.generation == 2
    assert writes[3].compute()[...].sum() == 100
    assert sorted(arrayds.open(url)) == ["a", "b"]
    # the append and the region write were based on the replaced generation
    with pytest.raises(CommitConflictError):
        writes[1].compute()
    assert arrayds.open_array(url, "a")[...].sum() == 100


def _code_compiles() -> None:
    for code in (WRITER, APPENDER, READER):
        compile(textwrap.dedent(code), "<child>", "exec")
