"""Fixtures for the whole suite: xarray's own test fixtures (``use_dask``,
``handle_numpy_1_warnings``, ...), which the inherited backend conformance suite in
tests/xarray/test_conformance.py needs."""

import importlib.util

pytest_plugins = ["xarray.tests.conftest"] if importlib.util.find_spec("xarray") is not None else []
