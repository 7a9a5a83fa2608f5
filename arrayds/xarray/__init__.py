"""Xarray integration (docs/xarray.md).

* ``xr.open_dataset(url, engine="arrayds")`` — the backend in
  :mod:`arrayds.xarray.backend`, registered under the ``xarray.backends`` entry
  point group (pyproject.toml).
* ``arrayds.to_arrayrecord(ds, url, ...)`` — :func:`arrayds.xarray.writer.write_dataset`,
  registered with the ``to_arrayrecord`` dispatcher here.
* ``arrayds.to_arrayrecord(dt, url, ...)`` for an ``xarray.DataTree`` —
  :func:`arrayds.xarray.tree.write_datatree` (the whole tree in one commit).
* ``ds.arrayds.to_arrayrecord(url, ...)``, ``da.arrayds.to_arrayrecord(url, ...)`` and
  ``dt.arrayds.to_arrayrecord(url, ...)`` — accessors, registered as soon as both
  arrayds and xarray are imported (in either order) without importing xarray on
  ``import arrayds``.

This module itself does not import xarray.

>>> import numpy as np, xarray as xr, arrayds
>>> ds = xr.Dataset({"v": ("x", np.arange(3))})
>>> _ = ds.arrayds.to_arrayrecord("memory://doc-accessor")
>>> xr.open_dataset("memory://doc-accessor", engine="arrayds").v.values.tolist()
[0, 1, 2]
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import threading
from collections.abc import Hashable, Mapping
from typing import Any

from ..nodes import registry as kinds
from ..storage.base import BaseStore as Store

__all__ = ["ArrayDSAccessor", "open_dataset", "register_accessors"]


def _is_xarray(obj: Any) -> bool:
    xr = sys.modules.get("xarray")
    if xr is None:
        return False
    tree = getattr(xr, "DataTree", ())
    return isinstance(obj, (xr.Dataset, xr.DataArray, tree))


def _write(
    data: Any, store: Store, node: str, *, unlimited_dims: Any = None, **options: Any
) -> Any:
    """``unlimited_dims=`` (netCDF's; xarray's zarr store takes it and ignores it) is
    accepted and ignored likewise: every dimension of a stored array can grow by
    appending along it. It must be ``None``, a dimension name or a list of names."""
    import xarray as xr

    if not (
        unlimited_dims is None
        or isinstance(unlimited_dims, str)
        or (
            isinstance(unlimited_dims, (list, tuple, set, frozenset))
            and all(isinstance(d, Hashable) for d in unlimited_dims)
        )
    ):
        raise ValueError(
            f"unlimited_dims must be None, a dimension name or a list of names, "
            f"not {unlimited_dims!r}"
        )

    if isinstance(data, getattr(xr, "DataTree", ())):
        from .tree import write_datatree

        return write_datatree(data, store, node, **options)
    from .writer import write_dataset

    return write_dataset(data, store, node, **options)


kinds.register_writer(kinds.Writer("xarray", _is_xarray, _write, "group"))


def open_dataset(url: str, component: str | None = None, **kwargs: Any) -> Any:
    """``xr.open_dataset(url, engine="arrayds", group=component, **kwargs)``."""
    import xarray as xr

    return xr.open_dataset(url, engine="arrayds", group=component, **kwargs)


class ArrayDSAccessor:
    """``ds.arrayds`` / ``da.arrayds`` / ``dt.arrayds``: arrayds methods on xarray objects."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def to_arrayrecord(
        self,
        url: str,
        component: str | None = None,
        *,
        mode: str | None = None,
        append_dim: Hashable | None = None,
        region: Mapping[Hashable, slice] | None = None,
        **kwargs: Any,
    ) -> Any:
        """``arrayds.to_arrayrecord(obj, url, component, ...)``. The default ``mode``
        is ``"r+"`` with ``region=``, ``"a"`` with ``append_dim=``, else ``"w-"``."""
        from ..api import to_arrayrecord

        if mode is None:
            mode = "r+" if region is not None else "a" if append_dim is not None else "w-"
        if append_dim is not None:
            kwargs["append_dim"] = append_dim
        return to_arrayrecord(self._obj, url, component, mode=mode, region=region, **kwargs)


_registered = False
_lock = threading.Lock()


def register_accessors() -> None:
    """Register ``.arrayds`` on ``xarray.Dataset``, ``DataArray`` and ``DataTree`` (once)."""
    global _registered
    with _lock:
        if _registered:
            return
        import warnings

        import xarray as xr

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # re-registration after reload
            xr.register_dataset_accessor("arrayds")(ArrayDSAccessor)
            xr.register_dataarray_accessor("arrayds")(ArrayDSAccessor)
            if hasattr(xr, "register_datatree_accessor"):  # xarray >= 2024.10
                xr.register_datatree_accessor("arrayds")(ArrayDSAccessor)
        _registered = True


class _AfterXarrayImport(importlib.abc.MetaPathFinder):
    """Registers the accessors right after ``xarray`` finishes importing."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != "xarray":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_register(module: Any) -> None:
            exec_module(module)
            try:
                register_accessors()
            except Exception:  # noqa: BLE001 - never break importing xarray
                pass

        loader.exec_module = exec_and_register  # type: ignore[method-assign]
        return spec


if "xarray" in sys.modules:
    register_accessors()
else:
    sys.meta_path.insert(0, _AfterXarrayImport())
