"""Datasets: a tree of nodes under one URL — ``open``, ``open_array`` and ``Group``.

Every node is a folder holding an ``arrayds.json`` manifest (docs/spec.md). A group
finds its children by listing the sub-folders that hold a manifest; missing
intermediate groups are created when a node is written below them.

Modes (for :func:`open` and :func:`open_array`): ``"r"`` read only (default),
``"r+"`` modify an existing node, ``"a"`` modify or create, ``"w"`` create,
replacing what is there, ``"w-"`` create, failing if the node exists.

>>> import arrayds, numpy as np
>>> g = arrayds.open("memory://doc-ds", mode="w")
>>> a = g.create_array("images/train", shape=(10, 4), dtype="u1", chunks=(5, 4))
>>> a[:] = np.arange(40).reshape(10, 4)
>>> g.attrs["title"] = "demo"
>>> g2 = arrayds.open("memory://doc-ds")
>>> list(g2), g2["images/train"][9].tolist(), g2.attrs["title"]
(['images'], [36, 37, 38, 39], 'demo')
>>> print(g2.tree())
/
└── images
    └── train (10, 4) uint8
"""

from __future__ import annotations

import errno
import html
import os
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from .array import Array, Attributes
from .grid import normalize_chunks
from .manifest import ArrayManifest, GroupManifest, check_attrs
from .node import Node, Pin, check_version_args, kind_phrase, missing_node, read_node, read_pinned
from .nodes import commit, kinds
from .nodes.commit import check_parents, ensure_parents
from .storage import get_store
from .store import SHARD_DIR, Store, check_component, join_component, new_write_id
from .tensor import check_dtype

__all__ = [
    "Group",
    "TreeView",
    "check_parents",
    "create_array_node",
    "create_group_node",
    "ensure_parents",
    "new_array_manifest",
    "open",
    "open_array",
    "open_group",
    "open_handle",
    "refuse_existing",
    "restore_group",
]

MODES = ("r", "r+", "a", "w", "w-")


def _check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def _child_mode(mode: str) -> str:
    return "r" if mode == "r" else "r+"


# ----------------------------------------------------------- manifest access


def open_handle(store: Store, node: str, m: Any, mode: str, pin: Pin | None = None) -> Any:
    """The handle of ``node`` (of its kind) over the parsed manifest ``m``, opened in
    ``mode``; ``pin``: the version of the history it stands for (then read only)."""
    h = kinds.get(getattr(m, "kind", None), store.display(node)).open(store, node, m, mode)
    if pin is not None:
        h._pin = pin  # a version of the history: read only (arrayds.node.Node)
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


def _commit_create(store: Store, node: str, new: dict[str, Any], mode: str) -> dict[str, Any]:
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


def create_array_node(
    store: Store, node: str, manifest: ArrayManifest, mode: str, handle_mode: str = "r+"
) -> Array:
    """Commit a new (empty) array manifest at ``node`` per ``mode`` (w, w-, a)."""
    raw = _commit_create(store, node, manifest.to_json(), mode)
    new = manifest.with_(generation=raw["generation"], commit=raw["commit"])
    return Array(store, node, new, handle_mode)


def create_group_node(
    store: Store, node: str, mode: str, attrs: Mapping[str, Any] | None = None
) -> Group:
    """Commit a new group manifest at ``node`` per ``mode`` (w, w-, a)."""
    m = GroupManifest(attrs=check_attrs(attrs, store.display(node)))
    raw = _commit_create(store, node, m.to_json(), mode)
    m = GroupManifest(attrs=m.attrs, generation=raw["generation"], commit=raw["commit"])
    return Group(store, node, m, "r+" if mode != "r" else "r")


def _chunk_shape(spec: Any, chunks: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """The nominal chunk shape of a user spec (what ``append`` uses)."""
    ndim = len(chunks)
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool):
        return (int(spec),) * ndim
    out = []
    for d in range(ndim):
        s = spec[d] if isinstance(spec, (tuple, list)) and len(spec) == ndim else None
        if isinstance(s, (int, np.integer)) and not isinstance(s, bool) and int(s) > 0:
            out.append(int(s))
        else:
            out.append(max(chunks[d]))
    return tuple(out)


