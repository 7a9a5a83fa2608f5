"""A writable xarray data store for arrayds datasets.

:class:`ArrayDSWritableStore` is what xarray's zarr backend has in ``ZarrStore``: an
``xarray.backends.common.WritableCFDataStore``, so ``Dataset.dump_to_store`` and the
rest of xarray's writing machinery CF-encode the variables (times, masks, packing,
``_Unsigned``, character arrays, coordinates) exactly as for every other backend.
arrayds keeps its one atomic commit per write: the encoded variables and attributes
are buffered, and :meth:`~ArrayDSWritableStore.sync` (also called by ``close`` and
before the store is read) writes them all and commits them at once
(:func:`arrayds.xarray.writer.store_encoded`).

>>> import numpy as np, xarray as xr
>>> ds = xr.Dataset({"v": ("x", np.array([0.5, np.nan]), {}, {"dtype": "i2",
...                  "scale_factor": 0.5, "_FillValue": -1})})
>>> with ArrayDSWritableStore.open("memory://doc-datastore", mode="w") as st:
...     ds.dump_to_store(st)
>>> back = xr.open_dataset("memory://doc-datastore", engine="arrayds")
>>> back.v.values.tolist(), back.v.encoding["dtype"]
([0.5, nan], dtype('int16'))
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

from xarray.backends.common import WritableCFDataStore

from ..errors import CommitConflictError
from ..nodes.names import check_component
from ..storage import get_store
from ..storage.base import BaseStore as Store
from .state import read_state

__all__ = ["ArrayDSWritableStore"]


class ArrayDSWritableStore(WritableCFDataStore):
    """The group ``node`` of ``store`` as a writable xarray data store. ``mode`` is
    ``"w"`` (the first sync replaces what is there), ``"w-"`` (the dataset must not
    exist) or ``"a"`` (add or overwrite variables; dimension lengths must match the
    stored ones, as xarray's stores require)."""

    def __init__(self, store: Store, node: str = "", mode: str = "w-") -> None:
        if mode not in ("w", "w-", "a"):
            raise ValueError(f"mode must be 'w', 'w-' or 'a', got {mode!r}")
        self._store = store
        self._node = node
        self._mode = mode
        self._variables: dict[Hashable, Any] = {}
        self._attrs: dict[str, Any] = {}
        self._dims: dict[Hashable, int] = {}
        self._state = read_state(store, node)
        if mode == "w-" and self._state.exists:
            raise FileExistsError(f"dataset {store.display(node)!r} already exists (mode 'w-')")

    @classmethod
    def open(
        cls,
        url: str,
        group: str | None = None,
        mode: str = "w-",
        storage_options: Mapping[str, Any] | None = None,
    ) -> ArrayDSWritableStore:
        """The store for ``url`` (and the component ``group`` inside it)."""
        return cls(get_store(url, storage_options), check_component(group), mode)

    # -- what is stored (committed), plus what is buffered

    def _reader(self) -> Any:
        from .backend import ArrayDSDataStore

        self.sync()
        return ArrayDSDataStore(self._store, self._node)

    def get_variables(self) -> Mapping[str, Any]:
        return self._reader().get_variables()

    def get_attrs(self) -> Mapping[str, Any]:
        return self._reader().get_attrs()

    def get_dimensions(self) -> Mapping[Hashable, int]:
        """The stored dimensions (none if the next sync replaces the dataset) and the
        ones of the buffered variables."""
        dims: dict[Hashable, int] = {}
        if self._mode == "a" and self._state.exists:
            for m in self._state.members.values():
                for d, n in zip(m.dims or (), m.shape, strict=False):
                    dims[d] = n
        dims.update(self._dims)
        return dims

    def get_encoding(self) -> dict[str, Any]:
        return {}

    # -- writing (buffered)

    def encode(self, variables: Mapping[Hashable, Any], attributes: Mapping[str, Any]) -> Any:
        """xarray's CF encoding, after checking that integer ``dtype`` encodings hold
        the values (:func:`arrayds.xarray.writer.encode_dataset` does the same)."""
        from .writer import check_fits

        what = f"dataset {self._store.display(self._node)!r}"
        for k, v in variables.items():
            check_fits(k, v, what)
        return super().encode(variables, attributes)

    def encode_variable(self, v: Any, name: Hashable = None) -> Any:
        """After xarray's CF encoder: strings as netCDF-4 stores them."""
        from .writer import encode_strings

        return encode_strings(v, name)

    def set_dimension(self, dim: Hashable, length: int, is_unlimited: bool = False) -> None:
        self._dims[dim] = length

    def set_attribute(self, k: str, v: Any) -> None:
        self._attrs[k] = v

    def set_variables(
        self,
        variables: Mapping[Hashable, Any],
        check_encoding_set: Iterable[Hashable],
        writer: Any,
        unlimited_dims: Any = None,
    ) -> None:
        """Buffer the (CF-encoded) variables; nothing is written before :meth:`sync`."""
        self._variables.update(variables)

    def sync(self) -> None:
        """Write and commit everything buffered, as one commit."""
        if not self._variables and not self._attrs:
            return
        from .writer import plan_encoded, store_encoded, variable_name

        what = f"dataset {self._store.display(self._node)!r}"
        names = {k: variable_name(k, what) for k in self._variables}
        state = read_state(self._store, self._node)
        if state.version != self._state.version:
            raise CommitConflictError(f"{what}: another writer committed since this store opened")
        mode = "w" if self._mode in ("w", "w-") else "a"
        plan = plan_encoded(
            self._store,
            self._node,
            self._variables,
            state=state,
            mode=mode,
            names=names,
            kinds={n: "full" for n in names.values()},
        )
        store_encoded(self._store, self._node, plan, self._attrs, state=state, mode=mode)
        self._variables.clear()
        self._attrs.clear()
        self._mode = "a"
        self._state = read_state(self._store, self._node)

    def close(self, **kwargs: Any) -> None:
        self.sync()
