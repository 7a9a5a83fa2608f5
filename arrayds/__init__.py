"""arrayds: parallel array-and-records datasets on ArrayRecord files.

The public names (docs/api.md). ArrayRecord files:

>>> import os, tempfile, arrayds
>>> path = os.path.join(tempfile.mkdtemp(), "hello.array_record")
>>> with arrayds.ArrayRecordWriter(path) as w:
...     w.write(b"hello")
>>> arrayds.ArrayRecordReader(path)[0]
b'hello'
"""

from . import convert as convert  # records datasets from other formats
from . import ragged as ragged  # the public names of ragged arrays
from . import records as records  # the public names of records datasets
from . import serializers as serializers
from . import xarray as xarray  # xarray writer + accessors; does not import xarray
from .api import from_arrayrecord, to_arrayrecord, versions
from .dataset import open, open_array, open_group
from .errors import CommitConflictError, CorruptionError
from .files.common import codecs
from .files.data_source import ArrayRecordDataSource
from .files.reader import ArrayRecordReader
from .files.tfrecord import read_jsonlines, read_tfrecord
from .files.writer import ArrayRecordWriter
from .kinds.array.handle import Array
from .kinds.group import Group
from .kinds.ragged.handle import RaggedArray, open_ragged
from .nodes.history import VersionInfo
from .tools.compact import CompactReport, compact
from .tools.upgrade import upgrade

__version__ = "0.1.0"

__all__ = [
    "ArrayRecordDataSource",
    "ArrayRecordReader",
    "ArrayRecordWriter",
    "Array",
    "CorruptionError",
    "Group",
    "codecs",
    "CommitConflictError",
    "CompactReport",
    "compact",
    "from_arrayrecord",
    "open",
    "open_array",
    "open_group",
    "to_arrayrecord",
    "upgrade",
    "versions",
    "VersionInfo",
    "read_jsonlines",
    "read_tfrecord",
    "RaggedArray",
    "open_ragged",
]
