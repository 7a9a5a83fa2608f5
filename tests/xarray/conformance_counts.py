"""Count the inherited tests of xarray's backend suite that pass for arrayds and for
xarray's own zarr backend, on the installed xarray (the table in docs/xarray.md).

"Inherited" tests are the test methods of ``xarray.tests.test_backends.CFEncodedBase``
(with ``DatasetIOBase``), with their parameters. The zarr count runs xarray's
``TestZarrDirectoryStore`` (zarr format 3) on the same names.

    .venv/bin/python tests/xarray/conformance_counts.py [--details]
"""

from __future__ import annotations

import collections
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def inherited_names() -> list[str]:
    from xarray.tests.test_backends import CFEncodedBase

    return sorted(n for n in dir(CFEncodedBase) if n.startswith("test_"))


def run(target: list[str], names: list[str], outside: bool = False) -> dict[str, str]:
    """node id (class-less: ``test_x[params]``) -> outcome. ``outside``: run from a
    temporary folder without the project's configuration (xarray's own tests load
    ``xarray.tests.conftest`` themselves, which the project's conftest also does)."""
    import tempfile

    expr = " or ".join(names)
    cmd = [sys.executable, "-m", "pytest", "-v", "-rs", "-p", "no:cacheprovider", "-k", expr]
    with tempfile.TemporaryDirectory() as tmp:
        if outside:
            cmd += ["-c", os.devnull, "--rootdir", tmp]
        cwd = tmp if outside else os.path.dirname(os.path.dirname(HERE))
        out = subprocess.run(cmd + target, capture_output=True, text=True, cwd=cwd).stdout
    res: dict[str, str] = {}
    for line in out.splitlines():
        m = re.search(r"::(test_\w+(?:\[.*\])?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)", line)
        if m:
            res[m.group(1)] = m.group(2)
    skips = [ln for ln in out.splitlines() if ln.startswith("SKIPPED [")]
    res.update({f"skip-reason {i}: {ln}": "reason" for i, ln in enumerate(skips)})
    return res


def main() -> None:
    names = inherited_names()
    arrayds = run([os.path.join(HERE, "test_conformance.py::TestArrayDSLocal")], names)
    import xarray.tests.test_backends as tb

    zarr = run([f"{tb.__file__}::TestZarrDirectoryStore"], names, outside=True)
    # zarr's class runs each test for zarr formats 2 and 3 (the first parameter): keep 3
    zarr = {
        re.sub(r"\[3-?", "[", k).replace("[]", ""): v
        for k, v in zarr.items()
        if v == "reason" or re.search(r"\[3(\]|-)", k) or "[" not in k
    }
    for res in (arrayds, zarr):  # -k matches substrings: keep the inherited names only
        for k in [k for k, v in res.items() if v != "reason" and k.split("[")[0] not in names]:
            del res[k]
    for label, res in (("arrayds (local)", arrayds), ("zarr (directory, format 3)", zarr)):
        c = collections.Counter(v for v in res.values() if v != "reason")
        print(f"{label}: {sum(c.values())} inherited tests: {dict(c)}")
    if "--details" in sys.argv:
        for k in sorted(set(arrayds) | set(zarr)):
            if arrayds.get(k) != "reason" and arrayds.get(k) != zarr.get(k):
                print(f"  {k}: arrayds {arrayds.get(k)}, zarr {zarr.get(k)}")
        for label, res in (("arrayds", arrayds), ("zarr", zarr)):
            for k in sorted(k for k, v in res.items() if v == "reason"):
                print(f"  {label} {k}")


if __name__ == "__main__":
    main()
