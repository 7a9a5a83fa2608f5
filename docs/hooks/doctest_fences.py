"""mkdocs hook: render docstring examples (``>>>`` lines and their output) as code.

The docstrings of arrayds hold doctest examples in free text (they run in the test
suite). Markdown would read ``>>>`` as nested block quotes and ``x[0]["a"]`` as a
link reference, so this hook wraps every run of doctest lines — from a ``>>>`` line
to the next blank line — in a ```` ```pycon ```` fence, before Markdown sees it. It
is registered with a high priority so that mkdocstrings, which copies the Markdown
extensions when the configuration is loaded, uses it for docstrings too.
"""

from __future__ import annotations

from typing import Any

from markdown import Markdown
from markdown.extensions import Extension
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority


class DoctestFences(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        fence: str | None = None
        i = 0
        while i < len(lines):
            line = lines[i]
            stripped = line.lstrip()
            if fence is not None:
                if stripped.startswith(fence):
                    fence = None
                out.append(line)
                i += 1
                continue
            if stripped.startswith("```") or stripped.startswith("~~~"):
                fence = stripped[:3]
                out.append(line)
                i += 1
                continue
            if stripped.startswith(">>>"):
                indent = line[: len(line) - len(stripped)]
                block = []
                while i < len(lines) and lines[i].strip():
                    block.append(
                        lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i]
                    )
                    i += 1
                if out and out[-1].strip():
                    out.append("")
                out.append(f"{indent}```pycon")
                out.extend(f"{indent}{b}" for b in block)
                out.append(f"{indent}```")
                out.append("")
                continue
            out.append(line)
            i += 1
        return out


class DoctestFencesExtension(Extension):
    def extendMarkdown(self, md: Markdown) -> None:  # noqa: N802 - Markdown's API
        md.preprocessors.register(DoctestFences(md), "arrayds_doctest_fences", 40)


@event_priority(100)
def on_config(config: Any) -> Any:
    config.markdown_extensions.append(DoctestFencesExtension())
    return config
