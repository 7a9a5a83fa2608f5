"""What ``arrayds cat`` prints of each node kind (:attr:`arrayds.nodes.registry.NodeKind.cat`).

:func:`open_node` opens the node ``arrayds cat`` prints (or a version of it); each
``cat_<kind>(handle, request)`` prints a selection of one node with ``click.echo``;
bad selections are ``click.BadParameter`` (exit status 2). :func:`parse_selection`
reads the ``--select`` strings.

>>> parse_selection("0:10,5")
(slice(0, 10, None), 5)
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import click
import numpy as np

__all__ = [
    "CatRequest",
    "cat_array",
    "cat_group",
    "cat_ragged",
    "cat_records",
    "format_record",
    "open_node",
    "parse_selection",
]


@dataclass(frozen=True)
class CatRequest:
    """The arguments of ``arrayds cat`` a kind's printer needs."""

    where: str
    """The node as messages name it (``URL (component)``)."""
    url: str
    component: str | None
    storage_options: Mapping[str, Any] | None
    index: int | None = None
    select: str | None = None
    head: int = 10
    raw: bool = False
    allow_pickle: bool = False


def open_node(
    url: str | os.PathLike[str],
    component: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    version: int | None = None,
    as_of: datetime | None = None,
) -> tuple[Any, Any]:
    """(kind, handle) of the node ``component`` of the dataset at ``url``: what
    ``arrayds cat`` prints (the kind is an :class:`arrayds.nodes.registry.NodeKind`, the
    handle what ``arrayds.open(url)[component]`` gives).

    ``version=N`` (a generation of that node, see :func:`arrayds.versions`) or
    ``as_of=`` (a datetime: the newest version committed at or before it; naive means
    UTC): that version of the node, opened as :func:`arrayds.open` opens one (read
    only; a group's children as of the moment the version stands for). A version that
    is not kept is a ``ValueError`` naming the versions kept; both keywords, a
    ``ValueError``; a version that is not an int or an ``as_of`` that is not a
    datetime, a ``TypeError``. No dataset: ``FileNotFoundError``; no such node:
    ``click.ClickException``.

    >>> import arrayds, numpy as np
    >>> _ = arrayds.to_arrayrecord(np.arange(4), "memory://doc-cat-open", "x", chunks=2)
    >>> _ = arrayds.to_arrayrecord(np.arange(2), "memory://doc-cat-open", "x", mode="a",
    ...                            chunks=2)
    >>> kind, old = open_node("memory://doc-cat-open", "x", version=1)
    >>> kind.name, old.shape, old.version, open_node("memory://doc-cat-open", "x")[1].shape
    ('array', (4,), 1, (6,))
    """
    from ..dataset import open as open_dataset
    from ..nodes import commit
    from ..nodes import registry as kinds
    from ..nodes.handle import open_handle
    from ..nodes.names import check_component
    from ..nodes.read import check_version_args, missing_node, read_pinned
    from ..storage import get_store

    url = os.fspath(url)
    store = get_store(url, storage_options)
    node = check_component(component)
    if check_version_args(version, as_of, "r", f"node {store.display(node)!r}"):
        # the manifest and pin arrayds.open reads, wrapped as it wraps them
        m, pin = read_pinned(store, node, version=version, as_of=as_of)
        if m is None:
            raise missing_node(store, node, "node" if node else "dataset")
        return kinds.get(getattr(m, "kind", None), store.display(node)), open_handle(
            store, node, m, "r", pin
        )
    g = open_dataset(url, storage_options=storage_options)  # the errors of no dataset
    kind = kinds.get(commit.read(store, "").kind, store.display(""))
    if not component:
        return kind, g
    if not kind.children:
        raise click.UsageError(f"{url} is not a group, so it has no component {component!r}")
    try:
        handle = g[component]
    except KeyError:
        raise click.ClickException(
            f"KeyError: {url} has no node {component!r} (children of the root: {list(g)})"
        ) from None
    return kinds.get(commit.read(store, node).kind, store.display(node)), handle


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "[(":
            depth += 1
        elif ch in "])":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _parse_part(part: str) -> Any:
    if part in ("...", "Ellipsis"):
        return Ellipsis
    if part.startswith("["):
        try:
            lst = json.loads(part)
        except ValueError:
            raise ValueError(f"{part!r} is not a list of integers") from None
        if not isinstance(lst, list) or not all(
            isinstance(i, int) and not isinstance(i, bool) for i in lst
        ):
            raise ValueError(f"{part!r} is not a list of integers")
        return lst
    if ":" in part:
        bits = part.split(":")
        if len(bits) > 3:
            raise ValueError(f"{part!r} is not a slice (start:stop:step)")
        try:
            vals = [int(b) if b.strip() else None for b in bits]
        except ValueError:
            raise ValueError(f"{part!r} is not a slice of integers") from None
        return slice(*vals)
    try:
        return int(part)
    except ValueError:
        raise ValueError(
            f"{part!r} is not an integer, a slice such as 0:10, '...' or a list [1, 2]"
        ) from None


