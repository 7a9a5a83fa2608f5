"""Convert other formats into an arrayds dataset (``arrayds convert``).

:func:`convert` recognises the source by its content and name:

* ``.npy`` files (any fixed-size dtype; read by byte ranges, local or remote);
* zarr arrays and groups (v2 or v3, sharded or not; a group's tree is mirrored);
* HDF5 files (every dataset, groups mirrored; ``file.h5#/path`` converts one
  dataset or group);
* TFRecord files (a file, a glob or a folder of ``*.tfrecord*``) -> a records set
  with the ``raw`` serializer;
* loose ArrayRecord files (a file, a glob or a folder of ``*.array_record*``) -> a
  records set with the ``raw`` serializer (one shard per input file);
* JSON lines (``*.jsonl``) -> a records set of the parsed values.

Everything becomes one dask graph: a task per output shard that reads its part of
the source and writes the shard, then a commit per node, computed together (in
parallel, with a progress bar on a terminal). A source that is not one of the above
is a ``ValueError`` listing what is supported.

>>> import os, tempfile, numpy as np, arrayds
>>> d = tempfile.mkdtemp()
>>> np.save(os.path.join(d, "x.npy"), np.arange(12).reshape(3, 4))
>>> result = convert(os.path.join(d, "x.npy"), os.path.join(d, "ds"), component="x")
>>> result.kind, result.nodes
('npy', ['x'])
>>> arrayds.open_array(os.path.join(d, "ds"), "x")[2].tolist()
[8, 9, 10, 11]
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import fsspec
import numpy as np

from . import progress as _progress
from .errors import CorruptionError
from .nodes.names import MANIFEST, check_component, join_component

__all__ = ["SUPPORTED", "ConvertResult", "convert", "detect"]

SUPPORTED = (
    ".npy files",
    "zarr arrays and groups (a folder with zarr.json, .zarray or .zgroup)",
    "HDF5 files (.h5/.hdf5; 'file.h5#/path' for one dataset or group)",
    "TFRecord files (*.tfrecord*, a glob or a folder of them)",
    "ArrayRecord files (*.array_record*, a glob or a folder of them)",
    "JSON lines (*.jsonl, a glob or a folder of them)",
)
"""What :func:`convert` reads, for messages and ``arrayds convert --help``."""

_NPY_MAGIC = b"\x93NUMPY"
_HDF5_MAGIC = b"\x89HDF\r\n\x1a\n"
_CHUNK_TARGET = 4 << 20  # default chunk size when the source has none


@dataclass
class ConvertResult:
    """What :func:`convert` wrote: the source ``kind`` and the nodes (components)."""

    kind: str
    source: str
    url: str
    nodes: list[str] = field(default_factory=list)


def _unsupported(src: str, why: str) -> ValueError:
    return ValueError(f"cannot convert {src!r}: {why}. Supported sources: " + "; ".join(SUPPORTED))


# ------------------------------------------------------------------ detection


def _split_inner(src: str) -> tuple[str, str]:
    """``file.h5#/a/b`` -> (``file.h5``, ``a/b``)."""
    if "#" in src:
        outer, inner = src.rsplit("#", 1)
        return outer, inner.strip("/")
    return src, ""


def _files_by_suffix(fs: Any, paths: list[str]) -> str | None:
    names = [os.path.basename(p) for p in paths]
    if names and all(".tfrecord" in n or n.endswith(".tfrec") for n in names):
        return "tfrecord"
    if names and all(".array_record" in n for n in names):
        return "arrayrecord"
    if names and all(n.endswith((".jsonl", ".jsonl.gz", ".ndjson")) for n in names):
        return "jsonlines"
    return None


