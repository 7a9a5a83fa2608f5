"""Dask collections over datasets: graphs that write shards and read chunks.

``arrayds.kinds.array.dask`` holds the array graphs (:func:`~arrayds.kinds.array.dask.write_array`,
:func:`~arrayds.kinds.array.dask.array_to_dask`); ``arrayds.dask.graph`` the generic graph
helpers every write uses (fusing source tasks into the shard tasks, running a fused
task, computing with the progress rule), which know nothing of arrays. The public
entry points are :func:`arrayds.to_arrayrecord` and :func:`arrayds.from_arrayrecord`
(``arrayds.api``), which dispatch on the type of the data or the kind of the stored node.

>>> import dask.array as da, arrayds
>>> _ = arrayds.to_arrayrecord(da.arange(6, chunks=4), "memory://doc-dask", mode="w")
>>> arrayds.from_arrayrecord("memory://doc-dask").chunks
((4, 2),)
"""
