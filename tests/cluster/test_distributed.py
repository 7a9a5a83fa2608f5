"""Arrays on a real dask.distributed cluster (two worker processes, one thread each).

* a 256 MiB float32 array written by the workers and read back by them;
* a worker process killed (SIGKILL) in the middle of a write: distributed reruns the
  lost tasks, the retried shard tasks rewrite their own shards, and the committed
  array is complete and correct, with no stray files;
* graphs that read a dataset and write into the same dataset (another array, an
  append to the array being read, a region overwrite);
* an ``Array`` pickled to the workers: each worker process opens every shard reader
  once and reuses it.

The cluster is not made the global default scheduler (other test modules must keep
their local schedulers); each test makes its client the current one
(``Client.as_current``), which ``dask.compute`` and so ``to_arrayrecord`` use. Not
``dask.config.set(scheduler=client)``: the nanny passes the dask config to a
restarted worker process, and a Client in it cannot be pickled.
"""

from __future__ import annotations

import json
import os
import signal

import dask
import dask.array as da
import numpy as np
import pytest

import arrayds
from arrayds.nodes import shards as store_mod
from arrayds.verify import collect_garbage

N = 8192  # 8192 x 8192 float32 = 256 MiB
CHUNK = 1024  # 4 MiB blocks; the default shard grouping puts 4 in a 16 MiB shard


