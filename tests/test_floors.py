"""pyproject.toml's lower bounds are the versions requirements/floors.txt pins exactly
(`make test-floors` tests those); dependencies and extras give ranges, and exact pins
live in requirements/constraints.txt only, inside those ranges, and
requirements/latest.txt's (`make test-latest`) fall inside them too
(docs/development.md "Dependency floors", "The newest zarr-python")."""

from __future__ import annotations

import os

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+
requirements = pytest.importorskip("packaging.requirements")
utils = pytest.importorskip("packaging.utils")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _pins(relpath: str) -> dict[str, str]:
    """name -> version of every ``name==version`` line (comments and blanks skipped)."""
    pins = {}
    with open(os.path.join(ROOT, relpath)) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                req = requirements.Requirement(line)
                (spec,) = req.specifier
                assert spec.operator == "==", f"{relpath}: {line!r} is not an exact pin"
                pins[utils.canonicalize_name(req.name)] = spec.version
    return pins


def _declared(extras: tuple[str, ...] | None = None) -> list:
    """The requirements of [project.dependencies] and of the extras (all of them by
    default), without the package's references to its own extras."""
    project = _project()
    names = project["optional-dependencies"] if extras is None else extras
    lines = list(project["dependencies"])
    for extra in names:
        lines += project["optional-dependencies"][extra]
    reqs = [requirements.Requirement(line) for line in lines]
    return [r for r in reqs if utils.canonicalize_name(r.name) != "arrayds"]


def _lower_bound(req) -> str:
    lows = [s.version for s in req.specifier if s.operator == ">="]
    assert len(lows) == 1, f"pyproject.toml: {req} needs exactly one lower bound (>=)"
    return lows[0]


def test_floors_are_pyprojects_lower_bounds():
    floors = _pins("requirements/floors.txt")
    for req in _declared(("dask", "xarray")):
        name = utils.canonicalize_name(req.name)
        assert name in floors, f"requirements/floors.txt has no floor for {req}"
        # the same version: 2025.4 == 2025.4.0
        floor = requirements.Requirement(f"x=={floors[name]}").specifier
        assert floor.contains(_lower_bound(req)), (
            f"pyproject.toml says {req}, requirements/floors.txt tests {name}=={floors[name]}"
        )
    test_req = {utils.canonicalize_name(r.name): r for r in _declared(("test",))}
    assert floors["array-record"] == _lower_bound(test_req["array-record"])


def test_no_exact_pins_outside_constraints():
    for req in _declared():
        assert not any(s.operator in ("==", "===") for s in req.specifier), (
            f"pyproject.toml pins {req} exactly: give a range, pin in requirements/constraints.txt"
        )


def test_constraints_pins_fall_in_the_declared_ranges():
    pins = _pins("requirements/constraints.txt")
    checked = 0
    for req in _declared():
        name = utils.canonicalize_name(req.name)
        if name in pins:
            checked += 1
            assert req.specifier.contains(pins[name], prereleases=True), (
                f"requirements/constraints.txt pins {name}=={pins[name]}, outside "
                f"pyproject.toml's {req}"
            )
    assert checked > 20
    # make install takes this machine's local CPU build of torch (a plain 2.13.0 or an
    # open range would fetch a CUDA build of several GB)
    assert pins["torch"] == "2.13.0+cpu"


def test_latest_pins_fall_in_the_declared_ranges():
    """requirements/latest.txt (`make test-latest`): exact pins inside pyproject.toml's
    ranges, with a zarr-python that has the rectilinear chunk grid (3.4)."""
    pins = _pins("requirements/latest.txt")
    declared = {utils.canonicalize_name(r.name): r for r in _declared()}
    for name in ("zarr", "xarray", "dask", "distributed", "numpy", "fsspec", "msgpack", "click"):
        assert declared[name].specifier.contains(pins[name], prereleases=True), (
            f"requirements/latest.txt pins {name}=={pins[name]}, outside {declared[name]}"
        )
    assert requirements.Requirement("x>=3.4").specifier.contains(pins["zarr"])


def test_pin_files_are_read_strictly(tmp_path):
    (tmp_path / "x.txt").write_text("# c\n\nnumpy==1.24.0  # why\ndask[array]==2025.4.0\n")
    assert _pins(str(tmp_path / "x.txt")) == {"numpy": "1.24.0", "dask": "2025.4.0"}
    (tmp_path / "x.txt").write_text("numpy>=1.24\n")
    with pytest.raises(AssertionError, match="is not an exact pin"):
        _pins(str(tmp_path / "x.txt"))
