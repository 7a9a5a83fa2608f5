"""The ``arrayds`` command line (docs/cli.md).

::

    arrayds info URL [--json]                 tree, shapes, dtypes, chunking, sizes
    arrayds verify URL [--json]               every checksum and index; exit 1 on damage
    arrayds convert SRC DST [--component N]   .npy, zarr, HDF5, TFRecord, ArrayRecord
    arrayds cat URL [--component N] [--index N | --select "0:10,5"]
    (info, verify, cat: [--version N | --as-of 2024-05-01T12:00] an old version)
    arrayds gc URL [--dry-run] [--min-age 24h] [--keep-versions N] [--older-than 7d]
    arrayds log URL [--component N] [--json]  the versions of a node, newest first
    arrayds compact URL [--component C] [--shard-size SIZE] [--dry-run]
    arrayds upgrade URL [--component N] [--dry-run]   store nodes in the newest format

Exit status: 0 success, 1 damage found or the command failed (the message names the
URL and what went wrong), 2 bad usage. ``-o key=value`` (repeatable) or
``--storage-options JSON`` pass options to fsspec, e.g. an S3 ``endpoint_url``.
Progress bars appear on a terminal only (``--no-progress`` turns them off).

Built on click; :func:`main` is the console-script entry point. The commands are
thin: the work is :mod:`arrayds.tools` (``describe``, ``verify``, ``gc``, ``cat``,
``compact``), and what a node prints or how it is opened is asked of its kind
(:mod:`arrayds.nodes.registry`).

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
from datetime import datetime
from typing import Any

import click
import numpy as np

from .api import versions
from .ingest import convert as run_convert
from .ingest import detect
from .nodes.commit import NEWEST
from .nodes.merge import parse_shard_size
from .nodes.options import DEFAULT_COMPRESSION
from .storage import get_store
from .tools.cat import CatRequest, open_node, parse_selection
from .tools.compact import compact as run_compact
from .tools.describe import describe, format_bytes, node_text, totals_text
from .tools.gc import collect_garbage
from .tools.upgrade import upgrade as upgrade_nodes
from .tools.verify import verify as run_verify

__all__ = ["cli", "main", "parse_as_of", "parse_duration", "parse_selection"]

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


def version_args(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add ``--version N`` and ``--as-of DATETIME`` (a version of the node's history)
    to a command; :func:`_version_kwargs` checks and converts them."""
    func = click.option(
        "--as-of",
        "as_of",
        metavar="DATETIME",
        help="Use the newest version committed at or before this ISO 8601 time "
        "(e.g. 2024-05-01T12:00:00+02:00; no offset means UTC).",
    )(func)
    func = click.option(
        "--version",
        "version",
        type=int,
        metavar="N",
        help="Use version N of the node's history (a generation; see arrayds log).",
    )(func)
    return func


def parse_as_of(text: str) -> datetime:
    """An ``--as-of`` value -> a datetime (ISO 8601; without an offset it is UTC, as
    ``as_of=`` in Python).

    >>> parse_as_of("2024-05-01T12:00:00Z").isoformat()
    '2024-05-01T12:00:00+00:00'
    >>> parse_as_of("2024-05-01").isoformat()
    '2024-05-01T00:00:00'
    """
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{text!r} is not an ISO 8601 date and time such as 2024-05-01T12:00:00 or "
            f"2024-05-01T12:00:00+02:00"
        ) from None


def _version_kwargs(version: int | None, as_of: str | None) -> dict[str, Any]:
    """``{"version": ..., "as_of": ...}`` from the options of :func:`version_args`
    (usage errors: both given, a time that does not parse)."""
    if version is not None and as_of is not None:
        raise click.UsageError("give --version or --as-of, not both")
    when = None
    if as_of is not None:
        try:
            when = parse_as_of(as_of)
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="'--as-of'") from None
    return {"version": version, "as_of": when}


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


# ------------------------------------------------------------------ the group


