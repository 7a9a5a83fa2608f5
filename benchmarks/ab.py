"""Before/after: benchmark scripts of benchmarks/ run against two source trees in turn.

    python benchmarks/ab.py --before ../before --after . --rounds 2 \\
        --bench "bench_arrays.py --quick" --bench "bench_records.py --quick" \\
        --alias arrayds.files.tfrecord=arrayds.tfrecord

Every run is a fresh ``python SCRIPT ARGS --json FILE`` whose ``PYTHONPATH`` is one tree
(so ``import arrayds`` is that tree's code; the tree is checked before the first run).
The script is always the one beside this file (benchmarks/SCRIPT; run ab.py of the
after tree, so that is the after tree's), so both sides run the same workload
definition and differ only in the package. The sides alternate by rounds:
before, after, then after, before, and so on, so a drifting load weighs on both alike.

``--alias NEW=OLD``: when a benchmark imports an internal module that a layout change
moved (``NEW``), a tree without it gets ``OLD`` under that name (a ``sitecustomize`` on
both sides' ``PYTHONPATH`` adds the alias as the import system's last resort, so a tree
that has ``NEW`` never uses it; dask workers inherit it through the environment).

Printed: one markdown table per script, a row per arrayds figure of the script's JSON
(the anchors' figures are left out) plus the whole run (wall clock, and the CPU time of
the child and the processes it waited for, from ``getrusage``): the median of each side,
after/before as a ratio of times (> 1: the after tree is slower; throughputs are turned
into times), the same for CPU time where the script measures it, and each side's spread
(max - min over its runs, relative to its median: the noise to judge the ratios
against), with the 1-minute load average at the start of every run and at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SIDES = ("before", "after")

# one figure of a run: name -> (unit, higher is better, value, CPU figure or None); the CPU
# figure runs the same way as the value (per CPU second, or CPU time per unit of work)
Figures = dict[str, tuple[str, bool, float, float | None]]


def arrays_figures(doc: dict[str, Any]) -> Figures:
    """bench_arrays.py --json: arrayds' (value, note, value per CPU) of every row."""
    out: Figures = {}
    for row in doc["rows"]:
        ours = row["figures"].get("arrayds")
        if ours is not None:
            out[row["workload"]] = (row["unit"], row["higher_is_better"], ours[0], ours[2])
    return out


def records_figures(doc: dict[str, Any]) -> Figures:
    """bench_records.py --json: amount per second and per CPU second of arrayds' side."""
    out: Figures = {}
    for row in doc["rows"]:
        wall, cpu = row["arrayds"]
        out[row["measurement"]] = (
            row["unit"],
            True,
            row["amount"] / wall,
            row["amount"] / cpu if cpu > 0 else None,
        )
    return out


def scale_figures(doc: dict[str, Any]) -> Figures:
    """bench_scale.py --json: arrayds' mean write, open, read and compact of each workload."""
    out: Figures = {}
    for w in doc["workloads"]:
        t, ours = w["title"], w["arrayds"]
        wall, cpu = ours["wall"], ours["cpu"]
        out[f"{t}: one write (mean)"] = (
            "ms",
            False,
            1e3 * statistics.fmean(wall),
            1e3 * statistics.fmean(cpu),
        )
        out[f"{t}: open"] = ("ms", False, 1e3 * ours["open_s"], None)
        out[f"{t}: read one element"] = ("us", False, 1e6 * ours["read_s"], None)
        if ours["cold_open_s"] is not None:
            out[f"{t}: cold open"] = ("ms", False, 1e3 * ours["cold_open_s"], None)
        if ours["compact"] is not None:
            out[f"{t}: compact"] = ("s", False, ours["compact"][0], None)
    return out


READERS: dict[str, Callable[[dict[str, Any]], Figures]] = {
    "bench_arrays.py": arrays_figures,
    "bench_records.py": records_figures,
    "bench_scale.py": scale_figures,
}

