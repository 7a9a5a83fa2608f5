"""The node layer: what every node kind shares.

* :mod:`arrayds.nodes.commit` — the one commit path (read with a version, check, build,
  compare-and-swap, clean up);
* :mod:`arrayds.nodes.registry` — the registry of node kinds (array, group, records,
  ragged; the xarray snapshot is a group written by the xarray writer): one record per
  kind, for open, write, read and the tools.

>>> from arrayds.nodes import kinds
>>> kinds.get("records").a()
'a records dataset'
"""
