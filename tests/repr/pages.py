"""The example dataset the repr tests render, and the page that shows its reprs.

``python -m tests.repr.pages OUT.png`` writes the screenshot of the guide
(docs/images/repr.png) with headless Chromium.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np

import arrayds
from arrayds import ragged as ragged
from arrayds import records as records

EVIL = "<script>alert(1)</script>"


class Elements(HTMLParser):
    """Every start tag (name, attributes) and the text, in document order."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def all(self, tag: str, cls: str | None = None) -> list[dict[str, str | None]]:
        return [a for t, a in self.tags if t == tag and (cls is None or a.get("class") == cls)]

    @property
    def joined(self) -> str:
        return " ".join(self.text)


def make_dataset(root: str, evil: bool = True) -> dict[str, Any]:
    """A group with a 2-d, a 4-d and an irregular array (partly written), records and
    a ragged array; returns the opened handles by name. ``evil``: the group and the 4-d
    array have an attribute named like a script."""
    url = os.path.join(root, "ds")
    g = arrayds.open(url, mode="w")
    g.attrs.update({"title": "demo", **({EVIL: 1} if evil else {})})
    t = g.create_array(
        "temperature",
        shape=(720, 1440),
        dtype="f4",
        chunks=(180, 240),
        dims=["lat", "lon"],
        fill_value=np.nan,
    )
    t[:360, :720] = 1.0
    t[360:540, 960:] = 2.0
    irr = g.create_array(
        "irregular", shape=(100, 60), dtype="i2", chunks=((10, 30, 60), (5, 25, 30))
    )
    irr[:40, :30] = 1
    cube = g.create_array(
        "model/wind",
        shape=(4, 5, 30, 40),
        dtype="f8",
        chunks=(2, 5, 10, 10),
        dims=["t", "z", "y", "x"],
        attrs={EVIL: "x"} if evil else {"units": "m/s"},
    )
    cube[0, :, :20, :] = 3
    recs = records.write_records(
        [{"i": i} for i in range(1000)], os.path.join(url, "recs"), num_shards=7
    )
    rag = ragged.write_ragged(
        [np.zeros((3, n), "f4") for n in range(1, 200)], os.path.join(url, "rag")
    )
    return {
        "group": g,
        "temperature": t,
        "irregular": irr,
        "wind": cube,
        "records": recs,
        "ragged": rag,
    }


def page(objs: list[Any]) -> str:
    """One HTML page showing the reprs of ``objs``, one after the other."""
    body = "<hr>".join(o._repr_html_() for o in objs)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>arrayds reprs</title></head>"
        f"<body style='background:white;margin:8px'>{body}</body></html>"
    )


def chromium(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium (Debian's ``chromium``) with ``args``."""
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=True)


def screenshot(html_file: Path, png: Path, size: str = "1000,800") -> None:
    chromium(f"--screenshot={png}", f"--window-size={size}", html_file.as_uri())


def main(out: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        h = make_dataset("memory://arrayds-guide", evil=False)
        f = Path(d) / "repr.html"
        f.write_text(page([h["temperature"], h["records"], h["group"]]), encoding="utf8")
        screenshot(f, Path(out).resolve(), "820,830")


if __name__ == "__main__":
    main(sys.argv[1])
