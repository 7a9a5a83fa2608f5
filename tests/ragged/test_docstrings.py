"""The runnable examples in the docstrings of the ragged and xarray modules."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "arrayds.ragged",
    "arrayds.xarray",
    "arrayds.xarray.attrs",
    "arrayds.xarray.state",
    "arrayds.xarray.backend",
    "arrayds.xarray.writer",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring examples"
    assert result.failed == 0
