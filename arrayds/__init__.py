"""arrayds: parallel array-and-records datasets on ArrayRecord files.

The public names of the API contract (docs: shared/design/API.md). ArrayRecord files:

>>> import os, tempfile, arrayds
>>> path = os.path.join(tempfile.mkdtemp(), "hello.array_record")
>>> with arrayds.ArrayRecordWriter(path) as w:
...     w.write(b"hello")
>>> arrayds.ArrayRecordReader(path)[0]
b'hello'
"""

from . import convert as convert  # records datasets (issue 4)
from . import ragged as ragged  # ragged arrays (issue 5); registers the "ragged" kind
from . import records as records  # registers the "records" node kind
from . import serializers as serializers
from . import xarray as xarray  # xarray writer + accessors (issue 5); does not import xarray
from .api import from_arrayrecord, to_arrayrecord, versions
from .array import Array  # chunked N-d arrays (issue 3)
from .arrayrecord import (
    ArrayRecordDataSource,
    ArrayRecordReader,
    ArrayRecordWriter,
    CorruptionError,
    codecs,
)
from .dataset import Group, open, open_array, open_group
from .errors import CommitConflictError
from .nodes.log import VersionInfo  # what versions() lists (issue 12)
from .ragged import RaggedArray, open_ragged
from .tfrecord import read_jsonlines, read_tfrecord  # records input (issue 4)
from .tools.compact import CompactReport, compact  # compaction (issue 12)
from .tools.upgrade import upgrade  # manifest format versions (issue 12)

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
