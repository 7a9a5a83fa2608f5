# arrayds: the two commands a newcomer runs are `make demo` and `make test`.
# Both install everything they need first (system libraries with apt-get when
# missing, a virtual environment in .venv, the package with its extras).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
SYSTEM_PACKAGES := g++ cmake pkg-config libzstd-dev libhighwayhash-dev libbrotli-dev libsnappy-dev chromium
EXTRAS ?= test,ml

.PHONY: demo test install system-deps native lint format bench bench-anchors docs clean sanitize test-floors test-latest fuzz

demo: install
	$(PY) examples/quickstart.py

test: install
	$(PY) -m ruff check arrayds tests examples benchmarks
	$(PY) -m ruff format --check arrayds tests examples benchmarks
	$(MAKE) dist-test
	$(MAKE) -j3 test-suite test-envs NICE="nice -n 10"
	$(MAKE) test-floors
	$(MAKE) test-latest

# The whole suite. `make test` builds the venvs of test-floors and test-latest (pip
# installs and an engine build each: minutes on a fresh machine, nothing once they are
# up to date) while it runs, at a lower priority (NICE), on the core the suite leaves
# idle much of the time, rather than after it.
.PHONY: test-suite test-envs
test-suite:
	ARRAYDS_FULL_TEST=1 $(PY) -m pytest -q

# a command prefix for the venv builds of test-floors and test-latest (see test-suite)
NICE ?=

