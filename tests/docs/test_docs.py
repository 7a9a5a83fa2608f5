"""Every code block in README.md and docs/*.md runs, and the docs site builds.

Which fenced blocks are code:

* ```` ```python ```` (or ``py``): executed; the blocks of one file run in order in
  one namespace, in a fresh temporary working directory;
* ```` ```bash ````, ``sh``, ``shell``: executed with ``bash -e`` in the same
  directory (the ``arrayds`` command is on PATH); ```` ```console ```` blocks run
  their ``$ `` lines;
* anything else (``json``, ``text``, no language) is data or output, not code.

A code block is skipped only when it is marked: ``notest`` in its info string
(```` ```python notest ````) or an HTML comment ``<!-- not-runnable -->`` on the line
before the fence. Skipped blocks are counted and reported; a marker that does not
precede a code block is an error, so markers cannot silently rot.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON = {"python", "py", "python3"}
SHELL = {"bash", "sh", "shell", "console"}
MARKER = "<!-- not-runnable -->"


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    info: str
    code: str
    skipped: bool


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a markdown file (fences of 3+ backticks)."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(`{3,})(.*)$", lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).strip()
        start = i
        i += 1
        body = []
        while i < len(lines) and not re.match(rf"^\s*{fence}\s*$", lines[i]):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        lang = info.split()[0].lower() if info else ""
        prev = next((ln.strip() for ln in reversed(lines[:start]) if ln.strip()), "")
        skipped = "notest" in info.split()[1:] or prev == MARKER
        out.append(Block(path, start + 1, lang, info, "\n".join(body) + "\n", skipped))
    return out


def _markers_without_code(path: Path) -> list[int]:
    lines = path.read_text(encoding="utf8").splitlines()
    bad = []
    for n, ln in enumerate(lines):
        if ln.strip() != MARKER:
            continue
        nxt = next((x.strip() for x in lines[n + 1 :] if x.strip()), "")
        m = re.match(r"^`{3,}(\S*)", nxt)
        if not m or m.group(1).lower() not in PYTHON | SHELL:
            bad.append(n + 1)
    return bad


def _env() -> dict[str, str]:
    env = dict(os.environ)
    bindir = os.path.dirname(sys.executable)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("ARRAYDS_PROGRESS", "0")
    return env


def _run_shell(block: Block, cwd: Path) -> None:
    code = block.code
    if block.lang == "console":
        code = "\n".join(ln[2:] for ln in code.splitlines() if ln.startswith("$ ")) + "\n"
    proc = subprocess.run(
        ["bash", "-e", "-c", code],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        pytest.fail(
            f"{block.path.name}:{block.line}: the {block.lang} block failed "
            f"({proc.returncode}):\n{code}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"
        )


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_code_blocks_run(path: Path, tmp_path, monkeypatch):
    assert not _markers_without_code(path), (
        f"{path.name}: {MARKER} on lines {_markers_without_code(path)} is not right before "
        f"a python or shell code block"
    )
    found = [b for b in blocks(path) if b.lang in PYTHON | SHELL]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ARRAYDS_PROGRESS", "0")
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    ran = skipped = 0
    for b in found:
        if b.skipped:
            skipped += 1
            continue
        if b.lang in PYTHON:
            try:
                code = compile(textwrap.dedent(b.code), f"{path.name}:{b.line}", "exec")
                exec(code, namespace)  # noqa: S102 - running the documentation is the test
            except Exception as e:
                pytest.fail(
                    f"{path.name}:{b.line}: the python block raised "
                    f"{type(e).__name__}: {e}\n{b.code}"
                )
        else:
            _run_shell(b, tmp_path)
        ran += 1
    sys.stdout.write(f"{path.name}: {ran} blocks ran, {skipped} marked not runnable\n")
    assert ran + skipped == len(found)


def test_block_parser_and_markers(tmp_path):
    md = tmp_path / "x.md"
    md.write_text(
        "text\n\n```python\nx = 1\n```\n\n<!-- not-runnable -->\n```bash\nmake demo\n```\n"
        "```python notest\nboom()\n```\n```json\n{}\n```\n  ```py\n  y = 2\n  ```\n"
    )
    found = blocks(md)
    assert [(b.lang, b.skipped) for b in found] == [
        ("python", False),
        ("bash", True),
        ("python", True),
        ("json", False),
        ("py", False),
    ]
    assert found[4].code == "y = 2\n"
    assert _markers_without_code(md) == []
    md.write_text("<!-- not-runnable -->\nprose\n")
    assert _markers_without_code(md) == [1]


def test_docs_site_builds_strict(tmp_path):
    """The mkdocs site (guide, CLI, spec, API reference from docstrings) builds with
    warnings as errors."""
    pytest.importorskip("mkdocs", reason="the docs build needs the [docs] extra")
    pytest.importorskip("mkdocstrings", reason="the docs build needs the [docs] extra")
    site = tmp_path / "site"
    exe = shutil.which("mkdocs", path=os.path.dirname(sys.executable)) or "mkdocs"
    proc = subprocess.run(
        [exe, "build", "--strict", "--site-dir", str(site), "--config-file", "mkdocs.yml"],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (site / "index.html").exists()
    api = (site / "api" / "index.html").read_text(encoding="utf8")
    for name in ("to_arrayrecord", "from_arrayrecord", "open_array", "ArrayRecordReader"):
        assert name in api, name
