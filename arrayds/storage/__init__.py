"""Storage implementations of :class:`arrayds.abc.store.Store`, and :func:`get_store`.

>>> st = get_store("memory://storage-doc")
>>> get_store("memory://storage-doc") is st
True
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from ..store import Store, options_token

__all__ = ["get_store"]

_instances: dict[tuple[str, str], Store] = {}
_lock = threading.Lock()


def get_store(
    url: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None
) -> Store:
    """The store of ``url`` with ``storage_options``, one per process and pair (stores
    are cheap, but each holds an fsspec file system and caches)."""
    key_url = os.fspath(url)
    if "://" not in key_url and "::" not in key_url:
        # a relative local path means another folder after os.chdir (issue 6)
        key_url = os.path.abspath(key_url)
    key = (key_url, options_token(storage_options))
    st = _instances.get(key)
    if st is None:
        st = Store(url, storage_options)
        with _lock:
            st = _instances.setdefault(key, st)
    return st


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
