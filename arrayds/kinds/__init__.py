"""The node kinds: one package per kind (group, array, records, ragged).

Each holds its manifest type, its handle, its writers and dask graph, its compaction,
and the ``kind`` module that registers it with :mod:`arrayds.nodes.registry`.

>>> from arrayds.nodes import registry
>>> [k.name for k in registry.all_kinds()]
['group', 'array', 'records', 'ragged']
"""
