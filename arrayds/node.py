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

import errno
from typing import Any, ClassVar

from .manifest import parse_node
from .nodes import commit
from .store import Store

__all__ = ["WRITABLE_MODES", "Node", "kind_phrase", "missing_node", "read_node"]

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


def read_node(store: Store, node: str) -> Any | None:
    """The parsed manifest of ``node`` (a ``GroupManifest``, ``ArrayManifest``, ...,
    by its kind), or ``None`` if the node does not exist. A damaged manifest raises
    :class:`arrayds.CorruptionError` naming the node.

    >>> import arrayds
    >>> g = arrayds.open("memory://doc-read-node", mode="w")
    >>> read_node(g.store, "").kind, read_node(g.store, "nothing")
    ('group', None)
    """
    raw = commit.read(store, node).raw
    if raw is None:
        return None
    return parse_node(raw, f"node {store.display(node)!r}")


def missing_node(store: Store, node: str, what: str = "node") -> FileNotFoundError:
    """The ``FileNotFoundError`` for a node that does not exist (naming the URL, the
    component and the manifest path), for the caller to raise.

    >>> import arrayds
    >>> e = missing_node(arrayds.open("memory://doc-missing", mode="w").store, "x", "array")
    >>> e.errno == errno.ENOENT, e.filename
    (True, 'memory://doc-missing/x')
    """
    where = repr(store.url) + (f" (component {node!r})" if node else "")
    return FileNotFoundError(
        errno.ENOENT,
        f"no arrayds {what} at {where}: {store.path(node, 'arrayds.json')} does not exist",
        store.display(node),
    )


def kind_phrase(kind: str) -> str:
    """``"an array"``, ``"a group"``, ``"a records"`` ... for messages.

    >>> kind_phrase("array"), kind_phrase("group")
    ('an array', 'a group')
    """
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"
