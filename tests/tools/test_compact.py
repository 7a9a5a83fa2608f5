"""``arrayds.compact`` and ``arrayds compact``: fragmented nodes rewritten into few
shards, reading exactly the same before and after (local, memory:// and S3).

* arrays: one-row appends, overwritten regions, fill-only chunks, appends along two
  axes, 0-d arrays, NaN fill values; every chunk selects the same record bytes (and
  uncovered chunks stay uncovered); a small ``shard_size`` splits boxes over shards;
* records with several appends (order, serializer, group size kept), ragged arrays
  with several appends, groups of every kind, an xarray dataset (one snapshot
  commit for its members);
* ``dry_run`` writes nothing; compacting again does nothing; old shards stay until
  ``arrayds gc``; a handle opened before keeps reading;
* a commit by another writer while compaction runs: compaction raises
  ``CommitConflictError``, removes its shards, and the other write survives;
* error paths; the CLI.
"""

from __future__ import annotations

import json
import os
import threading
import time

import numpy as np
import pytest

import arrayds
from arrayds import ragged as ragged
from arrayds import records as records
from arrayds.nodes import commit
from arrayds.nodes.shards import shard_reader
from arrayds.storage import get_store
from arrayds.tools.compact import fragmentation
from arrayds.tools.gc import collect_garbage
from arrayds.tools.verify import verify


def files_under(where) -> dict[str, int]:
    """Every file below the dataset root -> its size."""
    store = get_store(where.url, where.so)
    return {k: s for k, s, _ in store.list("")}


def array_state(where, node: str | None = None):
    a = arrayds.open_array(where.url, node, storage_options=where.so)
    data = a[...]
    return data.dtype.str, data.shape, data.tobytes(), chunk_records_at(a, node)


def chunk_records_at(a: arrayds.Array, node: str | None) -> list[bytes | None]:
    m = a.manifest
    gshape = m.grid.grid_shape
    coords = np.indices(gshape).reshape(len(gshape), -1).T if gshape else np.zeros((1, 0))
    entry, rec = m.table.locate(coords.astype(np.int64))
    out: list[bytes | None] = []
    for e, r in zip(entry.tolist(), rec.tolist(), strict=True):
        if e < 0:
            out.append(None)
            continue
        path = a.store.path(node or "", m.shards[e].path)
        out.append(shard_reader(a.store, path).read(r))
    return out


def one_row_appends(where, node=None, n=40, chunks=(1, 3), width=3):
    a = arrayds.open_array(
        where.url,
        node,
        mode="w",
        shape=(0, width),
        dtype="f4",
        chunks=chunks,
        storage_options=where.so,
    )
    for i in range(n):
        a.append(np.full((1, width), i, "f4") + np.arange(width, dtype="f4"), compact=False)
    return a


def compact(where, component=None, **kw):
    return arrayds.compact(where.url, component, storage_options=where.so, **kw)


# ------------------------------------------------------------------ arrays


def _compact_in_thread(
    url: str, shard_size: str
) -> tuple[threading.Thread, dict[str, BaseException | None]]:
    """Compaction of ``url`` started in a thread; ``result["error"]`` is what it raised
    (``None``) once the thread ended."""
    result: dict[str, BaseException | None] = {}

    def run() -> None:
        try:
            arrayds.compact(url, shard_size=shard_size)
            result["error"] = None
        except BaseException as e:  # noqa: BLE001
            result["error"] = e

    t = threading.Thread(target=run)
    t.start()
    return t, result


