"""The base of every node handle (:class:`Node`), open modes, and creating a node:
the one commit of a new manifest per mode (``w``, ``w-``, ``a``).

>>> import arrayds
>>> a = arrayds.open_array("memory://doc-nodes-handle", mode="w", shape=(2,), dtype="i1",
...                        chunks=1)
>>> isinstance(a, Node), MODES
(True, ('r', 'r+', 'a', 'w', 'w-'))
"""

from __future__ import annotations

import errno
from typing import Any, ClassVar

from ..storage.base import BaseStore as Store
from . import commit
from . import registry as kinds
from .names import SHARD_DIR, new_write_id
from .read import Pin

WRITABLE_MODES = ("r+", "a", "w", "w-")
"""Open modes that allow changes; ``"r"`` is read only."""


class Node:
    """Identity of an opened node: its store, node name and open mode."""

    _store: Store
    _node: str
    _mode: str
    _kind: ClassVar[str] = "node"
    """What error messages call this kind of node (``"array"``, ``"group"``, …)."""
    _pin: Pin | None = None
    """Set on a handle opened at a version of its node's history (read only)."""

    @property
    def store(self) -> Store:
        return self._store

    @property
    def url(self) -> str:
        """The dataset root URL this node was opened from."""
        return self._store.url

    @property
    def path(self) -> str:
        """The node name inside the dataset (``""`` for the root)."""
        return self._node

    @property
    def name(self) -> str:
        """``"/"`` plus the node name."""
        return "/" + self._node

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def read_only(self) -> bool:
        return self._pin is not None or self._mode not in WRITABLE_MODES

    @property
    def version(self) -> int | None:
        """The version (generation) of the node's history this handle was opened at
        with ``version=`` or ``as_of=`` (always read only), ``None`` for a handle on
        the current state."""
        return self._pin.generation if self._pin is not None else None

    def pinned(self, pin: Pin | None) -> Node:
        """This handle, standing for the version ``pin`` of its node's history (then
        read only; ``None``: the current state); returns the handle."""
        self._pin = pin
        return self

    @property
    def what(self) -> str:
        """How messages name this node: its kind, its URL and the version it was
        opened at (``"array 'memory://x/t' at version 3"``)."""
        at = f" at version {self._pin.generation}" if self._pin is not None else ""
        return f"{self._kind} {self._store.display(self._node)!r}{at}"


MODES = ("r", "r+", "a", "w", "w-")


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def child_mode(mode: str) -> str:
    return "r" if mode == "r" else "r+"


# ----------------------------------------------------------- manifest access


def open_handle(store: Store, node: str, m: Any, mode: str, pin: Pin | None = None) -> Any:
    """The handle of ``node`` (of its kind) over the parsed manifest ``m``, opened in
    ``mode``; ``pin``: the version of the history it stands for (then read only)."""
    h = kinds.get(getattr(m, "kind", None), store.display(node)).open(store, node, m, mode)
    if pin is not None:
        h.pinned(pin)  # a version of the history: read only
    return h


def refuse_existing(store: Store, node: str) -> None:
    """``FileExistsError`` naming ``node`` if it exists (what mode ``"w-"`` checks
    before a create and again at its commit)."""
    if commit.read(store, node).exists:
        raise _exists_error(store, node)


def _exists_error(store: Store, node: str) -> FileExistsError:
    return FileExistsError(
        errno.EEXIST,
        f"{store.display(node)!r} already exists (mode 'w-' never replaces; use "
        f"mode 'w' to replace it)",
        store.display(node),
    )


def commit_create(store: Store, node: str, new: dict[str, Any], mode: str) -> dict[str, Any]:
    """Commit the manifest ``new`` of a created node per ``mode`` (``"w-"``: the node
    must not exist; ``"w"``: replace what is there, removing what only the old node
    used: its files, its child nodes, the files left in its shard folder; ``"a"``: the
    node was missing when the caller looked, nothing is removed)."""

    def check(base: commit.NodeVersion) -> None:
        if mode == "w-" and base.exists:
            raise _exists_error(store, node)

    return commit.commit(
        store,
        node,
        lambda base: new,
        write_id=new_write_id(),
        check=check,
        replaces=mode == "w",
        clear=(SHARD_DIR,),
        what=f"node {store.display(node)!r}",
    )
