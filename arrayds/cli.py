"""The ``arrayds`` command line (API.md section 6; docs/cli.md).

::

    arrayds info URL [--json]                 tree, shapes, dtypes, chunking, sizes
    arrayds verify URL [--json]               every checksum and index; exit 1 on damage
    arrayds convert SRC DST [--component N]   .npy, zarr, HDF5, TFRecord, ArrayRecord
    arrayds cat URL [--component N] [--index N | --select "0:10,5"]
    arrayds gc URL [--dry-run] [--min-age 24h]

Exit status: 0 success, 1 damage found or the command failed (the message names the
URL and what went wrong), 2 bad usage. ``-o key=value`` (repeatable) or
``--storage-options JSON`` pass options to fsspec, e.g. an S3 ``endpoint_url``.
Progress bars appear on a terminal only (``--no-progress`` turns them off).

Built on click; :func:`main` is the console-script entry point.

>>> from click.testing import CliRunner
>>> CliRunner().invoke(cli, ["--version"]).output.startswith("arrayds, version")
True
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

import click
import numpy as np

__all__ = ["cli", "main", "parse_duration", "parse_selection"]

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


# ------------------------------------------------------------------ helpers


def _parse_option_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _storage_options(pairs: tuple[str, ...], blob: str | None) -> dict[str, Any] | None:
    out: dict[str, Any] = {}
    if blob:
        try:
            parsed = json.loads(blob)
        except ValueError as e:
            raise click.BadParameter(
                f"not valid JSON ({e})", param_hint="'--storage-options'"
            ) from None
        if not isinstance(parsed, dict):
            raise click.BadParameter("must be a JSON object", param_hint="'--storage-options'")
        out.update(parsed)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(
                f"{pair!r} is not KEY=VALUE", param_hint="'-o' / '--storage-option'"
            )
        out[key.strip()] = _parse_option_value(value)
    return out or None


def storage_options_args(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``-o KEY=VALUE`` and ``--storage-options JSON`` to a command."""
    func = click.option(
        "--storage-options",
        "storage_json",
        metavar="JSON",
        help="fsspec storage options for the dataset URL as a JSON object.",
    )(func)
    func = click.option(
        "-o",
        "--storage-option",
        "storage_pairs",
        multiple=True,
        metavar="KEY=VALUE",
        help="One fsspec storage option for the dataset URL (repeatable); VALUE is "
        "parsed as JSON when it is JSON, e.g. -o endpoint_url=http://127.0.0.1:9000 "
        "-o anon=true.",
    )(func)
    return func