@pytest.mark.parametrize("chunks", [(1, 3), (4, 2)])
def test_one_row_appends_compact_to_one_shard(where, chunks):
    one_row_appends(where, chunks=chunks)
    before = array_state(where)
    a = arrayds.open_array(where.url, storage_options=where.so)
    files_before = a.nshards
    assert files_before > 5
    report = compact(where)
    (line,) = report.nodes
    assert line.action == "compacted" and line.kind == "array"
    assert line.before.files == files_before and line.after.files == 1
    assert array_state(where) == before
    after = arrayds.open_array(where.url, storage_options=where.so)
    assert after.nshards == 1 and after.generation == a.generation + 1
    assert after.chunks == a.chunks
    assert verify(where.url, storage_options=where.so).ok
    # compacting again does nothing
    again = compact(where)
    assert [n.action for n in again.nodes] == ["skipped"]
    assert not fragmentation(after.manifest).needs_compaction


def test_overwrites_fill_chunks_and_appends_on_two_axes(where):
    a = arrayds.open_array(
        where.url,
        "x",
        mode="w",
        shape=(10, 9),
        dtype="f8",
        chunks=(3, 2),
        fill_value=float("nan"),
        storage_options=where.so,
    )
    a[0:6, 0:4] = 1.0  # chunks of rows 6.. and columns 4.. stay fill
    a[2:5, 1:3] = 2.0  # partly overrides the first write
    a[4, 0] = 3.0
    a[0:3, 0:2] = 4.0  # hides a whole chunk of the first write
    a.append(np.arange(4 * 9, dtype="f8").reshape(4, 9), axis=0)
    a.append(np.full((14, 3), 5.0), axis=1)
    a[12, :] = 6.0
    before = array_state(where, "x")
    assert any(c is None for c in before[3]), "some chunks must be fill"
    m = arrayds.open_array(where.url, "x", storage_options=where.so).manifest
    f = fragmentation(m)
    assert f.live_entries <= f.entries and f.needs_compaction
    report = compact(where, "x")
    assert [n.action for n in report.nodes] == ["compacted"]
    after = array_state(where, "x")
    assert after == before  # same bytes, same coverage (fill chunks stay uncovered)
    b = arrayds.open_array(where.url, "x", storage_options=where.so)
    assert len({e.path for e in b.manifest.shards}) == 1
    assert b.nchunks_initialized == a.nchunks_initialized
    np.testing.assert_array_equal(b[...], a[...])
    assert verify(where.url, storage_options=where.so).ok


def test_small_shard_size_splits_boxes_over_shards(where):
    """Files hidden for three quarters by a newer write (live bytes < half of the
    file bytes), rewritten into shards of about 200 KiB: boxes cut over shards."""
    a = arrayds.open_array(
        where.url,
        mode="w",
        shape=(0, 4096),
        dtype="f8",
        chunks=(1, 1024),
        storage_options=where.so,
    )
    rng = np.random.default_rng(0)
    for _ in range(24):
        a.append(rng.normal(size=(1, 4096)), compact=False)
    a[:, :3000] = rng.normal(size=(24, 3000))
    before = array_state(where)
    f = fragmentation(a.manifest, "200KiB")
    assert f.small_files == 0 and 2 * f.live_bytes < f.file_bytes and f.needs_compaction
    report = compact(where, shard_size="200KiB")
    (line,) = report.nodes
    assert line.action == "compacted" and line.after.files > 3
    assert array_state(where) == before
    b = arrayds.open_array(where.url, storage_options=where.so)
    paths = {e.path for e in b.manifest.shards}
    assert len(paths) == line.after.files
    assert verify(where.url, storage_options=where.so).ok


def test_zero_d_and_untouched_arrays(where):
    z = arrayds.open_array(
        where.url, "z", mode="w", shape=(), dtype="i4", chunks=(), storage_options=where.so
    )
    z[()] = 1
    z[()] = 2
    arrayds.open_array(
        where.url, "empty", mode="w", shape=(4,), dtype="i4", chunks=2, storage_options=where.so
    )
    report = compact(where)
    by_node = {n.node.rsplit("/", 1)[-1]: n for n in report.nodes}
    assert by_node["empty"].action == "skipped"
    assert by_node["empty"].reason == "no shard files"
    assert by_node["z"].action == "skipped"  # the second write hid the first one
    assert arrayds.open_array(where.url, "z", storage_options=where.so)[()] == 2
    e = arrayds.open_array(where.url, "empty", storage_options=where.so)
    assert e.nshards == 0 and e[:].tolist() == [0, 0, 0, 0]


