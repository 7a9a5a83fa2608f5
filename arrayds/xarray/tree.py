"""Writing an xarray ``DataTree`` in one atomic commit (docs/spec.md section 10.4).

Every node of the tree becomes a group written as a dataset (docs/spec.md section
11), and the whole tree is committed by **one** manifest write: the tree root's group
manifest, whose snapshot lists every array *and every subgroup* — a subgroup entry is
itself a group manifest with its own snapshot, recursively. Afterwards each subgroup's
and each array's own manifest is rolled forward, top-down (:func:`roll_forward`).
Readers (:func:`arrayds.xarray.state.read_state`) take, at every level from the root
down, the newer of a node's own manifest and the copy its parent's snapshot lists, so
a tree is seen before the commit or after it, never a mix, whether the roll forward
has run or not.

A variable of more than :data:`arrayds.nodes.history.SEGMENT_LIMIT` shards has its
manifest entries written as segments by the tasks that wrote its shards, a copy in
the member and in each group up to the tree's root (each node stores the lists its
head holds in its own folder), so the commit task receives one reference per
segment, never the entries, and the root's head holds every nested member list as a
shard log (docs/spec.md 10.4, 14.4.1).

Modes: ``"w-"`` (default) refuses an existing node (``FileExistsError``), ``"w"``
replaces the whole tree (nodes not in the new tree are removed after the commit).
Appending to a tree (``"a"``, ``"r+"``, ``append_dim=``, ``region=``) is a
``NotImplementedError``: write the groups one by one with
``arrayds.to_arrayrecord(dt[path].to_dataset(inherit=False), url, path, mode="a")``.

>>> import numpy as np, xarray as xr, arrayds
>>> dt = xr.DataTree.from_dict({"/": xr.Dataset({"x": ("x", [1, 2])}),
...                             "/a": xr.Dataset({"v": ("x", [3.0, 4.0])})})
>>> _ = dt.arrayds.to_arrayrecord("memory://doc-tree")
>>> back = xr.open_datatree("memory://doc-tree", engine="arrayds")
>>> back["a"].v.values.tolist(), back["a"].x.values.tolist()
([3.0, 4.0], [1, 2])
"""

from __future__ import annotations

import errno
from collections.abc import Hashable, Mapping
from typing import Any

from ..abc.store import Store
from ..errors import CommitConflictError
from ..kinds.array.handle import stack_entries
from ..nodes import commit as node_commit
from ..nodes import pending
from ..nodes.commit import NodeVersion, generation_of
from ..nodes.names import check_component, join_component
from ..nodes.options import DEFAULT_COMPRESSION, check_compression
from ..nodes.retry import APPEND_RETRIES, check_retries
from ..storage import get_store
from .attrs import encode_attrs
from .state import (
    SNAPSHOT,
    DatasetState,
    copy_logs,
    forget_histories,
    group_json,
    member_entry,
    next_generation,
    read_state,
    remove_replaced_members,
    roll_forward,
)
from .writer import (
    ENCODING_KEYS,
    CommitJob,
    check_encoding,
    commit_graph,
    dask_dim_chunks,
    encode_dataset,
    new_shards,
    plan_encoded,
    segment_files,
    variable_name,
)

__all__ = ["roll_forward", "write_datatree"]


def _check_tree(dt: Any, what: str) -> list[tuple[str, Any]]:
    """``(relative path, node)`` of every node, top-down; a node name that is not one
    node-name segment, or a variable named like a child group, is a ``ValueError``."""
    out = []
    pending = [("", dt)]
    while pending:
        rel, node = pending.pop(0)
        gwhat = f"{what} node {'/' + rel!r}"
        own = {variable_name(k, gwhat) for k in node.to_dataset(inherit=not rel).variables}
        clash = sorted(own & {str(c) for c in node.children})
        if clash:
            raise ValueError(
                f"{gwhat}: variables named like its child groups {clash}; nothing was written"
            )
        out.append((rel, node))
        for name, child in node.children.items():
            seg = name if isinstance(name, str) else None
            ok = seg is not None and "/" not in seg and bool(seg)
            if ok:
                try:
                    ok = check_component(seg, f"{gwhat}: child") == seg
                except (TypeError, ValueError):
                    ok = False
            if not ok:
                raise ValueError(
                    f"{gwhat}: child name {name!r} is not a node name (one segment, no '/', "
                    f"'.', '..' or reserved names); nothing was written"
                )
            pending.append((f"{rel}/{seg}" if rel else seg, child))
    return out


