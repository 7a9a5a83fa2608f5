"""What the ArrayRecord reader, writer and data source share: paths and file systems,
the codecs the engine was built with, index arrays, reads run at once on a pool.

>>> codecs()["zstd"], fspath("a/b.array_record", "reader")
(True, 'a/b.array_record')
"""

from __future__ import annotations

import contextvars
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Executor, wait
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from .. import _native

if TYPE_CHECKING:  # pragma: no cover
    import fsspec

    PathLike = Union[str, os.PathLike[str]]  # noqa: UP007
else:
    PathLike = Union[str, os.PathLike]  # noqa: UP007
"""A path or URL of a file: a str or an ``os.PathLike``."""


BLOCK = 65536


def codecs() -> dict[str, bool]:
    """Which compression codecs this build of the engine supports.

    ``uncompressed`` and ``zstd`` are always there; ``brotli`` and ``snappy`` depend on
    the libraries found when the engine was built.

    >>> import arrayds
    >>> arrayds.codecs()["zstd"]
    True
    """
    return dict(_native.codecs())


# --------------------------------------------------------------------------- paths


def fspath(path: PathLike, what: str) -> str:
    try:
        p = os.fspath(path)
    except TypeError:
        raise TypeError(
            f"{what}: path must be a str or os.PathLike, got {type(path).__name__}"
        ) from None
    if not isinstance(p, str):
        raise TypeError(f"{what}: path must be a str, got {type(p).__name__}")
    if not p:
        raise ValueError(f"{what}: path is empty")
    return p


def use_mmap() -> bool:
    """False when ``ARRAYDS_MMAP`` turns memory-mapping of local files off.

    >>> use_mmap() in (True, False)
    True
    """
    return os.environ.get("ARRAYDS_MMAP", "1").strip().lower() not in ("0", "false", "no", "off")


def resolve_fs(
    path: str, storage_options: Mapping[str, Any] | None
) -> tuple[fsspec.AbstractFileSystem | None, str]:
    """(None, local path) for local files, else (filesystem, path inside it). A
    ``"backend"`` in ``storage_options`` (arrayds's choice of store,
    :func:`arrayds.storage.store_class`) is no fsspec option: it is dropped."""
    if "://" not in path and "::" not in path:
        return None, path
    import fsspec.core
    from fsspec.implementations.local import LocalFileSystem

    opts = {k: v for k, v in (storage_options or {}).items() if k != "backend"}
    fs, inner = fsspec.core.url_to_fs(path, **opts)
    if isinstance(fs, LocalFileSystem):
        return None, inner
    return fs, inner


def remote_url(path: str) -> bool:
    """Whether ``path`` is the URL of a file on a file system other than the local one
    (``s3://b/k``, ``memory://x``; not a plain path, ``file://`` or a chained URL),
    told from the URL alone: no file system is made.

    >>> remote_url("s3://bucket/a.array_record"), remote_url("/tmp/a"), remote_url("file:///a")
    (True, False, False)
    """
    if "::" in path or "://" not in path:
        return False
    return path.split("://", 1)[0] not in ("file", "local")


def index_array(key: Any, n: int, name: str) -> np.ndarray:
    """A list/tuple/array of indices (or a boolean mask) -> checked int64 array."""
    if isinstance(key, np.ndarray):
        arr = key
    else:
        if isinstance(key, (str, bytes)):
            raise TypeError(f"{name}: record indices must be integers, got {type(key).__name__}")
        arr = np.asarray(key)
        if arr.size == 0:
            return np.empty(0, dtype=np.int64)
    if arr.ndim != 1:
        raise TypeError(f"{name}: record indices must be a 1-d sequence, got shape {arr.shape}")
    kind = arr.dtype.kind
    if kind == "b":
        if arr.shape[0] != n:
            raise IndexError(
                f"{name}: a boolean mask must have one entry per record ({n}), got {arr.shape[0]}"
            )
        return np.flatnonzero(arr).astype(np.int64, copy=False)
    if kind not in "iu":
        if arr.size == 0:
            return np.empty(0, dtype=np.int64)
        raise TypeError(f"{name}: record indices must be integers, got dtype {arr.dtype}")
    if arr.size == 0:
        return np.empty(0, dtype=np.int64)
    if kind == "u":
        hi = int(arr.max())
        if hi >= n:
            raise IndexError(f"{name}: record index {hi} is out of range for {n} records")
        return arr.astype(np.int64)
    idx = arr.astype(np.int64, copy=False)
    lo = int(idx.min())
    hi = int(idx.max())
    if hi >= n or lo < -n:
        bad = hi if hi >= n else lo
        raise IndexError(f"{name}: record index {bad} is out of range for {n} records")
    if lo < 0:
        idx = np.where(idx < 0, idx + n, idx)
    return idx


def raise_closed(what: str) -> Callable[..., Any]:
    def closed(*args: Any, **kwargs: Any) -> Any:
        raise ValueError(f"{what} is closed")

    return closed


def run_each(pool: Executor, fn: Callable[[Any], Any], args: Sequence[Any]) -> list[Any]:
    """``[fn(a) for a in args]``, run at once on ``pool`` (each call in a copy of this
    thread's context, so it reads with this thread's coalescing options; a single call
    runs here). Every call has ended before this returns or raises: the first failure
    cancels the calls not yet started and is raised once the running ones are done,
    so no read outlives the request that made it, nor writes into its output after it
    has failed.

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(2) as pool:
    ...     run_each(pool, lambda x: x * x, [1, 2, 3])
    [1, 4, 9]
    """
    if len(args) <= 1:
        return [fn(a) for a in args]
    futures = [pool.submit(contextvars.copy_context().run, fn, a) for a in args]
    done, pending = wait(futures, return_when=FIRST_EXCEPTION)
    failed = [f for f in futures if f in done and f.exception() is not None]
    if failed:
        for f in pending:
            f.cancel()
        wait(futures)
        raise failed[0].exception()  # type: ignore[misc]
    return [f.result() for f in futures]