def new_array_manifest(
    shape: Sequence[int],
    dtype: Any,
    chunks: Any,
    *,
    fill_value: Any = 0,
    compression: str = "zstd:3",
    dims: Sequence[str] | None = None,
    attrs: Mapping[str, Any] | None = None,
    name: str = "array",
) -> ArrayManifest:
    """Validate create arguments and build the manifest of an empty array."""
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        shape = tuple(int(n) for n in shape)
    except TypeError:
        raise TypeError(f"{name}: shape must be a tuple of ints, got {shape!r}") from None
    dt = check_dtype(dtype, name)
    norm = normalize_chunks(chunks, shape, dt.itemsize, name)
    m = ArrayManifest.new(
        shape,
        dt,
        norm,
        fill_value=fill_value,
        compression=compression,
        dims=dims,
        attrs=attrs,
        name=name,
    )
    m.chunk_shape = _chunk_shape(chunks, norm)
    return m


# ------------------------------------------------------------------- opening


def open(  # noqa: A001 - the public name of API.md
    url: str | os.PathLike[str],
    mode: str = "r",
    *,
    storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> Any:
    """Open the dataset at ``url``: its root :class:`Group` (or the :class:`Array`
    when ``url`` names an array node).

    ``"r"``/``"r+"`` need an existing dataset (``FileNotFoundError`` naming the URL);
    ``"a"`` opens or creates a group; ``"w"`` creates an empty group, replacing the
    node's previous content; ``"w-"`` fails if a node exists.

    ``version=N`` (a generation, see :func:`arrayds.versions`) or ``as_of=`` (a
    datetime: the newest version committed at or before it; a naive datetime means
    UTC) opens that version of the root's history, read only (mode ``"r"``; writing
    raises ``PermissionError`` naming the version). A version the history does not
    keep is a ``ValueError`` naming the versions it keeps. The children of a group
    opened so are read as they were at the moment the version stands for: ``as_of``,
    or for ``version=N`` the last moment N was current (just before version N + 1
    was committed; their current state if N is the newest version).

    >>> import arrayds
    >>> arrayds.open("memory://doc-open", mode="w")
    <arrayds.Group 'memory://doc-open' (0 members) mode='r+'>
    >>> g = arrayds.open("memory://doc-open", mode="r+")
    >>> g.attrs["step"] = 1
    >>> dict(arrayds.open("memory://doc-open", version=1).attrs)
    {}
    """
    _check_mode(mode)
    store = get_store(os.fspath(url), storage_options)
    check_version_args(version, as_of, mode, f"dataset {store.display('')!r}")
    if mode in ("w", "w-"):
        return create_group_node(store, "", mode)
    m, pin = read_pinned(store, "", version=version, as_of=as_of)
    if m is None:
        if mode == "a":
            return create_group_node(store, "", mode)
        raise missing_node(store, "", "dataset")
    return open_handle(store, "", m, mode if mode == "r" else "r+", pin)


def open_group(
    url: str | os.PathLike[str],
    component: str | None = None,
    mode: str = "r",
    *,
    storage_options: Mapping[str, Any] | None = None,
    attrs: Mapping[str, Any] | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> Group:
    """Open (or with ``"a"``/``"w"``/``"w-"`` create) the group at ``url`` +
    ``component``. ``version=``/``as_of=``: a version of the group's history, read
    only, its children as of the moment it stands for (as for :func:`open`).

    >>> import arrayds
    >>> g = arrayds.open_group("memory://doc-og", "a/b", mode="a", attrs={"k": 1})
    >>> g.name, arrayds.open_group("memory://doc-og", "a/b").attrs["k"]
    ('/a/b', 1)
    """
    _check_mode(mode)
    store = get_store(os.fspath(url), storage_options)
    node = check_component(component)
    check_version_args(version, as_of, mode, f"group {store.display(node)!r}")
    if mode in ("w", "w-"):
        return create_group_node(store, node, mode, attrs)
    m, pin = read_pinned(store, node, version=version, as_of=as_of)
    if m is None:
        if mode == "a":
            return create_group_node(store, node, mode, attrs)
        raise missing_node(store, node, "group")
    if not isinstance(m, GroupManifest):
        raise ValueError(f"{store.display(node)!r} is {kind_phrase(m.kind)} node, not a group")
    return open_handle(store, node, m, mode if mode == "r" else "r+", pin)


def open_array(
    url: str | os.PathLike[str],
    component: str | None = None,
    mode: str = "r",
    *,
    storage_options: Mapping[str, Any] | None = None,
    shape: Sequence[int] | None = None,
    dtype: Any = None,
    chunks: Any = None,
    fill_value: Any = 0,
    compression: str = "zstd:3",
    dims: Sequence[str] | None = None,
    attrs: Mapping[str, Any] | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> Array:
    """Open the array at ``url`` + ``component``.

    ``"r"`` (default) and ``"r+"`` need an existing array. To create one (modes
    ``"w"``, ``"w-"``, or ``"a"`` when it does not exist) pass ``shape``, ``dtype``
    and ``chunks`` (and optionally ``fill_value``, ``compression``, ``dims``,
    ``attrs``), as for :meth:`Group.create_array`. ``"w-"`` on an existing node is
    ``FileExistsError`` naming it, whatever the other arguments. ``version=`` /
    ``as_of=`` open a version of the array's history, read only (as for :func:`open`).

    >>> import arrayds
    >>> a = arrayds.open_array("memory://doc-oa", "x/y", mode="w", shape=(3,), dtype="f4", chunks=2)
    >>> arrayds.open_array("memory://doc-oa", "x/y").shape
    (3,)
    """
    _check_mode(mode)
    store = get_store(os.fspath(url), storage_options)
    node = check_component(component)
    display = store.display(node)
    check_version_args(version, as_of, mode, f"array {display!r}")

    def create() -> Array:
        if shape is None or dtype is None or chunks is None:
            raise TypeError(
                f"open_array({display!r}, mode={mode!r}) creates an array: pass shape=, "
                f"dtype= and chunks="
            )
        m = new_array_manifest(
            shape,
            dtype,
            chunks,
            fill_value=fill_value,
            compression=compression,
            dims=dims,
            attrs=attrs,
            name=f"array {display!r}",
        )
        return create_array_node(store, node, m, mode)

    if mode in ("w", "w-"):
        if mode == "w-":
            refuse_existing(store, node)  # an existing node: FileExistsError first
        return create()
    m, pin = read_pinned(store, node, version=version, as_of=as_of)
    if m is None:
        if mode == "a" and shape is not None:
            return create()
        raise missing_node(store, node, "array")
    if not isinstance(m, ArrayManifest):
        raise ValueError(
            f"{display!r} is {kind_phrase(m.kind)} node, not an array"
            + ("; pass component= to name an array inside it" if m.kind == "group" else "")
        )
    return open_handle(store, node, m, mode if mode == "r" else "r+", pin)


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
        return Attributes(lambda: self._m.attrs, self._commit_attrs, not self.read_only, self._what)

    def _commit_attrs(self, attrs: dict[str, Any]) -> None:
        self._check_writable()
        store, what = self._store, self._what

        def build(base: commit.NodeVersion) -> dict[str, Any]:
            # the group as it is now (another writer's snapshot fields are kept)
            cur = GroupManifest.from_json(base.raw, what) if base.kind == "group" else self._m
            return GroupManifest(attrs=attrs, extra=cur.extra).to_json()

        raw = commit.commit(
            store, self._node, build, write_id=new_write_id(), retries=8, parents=False, what=what
        )
        self._m = GroupManifest.from_json(raw, what)

    def _check_writable(self) -> None:
        if self.read_only:
            raise PermissionError(
                f"{self._what} is open read-only (mode 'r'); open it with mode 'r+' or 'a'"
            )

    # -- mapping

    def __getitem__(self, key: str) -> Any:
        if not isinstance(key, str):
            raise TypeError(f"{self._what}: node names are str, got {type(key).__name__}")
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
                raise KeyError(f"{key!r} is not a node of {self._what} ({e})") from None
        if m is None:
            raise KeyError(f"{key!r} is not a node of {self._what} (children: {list(self)})")
        return open_handle(self._store, node, m, _child_mode(self._mode), child_pin)

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
        compression: str = "zstd:3",
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
        from .html_repr import node_html

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
    g._pin = pin
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
        totals="groups",
        plural="groups",
    )
)
