"""New array nodes: the create arguments checked and the empty manifest committed.

>>> from arrayds.kinds.array.create import new_array_manifest
>>> new_array_manifest((4, 4), "f4", 2).chunk_shape
(2, 2)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...nodes.handle import commit_create
from ...storage.base import BaseStore as Store
from .grid import normalize_chunks
from .handle import Array
from .manifest import ArrayManifest
from .tensor import check_dtype


def create_array_node(
    store: Store, node: str, manifest: ArrayManifest, mode: str, handle_mode: str = "r+"
) -> Array:
    """Commit a new (empty) array manifest at ``node`` per ``mode`` (w, w-, a)."""
    raw = commit_create(store, node, manifest.to_json(), mode)
    new = manifest.with_(generation=raw["generation"], commit=raw["commit"])
    return Array(store, node, new, handle_mode)


def _chunk_shape(spec: Any, chunks: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """The nominal chunk shape of a user spec (what ``append`` uses)."""
    ndim = len(chunks)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return (int(spec),) * ndim
    out = []
    for d in range(ndim):
        s = spec[d] if isinstance(spec, (tuple, list)) and len(spec) == ndim else None
        if isinstance(s, (int, np.integer)) and not isinstance(s, bool) and int(s) > 0:
            out.append(int(s))
        else:
            out.append(max(chunks[d]))
    return tuple(out)


def new_array_manifest(
    shape: Sequence[int],
    dtype: Any,
    chunks: Any,
    *,
    fill_value: Any = 0,
    compression: str = "zstd:3",
    dims: Sequence[str] | None = None,
    attrs: Mapping[str, Any] | None = None,
    name: str = "array",
) -> ArrayManifest:
    """Validate create arguments and build the manifest of an empty array."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        shape = tuple(int(n) for n in shape)
    except TypeError:
        raise TypeError(f"{name}: shape must be a tuple of ints, got {shape!r}") from None
    dt = check_dtype(dtype, name)
    norm = normalize_chunks(chunks, shape, dt.itemsize, name)
    m = ArrayManifest.new(
        shape,
        dt,
        norm,
        fill_value=fill_value,
        compression=compression,
        dims=dims,
        attrs=attrs,
        name=name,
    )
    m.chunk_shape = _chunk_shape(chunks, norm)
    return m
