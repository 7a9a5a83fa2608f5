"""The node layer: what every node kind shares, and imports no kind.

* :mod:`arrayds.nodes.names` — node names, reserved names, write ids, manifest JSON;
* :mod:`arrayds.nodes.options` — writer options (compression);
* :mod:`arrayds.nodes.shards` — the shard writer, the per-process shard-reader cache;
* :mod:`arrayds.nodes.commit` — the one commit path (read with a version, check,
  build, compare-and-swap, clean up);
* :mod:`arrayds.nodes.history` — format 2: shard lists as segments, kept versions;
* :mod:`arrayds.nodes.retry` — the retry budget of conflicted appends;
* :mod:`arrayds.nodes.registry` — the registry of node kinds: one record per kind;
* :mod:`arrayds.nodes.read` — a node's manifest read and parsed by its kind;
* :mod:`arrayds.nodes.handle` — the base of every handle, open modes, node creation;
* :mod:`arrayds.nodes.merge` — the tiered merge and the contracts of compaction.

>>> from arrayds.nodes import registry
>>> registry.get("records").a()
'a records dataset'
"""
