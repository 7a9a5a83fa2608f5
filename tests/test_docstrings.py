"""Every docstring example in the package runs and is right, and every public
module and name carries one (the docs promise runnable examples)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import arrayds

MODULES = sorted(
    m.name
    for m in pkgutil.walk_packages(arrayds.__path__, prefix="arrayds.")
    if not m.name.startswith("arrayds._")
)


def test_the_package_is_walked():
    assert {
        "arrayds.files.arrayrecord",
        "arrayds.kinds.array.handle",
        "arrayds.records",
        "arrayds.cli",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(
        module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False
    )
    assert result.attempted > 0, f"{name} has no docstring examples"
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed"


# exceptions are documented where they are raised
PUBLIC = [
    n
    for n in arrayds.__all__
    if not (
        isinstance(getattr(arrayds, n), type) and issubclass(getattr(arrayds, n), BaseException)
    )
]


@pytest.mark.parametrize("name", PUBLIC)
def test_public_names_have_examples(name):
    obj = getattr(arrayds, name)
    assert obj.__doc__ and ">>>" in obj.__doc__, f"arrayds.{name} has no example"