@click.group(name="arrayds", context_settings=CONTEXT)
@click.version_option(package_name="arrayds", prog_name="arrayds")
def cli() -> None:
    """arrayds: parallel array-and-records datasets on ArrayRecord files.

    URLs are local paths or anything fsspec understands (file://, s3://, gs://,
    memory://). Exit status: 0 success, 1 damage found or failure, 2 bad usage.
    """


# --------------------------------------------------------------------- info


def _print_tree(desc: Mapping[str, Any]) -> None:

    at = desc.get("version")
    click.echo(desc["url"] + (f" (version {at})" if at is not None else ""))
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
        head, details = node_text(n)
        click.echo(f"{prefix}{branch}{name}  {head}")
        pad = prefix + ("" if depth == 0 else ("    " if last else "│   "))
        for d in details:
            click.echo(f"{pad}    {d}")
    click.echo(totals_text(desc["totals"]))


@cli.command(context_settings=CONTEXT)
@click.argument("url")
@click.option("--component", "-c", metavar="NAME", help="Describe only this node (a/b).")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@version_args
@storage_options_args
@_fail_on_errors
def info(
    url: str,
    component: str | None,
    as_json: bool,
    version: int | None,
    as_of: str | None,
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """Show the tree of the dataset at URL: every node's kind, shape, dtype, chunk
    grid, shard count, bytes stored vs logical and compression ratio; record counts
    for record sets. Reads manifests only. --version N / --as-of TIME: the dataset
    as it was at that version of the node (URL or --component)."""

    at = _version_kwargs(version, as_of)
    so = _storage_options(storage_pairs, storage_json)
    desc = describe(url, storage_options=so, component=component, **at)
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
@version_args
@storage_options_args
@_fail_on_errors
def verify(
    url: str,
    component: str | None,
    as_json: bool,
    threads: int | None,
    progress: bool,
    version: int | None,
    as_of: str | None,
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """Check every shard that any manifest under URL references: the file exists,
    its footer and index are intact, every chunk checksum holds, the record counts
    match the manifest, every array chunk has the right dtype and shape. Prints each
    problem with the shard and the chunk or record position; exit status 1 if any.
    --version N / --as-of TIME: check the shards that version of the node names."""

    at = _version_kwargs(version, as_of)
    so = _storage_options(storage_pairs, storage_json)
    report = run_verify(
        url, storage_options=so, component=component, progress=progress, threads=threads, **at
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
@click.option(
    "--compression", default=DEFAULT_COMPRESSION, show_default=True, help="Shard compression."
)
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


@cli.command(context_settings=CONTEXT)
@click.argument("url")
@click.option("--component", "-c", metavar="NAME", help="The node to print (a/b).")
@click.option("--index", "-i", type=int, help="One record / item / index along axis 0.")
@click.option("--select", "-s", metavar="SEL", help='A selection such as "0:10,5" or "[1,5],:".')
@click.option("--head", "-n", default=10, show_default=True, help="Records shown by default.")
@click.option("--raw", is_flag=True, help="Records: show the stored bytes, do not decode.")
@click.option("--allow-pickle", is_flag=True, help="Decode records stored with pickle.")
@version_args
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
    version: int | None,
    as_of: str | None,
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """Print records or an array selection in human-readable form.

    Record sets: --index N or --select 0:10 (default: the first --head records).
    Arrays: --select "0:10,5" (numpy indexing; lists select orthogonally) or --index
    N (default: the first 10 along each axis). Ragged arrays: --index N or --select
    "N,0,:100" (items, then per-item slicing). --version N / --as-of TIME: print the
    node as it was at that version of its history.
    """

    if index is not None and select is not None:
        raise click.UsageError("give --index or --select, not both")
    at = _version_kwargs(version, as_of)
    so = _storage_options(storage_pairs, storage_json)
    kind, node = open_node(url, component, storage_options=so, **at)
    where = url + (f" ({component})" if component else "")
    if getattr(node, "version", None) is not None:
        where += f" at version {node.version}"
    np.set_printoptions(threshold=200, edgeitems=3, linewidth=100)
    if kind.cat is None:
        raise click.ClickException(f"{where}: cannot print {kind.a()}")
    request = CatRequest(where, url, component, so, index, select, head, raw, allow_pickle)
    kind.cat(node, request)


# ----------------------------------------------------------------------- gc


@cli.command(context_settings=CONTEXT)
@click.argument("url")
@click.option("--dry-run", is_flag=True, help="Only list what would be removed.")
@click.option(
    "--keep-versions",
    type=click.IntRange(0),
    metavar="N",
    help="Keep the newest N versions of each node (the current one counts).",
)
@click.option(
    "--older-than",
    metavar="DURATION",
    help="Expire the versions replaced longer ago than this (90s, 15m, 24h, 7d; 0: all "
    "but the kept ones). Default without --keep-versions: 7d.",
)
@click.option(
    "--min-age",
    default="24h",
    show_default=True,
    metavar="DURATION",
    help="Keep unreferenced files younger than this (90s, 15m, 24h, 7d). The files of "
    "writes under way are kept whatever it is (their pending markers); it is a margin "
    "for writers of older arrayds releases. 0 is safe beside writers of this release.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@storage_options_args
@_fail_on_errors
def gc(
    url: str,
    dry_run: bool,
    keep_versions: int | None,
    older_than: str | None,
    min_age: str,
    as_json: bool,
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """Expire old versions and remove the files under URL that no kept version
    references (shards left by failed or killed writes, by replaced data, by expired
    versions). The current version is always kept; another is kept if it is among the
    newest --keep-versions or was replaced less than --older-than ago (default: 7d)."""

    try:
        age = parse_duration(min_age)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--min-age'") from None
    retention = _older_than(older_than)
    so = _storage_options(storage_pairs, storage_json)
    report = collect_garbage(
        url,
        storage_options=so,
        dry_run=dry_run,
        min_age=age,
        keep_versions=keep_versions,
        older_than=retention,
    )
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    _print_gc(report, dry_run, min_age)


def _older_than(text: str | None) -> float | None:
    """``--older-than`` in seconds (``None``: not given)."""
    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--older-than'") from None


def _print_gc(report: Any, dry_run: bool, min_age: str) -> None:
    """The text report of ``arrayds gc``."""

    verb = "would remove" if dry_run else "removed"
    for p in report.expired:
        click.echo(f"{'would expire' if dry_run else 'expired'} {p}")
    for p in report.removed:
        click.echo(f"{verb} {p}")
    for p in report.protected:
        click.echo(f"kept everything below {p}: its manifest cannot be read")
    click.echo(
        f"{'would expire' if dry_run else 'expired'} {len(report.expired)} version"
        f"{'s' if len(report.expired) != 1 else ''} ({format_bytes(report.expired_bytes)}); "
        f"kept {report.versions_kept}"
    )
    click.echo(
        f"{verb} {len(report.removed)} unreferenced file{'s' if len(report.removed) != 1 else ''}"
        f" ({format_bytes(report.removed_bytes)}); {report.referenced} referenced shards kept"
    )
    for p in report.abandoned:
        click.echo(f"{verb} {p}: the marker of a write older than the max write age")
    if report.under_way:
        click.echo(
            f"kept {len(report.under_way)} unreferenced file"
            f"{'s' if len(report.under_way) != 1 else ''} of writes under way"
        )
    if report.kept_young:
        click.echo(
            f"kept {len(report.kept_young)} unreferenced file"
            f"{'s' if len(report.kept_young) != 1 else ''} younger than {min_age} (a write "
            f"may still be running; --min-age 0 removes them)"
        )


# ------------------------------------------------------------------ upgrade


@cli.command(context_settings=CONTEXT)
@click.argument("url")
@click.option("--component", "-c", metavar="NAME", help="Upgrade only this node and below.")
@click.option("--dry-run", is_flag=True, help="Only list the nodes that would be upgraded.")
@storage_options_args
@_fail_on_errors
def upgrade(
    url: str,
    component: str | None,
    dry_run: bool,
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """Store every node under URL in the newest manifest format version (one commit
    per node; no shard is rewritten). Older arrayds releases cannot read an upgraded
    node: upgrade once every reader runs this release."""

    so = _storage_options(storage_pairs, storage_json)
    nodes = upgrade_nodes(url, component, storage_options=so, dry_run=dry_run)
    store = get_store(url, so)
    verb = "would upgrade" if dry_run else "upgraded"
    for node in nodes:
        click.echo(f"{verb} {store.display(node)}")
    n = len(nodes)
    click.echo(f"{verb} {n} node{'s' if n != 1 else ''} to format version {NEWEST}")


# ------------------------------------------------------------------ compact


@cli.command(context_settings=CONTEXT)
@click.argument("url")
@click.option("--component", "-c", metavar="NAME", help="Compact this node (a/b) and below.")
@click.option(
    "--shard-size",
    metavar="SIZE",
    help='Target size of a new shard file, e.g. "64MiB" (the default) or bytes.',
)
@click.option("--dry-run", is_flag=True, help="Only report what would be compacted.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@storage_options_args
@_fail_on_errors
def compact(
    url: str,
    component: str | None,
    shard_size: str | None,
    dry_run: bool,
    as_json: bool,
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """Rewrite fragmented nodes under URL (many small shard files, data overridden by
    newer writes) into few shards, one atomic commit per node. Reads are unchanged;
    the old files stay until `arrayds gc` removes them."""

    size: int | None = None
    if shard_size is not None:
        text = shard_size.strip()
        try:
            size = parse_shard_size(int(text) if text.isdigit() else text)
        except (TypeError, ValueError) as e:
            raise click.BadParameter(str(e), param_hint="'--shard-size'") from None
    so = _storage_options(storage_pairs, storage_json)
    report = run_compact(url, component, shard_size=size, storage_options=so, dry_run=dry_run)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2))
        return
    for line in report.nodes:
        click.echo(line.line())
    n = len(report.compacted)
    nodes = f"{n} node{'s' if n != 1 else ''}"
    click.echo(f"{nodes} would be compacted" if dry_run else f"{nodes} compacted")


# ---------------------------------------------------------------------- log


@cli.command(name="log", context_settings=CONTEXT)
@click.argument("url")
@click.option("--component", "-c", metavar="NAME", help="The node inside the dataset.")
@click.option("--json", "as_json", is_flag=True, help="Print the versions as JSON.")
@storage_options_args
@_fail_on_errors
def log_command(
    url: str,
    component: str | None,
    as_json: bool,
    storage_pairs: tuple[str, ...],
    storage_json: str | None,
) -> None:
    """List the versions of the node at URL that its history keeps, newest first:
    generation, commit time (UTC), write id, and which one is current. Open one with
    version=N (Python) or xr.open_dataset(URL, engine="arrayds", version=N)."""

    so = _storage_options(storage_pairs, storage_json)
    found = list(reversed(versions(url, component, storage_options=so)))
    if as_json:
        rows = [
            {
                "generation": v.generation,
                "time": v.time.isoformat() if v.time is not None else None,
                "commit": v.commit,
                "current": v.current,
            }
            for v in found
        ]
        click.echo(json.dumps(rows, indent=2))
        return
    for v in found:
        when = v.time.isoformat(timespec="seconds") if v.time is not None else "-"
        mark = "  (current)" if v.current else ""
        click.echo(f"{v.generation:>6}  {when:<25}  {v.commit or '-'}{mark}")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``arrayds = "arrayds.cli:main"``)."""
    cli.main(args=argv, prog_name="arrayds")


if __name__ == "__main__":  # pragma: no cover
    main()
