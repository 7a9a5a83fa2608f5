# arrayds: the two commands a newcomer runs are `make demo` and `make test`.
# Both install everything they need first (system libraries with apt-get when
# missing, a virtual environment in .venv, the package with its extras).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
SYSTEM_PACKAGES := g++ cmake pkg-config libzstd-dev libbrotli-dev libsnappy-dev
EXTRAS ?= test,ml

.PHONY: demo test install system-deps native lint format bench docs clean sanitize fuzz

demo: install
	$(PY) examples/quickstart.py

test: install
	$(PY) -m ruff check arrayds tests examples benchmarks
	$(PY) -m ruff format --check arrayds tests examples benchmarks
	ARRAYDS_FULL_TEST=1 $(PY) -m pytest -q

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

clean:
	rm -rf build $(VENV) .pytest_cache .hypothesis
