#!/usr/bin/env python3
"""Coverage-guided fuzz target over the native reader (atheris + libFuzzer).

Run by ``make fuzz`` (native/fuzz.sh), which builds the engine with clang
``-fsanitize=address,fuzzer-no-link`` in build/fuzz and runs this file with atheris'
ASan + libFuzzer runtime preloaded; ``ARRAYDS_FUZZ_NATIVE`` is the path of that
instrumented ``_native`` module. The target's body is harness.run (also replayed over
tests/fuzz/corpus by test_corpus.py on the normal build).
"""

from __future__ import annotations

import importlib.util
import os
import sys

import atheris

# The instrumented module is loaded before atheris.Setup so that libFuzzer sees its
# coverage counters.
_spec = importlib.util.spec_from_file_location("_native", os.environ["ARRAYDS_FUZZ_NATIVE"])
assert _spec is not None and _spec.loader is not None
native = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(native)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from fuzz.harness import run  # noqa: E402

SCRATCH = os.path.join(
    os.environ.get("ARRAYDS_FUZZ_SCRATCH", "/dev/shm"), f"arrayds-fuzz-{os.getpid()}"
)


def test_one_input(data: bytes) -> None:
    run(native, data, SCRATCH)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    try:
        atheris.Fuzz()
    finally:
        if os.path.exists(SCRATCH):
            os.remove(SCRATCH)
