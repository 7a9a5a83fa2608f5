"""benchmarks/bench_commit_path.py runs end to end at its quick size, and leaves the
background sync of the append path as it found it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from arrayds.storage import local

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_commit_path.py"


def test_bench_commit_path_quick(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_commit_path", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_commit_path"] = module
    try:
        spec.loader.exec_module(module)
        shipped = local._link_in_background
        assert module.main(["--quick", "--workdir", str(tmp_path)]) == 0
        assert local._link_in_background is shipped
    finally:
        del sys.modules["bench_commit_path"]
    out = capsys.readouterr().out
    for row in ("| background sync |", "| sync, then rename |", "| array shard entry |"):
        assert row in out
    assert list(tmp_path.iterdir()) == []  # its work folder is removed
