"""A fault-injecting HTTP proxy for tests and benchmarks, in front of moto (S3) or
fake-gcs-server (GCS), on 127.0.0.1.

:class:`FaultProxy` forwards HTTP/1.1 requests one by one per connection (keep-alive
kept) and, for the requests a :class:`Rule` of its schedule matches, injects one of
the faults object stores produce at scale (:data:`FAULTS`):

* ``"503"``, ``"500"``, ``"429"``: answered by the proxy with that status (S3's
  ``SlowDown``/``InternalError``/``TooManyRequests`` XML, or GCS's JSON error); the
  request never reaches the server;
* ``"reset"``: the connection is closed (RST) before the request is forwarded;
* ``"truncate"``: forwarded, then the response is sent with its full
  ``Content-Length`` but half its body, and the connection closed;
* ``"slow"``: forwarded after ``delay`` seconds;
* ``"lost"``: forwarded and applied by the server, then the connection is closed
  without the response: the client sees a dropped connection for a request that took
  effect (and retries a write that already happened).

A rule is restricted by HTTP method and by key pattern: a regular expression or one
of the key kinds of :data:`KEY_KINDS` (``"manifest"``, ``"shard"``, ``"segment"``,
``"version"``). Which matching requests are hit is drawn from ``random.Random(seed)``
with the rule's ``rate``; ``skip`` lets the first matches through and ``limit`` caps
the injections (``Rule("lost", methods=("PUT",), keys="manifest", limit=1)`` loses the
response of the first manifest PUT, exactly once).

Counters: :attr:`FaultProxy.injected` (faults per type) and
:attr:`FaultProxy.requests` (requests per ``(method, key kind)``).

>>> rule = Rule("503", rate=0.5, methods=("GET",), keys="shard")
>>> rule.matches("GET", "/bucket/ds/a/c/0a1b-0.array_record"), rule.matches("PUT", "/b/x")
(True, False)
>>> key_kind("/bucket/ds/a/_arrayds/versions/3.json")
'version'
"""

from __future__ import annotations

import collections
import json
import random
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from conformance.servers import load_helper

Listener = load_helper("s3", "s3server").Listener  # the loopback server it runs on

__all__ = ["FAULTS", "KEY_KINDS", "FaultProxy", "Rule", "key_kind"]

FAULTS = ("503", "500", "429", "reset", "truncate", "slow", "lost")
"""The fault types a rule can inject (see the module docstring)."""

KEY_KINDS: dict[str, str] = {
    "manifest": r"(^|/)arrayds\.json$",
    "version": r"/_arrayds/versions/[^/]+\.json$",
    "segment": r"/_arrayds/log/",
    "shard": r"\.array_record$",
}
"""Key kinds a rule's ``keys`` may name, each a pattern over the object key."""

_UNSENT = ("503", "500", "429", "reset")
"""The faults whose request never reaches the server."""

_ERRORS = {
    "503": (503, "Service Unavailable", "SlowDown", "Please reduce your request rate."),
    "500": (500, "Internal Server Error", "InternalError", "We encountered an internal error."),
    "429": (429, "Too Many Requests", "TooManyRequests", "Too many requests."),
}


def key_kind(key: str) -> str:
    """The kind of object ``key`` names (:data:`KEY_KINDS`), else ``"other"``."""
    for kind, pattern in KEY_KINDS.items():
        if re.search(pattern, key):
            return kind
    return "other"


@dataclass(frozen=True)
class Rule:
    """Inject ``fault`` into the requests matching ``methods`` (any if empty) and
    ``keys`` (a :data:`KEY_KINDS` name or a regular expression over the object key;
    any if empty), each with probability ``rate``, after letting ``skip`` matches
    through, at most ``limit`` times (``None``: no cap). ``delay``: the seconds of a
    ``"slow"`` fault."""

    fault: str
    rate: float = 1.0
    methods: tuple[str, ...] = ()
    keys: str = ""
    skip: int = 0
    limit: int | None = None
    delay: float = 0.05
    then: Callable[[], None] | None = None
    """Called in the proxy when the fault fires: for the faults whose request is not
    forwarded, before the client is answered; for the others (``"slow"``, ``"lost"``,
    ``"truncate"``) once the server applied the request, before the client gets (or
    loses) the reply. A test's deterministic interleaving, e.g. another writer's
    commit."""

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"Rule: fault must be one of {FAULTS}, got {self.fault!r}")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"Rule: rate must be in [0, 1], got {self.rate!r}")
        if self.skip < 0 or (self.limit is not None and self.limit < 0) or self.delay < 0:
            raise ValueError("Rule: skip, limit and delay must not be negative")
        re.compile(KEY_KINDS.get(self.keys, self.keys))

    def matches(self, method: str, key: str) -> bool:
        """Whether a request ``method`` on object ``key`` is one this rule is about."""
        if self.methods and method not in self.methods:
            return False
        return not self.keys or re.search(KEY_KINDS.get(self.keys, self.keys), key) is not None


@dataclass
class _Message:
    head: bytes
    body: bytes
    first: str
    headers: dict[str, str]


def _read_head(f: Any) -> tuple[bytes, str, dict[str, str]] | None:
    lines = []
    while True:
        line = f.readline(1 << 16)
        if not line:
            return None
        lines.append(line)
        if line in (b"\r\n", b"\n"):
            break
    first = lines[0].decode("latin-1").strip()
    headers = {}
    for line in lines[1:-1]:
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    return b"".join(lines), first, headers


def _read_body(f: Any, headers: dict[str, str], until_close: bool) -> bytes:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        out = []
        while True:
            size_line = f.readline(1 << 16)
            out.append(size_line)
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:  # trailers, then the empty line
                    line = f.readline(1 << 16)
                    out.append(line)
                    if line in (b"\r\n", b"\n", b""):
                        return b"".join(out)
            out.append(f.read(size + 2))
    if "content-length" in headers:
        return f.read(int(headers["content-length"]))
    return f.read() if until_close else b""


