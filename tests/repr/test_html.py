"""The Jupyter reprs (arrayds/html_repr.py), read back with a real HTML parser: the
chunk map's cells, lines and shard boxes, the caps on huge grids, escaping, the group
tree, the shard bars, and that no shard is read."""

from __future__ import annotations

import os

import numpy as np
import pytest

import arrayds
from arrayds import html_repr
from arrayds import ragged as ragged
from arrayds import records as records
from arrayds.kinds.array.manifest import ArrayManifest, ShardEntry

from .pages import EVIL, Elements, make_dataset


@pytest.fixture(scope="module")
def handles(tmp_path_factory):
    return make_dataset(str(tmp_path_factory.mktemp("repr")))


def test_array_chunk_map(handles):
    t = handles["temperature"]  # (720, 1440) in (180, 240) chunks: a 4 x 6 grid
    doc = Elements(t._repr_html_())
    assert len(doc.all("svg", "arrayds-chunks")) == 1
    lines = doc.all("line")
    assert len(lines) == (6 + 1) + (4 + 1)
    # the rows are the first axis, the columns the second, to scale (1440 : 720)
    xs = sorted({float(a["x1"]) for a in lines if a["x1"] == a["x2"]})
    ys = sorted({float(a["y1"]) for a in lines if a["y1"] == a["y2"]})
    assert xs[-1] - xs[0] == pytest.approx(2 * (ys[-1] - ys[0]), abs=0.2)
    assert np.allclose(np.diff(xs), np.diff(xs)[0], atol=0.1)
    written = doc.all("rect", "written")
    area = sum(float(a["width"]) * float(a["height"]) for a in written)
    cell = np.diff(xs)[0] * np.diff(ys)[0]
    assert area == pytest.approx(8 * cell, rel=1e-3)  # 8 of 24 chunks written
    assert all(a["fill-opacity"] == "1.00" for a in written)
    assert len(doc.all("rect", "shard")) == 2  # two writes, two shard boxes
    assert "8/24 chunks written" in doc.joined and "lat: 720" in doc.joined
    assert "lon: 1440" in doc.joined and "Versions kept" in doc.joined


def test_irregular_chunks_drawn_to_scale(handles):
    doc = Elements(handles["irregular"]._repr_html_())  # rows (10, 30, 60), cols (5, 25, 30)
    lines = doc.all("line")
    ys = sorted(float(a["y1"]) for a in lines if a["y1"] == a["y2"])
    xs = sorted(float(a["x1"]) for a in lines if a["x1"] == a["x2"])
    assert np.allclose(np.diff(ys) / (ys[-1] - ys[0]), [0.1, 0.3, 0.6], atol=0.01)
    assert np.allclose(np.diff(xs) / (xs[-1] - xs[0]), [5 / 60, 25 / 60, 30 / 60], atol=0.01)
    assert "irregular" in doc.joined and "4/9 chunks written" in doc.joined


def test_nd_array_draws_the_last_two_axes_and_notes_the_others(handles):
    doc = Elements(handles["wind"]._repr_html_())  # (4, 5, 30, 40) in (2, 5, 10, 10)
    assert len(doc.all("line")) == (4 + 1) + (3 + 1)
    written = doc.all("rect", "written")
    # t=0 of 2 chunks along t, rows 0-1 of 3: those cells are half written
    assert {a["fill-opacity"] for a in written} == {f"{0.25 + 0.6 * 0.5:.2f}"}
    assert "over 2 × 1 chunks along t, z" in doc.joined and "y: 30" in doc.joined
    assert "partly written" in doc.joined
    assert "partly written" not in Elements(handles["temperature"]._repr_html_()).joined


def grid_manifest(n: int, entries=()) -> ArrayManifest:
    m = ArrayManifest.new((n, n), "u1", ((1,) * n, (1,) * n))
    return m.with_(shards=list(entries))


