"""Records datasets: sequences of objects stored as plain ArrayRecord shards.

The public names of the records kind, whose code is :mod:`arrayds.kinds.records`
(manifest, handle, writer, compaction). A records dataset is a node of kind
``"records"`` (docs/spec.md, "Records datasets").

* :func:`write_records` — a ``dask.bag.Bag`` (one shard per partition, one task each,
  plus one commit task) or a list (``num_shards`` shards).  ``compute=False`` returns
  a ``dask.delayed.Delayed``.  ``arrayds.to_arrayrecord`` dispatches here.
* :func:`read_records` — a ``dask.bag.Bag`` with one partition per shard, in order,
  decoded with the stored serializer.  ``arrayds.from_arrayrecord`` dispatches here.
* :func:`open_records` — a :class:`RecordsDataset` handle (counts, shard paths,
  ``to_bag()``, ``data_source()``).
* :func:`data_source` — an :class:`arrayds.ArrayRecordDataSource` with global random
  access across the shards.

Example:
    >>> import os, tempfile, numpy as np
    >>> from arrayds import records
    >>> url = os.path.join(tempfile.mkdtemp(), "train")
    >>> items = [{"id": i, "x": np.full(3, i, dtype=np.float32)} for i in range(10)]
    >>> ds = records.write_records(items, url, num_shards=2)
    >>> ds
    RecordsDataset(..., 10 records in 2 shards, serializer='msgpack')
    >>> records.read_records(url).compute(scheduler="sync")[3]["x"]
    array([3., 3., 3.], dtype=float32)
    >>> src = records.data_source(url, decode=True)
    >>> len(src), src[7]["id"]
    (10, 7)
"""

from .kinds.records.handle import RecordsDataset, data_source, open_records, read_records
from .kinds.records.manifest import ShardInfo, is_records
from .kinds.records.write import write_from_sources, write_records

__all__ = [
    "RecordsDataset",
    "ShardInfo",
    "data_source",
    "is_records",
    "open_records",
    "read_records",
    "write_from_sources",
    "write_records",
]
