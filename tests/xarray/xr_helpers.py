"""Helpers shared by the xarray tests (this folder is on ``sys.path``: it has no
``__init__.py``, so that it does not shadow the ``xarray`` package)."""

from __future__ import annotations

import hashlib
import os


def tree_digest(root: str | os.PathLike[str]) -> str:
    """Every file under ``root`` (names and bytes), for "nothing changed" checks."""
    h = hashlib.sha256()
    for d, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            p = os.path.join(d, f)
            h.update(os.path.relpath(p, root).encode())
            with open(p, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()
