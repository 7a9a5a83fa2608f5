"""Fixtures for the whole suite: xarray's own test fixtures (``use_dask``,
``handle_numpy_1_warnings``, ...), which the inherited backend conformance suite in
tests/xarray/test_conformance.py needs, and ``task_results`` (dask task results by
key, for tests that look at what a commit task received)."""

import importlib.util

import pytest

pytest_plugins = ["xarray.tests.conftest"] if importlib.util.find_spec("xarray") is not None else []


@pytest.fixture
def task_results():
    """A dask callback that keeps every task's result by key (``seen.got``) while it
    is active: ``with task_results() as seen: ...compute()``."""
    from dask.callbacks import Callback

    class Results(Callback):
        def __init__(self) -> None:
            super().__init__()
            self.got: dict = {}

        def _posttask(self, key, result, dsk, state, id):  # noqa: A002 - dask's names
            self.got[key] = result

    return Results
