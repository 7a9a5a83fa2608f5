"""Memory-mapped local files: the same records as pread, the fallback to pread, and
files truncated while a reader holds them open (in a subprocess: a crash there must
not take pytest down)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import arrayds
from arrayds import _native

HERE = Path(__file__).resolve().parent
OPTIONS = ["group_size:1", "group_size:1,uncompressed", "group_size:10,zstd:1", "group_size:1000"]


def make_records(n: int = 3000) -> list[bytes]:
    rng = np.random.default_rng(11)
    return [rng.integers(0, 9, size=(i * 53) % 3000, dtype=np.uint8).tobytes() for i in range(n)]


RECORDS = make_records()


@pytest.fixture(scope="module", params=OPTIONS)
def path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    p = tmp_path_factory.mktemp("mmap") / "f.ar"
    w = _native.Writer(str(p), request.param)
    w.write_many(RECORDS)
    w.close()
    return str(p)


def test_mapped_by_default_and_switch_off(path: str) -> None:
    assert _native.Reader(path).is_mapped()
    assert not _native.Reader(path, mmap=False).is_mapped()
    assert not _native.Reader.from_bytes(open(path, "rb").read()).is_mapped()


def test_every_read_path_agrees_with_pread(path: str) -> None:
    mapped, plain = _native.Reader(path), _native.Reader(path, mmap=False)
    n = len(RECORDS)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, n, size=500)
    for r in (mapped, plain):
        assert r.read_range(0, n) == RECORDS
        assert [r.read(int(i)) for i in idx[:100]] == [RECORDS[i] for i in idx[:100]]
        assert r.read_batch(idx) == [RECORDS[i] for i in idx]
        picks = [int(i) for i in idx[:50]]
        outs = [np.empty(len(RECORDS[i]), dtype=np.uint8) for i in picks]
        r.read_into(picks, outs)
        assert [o.tobytes() for o in outs] == [RECORDS[i] for i in picks]
    assert mapped.is_mapped() and not plain.is_mapped()


def test_results_do_not_point_into_the_mapping(path: str) -> None:
    r = _native.Reader(path)  # close() unmaps the file; the records must stay valid
    batch = list(range(0, len(RECORDS), 3))
    got = r.read_batch(batch)
    r.close()
    with pytest.raises(ValueError, match="is closed"):
        r.read(0)
    assert got == [RECORDS[i] for i in batch]


def test_environment_variable_turns_it_off(path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert arrayds.ArrayRecordReader(path)._native.is_mapped()
    monkeypatch.setenv("ARRAYDS_MMAP", "0")
    r = arrayds.ArrayRecordReader(path)
    assert not r._native.is_mapped()
    assert r.read([5, 1]) == [RECORDS[5], RECORDS[1]]


def test_special_file_is_not_mapped() -> None:
    # a character device: not a regular file, so pread (which finds 0 bytes)
    with pytest.raises(_native.CorruptionError, match="it has 0 bytes"):
        _native.Reader("/dev/zero")


def test_falls_back_to_pread_when_mmap_fails(tmp_path: Path) -> None:
    """A 64 MB file under an address-space limit that leaves no room to map it."""
    p = tmp_path / "big.ar"
    w = _native.Writer(str(p), "group_size:1,uncompressed")
    rng = np.random.default_rng(1)
    w.write_many(rng.bytes(1 << 20) for _ in range(64))
    w.close()
    script = textwrap.dedent(
        f"""
        import resource
        from arrayds import _native
        small = _native.Reader({str(p)!r}, mmap=False)
        small.read_batch([0, 1, 2])  # starts the thread pool before the limit
        vm = 0
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                vm = int(line.split()[1]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (24 << 20), vm + (24 << 20)))
        r = _native.Reader({str(p)!r})
        assert not r.is_mapped()
        assert r.read(63) == small.read(63)
        print("fallback ok")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip() == "fallback ok"


def test_truncated_while_open_is_an_error_not_a_crash(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "mmap_truncate.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"crashed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    report = json.loads(proc.stdout)
    for options in ("group_size:1", "group_size:1,uncompressed", "group_size:100,zstd:1"):
        mapped = report[f"{options} mmap=True"]
        # the lost part was read through the mapping: a fault was repaired, not fatal
        assert mapped["repaired_faults"] >= 1, mapped
        assert mapped["errors"] == ["CorruptionError"] * 4, mapped
        assert mapped["mapped_after"] is False  # pread from then on
        plain = report[f"{options} mmap=False"]
        assert plain["errors"] == ["CorruptionError"] * 4 and plain["repaired_faults"] == 0
    assert set(report["concurrent"]) <= {"ok", "CorruptionError"}
    assert report["concurrent"].get("CorruptionError", 0) > 0
    assert report["handler_replaced"] == {"error": "CorruptionError", "other_reader_ok": True}


def run_sigbus_chain(tmp_path: Path, scenario: str, order: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(HERE / "sigbus_chain.py"), str(tmp_path), scenario, order],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("order", ["before", "after"])
def test_threads_fault_at_once(tmp_path: Path, order: str) -> None:
    """Eight threads fault in eight truncated mappings at the same moment, faulthandler
    enabled before or after the engine's handler (which is re-installed meanwhile)."""
    proc = run_sigbus_chain(tmp_path, "threads", order)
    assert proc.returncode == 0, f"crashed ({proc.returncode}):\n{proc.stderr[-3000:]}"
    report = json.loads(proc.stdout)
    assert report["errors"] == ["CorruptionError"] * 8
    assert report["repaired_faults"] >= 8
    assert report["intact"] is True


@pytest.mark.parametrize("scenario", ["foreign", "raise"])
@pytest.mark.parametrize("order", ["before", "after"])
def test_foreign_sigbus_reaches_faulthandler_once(tmp_path: Path, scenario: str, order: str):
    """A SIGBUS the engine does not own goes to faulthandler and ends the process; with
    faulthandler and the engine chained to each other ("after") it does not go round."""
    proc = run_sigbus_chain(tmp_path, scenario, order)
    if "libasan" in os.environ.get("LD_PRELOAD", "") and order == "before":
        # `make sanitize`: AddressSanitizer's SIGBUS handler, installed at start-up, is
        # what faulthandler chains to, so ASan reports the signal and aborts
        assert proc.returncode == -signal.SIGABRT, (proc.returncode, proc.stderr[-2000:])
        assert "AddressSanitizer: BUS" in proc.stderr
    else:
        assert proc.returncode == -signal.SIGBUS, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip() in ("faulting", "raising")
    assert proc.stderr.count("Fatal Python error: Bus error") == 1, proc.stderr[-2000:]
