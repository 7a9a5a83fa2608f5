"""The runnable examples in the docstrings of the records modules."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module", ["arrayds.serializers", "arrayds.tfrecord", "arrayds.records", "arrayds.convert"]
)
def test_docstring_examples(module):
    mod = importlib.import_module(module)
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.attempted > 5
    assert result.failed == 0
