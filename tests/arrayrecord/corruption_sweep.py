"""Flip and truncate golden files; every damaged copy must fail cleanly or read right.

Run as a script (``python corruption_sweep.py FILE...``) by test_corruption.py, in a
subprocess, so that a crash of the engine fails the test instead of killing pytest.
Prints one JSON object: counts of outcomes per file and the list of bad outcomes.

For each file:
* flips: every byte of every block header and of every non-padding chunk up to 4 KiB
  (bigger chunks: the first and last 512 bytes and every 97th byte), the 40 header
  bytes of padding chunks and 16 bytes inside each padding chunk, each XORed with 0xFF and
  with a single bit. Outcome must be CorruptionError (at open or at read) or exactly
  the original records, through read_all, single reads and a batch read.
* truncations and extensions: must raise CorruptionError when the file is opened
  (except a copy of the last block appended, which is a well-formed file).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import arrayds  # noqa: E402
from arrayrecord import golden  # noqa: E402

BLOCK = 65536


def positions(entry: dict) -> list[int]:
    size = entry["file_size"]
    out: set[int] = set()
    for b in range(0, size, BLOCK):
        out.update(range(b, b + 24))
    for offset, kind, _data_size, _n, _dds, end in entry["structure"]["chunks"]:
        if kind == "padding":
            out.update(range(offset, offset + 40))
            step = max(1, (end - offset - 40) // 16)
            out.update(range(offset + 40, end, step))
        elif end - offset <= 4096:
            out.update(range(offset, end))
        else:  # a big chunk: its header, both ends and a stride through the data
            out.update(range(offset, offset + 512))
            out.update(range(end - 512, end))
            out.update(range(offset, end, 97))
    return sorted(p for p in out if p < size)


def outcome(path: str, expected: list[bytes]) -> str:
    try:
        r = arrayds.ArrayRecordReader(path)
    except arrayds.CorruptionError:
        return "open-error"
    try:
        n = len(r)
        if n != len(expected):
            return f"WRONG: {n} records instead of {len(expected)}"
        got = r.read_all()
        singles = [r[i] for i in range(n)]
        batch = r[list(range(n))[::-1]][::-1] if n else []
    except arrayds.CorruptionError:
        return "read-error"
    finally:
        r.close()
    if got == expected and singles == expected and batch == expected:
        return "same"
    return "WRONG: different records"


def sweep(name: str, workdir: str) -> tuple[dict[str, int], list[str]]:
    entry = golden.manifest()[name]
    expected = list(golden.records(name))
    original = golden.path(name).read_bytes()
    path = os.path.join(workdir, name)
    counts: dict[str, int] = {}
    bad: list[str] = []

    def record(res: str, label: str) -> None:
        kind = res.split(":")[0]
        counts[kind] = counts.get(kind, 0) + 1
        if res.startswith("WRONG"):
            bad.append(f"{name} {label}: {res}")

    def evaluate() -> str:
        try:
            return outcome(path, expected)
        except BaseException as e:  # any other exception is a failure too
            return f"WRONG: {type(e).__name__}: {e}"

    # Flips: one file, patched in place (re-creating files is slow on some /tmp).
    with open(path, "wb") as f:
        f.write(original)
    fd = os.open(path, os.O_RDWR)
    try:
        for pos in positions(entry):
            for mask in (0xFF, 1 << (pos % 8)):
                os.pwrite(fd, bytes([original[pos] ^ mask]), pos)
                record(evaluate(), f"byte {pos} ^ {mask:#x}")
                os.pwrite(fd, original[pos : pos + 1], pos)
    finally:
        os.close(fd)

    def must_not_open(data: bytes, label: str) -> None:
        with open(path, "wb") as f:
            f.write(data)
        res = evaluate()
        if res != "open-error":
            res = f"WRONG: opened ({res})"
        record(res, label)

    size = len(original)
    cuts = {0, 1, 24, 40, 63, 64, 65, 100, BLOCK - 1, BLOCK, BLOCK + 1, size - 1}
    cuts.update({size - BLOCK - 1, size - BLOCK + 1, size - BLOCK + 200})
    cuts.update(range(0, size, 4099))
    for cut in sorted(c for c in cuts if 0 <= c < size):
        must_not_open(original[:cut], f"cut to {cut}")
    for extra in (b"\0", b"\0" * BLOCK, b"\xff" * 100):
        must_not_open(original + extra, f"{len(extra)} bytes appended")
    # A copy of the last block appended is a well-formed file (its postscript points
    # at the same footer): it must read exactly, or fail cleanly.
    with open(path, "wb") as f:
        f.write(original + original[-BLOCK:])
    record(evaluate(), "last block appended twice")
    return counts, bad


def main(names: list[str]) -> int:
    report: dict[str, object] = {}
    all_bad: list[str] = []
    with tempfile.TemporaryDirectory() as workdir:
        for name in names:
            counts, bad = sweep(name, workdir)
            report[name] = counts
            all_bad.extend(bad)
    report["bad"] = all_bad[:50]
    report["num_bad"] = len(all_bad)
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
