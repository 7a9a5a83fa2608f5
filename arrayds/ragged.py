"""Ragged arrays: items of one dtype and ndim but different shapes.

The public names of the ragged kind, whose code is :mod:`arrayds.kinds.ragged`
(manifest, handle, writer, compaction); the layout is docs/spec.md, "Ragged arrays".

* :func:`write_ragged` — from a list of arrays or a ``dask.bag.Bag``;
  ``arrayds.to_arrayrecord`` dispatches here for ragged input.
* :func:`open_ragged` — a :class:`RaggedArray` handle.
* :func:`read_ragged` — a ``dask.bag.Bag`` of numpy arrays, one partition per shard.

>>> import numpy as np, arrayds.ragged as rg
>>> clips = [np.arange(2 * n, dtype="f4").reshape(2, n) for n in (5, 3, 8)]
>>> ra = rg.write_ragged(clips, "memory://doc-ragged-shim", piece_len=4)
>>> len(ra), ra.shapes
(3, [(2, 5), (2, 3), (2, 8)])
>>> ra[2, 0, 3:6]
array([3., 4., 5.], dtype=float32)
"""

from .kinds.ragged.handle import RaggedArray, open_ragged, read_ragged
from .kinds.ragged.manifest import PIECE_BYTES, SHARD_BYTES, RaggedManifest, RaggedShard
from .kinds.ragged.write import write_ragged

__all__ = [
    "PIECE_BYTES",
    "SHARD_BYTES",
    "RaggedArray",
    "RaggedManifest",
    "RaggedShard",
    "open_ragged",
    "read_ragged",
    "write_ragged",
]
