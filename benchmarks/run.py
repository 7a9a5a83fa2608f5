"""Run every benchmark module (benchmarks/bench_*.py), one subprocess each.

    python benchmarks/run.py                 # all of them, full size
    python benchmarks/run.py --quick         # smaller inputs (flags pass through)
    python benchmarks/run.py arrayrecord     # only modules whose name contains this

Words are module filters and everything starting with ``-`` is passed to every
module, so give flag values with ``=`` (``--repeat=5``).

Each module is a script with a ``main(argv)`` that prints a markdown section; the
sections are printed in order, and a module that fails makes the exit status 1.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    names = [a for a in argv if not a.startswith("-")]
    flags = [a for a in argv if a.startswith("-")]
    modules = sorted(HERE.glob("bench_*.py"))
    if names:
        modules = [m for m in modules if any(n in m.stem for n in names)]
    if not modules:
        sys.stderr.write(f"no benchmark module matches {names}\n")
        return 1
    failed = []
    for module in modules:
        t0 = time.perf_counter()
        sys.stdout.write(f"\n<!-- {module.name} -->\n")
        sys.stdout.flush()
        proc = subprocess.run([sys.executable, str(module), *flags], cwd=HERE.parent)
        status = "ok" if proc.returncode == 0 else f"FAILED ({proc.returncode})"
        sys.stdout.write(
            f"\n<!-- {module.name}: {status} in {time.perf_counter() - t0:.0f} s -->\n"
        )
        if proc.returncode != 0:
            failed.append(module.name)
    if failed:
        sys.stderr.write(f"failed: {', '.join(failed)}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
