"""Shared helpers for the engine tests: the golden files and their records.

The records are regenerated from the formulas in tests/data/arrayrecord/README.md.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

GOLDEN_DIR = Path(__file__).resolve().parent.parent / "data" / "arrayrecord"
MANIFEST: dict[str, Any] = json.loads((GOLDEN_DIR / "MANIFEST.json").read_text())
FILES: list[dict[str, Any]] = MANIFEST["files"]
READABLE = [f for f in FILES if not f["file"].startswith("transposed")]
UNCOMPRESSED = [f for f in READABLE if f["writer_options_string"].find(",uncompressed,") >= 0]

BLOCK = 65536


def text(i: int) -> bytes:
    return (f"record-{i}" * ((i % 7) + 1)).encode()


def varied(i: int) -> bytes:
    return bytes((i * 31 + k * 7) % 256 for k in range((i * 97) % 1500))


def pcg64(seed: int, n: int) -> bytes:
    words = np.random.PCG64(seed).random_raw((n + 7) // 8)
    return words.astype("<u8").tobytes()[:n]


def expand(runs: list[dict[str, Any]]) -> list[bytes]:
    """The records described by a MANIFEST `records` list."""
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
            raise AssertionError(f"unknown formula {formula!r}")
    return out


def length_prefixed_sha256(records: list[bytes]) -> str:
    h = hashlib.sha256()
    for r in records:
        h.update(struct.pack("<Q", len(r)))
        h.update(r)
    return h.hexdigest()


def golden_path(entry: dict[str, Any]) -> str:
    return str(GOLDEN_DIR / entry["file"])


def ids(entries: list[dict[str, Any]]) -> list[str]:
    return [e["file"].removesuffix(".array_record") for e in entries]


@pytest.fixture(scope="session")
def golden_records() -> dict[str, list[bytes]]:
    return {f["file"]: expand(f["records"]) for f in FILES}
