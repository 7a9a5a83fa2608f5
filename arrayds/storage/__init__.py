"""Storage implementations of :class:`arrayds.abc.store.Store`, and :func:`get_store`.

* :class:`~arrayds.storage.local.LocalStore` — the local file system;
* :class:`~arrayds.storage.fsspec.FsspecStore` — every other fsspec file system
  (``memory://``, S3, GCS, ...);
* :class:`~arrayds.storage.base.BaseStore` — what both share (naming, node-addressed
  methods); :func:`new_store` makes the implementation :func:`store_class` picks, and
  :func:`get_store` keeps one per process and URL.

Which class serves a URL is decided by its protocol (the first one of a chained URL):
``file``/``local`` and plain paths -> ``LocalStore``, anything else ->
``FsspecStore``, unless :func:`register_store` named another class for it. ``s3://``,
``gs://`` and ``az://`` roots can instead be served by
:class:`~arrayds.storage.obstore.ObstoreStore` (the ``obstore`` backend, ``pip install
arrayds[obstore]``): ``storage_options={"backend": "obstore"}`` for one store, or
:data:`BACKEND_ENV` for every store opened without a ``"backend"`` (the default is
:data:`DEFAULT_BACKEND`). ``"backend"`` is never passed on to fsspec.

>>> st = get_store("memory://storage-doc")
>>> get_store("memory://storage-doc") is st, type(st).__name__
(True, 'FsspecStore')
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from fsspec.core import split_protocol

from .base import BaseStore, options_token
from .fsspec import FsspecStore
from .local import LocalStore

__all__ = [
    "BACKENDS",
    "BACKEND_ENV",
    "DEFAULT_BACKEND",
    "clear_store_cache",
    "BaseStore",
    "FsspecStore",
    "LocalStore",
    "get_store",
    "new_store",
    "register_store",
    "store_class",
]

BACKENDS = ("fsspec", "obstore")
"""The backends that can serve object-store URLs (``storage_options["backend"]``)."""

DEFAULT_BACKEND = "fsspec"
"""The backend of a store opened without ``"backend"`` when :data:`BACKEND_ENV` is
unset: fsspec (docs/design/object-store-backends.md says why)."""

BACKEND_ENV = "ARRAYDS_STORAGE_BACKEND"
"""The environment variable naming the default backend (one of :data:`BACKENDS`);
worker processes that open stores from a URL and options inherit it."""

_registry: dict[str, type[BaseStore]] = {"file": LocalStore, "local": LocalStore}
_instances: dict[tuple[str, str], BaseStore] = {}
_lock = threading.Lock()


def register_store(protocol: str, cls: type[BaseStore]) -> None:
    """Serve URLs of ``protocol`` with ``cls`` (a :class:`BaseStore` subclass
    implementing :class:`arrayds.abc.store.Store`) from now on.

    >>> register_store("memory", FsspecStore)  # what it is already
    """
    if not (isinstance(cls, type) and issubclass(cls, BaseStore)):
        raise TypeError(f"register_store needs a BaseStore subclass, got {cls!r}")
    _registry[protocol] = cls


def store_class(
    url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> type[BaseStore]:
    """The store class that serves ``url`` opened with ``storage_options`` (see the
    module docstring). An unknown backend is a ``ValueError``; the obstore backend
    when obstore is not installed an ``ImportError`` naming the extra to install.

    >>> store_class("/tmp/x").__name__, store_class("s3://b/x", {"backend": "fsspec"}).__name__
    ('LocalStore', 'FsspecStore')
    >>> store_class("s3://b/x", {"backend": "boto"})
    Traceback (most recent call last):
    ValueError: storage_options backend must be one of 'fsspec', 'obstore', got 'boto'
    """
    text = os.fspath(url) if isinstance(url, (str, os.PathLike)) else ""
    if "::" in text:  # a chained URL: its outermost file system serves it
        protocol = text.split("::", 1)[0].split("://", 1)[0]
    else:
        protocol = split_protocol(text)[0] or "file"
    chosen = (storage_options or {}).get("backend")
    if chosen is not None:
        backend, where = chosen, "storage_options backend"
    else:
        backend, where = os.environ.get(BACKEND_ENV) or DEFAULT_BACKEND, BACKEND_ENV
    if backend not in BACKENDS:
        choices = ", ".join(repr(b) for b in BACKENDS)
        raise ValueError(f"{where} must be one of {choices}, got {backend!r}")
    if protocol in _registry:
        return _registry[protocol]
    if backend == "obstore":
        try:
            from .obstore import PROTOCOLS, ObstoreStore
        except ImportError as e:
            raise ImportError(
                f"{where} {backend!r} needs obstore: pip install arrayds[obstore] ({e})"
            ) from e
        if protocol in PROTOCOLS:
            return ObstoreStore
        if chosen is not None:
            raise ValueError(
                f"{text}: the obstore backend serves {', '.join(PROTOCOLS)} URLs, not "
                f"{protocol}://; use the fsspec backend"
            )
    return FsspecStore


def new_store(
    url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> BaseStore:
    """A new store of ``url`` (the implementation :func:`store_class` picks), not
    shared with other callers (:func:`get_store` keeps one per process).

    >>> new_store("memory://doc-new-store").exists("x")
    False
    """
    return store_class(url, storage_options)(url, storage_options)


def get_store(
    url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> BaseStore:
    """The store of ``url`` with ``storage_options``, one per process and pair (stores
    are cheap, but each holds an fsspec file system and caches)."""
    key_url = os.fspath(url)
    if "://" not in key_url and "::" not in key_url:
        # a relative local path means another folder after os.chdir
        key_url = os.path.abspath(key_url)
    key = (key_url, options_token(storage_options))
    st = _instances.get(key)
    if st is None:
        st = new_store(url, storage_options)
        with _lock:
            st = _instances.setdefault(key, st)
    return st


def clear_store_cache() -> None:
    """Forget the stores :func:`get_store` made (benchmarks use it for cold reads)."""
    with _lock:
        _instances.clear()


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
