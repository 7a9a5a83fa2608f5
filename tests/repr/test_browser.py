"""The reprs in a real browser: headless Chromium (Debian's ``chromium``, which
``make test`` installs) renders a page of every kind's repr, its DOM is read back
(the elements Chromium built: the chunk maps, the shard bars, the tree, and no script
from a name) and its screenshot must show the pictures (not blank, their colours).

Without Chromium these tests skip, saying why, except in CI (``CI=true``), where
they fail: there Chromium must be installed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import PIL.Image
import pytest

from .pages import Elements, chromium, make_dataset, page, screenshot

if shutil.which("chromium") is None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(
            "chromium is not installed (CI=true): `make system-deps` installs it", pytrace=False
        )
    pytest.skip(
        "chromium (Debian's package) is not installed: `make system-deps` or "
        "`apt-get install chromium` runs these tests",
        allow_module_level=True,
    )


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    d = tmp_path_factory.mktemp("browser")
    h = make_dataset(str(d))
    objs = [h[k] for k in ("temperature", "irregular", "wind", "records", "ragged", "group")]
    f = d / "reprs.html"
    f.write_text(page(objs), encoding="utf8")
    return f


def test_chromium_builds_the_elements(rendered):
    dom = chromium("--dump-dom", rendered.as_uri()).stdout
    doc = Elements(dom)
    assert len(doc.all("svg", "arrayds-chunks")) == 3 + 3  # three arrays, then in the tree
    assert len(doc.all("svg", "arrayds-shards")) == 2 + 2
    assert len(doc.all("rect", "shard")) >= 2 + 1 + 1
    assert len(doc.all("details")) == 7 and len(doc.all("summary")) == 7
    assert not doc.all("script") and "<script>alert(1)</script>" in doc.joined
    assert "8/24 chunks written" in doc.joined


def colours(png: Path) -> tuple[int, int]:
    """(pixels that are not white, distinct colours) of a PNG."""
    img = np.asarray(PIL.Image.open(png).convert("RGB"))
    not_white = int((img.min(axis=2) < 245).sum())
    distinct = len(np.unique(img.reshape(-1, 3), axis=0))
    return not_white, distinct


def test_screenshot_shows_the_pictures(rendered, tmp_path):
    png = tmp_path / "shot.png"
    screenshot(rendered, png, "1000,800")
    img = np.asarray(PIL.Image.open(png).convert("RGB")).astype(int)
    assert img.shape[:2] == (800, 1000)
    not_white, distinct = colours(png)
    assert not_white > 20_000 and distinct > 50
    # the written chunks' blue (#3d7cc9) fills a good part of the first chunk map
    blue = (abs(img - [0x3D, 0x7C, 0xC9]).sum(axis=2) < 12).sum()
    assert blue > 5_000


def test_blank_page_is_told_apart(tmp_path):
    """The check above can fail: an empty page's screenshot is white."""
    f = tmp_path / "blank.html"
    f.write_text("<!doctype html><body style='background:white'></body>")
    png = tmp_path / "blank.png"
    screenshot(f, png, "400,300")
    assert colours(png) == (0, 1)
