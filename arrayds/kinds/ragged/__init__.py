"""The ragged kind: variable-length N-d items (the public names are
:mod:`arrayds.ragged`).

``manifest`` (its manifest and shard list), ``handle`` (:class:`~arrayds.RaggedArray`),
``write`` (writers, the dask bag graph), ``compact`` and ``kind`` (its registry record
and writer).

>>> import numpy as np, arrayds
>>> len(arrayds.ragged.write_ragged([np.zeros(3), np.zeros(5)], "memory://doc-kind-ragged"))
2
"""
