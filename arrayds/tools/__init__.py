"""The tools that look after a dataset, one module each, built on the node-kind
registry (:mod:`arrayds.nodes.registry`) and the Store protocol (:mod:`arrayds.abc.store`):

* :mod:`arrayds.tools.describe` — :func:`~arrayds.tools.describe.describe` (``arrayds info``)
* :mod:`arrayds.tools.verify` — :func:`~arrayds.tools.verify.verify` (``arrayds verify``)
* :mod:`arrayds.tools.gc` — :func:`~arrayds.tools.gc.collect_garbage` (``arrayds gc``)
* :mod:`arrayds.tools.cat` — what ``arrayds cat`` prints of each kind
* :mod:`arrayds.tools.convert` — TFRecord / JSON-lines files -> records datasets
* :mod:`arrayds.tools.compact` — :func:`~arrayds.tools.compact.compact` (``arrayds compact``;
  the kinds' rewrites are :mod:`arrayds.nodes.merge`)
* :mod:`arrayds.tools.walk` — the walk over every manifest below a node they share

No tool compares kind names: each asks the node's :class:`~arrayds.nodes.registry.NodeKind`
(its shard files, its own checks, its fields of ``info``, the folder of its shards).
``arrayds.verify`` and ``arrayds.convert`` re-export the public names.

>>> import arrayds.tools.verify, arrayds.tools.describe
>>> arrayds.tools.describe.format_bytes(3 << 20)
'3.0 MiB'
"""