SITECUSTOMIZE = '''"""Written by benchmarks/ab.py: module aliases for a tree of another layout."""
import importlib
import importlib.abc
import importlib.util
import sys

ALIASES = {aliases!r}
PARENTS = {{n.rsplit(".", k)[0] for n in ALIASES for k in range(1, n.count("."))}}
SPECS = {{}}


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last resort: NEW is OLD; NEW's missing parent packages are empty packages."""

    def find_spec(self, name, path=None, target=None):
        if name in ALIASES or name in PARENTS:
            return importlib.util.spec_from_loader(name, self, is_package=name in PARENTS)
        return None

    def create_module(self, spec):
        if spec.name not in ALIASES:
            return None
        module = importlib.import_module(ALIASES[spec.name])
        SPECS[module.__name__] = module.__spec__  # the import system sets NEW's spec on it
        return module

    def exec_module(self, module):
        if module.__name__ in SPECS:
            module.__spec__ = SPECS[module.__name__]


sys.meta_path.append(_Alias())
'''


def write_shim(folder: Path, aliases: dict[str, str]) -> Path:
    """``folder`` with a ``sitecustomize.py`` that makes every NEW of ``aliases`` (NEW ->
    OLD module names) importable as OLD where NEW is missing; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(SITECUSTOMIZE.format(aliases=aliases))
    return folder


def parse_alias(text: str) -> tuple[str, str]:
    new, sep, old = text.partition("=")
    if not sep or not new.strip() or not old.strip() or new.strip() == old.strip():
        raise argparse.ArgumentTypeError(f"--alias wants NEW=OLD (two module names), got {text!r}")
    return new.strip(), old.strip()


def parse_bench(text: str) -> list[str]:
    words = shlex.split(text)
    if not words or words[0] not in READERS:
        raise argparse.ArgumentTypeError(
            f"--bench wants 'SCRIPT ARGS...' with SCRIPT one of {sorted(READERS)}, got {text!r}"
        )
    if any(w == "--json" or w.startswith("--json=") for w in words):
        raise argparse.ArgumentTypeError(f"--bench: ab.py passes --json itself, got {text!r}")
    return words


def environment(tree: Path, shim: Path | None) -> dict[str, str]:
    paths = [str(tree)] + ([str(shim)] if shim is not None else [])
    return dict(os.environ, PYTHONPATH=os.pathsep.join(paths))


def check_tree(python: str, tree: Path, side: str) -> None:
    """``import arrayds`` with ``PYTHONPATH=tree`` must be the tree's own package."""
    got = subprocess.run(
        [python, "-c", "import arrayds; print(arrayds.__file__)"],
        env=environment(tree, None),
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
    )
    where = Path(got.stdout.strip() or "/").resolve()
    if got.returncode != 0 or tree not in where.parents:
        why = got.stderr.strip().splitlines()[-1:] or [f"it is {where}"]
        raise SystemExit(f"ab.py: --{side} {tree}: import arrayds is not this tree's ({why[0]})")


