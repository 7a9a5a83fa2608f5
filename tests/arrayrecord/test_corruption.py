"""Byte-flip and truncation sweep over small golden files, in a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FILES = [
    "gs1_uncompressed.array_record",
    "gs1_zstd3.array_record",
    "gs1_brotli6.array_record",
    "gs1_snappy.array_record",
    "gs2_zstd.array_record",
    "gs1000_few_uncompressed.array_record",
    "gs1000_few_zstd.array_record",
    "empty.array_record",
    "zero_length_record.array_record",
    "many_empty_gs1000_zstd.array_record",
    "chunk_ends_at_block.array_record",
    "pad_to_block_boundary.array_record",
    # chunks that run across block boundaries (block headers inside chunks)
    "big_record_zstd.array_record",
    "big_record_uncompressed.array_record",
    "chunk_header_straddles_block.array_record",
    "many_varied_gs128_uncompressed.array_record",
]
SCRIPT = Path(__file__).resolve().parent / "corruption_sweep.py"


GROUPS = [FILES[k : k + 4] for k in range(0, len(FILES), 4)]


@pytest.mark.parametrize("names", GROUPS, ids=lambda names: names[0].split(".")[0] + "...")
def test_flips_and_truncations(names: list[str]) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *names],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"sweep crashed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    report = json.loads(proc.stdout)
    assert report["num_bad"] == 0, report["bad"]
    for name in names:
        counts = report[name]
        # The sweep really exercised the reader: most flips are caught.
        caught = counts.get("open-error", 0) + counts.get("read-error", 0)
        assert caught > 100, (name, counts)
