#!/usr/bin/env bash
# Builds arrayds._native with clang, AddressSanitizer and libFuzzer coverage
# instrumentation (-fsanitize=address,fuzzer-no-link) into build/fuzz, then fuzzes the
# reader (tests/fuzz/fuzz_reader.py, atheris) for FUZZ_SECONDS seconds (default 300),
# starting from the committed corpus tests/fuzz/corpus. New inputs go to
# build/fuzz/corpus, crashes to build/fuzz/crashes/ (add them to tests/fuzz/corpus
# once fixed: `make test` replays it). The editable install is not touched.
#
#   native/fuzz.sh                 # FUZZ_SECONDS=300
#   FUZZ_SECONDS=1200 native/fuzz.sh -jobs=2 -workers=2
#   native/fuzz.sh merge DIR       # DIR += inputs of build/fuzz/corpus reaching new code
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
BUILD=build/fuzz
SAN="-fsanitize=address,fuzzer-no-link -fno-omit-frame-pointer"
cmake -S native -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_CXX_FLAGS="$SAN" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address" -DPython_EXECUTABLE="$PY" \
  -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)" >/dev/null
cmake --build "$BUILD" -j 2
NATIVE=$(ls "$PWD/$BUILD"/_native*.so)
mkdir -p "$BUILD/corpus" "$BUILD/crashes"
ATHERIS=$("$PY" -c "import atheris; print(atheris.path())")
export ARRAYDS_FUZZ_NATIVE="$NATIVE"
# -merge, -fork and -jobs start the target again as an executable: its shebang must
# find this Python.
PATH="$(cd "$(dirname "$PY")" && pwd):$PATH"
export PATH
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:handle_segv=1
# Allocations up to the 4 GiB chunk cap are allowed (a valid zstd/brotli bomb may claim
# it); anything larger, or 3 GiB of resident memory, is a finding.
LIMITS=(-timeout=10 -rss_limit_mb=3072 -malloc_limit_mb=4200 -max_len=70000)
export LD_PRELOAD="$ATHERIS/asan_with_fuzzer.so"
if [ "${1:-}" = merge ]; then
  # native/fuzz.sh merge DIR: adds to DIR the inputs of build/fuzz/corpus that reach
  # code DIR's inputs do not.
  exec "$PY" tests/fuzz/fuzz_reader.py -merge=1 "${LIMITS[@]}" "$2" "$BUILD/corpus"
fi
exec "$PY" tests/fuzz/fuzz_reader.py "$BUILD/corpus" tests/fuzz/corpus \
  -max_total_time="${FUZZ_SECONDS:-300}" "${LIMITS[@]}" \
  -artifact_prefix="$BUILD/crashes/" -print_final_stats=1 "$@"
