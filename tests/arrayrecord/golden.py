"""The golden ArrayRecord files of tests/data/arrayrecord: their manifest and records.

Records are regenerated from the formulas in tests/data/arrayrecord/README.md. The
data is required: a missing file or manifest fails loudly (``GoldenDataMissing``),
it never skips a test.
"""

from __future__ import annotations

import hashlib
import json
import struct
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "arrayrecord"
MANIFEST = DATA_DIR / "MANIFEST.json"


class GoldenDataMissing(RuntimeError):
    """The golden test data is not where the tests expect it."""


def text(i: int) -> bytes:
    return (f"record-{i}" * ((i % 7) + 1)).encode("ascii")


def varied(i: int) -> bytes:
    return bytes((i * 31 + k * 7) % 256 for k in range((i * 97) % 1500))


def pcg64(seed: int, n: int) -> bytes:
    words = np.random.PCG64(seed).random_raw((n + 7) // 8)
    return np.asarray(words, dtype="<u8").tobytes()[:n]


def expand(runs: list[dict[str, Any]]) -> list[bytes]:
    """The records a manifest entry's ``records`` runs stand for."""
    out: list[bytes] = []
    for run in runs:
        formula = run["formula"]
        if formula == "text":
            out.extend(text(i) for i in range(*run["range"]))
        elif formula == "varied":
            out.extend(varied(i) for i in range(*run["range"]))
        elif formula == "empty":
            out.extend(b"" for _ in range(run["count"]))
        elif formula == "pcg64":
            out.append(pcg64(run["seed"], run["n"]))
        else:
            raise ValueError(f"unknown record formula {formula!r} in {MANIFEST}")
    return out


def length_prefixed_sha256(records: list[bytes]) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(struct.pack("<Q", len(r)))
        h.update(r)
    return h.hexdigest()


@cache
def manifest() -> dict[str, dict[str, Any]]:
    """file name -> manifest entry; raises GoldenDataMissing if anything is missing."""
    if not MANIFEST.is_file():
        raise GoldenDataMissing(
            f"{MANIFEST} is missing: copy shared/testdata/arrayrecord/ to {DATA_DIR}"
        )
    entries = {e["file"]: e for e in json.loads(MANIFEST.read_text())["files"]}
    missing = [name for name in entries if not (DATA_DIR / name).is_file()]
    if missing:
        raise GoldenDataMissing(f"golden files missing from {DATA_DIR}: {missing}")
    return entries


def path(name: str) -> Path:
    manifest()
    return DATA_DIR / name


@cache
def records(name: str) -> tuple[bytes, ...]:
    """The records of a golden file, regenerated and checked against the manifest."""
    entry = manifest()[name]
    recs = expand(entry["records"])
    if length_prefixed_sha256(recs) != entry["length_prefixed_sha256"]:
        raise AssertionError(f"regenerated records of {name} do not match MANIFEST.json")
    return tuple(recs)


def names() -> list[str]:
    """Every golden file name (read at import by parametrized tests)."""
    return sorted(manifest())
