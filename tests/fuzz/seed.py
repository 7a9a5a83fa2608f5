"""Writes the seeds of tests/fuzz/corpus: the golden files of tests/data/arrayrecord
(all but the four largest, to keep the corpus small) and the forged files of
tests/engine/forge.py, as fuzz inputs (harness.compact). Inputs the fuzzer found are
added beside them by hand: ``crash-*`` (findings, fixed) and ``found-*`` (inputs that
reach new code), see docs/development.md.

    .venv/bin/python tests/fuzz/seed.py
"""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))

from engine.forge import FORGERIES  # noqa: E402

from fuzz.harness import compact  # noqa: E402

LARGE = {
    "big_record_uncompressed",
    "big_record_zstd",
    "many_varied_gs1",
    "many_varied_gs128_uncompressed",
}


def main() -> None:
    corpus = TESTS / "fuzz" / "corpus"
    corpus.mkdir(exist_ok=True)
    for p in sorted((TESTS / "data" / "arrayrecord").glob("*.array_record")):
        if p.stem not in LARGE:
            (corpus / f"golden-{p.stem}").write_bytes(compact(p.read_bytes()))
    for name, (data, _) in sorted(FORGERIES.items()):
        (corpus / f"forged-{name}").write_bytes(compact(data))


if __name__ == "__main__":
    main()
