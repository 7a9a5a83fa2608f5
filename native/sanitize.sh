#!/usr/bin/env bash
# Builds arrayds._native with AddressSanitizer + UndefinedBehaviorSanitizer into
# build/sanitize and runs tests against that build. The editable install that the
# rest of the tree uses is not touched: the tests run with PYTHONPATH pointing at a
# staging copy (build/sanitize/stage) whose sitecustomize redirects `import arrayds`.
#
#   native/sanitize.sh                      # tests/engine
#   native/sanitize.sh tests/engine tests/arrayrecord -x
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
BUILD=build/sanitize
cmake -S native -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DARRAYDS_SANITIZE=ON -DPython_EXECUTABLE="$PY" \
  -Dpybind11_DIR="$("$PY" -m pybind11 --cmakedir)" >/dev/null
cmake --build "$BUILD" -j 2
STAGE="$PWD/$BUILD/stage"
rm -rf "$STAGE"
mkdir -p "$STAGE"
cp -r arrayds "$STAGE/"
find "$STAGE/arrayds" -name '*.so' -delete
cp "$BUILD"/_native*.so "$STAGE/arrayds/"
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:check_initialization_order=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export LD_PRELOAD="$(g++ -print-file-name=libasan.so) $(g++ -print-file-name=libubsan.so)"
# Every Python started from here (pytest, its subprocesses, multiprocessing "spawn"
# children) imports arrayds from the staging copy: sitecustomize runs after the .pth
# files and drops the editable-install finder.
cat > "$STAGE/sitecustomize.py" <<'PYEOF'
import importlib.machinery
import os
import sys

_stage = os.path.dirname(os.path.abspath(__file__))


class _StageFinder:
    """Finds the top-level arrayds package in the staging directory (its submodules
    then follow the package's __path__)."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "arrayds":
            return None
        return importlib.machinery.PathFinder.find_spec(name, [_stage])


sys.meta_path[:] = [f for f in sys.meta_path if not type(f).__module__.startswith("_editable")]
sys.meta_path.insert(0, _StageFinder)
PYEOF
export PYTHONPATH="$STAGE"
"$PY" -c "import arrayds._native as n, sys; assert n.__file__.startswith('$STAGE'), n.__file__"
exec "$PY" -m pytest -q -p no:cacheprovider "${@:-tests/engine}"