def write_datatree(
    dt: Any,
    store: Store,
    node: str,
    *,
    mode: str = "w-",
    compression: str = DEFAULT_COMPRESSION,
    shard_size: Any = None,
    region: Any = None,
    attrs: Mapping[str, Any] | None = None,
    dims: Any = None,
    serializer: str = "auto",
    group_size: int = 1,
    compute: bool = True,
    progress: bool = False,
    append_dim: Hashable | None = None,
    encoding: Mapping[str, Mapping[Hashable, Mapping[str, Any]]] | None = None,
    compact: bool | str = "tiered",
    retries: int = APPEND_RETRIES,
) -> Any:
    """Write the ``xarray.DataTree`` ``dt`` to the group ``node`` of ``store`` with
    one commit (see the module docstring; ``arrayds.to_arrayrecord`` dispatches
    here). ``encoding``: node path (``"/"``, ``"/a/b"``) -> variable -> encoding, as
    for ``DataTree.to_zarr``; ``attrs``: extra attributes of the tree's root. Returns
    the written :class:`arrayds.Group`, or with ``compute=False`` a
    ``dask.delayed.Delayed`` that writes and commits. ``compact`` and ``retries``
    are an append's (``to_arrayrecord``'s keywords), which a DataTree refuses with the
    append (``retries`` must still be a count)."""
    what = f"datatree {store.display(node)!r}"
    check_retries(retries, what)
    if mode in ("a", "r+") or append_dim is not None or region is not None:
        raise NotImplementedError(
            f"{what}: a DataTree is written whole (mode 'w-' or 'w'); to append or write a "
            f"region, write its groups one by one: arrayds.to_arrayrecord("
            f"dt[path].to_dataset(inherit=False), url, path, mode='a', ...)"
        )
    if mode not in ("w-", "w"):
        raise ValueError(f"{what}: mode must be 'w-' or 'w' for a DataTree, got {mode!r}")
    if dims is not None:
        raise ValueError(f"{what}: dims= is for arrays; xarray variables carry their own dims")
    if serializer not in ("auto", None) or group_size != 1:
        raise ValueError(f"{what}: serializer= and group_size= apply to records, not xarray")
    compression = check_compression(compression, what)
    nodes = _check_tree(dt, what)
    enc_by_path: dict[str, Any] = {}
    for path, enc in (encoding or {}).items():
        rel = check_component(str(path).strip("/") or None, f"{what}: encoding path")
        if rel not in dict(nodes):
            raise KeyError(f"{what}: encoding names node {path!r}, which is not in the tree")
        enc_by_path[rel] = enc
    root_state = read_state(store, node)
    if root_state.exists and mode == "w-":
        raise FileExistsError(
            errno.EEXIST,
            f"{what} already exists (mode 'w-'); use mode 'w' to replace the whole tree",
            store.display(node),
        )
    groups = {
        rel: _plan_group(
            store, node, rel, tnode, root_state, enc_by_path.get(rel), attrs, compression
        )
        for rel, tnode in nodes
    }
    # nothing was written so far: every check above raised before any task ran
    plans = [
        (f"{gi}-{p.index}", rel, p, f"dataset {store.display(g['node'])!r}")
        for gi, (rel, g) in enumerate(groups.items())
        for p in g["plan"].plans
    ]
    write_id = pending.begin(store, node)  # before the first shard: gc keeps its files
    job = CommitJob(
        url=store.url,
        storage_options=store.storage_options,
        node=node,
        write_id=write_id,
        order=[(rel, p.name) for _s, rel, p, _w in plans],
        groups={
            rel: {k: v for k, v in g.items() if k != "plan"}
            | {"bases": g["plan"].bases, "remove_files": g["plan"].remove_files}
            for rel, g in groups.items()
        },
    )
    return commit_graph(
        store,
        node,
        [(suffix, p, w) for suffix, _rel, p, w in plans],
        write_id=write_id,
        shard_size=shard_size,
        name="tree",
        commit_task=_commit_task,
        job=job,
        compute=compute,
        progress=progress,
        segments=True,
    )


