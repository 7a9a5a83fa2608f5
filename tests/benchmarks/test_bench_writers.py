"""benchmarks/bench_writers.py runs end to end at its quick size: a table row per kind
with no row lost or duplicated, and ``--faults`` refused until the proxy exists."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_writers.py"


def test_bench_writers_quick(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("bench_writers", PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_writers"] = module
    try:
        spec.loader.exec_module(module)
        assert module.main(["--quick", "--workdir", str(tmp_path)]) == 0
        with pytest.raises(SystemExit):
            module.main(["--faults"])
    finally:
        del sys.modules["bench_writers"]
    out = capsys.readouterr().out
    for kind in ("array", "records"):
        assert f"| local | {kind} | 4 x 3 |" in out
    assert out.count("| 0 / 0 |") == 2
    assert list(tmp_path.iterdir()) == []  # its work folder is removed
