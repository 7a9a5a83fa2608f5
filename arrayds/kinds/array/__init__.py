"""The array kind: N-d chunk grids stored one chunk per record.

``manifest`` (the manifest and its shard table), ``grid`` (chunk grids, selections),
``tensor`` (one chunk <-> one record), ``handle`` (:class:`~arrayds.Array`), ``create``
(new array nodes), ``dask`` (the dask writer), ``to_dask`` (the dask reader),
``compact`` (its compaction) and ``kind`` (its registry record and writers).

>>> import arrayds
>>> arrayds.open_array("memory://doc-kind-array", mode="w", shape=(2,), dtype="i1",
...                    chunks=1).shape
(2,)
"""
