"""ArrayRecord and TFRecord files: readers, writers, data sources, reader options.

This layer knows nothing of datasets, nodes or manifests; the dataset layer reads a
dataset URL given to :class:`~arrayds.files.arrayrecord.ArrayRecordDataSource` through
the hook :func:`~arrayds.files.arrayrecord.register_dataset_resolver`.

>>> from arrayds.files.arrayrecord import codecs
>>> codecs()["zstd"]
True
"""
