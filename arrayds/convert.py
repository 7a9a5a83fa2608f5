"""Conversions of TFRecord and JSON-lines files into records datasets: the public
names of :mod:`arrayds.tools.convert`, where they live and are documented.

>>> from arrayds.convert import tfrecord_to_arrayrecord
>>> tfrecord_to_arrayrecord.__module__
'arrayds.tools.convert'
"""

from .tools.convert import jsonlines_to_arrayrecord, tfrecord_to_arrayrecord

__all__ = ["jsonlines_to_arrayrecord", "tfrecord_to_arrayrecord"]