def test_a_million_chunk_grid_is_capped():
    boxes = [ShardEntry(f"c/{i}", (i, 0), (i + 1, 500)) for i in range(300)]
    svg = html_repr.chunk_map(grid_manifest(1000, boxes))
    doc = Elements(svg)
    cap = html_repr.MAX_CELLS
    assert len(doc.all("line")) == 2 * (cap + 1)
    assert len(doc.all("rect", "written")) <= cap * cap
    assert len(doc.all("rect", "shard")) == 0  # 300 boxes: more than MAX_SHARD_BOXES
    assert "1 cell = up to 20 × 20 chunks" in doc.joined
    assert "300 shard boxes: too many to outline" in doc.joined
    # rows 0-299 of 1000, columns 0-499: cells of 20 x 20 chunks, full or empty
    full = [a for a in doc.all("rect", "written") if a["fill-opacity"] == "1.00"]
    assert len(full) == 15 and len(doc.all("rect", "written")) == 15


def test_a_fragmented_table_is_shaded_approximately():
    # 1200 single chunks on a diagonal: their bounds make more than _PAINT_LIMIT cells
    boxes = [ShardEntry(f"c/{i}", (i, i), (i + 1, i + 1)) for i in range(0, 1200)]
    m = grid_manifest(1200, boxes)
    doc = Elements(html_repr.chunk_map(m))
    assert "shading approximate" in doc.joined
    cells = doc.all("rect", "written")
    assert len(cells) == html_repr.MAX_CELLS  # the diagonal cells, each 24 of 576 written
    assert {a["fill-opacity"] for a in cells} == {f"{0.25 + 0.6 * round(24 / 576, 2):.2f}"}


def test_one_d_scalar_and_empty_arrays(tmp_path):
    a = arrayds.open_array(str(tmp_path / "a"), mode="w", shape=(1000,), dtype="i8", chunks=100)
    a[:450] = 1
    doc = Elements(a._repr_html_())
    assert len(doc.all("line")) == 11 + 2 and len(doc.all("rect", "written")) == 1
    assert "5/10 chunks written" in doc.joined
    s = arrayds.open_array(str(tmp_path / "s"), mode="w", shape=(), dtype="f4", chunks=())
    assert "a scalar" in s._repr_html_()
    e = arrayds.open_array(str(tmp_path / "e"), mode="w", shape=(0, 3), dtype="f4", chunks=2)
    assert "empty" in e._repr_html_()


def test_names_and_attributes_are_escaped(tmp_path):
    g = arrayds.open(str(tmp_path / "g"), mode="w")
    g.attrs[EVIL] = 1
    name = "x<img src=y onerror=alert(1)>"
    g.create_array(name, shape=(2, 2), dtype="i1", chunks=1, dims=[EVIL, "b"], attrs={EVIL: 2})
    for page in (g._repr_html_(), g[name]._repr_html_()):
        doc = Elements(page)
        assert not doc.all("script") and not doc.all("img")
        assert "alert(1)" in doc.joined  # shown as text
    assert not any(a.get("onerror") for _, a in Elements(g._repr_html_()).tags)


def test_group_tree(handles):
    doc = Elements(handles["group"]._repr_html_())
    summaries = " ".join(doc.text)
    assert len(doc.all("details")) == 1 + 6  # the root, 5 members and model/wind
    assert "arrayds.Group" in summaries and "model" in summaries
    assert "array (4, 5, 30, 40) (t, z, y, x) float64 · 8/24 chunks written" in summaries
    assert "records · 1000 records · 7 shards" in summaries
    assert "ragged · 199 items" in summaries
    assert len(doc.all("svg", "arrayds-chunks")) == 3  # each array's map, folded
    assert len(doc.all("svg", "arrayds-shards")) == 2


def test_group_tree_is_capped(tmp_path, monkeypatch):
    g = arrayds.open(str(tmp_path / "g"), mode="w")
    for i in range(7):
        g.create_group(f"g{i}")
    monkeypatch.setattr(html_repr, "MAX_TREE_NODES", 4)
    doc = Elements(g._repr_html_())
    assert len(doc.all("details")) == 1 + 4 and "3 more nodes not shown" in doc.joined


