"""Smoke test of an installed arrayds wheel, run by a Python that has only the wheel.

`make dist-test` (tests/dist/dist_test.py) runs it in a fresh venv, from a temporary
folder, with the system's copies of the libraries the extension links hidden; the wheel
workflow runs it as cibuildwheel's test-command ([tool.cibuildwheel] in pyproject.toml).
It checks that the installed wheel, not a checkout, is what Python imports; that every
non-system shared library the extension loads comes from inside the wheel; and the
main paths a new user takes: a dask array written and read back, a records dataset
through the data source, files exchanged with the official ``array_record`` reader both
ways for every codec, ``arrayds --help``, and ``arrayds.codecs()``.

Environment: ``ARRAYDS_SMOKE_HIDDEN`` (set by dist_test.py) lists, separated by
``os.pathsep``, the system library files hidden from this process; each must then fail
to load, which shows the hiding works.

Prints one line per check and ends with ``N passed, N failed``; exits 1 on a failure.
"""

from __future__ import annotations

import ctypes
import importlib.machinery
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Libraries every manylinux / macOS wheel may take from the system (the C and C++
# runtimes); anything else the extension loads must come from inside the wheel.
_SYSTEM_LIB = re.compile(
    r"^(linux-vdso|linux-gate|ld-linux[-\w.]*|ld64|libc|libm|libdl|libpthread|librt|"
    r"libutil|libgcc_s|libstdc\+\+|libc\+\+|libc\+\+abi|libSystem|libobjc)(\.|-|$)"
)
# codec name in arrayds.codecs() -> the library names that provide it
_CODEC_LIBS = {
    "zstd": ["libzstd"],
    "brotli": ["libbrotlienc", "libbrotlidec"],
    "snappy": ["libsnappy"],
}

CHECKS: list[Callable[[Path], str | None]] = []


def check(fn: Callable[[Path], str | None]) -> Callable[[Path], str | None]:
    """Register a check; it gets a scratch folder and returns a note (or None)."""
    CHECKS.append(fn)
    return fn


def loaded_libraries() -> set[str]:
    """Paths of the shared libraries mapped into this process right now."""
    if sys.platform == "linux":
        out = set()
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(maxsplit=5)
                if len(parts) == 6 and ".so" in parts[5]:
                    out.add(parts[5].strip())
        return out
    if sys.platform == "darwin":
        dyld = ctypes.CDLL(None)
        dyld._dyld_get_image_name.restype = ctypes.c_char_p
        return {
            dyld._dyld_get_image_name(i).decode()
            for i in range(dyld._dyld_image_count())
            if dyld._dyld_get_image_name(i)
        }
    raise RuntimeError(f"no shared-library listing for {sys.platform}")


def _soname(path: str) -> str:
    return os.path.basename(path)


def _is_system(path: str) -> bool:
    if sys.platform == "darwin":
        return path.startswith(("/usr/lib/", "/System/"))
    return bool(_SYSTEM_LIB.match(_soname(path)))


def _load_extension_alone() -> tuple[object, set[str]]:
    """Load arrayds._native by itself (before the package and its imports), and return it
    with the shared libraries that loading it mapped: the extension and what it links."""
    import numpy  # noqa: F401  (the module's pybind11 numpy support imports it)

    spec = importlib.util.find_spec("arrayds")
    assert spec is not None and spec.submodule_search_locations, "arrayds is not installed"
    folders = list(spec.submodule_search_locations)
    candidates = [
        Path(folder) / f"_native{suffix}"
        for folder in folders
        for suffix in importlib.machinery.EXTENSION_SUFFIXES
        if (Path(folder) / f"_native{suffix}").is_file()
    ]
    assert len(candidates) == 1, f"expected one extension module in {folders}: {candidates}"
    before = loaded_libraries()
    ext_spec = importlib.util.spec_from_file_location("arrayds._native", candidates[0])
    assert ext_spec is not None and ext_spec.loader is not None
    module = importlib.util.module_from_spec(ext_spec)
    sys.modules["arrayds._native"] = module  # `import arrayds` then binds this one
    ext_spec.loader.exec_module(module)
    return module, loaded_libraries() - before


# set by main(): the extension, the libraries loading it mapped, the installed package
_native: Any = None
_EXTENSION_LIBS: set[str] = set()
arrayds: Any = None
PACKAGE_DIR = Path()
WHEEL_LIB_DIRS: list[Path] = []


def _in_wheel_libs(path: str) -> bool:
    p = Path(path).resolve()
    return any(d in p.parents for d in WHEEL_LIB_DIRS)


@check
def installed_wheel_is_imported(tmp: Path) -> str:
    checkout = Path(__file__).resolve().parents[2]
    site = {Path(sysconfig.get_paths()[k]).resolve() for k in ("purelib", "platlib")}
    assert PACKAGE_DIR.parent in site, f"arrayds imported from {PACKAGE_DIR}, not {site}"
    assert PACKAGE_DIR != checkout / "arrayds", f"arrayds imported from the checkout {checkout}"
    dist = importlib.metadata.distribution("arrayds")
    direct = dist.read_text("direct_url.json") or ""
    assert '"editable": true' not in direct, f"an editable install: {direct}"
    assert dist.version == arrayds.__version__, (dist.version, arrayds.__version__)
    files = {str(f) for f in dist.files or []}
    for name in ("arrayds/py.typed", "LICENSE", "NOTICE", "LICENSES/zstd.txt"):
        assert any(f == name or f.endswith("/licenses/" + name) for f in files), (
            f"{name} is not in the installed wheel"
        )
    return f"arrayds {dist.version} from {PACKAGE_DIR}"


@check
def every_codec_is_built(tmp: Path) -> str:
    codecs = arrayds.codecs()
    assert {"uncompressed", "zstd", "brotli", "snappy"} <= set(codecs), codecs
    assert all(codecs.values()), f"a codec is missing from the wheel: {codecs}"
    return ", ".join(sorted(codecs))


@check
def native_libraries_come_from_the_wheel(tmp: Path) -> str:
    ext = Path(_native.__file__).resolve()
    foreign = []
    vendored = []
    for lib in sorted(_EXTENSION_LIBS):
        if Path(lib).resolve() == ext:
            continue
        if _in_wheel_libs(lib):
            vendored.append(_soname(lib))
        elif not _is_system(lib):
            foreign.append(lib)
    assert not foreign, f"the extension loaded libraries from outside the wheel: {foreign}"
    for codec, libs in _CODEC_LIBS.items():
        if arrayds.codecs()[codec]:
            for name in libs:
                assert any(v.startswith(name) for v in vendored), (
                    f"{codec}: no {name} among the wheel's libraries {vendored}"
                )
    if sys.platform == "linux":
        # the loader's view: every dependency resolves, and only system runtimes outside
        out = subprocess.run(["ldd", str(ext)], capture_output=True, text=True, check=True)
        for line in out.stdout.splitlines():
            name, _, rest = line.strip().partition(" => ")
            assert "not found" not in line, f"ldd {ext}: {line.strip()}"
            target = rest.split(" (")[0].strip()
            if target and not _is_system(name):
                assert _in_wheel_libs(target), f"ldd {ext}: {name} resolves to {target}"
    return "from the wheel: " + ", ".join(vendored)


@check
def system_copies_are_hidden(tmp: Path) -> str | None:
    hidden = [p for p in os.environ.get("ARRAYDS_SMOKE_HIDDEN", "").split(os.pathsep) if p]
    if not hidden:
        return "SKIP: nothing hidden (ARRAYDS_SMOKE_HIDDEN unset)"
    for path in hidden:
        try:
            ctypes.CDLL(path)
        except OSError:
            continue
        raise AssertionError(f"{path} is supposed to be hidden but loads")
    return f"{len(hidden)} system libraries hidden and unloadable"


@check
def dask_array_round_trip(tmp: Path) -> str:
    import dask.array as da
    import numpy as np

    x = da.random.default_rng(0).standard_normal((300, 40), chunks=(64, 40))
    arrayds.to_arrayrecord(x, tmp / "a.ads", "t", dims=("time", "station"))
    t = arrayds.open_array(tmp / "a.ads", "t")
    want = x.compute()
    assert t.shape == (300, 40) and np.array_equal(t[100:130, 5], want[100:130, 5])
    y = arrayds.from_arrayrecord(tmp / "a.ads", "t")
    assert np.array_equal(y.compute(), want)
    return f"{t.shape} in {len(t.chunks[0])} chunks"


@check
def records_through_the_data_source(tmp: Path) -> str:
    import numpy as np

    rows = [{"id": i, "x": np.arange(3) * i} for i in range(50)]
    arrayds.to_arrayrecord(rows, tmp / "r.ads", "train")
    src = arrayds.ArrayRecordDataSource(str(tmp / "r.ads" / "train"), decode=True)
    assert len(src) == 50
    assert src[42]["id"] == 42 and np.array_equal(src[42]["x"], np.arange(3) * 42)
    return f"{len(src)} records"


@check
def official_reader_interop(tmp: Path) -> str:
    try:
        from array_record.python import array_record_module as official
    except ImportError:
        if sys.version_info < (3, 11):  # the official package has no wheels for 3.10
            return "SKIP: array_record has no wheel for this Python"
        raise
    records = [os.urandom(n) for n in (0, 1, 100, 5000, 70_000)] + [b"x" * 200_000]
    for options in ("uncompressed", "zstd:3", "brotli:6", "snappy"):
        ours = str(tmp / f"ours-{options[:6]}.ar")
        with arrayds.ArrayRecordWriter(ours, f"group_size:2,{options}") as w:
            w.write_many(records)
        r = official.ArrayRecordReader(ours)
        try:
            assert r.read_all() == records, f"{options}: official reader disagrees"
        finally:
            r.close()
        theirs = str(tmp / f"theirs-{options[:6]}.ar")
        w = official.ArrayRecordWriter(theirs, f"group_size:2,{options}")
        for rec in records:
            w.write(rec)
        w.close()
        assert arrayds.ArrayRecordReader(theirs).read_all() == records, options
    return "4 codecs, both ways"


@check
def command_line(tmp: Path) -> str:
    exe = Path(sys.executable).parent / "arrayds"
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=True)
    for command in ("info", "verify", "convert", "cat", "gc"):
        assert command in out.stdout, f"arrayds --help lacks {command!r}:\n{out.stdout}"
    ver = subprocess.run([str(exe), "--version"], capture_output=True, text=True, check=True)
    assert arrayds.__version__ in ver.stdout, ver.stdout
    return ver.stdout.strip()