def expected_block(i0: int, j0: int, shape: tuple[int, int]) -> np.ndarray:
    """The deterministic content of rows ``i0:``, columns ``j0:`` of the test arrays:
    a multiplicative hash of the flat index, 12 bits kept (compressible, not trivial)."""
    r = np.arange(i0, i0 + shape[0], dtype=np.uint64)[:, None]
    c = np.arange(j0, j0 + shape[1], dtype=np.uint64)[None, :]
    h = ((r * np.uint64(N) + c) * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    return (h >> np.uint64(20)).astype(np.float32) * np.float32(0.25)


def _block(block_info=None) -> np.ndarray:
    info = block_info[None]
    (i0, _), (j0, _) = info["array-location"]
    return expected_block(i0, j0, info["chunk-shape"])


def source(n: int = N, chunk: int = CHUNK) -> da.Array:
    """The test array as a dask array whose blocks are computed on the workers."""
    chunks = ((chunk,) * (n // chunk), (chunk,) * (n // chunk))
    return da.map_blocks(_block, chunks=chunks, dtype=np.float32)


def _block_or_kill(marker: str, shard_dir: str, first_row: int, block_info=None) -> np.ndarray:
    """A block of :func:`source`; the first time a block at or below ``first_row``
    runs on a worker that already holds the result of a finished shard task, that
    worker process records the shards it wrote (path and inode) in ``marker`` and
    kills itself with SIGKILL. Reruns (the marker exists) just return the block."""
    info = block_info[None]
    (i0, _), (j0, _) = info["array-location"]
    out = expected_block(i0, j0, info["chunk-shape"])
    if i0 >= first_row and not os.path.exists(marker):
        from distributed import get_worker

        worker = get_worker()
        held = {
            str(k): worker.data[k]["path"]
            for k in list(worker.data.keys())
            if str(k).startswith("arrayds-shard-")
        }
        if held:
            shards = {
                p: os.stat(os.path.join(shard_dir, os.path.basename(p))).st_ino
                for p in held.values()
            }
            try:
                fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                return out
            os.write(fd, json.dumps({"pid": os.getpid(), "shards": shards}).encode())
            os.fsync(fd)
            os.close(fd)
            os.kill(os.getpid(), signal.SIGKILL)
    return out


def _io_stats(dask_worker=None) -> dict[str, int]:
    return store_mod.io_stats()


def _reset_io(dask_worker=None) -> None:
    store_mod.clear_reader_cache()
    store_mod.reset_io_stats()


def _read_rows(a: arrayds.Array, start: int, stop: int) -> float:
    return float(a[start:stop, ::3].astype(np.float64).sum())


@pytest.fixture
def on_cluster(client):
    with client.as_current():
        yield client


def shard_files(url: str, node: str) -> set[str]:
    folder = os.path.join(url, node, "c")
    return {f"c/{n}" for n in os.listdir(folder)}


def test_write_and_read_256_mib(tmp_path, on_cluster):
    url = str(tmp_path / "ds")
    x = source()
    a = arrayds.to_arrayrecord(x, url, "x", mode="w-", compression="zstd:1")
    assert a.shape == (N, N) and a.dtype == np.float32 and a.chunks == x.chunks
    assert a.nbytes == 256 << 20
    assert a.nchunks_initialized == a.nchunks == 64
    assert a.nshards == 16  # 4 MiB blocks grouped by 4 into 16 MiB shards
    assert shard_files(url, "x") == {e.path for e in a.manifest.shards}

    y = arrayds.from_arrayrecord(url, "x")
    assert y.chunks == x.chunks
    assert bool((y == x).all().compute())  # every block compared on the workers
    # spot checks on the client, through the lazy array
    b = arrayds.open_array(url, "x")
    np.testing.assert_array_equal(b[5000:5100, 1000:1030], expected_block(5000, 1000, (100, 30)))
    np.testing.assert_array_equal(b[-1], expected_block(N - 1, 0, (1, N))[0])


def test_worker_killed_mid_write_is_retried_and_the_result_is_complete(tmp_path, on_cluster):
    client = on_cluster
    url = str(tmp_path / "ds")
    marker = str(tmp_path / "killed.json")
    shard_dir = os.path.join(url, "x", "c")
    pids_before = set(client.run(os.getpid).values())
    x = da.map_blocks(
        _block_or_kill,
        marker,
        shard_dir,
        4 * CHUNK,
        chunks=((CHUNK,) * 8, (CHUNK,) * 8),
        dtype=np.float32,
    )
    a = arrayds.to_arrayrecord(x, url, "x", mode="w-", compression="zstd:1")

    assert os.path.exists(marker), "no worker was killed: the test did not exercise a crash"
    with open(marker) as f:
        killed = json.load(f)
    assert killed["pid"] in pids_before
    client.wait_for_workers(2, timeout=60)
    assert killed["pid"] not in set(client.run(os.getpid).values())  # replaced by the nanny
    # the shards the dead worker had written were written again by the retried tasks
    # (same unique name, a new file atomically renamed over the old one)
    assert killed["shards"]
    for path, inode in killed["shards"].items():
        assert os.stat(os.path.join(url, "x", path)).st_ino != inode, path
    # complete: every chunk, every shard named by the manifest, no stray file; the
    # killed task was writing its shard (blocks are made as the writer takes them), so
    # its temporary file may remain, never under a shard's name, and gc removes it
    assert a.nchunks_initialized == 64 and a.nshards == 16
    files = shard_files(url, "x")
    tmp = {f for f in files if f.endswith(".tmp")}
    assert files - tmp == {e.path for e in a.manifest.shards}
    assert len(tmp) <= 1
    removed = collect_garbage(url, min_age=0).removed
    assert {os.path.relpath(p, os.path.join(url, "x")) for p in removed} == tmp
    assert shard_files(url, "x") == {e.path for e in a.manifest.shards}
    assert a.generation == 1
    y = arrayds.from_arrayrecord(url, "x")
    assert bool((y == source()).all().compute())


def test_workers_read_and_write_the_same_dataset(tmp_path, on_cluster):
    url = str(tmp_path / "ds")
    n, c = 2048, 256
    x = source(n, c)
    want = x.compute(scheduler="threads")
    want_b = want * 2 + 1
    arrayds.to_arrayrecord(x, url, "a", mode="w-", compression="zstd:1")
    a = arrayds.from_arrayrecord(url, "a")

    # read "a", write "b" into the same dataset
    b = arrayds.to_arrayrecord(a * 2 + 1, url, "b", mode="w-")
    np.testing.assert_array_equal(b[...], want_b)

    # read "a" and append to "a" in one graph (the graph reads its snapshot)
    arrayds.to_arrayrecord(-a[:512], url, "a", mode="a")
    want = np.concatenate([want, -want[:512]])
    # read "b" and overwrite a chunk-aligned region of "a"
    bb = arrayds.from_arrayrecord(url, "b")
    arrayds.to_arrayrecord(bb[:256], url, "a", mode="r+", region=(slice(256, 512), slice(None)))
    want[256:512] = want[:256] * 2 + 1
    # two writes of one compute: a new array from "a" and from "b" at once
    d1 = arrayds.to_arrayrecord(
        arrayds.from_arrayrecord(url, "a").T, url, "g/t", mode="w-", compute=False
    )
    d2 = arrayds.to_arrayrecord(bb.sum(axis=0), url, "g/s", mode="w-", compute=False)
    dask.compute(d1, d2)

    got = arrayds.open_array(url, "a")
    assert got.shape == (n + 512, n) and got.generation == 3
    np.testing.assert_array_equal(got[...], want)
    np.testing.assert_array_equal(arrayds.open_array(url, "g/t")[...], want.T)
    np.testing.assert_allclose(arrayds.open_array(url, "g/s")[...], want_b.sum(axis=0), rtol=1e-6)
    assert sorted(arrayds.open(url)) == ["a", "b", "g"]


def test_pickled_reader_caches_shard_readers_per_process(tmp_path, on_cluster):
    client = on_cluster
    url = str(tmp_path / "ds")
    a = arrayds.to_arrayrecord(source(2048, 128), url, mode="w-", shard_size="1MiB")
    files = {e.path for e in a.manifest.shards}
    assert len(files) == 16  # 256 chunks of 64 KiB, 16 per shard
    want = a[...].astype(np.float64)
    client.run(_reset_io)

    # the Array handle itself is pickled to the workers with every task
    bounds = [(i, i + 64) for i in range(0, 2048, 64)]
    for _ in range(2):
        futures = client.map(_read_rows, [a] * len(bounds), *zip(*bounds, strict=True), pure=False)
        got = client.gather(futures)
        assert got == pytest.approx([want[s:e, ::3].sum() for s, e in bounds])
    stats = client.run(_io_stats)
    # each 64-row band touches one row of 16 chunks; two bands per chunk row, two rounds
    assert sum(s["records_read"] for s in stats.values()) == 2 * 2 * 256
    for worker, s in stats.items():
        # each shard footer read at most once per worker process, whatever the tasks
        assert s["reader_opens"] <= len(files), (worker, s)

    # dask reads through from_arrayrecord use the same per-process cache: 4 x 256 more
    # chunk reads, still at most one footer read per shard and worker process
    y = arrayds.from_arrayrecord(url)
    for _ in range(4):
        assert float(y.sum(dtype=np.float64).compute()) == pytest.approx(want.sum())
    stats = client.run(_io_stats)
    assert sum(s["records_read"] for s in stats.values()) == 4 * 256 + 4 * 256
    for worker, s in stats.items():
        assert s["reader_opens"] <= len(files), (worker, s)