def describe(tree: Path) -> str:
    got = subprocess.run(
        ["git", "-C", str(tree), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    )
    return got.stdout.strip()[:90] if got.returncode == 0 else "(not a git checkout)"


def run_once(
    python: str, words: list[str], tree: Path, shim: Path | None, out: Path
) -> tuple[Figures, float]:
    """One fresh run of the script on ``tree``: its figures, plus the whole run."""
    script = [python, str(HERE / words[0]), *words[1:], f"--json={out}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    got = subprocess.run(
        script, env=environment(tree, shim), cwd=tempfile.gettempdir(), capture_output=True
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if not out.exists():  # the scripts exit 1 when a target is missed: the JSON decides
        tail = got.stderr.decode(errors="replace").strip().splitlines()[-5:]
        raise SystemExit(f"ab.py: {shlex.join(words)} on {tree} failed:\n" + "\n".join(tail))
    figures = READERS[words[0]](json.loads(out.read_text()))
    out.unlink()
    cpu = sum(getattr(after, f) - getattr(before, f) for f in ("ru_utime", "ru_stime"))
    figures["whole run"] = ("s", False, wall, cpu)
    return figures, wall


def as_time(value: float, higher: bool) -> float:
    return 1 / value if higher else value


def spread(values: list[float]) -> float:
    return (max(values) - min(values)) / statistics.median(values)


def table(words: list[str], runs: dict[str, list[Figures]], loads: list[str]) -> str:
    n = len(runs["before"])
    lines = [
        f"### `{shlex.join(words)}`: {n} run{'s' if n > 1 else ''} per side",
        "",
        "| figure | unit | before | after | after/before (time) | after/before (CPU time) "
        "| spread before | spread after |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, (unit, higher, _, _) in runs["after"][0].items():
        if not all(name in r for side in SIDES for r in runs[side]):
            continue
        val = {s: [r[name][2] for r in runs[s]] for s in SIDES}
        cpu = {s: [r[name][3] for r in runs[s]] for s in SIDES}
        times = {s: [as_time(v, higher) for v in val[s]] for s in SIDES}
        ratio = statistics.median(times["after"]) / statistics.median(times["before"])
        cpu_ratio = "-"
        if all(c is not None for s in SIDES for c in cpu[s]):
            ct = {s: statistics.median(as_time(c, higher) for c in cpu[s]) for s in SIDES}
            cpu_ratio = f"{ct['after'] / ct['before']:.3f}"
        lines.append(
            f"| {name} | {unit} | {statistics.median(val['before']):.4g} | "
            f"{statistics.median(val['after']):.4g} | {ratio:.3f} | {cpu_ratio} | "
            f"{100 * spread(times['before']):.1f}% | {100 * spread(times['after']):.1f}% |"
        )
    lines += ["", "1-minute load average at the start of each run: " + ", ".join(loads) + "."]
    return "\n".join(lines)


def load1() -> str:
    return f"{os.getloadavg()[0]:.2f}"


def compare(
    python: str,
    trees: dict[str, Path],
    words: list[str],
    rounds: int,
    shim: Path | None,
    scratch: Path,
) -> str:
    runs: dict[str, list[Figures]] = {s: [] for s in SIDES}
    loads: list[str] = []
    for r in range(rounds):
        for side in SIDES if r % 2 == 0 else SIDES[::-1]:
            loads.append(f"{side} {load1()}")
            figures, wall = run_once(python, words, trees[side], shim, scratch / "out.json")
            runs[side].append(figures)
            sys.stderr.write(f"ab.py: {words[0]} round {r + 1} {side}: {wall:.1f} s\n")
    loads.append(f"end {load1()}")
    return table(words, runs, loads)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", type=Path, required=True, help="the tree before the change")
    p.add_argument("--after", type=Path, required=True, help="the tree after (its scripts run)")
    p.add_argument(
        "--bench",
        type=parse_bench,
        action="append",
        required=True,
        help="'SCRIPT ARGS...' (repeatable), SCRIPT one of " + ", ".join(sorted(READERS)),
    )
    p.add_argument("--rounds", type=int, default=2, help="rounds (one run per side each)")
    p.add_argument("--alias", type=parse_alias, action="append", default=[], help="NEW=OLD")
    p.add_argument("--python", default=sys.executable, help="the interpreter of every run")
    args = p.parse_args(argv)
    if args.rounds < 1:
        p.error(f"--rounds must be at least 1, got {args.rounds}")
    trees = {s: getattr(args, s).resolve() for s in SIDES}
    for side, tree in trees.items():
        check_tree(args.python, tree, side)
    t0 = time.perf_counter()
    out = [
        "Trees: before " + f"`{trees['before']}` ({describe(trees['before'])}); after "
        f"`{trees['after']}` ({describe(trees['after'])}). Load average (1 min) {load1()} "
        "at the start.",
        "",
    ]
    with tempfile.TemporaryDirectory(prefix="ab-") as tmp:
        scratch = Path(tmp)
        shim = write_shim(scratch / "shim", dict(args.alias)) if args.alias else None
        for words in args.bench:
            out += [compare(args.python, trees, words, args.rounds, shim, scratch), ""]
    out.append(
        f"Total {time.perf_counter() - t0:.0f} s; load average (1 min) {load1()} at the end."
    )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
