"""Apache Beam transforms: write and read arrayds records datasets from Beam pipelines.

Needs the ``[beam]`` extra (``pip install 'arrayds[beam]'``); ``import arrayds`` never
imports Beam.  The guarantees are those of the dask path (:mod:`arrayds.records`):
shards are written in parallel by the workers, then committed **once**, with the same
compare-and-swap commit (:func:`arrayds.kinds.records.write.commit_shards`), so nothing is
visible before every shard is written and a failed pipeline leaves the previous
state (or nothing) visible. A write of more than
:data:`arrayds.nodes.history.SEGMENT_LIMIT` shards writes their manifest entries as
segments, a run of shards per step, and the commit step receives only the segments'
references (:func:`arrayds.kinds.records.write.commit_segments`), so its memory does
not grow with the number of shards.

* :class:`WriteToArrayRecord` — a ``PTransform`` over a ``PCollection`` of records
  (bytes, or objects through the serializer).  ``num_shards > 0``: exactly that many
  shards, named ``<name>-<write id>.array_record-0000i-of-0000N``, records routed by a
  stable key (a CRC-32C of their encoding, so a retried bundle routes every record
  the same way).  ``num_shards=0``: one shard per bundle, under a name unique to the
  attempt: a retried bundle writes a new file, the runner drops the failed attempt's
  output, so its file is never named by the manifest and ``arrayds gc`` removes it.
  Its output is a ``PCollection`` of one :class:`arrayds.records.RecordsDataset`.
* :class:`ReadFromArrayRecord` — a root ``PTransform`` yielding the records of a
  records dataset (decoded with its serializer) or of plain ArrayRecord files (path,
  list or glob; bytes).  It is a bounded source split by shard and record range, with
  dynamic splitting, so runners parallelise a single large shard too.
* :func:`tfrecord_to_arrayrecord` — TFRecord files to a records dataset (``raw``),
  one shard per input file streamed in constant memory (as
  :func:`arrayds.convert.tfrecord_to_arrayrecord` does with dask).

Example:
    >>> import os, tempfile, apache_beam as beam
    >>> from arrayds.beam import ReadFromArrayRecord, WriteToArrayRecord
    >>> url = os.path.join(tempfile.mkdtemp(), "squares")
    >>> with beam.Pipeline() as p:
    ...     _ = (
    ...         p
    ...         | beam.Create(range(6))
    ...         | beam.Map(lambda i: {"i": i, "sq": i * i})
    ...         | WriteToArrayRecord(url, num_shards=2)
    ...     )
    >>> import arrayds
    >>> ds = arrayds.records.open_records(url)
    >>> ds.num_shards, sorted(r["sq"] for r in ds)
    (2, [0, 1, 4, 9, 16, 25])
    >>> from apache_beam.testing.util import assert_that, equal_to
    >>> with beam.Pipeline() as p:
    ...     got = p | ReadFromArrayRecord(url) | beam.Map(lambda r: r["i"])
    ...     _ = assert_that(got, equal_to(range(6)))
"""

from __future__ import annotations

import bisect
import dataclasses
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam
import crc32c as _crc32c
import numpy as np
from apache_beam.io import iobase
from apache_beam.io.range_trackers import OffsetRangeTracker
from apache_beam.pvalue import AsSingleton
from apache_beam.transforms.window import GlobalWindows
from fsspec.implementations.local import LocalFileSystem

from .errors import CorruptionError
from .files.reader import ArrayRecordReader
from .files.tfrecord import expand_paths, iter_tfrecord
from .kinds.records import handle as _records_handle
from .kinds.records import manifest as _records_manifest
from .kinds.records import serializers as _ser
from .kinds.records import write as _records_write
from .kinds.records.handle import RecordsDataset
from .kinds.records.serializers import SerializerSpec
from .kinds.records.write import WritePlan
from .nodes import history as log
from .nodes.names import attempt_stem
from .nodes.options import DEFAULT_COMPRESSION, WriterOptions

__all__ = ["ReadFromArrayRecord", "WriteToArrayRecord", "tfrecord_to_arrayrecord"]

_BUNDLE_SHARD_BYTES = 128 << 20
"""A bundle whose records reach about this many bytes is written as several shards
(a bundle is held in memory until its shard is written)."""
_READ_BATCH = 1024
"""Records fetched per engine read when a source range is read."""


# ------------------------------------------------------------------------- writing


