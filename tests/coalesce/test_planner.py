"""The range planner (arrayds/storage/coalesce.py): merging, splitting, options, checks."""

from __future__ import annotations

import pytest

from arrayds import CorruptionError
from arrayds.storage.coalesce import Coalesce, coalesce_options, fetch_spans, plan_ranges


def test_adjacent_and_overlapping_ranges_merge():
    o = Coalesce(gap=0, max_size=1 << 20)
    assert plan_ranges([(0, 10), (10, 20)], o) == [(0, 20)]
    assert plan_ranges([(5, 15), (0, 10), (12, 14)], o) == [(0, 15)]
    assert plan_ranges([(0, 10), (11, 20)], o) == [(0, 10), (11, 20)]  # gap 0: 1 byte apart


def test_gap_joins_nearby_ranges_only():
    o = Coalesce(gap=100, max_size=1 << 20)
    assert plan_ranges([(0, 10), (110, 120), (221, 230)], o) == [(0, 120), (221, 230)]
    assert plan_ranges([], o) == []


def test_max_size_splits_and_keeps_long_ranges_whole():
    o = Coalesce(gap=1000, max_size=100)
    assert plan_ranges([(0, 40), (40, 80), (80, 120), (120, 160)], o) == [(0, 80), (80, 160)]
    assert plan_ranges([(0, 500), (500, 510)], o) == [(0, 500), (500, 510)]
    assert plan_ranges([(0, 500), (10, 20)], o) == [(0, 500)]  # inside a long one


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"gap": -1}, "gap"),
        ({"max_size": 0}, "max_size"),
        ({"max_size": "x"}, "max_size"),
        ({"gap": 1.5}, "gap"),
        ({"gap": True}, "gap"),
    ],
)
def test_bad_options_name_the_setting(kw, name):
    with pytest.raises(ValueError, match=f"coalescing {name}"):
        Coalesce(**kw)


def test_environment_variables(monkeypatch):
    monkeypatch.setenv("ARRAYDS_COALESCE_GAP", "64K")
    monkeypatch.setenv("ARRAYDS_COALESCE_MAX", "2M")
    assert coalesce_options() == Coalesce(gap=65536, max_size=2 << 20)
    assert coalesce_options({"gap": 0}) == Coalesce(gap=0)  # per call wins
    monkeypatch.setenv("ARRAYDS_COALESCE_MAX", "0")
    with pytest.raises(ValueError, match="ARRAYDS_COALESCE_MAX"):
        coalesce_options()
    monkeypatch.setenv("ARRAYDS_COALESCE_MAX", "1M")
    monkeypatch.setenv("ARRAYDS_COALESCE_GAP", "-5")
    with pytest.raises(ValueError, match="ARRAYDS_COALESCE_GAP"):
        coalesce_options()
    with pytest.raises(TypeError, match="coalesce must be"):
        coalesce_options(5)  # type: ignore[arg-type]


def test_fetch_slices_spans_out_of_merged_requests():
    data = bytes(range(256))
    asked = []

    def get(ranges):
        asked.append(list(ranges))
        return [data[b:e] for b, e in ranges]

    spans = [(0, 4), (8, 12), (200, 210)]
    got = fetch_spans(spans, get, "f", Coalesce(gap=16, max_size=64))
    assert asked == [[(0, 12), (200, 210)]]
    assert [(b, bytes(v)) for b, v in got] == [(b, data[b:e]) for b, e in spans]


@pytest.mark.parametrize("delta", [-1, 1])
def test_wrong_length_response_is_corruption_naming_file_and_range(delta):
    def get(ranges):
        return [b"\0" * (e - b + delta) for b, e in ranges]

    with pytest.raises(CorruptionError, match=r"shard-x: asked for bytes \[10, 20\)"):
        fetch_spans([(10, 20)], get, "shard-x", Coalesce())


def test_long_ranges_are_fetched_in_pieces_and_joined():
    data = bytes(range(256)) * 4
    asked = []

    def get(ranges):
        asked.append(list(ranges))
        return [data[b:e] for b, e in ranges]

    spans = [(0, 250), (250, 260), (600, 1000)]
    got = fetch_spans(spans, get, "f", Coalesce(gap=0, max_size=100))
    assert asked == [
        [(0, 100), (100, 200), (200, 250), (250, 260)]
        + [(600, 700), (700, 800), (800, 900), (900, 1000)]
    ]
    assert [(b, bytes(v)) for b, v in got] == [(b, data[b:e]) for b, e in spans]


def test_errors_of_the_store_propagate():
    with pytest.raises(PermissionError):
        fetch_spans([(0, 1)], lambda rs: [PermissionError("no")], "f", Coalesce())
