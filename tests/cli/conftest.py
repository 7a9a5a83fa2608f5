"""Fixtures for the command-line tests: a small dataset with every node kind."""

from __future__ import annotations

import os
import shutil
import sys

import dask.array as da
import numpy as np
import pytest
from click.testing import CliRunner

import arrayds
from arrayds.cli import cli


def arrayds_executable() -> str:
    """The installed ``arrayds`` console script (next to this Python first)."""
    here = os.path.join(os.path.dirname(sys.executable), "arrayds")
    if os.path.exists(here):
        return here
    found = shutil.which("arrayds")
    if found is None:  # pragma: no cover - the package is installed for the tests
        pytest.fail("the arrayds console script is not installed (pip install -e .)")
    return found


@pytest.fixture
def run():
    """Invoke the CLI in-process: ``run("info", url) -> click Result``."""
    runner = CliRunner()

    def invoke(*args: str, env: dict | None = None):
        return runner.invoke(cli, [str(a) for a in args], env=env, catch_exceptions=False)

    return invoke


@pytest.fixture
def dataset(tmp_path):
    """A dataset with a group (attrs), two arrays, a records set and a ragged array.

    Returns (url, expected data dict)."""
    url = str(tmp_path / "ds")
    g = arrayds.open(url, mode="w")
    g.attrs["title"] = "cli test"
    temp = np.arange(60 * 8, dtype="f4").reshape(60, 8)
    arrayds.to_arrayrecord(
        da.from_array(temp, chunks=(10, 4)),
        url,
        "climate/temp",
        dims=("time", "x"),
        compression="uncompressed",
        shard_size=1,
    )
    counts = np.arange(100, dtype="i8")
    arrayds.to_arrayrecord(da.from_array(counts, chunks=25), url, "climate/counts")
    recs = [{"id": i, "name": f"item-{i}", "v": np.full(2, i, dtype="i2")} for i in range(40)]
    arrayds.to_arrayrecord(recs, url, "train", num_shards=3)
    clips = [np.arange(n, dtype="f4") for n in (5, 300, 17, 0)]
    arrayds.to_arrayrecord(clips, url, "audio")
    return url, {"temp": temp, "counts": counts, "recs": recs, "clips": clips}