def _approx_size(obj: Any, depth: int = 0) -> int:
    """A cheap estimate of a record's encoded size (bounds a bundle's buffer)."""
    if isinstance(obj, bytes | bytearray | memoryview | str):
        return len(obj)
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    if depth < 3 and isinstance(obj, Mapping):
        return sum(_approx_size(v, depth + 1) + 8 for v in obj.values())
    if depth < 3 and isinstance(obj, list | tuple):
        return sum(_approx_size(v, depth + 1) for v in obj)
    return 16


class _WriteBundleShards(beam.DoFn):
    """Buffer a bundle's records, write them as a shard named for this attempt."""

    def __init__(self, plan: WritePlan) -> None:
        self._plan = plan

    def start_bundle(self) -> None:
        self._items: list[Any] = []
        self._bytes = 0

    def _flush(self) -> dict[str, Any]:
        stem = attempt_stem(self._plan.stem)
        items, self._items, self._bytes = self._items, [], 0
        return _records_write.write_records_shard(
            items, 0, dataclasses.replace(self._plan, stem=stem, total=1)
        )

    def process(self, item: Any) -> Iterator[dict[str, Any]]:
        self._items.append(item)
        self._bytes += _approx_size(item)
        if self._bytes >= _BUNDLE_SHARD_BYTES:
            yield self._flush()

    def finish_bundle(self) -> Iterator[Any]:
        if self._items:
            yield GlobalWindows.windowed_value(self._flush())


class _ShardKey(beam.DoFn):
    """``record -> (shard index, record)`` by a CRC-32C of the record's encoding."""

    def __init__(self, serializer: _ser.Serializer | None, num_shards: int, where: str) -> None:
        self._ser = serializer
        self._n = num_shards
        self._where = where

    def process(self, item: Any) -> Iterator[tuple[int, Any]]:
        if _ser.is_bytes_like(item) and (self._ser is None or self._ser is _ser.RAW):
            data = item
        else:
            ser = self._ser or _ser.MSGPACK
            try:
                data = ser.encode(item)
            except (TypeError, ValueError, OverflowError, AttributeError) as exc:
                raise TypeError(
                    f"records dataset {self._where}: a record of type {type(item).__name__} "
                    f"cannot be encoded with the {ser.name!r} serializer: {exc}"
                ) from exc
        yield _crc32c.crc32c(data) % self._n, item


def _write_keyed_shard(group: tuple[int, Iterable[Any]], plan: WritePlan) -> dict[str, Any]:
    index, items = group
    return {**_records_write.write_records_shard(items, index, plan), "index": index}


