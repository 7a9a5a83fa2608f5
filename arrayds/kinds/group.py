"""The group kind: its manifest (attributes, and an xarray snapshot's members), the
:class:`Group` handle and new group nodes.

>>> import arrayds
>>> g = arrayds.open_group("memory://doc-kind-group", mode="w")
>>> _ = g.create_array("t", shape=(2,), dtype="i1", chunks=1)
>>> list(g), type(g).__name__
(['t'], 'Group')
"""

from __future__ import annotations

import html
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import CorruptionError
from ..html_repr import node_html
from ..nodes import commit
from ..nodes import registry as kinds
from ..nodes.handle import Node, child_mode, commit_create, open_handle
from ..nodes.history import kept
from ..nodes.names import (
    FORMAT,
    FORMAT_VERSION,
    check_attrs,
    join_component,
    new_write_id,
)
from ..nodes.options import DEFAULT_COMPRESSION
from ..nodes.read import Pin, missing_node, read_node, read_pinned
from ..storage import get_store
from ..storage.base import BaseStore as Store
from .array.create import create_array_node, new_array_manifest
from .array.handle import Array, Attributes


@dataclass
class GroupManifest:
    """A group node: attributes (children are the sub-folders with manifests).

    ``extra`` keeps the fields this class does not interpret (e.g. an xarray dataset's
    ``snapshot``, docs/spec.md section 10) so that rewriting a group manifest, e.g.
    for its attributes, carries them over unchanged."""

    attrs: dict[str, Any] = field(default_factory=dict)
    generation: int = 0
    commit: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    kind = "group"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "kind": "group",
            "generation": self.generation,
            "commit": self.commit,
            "attrs": self.attrs,
            **self.extra,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any], what: str) -> GroupManifest:
        attrs = d.get("attrs", {})
        if not isinstance(attrs, dict):
            raise CorruptionError(f"{what}: manifest field 'attrs' must be an object")
        gen = d.get("generation", 0)
        if not isinstance(gen, int) or isinstance(gen, bool) or gen < 0:
            raise CorruptionError(f"{what}: manifest field 'generation' has a bad value {gen!r}")
        extra = {k: v for k, v in d.items() if k not in _GROUP_FIELDS}
        return cls(attrs=dict(attrs), generation=gen, commit=str(d.get("commit", "")), extra=extra)


_GROUP_FIELDS = frozenset({"format", "format_version", "kind", "generation", "commit", "attrs"})


def create_group_node(
    store: Store, node: str, mode: str, attrs: Mapping[str, Any] | None = None
) -> Group:
    """Commit a new group manifest at ``node`` per ``mode`` (w, w-, a)."""
    m = GroupManifest(attrs=check_attrs(attrs, store.display(node)))
    raw = commit_create(store, node, m.to_json(), mode)
    m = GroupManifest(attrs=m.attrs, generation=raw["generation"], commit=raw["commit"])
    return Group(store, node, m, "r+" if mode != "r" else "r")


# ---------------------------------------------------------------------- Group


