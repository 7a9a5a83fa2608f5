"""What every opened dataset node shares: where it lives and how it was opened.

:class:`Array`, :class:`Group` and :class:`RaggedArray` are handles on one node of a
dataset (docs/spec.md section 2); this base class holds their common identity so each
of them only adds what its kind means.

>>> import arrayds
>>> a = arrayds.open_array("memory://doc-node", mode="w", shape=(2,), dtype="i1", chunks=1)
>>> a.url, a.path, a.name, a.mode, a.read_only
('memory://doc-node', '', '/', 'r+', False)
"""

from __future__ import annotations

from typing import ClassVar

from .store import Store

__all__ = ["WRITABLE_MODES", "Node"]

WRITABLE_MODES = ("r+", "a", "w", "w-")
"""Open modes that allow changes; ``"r"`` is read only."""


class Node:
    """Identity of an opened node: its store, node name and open mode."""

    _store: Store
    _node: str
    _mode: str
    _kind: ClassVar[str] = "node"
    """What error messages call this kind of node (``"array"``, ``"group"``, …)."""

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
        return self._mode not in WRITABLE_MODES

    @property
    def _what(self) -> str:
        return f"{self._kind} {self._store.display(self._node)!r}"
