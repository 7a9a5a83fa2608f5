"""``arrayds gc`` beside writers removes nothing a writer needs: every write
path keeps a pending marker (arrayds.nodes.pending) from before its first file until
its commit, and gc keeps the files of the writes whose marker it finds.

The interleaving is exact, not a race: gc (``min_age=0``) runs after the write
uploaded its files and before its commit, at the write's next conditional put of a
manifest (local: a store whose hook runs it, real files) or when the object store
has stored the write's first shard (S3 on moto, GCS on fake-gcs-server: a
:class:`FaultProxy` rule runs it before the writer hears back). The commit then lands
and everything reads back exactly. A crashed writer's marker expires
(``max_write_age``), and gc then removes its files."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from faults.proxy import FaultProxy, Rule

import arrayds
from arrayds.nodes.names import shard_name
from arrayds.nodes.shards import write_shard
from arrayds.storage import LocalStore, clear_store_cache, get_store, register_store
from arrayds.verify import collect_garbage, verify

da = pytest.importorskip("dask.array")


class GcAtCommitStore(LocalStore):
    """A local store whose next conditional put of a manifest first runs ``hook``
    (once): the moment between a write's uploads and its commit."""

    hook: Callable[[], None] | None = None

    def put_if_match(self, key: str, *args: Any, **kwargs: Any) -> None:
        hook, GcAtCommitStore.hook = GcAtCommitStore.hook, None
        if hook is not None and key.rsplit("/", 1)[-1] == "arrayds.json":
            hook()
        return super().put_if_match(key, *args, **kwargs)


@pytest.fixture
def gc_at_commit():
    register_store("file", GcAtCommitStore)
    clear_store_cache()
    try:
        yield GcAtCommitStore
    finally:
        GcAtCommitStore.hook = None
        register_store("file", LocalStore)
        clear_store_cache()


def _gc(url: str, so: dict[str, Any] | None, reports: list[Any]) -> Callable[[], None]:
    def run() -> None:
        try:
            reports.append(collect_garbage(url, storage_options=so, min_age=0, older_than=0))
        except BaseException as e:  # a failure in the proxy's thread: the test reports it
            reports.append(e)

    return run


# ------------------------------------------------------------ the write paths
#
# each: (set up the node, the write gc runs inside, what the node then holds)


def _rows(i: int, n: int = 3) -> np.ndarray:
    return np.arange(i * 10, i * 10 + n * 3, dtype="i4").reshape(n, 3)


def _array_append(url, so):
    arrayds.to_arrayrecord(_rows(0), url, chunks=(2, 3), storage_options=so)
    a = arrayds.open_array(url, mode="a", storage_options=so)
    return lambda: a.append(_rows(1)), lambda: np.concatenate([_rows(0), _rows(1)])


def _array_setitem(url, so):
    arrayds.to_arrayrecord(_rows(0), url, chunks=(2, 3), storage_options=so)
    a = arrayds.open_array(url, mode="r+", storage_options=so)

    def write():
        a[1:3] = _rows(5, 2)

    return write, lambda: np.concatenate([_rows(0)[:1], _rows(5, 2)])


def _dask_append(url, so):
    arrayds.to_arrayrecord(_rows(0), url, chunks=(3, 3), storage_options=so)
    x = da.from_array(_rows(1), chunks=(1, 3))
    write = lambda: arrayds.to_arrayrecord(x, url, mode="a", storage_options=so)  # noqa: E731
    return write, lambda: np.concatenate([_rows(0), _rows(1)])


def _records_append(url, so):
    arrayds.to_arrayrecord([b"a", b"b"], url, storage_options=so)
    write = lambda: arrayds.to_arrayrecord([b"c"], url, mode="a", storage_options=so)  # noqa: E731
    return write, lambda: [b"a", b"b", b"c"]


def _ragged_append(url, so):
    arrayds.to_arrayrecord([np.ones(3), np.ones(4)], url, storage_options=so)
    new = [np.full(5, 2.0)]
    write = lambda: arrayds.to_arrayrecord(new, url, mode="a", storage_options=so)  # noqa: E731
    return write, lambda: [[1.0] * 3, [1.0] * 4, [2.0] * 5]


def _xarray_step(i: int) -> Any:
    xr = pytest.importorskip("xarray")
    return xr.Dataset(
        {"t2m": (("time", "x"), np.full((1, 4), i, "f4"))},
        coords={"time": [i], "x": np.arange(4)},
    )


def _xarray_append(url, so):
    arrayds.to_arrayrecord(_xarray_step(0), url, storage_options=so)
    step = _xarray_step(1)

    def write():
        arrayds.to_arrayrecord(step, url, mode="a", append_dim="time", storage_options=so)

    return write, lambda: np.array([[0.0] * 4, [1.0] * 4], "f4")


