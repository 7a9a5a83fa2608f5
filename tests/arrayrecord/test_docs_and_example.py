"""The docstring examples run, and examples/quickstart.py runs end to end."""

from __future__ import annotations

import doctest
import os
import subprocess
import sys
from pathlib import Path

import pytest

import arrayds
import arrayds.files.data_source
import arrayds.files.options
import arrayds.files.reader
import arrayds.files.writer

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "module",
    [
        arrayds,
        arrayds.files.reader,
        arrayds.files.writer,
        arrayds.files.data_source,
        arrayds.files.options,
    ],
)
def test_docstring_examples(module) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0, f"{module.__name__} has no examples"
    assert result.failed == 0


def test_every_public_name_has_an_example() -> None:
    for name in ["ArrayRecordWriter", "ArrayRecordReader", "ArrayRecordDataSource", "codecs"]:
        doc = getattr(arrayds, name).__doc__
        assert doc and ">>>" in doc, name


def test_quickstart_runs(tmp_path) -> None:
    env = dict(os.environ, ARRAYDS_QUICKSTART_DIR=str(tmp_path))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "wrote 1000 records" in out
    assert "record 42:" in out
    assert "batch of 4" in out
    assert "data source: 2 files, 1500 records" in out
    # the arrays part: dask array written by a LocalCluster, read back
    assert "wrote 64 chunks in 4 shards with 2 worker processes" in out
    assert "from_arrayrecord: 64 blocks, chunks equal to the stored grid: True" in out
    assert "Chunks initialized : 64/64" in out
