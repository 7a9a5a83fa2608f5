"""Package metadata and the `make dist` checks themselves (fast; the wheel build and its
smoke test are `make dist-test`, which `make test` runs before pytest)."""

from __future__ import annotations

import importlib.metadata
import io
import os
import re
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

import arrayds

from . import make_dist

ROOT = make_dist.ROOT


def test_version_has_one_source() -> None:
    config = make_dist.pyproject()
    assert "version" not in config["project"] and config["project"]["dynamic"] == ["version"]
    (entry,) = config["tool"]["dynamic-metadata"]
    assert entry["field"] == "version" and entry["input"] == "arrayds/__init__.py"
    # the editable install's metadata was computed from that line
    assert importlib.metadata.version("arrayds") == arrayds.__version__
    assert make_dist.source_version() == arrayds.__version__


def test_metadata_users_and_tools_read() -> None:
    meta = importlib.metadata.metadata("arrayds")
    assert meta["License-Expression"] == "Apache-2.0"
    files = set(meta.get_all("License-File") or [])
    assert {"LICENSE", "NOTICE"} <= files
    assert {f"LICENSES/{p.name}" for p in (ROOT / "LICENSES").glob("*.txt")} <= files
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    # every supported Python version is a classifier and a wheel the workflow builds
    builds = make_dist.pyproject()["tool"]["cibuildwheel"]["build"]
    for minor in range(10, 15):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
        assert f"cp3{minor}-*" in builds
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL") or [])
    assert {"Homepage", "Source", "Issues", "Documentation"} <= set(urls)
    assert (Path(arrayds.__file__).parent / "py.typed").is_file()


def test_licence_files() -> None:
    debian = Path("/usr/share/common-licenses/Apache-2.0")
    if debian.is_file():
        assert (ROOT / "LICENSE").read_bytes() == debian.read_bytes()
    assert "Apache License" in (ROOT / "LICENSE").read_text()
    notice = (ROOT / "NOTICE").read_text()
    texts = sorted(p.name for p in (ROOT / "LICENSES").glob("*.txt"))
    assert texts == ["brotli.txt", "highwayhash.txt", "pybind11.txt", "snappy.txt", "zstd.txt"]
    licence_words = {
        "brotli.txt": "Permission is hereby granted",  # MIT
        "highwayhash.txt": "Licensed under the Apache License, Version 2.0",
        "pybind11.txt": "Redistribution and use in source and binary forms",  # BSD-3
        "snappy.txt": "Redistribution and use in source and binary forms",
        "zstd.txt": "Redistribution and use in source and binary forms",
    }
    for name in texts:
        assert f"LICENSES/{name}" in notice, f"NOTICE does not name LICENSES/{name}"
        assert licence_words[name] in (ROOT / "LICENSES" / name).read_text(), name


def test_cibuildwheel_configuration_points_at_real_files() -> None:
    cibw = make_dist.pyproject()["tool"]["cibuildwheel"]
    assert cibw["test-command"] == "python {project}/tests/dist/smoke.py"
    assert (ROOT / "tests/dist/smoke.py").is_file()
    for platform in ("linux", "macos"):
        table = cibw[platform]
        script = re.search(r"\{package\}/(\S+)", table["before-all"])
        assert script and (ROOT / script.group(1)).is_file(), table["before-all"]
        assert "{wheel}" in table["repair-wheel-command"]
        assert "{dest_dir}" in table["repair-wheel-command"]
    assert cibw["linux"]["repair-wheel-command"].startswith("auditwheel repair")


def test_workflow_builds_the_three_platforms_with_cibuildwheel() -> None:
    flow = yaml.safe_load((ROOT / ".github/workflows/wheels.yml").read_text())
    wheels = flow["jobs"]["wheels"]
    assert set(wheels["strategy"]["matrix"]["os"]) == {
        "ubuntu-24.04",
        "ubuntu-24.04-arm",
        "macos-14",
    }
    uses = [s.get("uses", "") for s in wheels["steps"]]
    assert any(u.startswith("pypa/cibuildwheel@v3") for u in uses), uses
    # no cibuildwheel options in the workflow: pyproject.toml is the one place
    assert all("env" not in s for s in wheels["steps"])
    assert "sdist" in flow["jobs"]


# ----------------------------------------------------------------- make dist's own checks


def _sdist(tmp_path: Path, files: dict[str, bytes]) -> Path:
    path = tmp_path / "arrayds-0.0.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"arrayds-0.0.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _real_sdist_files() -> dict[str, bytes]:
    expected = make_dist.expected_sdist_files(make_dist.pyproject())
    if expected is None:
        pytest.skip("not a git checkout")
    return {f: b"" for f in expected} | {"PKG-INFO": b""}


def test_sdist_check_accepts_the_listed_files(tmp_path: Path) -> None:
    files = _real_sdist_files()
    assert make_dist.check_sdist(_sdist(tmp_path, files), make_dist.pyproject()) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"build/cp311/engine.o": b"x"}, "build product"),
        ({".venv/bin/python": b"x"}, "build product"),
        ({"arrayds/_native.cpython-311-x86_64-linux-gnu.so": b"x"}, "build product"),
        ({"arrayds/__pycache__/api.cpython-311.pyc": b"x"}, "build product"),
        ({"arrayds/scratch_notes.py": b"x"}, "which git does not know"),
        ({"LICENSE": None}, "lacks LICENSE"),
        ({"native/CMakeLists.txt": None}, "lacks native/CMakeLists.txt"),
        ({"arrayds/py.typed": None}, "lacks arrayds/py.typed"),
    ],
)
def test_sdist_check_rejects(tmp_path: Path, change: dict, message: str) -> None:
    files = _real_sdist_files()
    for name, data in change.items():
        if data is None:
            files.pop(name)
        else:
            files[name] = data
    problems = make_dist.check_sdist(_sdist(tmp_path, files), make_dist.pyproject())
    assert any(message in p for p in problems), problems


def test_sync_tree_rewrites_only_changed_files(tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    (src / "d").mkdir(parents=True)
    (src / "same.cc").write_text("int a;")
    (src / "d" / "changed.cc").write_text("int b;")
    make_dist.sync_tree(src, dst)
    (dst / "stale.cc").write_text("gone")
    old = 1_000_000_000
    for f in (dst / "same.cc", dst / "d" / "changed.cc"):
        os.utime(f, (old, old))
    (src / "d" / "changed.cc").write_text("int c;")
    make_dist.sync_tree(src, dst)
    assert (dst / "same.cc").stat().st_mtime == old  # untouched: ninja will not rebuild it
    assert (dst / "d" / "changed.cc").read_text() == "int c;"
    assert (dst / "d" / "changed.cc").stat().st_mtime > old
    assert not (dst / "stale.cc").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="ELF")
def test_elf_needed_reads_the_extension() -> None:
    pytest.importorskip("elftools", reason="installed by make dist (requirements/dist.txt)")
    needed = make_dist.elf_needed(Path(arrayds._native.__file__).read_bytes())
    assert any(n.startswith("libzstd") for n in needed), needed
    assert any(make_dist.SYSTEM_LIB.match(n) for n in needed), needed
