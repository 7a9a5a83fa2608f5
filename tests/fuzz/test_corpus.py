"""Replays every input of tests/fuzz/corpus (the seeds and every crash the fuzzer ever
found, `make fuzz`) through open + every read path of the normal build: each file
reads, or raises CorruptionError (harness.run says exactly what is allowed)."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine.work import bounded

from arrayds import _native

from .harness import compact, expand, run

CORPUS = Path(__file__).resolve().parent / "corpus"
INPUTS = sorted(CORPUS.iterdir())


def test_corpus_is_seeded() -> None:
    names = {p.name for p in INPUTS}
    assert "golden-gs1_uncompressed" in names and "forged-record_2e40_zstd" in names
    assert sum(p.stat().st_size for p in INPUTS) < 400_000


@pytest.mark.parametrize("path", INPUTS, ids=[p.name for p in INPUTS])
def test_replay(path: Path, tmp_path: Path) -> None:
    data = path.read_bytes()
    with bounded(path.name, cpu_seconds=2.5):  # the slowest input takes about 40 ms
        run(_native, data, str(tmp_path / "input.array_record"))


def test_golden_seeds_read(tmp_path: Path) -> None:
    """The seeds are the real files: a golden seed opens and reads."""
    file = expand((CORPUS / "golden-gs1_uncompressed").read_bytes())
    r = _native.Reader.from_bytes(file, "gs1")
    assert r.read(0) == b"record-0"
    assert compact(file) == (CORPUS / "golden-gs1_uncompressed").read_bytes()