def test_zero_d_array_with_several_files_compacts():
    url = "memory://compact-zero-d"
    z = arrayds.open_array(url, mode="w", shape=(), dtype="i4", chunks=())
    for v in range(3):
        z[()] = v
    m = z.manifest
    assert len(m.shards) == 1  # each write hides the one before completely
    report = arrayds.compact(url)
    assert report.nodes[0].action == "skipped"
    assert arrayds.open_array(url)[()] == 2


def test_old_shards_stay_until_gc_and_old_handles_read(where):
    one_row_appends(where, n=20)
    old = arrayds.open_array(where.url, storage_options=where.so)
    want = old[...]
    files = files_under(where)
    compact(where)
    now = files_under(where)
    assert set(files) <= set(now)  # nothing removed
    np.testing.assert_array_equal(old[...], want)  # the old handle reads its snapshot
    # the versions before compaction still use the old shards: gc keeps them for the
    # default retention, and removes them once those versions expire
    report = collect_garbage(where.url, storage_options=where.so, min_age=0)
    assert report.removed == []
    report = collect_garbage(where.url, storage_options=where.so, min_age=0, keep_versions=1)
    assert len(report.removed) == 20
    now = arrayds.open_array(where.url, storage_options=where.so)
    np.testing.assert_array_equal(now[...], want)
    assert verify(where.url, storage_options=where.so).ok


def test_dry_run_writes_nothing(where):
    one_row_appends(where, n=10)
    files = files_under(where)
    manifest = get_store(where.url, where.so).get_versioned("arrayds.json")[0]
    report = compact(where, dry_run=True)
    assert report.dry_run and [n.action for n in report.nodes] == ["would compact"]
    assert report.nodes[0].after is None and report.nodes[0].written == []
    assert files_under(where) == files
    assert get_store(where.url, where.so).get_versioned("arrayds.json")[0] == manifest


# ------------------------------------------------------------------ records, ragged


def test_records_with_several_appends(where):
    url = where.url
    items = []
    for k in range(6):
        batch = [{"k": k, "i": i, "x": list(range(i))} for i in range(20)]
        items += batch
        records.write_records(
            batch, url, "r", mode="a" if k else "w-", group_size=4, storage_options=where.so
        )
    ds = records.open_records(url, "r", storage_options=where.so)
    raw = list(ds.data_source())
    assert ds.num_shards == 6
    report = compact(where, "r")
    assert [n.action for n in report.nodes] == ["compacted"]
    new = records.open_records(url, "r", storage_options=where.so)
    assert new.num_shards == 1 and len(new) == len(items)
    assert list(new.data_source()) == raw
    assert list(new) == items
    assert (new.serializer, new.group_size, new.compression) == (
        ds.serializer,
        ds.group_size,
        ds.compression,
    )
    assert new.shards[0].options.startswith("group_size:4")
    assert verify(url, storage_options=where.so).ok
    # several shards with a small shard_size, still in order
    report = compact(where, "r", shard_size=len(raw[0]) * 30)
    assert report.nodes[0].action == "skipped"  # one file: not fragmented


def test_records_split_over_several_shards():
    url = "memory://compact-records-split"
    for _ in range(8):
        arrayds.to_arrayrecord([os.urandom(20000) for _ in range(20)], url, mode="a", compact=False)
    ds = records.open_records(url)
    raw = list(ds.data_source())
    report = arrayds.compact(url, shard_size="2MiB")
    assert report.nodes[0].after.files == 2
    new = records.open_records(url)
    assert list(new.data_source()) == raw
    names = [s.path for s in new.shards]
    assert all(n.endswith(f"-of-{len(names):05d}") for n in names)


