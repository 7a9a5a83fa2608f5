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


def test_max_ratio_stops_a_chain_of_sparse_ranges():
    spans = [(k * 1000, k * 1000 + 10) for k in range(10)]  # 10 bytes wanted every 1000
    assert plan_ranges(spans, Coalesce(gap=1000)) == [(0, 9010)]  # no cap: one request
    capped = plan_ranges(spans, Coalesce(gap=1000, max_ratio=80))
    assert capped == [(0, 3010), (4000, 7010), (8000, 9010)]
    for b, e in capped:  # each request at most 80 times its wanted bytes
        assert e - b <= 80 * 10 * sum(b <= s < e for s, _ in spans)
    dense = [(k * 100, k * 100 + 90) for k in range(50)]  # a region: 10 % gaps
    assert plan_ranges(dense, Coalesce(gap=1000, max_ratio=2)) == [(0, 4990)]
    assert plan_ranges(spans[:2], Coalesce(gap=1000, max_ratio=1)) == spans[:2]


@pytest.mark.parametrize("bad", [0.5, 0, -3, "x", True, float("nan"), None])
def test_bad_max_ratio_names_the_setting(bad):
    with pytest.raises(ValueError, match="coalescing max_ratio must be a number >= 1"):
        Coalesce(max_ratio=bad)


def test_max_ratio_from_the_environment(monkeypatch):
    assert coalesce_options().max_ratio == float("inf")  # the default: no cap
    monkeypatch.setenv("ARRAYDS_COALESCE_RATIO", "8")
    assert coalesce_options().max_ratio == 8.0
    monkeypatch.setenv("ARRAYDS_COALESCE_RATIO", "0.9")
    with pytest.raises(ValueError, match="ARRAYDS_COALESCE_RATIO must be a number >= 1"):
        coalesce_options()
