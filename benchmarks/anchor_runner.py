"""Run an anchor library's side of a benchmark in the anchor interpreter, in the same run.

The libraries arrayds is measured against (zarr-python 3.4, icechunk 2.3, ...) need a
newer Python than the project's venv, so they live in a venv of their own
(``make bench-anchors``: ``.venv-anchors`` from requirements/anchors.txt). A
benchmark runs their side as a subprocess, on the same data and server in the same
run, through :func:`run_anchor`:

* the interpreter is ``$ARRAYDS_ANCHOR_PYTHON``, else ``.venv-anchors/bin/python`` at
  the repository root (:func:`anchor_python`; :class:`AnchorUnavailable` when there
  is none, so a benchmark can print that it skipped the anchor rows and go on);
* the script is ``benchmarks/anchors/<name>.py``; it gets ``job`` (a JSON object) on
  stdin and reports measured sections (``benchmarks/anchors/harness.py`` is its side
  of the protocol and documents it);
* before each section the runner calls ``counters(True)`` (reset) and after it
  ``counters(False)`` (read), and adds what that returns to the section: with the
  S3 test server that is ``ServerProcess.stats`` (tests/s3/s3server.py), so each
  section carries the requests and bytes the latency proxy saw during it.

A section run more than once (``--repeat``) is reported once, its fastest run (with
that run's counters), and ``runs`` says how many there were.

>>> import os
>>> os.environ["ARRAYDS_ANCHOR_PYTHON"] = "/nonexistent/python"
>>> try:
...     anchor_python()
... except AnchorUnavailable as e:
...     print("skipped:", str(e).split(":")[0])
skipped: no anchor interpreter at /nonexistent/python (ARRAYDS_ANCHOR_PYTHON)
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ANCHOR_ENV", "AnchorError", "AnchorResult", "AnchorUnavailable", "run_anchor"]

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = Path(__file__).resolve().parent / "anchors"
ANCHOR_ENV = "ARRAYDS_ANCHOR_PYTHON"
DEFAULT_PYTHON = ROOT / ".venv-anchors" / "bin" / "python"
PREFIX = "@anchor "  # harness.PREFIX

Counters = Callable[[bool], Mapping[str, Any]]


class AnchorUnavailable(RuntimeError):
    """There is no anchor interpreter: the anchor rows are skipped."""


class AnchorError(RuntimeError):
    """An anchor script failed (its stderr is in the message)."""


@dataclass
class AnchorResult:
    """What an anchor script reported: ``sections`` by label (``seconds``, ``cpu``,
    ``rss_added``, ``rss_peak``, ``runs`` and the counters' fields of the fastest
    run), ``info`` (its final ``result`` line: versions and whatever else it sent)."""

    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


def anchor_python() -> Path:
    """The anchor interpreter: ``$ARRAYDS_ANCHOR_PYTHON`` or ``.venv-anchors/bin/python``."""
    given = os.environ.get(ANCHOR_ENV)
    path = Path(given) if given else DEFAULT_PYTHON
    if not (path.is_file() and os.access(path, os.X_OK)):
        where = ANCHOR_ENV if given else "the default"
        raise AnchorUnavailable(
            f"no anchor interpreter at {path} ({where}): make bench-anchors builds "
            f".venv-anchors, or set {ANCHOR_ENV}"
        )
    return path


def run_anchor(
    script: str,
    job: Mapping[str, Any],
    counters: Counters | None = None,
    timeout: float = 1800.0,
) -> AnchorResult:
    """Run ``benchmarks/anchors/<script>.py`` with ``job`` in the anchor interpreter.

    ``counters(reset)`` is called with ``True`` before each measured section and with
    ``False`` after it; the mapping the second call returns is merged into the
    section. Raises :class:`AnchorUnavailable` without an interpreter,
    :class:`AnchorError` when the script fails, sends no result or runs longer than
    ``timeout`` seconds (it is killed then).
    """
    path = SCRIPTS / f"{script}.py"
    if not path.is_file():
        raise ValueError(f"no anchor script {path}")
    python = anchor_python()
    result = AnchorResult()
    with tempfile.TemporaryFile(mode="w+") as err:
        proc = subprocess.Popen(
            [str(python), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            cwd=ROOT,
        )
        assert proc.stdin is not None and proc.stdout is not None
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            proc.stdin.write(json.dumps(dict(job)) + "\n")
            proc.stdin.flush()
            for line in proc.stdout:
                if not line.startswith(PREFIX):
                    continue
                msg = json.loads(line[len(PREFIX) :])
                event = msg.pop("event")
                if event == "ready":
                    if counters is not None:
                        counters(True)
                    try:
                        proc.stdin.write("go\n")
                        proc.stdin.flush()
                    except BrokenPipeError:  # it died: its exit code and stderr say why
                        break
                elif event == "done":
                    if counters is not None:
                        msg.update(counters(False))
                    _keep_fastest(result.sections, msg)
                elif event == "result":
                    result.info = msg
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            timed_out = not timer.is_alive()
            timer.cancel()
            proc.stdin.close()
            proc.stdout.close()
        err.seek(0)
        stderr = err.read()
    if rc != 0:
        if timed_out:
            raise AnchorError(f"anchor script {script} ran longer than {timeout:g} s")
        raise AnchorError(f"anchor script {script} exited with {rc}:\n{stderr[-4000:]}")
    if not result.info:
        raise AnchorError(f"anchor script {script} sent no result:\n{stderr[-4000:]}")
    return result


def _keep_fastest(sections: dict[str, dict[str, Any]], run: dict[str, Any]) -> None:
    label = run.pop("label")
    best = sections.get(label)
    runs = best["runs"] + 1 if best else 1
    if best is None or run["seconds"] < best["seconds"]:
        sections[label] = run
    sections[label]["runs"] = runs
