"""The docstring examples of the dataset layer run and are right."""

from __future__ import annotations

import doctest
import importlib

import pytest

import arrayds

MODULES = [
    "arrayds.grid",
    "arrayds.tensor",
    "arrayds.store",
    "arrayds.manifest",
    "arrayds.array",
    "arrayds.dataset",
    "arrayds.api",
    "arrayds.dask.array",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0


def test_public_names_have_examples():
    for name in ["open", "open_array", "open_group", "to_arrayrecord", "from_arrayrecord"]:
        doc = getattr(arrayds, name).__doc__
        assert doc and ">>>" in doc, name
    for cls, attrs in [
        (arrayds.Array, ["append"]),
        (arrayds.Group, ["create_array"]),
    ]:
        assert ">>>" in cls.__doc__
        for attr in attrs:
            assert ">>>" in getattr(cls, attr).__doc__, f"{cls.__name__}.{attr}"