def parse_selection(text: str) -> tuple[Any, ...]:
    """A selection string -> an index tuple: comma-separated ints, ``a:b:c``
    slices, ``...`` and ``[i, j, k]`` lists.

    >>> parse_selection("0:10,5")
    (slice(0, 10, None), 5)
    >>> parse_selection("..., ::2, [1, 3]")
    (Ellipsis, slice(None, None, 2), [1, 3])
    """
    if not text.strip():
        raise ValueError("the selection is empty")
    return tuple(_parse_part(raw.strip()) for raw in _split_top(text))


def _selection(text: str) -> tuple[Any, ...]:
    try:
        return parse_selection(text)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--select'") from None


def format_record(value: Any, width: int = 100) -> str:
    """One decoded record as ``arrayds cat`` prints it (long values cut).

    >>> format_record(b"abc")
    "b'abc' (3 bytes)"
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        text = repr(b[:width])
        return text + (f" ... ({len(b)} bytes)" if len(b) > width else f" ({len(b)} bytes)")
    if isinstance(value, np.ndarray):
        return np.array2string(value, threshold=50, edgeitems=3)
    if isinstance(value, dict):
        inner = ", ".join(f"{k!r}: {format_record(v, 40)}" for k, v in value.items())
        return "{" + inner + "}"
    text = repr(value)
    return text if len(text) <= 4 * width else text[: 4 * width] + " ..."


def cat_group(group: Any, req: CatRequest) -> None:
    """A group is not printed: choose one of its nodes."""
    raise click.UsageError(
        f"{req.where} is a group; choose a node with --component (children: {list(group)})"
    )


def cat_array(node: Any, req: CatRequest) -> None:
    """An array: ``--select`` (lists select orthogonally), ``--index`` along axis 0,
    or the first 10 along each axis."""
    if req.index is not None:
        key: tuple[Any, ...] = (req.index,)
    elif req.select is not None:
        key = _selection(req.select)
    else:
        key = tuple(slice(0, 10) for _ in node.shape)
        if node.shape and any(n > 10 for n in node.shape):
            click.echo(f"# {req.where}: first 10 along each axis of {node.shape}; use --select")
    if any(isinstance(k, list) for k in key):
        value = node.oindex[tuple(np.asarray(k) if isinstance(k, list) else k for k in key)]
    else:
        value = node[key]
    click.echo(np.array2string(np.asarray(value), threshold=1000, edgeitems=5))


def _in_range(i: int, n: int, hint: str) -> int:
    j = i + n if i < 0 else i
    if not 0 <= j < n:
        raise click.BadParameter(f"{i} is out of range for {n} records", param_hint=hint)
    return j


def _records_indices(n: int, req: CatRequest) -> list[int]:
    if req.index is not None:
        return [_in_range(req.index, n, "'--index'")]
    if req.select is None:
        return list(range(min(n, req.head)))
    key = _selection(req.select)
    if len(key) != 1:
        raise click.BadParameter(
            "a record set has one axis: give one slice, index or list", param_hint="'--select'"
        )
    k = key[0]
    if isinstance(k, slice):
        return list(range(n))[k]
    return [_in_range(i, n, "'--select'") for i in (k if isinstance(k, list) else [k])]


def cat_records(node: Any, req: CatRequest) -> None:
    """A records dataset: ``--index``, ``--select`` (one axis) or the first
    ``--head`` records, decoded unless ``--raw`` (pickled ones need ``--allow-pickle``)."""
    n = len(node)
    indices = _records_indices(n, req)
    src = node.data_source(decode=False)
    decoder = None
    if not req.raw:
        if node.serializer == "pickle" and not req.allow_pickle:
            raise click.UsageError(
                f"{req.where} stores pickled records; pass --allow-pickle to decode them "
                f"(only for data you trust) or --raw to see the bytes"
            )
        from ..kinds.records.handle import open_records

        handle = open_records(
            req.url,
            req.component,
            storage_options=req.storage_options,
            allow_pickle=req.allow_pickle,
            version=node.version,  # the version printed (None: the current state)
        )
        decoder = handle.decoder().decode
    items = src[indices] if indices else []
    for i, data in zip(indices, items, strict=False):
        value = data if decoder is None else decoder(data)
        click.echo(f"[{i}] {format_record(value)}")
    if req.index is None and req.select is None and n > len(indices):
        click.echo(f"... {n - len(indices)} more records ({n} in all); use --select")


def cat_ragged(node: Any, req: CatRequest) -> None:
    """A ragged array: ``--index N``, ``--select "N,0,:100"`` (items, then per-item
    slicing) or the first ``--head`` items."""
    if req.index is not None:
        items = [(req.index, node[req.index])]
    elif req.select is not None:
        key = _selection(req.select)
        first = key[0]
        value = node[key if len(key) > 1 else first]
        if isinstance(value, list):
            ids = list(range(len(node)))[first] if isinstance(first, slice) else list(first)
            items = list(zip(ids, value, strict=False))
        else:
            items = [(first, value)]
    else:
        items = [(i, node[i]) for i in range(min(len(node), req.head))]
    for i, arr in items:
        click.echo(f"[{i}] shape {arr.shape}: {np.array2string(arr, threshold=50, edgeitems=3)}")
    if req.index is None and req.select is None and len(node) > len(items):
        click.echo(f"... {len(node) - len(items)} more items ({len(node)} in all)")