def _plan_group(
    store: Store,
    node: str,
    rel: str,
    tnode: Any,
    root_state: DatasetState,
    encoding: Any,
    attrs: Mapping[str, Any] | None,
    compression: str,
) -> dict[str, Any]:
    """The checked plan of writing the tree node ``tnode`` (at ``rel`` below the
    tree's root ``node``) as a dataset, with what its commit needs."""
    gnode = join_component(node, rel) if rel else node
    gwhat = f"dataset {store.display(gnode)!r}"
    # the tree's root keeps the coordinates it inherits (a subtree written on its
    # own), as xarray's DataTree.to_zarr does; below it they are inherited again
    ds = tnode.to_dataset(inherit=not rel)
    user_enc = check_encoding(encoding, ds, gwhat)
    names = {k: variable_name(k, gwhat) for k in ds.variables}
    state = root_state if not rel else read_state(store, gnode)
    ds2 = ds.copy(deep=False)
    for key, var in ds2.variables.items():
        var.encoding = {k: v for k, v in var.encoding.items() if k in ENCODING_KEYS}
        var.encoding.update(user_enc.get(key, {}))
    variables, gattrs = encode_dataset(ds2, gwhat)
    plan = plan_encoded(
        store,
        gnode,
        variables,
        state=state,
        mode="w",
        names=names,
        kinds={n: "full" for n in names.values()},
        explicit_chunks={names[k] for k, e in user_enc.items() if "chunks" in e},
        dim_chunks=dask_dim_chunks(ds),
        compression=compression,
    )
    gattrs_json = encode_attrs(gattrs, gwhat)
    if attrs and not rel:
        gattrs_json.update(encode_attrs(dict(attrs), gwhat))
    children = [str(c) for c in tnode.children]
    keep = set(plan.bases) | set(children)
    remove_children = []
    if state.kind == "group":
        old = (*state.children, *state.others, *state.groups)
        remove_children = sorted({n for n in old if n not in keep})
    return {
        "node": gnode,
        "plan": plan,
        "state": state,
        "attrs": gattrs_json,
        "children": children,
        "remove_children": remove_children,
    }


def _commit_task(job: CommitJob, results: list[list[dict[str, Any]]]) -> dict[str, Any]:
    """The one commit of the whole tree, after every shard task succeeded: the tree
    root's group manifest, through :func:`arrayds.nodes.commit.commit`."""
    store = get_store(job.url, job.storage_options)
    what = f"datatree {store.display(job.node)!r}"
    by_key = dict(zip(job.order, results, strict=True))

    def check(base: NodeVersion) -> None:
        # no group of the tree changed since the write was planned
        for g in job.groups.values():
            cur = base if g["node"] == job.node else node_commit.read(store, g["node"])
            if cur.stamp != g["state"].own:
                raise CommitConflictError(
                    f"{what}: group {store.display(g['node'])!r} was changed by another "
                    f"writer after this write started; nothing of this write is visible"
                )

    def build_group(rel: str) -> dict[str, Any]:
        g = job.groups[rel]
        st: DatasetState = g["state"]
        members: dict[str, Any] = {}
        for name, base in g["bases"].items():
            m = base.with_(generation=next_generation(st, name), commit=job.write_id)
            results = by_key.get((rel, name), [])
            if join_component(g["node"], name) in job.segmented:
                # written as segments by the workers, a copy in the member and in each
                # group up to the tree's root: the commit holds their references only
                logs = copy_logs(store, results, what)
                stamp = (base.generation, base.commit)
                members[name] = member_entry(m, stamp, len(base.shards), logs)
            else:
                members[name] = m.with_(
                    shards=stack_entries(base.shards, new_shards(results))
                ).to_json()
        for child in g["children"]:
            doc = build_group(f"{rel}/{child}" if rel else child)
            doc["generation"] = max(doc["generation"], next_generation(st, child))
            members[child] = doc
        gen = max(0, generation_of(st.root), st.own[0] if st.own else 0) + 1
        doc = group_json(gen, job.write_id, g["attrs"], members)
        doc[SNAPSHOT]["tree"] = True
        return doc

    def after(base: NodeVersion, root: dict[str, Any]) -> None:
        roll_forward(store, job.node, root)
        for g in job.groups.values():
            remove_replaced_members(store, g["node"], g["remove_children"], g["remove_files"])
            forget_histories(store, g["node"], g["bases"])  # a tree is written whole

    written = [
        *(
            "/".join(filter(None, (rel, name, e["path"])))
            for (rel, name), entries in by_key.items()
            if join_component(job.groups[rel]["node"], name) not in job.segmented
            for e in entries
        ),
        *(
            f
            for (rel, name), pairs in by_key.items()
            if join_component(job.groups[rel]["node"], name) in job.segmented
            for f in segment_files(job.node, pairs)
        ),
    ]
    return node_commit.commit(
        store,
        job.node,
        lambda base: build_group(""),
        write_id=job.write_id,
        check=check,
        written=written,
        after=after,
        what=what,
        registered=True,
    )
