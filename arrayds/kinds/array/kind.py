"""The array kind's registry record, and the ``to_arrayrecord`` writers of dask and
numpy arrays.

>>> from arrayds.nodes import registry
>>> registry.get("array").shard_folder, registry.get_writer("numpy").kind
('c', 'array')
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...nodes import registry as kinds
from ...nodes.names import (
    SHARD_DIR,
)
from ...storage.base import BaseStore as Store
from .compact import compact_array, tail_sizes, usage
from .dask import write_array
from .grid import normalize_chunks
from .handle import Array, dask_array
from .manifest import ArrayManifest
from .tensor import check_dtype


def _to_dask(
    store: Store, node: str, m: ArrayManifest, *, chunks: Any, name: Any, **kwargs: Any
) -> Any:
    """``from_arrayrecord`` of an array: a dask array over its chunks."""
    kinds.no_extra_keywords(f"array {store.display(node)!r}", kwargs)
    return dask_array(Array(store, node, m, "r"), chunks=chunks, name=name)


def _shard_refs(m: ArrayManifest) -> list[kinds.ShardRef]:
    """The shard files of an array: each chunk run claims records of one file."""
    return [
        kinds.ShardRef(e.path, size=e.bytes, span=(e.offset, e.offset + e.records), entry=e)
        for e in m.shards
    ]


kinds.register(
    kinds.NodeKind(
        "array",
        parse=ArrayManifest.from_json,
        open=Array,
        to_dask=_to_dask,
        shard_folder=SHARD_DIR,
        shards=_shard_refs,
        verify_extra=kinds.lazy("arrayds.tools.verify", "array_checks"),
        describe=kinds.lazy("arrayds.tools.describe", "describe_array"),
        info_text=kinds.lazy("arrayds.tools.describe", "array_text"),
        cat=kinds.lazy("arrayds.tools.cat", "cat_array"),
        compact=compact_array,
        usage=usage,
        tail_sizes=tail_sizes,
        with_shards=lambda m, shards: m.with_(shards=shards),
        window=lambda doc, entries: {**doc, "shards": entries},
        lazy_shards=True,
        totals="arrays",
        plural="arrays",
    )
)


# ------------------------------------------------------------------ arrays


def _is_dask_array(x: Any) -> bool:
    mod = type(x).__module__
    if not mod.startswith("dask.array"):
        return False
    da = sys.modules.get("dask.array")
    if da is not None and isinstance(x, da.Array):
        return True
    return hasattr(x, "chunks") and hasattr(x, "dtype") and hasattr(x, "__dask_graph__")


def _array_options(
    what: str,
    serializer: str,
    group_size: int,
    kwargs: dict[str, Any],
    allowed: Sequence[str] = ("fill_value",),
) -> None:
    if serializer not in ("auto", None):
        raise ValueError(f"{what}: serializer={serializer!r} applies to records, not arrays")
    if group_size != 1:
        raise ValueError(
            f"{what}: array shards always use group_size 1 (one chunk per record, each "
            f"independently addressable); got group_size={group_size}"
        )
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        raise TypeError(f"{what}: unexpected keyword arguments {unknown} for an array")


def _write_dask_array(
    x: Any,
    store: Store,
    node: str,
    *,
    serializer: str,
    group_size: int,
    **options: Any,
) -> Any:

    what = f"array {store.display(node)!r}"
    extra = {k: options.pop(k) for k in list(options) if k not in _WRITE_KEYS}
    _array_options(what, serializer, group_size, extra)
    if isinstance(options.get("region"), Mapping):
        raise TypeError(f"{what}: region as a dict of dimension names is for xarray input")
    return write_array(x, store, node, **options, **extra)


_WRITE_KEYS = (
    "mode",
    "compression",
    "shard_size",
    "region",
    "attrs",
    "dims",
    "compute",
    "progress",
    "compact",
    "retries",
)


def _write_numpy(
    x: np.ndarray,
    store: Store,
    node: str,
    *,
    chunks: Any = None,
    **options: Any,
) -> Any:
    try:
        import dask.array as da
    except ImportError:  # pragma: no cover - dask is a dependency of the [dask] extra
        raise ImportError("to_arrayrecord needs dask: pip install 'arrayds[dask]'") from None

    what = f"array {store.display(node)!r}"
    dt = check_dtype(x.dtype, what)
    norm = normalize_chunks("auto" if chunks is None else chunks, x.shape, dt.itemsize, what)
    return _write_dask_array(da.from_array(x, chunks=norm), store, node, **options)


kinds.register_writer(kinds.Writer("dask.array", _is_dask_array, _write_dask_array, "array"))
kinds.register_writer(
    kinds.Writer("numpy", lambda x: isinstance(x, np.ndarray), _write_numpy, "array")
)