def _load() -> None:
    global _native, _EXTENSION_LIBS, arrayds, PACKAGE_DIR, WHEEL_LIB_DIRS
    _native, _EXTENSION_LIBS = _load_extension_alone()
    import arrayds as package

    arrayds = package
    PACKAGE_DIR = Path(arrayds.__file__).resolve().parent
    # auditwheel puts the libraries in <site-packages>/arrayds.libs, delocate in
    # arrayds/.dylibs
    WHEEL_LIB_DIRS = [PACKAGE_DIR.parent / "arrayds.libs", PACKAGE_DIR / ".dylibs"]


def main() -> int:
    passed = failed = skipped = 0
    try:
        _load()
    except Exception:
        print(f"FAIL import_the_extension\n{traceback.format_exc()}", flush=True)
        print("dist smoke: 0 passed, 1 failed, 0 skipped")
        return 1
    with tempfile.TemporaryDirectory(prefix="arrayds-smoke-") as scratch:
        for fn in CHECKS:
            tmp = Path(scratch) / fn.__name__
            tmp.mkdir()
            try:
                note = fn(tmp)
            except Exception:
                failed += 1
                print(f"FAIL {fn.__name__}\n{traceback.format_exc()}", flush=True)
                continue
            if note and note.startswith("SKIP"):
                skipped += 1
                print(f"skip {fn.__name__}: {note[5:].strip()}", flush=True)
            else:
                passed += 1
                print(f"ok   {fn.__name__}" + (f": {note}" if note else ""), flush=True)
    print(f"dist smoke: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