def detect(
    src: str, storage_options: Mapping[str, Any] | None = None
) -> tuple[str, Any, list[str]]:
    """Recognise ``src`` -> (kind, file system, paths). ``ValueError`` listing the
    supported sources if it is none of them; ``FileNotFoundError`` if it is missing.

    >>> import os, tempfile, numpy as np
    >>> p = os.path.join(tempfile.mkdtemp(), "a.npy"); np.save(p, np.zeros(3))
    >>> detect(p)[0]
    'npy'
    """
    outer, _inner = _split_inner(src)
    fs, path = fsspec.core.url_to_fs(outer, **dict(storage_options or {}))
    if set("*?[") & set(path):
        paths = sorted(fs.glob(path))
        if not paths:
            raise FileNotFoundError(2, f"no file matches {src!r}", src)
        kind = _files_by_suffix(fs, paths)
        if kind is None:
            raise _unsupported(src, "the files it matches are not all of one supported kind")
        return kind, fs, paths
    if not fs.exists(path):
        raise FileNotFoundError(2, f"the source {src!r} does not exist", src)
    if fs.isdir(path):
        entries = {os.path.basename(p.rstrip("/")) for p in fs.ls(path, detail=False)}
        if entries & {"zarr.json", ".zarray", ".zgroup"}:
            return "zarr", fs, [path]
        if MANIFEST in entries:
            raise _unsupported(src, "it is already an arrayds dataset")
        files = sorted(p for p in fs.find(path) if not os.path.basename(p).startswith("."))
        kind = _files_by_suffix(fs, files)
        if kind is None:
            raise _unsupported(src, "it is a folder without zarr metadata or record files")
        return kind, fs, files
    with fs.open(path, "rb") as f:
        head = f.read(8)
    if head.startswith(_NPY_MAGIC):
        return "npy", fs, [path]
    if head == _HDF5_MAGIC:
        return "hdf5", fs, [path]
    kind = _files_by_suffix(fs, [path])
    if kind is not None:
        return kind, fs, [path]
    raise _unsupported(src, "its content is not recognised")


# ---------------------------------------------------------------------- .npy


class NpySource:
    """A C-ordered ``.npy`` file read by byte ranges (picklable; for ``dask``):
    ``src[sel]`` reads the rows (axis 0) ``sel`` covers in one ranged read."""

    def __init__(
        self,
        url: str,
        storage_options: Mapping[str, Any] | None,
        dtype: np.dtype,
        shape: tuple[int, ...],
        offset: int,
    ) -> None:
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.dtype = dtype
        self.shape = shape
        self.ndim = len(shape)
        self.offset = offset

    def __getitem__(self, key: tuple[slice, ...]) -> np.ndarray:
        fs, path = fsspec.core.url_to_fs(self.url, **self.storage_options)
        if self.ndim == 0:
            raw = fs.cat_file(path, start=self.offset, end=self.offset + self.dtype.itemsize)
            return np.frombuffer(raw, dtype=self.dtype).reshape(())[key]
        if not isinstance(key, tuple):
            key = (key,)
        first = key[0] if key else slice(None)
        if not isinstance(first, slice):
            raise TypeError(f"{self.url}: NpySource takes slices, got {first!r}")
        r0, r1, _ = first.indices(self.shape[0])
        row = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        if r1 <= r0:
            return np.empty((0,) + self.shape[1:], dtype=self.dtype)[(slice(None),) + key[1:]]
        start = self.offset + r0 * row
        raw = fs.cat_file(path, start=start, end=start + (r1 - r0) * row)
        if len(raw) != (r1 - r0) * row:
            raise CorruptionError(
                f"{self.url}: the .npy file is truncated (rows {r0}..{r1 - 1} are missing)"
            )
        arr = np.frombuffer(raw, dtype=self.dtype).reshape((r1 - r0,) + self.shape[1:])
        step = first.step or 1
        return arr[(slice(None, None, step),) + tuple(key[1:])]


def _npy_header(fs: Any, path: str, src: str) -> tuple[np.dtype, tuple[int, ...], bool, int]:
    from numpy.lib import format as npf

    with fs.open(path, "rb") as f:
        version = npf.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = npf.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = npf.read_array_header_2_0(f)
        else:
            raise ValueError(f"{src}: .npy format version {version} is not supported")
        offset = f.tell()
    return np.dtype(dtype), tuple(int(n) for n in shape), bool(fortran), offset