def _keyed_by_run(result: dict[str, Any], count: int, num_shards: int, limit: int) -> tuple:
    """``(run, result)``: with ``num_shards``, runs of ``limit`` consecutive shard
    indices; else (one shard per bundle, ``count`` of them) as many runs as a list of
    ``count`` entries has segments, a shard's run chosen by a CRC-32C of its name."""
    if num_shards:
        return result["index"] // limit, result
    runs = max(1, -(-count // limit))
    return _crc32c.crc32c(result["shard"].name.encode()) % runs, result


def _run_results(
    group: tuple[int, Iterable[Any]], plan: WritePlan, num_shards: int, limit: int
) -> list[dict[str, Any]]:
    """The shard results of one run in dataset order (by index, else by name); with
    ``num_shards``, a shard index of the run that received no record gets an empty
    shard, so the dataset has exactly that many."""
    run, got = group
    results = [r for r in got if r is not None]
    if not num_shards:
        return sorted(results, key=lambda r: r["shard"].name)
    have = {r["index"] for r in results}
    lo, hi = run * limit, min(num_shards, (run + 1) * limit)
    results += [
        {**_records_write.write_records_shard([], k, plan), "index": k}
        for k in range(lo, hi)
        if k not in have
    ]
    return sorted(results, key=lambda r: r["index"])


def _chosen(group: tuple[int, Iterable[Any]]) -> list[str]:
    """The serializers an ``auto`` write's shards of one run chose."""
    return _records_write.chosen_serializers([r for r in group[1] if r is not None])


def _run_part(
    group: tuple[int, Iterable[Any]],
    plan: WritePlan,
    settings: tuple[str, str | None, int],
    limit: int,
    count: int,
    ser_name: str | None,
) -> tuple[int, str, list[Any]]:
    """One run's part of the commit: ``(run, "shards", results)`` if the write has at
    most ``limit`` shards (committed as a list), else ``(run, "segments", refs)``:
    the run's entries written as segments
    (:func:`arrayds.kinds.records.write.write_segment`), all the commit receives."""
    _mode, _expected, num_shards = settings
    results = _run_results(group, plan, num_shards, limit)
    if (num_shards or count) <= limit:
        return group[0], "shards", results
    assert ser_name is not None
    return group[0], "segments", _records_write.write_segment(results, plan, ser_name)


def _commit_parts(
    parts: list[tuple[int, str, list[Any]]],
    plan: WritePlan,
    settings: tuple[str, str | None, int],
    ser_name: str | None,
    where: tuple[str, str | None, Mapping[str, Any] | None],
) -> RecordsDataset:
    """The single commit step, over the runs' parts in run order: the shard results
    of a write of at most ``SEGMENT_LIMIT`` shards
    (:func:`arrayds.kinds.records.write.commit_shards`), else the references of the
    segments the runs wrote (:func:`arrayds.kinds.records.write.commit_segments`: the
    entries are never gathered). A commit step run again after its first run
    landed commits nothing twice (:func:`arrayds.nodes.commit.commit`)."""
    mode, expected, _num_shards = settings
    parts = sorted(parts, key=lambda p: p[0])
    if all(kind == "shards" for _, kind, _ in parts):
        results = [r for _, _, got in parts for r in got]
        _records_write.commit_shards(results, plan, mode, None, expected)
    else:
        assert ser_name is not None
        refs = [got for _, _, got in parts]
        _records_write.commit_segments(refs, plan, mode, None, ser_name)
    url, component, storage_options = where
    return _records_handle.open_records(url, component, storage_options=storage_options)


class _CommitShards(beam.PTransform):
    """Commit the shard results once, without gathering them in one step when there
    are more than ``SEGMENT_LIMIT``: they are grouped into runs of consecutive shards
    (:func:`_keyed_by_run`), each run of a long write is written as manifest segments
    by its own step (:func:`_run_part`; an ``auto`` serializer decided first from what
    each run chose, as a side input), and the commit step receives one small part per
    run (:func:`_commit_parts`)."""

    def __init__(self, plan: WritePlan, settings: tuple[Any, ...], where: tuple[Any, ...]) -> None:
        super().__init__()
        self._plan, self._settings, self._where = plan, settings, where

    def expand(self, results: Any) -> Any:
        plan, settings = self._plan, self._settings
        _mode, expected, num_shards = settings
        limit = log.SEGMENT_LIMIT
        count = AsSingleton(results | "Count" >> beam.combiners.Count.Globally())
        keyed = results | "ByRun" >> beam.Map(_keyed_by_run, count, num_shards, limit)
        if num_shards:  # every run, those whose shards all received no record too
            runs = range(-(-num_shards // limit))
            every = results.pipeline | "Runs" >> beam.Create([(k, None) for k in runs])
            keyed = (keyed, every) | "EveryRun" >> beam.Flatten()
        grouped = keyed | "GroupByRun" >> beam.GroupByKey()
        ser: Any = expected
        if expected is None:
            ser = AsSingleton(
                grouped
                | "Chosen" >> beam.Map(_chosen)
                | "AllChosen" >> beam.combiners.ToList()
                | "Serializer" >> beam.Map(_records_write.decide_serializer)
            )
        return (
            grouped
            | "WriteRuns" >> beam.Map(_run_part, plan, settings, limit, count, ser)
            | "Gather" >> beam.combiners.ToList()
            | "Commit" >> beam.Map(_commit_parts, plan, settings, ser, self._where)
        )


def _check_shards(num_shards: Any, allow_none: bool) -> None:
    if num_shards is None and allow_none:
        return
    if not isinstance(num_shards, int) or isinstance(num_shards, bool) or num_shards < 0:
        raise ValueError(f"num_shards must be a non-negative integer, got {num_shards!r}")


class WriteToArrayRecord(beam.PTransform):
    """Write a ``PCollection`` of records as an arrayds records dataset, committed once.

    ``serializer``, ``compression``, ``group_size`` and ``mode`` (``"w-"`` create,
    ``"w"`` replace, ``"a"`` append) are those of :func:`arrayds.to_arrayrecord`; the
    checks run when the transform is applied, so ``mode="w-"`` on an existing node is
    ``FileExistsError`` at pipeline construction, before any shard is written.
    ``num_shards > 0``: exactly that many shards (TFDS-style names
    ``-0000i-of-0000N``), records routed by a CRC-32C of their encoding (identical
    records land in one shard); ``num_shards=0``: one shard per bundle (a bundle of more
    than about 128 MiB is written as several).  A record the serializer cannot encode
    fails the pipeline with a ``TypeError`` naming its type, and nothing is committed.
    The output is a ``PCollection`` holding the committed
    :class:`arrayds.records.RecordsDataset`.

    Example:
        >>> import os, tempfile, apache_beam as beam, arrayds
        >>> from arrayds.beam import WriteToArrayRecord
        >>> url = os.path.join(tempfile.mkdtemp(), "words")
        >>> with beam.Pipeline() as p:
        ...     _ = p | beam.Create([b"a", b"b", b"c"]) | WriteToArrayRecord(url)
        >>> ds = arrayds.records.open_records(url)
        >>> ds.serializer, sorted(ds)
        ('raw', [b'a', b'b', b'c'])
    """

    def __init__(
        self,
        url: str,
        component: str | None = None,
        *,
        serializer: SerializerSpec = "auto",
        compression: str = DEFAULT_COMPRESSION,
        group_size: int = 1,
        num_shards: int = 0,
        mode: str = "w-",
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        _check_shards(num_shards, allow_none=False)
        self.url = url
        self.component = component
        self.serializer = serializer
        self.compression = compression
        self.group_size = group_size
        self.num_shards = num_shards
        self.mode = mode
        self.storage_options = dict(storage_options) if storage_options else None

    def expand(self, pcoll: Any) -> Any:
        plan, expected = _records_write.prepare_write(
            self.url,
            self.component,
            self.mode,
            WriterOptions(self.compression, self.group_size),
            self.serializer,
            self.storage_options,
            self.num_shards or 1,
        )
        records = pcoll | "GlobalWindow" >> beam.WindowInto(GlobalWindows())
        if self.num_shards:
            results = (
                records
                | "ShardKey" >> beam.ParDo(_ShardKey(plan.serializer, self.num_shards, plan.where))
                | "GroupByShard" >> beam.GroupByKey()
                | "WriteShards" >> beam.Map(_write_keyed_shard, plan)
            )
        else:
            results = records | "WriteBundles" >> beam.ParDo(_WriteBundleShards(plan))
        settings = (self.mode, expected, self.num_shards)
        where = (self.url, self.component, self.storage_options)
        return results | "Commit" >> _CommitShards(plan, settings, where)


# ------------------------------------------------------------------------- reading


@dataclasses.dataclass(frozen=True)
class _File:
    url: str
    num_records: int
    size: int | None  # recorded byte size (a records manifest), None: unknown


class _ArrayRecordSource(iobase.BoundedSource):
    """The records of a list of ArrayRecord files as one range of global indices."""

    def __init__(
        self,
        files: Sequence[_File],
        decode: Any,
        storage_options: Mapping[str, Any] | None,
        dataset: str | None,
    ) -> None:
        self._files = list(files)
        self._decode = decode
        self._so = dict(storage_options) if storage_options else None
        self._dataset = dataset
        self._starts = [0]
        for f in self._files:
            self._starts.append(self._starts[-1] + f.num_records)

    @property
    def num_records(self) -> int:
        return self._starts[-1]

    def estimate_size(self) -> int:
        return sum(f.size or 0 for f in self._files) or self.num_records

    def split(
        self,
        desired_bundle_size: int,
        start_position: int | None = None,
        stop_position: int | None = None,
    ) -> Iterator[iobase.SourceBundle]:
        start = 0 if start_position is None else start_position
        stop = self.num_records if stop_position is None else stop_position
        for k, f in enumerate(self._files):
            lo, hi = max(start, self._starts[k]), min(stop, self._starts[k + 1])
            if lo >= hi:
                continue
            per_record = (f.size or f.num_records) / max(f.num_records, 1)
            step = max(1, int(max(desired_bundle_size, 1) // max(per_record, 1e-9)))
            for a in range(lo, hi, step):
                b = min(a + step, hi)
                yield iobase.SourceBundle((b - a) * per_record, self, a, b)

    def get_range_tracker(
        self, start_position: int | None, stop_position: int | None
    ) -> OffsetRangeTracker:
        start = 0 if start_position is None else start_position
        stop = self.num_records if stop_position is None else stop_position
        return OffsetRangeTracker(start, stop)

    def _reader(self, k: int) -> ArrayRecordReader:
        f = self._files[k]
        reader = ArrayRecordReader(f.url, storage_options=self._so, file_size=f.size)
        n = reader.num_records()
        if n != f.num_records:
            reader.close()
            where = f"the manifest of {self._dataset}" if self._dataset else "its footer"
            raise CorruptionError(
                f"ArrayRecord file {f.url} holds {n} records, {where} said {f.num_records}"
            )
        return reader

    def read(self, range_tracker: OffsetRangeTracker) -> Iterator[Any]:
        def stop() -> int:  # moves when the runner splits this range dynamically
            return math.ceil(range_tracker.stop_position())

        pos = int(range_tracker.start_position())
        decode = self._decode
        k = bisect.bisect_right(self._starts, pos) - 1
        while k < len(self._files) and pos < stop():
            base, end = self._starts[k], self._starts[k + 1]
            if pos < end:
                reader = self._reader(k)
                try:
                    while pos < min(end, stop()):
                        hi = min(end, stop(), pos + _READ_BATCH)
                        for rec in reader.read(pos - base, hi - base):
                            if not range_tracker.try_claim(pos):
                                return
                            yield rec if decode is None else decode(rec)
                            pos += 1
                finally:
                    reader.close()
            k += 1


def _url_of(fs: Any, path: str) -> str:
    return path if isinstance(fs, LocalFileSystem) else fs.unstrip_protocol(path)


def _plain_files(
    url_or_paths: str | Iterable[str], storage_options: Mapping[str, Any] | None
) -> list[_File]:
    out = []
    for fs, path in expand_paths(url_or_paths, storage_options=dict(storage_options or {})):
        url = _url_of(fs, path)
        with ArrayRecordReader(url, storage_options=storage_options) as r:
            out.append(_File(url, r.num_records(), None))
    return out


class ReadFromArrayRecord(beam.PTransform):
    """Read a records dataset, or plain ArrayRecord files, as a ``PCollection``.

    ``url_or_paths``: the URL of a records dataset (``component``: a node inside it),
    whose records are decoded with its serializer (``decode=False``: the stored
    bytes; a ``pickle`` dataset needs ``allow_pickle=True``), or a path, list of paths
    or glob of ArrayRecord files, whose records are bytes (a glob matching nothing is
    ``FileNotFoundError`` here, at pipeline construction).  The source splits by
    shard and record range and supports dynamic splitting.  A damaged or truncated
    shard raises :class:`arrayds.CorruptionError` naming the file.

    Example:
        >>> import os, tempfile, apache_beam as beam, arrayds
        >>> from arrayds.beam import ReadFromArrayRecord
        >>> path = os.path.join(tempfile.mkdtemp(), "a.array_record")
        >>> with arrayds.ArrayRecordWriter(path) as w:
        ...     w.write_many([b"x", b"y"])
        2
        >>> from apache_beam.testing.util import assert_that, equal_to
        >>> with beam.Pipeline() as p:
        ...     _ = assert_that(p | ReadFromArrayRecord(path), equal_to([b"x", b"y"]))
    """

    def __init__(
        self,
        url_or_paths: str | Iterable[str],
        component: str | None = None,
        *,
        decode: bool = True,
        allow_pickle: bool = False,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        so = dict(storage_options) if storage_options else None
        if isinstance(url_or_paths, os.PathLike):
            url_or_paths = os.fspath(url_or_paths)
        if isinstance(url_or_paths, str) and _records_manifest.is_records(
            url_or_paths, component, storage_options=so
        ):
            ds = _records_handle.open_records(
                url_or_paths, component, storage_options=so, allow_pickle=allow_pickle
            )
            dec = ds.decoder().decode if decode else None
            files = [
                _File(path, s.num_records, s.file_size or None)
                for path, s in zip(ds.shard_paths, ds.shards, strict=True)
            ]
            self.source = _ArrayRecordSource(files, dec, so, ds.url)
        else:
            if component is not None:
                raise FileNotFoundError(
                    f"no records dataset at {url_or_paths!r} (component {component!r})"
                )
            self.source = _ArrayRecordSource(_plain_files(url_or_paths, so), None, so, None)

    def expand(self, pbegin: Any) -> Any:
        return pbegin | beam.io.Read(self.source)


# ------------------------------------------------------------------------ conversion


class _ConvertFile(beam.DoFn):
    """``(index, TFRecord URL) -> shard index`` streamed in constant memory."""

    def __init__(
        self, plan: WritePlan, storage_options: Any, compression: Any, verify: bool
    ) -> None:
        self._plan = plan
        self._args = (storage_options, compression, verify)

    def process(self, element: tuple[int, str]) -> Iterator[dict[str, Any]]:
        index, url = element
        so, compression, verify = self._args
        recs = iter_tfrecord(url, storage_options=so, compression=compression, verify=verify)
        yield _records_write.write_records_shard(recs, index, self._plan)


def _read_tfrecords(url: str, so: Any, compression: Any, verify: bool) -> Iterator[bytes]:
    return iter_tfrecord(url, storage_options=so, compression=compression, verify=verify)


def tfrecord_to_arrayrecord(
    pipeline_or_options: beam.Pipeline | Any,
    src_glob: str | Iterable[str],
    url: str,
    *,
    component: str | None = None,
    num_shards: int | None = None,
    mode: str = "w-",
    compression: str = DEFAULT_COMPRESSION,
    group_size: int = 1,
    storage_options: Mapping[str, Any] | None = None,
    input_storage_options: Mapping[str, Any] | None = None,
    input_compression: str | None = None,
    verify: bool = True,
) -> RecordsDataset | Any:
    """Convert TFRecord files into a records dataset (serializer ``raw``) with Beam.

    ``pipeline_or_options``: a ``beam.Pipeline`` (the conversion is added to it and
    its output ``PCollection``, holding the dataset, is returned; run the pipeline
    yourself) or ``PipelineOptions``/``None`` (a pipeline is built, run and waited for,
    and the :class:`arrayds.records.RecordsDataset` is returned).  ``num_shards=None``:
    one shard per input file, each streamed by one worker in constant memory;
    otherwise the records are regrouped into exactly ``num_shards`` shards.  Every CRC
    is checked (``verify=False`` skips them); a damaged input is
    :class:`arrayds.CorruptionError` naming the file, and nothing is committed.  The
    inputs are listed at construction: a glob matching nothing is
    ``FileNotFoundError``.

    Example:
        >>> import os, tempfile
        >>> from arrayds.files.tfrecord import write_tfrecord
        >>> from arrayds.beam import tfrecord_to_arrayrecord
        >>> d = tempfile.mkdtemp()
        >>> for k in range(2):
        ...     _ = write_tfrecord(os.path.join(d, f"in-{k}.tfrecord"), [b"%d" % k] * 3)
        >>> ds = tfrecord_to_arrayrecord(None, os.path.join(d, "*.tfrecord"), d + "/out")
        >>> ds.num_shards, ds.serializer, ds.data_source()[3]
        (2, 'raw', b'1')
    """
    _check_shards(num_shards, allow_none=True)
    in_so = storage_options if input_storage_options is None else input_storage_options
    in_so = dict(in_so) if in_so else None
    files = [_url_of(fs, p) for fs, p in expand_paths(src_glob, storage_options=in_so)]
    args = (files, url, component, num_shards, mode, compression, group_size)
    args += (storage_options, in_so, input_compression, verify)
    if isinstance(pipeline_or_options, beam.Pipeline):
        return _convert(pipeline_or_options, *args)
    with beam.Pipeline(options=pipeline_or_options) as p:
        _convert(p, *args)
    return _records_handle.open_records(url, component, storage_options=storage_options)


def _convert(
    p: beam.Pipeline,
    files: list[str],
    url: str,
    component: str | None,
    num_shards: int | None,
    mode: str,
    compression: str,
    group_size: int,
    storage_options: Mapping[str, Any] | None,
    in_so: Any,
    input_compression: str | None,
    verify: bool,
) -> Any:
    so = dict(storage_options) if storage_options else None
    if num_shards is not None:
        return (
            p
            | "TFRecordFiles" >> beam.Create(files)
            | "Reshuffle" >> beam.Reshuffle()
            | "ReadTFRecord" >> beam.FlatMap(_read_tfrecords, in_so, input_compression, verify)
            | "Write"
            >> WriteToArrayRecord(
                url,
                component,
                serializer="raw",
                compression=compression,
                group_size=group_size,
                num_shards=num_shards,
                mode=mode,
                storage_options=so,
            )
        )
    plan, expected = _records_write.prepare_write(
        url, component, mode, WriterOptions(compression, group_size), "raw", so, len(files)
    )
    return (
        p
        | "TFRecordFiles" >> beam.Create(list(enumerate(files)))
        | "Reshuffle" >> beam.Reshuffle()
        | "ConvertFiles" >> beam.ParDo(_ConvertFile(plan, in_so, input_compression, verify))
        | "Commit" >> _CommitShards(plan, (mode, expected, 0), (url, component, so))
    )
