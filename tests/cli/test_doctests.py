"""The docstring examples of the CLI, verification, conversion and progress modules."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "name", ["arrayds.cli", "arrayds.verify", "arrayds.ingest", "arrayds.progress"]
)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 0
    assert result.failed == 0
