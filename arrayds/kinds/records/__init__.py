"""The records kind: streams of serialized records (the public names are
:mod:`arrayds.records`).

``manifest`` (its manifest and shard list), ``handle`` (:class:`~arrayds.records.RecordsDataset`,
readers, data sources), ``write`` (writers, the dask bag graph), ``serializers``,
``compact`` and ``kind`` (its registry record and writer).

>>> from arrayds import records
>>> len(records.write_records([b"a", b"b"], "memory://doc-kind-records"))
2
"""
