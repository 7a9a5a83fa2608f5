"""Every link in README.md and docs/**/*.md resolves inside the repository, and no
Python source (docstrings and comments included) cites what is outside it.

Rules, checked on each Markdown file outside code blocks and code spans:

* a relative link (``[t](path)``, ``[t](path#anchor)``, ``[t](#anchor)``, images too)
  names a file or folder that exists and stays inside the repository;
* its ``#anchor``, when the target is a Markdown file, is the id of one of that file's
  headings, computed by Python-Markdown's ``toc`` extension as mkdocs computes it
  (``### 7.3 Conflicts`` -> ``73-conflicts``);
* ``http://`` and ``https://`` links (public sites) are allowed; any other scheme and
  absolute paths are not;
* no text anywhere in the file (code included) refers to issue numbers
  (``issue 12``) or to ``API.md``, which are not part of the repository; nor does any
  ``.py`` file of arrayds/, tests/, benchmarks/, examples/ or docs/ (this file aside:
  its examples are those texts).

Each problem is reported as ``file:line: what``, the file relative to the repository.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import markdown
import pytest

ROOT = Path(__file__).resolve().parents[2]
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SOURCES = sorted(
    p
    for folder in ("arrayds", "tests", "benchmarks", "examples", "docs")
    for p in (ROOT / folder).rglob("*.py")
    if p.resolve() != Path(__file__).resolve()
)

FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?^[ \t]*\1[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(?:[^`]|(?!\1)`)+?\1")
LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$", re.M)
FORBIDDEN = [
    (re.compile(r"\b[Ii]ssue #?\d+\b"), "refers to an issue number"),
    (re.compile(r"\bAPI\.md\b"), "refers to API.md, which is not in the repository"),
]


def _blank(text: str, pattern: re.Pattern[str]) -> str:
    """``text`` with every match of ``pattern`` replaced by spaces (newlines kept)."""
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


@cache
def anchors(path: Path) -> frozenset[str]:
    """The heading ids of the Markdown file ``path``, as mkdocs makes them."""
    md = markdown.Markdown(extensions=["toc", "tables", "fenced_code", "admonition"])
    md.convert(path.read_text(encoding="utf8"))
    ids: set[str] = set()
    stack = list(md.toc_tokens)
    while stack:
        token = stack.pop()
        ids.add(token["id"])
        stack.extend(token["children"])
    return frozenset(ids)


def _check_target(path: Path, root: Path, target: str) -> str | None:
    """What is wrong with the link ``target`` in ``path`` (None: nothing)."""
    if re.match(r"https?://", target):
        return None
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*:", target):
        return f"link {target!r} uses a scheme other than http(s)"
    if target.startswith("/"):
        return f"link {target!r} is an absolute path"
    rel, _, anchor = target.partition("#")
    dest = (path.parent / rel).resolve() if rel else path.resolve()
    if not dest.is_relative_to(root.resolve()):
        return f"link {target!r} leaves the repository"
    if not dest.exists():
        return f"link {target!r}: {dest.relative_to(root.resolve())} does not exist"
    if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
        return f"link {target!r}: no heading of {dest.name} has the id {anchor!r}"
    return None


def forbidden(text: str) -> list[tuple[int, str]]:
    """The line and the reason of every forbidden reference of ``text``."""
    out = []
    for pattern, what in FORBIDDEN:
        for m in pattern.finditer(text):
            out.append((text.count("\n", 0, m.start()) + 1, f"{m.group(0)!r} {what}"))
    return out


def problems(path: Path, root: Path = ROOT) -> list[str]:
    """Every broken or forbidden link or reference of the Markdown file ``path``."""
    text = path.read_text(encoding="utf8")
    name = path.resolve().relative_to(root.resolve()).as_posix()
    out = forbidden(text)
    prose = _blank(_blank(text, FENCE), CODE_SPAN)
    for m in [*LINK.finditer(prose), *REF_DEF.finditer(prose)]:
        what = _check_target(path, root, m.group(1))
        if what:
            out.append((prose.count("\n", 0, m.start(1)) + 1, what))
    return [f"{name}:{line}: {what}" for line, what in sorted(out)]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_links_resolve_in_the_repository(path: Path) -> None:
    assert problems(path) == []


def test_python_sources_cite_no_issue_or_api_md() -> None:
    assert len(SOURCES) > 100  # the folders were found
    found = [
        f"{p.relative_to(ROOT).as_posix()}:{line}: {what}"
        for p in SOURCES
        for line, what in forbidden(p.read_text(encoding="utf8"))
    ]
    assert found == []


def test_forbidden_finds_issue_numbers_and_api_md_in_python() -> None:
    text = '"""The view (Issue #29, item 1).\n\nSee API.md section 5."""\n# issue 6\nx = 1\n'
    assert forbidden(text) == [
        (1, "'Issue #29' refers to an issue number"),
        (4, "'issue 6' refers to an issue number"),
        (3, "'API.md' refers to API.md, which is not in the repository"),
    ]


def test_checker_reports_each_broken_link(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## 7.3 Conflicts\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n"
        "[ok](other.md#73-conflicts) [self](#page) [web](https://example.org/x)\n"
        "[gone](missing.md)\n"
        "[bad anchor](other.md#conflicts)\n"
        "[outside](../../shared/API.md)\n"
        "see issue 12, and\n"
        "[split\n"
        "text](/etc/passwd) [file](file:///etc/passwd)\n"
        "`[in a span](missing.md)`\n"
        "```python\n"
        "x = '[in code](missing.md)'\n"
        "```\n"
        "[ref]: nowhere.md\n"
    )
    assert problems(page, tmp_path) == [
        "docs/page.md:3: link 'missing.md': docs/missing.md does not exist",
        "docs/page.md:4: link 'other.md#conflicts': no heading of other.md has the id 'conflicts'",
        "docs/page.md:5: 'API.md' refers to API.md, which is not in the repository",
        "docs/page.md:5: link '../../shared/API.md' leaves the repository",
        "docs/page.md:6: 'issue 12' refers to an issue number",
        "docs/page.md:8: link '/etc/passwd' is an absolute path",
        "docs/page.md:8: link 'file:///etc/passwd' uses a scheme other than http(s)",
        "docs/page.md:13: link 'nowhere.md': docs/nowhere.md does not exist",
    ]