def _fail_on_errors(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a library exception into ``Error: <message>`` and exit status 1 (the
    traceback with ``ARRAYDS_DEBUG=1``)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except KeyboardInterrupt:
            raise click.Abort() from None
        except Exception as e:  # noqa: BLE001 - the CLI reports every failure
            if os.environ.get("ARRAYDS_DEBUG"):
                raise
            text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise click.ClickException(f"{type(e).__name__}: {text}") from None

    return wrapper


def parse_duration(text: str) -> float:
    """``"90"``, ``"90s"``, ``"15m"``, ``"24h"``, ``"7d"`` -> seconds.

    >>> parse_duration("24h"), parse_duration("0"), parse_duration("1.5m")
    (86400.0, 0.0, 90.0)
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([smhd]?)\s*", text)
    if not m:
        raise ValueError(f"{text!r} is not a duration such as 90s, 15m, 24h or 7d")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[m.group(2)]


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


def parse_selection(text: str) -> tuple[Any, ...]:
    """A selection string -> an index tuple: comma-separated ints, ``a:b:c``
    slices, ``...`` and ``[i, j, k]`` lists.

    >>> parse_selection("0:10,5")
    (slice(0, 10, None), 5)
    >>> parse_selection("..., ::2, [1, 3]")
    (Ellipsis, slice(None, None, 2), [1, 3])
    """
    out: list[Any] = []
    if not text.strip():
        raise ValueError("the selection is empty")
    for raw in _split_top(text):
        part = raw.strip()
        if part in ("...", "Ellipsis"):
            out.append(Ellipsis)
        elif part.startswith("["):
            try:
                lst = json.loads(part)
            except ValueError:
                raise ValueError(f"{part!r} is not a list of integers") from None
            if not isinstance(lst, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in lst
            ):
                raise ValueError(f"{part!r} is not a list of integers")
            out.append(lst)
        elif ":" in part:
            bits = part.split(":")
            if len(bits) > 3:
                raise ValueError(f"{part!r} is not a slice (start:stop:step)")
            try:
                vals = [int(b) if b.strip() else None for b in bits]
            except ValueError:
                raise ValueError(f"{part!r} is not a slice of integers") from None
            out.append(slice(*vals))
        else:
            try:
                out.append(int(part))
            except ValueError:
                raise ValueError(
                    f"{part!r} is not an integer, a slice such as 0:10, '...' or a list [1, 2]"
                ) from None
    return tuple(out)


def _open_node(url: str, component: str | None, so: dict[str, Any] | None) -> Any:
    import arrayds

    g = arrayds.open(url, storage_options=so)
    if component:
        if not isinstance(g, arrayds.Group):
            raise click.UsageError(f"{url} is not a group, so it has no component {component!r}")
        try:
            return g[component]
        except KeyError:
            raise click.ClickException(
                f"KeyError: {url} has no node {component!r} (children of the root: {list(g)})"
            ) from None
    return g


# ------------------------------------------------------------------ the group


@click.group(name="arrayds", context_settings=CONTEXT)
@click.version_option(package_name="arrayds", prog_name="arrayds")
def cli() -> None:
    """arrayds: parallel array-and-records datasets on ArrayRecord files.

    URLs are local paths or anything fsspec understands (file://, s3://, gs://,
    memory://). Exit status: 0 success, 1 damage found or failure, 2 bad usage.
    """


# --------------------------------------------------------------------- info


def _ratio(info: Mapping[str, Any]) -> str:
    stored, logical = info.get("bytes_stored"), info.get("bytes_logical")
    from .verify import format_bytes

    if stored is None and logical is None:
        return ""
    text = f"stored {format_bytes(stored)} of {format_bytes(logical)} logical"
    if info.get("ratio") is not None:
        text += f" (ratio {info['ratio']:.2f})"
    return text


def _node_lines(n: Mapping[str, Any]) -> tuple[str, list[str]]:
    kind = n["kind"]
    if kind == "group":
        extra = ""
        if n.get("dataset_variables"):
            extra = f" (dataset: {', '.join(n['dataset_variables'])})"
        return f"group{extra}", []
    if kind == "array":
        head = f"array {tuple(n['shape'])} {n['dtype_name']}"
        chunks = tuple(n["chunks"]) if n.get("regular_chunks") else "irregular"
        details = [
            f"chunks {chunks}, grid {tuple(n['grid'])}, {n['nchunks_written']}/{n['nchunks']} "
            f"chunks written, {n['shards']} shard{'s' if n['shards'] != 1 else ''}, "
            f"{n['compression']}",
            _ratio(n),
        ]
        if n.get("dims"):
            details.insert(1, f"dims {tuple(n['dims'])}")
        return head, [d for d in details if d]
    if kind == "records":
        head = f"records {n['records']} records"
        details = [
            f"{n['shards']} shard{'s' if n['shards'] != 1 else ''}, serializer "
            f"{n['serializer']}, {n['compression']}, group_size {n['group_size']}",
            _ratio(n),
        ]
        return head, [d for d in details if d]
    if kind == "ragged":
        head = f"ragged {n['items']} items, ndim {n['ndim']} {n['dtype_name']}"
        details = [
            f"variable axis {n['axis']}, pieces of {n['piece_len']}, {n['shards']} "
            f"shard{'s' if n['shards'] != 1 else ''}, {n['compression']}",
            _ratio(n),
        ]
        return head, [d for d in details if d]
    return f"<{kind}> {n.get('error', '')}", []


def _print_tree(desc: Mapping[str, Any]) -> None:
    from .verify import format_bytes

    click.echo(desc["url"])
    nodes = desc["nodes"]
    # tree drawing: for each node, whether it is the last child of its parent
    for i, n in enumerate(nodes):
        depth = n["depth"]
        name = n["path"].rstrip("/").split("/")[-1] or "/"
        later = [m for m in nodes[i + 1 :] if m["depth"] <= depth]
        last = not later or later[0]["depth"] < depth
        prefix = ""
        for d in range(1, depth):
            # is there another node at depth d still to come under the same ancestor?
            rest = [m for m in nodes[i + 1 :] if m["depth"] <= d]
            prefix += "│   " if rest and rest[0]["depth"] == d else "    "
        branch = "" if depth == 0 else ("└── " if last else "├── ")
        head, details = _node_lines(n)
        click.echo(f"{prefix}{branch}{name}  {head}")
        pad = prefix + ("" if depth == 0 else ("    " if last else "│   "))
        for d in details:
            click.echo(f"{pad}    {d}")
    t = desc["totals"]
    ratio = f", ratio {t['ratio']:.2f}" if t.get("ratio") is not None else ""
    records = f", {t['records']} records" if t.get("records") else ""
    click.echo(
        f"total: {t['nodes']} nodes ({t['arrays']} arrays, {t['records_sets']} record sets, "
        f"{t['ragged']} ragged, {t['groups']} groups), {t['shards']} shards{records}; "
        f"stored {format_bytes(t['bytes_stored'])} of {format_bytes(t['bytes_logical'])} "
        f"logical{ratio}"
    )


@cli.command(context_settings=CONTEXT)
@click.argument("url")
@click.option("--component", "-c", metavar="NAME", help="Describe only this node (a/b).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@storage_options_args
@_fail_on_errors
def info(
    url: str,
    component: str | None,
    as_json: bool,
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """Show the tree of the dataset at URL: every node's kind, shape, dtype, chunk
    grid, shard count, bytes stored vs logical and compression ratio; record counts
    for record sets. Reads manifests only."""
    from .verify import describe

    so = _storage_options(storage_pairs, storage_json)
    desc = describe(url, storage_options=so, component=component)
    if as_json:
        click.echo(json.dumps(desc, indent=2))
    else:
        _print_tree(desc)


# ------------------------------------------------------------------- verify


@cli.command(context_settings=CONTEXT)
@click.argument("url")
@click.option("--component", "-c", metavar="NAME", help="Verify only this node and below.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--threads", type=click.IntRange(1, 256), help="Shards checked at once.")
@click.option("--progress/--no-progress", default=True, help="Progress bar (terminals only).")
@storage_options_args
@_fail_on_errors
def verify(
    url: str,
    component: str | None,
    as_json: bool,
    threads: int | None,
    progress: bool,
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """Check every shard that any manifest under URL references: the file exists,
    its footer and index are intact, every chunk checksum holds, the record counts
    match the manifest, every array chunk has the right dtype and shape. Prints each
    problem with the shard and the chunk or record position; exit status 1 if any."""
    from .verify import verify as run_verify

    so = _storage_options(storage_pairs, storage_json)
    report = run_verify(
        url, storage_options=so, component=component, progress=progress, threads=threads
    )
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
    else:
        for p in report.problems:
            click.echo(f"DAMAGED {p}")
        click.echo(report.summary())
    if not report.ok:
        sys.exit(1)


# ------------------------------------------------------------------ convert


_SUPPORTED_HELP = "; ".join(
    [
        ".npy",
        "zarr arrays/groups",
        "HDF5 (file.h5 or file.h5#/path)",
        "TFRecord",
        "ArrayRecord files",
        "JSON lines",
    ]
)


@cli.command(context_settings=CONTEXT)
@click.argument("src")
@click.argument("dst")
@click.option("--component", "-c", metavar="NAME", help="Write into this node of DST (a/b).")
@click.option(
    "--mode",
    type=click.Choice(["w-", "w", "a"]),
    default="w-",
    show_default=True,
    help="w- create (fail if it exists), w replace, a append.",
)
@click.option("--chunks", metavar="N,N,...", help='Chunk shape for arrays, e.g. "100,-1".')
@click.option("--compression", default="zstd:3", show_default=True, help="Shard compression.")
@click.option("--shard-size", metavar="SIZE", help='Target shard size, e.g. "128MiB".')
@click.option("--num-shards", type=click.IntRange(1), help="Shards of a record set.")
@click.option(
    "--scheduler",
    default="threads",
    show_default=True,
    metavar="NAME|ADDRESS",
    help="threads, processes, sync, or a dask.distributed scheduler address.",
)
@click.option("--progress/--no-progress", default=True, help="Progress bar (terminals only).")
@click.option(
    "--source-option",
    "source_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="One fsspec storage option for SRC (repeatable; default: those of DST).",
)
@storage_options_args
@_fail_on_errors
def convert(
    src: str,
    dst: str,
    component: str | None,
    mode: str,
    chunks: str | None,
    compression: str,
    shard_size: str | None,
    num_shards: int | None,
    scheduler: str,
    progress: bool,
    source_pairs: tuple[str, ...],
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """Convert SRC into the arrayds dataset at DST, in parallel with dask.

    SRC: a .npy file, a zarr array or group, an HDF5 file (all datasets; or
    file.h5#/path for one), TFRecord files, loose ArrayRecord files or JSON lines
    (a file, a glob or a folder). Arrays keep their chunking, attributes and
    dimension names; records keep their bytes (serializer raw).
    """
    from .ingest import convert as run_convert
    from .ingest import detect

    so = _storage_options(storage_pairs, storage_json)
    src_opts = _storage_options(source_pairs, None) if source_pairs else None
    chunk_spec: Any = None
    if chunks:
        try:
            chunk_spec = tuple(int(c) for c in chunks.split(","))
        except ValueError:
            raise click.BadParameter(
                f"{chunks!r} is not a comma-separated list of integers", param_hint="'--chunks'"
            ) from None
    try:
        detect(src, src_opts if src_opts is not None else so)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'SRC'") from None
    except FileNotFoundError as e:
        raise click.BadParameter(str(e.strerror or e), param_hint="'SRC'") from None
    client = None
    sched: Any = scheduler
    if "://" in scheduler or re.fullmatch(r"[\w.-]+:\d+", scheduler):
        from distributed import Client

        client = Client(scheduler)
        sched = None
    elif scheduler not in ("threads", "processes", "sync", "synchronous", "single-threaded"):
        raise click.BadParameter(
            f"{scheduler!r} is not threads, processes, sync or a scheduler address",
            param_hint="'--scheduler'",
        )
    try:
        result = run_convert(
            src,
            dst,
            component=component,
            mode=mode,
            chunks=chunk_spec,
            compression=compression,
            shard_size=shard_size,
            num_shards=num_shards,
            storage_options=so,
            source_options=src_opts,
            progress=progress,
            scheduler=sched,
        )
    finally:
        if client is not None:
            client.close()
    written = ", ".join("/" + n for n in result.nodes) or "/"
    click.echo(f"converted {result.kind} {src} -> {dst} ({written})")


# ---------------------------------------------------------------------- cat


def _format_record(value: Any, width: int = 100) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        b = bytes(value)
        text = repr(b[:width])
        return text + (f" ... ({len(b)} bytes)" if len(b) > width else f" ({len(b)} bytes)")
    if isinstance(value, np.ndarray):
        return np.array2string(value, threshold=50, edgeitems=3)
    if isinstance(value, dict):
        inner = ", ".join(f"{k!r}: {_format_record(v, 40)}" for k, v in value.items())
        return "{" + inner + "}"
    text = repr(value)
    return text if len(text) <= 4 * width else text[: 4 * width] + " ..."


def _records_indices(n: int, index: int | None, select: str | None, head: int) -> list[int]:
    if index is not None:
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise click.BadParameter(
                f"{index} is out of range for {n} records", param_hint="'--index'"
            )
        return [i]
    if select is None:
        return list(range(min(n, head)))
    key = parse_selection(select)
    if len(key) != 1:
        raise click.BadParameter(
            "a record set has one axis: give one slice, index or list", param_hint="'--select'"
        )
    k = key[0]
    if isinstance(k, slice):
        return list(range(n))[k]
    ks = k if isinstance(k, list) else [k]
    out = []
    for i in ks:
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise click.BadParameter(
                f"{i} is out of range for {n} records", param_hint="'--select'"
            )
        out.append(j)
    return out


@cli.command(context_settings=CONTEXT)
@click.argument("url")
@click.option("--component", "-c", metavar="NAME", help="The node to print (a/b).")
@click.option("--index", "-i", type=int, help="One record / item / index along axis 0.")
@click.option("--select", "-s", metavar="SEL", help='A selection such as "0:10,5" or "[1,5],:".')
@click.option("--head", "-n", default=10, show_default=True, help="Records shown by default.")
@click.option("--raw", is_flag=True, help="Records: show the stored bytes, do not decode.")
@click.option("--allow-pickle", is_flag=True, help="Decode records stored with pickle.")
@storage_options_args
@_fail_on_errors
def cat(
    url: str,
    component: str | None,
    index: int | None,
    select: str | None,
    head: int,
    raw: bool,
    allow_pickle: bool,
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """Print records or an array selection in human-readable form.

    Record sets: --index N or --select 0:10 (default: the first --head records).
    Arrays: --select "0:10,5" (numpy indexing; lists select orthogonally) or --index
    N (default: the first 10 along each axis). Ragged arrays: --index N or --select
    "N,0,:100" (items, then per-item slicing).
    """
    import arrayds

    if index is not None and select is not None:
        raise click.UsageError("give --index or --select, not both")
    so = _storage_options(storage_pairs, storage_json)
    node = _open_node(url, component, so)
    where = url + (f" ({component})" if component else "")
    np.set_printoptions(threshold=200, edgeitems=3, linewidth=100)
    if isinstance(node, arrayds.Group):
        raise click.UsageError(
            f"{where} is a group; choose a node with --component (children: {list(node)})"
        )
    if isinstance(node, arrayds.Array):
        if index is not None:
            key: tuple[Any, ...] = (index,)
        elif select is not None:
            try:
                key = parse_selection(select)
            except ValueError as e:
                raise click.BadParameter(str(e), param_hint="'--select'") from None
        else:
            key = tuple(slice(0, 10) for _ in node.shape)
            if node.shape and any(n > 10 for n in node.shape):
                click.echo(f"# {where}: first 10 along each axis of {node.shape}; use --select")
        if any(isinstance(k, list) for k in key):
            value = node.oindex[tuple(np.asarray(k) if isinstance(k, list) else k for k in key)]
        else:
            value = node[key]
        click.echo(np.array2string(np.asarray(value), threshold=1000, edgeitems=5))
        return
    from .records import RecordsDataset

    if isinstance(node, RecordsDataset):
        n = len(node)
        try:
            indices = _records_indices(n, index, select, head)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="'--select'") from None
        src = node.data_source(decode=False)
        decoder = None
        if not raw:
            if node.serializer == "pickle" and not allow_pickle:
                raise click.UsageError(
                    f"{where} stores pickled records; pass --allow-pickle to decode them "
                    f"(only for data you trust) or --raw to see the bytes"
                )
            from .records import open_records

            handle = open_records(url, component, storage_options=so, allow_pickle=allow_pickle)
            decoder = handle.decoder().decode
        items = src[indices] if indices else []
        for i, data in zip(indices, items, strict=False):
            value = data if decoder is None else decoder(data)
            click.echo(f"[{i}] {_format_record(value)}")
        if index is None and select is None and n > len(indices):
            click.echo(f"... {n - len(indices)} more records ({n} in all); use --select")
        return
    from .ragged import RaggedArray

    if isinstance(node, RaggedArray):
        if index is not None:
            items = [(index, node[index])]
        elif select is not None:
            try:
                key = parse_selection(select)
            except ValueError as e:
                raise click.BadParameter(str(e), param_hint="'--select'") from None
            first = key[0]
            value = node[key if len(key) > 1 else first]
            if isinstance(value, list):
                ids = list(range(len(node)))[first] if isinstance(first, slice) else list(first)
                items = list(zip(ids, value, strict=False))
            else:
                items = [(first, value)]
        else:
            items = [(i, node[i]) for i in range(min(len(node), head))]
        for i, arr in items:
            click.echo(
                f"[{i}] shape {arr.shape}: {np.array2string(arr, threshold=50, edgeitems=3)}"
            )
        if index is None and select is None and len(node) > len(items):
            click.echo(f"... {len(node) - len(items)} more items ({len(node)} in all)")
        return
    raise click.ClickException(f"{where}: cannot print a {type(node).__name__}")


# ----------------------------------------------------------------------- gc


@cli.command(context_settings=CONTEXT)
@click.argument("url")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option(
    "--min-age",
    default="24h",
    show_default=True,
    metavar="DURATION",
    help="Keep unreferenced files younger than this (90s, 15m, 24h, 7d): a write that is "
    "still running has shards its commit does not reference yet. 0 removes all "
    "(only when no write is running).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@storage_options_args
@_fail_on_errors
def gc(
    url: str,
    dry_run: bool,
    min_age: str,
    as_json: bool,
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """Remove .array_record files under URL that no manifest references (left by
    failed or killed writes and by replaced data)."""
    from .verify import collect_garbage, format_bytes

    try:
        age = parse_duration(min_age)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--min-age'") from None
    so = _storage_options(storage_pairs, storage_json)
    report = collect_garbage(url, storage_options=so, dry_run=dry_run, min_age=age)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    verb = "would remove" if dry_run else "removed"
    for p in report.removed:
        click.echo(f"{verb} {p}")
    for p in report.protected:
        click.echo(f"kept everything below {p}: its manifest cannot be read")
    click.echo(
        f"{verb} {len(report.removed)} unreferenced file{'s' if len(report.removed) != 1 else ''}"
        f" ({format_bytes(report.removed_bytes)}); {report.referenced} referenced shards kept"
    )
    if report.kept_young:
        click.echo(
            f"kept {len(report.kept_young)} unreferenced file"
            f"{'s' if len(report.kept_young) != 1 else ''} younger than {min_age} (a write "
            f"may still be running; --min-age 0 removes them)"
        )


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``arrayds = "arrayds.cli:main"``)."""
    cli.main(args=argv, prog_name="arrayds")


if __name__ == "__main__":  # pragma: no cover
    main()
