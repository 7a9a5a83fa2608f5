"""`make dist-test`: install the repaired wheel from dist/ in a fresh venv and smoke-test it.

The venv (build/dist/venv, recreated every run) gets the wheel with ``test-extras``
and ``test-requires`` of ``[tool.cibuildwheel]`` -- what the hosted workflow installs --
resolved against requirements/constraints.txt. Then its ``test-command``
(tests/dist/smoke.py) runs from a temporary folder with ``LD_LIBRARY_PATH``,
``LD_PRELOAD`` and ``PYTHONPATH`` unset and, when this runs as root, in a private mount
namespace (``unshare --mount``) where every system library file the *unrepaired*
extension resolves to (libzstd, libbrotli*, libsnappy, libhighwayhash when linked
dynamically, ... whatever ldd lists outside the C and C++ runtimes) is covered by an
empty file: a wheel that still needed the system's copy would fail to import. The
smoke test also checks that each hidden file really fails to load there.

Run from the checkout with the venv's Python after `make dist`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_dist import OUT, ROOT, SYSTEM_LIB, WORK, extension_member, pyproject  # noqa: E402

VENV = WORK / "venv"


def system_libraries_of(unrepaired: Path, scratch: Path) -> list[str]:
    """The real files of the non-runtime libraries the unrepaired extension loads."""
    with zipfile.ZipFile(unrepaired) as z:
        ext = z.extract(extension_member(z), scratch)
    out = subprocess.run(["ldd", ext], capture_output=True, text=True, check=True).stdout
    paths = set()
    for line in out.splitlines():
        name, sep, rest = line.strip().partition(" => ")
        target = rest.split(" (")[0].strip()
        if sep and target.startswith("/") and not SYSTEM_LIB.match(name):
            paths.add(os.path.realpath(target))
    return sorted(paths)


def can_hide() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    return probe.returncode == 0


def main() -> int:
    start = time.monotonic()
    wheels = sorted(OUT.glob("arrayds-*-manylinux_*.whl"))
    unrepaired = sorted((WORK / "wheel").glob("arrayds-*.whl"))
    if len(wheels) != 1 or len(unrepaired) != 1:
        sys.exit(f"make dist-test: run make dist first (dist/ has {[w.name for w in wheels]})")
    cibw = pyproject()["tool"]["cibuildwheel"]
    extras = ",".join(cibw["test-extras"])

    shutil.rmtree(VENV, ignore_errors=True)
    # no pip inside (ensurepip alone took 13 s here): this venv's pip installs into it
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", VENV], check=True)
    py = VENV / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", py, "install", "-q", "--no-compile"]
    install += ["-c", ROOT / "requirements" / "constraints.txt"]
    subprocess.run([*install, f"{wheels[0]}[{extras}]", *cibw["test-requires"]], check=True)
    installed = time.monotonic()

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
    }
    env["PYTHONNOUSERSITE"] = "1"
    with tempfile.TemporaryDirectory(prefix="arrayds-dist-test-") as scratch:
        hidden = system_libraries_of(unrepaired[0], Path(scratch))
        # cibuildwheel's test-command, run the way cibuildwheel runs it: by a shell, with
        # the test venv first on PATH, {project} and {package} the checkout
        test_command = cibw["test-command"].format(project=ROOT, package=ROOT)
        env["PATH"] = f"{VENV / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        smoke = ["sh", "-c", test_command]
        if not hidden:
            sys.exit("make dist-test: the unrepaired extension links no system library to hide")
        if can_hide():
            env["ARRAYDS_SMOKE_HIDDEN"] = os.pathsep.join(hidden)
            # cover each library file with /dev/null inside a private mount namespace
            script = (
                'n=$1; shift; for _ in $(seq "$n"); do mount --bind /dev/null "$1"; shift; done; '
                'exec "$@"'
            )
            cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-ec", script, "sh"]
            cmd += [str(len(hidden)), *hidden, *smoke]
            print("make dist-test: hiding " + ", ".join(hidden), flush=True)
        else:
            cmd = smoke
            print(
                "make dist-test: WARNING: not root or no unshare: the system's libraries stay "
                "visible (the smoke test still checks where each library was loaded from)",
                flush=True,
            )
        done = subprocess.run(cmd, cwd=scratch, env=env)
    print(
        f"make dist-test: {time.monotonic() - start:.0f} s "
        f"(venv + install {installed - start:.0f} s, smoke {time.monotonic() - installed:.0f} s)"
    )
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