def test_unreadable_member_is_shown(tmp_path):
    g = arrayds.open(str(tmp_path / "g"), mode="w")
    g.create_array("ok", shape=(2,), dtype="i1", chunks=1)
    g.create_array("bad", shape=(2,), dtype="i1", chunks=1)
    (tmp_path / "g" / "bad" / "arrayds.json").write_text("{not json")
    doc = Elements(g._repr_html_())
    assert "unreadable: CorruptionError" in doc.joined and "ok" in doc.joined


def test_tree_of_a_version_shows_members_created_later(tmp_path):
    url = str(tmp_path / "g")
    g = arrayds.open(url, mode="w")
    g.create_array("early", shape=(2,), dtype="i1", chunks=1)
    g.attrs["a"] = 1  # version 2 of the root
    g.create_array("late", shape=(2,), dtype="i1", chunks=1)
    text = " ".join(Elements(arrayds.open(url, version=1)._repr_html_()).joined.split())
    assert "late (created later)" in text and "early array (2,) int8" in text
    assert "Opened at version 1" in text


def test_records_and_ragged_bars(handles, tmp_path):
    doc = Elements(handles["records"]._repr_html_())
    segs = doc.all("rect", "shard")
    assert len(segs) == 7
    assert sum(float(a["width"]) for a in segs) == pytest.approx(420, abs=0.1)
    assert "records per shard: min 142, median 143, max 143" in doc.joined
    doc = Elements(handles["ragged"]._repr_html_())
    assert "arrayds.RaggedArray" in doc.joined and "Items" in doc.joined
    assert len(doc.all("rect", "shard")) == handles["ragged"].nshards
    many = records.write_records(list(range(250)), str(tmp_path / "many"), num_shards=250)
    doc = Elements(many._repr_html_())
    assert len(doc.all("rect", "shard")) == 84  # segments of 3 shards
    assert "1 segment = 3 shards" in doc.joined


def test_versions_kept_and_a_pinned_version(tmp_path):
    url = str(tmp_path / "a")
    a = arrayds.open_array(url, mode="w", shape=(4,), dtype="i1", chunks=2)
    a[:2] = 1
    a[2:] = 2
    doc = Elements(a._repr_html_())
    assert "Versions kept 3" in " ".join(doc.joined.split())
    old = arrayds.open_array(url, version=2)
    text = " ".join(Elements(old._repr_html_()).joined.split())
    assert "Opened at version 2" in text and "1/2 chunks written" in text


def test_no_shard_is_read(tmp_path):
    """The reprs read manifests only: they work with every shard file gone."""
    h = make_dataset(str(tmp_path))
    before = {k: h[k]._repr_html_() for k in ("temperature", "records", "ragged", "group")}
    removed = 0
    for dirpath, _, files in os.walk(tmp_path / "ds"):
        for f in files:
            if f.endswith("array_record") or "array_record-" in f:
                os.remove(os.path.join(dirpath, f))
                removed += 1
    assert removed > 10
    for k, page in before.items():
        assert h[k]._repr_html_() == page


def test_bad_arguments():
    m = grid_manifest(4)
    with pytest.raises(ValueError, match="size must be > 0"):
        html_repr.chunk_map(m, size=0)
    with pytest.raises(ValueError, match="cells an int >= 1"):
        html_repr.chunk_map(m, cells=0)
    with pytest.raises(ValueError, match="non-negative"):
        html_repr.shard_bar([3, -1], "records")
    assert "no shards" in html_repr.shard_bar([], "records")
    st = arrayds.open("memory://repr-bad-args", mode="w").store
    with pytest.raises(TypeError, match="expected a parsed node manifest"):
        html_repr.node_html(st, "", {"kind": "array"})
    assert html_repr.kept_versions(st, "nothing") == 0


def test_ragged_bar_has_one_segment_per_shard(tmp_path):
    url = str(tmp_path / "r")
    ragged.write_ragged([np.zeros(n, "i2") for n in range(1, 50)], url, shard_size=64)
    ra = ragged.open_ragged(url)
    assert len(Elements(ra._repr_html_()).all("rect", "shard")) == ra.nshards > 1