def test_ragged_with_several_appends(where):
    rng = np.random.default_rng(1)
    items = []
    for k in range(5):
        batch = [rng.normal(size=(2, int(n))).astype("f4") for n in rng.integers(0, 30, size=7)]
        items += batch
        ragged.write_ragged(
            batch,
            where.url,
            "g",
            mode="a" if k else "w-",
            piece_len=8,
            storage_options=where.so,
        )
    ra = ragged.open_ragged(where.url, "g", storage_options=where.so)
    assert ra.nshards == 5
    report = compact(where, "g")
    assert [n.action for n in report.nodes] == ["compacted"]
    new = ragged.open_ragged(where.url, "g", storage_options=where.so)
    assert new.nshards == 1 and len(new) == len(items)
    assert new.shapes == ra.shapes
    for got, want in zip(new, items, strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(new[3, 1, 2:9], items[3][1, 2:9])
    assert verify(where.url, storage_options=where.so).ok


def test_ragged_shards_cut_between_items():
    url = "memory://compact-ragged-cut"
    rng = np.random.default_rng(3)
    items = []
    for k in range(6):
        batch = [rng.normal(size=(2, 20000)).astype("f4") for _ in range(2)]
        items += batch
        ragged.write_ragged(batch, url, mode="a" if k else "w-")
    report = arrayds.compact(url, shard_size="1MiB")
    assert report.nodes[0].after.files == 2
    cut = ragged.open_ragged(url)
    assert cut.nshards == report.nodes[0].after.files
    for got, want in zip(cut, items, strict=True):
        np.testing.assert_array_equal(got, want)


def test_a_tree_of_every_kind(where):
    one_row_appends(where, "g/a", n=12)
    for k in range(3):
        arrayds.to_arrayrecord(
            [b"x%d" % k] * 5, where.url, "g/r", mode="a", storage_options=where.so
        )
    for k in range(3):
        ragged.write_ragged(
            [np.arange(k + 3)],
            where.url,
            "h/q",
            mode="a" if k else "w-",
            storage_options=where.so,
        )
    before = array_state(where, "g/a")
    report = compact(where)
    got = {n.node.split(where.url.rstrip("/"), 1)[-1].strip("/"): n.action for n in report.nodes}
    assert got == {"g/a": "compacted", "g/r": "compacted", "h/q": "compacted"}
    assert array_state(where, "g/a") == before
    rs = records.open_records(where.url, "g/r", storage_options=where.so)
    assert list(rs.data_source()) == [b"x0"] * 5 + [b"x1"] * 5 + [b"x2"] * 5
    assert [x.tolist() for x in ragged.open_ragged(where.url, "h/q", storage_options=where.so)] == [
        list(range(3)),
        list(range(4)),
        list(range(5)),
    ]
    assert verify(where.url, storage_options=where.so).ok


def test_xarray_dataset_members_compact_in_one_snapshot_commit(tmp_path):
    xr = pytest.importorskip("xarray")
    url = str(tmp_path / "era")
    ds = xr.Dataset(
        {"t2m": (("time", "x"), np.zeros((1, 4), "f4"))},
        coords={"time": [0], "x": np.arange(4)},
    )
    ds.arrayds.to_arrayrecord(url, mode="w")
    for t in range(1, 15):
        more = ds.assign_coords(time=[t]) + t
        more.arrayds.to_arrayrecord(url, append_dim="time", compact=False)
    before = xr.open_dataset(url, engine="arrayds").load()
    root_gen = commit.read(get_store(url), "").generation
    report = arrayds.compact(url)
    acts = {n.node.rsplit("/", 1)[-1]: n.action for n in report.nodes}
    assert acts["t2m"] == "compacted" and acts["time"] == "compacted"
    assert acts["x"] == "skipped"
    root = commit.read(get_store(url), "")
    assert root.generation == root_gen + 1  # one commit of the group's snapshot
    snap = root.raw["snapshot"]["members"]
    assert len({s["path"] for s in snap["t2m"]["shards"]}) == 1
    after = xr.open_dataset(url, engine="arrayds").load()
    xr.testing.assert_identical(after, before)
    assert arrayds.open_array(url, "t2m").nshards == 1  # rolled forward
    assert verify(url).ok
    # a member alone goes through the snapshot as well
    for t in range(15, 20):
        (ds.assign_coords(time=[t]) + t).arrayds.to_arrayrecord(
            url, append_dim="time", compact=False
        )
    gen = commit.read(get_store(url), "").generation
    report = arrayds.compact(url, "t2m")
    assert [n.action for n in report.nodes] == ["compacted"]
    assert commit.read(get_store(url), "").generation == gen + 1
    xr.testing.assert_identical(
        xr.open_dataset(url, engine="arrayds").load().isel(time=slice(0, 15)), before
    )


# ------------------------------------------------------------------ concurrency


def test_a_commit_during_compaction_wins_and_compaction_conflicts(tmp_path):
    """A real race, no hook: compaction of a large array writes many shards; as soon as
    its first new shard is on disk (compaction has read the node), another writer
    appends and commits. Compaction's commit then finds the node changed."""
    url = str(tmp_path / "race")
    a = arrayds.open_array(url, mode="w", shape=(0, 256), dtype="f8", chunks=(4, 256))
    rng = np.random.default_rng(2)
    for _ in range(40):
        a.append(rng.normal(size=(256, 256)), compact=False)
    a[:600:7] = 1.0
    want = a[...]
    old = {e.path for e in a.manifest.shards}
    old_names = {p.split("/", 1)[1] for p in old}
    folder = os.path.join(url, "c")
    t, result = _compact_in_thread(url, "2MiB")
    deadline = time.monotonic() + 60
    while not set(os.listdir(folder)) - old_names:
        assert time.monotonic() < deadline
        time.sleep(0.0005)
    writer = arrayds.open_array(url, mode="a")
    extra = rng.normal(size=(3, 256))
    try:
        writer.append(extra, compact=False, retries=0)
    except arrayds.CommitConflictError:
        # compaction committed first (it wrote all its shards before this append
        # committed): then the append is the one refused, and nothing is lost either
        t.join()
        assert result["error"] is None
        np.testing.assert_array_equal(arrayds.open_array(url)[...], want)
        assert verify(url).ok
        return  # the other order (the append first) is what the rest checks
    t.join()
    assert isinstance(result["error"], arrayds.CommitConflictError), result
    now = arrayds.open_array(url)
    np.testing.assert_array_equal(now[...], np.concatenate([want, extra]))
    # the compaction's shards are gone; the node reads as the other writer left it
    names = {f"c/{n}" for n in os.listdir(folder)}
    assert names == {e.path for e in now.manifest.shards} | old
    assert verify(url).ok
    # and compaction succeeds when run again
    assert arrayds.compact(url).nodes[0].action == "compacted"
    np.testing.assert_array_equal(arrayds.open_array(url)[...], np.concatenate([want, extra]))


# ------------------------------------------------------------------ errors


def test_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no arrayds dataset"):
        arrayds.compact(str(tmp_path / "nothing"))
    url = "memory://compact-errors"
    arrayds.to_arrayrecord(np.arange(4), url, "a", chunks=2)
    with pytest.raises(FileNotFoundError, match="component 'b'"):
        arrayds.compact(url, "b")
    with pytest.raises(ValueError, match="component '../x'"):
        arrayds.compact(url, "../x")
    with pytest.raises(TypeError, match="component must be a str"):
        arrayds.compact(url, 3)
    for bad in (0, -5, "0B"):
        with pytest.raises(ValueError, match="shard_size"):
            arrayds.compact(url, shard_size=bad)
    with pytest.raises(ValueError, match="shard_size 'lots'"):
        arrayds.compact(url, shard_size="lots")
    for bad in (1.5, [1], True):
        with pytest.raises(TypeError, match="shard_size"):
            arrayds.compact(url, shard_size=bad)
    with pytest.raises(TypeError, match="shard_size"):
        fragmentation(arrayds.open_array(url, "a").manifest, 2.0)


def test_a_missing_shard_fails_and_leaves_the_node(tmp_path):
    url = str(tmp_path / "m")
    one_row_appends(type("W", (), {"url": url, "so": None})(), n=6)
    a = arrayds.open_array(url)
    raw = open(os.path.join(url, "arrayds.json"), "rb").read()
    victim = a.manifest.shards[2].path
    os.remove(os.path.join(url, victim))
    with pytest.raises(FileNotFoundError, match="named by the manifest is missing"):
        arrayds.compact(url)
    assert open(os.path.join(url, "arrayds.json"), "rb").read() == raw
    left = set(os.listdir(os.path.join(url, "c")))
    assert left == {p.split("/")[1] for p in {e.path for e in a.manifest.shards}} - {
        victim.split("/")[1]
    }


# ------------------------------------------------------------------ the CLI


def test_cli(tmp_path):
    from click.testing import CliRunner

    from arrayds.cli import cli

    url = str(tmp_path / "c")
    one_row_appends(type("W", (), {"url": url, "so": None})(), "x", n=8)
    run = CliRunner()
    r = run.invoke(cli, ["compact", url, "--dry-run"])
    assert r.exit_code == 0, r.output
    assert r.output.startswith(f"would compact {url}/x: 8 files")
    assert "1 node would be compacted" in r.output
    r = run.invoke(cli, ["compact", url, "--component", "x", "--shard-size", "1MiB", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["shard_size"] == 1 << 20 and doc["nodes"][0]["action"] == "compacted"
    r = run.invoke(cli, ["compact", url])
    assert r.exit_code == 0 and "skipped" in r.output and "0 nodes compacted" in r.output
    r = run.invoke(cli, ["compact", url, "--shard-size", "0"])
    assert r.exit_code == 2 and "shard-size" in r.output
    r = run.invoke(cli, ["compact", str(tmp_path / "none")])
    assert r.exit_code == 1 and "FileNotFoundError" in r.output
    r = run.invoke(cli, ["compact", url, "-c", "../y"])
    assert r.exit_code != 0


def test_cli_console_script(tmp_path):
    import subprocess
    import sys

    url = str(tmp_path / "s")
    one_row_appends(type("W", (), {"url": url, "so": None})(), n=4)
    exe = os.path.join(os.path.dirname(sys.executable), "arrayds")
    out = subprocess.run([exe, "compact", url], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"compacted {url}: 4 files")


def test_datatree_groups_compact_through_their_snapshots(tmp_path):
    xr = pytest.importorskip("xarray")
    url = str(tmp_path / "tree")
    root = xr.Dataset({"a": (("x",), np.zeros(3, "f4"))})
    dt = xr.DataTree.from_dict({"/": root, "/set1": xr.Dataset({"b": (("y",), np.zeros(1, "f4"))})})
    arrayds.to_arrayrecord(dt, url)
    for t in range(1, 8):
        more = xr.Dataset({"b": (("y",), np.full(1, t, "f4"))})
        arrayds.to_arrayrecord(more, url, "set1", mode="a", append_dim="y", compact=False)
    before = xr.open_datatree(url, engine="arrayds").load()
    report = arrayds.compact(url)
    acts = {n.node[len(url) + 1 :]: n.action for n in report.nodes}
    assert acts == {"a": "skipped", "set1/b": "compacted"}
    xr.testing.assert_identical(xr.open_datatree(url, engine="arrayds").load(), before)
    assert verify(url).ok
    assert [n.action for n in arrayds.compact(url).nodes] == ["skipped", "skipped"]


def test_sizes_the_manifest_does_not_record_are_asked_of_the_store():
    url = "memory://compact-no-bytes"
    one_row_appends(type("W", (), {"url": url, "so": None})(), n=6)
    store = get_store(url)
    raw = commit.read(store, "").raw
    for e in raw["shards"]:
        e.pop("bytes")
    raw["generation"] += 1
    commit.replace(store, "", raw)
    want = arrayds.open_array(url)[...]
    f = fragmentation(arrayds.open_array(url).manifest)
    assert f.file_bytes == 0 and not f.needs_compaction  # unknown sizes count as large
    report = arrayds.compact(url)  # the walk asks the store for the sizes
    assert report.nodes[0].action == "compacted" and report.nodes[0].before.files == 6
    assert report.nodes[0].after.files == 1
    np.testing.assert_array_equal(arrayds.open_array(url)[...], want)


def test_a_node_of_an_unknown_kind_is_skipped():
    url = "memory://compact-unknown-kind"
    one_row_appends(type("W", (), {"url": url, "so": None})(), "a", n=3)
    store = get_store(url)
    commit.replace(
        store,
        "future",
        {"format": "arrayds", "format_version": 1, "kind": "hologram", "generation": 1},
    )
    report = arrayds.compact(url)
    acts = {n.node.rsplit("/", 1)[-1]: (n.action, n.kind) for n in report.nodes}
    assert acts == {"a": ("compacted", "array"), "future": ("skipped", "hologram")}


def test_readers_during_compaction_see_the_same_data(tmp_path):
    """Readers opening and reading the array in a loop while compaction writes its
    shards and commits: every read is complete and equal (the old state or the new)."""
    url = str(tmp_path / "read")
    a = arrayds.open_array(url, mode="w", shape=(0, 256), dtype="f8", chunks=(4, 256))
    rng = np.random.default_rng(4)
    for _ in range(30):
        a.append(rng.normal(size=(128, 256)), compact=False)
    want = a[...]
    done = threading.Event()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            arrayds.compact(url, shard_size="2MiB")
        except BaseException as e:  # noqa: BLE001
            errors.append(e)
        finally:
            done.set()

    t = threading.Thread(target=run)
    t.start()
    gens = set()
    reads = 0
    while not done.is_set() or reads < 3:
        b = arrayds.open_array(url)
        gens.add(b.generation)
        np.testing.assert_array_equal(b[...], want)
        reads += 1
    t.join()
    assert not errors
    b = arrayds.open_array(url)
    assert b.generation == a.generation + 1 and len({e.path for e in b.manifest.shards}) > 3
    np.testing.assert_array_equal(b[...], want)
    assert a.generation in gens and reads >= 3


def test_a_records_append_during_compaction_survives(tmp_path):
    """Records appends commute: the append that lands while compaction writes wins,
    compaction raises CommitConflictError, and every record is there once."""
    url = str(tmp_path / "rrace")
    rng = np.random.default_rng(7)
    for k in range(12):
        items = [rng.bytes(20_000) for _ in range(40)]
        records.write_records(items, url, mode="a" if k else "w-", serializer="raw")
    want = list(records.open_records(url).data_source())
    old = {s.path for s in records.open_records(url).shards}
    t, result = _compact_in_thread(url, "4MiB")
    deadline = time.monotonic() + 60
    while not {n for n in os.listdir(url) if "array_record" in n} - old:
        assert time.monotonic() < deadline
        time.sleep(0.0005)
    records.write_records([b"late"], url, mode="a", serializer="raw")
    t.join()
    # the append lands first (compaction is still writing its shards); if compaction
    # ever committed first, the append (which commutes) retried on top of it
    assert result["error"] is None or isinstance(result["error"], arrayds.CommitConflictError)
    assert list(records.open_records(url).data_source()) == want + [b"late"]
    assert verify(url).ok