def _tiered_merge(url, so):
    # seven small shards; the eighth append's commit merges all eight into one
    arrayds.to_arrayrecord([b"r0"], url, storage_options=so)
    for i in range(1, 7):
        arrayds.to_arrayrecord([b"r%d" % i], url, mode="a", storage_options=so)
    write = lambda: arrayds.to_arrayrecord([b"r7"], url, mode="a", storage_options=so)  # noqa: E731
    return write, lambda: [b"r%d" % i for i in range(8)]


def _compaction(url, so):
    arrayds.to_arrayrecord([b"r0"], url, storage_options=so)
    for i in range(1, 4):
        arrayds.to_arrayrecord([b"r%d" % i], url, mode="a", compact=False, storage_options=so)
    write = lambda: arrayds.compact(url, storage_options=so)  # noqa: E731
    return write, lambda: [b"r%d" % i for i in range(4)]


def _segment(url, so):
    # 32 entries fill the inline tail: the next append's commit writes a segment
    a = arrayds.open_array(url, mode="w", shape=(0,), dtype="i4", chunks=1, storage_options=so)
    for i in range(32):
        a.append(np.array([i], "i4"), compact=False)
    return lambda: a.append(np.array([32], "i4"), compact=False), lambda: np.arange(33)


PATHS = {
    "array-append": _array_append,
    "array-setitem": _array_setitem,
    "dask-append": _dask_append,
    "records-append": _records_append,
    "ragged-append": _ragged_append,
    "xarray-append": _xarray_append,
    "tiered-merge": _tiered_merge,
    "compaction": _compaction,
    "segment": _segment,
}


def _content(url: str, so: dict[str, Any] | None) -> Any:
    node = arrayds.open(url, storage_options=so)
    if isinstance(node, arrayds.Array):
        return node[...]
    if isinstance(node, arrayds.Group):  # an xarray dataset's group
        return np.asarray(node["t2m"][...])
    if hasattr(node, "shapes"):  # a ragged array
        return [node[i].tolist() for i in range(len(node))]
    return list(node[:])


def _check(url: str, so: dict[str, Any] | None, want: Any, reports: list[Any]) -> None:
    got = _content(url, so)  # on a gc that removed the write's files: missing shards
    if isinstance(want, np.ndarray):
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want
    assert verify(url, storage_options=so).ok
    (report,) = reports  # gc ran once, between the write's uploads and its commit ...
    assert not isinstance(report, BaseException), report
    assert report.under_way  # ... saw files of the write under way, and kept them
    assert not set(report.under_way) & set(report.removed)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_gc_between_a_write_s_uploads_and_its_commit_removes_nothing(tmp_path, gc_at_commit, path):
    url = str(tmp_path / "ds")
    write, want = PATHS[path](url, None)
    reports: list[Any] = []
    gc_at_commit.hook = _gc(url, None, reports)
    write()
    _check(url, None, want(), reports)
    assert not os.listdir(os.path.join(url, "_arrayds", "writes"))  # the commit ended it


@pytest.mark.parametrize("path", ["array-append", "dask-append", "records-append"])
@pytest.mark.parametrize("store", ["s3", "gcs"])
def test_gc_beside_an_object_store_write_removes_nothing(request, store, path):
    from .conftest import BUCKET

    server = request.getfixturevalue(f"writers_{store}")
    scheme = "s3" if store == "s3" else "gs"
    url = f"{scheme}://{BUCKET}/gc-{path}-{time.time_ns()}"
    so = server.storage_options()  # the setup, the gc and the checks: straight
    _setup, want = PATHS[path](url, so)
    reports: list[Any] = []
    # once the server stored the write's first shard, before the writer hears back
    gc = _gc(url, so, reports)
    shard = r"\.array_record(-\d+-of-\d+)?$"  # array and records shard names
    skip = 1 if store == "gcs" else 0  # a GCS upload: its session's start, then its bytes
    rule = Rule("slow", delay=0, methods=("PUT", "POST"), keys=shard, skip=skip, limit=1, then=gc)
    with FaultProxy(server.endpoint_url, [rule]) as p:
        via = server.storage_options(p.url) if store == "s3" else {**so, "endpoint_url": p.url}
        _through(path, url, via)()
    _check(url, so, want(), reports)


def _through(path: str, url: str, via: dict[str, Any]) -> Callable[[], Any]:
    """The write of ``path`` at ``url`` (set up already) made with the options
    ``via`` (through the proxy)."""
    if path == "array-append":
        a = arrayds.open_array(url, mode="a", storage_options=via)
        return lambda: a.append(_rows(1))
    if path == "dask-append":
        x = da.from_array(_rows(1), chunks=(1, 3))
        return lambda: arrayds.to_arrayrecord(x, url, mode="a", storage_options=via)
    return lambda: arrayds.to_arrayrecord([b"c"], url, mode="a", storage_options=via)


