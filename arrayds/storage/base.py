"""What every store implementation shares: opening a URL, naming keys, errors that
name the URL, and the node-addressed methods the dataset layer still calls.

:class:`BaseStore` implements the naming part of :class:`arrayds.abc.store.Store`
(``url``, ``protocol``, ``token``, :meth:`~BaseStore.path`, :meth:`~BaseStore.url_of`,
:meth:`~BaseStore.display`, :attr:`~BaseStore.canonical_url`) once; the subclasses
:class:`arrayds.storage.local.LocalStore` and :class:`arrayds.storage.fsspec.FsspecStore`
implement reading and writing; :func:`arrayds.storage.new_store` makes the one the
URL's protocol calls for (:func:`arrayds.storage.store_class`).

Every key-addressed method that takes a ``key`` also accepts ``(node, name)``, the
node-addressed form (``name`` defaults to ``""``): ``exists("a", "b")`` is
``exists("a/b")``.

>>> from arrayds.storage import new_store
>>> st = new_store("memory://base-doc")
>>> type(st).__name__, st.path("a", "b"), st.display("a")
('FsspecStore', '/base-doc/a/b', 'memory://base-doc/a')
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

import fsspec

from ..abc.store import Keep

__all__ = ["BaseStore", "join_key", "options_token"]


def options_token(storage_options: Mapping[str, Any] | None) -> str:
    """The storage options as a stable string (sorted JSON), for cache keys."""
    return json.dumps(dict(storage_options or {}), sort_keys=True, default=repr)


def join_key(key: str, name: str = "") -> str:
    """``join_key("a", "b/c") == "a/b/c"``; ``""`` is the root.

    >>> join_key("", "x"), join_key("a"), join_key("a", "b")
    ('x', 'a', 'a/b')
    """
    if not name:
        return key
    return f"{key}/{name}" if key else name


class BaseStore:
    """A storage root: an fsspec file system and the root path inside it (see the
    module docstring). Subclasses implement the reading and writing methods of
    :class:`arrayds.abc.store.Store`."""

    local: bool = False
    """Whether keys are files of the local file system (the engine then maps them)."""

    def __init__(
        self, url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
    ):
        if isinstance(url, os.PathLike):
            url = os.fspath(url)
        if not isinstance(url, str):
            raise TypeError(f"dataset url must be a str or os.PathLike, got {type(url).__name__}")
        if not url:
            raise ValueError("dataset url is empty")
        self.url = url
        # "backend" picks the class (arrayds.storage.store_class); fsspec never sees it
        self.storage_options: dict[str, Any] = {
            k: v for k, v in (storage_options or {}).items() if k != "backend"
        }
        self.root, self.protocol = self.locate(url)
        self.token = (self.protocol, options_token(self.storage_options))

    def locate(self, url: str) -> tuple[str, str]:
        """Open the fsspec file system of ``url`` (:attr:`fs`); return the root path in
        it (:meth:`normalize_root`) and the file system's protocol."""
        fs, root = fsspec.core.url_to_fs(url, **self.storage_options)
        self.fs: fsspec.AbstractFileSystem = fs
        protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
        return self.normalize_root(root), protocol

    def normalize_root(self, root: str) -> str:
        """The root path as kept (no trailing ``/``)."""
        return root.rstrip("/") if root not in ("/", "") else root

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"

    # -- naming

    @property
    def canonical_url(self) -> str:
        """The root as a full URL (``file:///abs/path``, ``memory:///x``); stable
        across processes and used in dask tokens."""
        return self.fs.unstrip_protocol(self.root)

    def path(self, key: str, name: str = "") -> str:
        """The file-system path of ``key`` (or of ``name`` inside node ``key``)."""
        parts = [p.rstrip("/") for p in (self.root, key, name) if p]
        return "/".join(parts)

    def url_of(self, key: str, name: str = "") -> str:
        """A URL of ``key`` the ArrayRecord reader/writer opens (a plain path locally)."""
        return self.fs.unstrip_protocol(self.path(key, name))

    def display(self, key: str, name: str = "") -> str:
        """``url`` for the root, ``url/key`` otherwise (for messages)."""
        key = join_key(key, name)
        base = self.url.rstrip("/")
        return f"{base}/{key}" if key else self.url

    # -- errors naming the URL

    def named_error(self, e: OSError, action: str, path: str) -> OSError:
        """``e`` re-created (same type) with a message naming the URL of ``path``."""
        url = path if self.local else self.fs.unstrip_protocol(path)
        detail = e.strerror or str(e)
        if isinstance(e, PermissionError):
            msg = (
                f"{action} {url}: access denied ({detail}); check the credentials and "
                f"permissions in storage_options"
            )
        else:
            msg = f"{action} {url}: {detail}"
        code = (
            e.errno
            if e.errno is not None
            else (errno.EACCES if isinstance(e, PermissionError) else errno.ENOENT)
        )
        return type(e)(code, msg, url)

    def check_bucket(self) -> None:
        """Nothing to check here; object stores: a missing bucket is an error
        (:meth:`arrayds.storage.fsspec.FsspecStore.check_bucket`)."""

    # -- the key-based methods (arrayds.abc.store.Store), in the subclasses

    def get(self, key: str) -> bytes | None:
        raise NotImplementedError

    def get_versioned(self, key: str) -> tuple[bytes | None, Any]:
        raise NotImplementedError

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(begin, end)`` range of ``key`` (see
        :meth:`arrayds.abc.store.Store.get_ranges`): one fsspec ``cat_ranges`` call, which
        object stores serve with concurrent ranged GETs. A store with a native batched
        range API overrides this."""
        p = self.path(key)
        asked = [(b, e) for b, e in ranges if e > b]  # (S3 answers an empty range whole)
        if not asked:
            if ranges:
                self.size(key)  # FileNotFoundError if there is no object
            return [b""] * len(ranges)
        datas = iter(
            self.fs.cat_ranges([p] * len(asked), [b for b, _ in asked], [e for _, e in asked])
        )
        out = []
        for b, e in ranges:
            data = next(datas) if e > b else b""
            if isinstance(data, PermissionError):
                raise self.named_error(data, "cannot read", p) from data
            if (
                isinstance(data, OSError)
                and not isinstance(data, FileNotFoundError)
                and b >= self.size(key)
            ):
                data = b""  # a range past the end (S3: "not satisfiable"): cut, as protocol says
            if isinstance(data, BaseException):
                raise data
            out.append(data if isinstance(data, bytes) else bytes(data))
        return out

    def exists(self, key: str, name: str = "") -> bool:
        raise NotImplementedError

    def size(self, key: str) -> int:
        raise NotImplementedError

    def list(self, prefix: str) -> list[tuple[str, int, float | None]]:
        raise NotImplementedError

    def list_dir(self, prefix: str) -> list[str]:
        raise NotImplementedError

    def new_file(self, key: str, *, defer_sync: bool = False) -> AbstractContextManager[str]:
        raise NotImplementedError

    def put_if_match(
        self,
        key: str,
        data: bytes,
        version: Any,
        keep: Keep | None = None,
        flush: Iterable[str] = (),
    ) -> None:
        raise NotImplementedError

    def delete(self, keys: Iterable[str]) -> None:
        raise NotImplementedError

    def delete_prefix(self, prefix: str) -> None:
        raise NotImplementedError

    # -- node-addressed methods, built on the key-based ones

    def remove(self, node: str, name: str) -> None:
        """Remove one file or folder inside ``node`` (missing is fine)."""
        key = join_key(node, name)
        self.delete_prefix(key)
        self.delete([key])

    def remove_files(self, node: str, names: Sequence[str]) -> None:
        """Remove many files inside ``node``, ignoring the missing ones."""
        if names:
            self.delete([join_key(node, n) for n in names])