system-deps:
	@missing=""; for p in $(SYSTEM_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; \
	fi

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# The extension is built once here; after changing C++ run `make native`
# (see docs/development.md).
# requirements/constraints.txt pins the versions the suite passes with: pip's resolver
# then has nothing to search (minutes saved on a fresh machine) and CI is reproducible.
CONSTRAINTS := -c requirements/constraints.txt

install: system-deps $(PY)
	$(PIP) install -q $(CONSTRAINTS) scikit-build-core pybind11 ninja setuptools wheel
	$(PIP) install -q --no-build-isolation $(CONSTRAINTS) -e ".[$(EXTRAS)]"

native: $(PY)
	$(PIP) install -q --no-build-isolation --no-deps -e .

lint: install
	$(PY) -m ruff check arrayds tests examples benchmarks

format:
	$(PY) -m ruff format arrayds tests examples benchmarks
	$(PY) -m ruff check --fix arrayds tests examples benchmarks

bench: install
	$(PIP) install -q --no-build-isolation $(CONSTRAINTS) -e ".[$(EXTRAS),bench]"
	$(PY) benchmarks/run.py

# The anchor environment (requirements/anchors.txt, exact pins): the libraries the
# benchmarks compare against that need Python >= 3.12 (zarr-python 3.4, icechunk 2.x)
# in .venv-anchors, which benchmarks/anchor_runner.py runs their side in
# (ARRAYDS_ANCHOR_PYTHON overrides it). Not part of `make test`. ANCHOR_PYTHON: a 3.12.
ANCHOR_PYTHON ?= $(shell python3.12 -c 'import sys; print(sys.executable)' 2>/dev/null || echo /root/.pyenv/versions/3.12.1/bin/python)
ANCHOR_VENV   := .venv-anchors

$(ANCHOR_VENV)/.anchors: requirements/anchors.txt
	rm -rf $(ANCHOR_VENV)
	$(ANCHOR_PYTHON) -m venv $(ANCHOR_VENV)
	$(ANCHOR_VENV)/bin/python -m pip install -q --upgrade pip
	$(ANCHOR_VENV)/bin/python -m pip install -q -r requirements/anchors.txt
	touch $@

bench-anchors: $(ANCHOR_VENV)/.anchors

# AddressSanitizer + UndefinedBehaviorSanitizer build of the engine (in build/sanitize,
# leaving the editable install alone), then the engine and ArrayRecord API tests
# against it (docs/development.md).
sanitize: install
	PY=$(PY) native/sanitize.sh tests/engine tests/arrayrecord

# Coverage-guided fuzzing of the reader (docs/development.md): a clang ASan + libFuzzer
# build of the engine in build/fuzz, then atheris for FUZZ_SECONDS from the committed
# corpus tests/fuzz/corpus (which `make test` replays on the normal build).
FUZZ_SECONDS ?= 300
fuzz: SYSTEM_PACKAGES += clang libclang-rt-14-dev
fuzz: install
	$(PIP) install -q --no-build-isolation $(CONSTRAINTS) -e ".[$(EXTRAS),fuzz]"
	FUZZ_SECONDS=$(FUZZ_SECONDS) PY=$(PY) native/fuzz.sh

# The documentation site (guide, CLI, format, API reference from the docstrings) in
# site/; warnings are errors. `make test` builds it too (tests/docs).
docs: install
	$(PY) -m mkdocs build --strict --site-dir site

# The sdist and a manylinux wheel (vendoring libzstd, libbrotli*, libsnappy, ...) in dist/,
# checked; dist-test installs that wheel in a fresh venv with the system's copies of those
# libraries hidden and runs tests/dist/smoke.py (docs/development.md, "Distributions").
.PHONY: dist dist-test
dist: install
	$(PIP) install -q $(CONSTRAINTS) -r requirements/dist.txt
	$(PY) tests/dist/make_dist.py

dist-test: dist
	$(PY) tests/dist/dist_test.py

# The oldest supported dependency versions (requirements/floors.txt, exact pins) in a
# venv of their own, on a quick subset: the dataset layer (with the fused write graph
# on dask's private task spec), ArrayRecord files against the official reader, xarray,
# a write on a LocalCluster and the graph helpers' examples (docs/development.md
# "Dependency floors"); not the engine's corruption sweep, the quickstart script nor
# the kill-and-race tests of test_crash.py (timing, no dependency takes part in them).
# dask's array query planning (experimental) is not supported at the floor: its tests
# are left out.
FLOORS_VENV  := .venv-floors
FLOORS_PY    := $(FLOORS_VENV)/bin/python
FLOORS_TESTS := tests/dataset tests/arrayrecord tests/xarray/test_xarray.py \
                tests/cluster/test_write_locality.py tests/test_floors.py \
                'tests/test_docstrings.py::test_docstring_examples[arrayds.kinds.array.dask]' \
                --ignore=tests/arrayrecord/test_corruption.py --ignore=tests/dataset/test_crash.py \
                --deselect tests/arrayrecord/test_docs_and_example.py::test_quickstart_runs

$(FLOORS_VENV)/.floors: requirements/floors.txt
	rm -rf $(FLOORS_VENV)
	$(PYTHON) -m venv $(FLOORS_VENV)
	$(NICE) $(FLOORS_PY) -m pip install -q --upgrade pip
	$(NICE) $(FLOORS_PY) -m pip install -q -r requirements/floors.txt
	touch $@

# The engine in build/floors (the extension does not depend on the numpy version);
# rebuilt when the C++ changes, Python files are the work tree's (editable install).
$(FLOORS_VENV)/.engine: $(FLOORS_VENV)/.floors pyproject.toml native/CMakeLists.txt \
                        $(shell find native/src -name '*.cc' -o -name '*.h')
	$(NICE) $(FLOORS_PY) -m pip install -q --no-build-isolation --no-deps -C build-dir=build/floors -e .
	touch $@

test-floors: system-deps $(FLOORS_VENV)/.engine
	$(FLOORS_PY) -m pytest -q -x -p no:cacheprovider -k "not query_planning" $(FLOORS_TESTS)

# The newest zarr-python (requirements/latest.txt, exact pins: zarr 3.4, which needs
# Python >= 3.12, with the newest numpy, xarray and dask) in a venv of its own on the
# anchor interpreter's Python (ANCHOR_PYTHON), on what depends on the zarr version: the
# zarr view (tests/zarr: zarr's own store tests, xarray's zarr engine, the rectilinear
# chunk grid the project venv's zarr 3.1 lacks, the view's benchmark), the xarray tests
# compared with xarray's zarr backend and `arrayds convert` of zarr stores
# (docs/development.md "The newest zarr-python"). Fails when there is no Python 3.12.
LATEST_VENV  := .venv-latest
LATEST_PY    := $(LATEST_VENV)/bin/python
LATEST_TESTS := tests/zarr tests/xarray/test_xarray_append_rules.py \
                tests/xarray/test_xarray_datatree.py::test_open_datatree_round_trips_like_zarr \
                tests/xarray/test_xarray_datatree_write.py::test_round_trip_identical_and_like_zarr \
                tests/xarray/test_xarray_encodings.py::test_random_datasets_match_zarr_or_are_refused \
                tests/cli/test_cli.py::test_convert_zarr_groups_and_arrays \
                tests/benchmarks/test_bench_manifest_scale.py::test_the_anchors_measure_the_same_shapes

$(LATEST_VENV)/.latest: requirements/latest.txt
	@$(ANCHOR_PYTHON) -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null || { \
	  echo "test-latest: no Python >= 3.12 at ANCHOR_PYTHON=$(ANCHOR_PYTHON) (zarr-python 3.4 needs one; make test-latest ANCHOR_PYTHON=/path/to/python3.12)" >&2; exit 1; }
	rm -rf $(LATEST_VENV)
	$(ANCHOR_PYTHON) -m venv $(LATEST_VENV)
	$(NICE) $(LATEST_PY) -m pip install -q --upgrade pip
	$(NICE) $(LATEST_PY) -m pip install -q -r requirements/latest.txt
	touch $@

# The engine in build/latest, rebuilt when the C++ changes (as for the floors).
$(LATEST_VENV)/.engine: $(LATEST_VENV)/.latest pyproject.toml native/CMakeLists.txt \
                        $(shell find native/src -name '*.cc' -o -name '*.h')
	$(NICE) $(LATEST_PY) -m pip install -q --no-build-isolation --no-deps -C build-dir=build/latest -e .
	touch $@

# (the venv is also the anchor interpreter of the manifest-scale benchmark's anchor test:
# zarr 3.4 and icechunk 2.3 on Python 3.12, as .venv-anchors)
test-latest: system-deps $(LATEST_VENV)/.engine
	ARRAYDS_ANCHOR_PYTHON=$(CURDIR)/$(LATEST_PY) $(LATEST_PY) -m pytest -q -p no:cacheprovider $(LATEST_TESTS)

# the venvs of test-floors and test-latest, up to date (make test builds them during the suite)
test-envs: $(FLOORS_VENV)/.engine $(LATEST_VENV)/.engine

clean:
	rm -rf build dist $(VENV) $(FLOORS_VENV) $(LATEST_VENV) .pytest_cache .hypothesis
