"""Conversions into records datasets, as dask jobs (no Apache Beam needed; also
:mod:`arrayds.convert`).

* :func:`tfrecord_to_arrayrecord` — TFRecord files (serialized ``tf.train.Example`` or
  any payload) -> a records dataset with the ``raw`` serializer: each record's bytes are
  kept unchanged, so code that parsed the TFRecords parses the ArrayRecord records.
* :func:`jsonlines_to_arrayrecord` — JSON-lines files -> a records dataset of the
  parsed values (``msgpack`` by default).

Both stream: one task per output shard reads its input file(s) and writes its shard in
constant memory, then one task commits the manifest.  With the default
``num_shards=None`` there is one shard (and one task) per input file, in sorted order.
Every TFRecord CRC is verified; damaged input raises :class:`arrayds.CorruptionError`
naming the file and byte offset, and nothing is committed.

Computing uses the active dask scheduler: a ``distributed.Client`` if one is active
(parsing runs in parallel in its worker processes), else ``scheduler=`` (for example
``"processes"``), else dask's default for delayed objects (threads).

Example:
    >>> import os, tempfile
    >>> from arrayds.files.tfrecord import write_tfrecord
    >>> from arrayds.tools.convert import tfrecord_to_arrayrecord
    >>> d = tempfile.mkdtemp()
    >>> for k in range(2):
    ...     recs = [b"%d-%d" % (k, i) for i in range(3)]
    ...     _ = write_tfrecord(os.path.join(d, f"in-{k}.tfrecord"), recs)
    >>> ds = tfrecord_to_arrayrecord(os.path.join(d, "in-*.tfrecord"), os.path.join(d, "out"))
    >>> ds.num_shards, ds.serializer, ds.data_source()[4]
    (2, 'raw', b'1-1')
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..files.tfrecord import (
    expand_paths,
    iter_jsonlines,
    iter_tfrecord,
    read_jsonlines,
    read_tfrecord,
)
from ..kinds.records.handle import RecordsDataset
from ..kinds.records.serializers import SerializerSpec
from ..kinds.records.write import write_from_sources, write_records

if TYPE_CHECKING:  # pragma: no cover
    import fsspec
    from dask.delayed import Delayed

__all__ = ["jsonlines_to_arrayrecord", "tfrecord_to_arrayrecord"]


def _tfrecord_files(
    files: list[tuple[fsspec.AbstractFileSystem, str]], compression: str | None, verify: bool
) -> Iterator[bytes]:
    for fs, path in files:
        yield from iter_tfrecord(path, compression=compression, verify=verify, _fs=fs, _copy=False)


def _jsonlines_files(
    files: list[tuple[fsspec.AbstractFileSystem, str]], compression: str | None
) -> Iterator[Any]:
    for fs, path in files:
        yield from iter_jsonlines(path, compression=compression, _fs=fs)


def _groups(files: list[Any], num_shards: int) -> list[list[Any]]:
    """Split files into ``num_shards`` contiguous groups of near-equal count."""
    n = len(files)
    bounds = [n * k // num_shards for k in range(num_shards + 1)]
    return [files[bounds[k] : bounds[k + 1]] for k in range(num_shards)]


def _check_num_shards(num_shards: int | None) -> None:
    if num_shards is not None and (
        not isinstance(num_shards, int) or isinstance(num_shards, bool) or num_shards < 1
    ):
        raise ValueError(f"num_shards must be a positive integer or None, got {num_shards!r}")


def _convert(
    files: list[Any],
    stream: Any,
    stream_args: tuple[Any, ...],
    bag_of: Any,
    url: str,
    component: str | None,
    num_shards: int | None,
    write_kwargs: dict[str, Any],
) -> RecordsDataset | Delayed:
    if num_shards is None or num_shards <= len(files):
        groups = _groups(files, num_shards or len(files))
        sources = [(stream, (group, *stream_args)) for group in groups]
        return write_from_sources(sources, url, component, **write_kwargs)
    # more shards than files: split the files' records across partitions
    scheduler = write_kwargs.pop("scheduler", None)
    bag = bag_of().repartition(npartitions=num_shards)
    if scheduler is not None:
        import dask

        with dask.config.set(scheduler=scheduler):
            return write_records(bag, url, component, **write_kwargs)
    return write_records(bag, url, component, **write_kwargs)


def tfrecord_to_arrayrecord(
    paths_or_glob: str | Iterable[str],
    url: str,
    num_shards: int | None = None,
    *,
    component: str | None = None,
    mode: str = "w-",
    compression: str = "zstd:3",
    group_size: int = 1,
    attrs: Mapping[str, Any] | None = None,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    input_storage_options: Mapping[str, Any] | None = None,
    input_compression: str | None = None,
    verify: bool = True,
    progress: bool = False,
    scheduler: Any = None,
) -> RecordsDataset | Delayed:
    """Convert TFRecord files into a records dataset (serializer ``raw``).

    ``num_shards=None``: one shard per input file.  Fewer shards than files: each
    shard streams a contiguous run of files.  More shards than files: the records are
    read into a bag and repartitioned.  ``input_compression="gzip"`` reads GZIP
    TFRecords.  ``storage_options`` apply to ``url``; ``input_storage_options`` (default:
    the same) to the inputs.  Returns the :class:`arrayds.records.RecordsDataset`, or a
    ``Delayed`` with ``compute=False``.

    Example:
        >>> import os, tempfile
        >>> from arrayds.files.tfrecord import write_tfrecord
        >>> from arrayds.tools.convert import tfrecord_to_arrayrecord
        >>> d = tempfile.mkdtemp()
        >>> for k in range(3):
        ...     _ = write_tfrecord(os.path.join(d, f"x-{k}.tfrecord"), [b"r"] * (k + 1))
        >>> ds = tfrecord_to_arrayrecord(os.path.join(d, "x-*"), os.path.join(d, "o"), 2)
        >>> [s.num_records for s in ds.shards]
        [1, 5]
    """
    _check_num_shards(num_shards)
    in_opts = storage_options if input_storage_options is None else input_storage_options
    files = expand_paths(paths_or_glob, storage_options=in_opts)
    kwargs = dict(
        mode=mode,
        compression=compression,
        group_size=group_size,
        serializer="raw",
        attrs=attrs,
        compute=compute,
        storage_options=storage_options,
        progress=progress,
        scheduler=scheduler,
    )
    return _convert(
        files,
        _tfrecord_files,
        (input_compression, verify),
        lambda: read_tfrecord(
            paths_or_glob,
            storage_options=in_opts,
            compression=input_compression,
            verify=verify,
        ),
        url,
        component,
        num_shards,
        kwargs,
    )


def jsonlines_to_arrayrecord(
    paths_or_glob: str | Iterable[str],
    url: str,
    num_shards: int | None = None,
    *,
    component: str | None = None,
    mode: str = "w-",
    serializer: SerializerSpec = "msgpack",
    compression: str = "zstd:3",
    group_size: int = 1,
    attrs: Mapping[str, Any] | None = None,
    compute: bool = True,
    storage_options: Mapping[str, Any] | None = None,
    input_storage_options: Mapping[str, Any] | None = None,
    input_compression: str | None = "infer",
    progress: bool = False,
    scheduler: Any = None,
) -> RecordsDataset | Delayed:
    """Convert JSON-lines files into a records dataset of the parsed values.

    Sharding follows :func:`tfrecord_to_arrayrecord`.  ``serializer`` is ``"msgpack"``
    by default (``"json"`` keeps the text form).  A line that is not JSON is a
    ``ValueError`` naming the file and line, and nothing is committed.

    Example:
        >>> import os, tempfile
        >>> from arrayds.tools.convert import jsonlines_to_arrayrecord
        >>> d = tempfile.mkdtemp()
        >>> _ = open(os.path.join(d, "a.jsonl"), "w").write('{"x": 1}\\n{"x": 2}\\n')
        >>> ds = jsonlines_to_arrayrecord(os.path.join(d, "a.jsonl"), os.path.join(d, "o"))
        >>> list(ds.data_source(decode=True))
        [{'x': 1}, {'x': 2}]
    """
    _check_num_shards(num_shards)
    in_opts = storage_options if input_storage_options is None else input_storage_options
    files = expand_paths(paths_or_glob, storage_options=in_opts)
    kwargs = dict(
        mode=mode,
        compression=compression,
        group_size=group_size,
        serializer=serializer,
        attrs=attrs,
        compute=compute,
        storage_options=storage_options,
        progress=progress,
        scheduler=scheduler,
    )
    return _convert(
        files,
        _jsonlines_files,
        (input_compression,),
        lambda: read_jsonlines(
            paths_or_glob, storage_options=in_opts, compression=input_compression
        ),
        url,
        component,
        num_shards,
        kwargs,
    )
