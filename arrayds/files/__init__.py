"""ArrayRecord and TFRecord files: readers, writers, data sources, reader options.

A drop-in for the official ``array_record`` Python API, over the native engine
``arrayds._native``: files written here are ordinary ArrayRecord files (the official
reader and Grain read them) and every file the official writer produces reads here.

* :mod:`~arrayds.files.writer` — :class:`~arrayds.ArrayRecordWriter`; ``write_many``
  hands whole batches to the engine, which compresses chunks in parallel with the GIL
  released. Remote files are uploaded whole at ``close()``, or streamed in parts to
  S3 and GCS.
* :mod:`~arrayds.files.reader` — :class:`~arrayds.ArrayRecordReader`: by index, list,
  range, slice or numpy array; batches decoded in parallel; sequential iteration with
  readahead. Remote files are read by byte ranges: the tail and footer once at open,
  then only the chunk ranges each read needs.
* :mod:`~arrayds.files.data_source` — :class:`~arrayds.ArrayRecordDataSource`: many
  files as one random-access sequence for Grain, PyTorch and dask; the URL of a dataset
  is read through the resolver the dataset layer registers
  (:func:`~arrayds.files.data_source.register_dataset_resolver`), so this layer knows
  nothing of datasets.
* :mod:`~arrayds.files.options` (reader options), :mod:`~arrayds.files.common` (paths,
  file systems, codecs), :mod:`~arrayds.files.tfrecord` (TFRecord and JSON lines in).

Paths may be local paths, ``file://`` URLs or any fsspec URL (``memory://``, ``s3://``,
``gs://``...).

>>> from arrayds.files.common import codecs
>>> codecs()["zstd"]
True
"""