class TreeView:
    """The text tree of a group; ``repr`` is the text, Jupyter shows HTML."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines

    def __repr__(self) -> str:
        return "\n".join(self.lines)

    __str__ = __repr__

    def _repr_html_(self) -> str:
        return "<pre>" + html.escape("\n".join(self.lines)) + "</pre>"


class Group(Node, Mapping[str, Any]):
    """A group node: a mapping from child names to nodes (groups, arrays, ...).

    ``g["a/b"]`` reaches nested nodes, ``list(g)`` lists the children, ``g.attrs`` is
    persisted on set, ``g.tree()`` draws the hierarchy.

    A group opened at a version (``arrayds.open(url, version=N)`` or ``as_of=``) is
    read only, and ``g[name]`` opens the child as it was at the moment that version
    stands for (``as_of``; for ``version=N`` just before version N + 1 was committed,
    or the child's current state if N is the newest version): a child that had no
    version then is a ``KeyError``. ``list(g)`` lists the children there are now.

    >>> import arrayds
    >>> g = arrayds.open("memory://doc-group", mode="w")
    >>> _ = g.create_group("raw")
    >>> _ = g.create_array("raw/x", shape=(4,), dtype="i2", chunks=2)
    >>> "raw/x" in g, sorted(g["raw"]), g["raw/x"].dtype
    (True, ['x'], dtype('int16'))
    """

    _kind = "group"

    def __init__(self, store: Store, node: str, manifest: GroupManifest, mode: str = "r") -> None:
        self._store = store
        self._node = node
        self._m = manifest
        self._mode = mode

    # -- identity

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Group)
            and other._store.token == self._store.token
            and other._store.root == self._store.root
            and other._node == self._node
        )

    def __hash__(self) -> int:
        return hash((self._store.token, self._store.root, self._node))

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            restore_group,
            (self._store.url, self._store.storage_options, self._node, self._mode, self._pin),
        )

    # -- attributes

    @property
    def attrs(self) -> Attributes:
        return Attributes(lambda: self._m.attrs, self._commit_attrs, not self.read_only, self.what)

    def _commit_attrs(self, attrs: dict[str, Any]) -> None:
        self._check_writable()
        store, what = self._store, self.what

        def build(base: commit.NodeVersion) -> dict[str, Any]:
            # the group as it is now (another writer's snapshot fields are kept, and
            # its members' long shard lists as they are stored: never read)
            if base.kind != "group":
                return GroupManifest(attrs=attrs, extra=self._m.extra).to_json()
            cur = GroupManifest.from_json(kept(base.lazy_raw or {}), what)
            return GroupManifest(attrs=attrs, extra=cur.extra).to_json()

        raw = commit.commit(
            store, self._node, build, write_id=new_write_id(), retries=8, parents=False, what=what
        )
        self._m = GroupManifest.from_json(raw, what)

    def _check_writable(self) -> None:
        if self.read_only:
            raise PermissionError(
                f"{self.what} is open read-only (mode 'r'); open it with mode 'r+' or 'a'"
            )

    # -- mapping

    def __getitem__(self, key: str) -> Any:
        if not isinstance(key, str):
            raise TypeError(f"{self.what}: node names are str, got {type(key).__name__}")
        node = join_component(self._node, key)
        if node == self._node:
            return self
        pin = self._pin
        if pin is None or pin.children_as_of is None:  # the current state
            m, child_pin = read_node(self._store, node), None
        else:  # a version of this group: the children as of the moment it stands for
            try:
                m, child_pin = read_pinned(self._store, node, as_of=pin.children_as_of)
            except ValueError as e:  # no version of it then: it did not exist yet
                raise KeyError(f"{key!r} is not a node of {self.what} ({e})") from None
        if m is None:
            raise KeyError(f"{key!r} is not a node of {self.what} (children: {list(self)})")
        return open_handle(self._store, node, m, child_mode(self._mode), child_pin)

    def __iter__(self) -> Iterator[str]:
        return iter(commit.child_nodes(self._store, self._node))

    def __len__(self) -> int:
        return len(commit.child_nodes(self._store, self._node))

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            node = join_component(self._node, key)
        except ValueError:
            return False
        return self._store.exists(commit.manifest_key(node))

    def groups(self) -> Iterator[tuple[str, Group]]:
        """(name, Group) for each child group."""
        for name in self:
            obj = self[name]
            if isinstance(obj, Group):
                yield name, obj

    def arrays(self) -> Iterator[tuple[str, Array]]:
        """(name, Array) for each child array."""
        for name in self:
            obj = self[name]
            if isinstance(obj, Array):
                yield name, obj

    # -- creating

    def create_group(
        self, name: str, *, attrs: Mapping[str, Any] | None = None, exist_ok: bool = False
    ) -> Group:
        """A new child group (intermediate groups are created); an existing node is
        ``FileExistsError`` unless ``exist_ok`` and it is a group."""
        self._check_writable()
        node = join_component(self._node, name)
        if exist_ok:
            m = read_node(self._store, node)
            if isinstance(m, GroupManifest):
                return Group(self._store, node, m, "r+")
        return create_group_node(self._store, node, "w-", attrs)

    def require_group(self, name: str) -> Group:
        """The child group ``name``, created if missing."""
        return self.create_group(name, exist_ok=True)

    def create_array(
        self,
        name: str,
        shape: Sequence[int],
        dtype: Any,
        chunks: Any,
        *,
        fill_value: Any = 0,
        compression: str = DEFAULT_COMPRESSION,
        dims: Sequence[str] | None = None,
        attrs: Mapping[str, Any] | None = None,
        overwrite: bool = False,
    ) -> Array:
        """Create an empty array ``name`` (chunks never written read as
        ``fill_value``). ``chunks``: an int, a tuple per axis (ints, -1/None for the
        whole axis, or explicit tuples of lengths for irregular grids) or ``"auto"``.
        An existing node is ``FileExistsError`` unless ``overwrite=True``.

        >>> import arrayds
        >>> g = arrayds.open("memory://doc-create", mode="w")
        >>> g.create_array("t", shape=(5, 3), dtype="M8[ns]", chunks=((2, 3), 3)).chunks
        ((2, 3), (3,))
        """
        self._check_writable()
        node = join_component(self._node, name)
        m = new_array_manifest(
            shape,
            dtype,
            chunks,
            fill_value=fill_value,
            compression=compression,
            dims=dims,
            attrs=attrs,
            name=f"array {self._store.display(node)!r}",
        )
        return create_array_node(self._store, node, m, "w" if overwrite else "w-")

    # -- display

    def tree(self, max_depth: int | None = None) -> TreeView:
        """The hierarchy below this group, one line per node."""
        lines = [self.name if self._node else "/"]

        def walk(g: Group, prefix: str, depth: int) -> None:
            names = list(g)
            for i, name in enumerate(names):
                last = i == len(names) - 1
                branch = "└── " if last else "├── "
                try:
                    obj = g[name]
                except Exception as e:  # show damaged nodes instead of failing
                    lines.append(f"{prefix}{branch}{name} <unreadable: {type(e).__name__}>")
                    continue
                if isinstance(obj, Group):
                    lines.append(f"{prefix}{branch}{name}")
                    if max_depth is None or depth < max_depth:
                        walk(obj, prefix + ("    " if last else "│   "), depth + 1)
                elif isinstance(obj, Array):
                    lines.append(f"{prefix}{branch}{name} {obj.shape} {obj.dtype}")
                else:
                    lines.append(
                        f"{prefix}{branch}{name} ({getattr(obj, 'kind', type(obj).__name__)})"
                    )

        walk(self, "", 1)
        return TreeView(lines)

    def __repr__(self) -> str:
        return (
            f"<arrayds.Group {self._store.display(self._node)!r} ({len(self)} members) "
            f"mode={self._mode!r}>"
        )

    def _repr_html_(self) -> str:
        """A summary table and the collapsible tree below it (:mod:`arrayds.html_repr`)."""

        pin = self._pin
        return node_html(
            self._store,
            self._node,
            self._m,
            mode=self._mode,
            version=self.version,
            children_as_of=pin.children_as_of if pin is not None else None,
        )


def restore_group(
    url: str, storage_options: dict[str, Any], node: str, mode: str, pin: Pin | None = None
) -> Group:
    """Reopen a pickled :class:`Group` (what its ``__reduce__`` names): the group at
    ``url`` + ``node``, read again (the same version of its history if it was opened
    at one).

    >>> import arrayds, pickle
    >>> g = arrayds.open("memory://doc-restore-group", mode="w")
    >>> pickle.loads(pickle.dumps(g)) == g
    True
    """
    store = get_store(url, storage_options)
    m = read_node(store, node, version=pin.generation if pin is not None else None)
    if not isinstance(m, GroupManifest):
        raise missing_node(store, node, "group")
    g = Group(store, node, m, mode)
    g.pinned(pin)
    return g


def _snapshot_members(m: GroupManifest) -> dict[str, Any]:
    """The member manifests of a group's xarray snapshot (docs/spec.md section 10)."""
    snap = m.extra.get("snapshot")
    members = snap.get("members") if isinstance(snap, dict) else None
    return dict(members) if isinstance(members, dict) else {}


kinds.register(
    kinds.NodeKind(
        "group",
        parse=GroupManifest.from_json,
        open=Group,
        children=True,
        members=_snapshot_members,
        describe=kinds.lazy("arrayds.tools.describe", "describe_group"),
        info_text=kinds.lazy("arrayds.tools.describe", "group_text"),
        cat=kinds.lazy("arrayds.tools.cat", "cat_group"),
        lazy_shards=True,  # the snapshot members' long lists load when read
        totals="groups",
        plural="groups",
    )
)
