"""The ``arrayds`` command line: info, verify, convert, cat, gc (docs/cli.md).

Most tests drive the real click command in-process (CliRunner); the damage test and
the help test also run the installed ``arrayds`` console script in a subprocess.
Exit status: 0 success, 1 damage found / failure, 2 usage.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import time

import numpy as np
import pytest

import arrayds
from arrayds.verify import collect_garbage, describe

from .conftest import arrayds_executable

SUBCOMMANDS = ["info", "verify", "convert", "cat", "gc"]


# ------------------------------------------------------------------ basics


@pytest.mark.parametrize("cmd", [None, *SUBCOMMANDS])
def test_help_on_every_subcommand(run, cmd):
    args = ["--help"] if cmd is None else [cmd, "--help"]
    res = run(*args)
    assert res.exit_code == 0
    assert res.output.startswith("Usage: ")
    if cmd is not None:
        assert f"arrayds {cmd}" in res.output.splitlines()[0]


def test_the_console_script_runs(tmp_path):
    exe = arrayds_executable()
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for cmd in SUBCOMMANDS:
        assert cmd in out.stdout
    bad = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "Missing argument 'URL'" in bad.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["info"],
        ["nosuchcommand"],
        ["info", "x", "--nosuchoption"],
        ["cat", "x", "--index", "1", "--select", "0"],
        ["gc", "x", "--min-age", "soon"],
        ["info", "x", "-o", "novalue"],
        ["info", "x", "--storage-options", "[1, 2]"],
        ["convert", "x", "y", "--chunks", "a,b"],
        ["convert", "x", "y", "--mode", "r"],
    ],
)
def test_usage_errors_exit_2(run, args):
    res = run(*args)
    assert res.exit_code == 2, res.output


def test_failures_exit_1_and_name_the_url(run, tmp_path):
    missing = str(tmp_path / "nothing-here")
    for cmd in ("info", "verify", "cat", "gc"):
        res = run(cmd, missing)
        assert res.exit_code == 1
        assert "no arrayds dataset" in res.output and "nothing-here" in res.output


# -------------------------------------------------------------------- info


def test_info_shows_the_tree_sizes_and_record_counts(run, dataset):
    url, _ = dataset
    res = run("info", url)
    assert res.exit_code == 0, res.output
    out = res.output
    lines = out.splitlines()
    assert lines[0] == url
    assert "├── audio  ragged 4 items, ndim 1 float32" in out
    assert "├── climate  group" in out
    assert "│   ├── counts  array (100,) int64" in out
    assert "│   └── temp  array (60, 8) float32" in out
    assert "chunks (10, 4), grid (6, 2), 12/12 chunks written, 12 shards, uncompressed" in out
    assert "dims ('time', 'x')" in out
    assert "└── train  records 40 records" in out
    assert "3 shards, serializer msgpack" in out
    assert "ratio" in out and "stored" in out
    assert lines[-1].startswith("total: 6 nodes (2 arrays, 1 record sets, 1 ragged, 2 groups)")


def test_info_json_is_machine_readable(run, dataset):
    url, data = dataset
    res = run("info", url, "--json")
    assert res.exit_code == 0
    desc = json.loads(res.output)
    nodes = {n["path"]: n for n in desc["nodes"]}
    assert set(nodes) == {"/", "/audio", "/climate", "/climate/counts", "/climate/temp", "/train"}
    t = nodes["/climate/temp"]
    assert (t["kind"], t["shape"], t["dtype"], t["chunks"], t["grid"]) == (
        "array",
        [60, 8],
        "<f4",
        [10, 4],
        [6, 2],
    )
    assert t["shards"] == 12 and t["nchunks_written"] == 12
    assert t["bytes_logical"] == data["temp"].nbytes
    shard_sizes = sum(os.path.getsize(p) for p in glob.glob(f"{url}/climate/temp/c/*"))
    assert t["bytes_stored"] == shard_sizes
    assert t["ratio"] == pytest.approx(t["bytes_logical"] / t["bytes_stored"], rel=1e-3)
    r = nodes["/train"]
    assert (r["kind"], r["records"], r["shards"], r["serializer"]) == ("records", 40, 3, "msgpack")
    a = nodes["/audio"]
    assert a["items"] == 4 and a["bytes_logical"] == sum(c.nbytes for c in data["clips"])
    assert nodes["/"]["attrs"] == ["title"]
    assert desc["totals"]["records"] == 40 and desc["totals"]["arrays"] == 2
    # --component narrows the tree
    sub = json.loads(run("info", url, "-c", "climate", "--json").output)
    assert [n["path"] for n in sub["nodes"]] == ["/climate", "/climate/counts", "/climate/temp"]
    assert describe(url) == desc


# ------------------------------------------------------------------ verify


def test_verify_clean_dataset(run, dataset):
    url, _ = dataset
    res = run("verify", url)
    assert res.exit_code == 0, res.output
    assert "6 nodes, 17 shards" in res.output and "no problems" in res.output
    report = json.loads(run("verify", url, "--json").output)
    assert report["ok"] and report["problems"] == []
    assert report["records"] == 12 + 4 + 40 + 5  # temp chunks, counts chunks, records, ragged


def _flip(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        f.seek(offset)
        f.write(bytes([b[0] ^ 0x40]))


def _offset_of(path: str, needle: bytes) -> int:
    data = open(path, "rb").read()
    at = data.find(needle)
    assert at > 0, "test setup: record bytes not found in the uncompressed shard"
    return at


def _damage(url: str) -> dict[str, str]:
    """Damage the dataset in five different ways; return what was done to whom."""
    temp_node = os.path.join(url, "climate", "temp")
    man = json.load(open(os.path.join(temp_node, "arrayds.json")))
    by_start = {tuple(e["start"]): e["path"] for e in man["shards"]}
    done = {}
    # 1. a missing shard: chunk (0, 0)
    missing = os.path.join(temp_node, by_start[(0, 0)])
    os.unlink(missing)
    done["missing"] = missing
    # 2. a truncated shard: chunk (1, 1)
    truncated = os.path.join(temp_node, by_start[(1, 1)])
    with open(truncated, "r+b") as f:
        f.truncate(40_000)
    done["truncated"] = truncated
    # 3. a flipped byte inside the data of chunk (4, 1) (uncompressed: find its bytes)
    flipped = os.path.join(temp_node, by_start[(4, 1)])
    block = np.arange(60 * 8, dtype="f4").reshape(60, 8)[40:50, 4:8]
    _flip(flipped, _offset_of(flipped, np.ascontiguousarray(block).tobytes()[:64]) + 10)
    done["flipped"] = flipped
    # 4. the array manifest names one shard twice
    man["shards"].append(dict(man["shards"][5]))
    json.dump(man, open(os.path.join(temp_node, "arrayds.json"), "w"))
    done["twice"] = man["shards"][5]["path"]
    # 5. the records manifest names a shard twice (and its counts follow)
    rpath = os.path.join(url, "train", "arrayds.json")
    rman = json.load(open(rpath))
    rman["shards"].append(rman["shards"][0])
    rman["num_records"] += rman["shards"][0]["records"]
    json.dump(rman, open(rpath, "w"))
    done["records_twice"] = rman["shards"][0]["path"]
    return done


def test_verify_reports_each_damage_precisely(run, dataset):
    url, _ = dataset
    done = _damage(url)
    res = run("verify", url)
    assert res.exit_code == 1
    lines = [ln for ln in res.output.splitlines() if ln.startswith("DAMAGED ")]
    text = "\n".join(lines)
    assert len(lines) == 5, res.output
    assert f"DAMAGED {done['missing']}: file: missing" in text
    assert f"DAMAGED {done['truncated']}: file: not an ArrayRecord file" in text
    flipped = [ln for ln in lines if done["flipped"] in ln]
    assert len(flipped) == 1 and ": chunk (4, 1) (record 0): " in flipped[0]
    assert "hash mismatch" in flipped[0]
    assert f"names shard {done['twice']!r} twice" in text
    assert f"names shard {done['records_twice']!r} twice" in text
    assert res.output.splitlines()[-1].endswith(": 5 problems")
    report = json.loads(run("verify", url, "--json").output)
    assert not report["ok"] and len(report["problems"]) == 5
    wheres = sorted(p["where"] for p in report["problems"])
    assert wheres == ["chunk (4, 1) (record 0)", "file", "file", "manifest", "manifest"]


def test_verify_in_a_subprocess_exits_1_on_damage(dataset):
    url, _ = dataset
    done = _damage(url)
    out = subprocess.run(
        [arrayds_executable(), "verify", url, "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert done["missing"] in out.stdout and done["flipped"] in out.stdout
    clean = subprocess.run(
        [arrayds_executable(), "verify", url, "-c", "climate/counts"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert clean.returncode == 0 and "no problems" in clean.stdout


def test_verify_records_counts_and_ragged_pieces(run, tmp_path):
    url = str(tmp_path / "d")
    arrayds.to_arrayrecord([b"x" * 50] * 30, url, "r", num_shards=2, compression="uncompressed")
    clips = [np.full(n, 7, dtype="i4") for n in (3, 10, 4)]
    arrayds.to_arrayrecord(clips, url, "rag", compression="uncompressed")
    # the records manifest claims one record more than the shard holds
    rpath = os.path.join(url, "r", "arrayds.json")
    rman = json.load(open(rpath))
    rman["shards"][1]["records"] += 1
    rman["num_records"] += 1
    json.dump(rman, open(rpath, "w"))
    # a ragged piece: flip a byte in the data of item 1 (ten 7s)
    shard = glob.glob(os.path.join(url, "rag", "c", "*"))[0]
    _flip(shard, _offset_of(shard, np.full(10, 7, "i4").tobytes()) + 4)
    res = run("verify", url)
    assert res.exit_code == 1
    assert (
        f"{rman['shards'][1]['path']}: index: holds 15 records, the manifest says 16" in res.output
    )
    assert f"{shard}: piece record 1: " in res.output


# ----------------------------------------------------------------- convert


def test_convert_npy_in_parallel_processes(run, tmp_path):
    data = np.random.default_rng(0).standard_normal((300, 5)).astype("f8")
    np.save(tmp_path / "a.npy", data)
    dst = str(tmp_path / "out")
    res = run(
        "convert",
        tmp_path / "a.npy",
        dst,
        "-c",
        "a",
        "--chunks",
        "64,5",
        "--scheduler",
        "processes",
    )
    assert res.exit_code == 0, res.output
    assert "converted npy" in res.output
    a = arrayds.open_array(dst, "a")
    assert a.chunks == ((64, 64, 64, 64, 44), (5,))
    np.testing.assert_array_equal(a[:], data)
    # the same destination again: mode w- refuses, w replaces
    again = run("convert", tmp_path / "a.npy", dst, "-c", "a")
    assert again.exit_code == 1 and "FileExistsError" in again.output
    np.save(tmp_path / "b.npy", data[:10] * 2)
    assert run("convert", tmp_path / "b.npy", dst, "-c", "a", "--mode", "w").exit_code == 0
    np.testing.assert_array_equal(arrayds.open_array(dst, "a")[:], data[:10] * 2)


def test_convert_zarr_groups_and_arrays(run, tmp_path):
    zarr = pytest.importorskip("zarr")
    g = zarr.open_group(str(tmp_path / "z.zarr"), mode="w")
    g.attrs["title"] = "zarr group"
    t = g.create_array(
        "sub/temp", shape=(100, 40), chunks=(10, 40), shards=(50, 40), dtype="i2",
        dimension_names=("t", "x"),
    )  # fmt: skip
    t[:] = np.arange(4000).reshape(100, 40)
    t.attrs["units"] = "K"
    flat = g.create_array("flat", shape=(9,), chunks=(4,), dtype="f8", fill_value=np.nan)
    flat[:5] = 1.5
    v2 = zarr.open_array(str(tmp_path / "v2.zarr"), mode="w", shape=(20,), chunks=(6,),
                         dtype="u1", zarr_format=2)  # fmt: skip
    v2[:] = np.arange(20)
    dst = str(tmp_path / "out")
    assert run("convert", tmp_path / "z.zarr", dst, "-c", "z").exit_code == 0
    assert run("convert", tmp_path / "v2.zarr", dst, "-c", "v2").exit_code == 0
    root = arrayds.open(dst)
    assert root["z"].attrs["title"] == "zarr group"
    temp = root["z/sub/temp"]
    assert temp.chunks == ((10,) * 10, (40,)) and temp.dims == ("t", "x")
    assert temp.attrs["units"] == "K"
    np.testing.assert_array_equal(temp[:], np.arange(4000).reshape(100, 40))
    f = root["z/flat"]
    np.testing.assert_array_equal(f[:5], 1.5)
    assert np.isnan(f[5:]).all() and np.isnan(f.fill_value)
    np.testing.assert_array_equal(root["v2"][:], np.arange(20, dtype="u1"))
    assert root["v2"].chunks == ((6, 6, 6, 2),)


def test_convert_hdf5_file_and_one_dataset(run, tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f.attrs["who"] = "me"
        f.create_dataset("x", data=np.arange(50).reshape(10, 5), chunks=(2, 5))
        grp = f.create_group("g")
        grp.attrs["n"] = np.int64(3)
        grp.create_dataset("y", data=np.linspace(0, 1, 33))
        f.create_dataset("names", data=np.array([b"ab", b"cde"], dtype="S3"))
    dst = str(tmp_path / "out")
    res = run("convert", path, dst, "-c", "all")
    assert res.exit_code == 0, res.output
    root = arrayds.open(dst)
    assert root["all"].attrs["who"] == "me" and root["all/g"].attrs["n"] == 3
    x = root["all/x"]
    assert x.chunks == ((2,) * 5, (5,))
    np.testing.assert_array_equal(x[:], np.arange(50).reshape(10, 5))
    np.testing.assert_array_equal(root["all/g/y"][:], np.linspace(0, 1, 33))
    assert root["all/names"][:].tolist() == [b"ab", b"cde"]
    one = run("convert", f"{path}#/g/y", dst, "-c", "just_y")
    assert one.exit_code == 0, one.output
    np.testing.assert_array_equal(arrayds.open_array(dst, "just_y")[:], np.linspace(0, 1, 33))
    # a dtype arrayds cannot store names the dataset
    with h5py.File(tmp_path / "vlen.h5", "w") as f:
        f.create_dataset("s", data=["a", "bb"], dtype=h5py.string_dtype())
    bad = run("convert", tmp_path / "vlen.h5", dst, "-c", "v")
    assert bad.exit_code == 1 and "'/s'" in bad.output and "cannot store" in bad.output
    assert "v" not in arrayds.open(dst)


def test_convert_records_sources(run, tmp_path):
    from arrayds.files.tfrecord import write_tfrecord

    src = tmp_path / "src"
    src.mkdir()
    for k in range(2):
        write_tfrecord(str(src / f"t-{k}.tfrecord"), [b"ex%d-%d" % (k, i) for i in range(5)])
    for k in range(3):
        with arrayds.ArrayRecordWriter(str(src / f"r-{k}.array_record"), "group_size:2") as w:
            w.write_many([b"r%d-%d" % (k, i) for i in range(4)])
    (src / "j.jsonl").write_text('{"a": 1}\n{"a": [2, 3]}\n')
    dst = str(tmp_path / "out")
    assert run("convert", str(src / "t-*.tfrecord"), dst, "-c", "tf").exit_code == 0
    assert run("convert", str(src / "r-*.array_record"), dst, "-c", "ar").exit_code == 0
    assert run("convert", src / "j.jsonl", dst, "-c", "js").exit_code == 0
    from arrayds import records as records

    tf = records.open_records(dst, "tf")
    assert tf.serializer == "raw" and tf.num_shards == 2
    assert list(tf.data_source()) == [b"ex%d-%d" % (k, i) for k in range(2) for i in range(5)]
    ar = records.open_records(dst, "ar")
    assert ar.num_shards == 3
    assert list(ar.data_source()) == [b"r%d-%d" % (k, i) for k in range(3) for i in range(4)]
    assert list(records.open_records(dst, "js").data_source(decode=True)) == [
        {"a": 1},
        {"a": [2, 3]},
    ]
    # a folder of record files works too
    shutil.rmtree(dst)
    os.unlink(src / "j.jsonl")
    for p in glob.glob(str(src / "t-*")):
        os.unlink(p)
    assert run("convert", src, dst).exit_code == 0
    assert len(records.open_records(dst)) == 12


def test_convert_unsupported_source_lists_the_supported_ones(run, tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    res = run("convert", tmp_path / "notes.txt", tmp_path / "out")
    assert res.exit_code == 2
    for name in (".npy", "zarr", "HDF5", "TFRecord", "ArrayRecord", "JSON lines"):
        assert name in res.output
    missing = run("convert", tmp_path / "nope.npy", tmp_path / "out")
    assert missing.exit_code == 2 and "does not exist" in missing.output
    assert not (tmp_path / "out").exists()


def test_convert_progress_bar_only_when_asked(run, tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((100, 10)))
    quiet = run("convert", tmp_path / "a.npy", tmp_path / "o1")
    assert quiet.exit_code == 0 and "Completed" not in quiet.stderr
    forced = run("convert", tmp_path / "a.npy", tmp_path / "o2", env={"ARRAYDS_PROGRESS": "1"})
    assert forced.exit_code == 0 and "100% Completed" in forced.stderr
    off = run(
        "convert", tmp_path / "a.npy", tmp_path / "o3", "--no-progress",
        env={"ARRAYDS_PROGRESS": "1"},
    )  # fmt: skip
    assert off.exit_code == 0 and "Completed" not in off.stderr


# --------------------------------------------------------------------- cat


def test_cat_arrays(run, dataset):
    url, data = dataset
    res = run("cat", url, "-c", "climate/temp", "--select", "0:2,5")
    assert res.exit_code == 0
    assert res.output.strip() == str(data["temp"][0:2, 5])
    res = run("cat", url, "-c", "climate/temp", "--select", "[0, 59],[1, 7]")
    assert res.output.strip() == str(data["temp"][np.ix_([0, 59], [1, 7])])
    res = run("cat", url, "-c", "climate/counts", "--index", "-1")
    assert res.output.strip() == "99"
    default = run("cat", url, "-c", "climate/temp")
    assert "first 10 along each axis" in default.output
    bad = run("cat", url, "-c", "climate/temp", "--select", "0:2,x")
    assert bad.exit_code == 2
    out_of_range = run("cat", url, "-c", "climate/counts", "--index", "100")
    assert out_of_range.exit_code == 1 and "IndexError" in out_of_range.output


def test_cat_records_and_ragged(run, dataset):
    url, data = dataset
    res = run("cat", url, "-c", "train", "--index", "7")
    assert res.exit_code == 0
    assert res.output.strip() == "[7] {'id': 7, 'name': 'item-7', 'v': [7 7]}"
    res = run("cat", url, "-c", "train", "--select", "38:")
    assert res.output.splitlines()[0].startswith("[38] {'id': 38")
    assert len(res.output.splitlines()) == 2
    head = run("cat", url, "-c", "train", "-n", "3")
    assert head.output.splitlines()[-1] == "... 37 more records (40 in all); use --select"
    raw = run("cat", url, "-c", "train", "--index", "0", "--raw")
    assert raw.output.startswith("[0] b") and "bytes)" in raw.output
    assert run("cat", url, "-c", "train", "--index", "40").exit_code == 2
    rag = run("cat", url, "-c", "audio", "--select", "1,298:")
    assert rag.output.strip() == "[1] shape (2,): [298. 299.]"
    assert "[3] shape (0,)" in run("cat", url, "-c", "audio").output
    group = run("cat", url)
    assert group.exit_code == 2 and "is a group" in group.output


# ---------------------------------------------------------------------- gc


def _shards(url: str) -> set[str]:
    return {p for p in glob.glob(f"{url}/**/*", recursive=True) if ".array_record" in p}


def test_gc_removes_only_unreferenced_old_shards(run, dataset):
    url, data = dataset
    live = _shards(url)
    node = os.path.join(url, "climate", "counts", "c")
    live_shard = sorted(glob.glob(f"{node}/*"))[0]
    orphan = os.path.join(node, "00000000000000deadbeef00-0.array_record")
    shutil.copy(live_shard, orphan)
    orphan2 = os.path.join(
        url, "train", "train-00000000000000deadbeef00.array_record-00000-of-00001"
    )
    shutil.copy(live_shard, orphan2)
    old = time.time() - 3 * 86400
    os.utime(orphan, (old, old))
    # dry run: lists the old orphan, keeps the young one, removes nothing
    res = run("gc", url, "--dry-run")
    assert res.exit_code == 0
    assert f"would remove {orphan}" in res.output and orphan2 not in res.output
    assert "kept 1 unreferenced file younger than 24h" in res.output
    assert os.path.exists(orphan)
    # default min-age: removes the old orphan only
    res = run("gc", url)
    assert f"removed {orphan}" in res.output and not os.path.exists(orphan)
    assert os.path.exists(orphan2)
    res = run("gc", url, "--min-age", "0", "--json")
    report = json.loads(res.output)
    assert report["removed"] == [orphan2] and not os.path.exists(orphan2)
    assert _shards(url) == live
    assert run("verify", url).exit_code == 0
    np.testing.assert_array_equal(arrayds.open_array(url, "climate/counts")[:], data["counts"])


def test_gc_after_replacing_and_protects_unreadable_manifests(run, tmp_path):
    url = str(tmp_path / "d")
    arrayds.to_arrayrecord(np.arange(10), url, "a", chunks=5)
    arrayds.to_arrayrecord(np.arange(10), url, "b", chunks=5)
    # a failed write leaves orphans in a (simulate: copy a shard under a new name)
    a_shard = glob.glob(f"{url}/a/c/*")[0]
    a_orphan = os.path.join(os.path.dirname(a_shard), "00000000000000deadbeef00-7.array_record")
    shutil.copy(a_shard, a_orphan)
    b_orphan = f"{url}/b/c/00000000000000deadbeef00-0.array_record"
    shutil.copy(a_shard, b_orphan)
    # b's manifest becomes unreadable: nothing below b may be removed
    with open(f"{url}/b/arrayds.json", "w") as f:
        f.write("{not json")
    report = collect_garbage(url, min_age=0)
    assert report.removed == [a_orphan]
    assert report.protected == [f"{url}/b"]
    assert os.path.exists(b_orphan)
    res = run("verify", url)
    assert res.exit_code == 1 and f"{url}/b/arrayds.json: manifest: CorruptionError" in res.output


def test_gc_refuses_a_folder_that_is_not_a_dataset(run, tmp_path):
    (tmp_path / "loose").mkdir()
    with arrayds.ArrayRecordWriter(str(tmp_path / "loose" / "x.array_record")) as w:
        w.write(b"keep me")
    res = run("gc", tmp_path / "loose", "--min-age", "0")
    assert res.exit_code == 1 and "no arrayds dataset" in res.output
    assert (tmp_path / "loose" / "x.array_record").exists()


def test_xarray_datasets_info_verify_gc(run, tmp_path):
    """A dataset written by xarray (a group snapshot plus member arrays): info names
    its variables, verify checks the members' shards (also those named only by the
    snapshot), gc removes nothing that either references."""
    xr = pytest.importorskip("xarray")
    url = str(tmp_path / "era.ads")
    ds = xr.Dataset(
        {"t2m": (("time", "x"), np.arange(40.0).reshape(8, 5))},
        coords={"time": np.arange(8), "x": np.arange(5) * 10},
    )
    arrayds.to_arrayrecord(ds.chunk({"time": 4}), url)
    arrayds.to_arrayrecord(ds.assign_coords(time=ds.time + 8), url, mode="a", append_dim="time")
    desc = describe(url)
    root = desc["nodes"][0]
    assert root["kind"] == "group" and root["dataset_variables"] == ["t2m", "time", "x"]
    res = run("info", url)
    assert "(dataset: t2m, time, x)" in res.output
    assert run("verify", url).exit_code == 0
    before = _shards(url)
    report = collect_garbage(url, min_age=0)
    assert report.removed == [] and _shards(url) == before
    # a member's shard is named by the member's manifest and by the snapshot: a
    # missing one is reported once
    shard = sorted(glob.glob(f"{url}/t2m/c/*"))[0]
    os.unlink(shard)
    res = run("verify", url)
    assert res.exit_code == 1
    assert res.output.count(f"DAMAGED {shard}: file: missing") == 1
    back = xr.open_dataset(url, engine="arrayds")
    assert back.sizes["time"] == 16


def test_verify_names_the_records_of_a_damaged_chunk(run, tmp_path):
    """With group_size 4 one damaged chunk holds four records: one problem names the
    chunk and its record range; the other chunks still verify."""
    url = str(tmp_path / "g")
    recs = [b"rec-%03d-" % i * 20 for i in range(16)]
    arrayds.to_arrayrecord(recs, url, group_size=4, compression="uncompressed")
    shard = glob.glob(os.path.join(url, "*.array_record*"))[0]
    _flip(shard, _offset_of(shard, recs[9]) + 3)
    res = run("verify", url)
    assert res.exit_code == 1
    damaged = [ln for ln in res.output.splitlines() if ln.startswith("DAMAGED")]
    assert len(damaged) == 1
    assert damaged[0].startswith(f"DAMAGED {shard}: chunk 2 (records 8..11): ")
    assert "hash mismatch" in damaged[0]
    assert res.output.splitlines()[-1].endswith(": 1 problem")