# ------------------------------------------------------------ crashed writers


def _crashed_write(url: str, so: dict[str, Any] | None) -> tuple[Any, str, str]:
    """What a writer killed between its upload and its commit leaves: its marker and
    a shard no manifest names. Returns (store, the shard's key, the marker's key)."""
    from arrayds.nodes import pending

    arrayds.to_arrayrecord(np.arange(4), url, chunks=2, storage_options=so)
    store = get_store(url, so)
    wid = pending.begin(store, "")
    key = shard_name(wid, 0, folder="c")
    write_shard(store, key, [b"x"], "group_size:1")
    return store, key, pending.marker_key("", wid)


def test_a_crashed_writer_s_marker_expires_and_gc_then_removes_its_files(where):
    url, so = where
    store, shard, marker = _crashed_write(url, so)
    kept = collect_garbage(url, storage_options=so, min_age=0)
    assert kept.under_way == [store.url_of(shard)] and kept.removed == []
    assert kept.abandoned == [] and store.exists(shard) and store.exists(marker)
    dry = collect_garbage(url, storage_options=so, min_age=0, max_write_age=0, dry_run=True)
    assert dry.abandoned == [store.url_of(marker)] and store.exists(marker)
    gone = collect_garbage(url, storage_options=so, min_age=0, max_write_age=0)
    assert gone.removed == [store.url_of(shard)] and gone.abandoned == [store.url_of(marker)]
    assert not store.exists(shard) and not store.exists(marker)
    np.testing.assert_array_equal(arrayds.open_array(url, storage_options=so)[:], np.arange(4))


def test_a_marker_older_than_the_default_age_is_taken_for_a_crash(tmp_path):
    from arrayds.nodes import pending

    url = str(tmp_path / "ds")
    store, shard, marker = _crashed_write(url, None)
    young = collect_garbage(url, min_age=0)
    assert young.under_way == [store.url_of(shard)]
    old = time.time() - pending.MAX_WRITE_AGE - 60
    os.utime(store.path(marker), (old, old))  # the store's clock says: 7 days ago
    report = collect_garbage(url, min_age=0)
    assert report.removed == [store.url_of(shard)] and report.abandoned == [store.path(marker)]


def test_a_marker_a_killed_writer_left_half_written_expires_as_a_marker(tmp_path):
    """A local writer killed while it wrote its marker leaves the marker's temporary
    file (no shard yet: the marker comes first); gc keeps it while it is young (a
    writer may be about to link it) and removes it once older than max_write_age."""
    from arrayds.nodes import pending

    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(np.arange(4), url, chunks=2)
    store = get_store(url, None)
    tmp = store.path(pending.marker_key("", "0661d0a080947acbdffa0cd8")) + ".718066eabb8b.tmp"
    with open(tmp, "wb") as f:
        f.write(b'{"format": "arrayds-write"')  # cut short by the kill
    young = collect_garbage(url, min_age=0)
    assert young.abandoned == [] and os.path.exists(tmp)
    old = time.time() - pending.MAX_WRITE_AGE - 60
    os.utime(tmp, (old, old))
    assert collect_garbage(url, min_age=0, dry_run=True).abandoned == [tmp]
    assert os.path.exists(tmp)
    assert collect_garbage(url, min_age=0).abandoned == [tmp] and not os.path.exists(tmp)
    np.testing.assert_array_equal(arrayds.open_array(url)[:], np.arange(4))


@pytest.mark.parametrize(
    ("bad", "error"), [(-1, ValueError), (float("nan"), ValueError), ("7d", TypeError)]
)
def test_gc_refuses_a_bad_max_write_age(tmp_path, bad, error):
    url = str(tmp_path / "ds")
    arrayds.to_arrayrecord(np.arange(4), url, chunks=2)
    with pytest.raises(error, match="max_write_age"):
        collect_garbage(url, max_write_age=bad)


def test_replacing_a_node_keeps_the_files_of_a_write_under_way(tmp_path):
    from arrayds.nodes import pending

    url = str(tmp_path / "ds")
    store, shard, marker = _crashed_write(url, None)  # its writer is alive this time
    arrayds.open_array(url, mode="w", shape=(4,), dtype="i8", chunks=2)  # clears c/
    assert store.exists(shard) and store.exists(marker)
    pending.end(store, "", marker.rsplit("/", 1)[-1].removesuffix(".json"))
    arrayds.open_array(url, mode="w", shape=(4,), dtype="i8", chunks=2)
    assert not store.exists(shard)  # a leftover once its write ended


def test_readers_ignore_markers(tmp_path):
    url = str(tmp_path / "ds")
    store, _shard, marker = _crashed_write(url, None)
    assert store.exists(marker)
    assert verify(url).ok
    assert list(arrayds.open(url)[:]) == [0, 1, 2, 3]
