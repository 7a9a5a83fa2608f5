"""Replays every input of tests/fuzz/corpus (the seeds and every crash the fuzzer ever
found, `make fuzz`) through open + every read path of the normal build: each file
reads, or raises CorruptionError (harness.run says exactly what is allowed)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

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
    start = time.monotonic()
    run(_native, path.read_bytes(), str(tmp_path / "input.array_record"))
    assert time.monotonic() - start < 5.0


def test_golden_seeds_read(tmp_path: Path) -> None:
    """The seeds are the real files: a golden seed opens and reads."""
    file = expand((CORPUS / "golden-gs1_uncompressed").read_bytes())
    r = _native.Reader.from_bytes(file, "gs1")
    assert r.read(0) == b"record-0"
    assert compact(file) == (CORPUS / "golden-gs1_uncompressed").read_bytes()