def _row_chunks(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    if not shape:
        return ()
    row = max(1, int(np.prod(shape[1:], dtype=np.int64)) * itemsize)
    rows = max(1, min(shape[0] or 1, _CHUNK_TARGET // row))
    return (rows,) + tuple(int(n) for n in shape[1:])


def _npy_array(src: str, fs: Any, path: str, storage_options: Any, chunks: Any) -> Any:
    import dask.array as da
    from dask.base import tokenize

    dtype, shape, fortran, offset = _npy_header(fs, path, src)
    if dtype.hasobject:
        raise ValueError(f"{src}: .npy files of Python objects cannot be converted")
    url = fs.unstrip_protocol(path)
    if fortran and len(shape) > 1:
        with fs.open(path, "rb") as f:
            data = np.load(f)  # Fortran order: no row ranges; load it whole
        return da.from_array(
            np.ascontiguousarray(data), chunks=chunks or _row_chunks(shape, dtype.itemsize)
        )
    source = NpySource(url, storage_options, dtype, shape, offset)
    return da.from_array(
        source,
        chunks=chunks or _row_chunks(shape, dtype.itemsize),
        asarray=True,
        fancy=False,
        name="npy-" + tokenize(url, shape, dtype.str, offset),
    )


# ---------------------------------------------------------------------- zarr


def _json_safe(value: Any) -> Any:
    """Attributes from zarr/HDF5 as strict JSON (numpy values converted)."""
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, np.generic):
        return _json_safe(value.item())
    if isinstance(value, bytes):
        return value.decode("utf8", "replace")
    if isinstance(value, float) and not np.isfinite(value):
        return str(value)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return str(value)
    return value


def _zarr_nodes(src: str, path_url: str, inner: str, storage_options: Any) -> Iterator[Any]:
    """(relative name, zarr Array or Group) for the node and everything below."""
    import zarr

    root = zarr.open(
        path_url, mode="r", path=inner or None, storage_options=storage_options or None
    )

    def walk(node: Any, rel: str) -> Iterator[Any]:
        yield rel, node
        if isinstance(node, zarr.Group):
            for name, child in sorted(node.members(), key=lambda kv: kv[0]):
                yield from walk(child, f"{rel}/{name}" if rel else name)

    yield from walk(root, "")


def _zarr_dims(arr: Any) -> list[str] | None:
    names = getattr(getattr(arr, "metadata", None), "dimension_names", None)
    if names and all(isinstance(n, str) for n in names):
        return list(names)
    dims = arr.attrs.get("_ARRAY_DIMENSIONS")
    if isinstance(dims, list) and len(dims) == arr.ndim:
        return [str(d) for d in dims]
    return None


# ---------------------------------------------------------------------- HDF5

_h5_files: dict[tuple[str, int], Any] = {}
_h5_lock = threading.Lock()


def _h5_open(url: str, storage_options: Mapping[str, Any] | None) -> Any:
    """One open ``h5py.File`` per (url, process)."""
    import h5py
    from fsspec.implementations.local import LocalFileSystem

    key = (url, os.getpid())
    with _h5_lock:
        f = _h5_files.get(key)
        if f is None:
            fs, path = fsspec.core.url_to_fs(url, **dict(storage_options or {}))
            if isinstance(fs, LocalFileSystem):
                f = h5py.File(path, "r")
            else:
                f = h5py.File(fs.open(path, "rb"), "r")
            _h5_files[key] = f
    return f


class H5Source:
    """One HDF5 dataset as a picklable array-like for ``dask.array.from_array``:
    each process opens the file once; h5py serialises reads internally."""

    def __init__(
        self,
        url: str,
        name: str,
        storage_options: Mapping[str, Any] | None,
        shape: tuple[int, ...],
        dtype: np.dtype,
    ) -> None:
        self.url = url
        self.name = name
        self.storage_options = dict(storage_options or {})
        self.shape = shape
        self.dtype = dtype
        self.ndim = len(shape)

    def __getitem__(self, key: Any) -> np.ndarray:
        ds = _h5_open(self.url, self.storage_options)[self.name]
        return np.asarray(ds[key])


def _h5_nodes(url: str, inner: str, storage_options: Any) -> list[tuple[str, str, Any]]:
    """(relative name, 'group'|'dataset', h5py object) below ``inner``."""
    import h5py

    f = _h5_open(url, storage_options)
    top = f[inner] if inner else f
    out: list[tuple[str, str, Any]] = []
    if isinstance(top, h5py.Dataset):
        return [("", "dataset", top)]
    out.append(("", "group", top))

    def visit(name: str, obj: Any) -> None:
        if isinstance(obj, h5py.Dataset):
            out.append((name, "dataset", obj))
        elif isinstance(obj, h5py.Group):
            out.append((name, "group", obj))

    top.visititems(visit)
    return out


# ------------------------------------------------------------- ArrayRecord


def _arrayrecord_file(url: str, storage_options: Mapping[str, Any] | None) -> Iterator[bytes]:
    """The records of one ArrayRecord file, in order (a streaming source)."""
    from .files.arrayrecord import ArrayRecordReader

    with ArrayRecordReader(url, storage_options=storage_options) as r:
        yield from r


# ------------------------------------------------------------------- convert


@dataclass
class _Conversion:
    """A conversion being planned: the delayed writes of its nodes (one dask
    computation runs them all) and the result listing them."""

    dst: str
    mode: str
    compression: str
    shard_size: int | str | None
    storage_options: Mapping[str, Any] | None
    result: ConvertResult
    work: list[Any] = field(default_factory=list)

    def write_array(self, x: Any, node: str, **kw: Any) -> None:
        from .api import to_arrayrecord

        d = to_arrayrecord(
            x,
            self.dst,
            node or None,
            mode=self.mode,
            compression=self.compression,
            shard_size=self.shard_size,
            compute=False,
            storage_options=self.storage_options,
            **kw,
        )
        self.work.append(d)
        self.result.nodes.append(node)

    def group(self, node: str, attrs: dict[str, Any]) -> None:
        from .dataset import open_group

        g = open_group(
            self.dst,
            node or None,
            mode="a",
            storage_options=self.storage_options,
            attrs=attrs or None,
        )
        if attrs and dict(g.attrs) != attrs:
            g.attrs.update(attrs)
        self.result.nodes.append(node)

    def records(self, delayed_write: Any, node: str) -> None:
        self.work.append(delayed_write)
        self.result.nodes.append(node)


def _plan_zarr(
    conv: _Conversion, src: str, url: str, inner: str, base: str, in_opts: Any, chunks: Any
) -> None:
    import dask.array as da
    import zarr

    for rel, obj in _zarr_nodes(src, url, inner, in_opts):
        node = join_component(base, rel) if rel else base
        attrs = _json_safe({k: v for k, v in obj.attrs.items() if k != "_ARRAY_DIMENSIONS"})
        if isinstance(obj, zarr.Group):
            conv.group(node, attrs)
            continue
        x = da.from_zarr(obj)
        if chunks is not None:
            x = x.rechunk(chunks)
        fill = obj.fill_value
        conv.write_array(
            x,
            node,
            attrs=attrs or None,
            dims=_zarr_dims(obj),
            fill_value=0 if fill is None else fill,
        )


def _plan_hdf5(
    conv: _Conversion, src: str, url: str, inner: str, base: str, in_opts: Any, chunks: Any
) -> None:
    import dask.array as da
    from dask.base import tokenize

    outer, _inner = _split_inner(src)
    h5_nodes = _h5_nodes(url, inner, in_opts)
    for _rel, what, obj in h5_nodes:  # check every dtype before writing anything
        dtype = np.dtype(obj.dtype) if what == "dataset" else None
        if dtype is not None and (dtype.hasobject or dtype.fields is not None):
            raise ValueError(
                f"{src}: HDF5 dataset {obj.name!r} has dtype {obj.dtype}, which arrayds "
                f"cannot store (fixed-size numeric, bool, datetime, bytes and unicode "
                f"dtypes only); convert the other datasets one by one with "
                f"'{outer}#/path'"
            )
    for rel, what, obj in h5_nodes:
        node = join_component(base, rel) if rel else base
        attrs = _json_safe(dict(obj.attrs))
        if what == "group":
            conv.group(node, attrs)
            continue
        dtype = np.dtype(obj.dtype)
        shape = tuple(int(n) for n in obj.shape)
        source = H5Source(url, obj.name, in_opts, shape, dtype)
        ch = chunks or obj.chunks or _row_chunks(shape, dtype.itemsize)
        x = da.from_array(
            source,
            chunks=ch,
            asarray=True,
            fancy=False,
            name="h5-" + tokenize(url, obj.name, shape, dtype.str),
        )
        fill = obj.fillvalue
        conv.write_array(x, node, attrs=attrs or None, fill_value=0 if fill is None else fill)


def _plan_records(
    conv: _Conversion,
    kind: str,
    src: str,
    urls: list[str],
    base: str,
    num_shards: int | None,
    in_opts: Any,
) -> None:
    if kind in ("tfrecord", "jsonlines"):
        from .convert import jsonlines_to_arrayrecord, tfrecord_to_arrayrecord

        fn = tfrecord_to_arrayrecord if kind == "tfrecord" else jsonlines_to_arrayrecord
        d = fn(
            urls,
            conv.dst,
            num_shards,
            component=base or None,
            mode=conv.mode,
            compression=conv.compression,
            compute=False,
            storage_options=conv.storage_options,
            input_storage_options=in_opts,
        )
        conv.records(d, base)
        return
    from .kinds.records.write import write_from_sources

    if num_shards is not None and num_shards != len(urls):
        raise ValueError(
            f"{src}: ArrayRecord files convert one shard per input file ({len(urls)}); "
            f"num_shards={num_shards} is not supported for them"
        )
    d = write_from_sources(
        [(_arrayrecord_file, (u, in_opts or None)) for u in urls],
        conv.dst,
        base or None,
        mode=conv.mode,
        compression=conv.compression,
        serializer="raw",
        compute=False,
        storage_options=conv.storage_options,
    )
    conv.records(d, base)


def convert(
    src: str,
    dst: str,
    *,
    component: str | None = None,
    mode: str = "w-",
    chunks: Any = None,
    compression: str = "zstd:3",
    shard_size: int | str | None = None,
    num_shards: int | None = None,
    storage_options: Mapping[str, Any] | None = None,
    source_options: Mapping[str, Any] | None = None,
    progress: bool = False,
    scheduler: Any = None,
) -> ConvertResult:
    """Convert the source ``src`` into the dataset at ``dst`` (+ ``component``).

    Arrays keep the source's chunking (zarr, chunked HDF5) or get chunks of about
    4 MiB along the first axis (``chunks=`` overrides, as for ``to_arrayrecord``);
    attributes and dimension names come along. Record sources become records sets
    (``num_shards``: default one shard per input file). ``mode`` is the
    ``to_arrayrecord`` mode for every written node. ``storage_options`` apply to
    ``dst``, ``source_options`` (default: the same) to ``src``. All writes are one
    dask computation (``scheduler``: a dask scheduler name, or None for the
    default / the active ``distributed.Client``), shown with a progress bar when
    ``progress`` and on a terminal. Nothing of a node is visible before its commit.
    """
    from .dataset import open_group

    try:
        src = os.fspath(src)
        dst = os.fspath(dst)
        base = check_component(component)
        in_opts = dict(storage_options or {}) if source_options is None else dict(source_options)
        kind, fs, paths = detect(src, in_opts)
        conv = _Conversion(
            dst, mode, compression, shard_size, storage_options, ConvertResult(kind, src, dst)
        )
        if mode == "w" and kind in ("zarr", "hdf5"):
            open_group(dst, base or None, mode="w", storage_options=storage_options)
        _outer, inner = _split_inner(src)
        if kind == "npy":
            conv.write_array(_npy_array(src, fs, paths[0], in_opts, chunks), base)
        elif kind == "zarr":
            _plan_zarr(conv, src, fs.unstrip_protocol(paths[0]), inner, base, in_opts, chunks)
        elif kind == "hdf5":
            _plan_hdf5(conv, src, fs.unstrip_protocol(paths[0]), inner, base, in_opts, chunks)
        elif kind in ("tfrecord", "jsonlines", "arrayrecord"):
            urls = [fs.unstrip_protocol(p) for p in paths]
            _plan_records(conv, kind, src, urls, base, num_shards, in_opts)
        else:  # pragma: no cover - detect() returns only the kinds above
            raise _unsupported(src, f"unknown kind {kind!r}")
        if conv.work:
            _progress.compute(*conv.work, progress=progress, scheduler=scheduler)
    finally:
        _close_h5_files()
    return conv.result


def _close_h5_files() -> None:
    """Close the HDF5 files this process opened for a conversion."""
    pid = os.getpid()
    with _h5_lock:
        for key in [k for k in _h5_files if k[1] == pid]:
            try:
                _h5_files.pop(key).close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