def _object_key(method: str, target: str, body: bytes) -> str:
    """The object key a request is about: the path (S3 path style, GCS JSON API), the
    ``name`` of a GCS upload (in its query or in its multipart metadata)."""
    parts = urlsplit(target)
    path = unquote(parts.path)
    if "/upload/" in path:
        name = parse_qs(parts.query).get("name", [""])[0]
        if not name:
            m = re.search(rb'"name":\s*"([^"]+)"', body[:4096])
            name = m.group(1).decode("utf-8", "replace") if m else ""
        return f"{path}/{name}"
    return path


class FaultProxy(Listener):
    """An HTTP proxy on 127.0.0.1 in front of ``upstream`` (``(host, port)`` or an
    ``http://host:port`` URL) injecting the faults of ``schedule`` (a sequence of
    :class:`Rule`, the first rule that fires wins) drawn from ``random.Random(seed)``.
    A context manager (started on entry, stopped on exit); :attr:`url` is its
    endpoint. The schedule can be replaced while it runs (:meth:`set_schedule`).
    """

    def __init__(self, upstream: tuple[str, int] | str, schedule: Any = (), seed: int = 0) -> None:
        super().__init__()
        if isinstance(upstream, str):
            u = urlsplit(upstream)
            upstream = (u.hostname or "127.0.0.1", int(u.port or 80))
        self.upstream = upstream
        self.seed = seed
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self.injected: collections.Counter[str] = collections.Counter()
        """Faults injected, per type."""
        self.requests: collections.Counter[tuple[str, str]] = collections.Counter()
        """Requests seen, per ``(method, key kind)``."""
        self.set_schedule(schedule)

    def set_schedule(self, schedule: Any, seed: int | None = None) -> None:
        """Replace the rules (and, with ``seed``, restart the draws); the counters of
        what the rules injected so far are kept."""
        rules = tuple(schedule)
        for r in rules:
            if not isinstance(r, Rule):
                raise TypeError(f"FaultProxy: a schedule holds Rule objects, got {r!r}")
        with self._lock:
            self.schedule = rules
            self._seen = [0] * len(rules)
            self._fired = [0] * len(rules)
            if seed is not None:
                self._rng = random.Random(seed)

    def _decide(self, method: str, key: str) -> Rule | None:
        with self._lock:
            self.requests[(method, key_kind(key))] += 1
            for i, rule in enumerate(self.schedule):
                if not rule.matches(method, key):
                    continue
                self._seen[i] += 1
                if self._seen[i] <= rule.skip:
                    continue
                if rule.limit is not None and self._fired[i] >= rule.limit:
                    continue
                if rule.rate < 1.0 and self._rng.random() >= rule.rate:
                    continue
                self._fired[i] += 1
                self.injected[rule.fault] += 1
                return rule
        return None

    def _serve(self, client: socket.socket) -> None:
        server: socket.socket | None = None
        up: Any = None
        down = client.makefile("rb")
        try:
            while not self._stop.is_set():
                req = _read_head(down)
                if req is None:
                    return
                head, first, headers = req
                if headers.get("expect", "").lower() == "100-continue":
                    # answer it here, and forward the request whole without it
                    client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                    head = re.sub(rb"(?im)^expect:[^\r\n]*\r?\n", b"", head)
                body = _read_body(down, headers, until_close=False)
                method, target = (first.split(" ") + ["", ""])[:2]
                rule = self._decide(method, _object_key(method, target, body))
                fault = rule.fault if rule is not None else ""
                if rule is not None and rule.then is not None and fault in _UNSENT:
                    rule.then()
                if fault == "reset":
                    _linger(client)
                    return None
                if fault in _ERRORS:
                    client.sendall(_error_response(fault, target))
                    continue
                if fault == "slow":
                    time.sleep(rule.delay)
                if server is None:
                    server = socket.create_connection(self.upstream)
                    up = server.makefile("rb")
                server.sendall(head + body)
                resp = _read_head(up)
                if resp is None:
                    _linger(client)
                    return None
                rhead, rfirst, rheaders = resp
                status = int(rfirst.split(" ")[1])
                bodyless = method == "HEAD" or status in (204, 304) or 100 <= status < 200
                close = rheaders.get("connection", "").lower() == "close" or (
                    not bodyless
                    and "content-length" not in rheaders
                    and "chunked" not in rheaders.get("transfer-encoding", "").lower()
                )
                rbody = b"" if bodyless else _read_body(up, rheaders, until_close=close)
                if rule is not None and rule.then is not None and fault not in _UNSENT:
                    rule.then()
                if fault == "lost" or (fault == "truncate" and not rbody):
                    _linger(client)
                    return None
                if fault == "truncate":
                    client.sendall(rhead + rbody[: len(rbody) // 2])
                    _linger(client)
                    return None
                client.sendall(rhead + rbody)
                if close:
                    server.close()
                    server = None
        except (OSError, ValueError):
            return None
        finally:
            if server is not None:
                server.close()
            down.close()


def _error_response(fault: str, target: str) -> bytes:
    status, reason, code, message = _ERRORS[fault]
    if urlsplit(target).path.startswith(("/storage/", "/upload/", "/download/")):
        body = json.dumps({"error": {"code": status, "message": message}}).encode()
        ctype = "application/json"
    else:
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error>"
        ).encode()
        ctype = "application/xml"
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: {ctype}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


def _linger(sock: socket.socket) -> None:
    """Make closing ``sock`` a TCP reset (no orderly shutdown)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
