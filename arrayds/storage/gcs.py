"""The two Google Cloud Storage requests gcsfs does not offer: a read that returns the
object's generation with its bytes, and an upload conditional on a generation.

:class:`arrayds.storage.fsspec.FsspecStore` uses them for the version tokens of
``gs://`` objects (:meth:`~arrayds.storage.fsspec.FsspecStore.get_versioned`,
:meth:`~arrayds.storage.fsspec.FsspecStore.put_if_match`). Both go through gcsfs's own
``call`` (credentials, retries, HTTP status -> exception).

>>> "gs" in PROTOCOLS and "gcs" in PROTOCOLS
True
"""

from __future__ import annotations

import errno
import json
import secrets
from typing import Any
from urllib.parse import quote

__all__ = ["PROTOCOLS", "gcs_put", "gcs_read"]

PROTOCOLS = ("gs", "gcs")
"""The fsspec protocols of gcsfs."""


def gcs_read(fs: Any, path: str) -> tuple[bytes | None, str | None]:
    """The object at ``path`` and its GCS generation, from one media GET, or
    ``(None, None)`` if there is no object."""
    try:
        headers, body = fs.call("GET", fs.url(path))
    except FileNotFoundError:
        return None, None
    generation = headers.get("x-goog-generation")
    if not generation:
        raise OSError(
            errno.EPROTO,
            f"{fs.unstrip_protocol(path)}: the server sent no x-goog-generation header, so "
            f"the object cannot be replaced conditionally; set "
            f"ARRAYDS_CONDITIONAL_COMMIT=0 for a server without object generations",
        )
    return bytes(body), str(generation)


def gcs_put(fs: Any, path: str, data: bytes, if_generation_match: str) -> None:
    """Upload ``data`` to ``path`` only if the object's generation is
    ``if_generation_match`` (``"0"``: only if there is no object); HTTP 412 otherwise,
    which gcsfs raises as ``FileExistsError``.

    gcsfs's ``pipe_file`` can only ask for ``ifGenerationMatch=0`` (``mode="create"``),
    so this sends the same one-request multipart upload as its ``simple_upload``, with
    the generation precondition added.
    """
    bucket, key, _ = fs.split_path(path)
    boundary = f"arrayds-{secrets.token_hex(12)}"
    meta = json.dumps({"name": key, "contentType": "application/octet-stream"})
    body = (
        (
            f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n{meta}\r\n"
            f"--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    fs.call(
        "POST",
        f"{fs._location}/upload/storage/v1/b/{quote(bucket, safe='')}/o",
        uploadType="multipart",
        ifGenerationMatch=if_generation_match,
        headers={"Content-Type": f'multipart/related; boundary="{boundary}"'},
        data=body,
        json_out=True,
    )
