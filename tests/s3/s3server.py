"""A real S3-compatible server on loopback for tests and benchmarks.

* :func:`start_moto` — moto's ``ThreadedMotoServer`` on ``127.0.0.1`` and a free
  port (S3 API incl. ranged GETs and conditional PUTs), request logging silenced;
  :func:`spawn_moto` — the same server in a child process of its own (what the test
  fixtures use).
* :class:`Listener` — the loopback TCP server the test proxies are built on.
* :class:`LatencyProxy` — a small TCP proxy in front of it that adds a fixed delay
  to every HTTP request and counts requests (in all and per HTTP method) and
  response bytes; requests its ``hold`` test picks wait until ``release`` is set.
  Requests are recognised by direction: client bytes that arrive
  after the server has answered start a new request (HTTP/1.1 keep-alive, no
  pipelining — what botocore/aiohttp do). Used to measure how many round trips a
  read costs and to emulate the first-byte latency of a remote object store.

Used by tests/s3/conftest.py and benchmarks/bench_s3.py.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["LatencyProxy", "Listener", "MotoS3", "free_port", "spawn_moto", "start_moto"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class MotoS3:
    """A running moto S3 server: ``endpoint_url`` and ready ``storage_options``."""

    server: Any
    port: int
    key: str = "testing"
    secret: str = "testing"

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def storage_options(self, endpoint_url: str | None = None) -> dict[str, Any]:
        """s3fs options for this server (or for a proxy in front of it)."""
        return {
            "endpoint_url": endpoint_url or self.endpoint_url,
            "key": self.key,
            "secret": self.secret,
        }

    def set_auth(self, enabled: bool) -> None:
        """Make the server check credentials (moto's IAM simulation) or accept any."""
        import requests

        requests.post(
            f"{self.endpoint_url}/moto-api/reset-auth",
            data=b"0" if enabled else b"inf",
            timeout=10,
        ).raise_for_status()

    def stop(self) -> None:
        self.server.stop()


def _aws_env() -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


def start_moto() -> MotoS3:
    """Start moto's threaded S3 server on 127.0.0.1 and a free port, in this process."""
    _aws_env()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    from moto.server import ThreadedMotoServer

    last: Exception | None = None
    for _ in range(5):
        port = free_port()
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        try:
            server.start()
        except OSError as e:  # the port was taken in between
            last = e
            continue
        return MotoS3(server, port)
    raise RuntimeError(f"could not start the moto S3 server: {last}")


def spawn_moto() -> MotoS3:
    """Start moto's S3 server in a child process (a :class:`ServerProcess` without
    added latency) and return it as a :class:`MotoS3` whose ``stop`` ends the child.

    In the tests' own process the server's request handling and the code under test
    take turns on one GIL; in a child of its own the two run side by side on two cores,
    and an S3 request costs about a third less wall time. The child also exits when
    this process does (its stdin closes). Servers started apart share no state.
    """
    _aws_env()
    child = ServerProcess(latency=0.0)
    return MotoS3(child, child.port)


def _user_agent(request: bytes) -> str:
    """The product name the User-Agent header of ``request`` starts with ("" if none)."""
    for line in request.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"user-agent":
            return value.strip().split(b"/", 1)[0].decode("ascii", "replace")
    return ""


@dataclass
class ProxyStats:
    requests: int = 0
    bytes_down: int = 0
    bytes_up: int = 0
    methods: dict[str, int] = field(default_factory=dict)  # requests per HTTP method
    # requests per client: the product name of their User-Agent ("aiobotocore" for
    # s3fs, "object_store" for obstore)
    agents: dict[str, int] = field(default_factory=dict)
    in_flight: int = 0  # requests sent on and not yet answered
    max_in_flight: int = 0  # the most at once since the last reset
    held: int = 0  # requests that waited for LatencyProxy.release
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": self.requests,
                "bytes_down": self.bytes_down,
                "bytes_up": self.bytes_up,
                "methods": dict(self.methods),
                "agents": dict(self.agents),
                "max_in_flight": self.max_in_flight,
                "held": self.held,
            }

    def reset(self) -> None:
        with self.lock:
            self.requests = self.bytes_down = self.bytes_up = self.held = 0
            self.max_in_flight = self.in_flight
            self.methods.clear()
            self.agents.clear()


class Listener:
    """A TCP server on 127.0.0.1 and a free port that serves each connection in a
    thread of its own (``_serve(client)``, which subclasses define): the base of the
    test proxies (:class:`LatencyProxy`, tests/faults/proxy.py's ``FaultProxy``). A
    context manager (started on entry, stopped on exit); :meth:`stop` also closes the
    connections still open."""

    def __init__(self) -> None:
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port = int(self._sock.getsockname()[1])
        self._stop = threading.Event()
        self._clients: set[socket.socket] = set()
        self._clients_lock = threading.Lock()

    @property
    def url(self) -> str:
        """The endpoint (``http://127.0.0.1:<port>``)."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Any:
        threading.Thread(target=self._accept, name=type(self).__name__, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        _close(self._sock)
        with self._clients_lock:
            for c in list(self._clients):
                _close(c)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            with self._clients_lock:
                self._clients.add(client)
            threading.Thread(target=self._run, args=(client,), daemon=True).start()

    def _run(self, client: socket.socket) -> None:
        try:
            self._serve(client)
        finally:
            _close(client)
            with self._clients_lock:
                self._clients.discard(client)

    def _serve(self, client: socket.socket) -> None:
        raise NotImplementedError


def _close(sock: socket.socket) -> None:
    try:
        sock.close()
    except OSError:
        pass


class LatencyProxy(Listener):
    """A TCP proxy on 127.0.0.1 that delays each HTTP request by ``latency``
    seconds and counts requests and bytes (see the module docstring). A request
    whose first bytes (request line and headers) ``hold`` returns true for is not
    passed on until the ``release`` event is set (a test's handshake: work that
    must not finish, or must not start, before a point the test chooses).

    >>> # p = LatencyProxy(("127.0.0.1", 5000), latency=0.005); p.start(); p.url
    """

    def __init__(self, upstream: tuple[str, int], latency: float = 0.005) -> None:
        super().__init__()
        self.upstream = upstream
        self.latency = latency
        self.stats = ProxyStats()
        self.hold: Callable[[bytes], bool] | None = None
        self.release = threading.Event()

    def stop(self) -> None:
        self.release.set()
        super().stop()

    def _serve(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(self.upstream)
        except OSError:
            return
        for s in (client, server):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        state = {"answered": True}  # the next client bytes start a new request
        t = threading.Thread(target=self._down, args=(server, client, state), daemon=True)
        t.start()
        try:
            while True:
                data = client.recv(1 << 16)
                if not data:
                    break
                if state["answered"]:
                    state["answered"] = False
                    method = data.split(b" ", 1)[0].decode("ascii", "replace")
                    agent = _user_agent(data)
                    with self.stats.lock:
                        self.stats.requests += 1
                        self.stats.methods[method] = self.stats.methods.get(method, 0) + 1
                        self.stats.agents[agent] = self.stats.agents.get(agent, 0) + 1
                        self.stats.in_flight += 1
                        self.stats.max_in_flight = max(
                            self.stats.max_in_flight, self.stats.in_flight
                        )
                    if self.latency > 0:
                        time.sleep(self.latency)
                    if self.hold is not None and self.hold(data):
                        with self.stats.lock:
                            self.stats.held += 1
                        self.release.wait()
                with self.stats.lock:
                    self.stats.bytes_up += len(data)
                server.sendall(data)
        except OSError:
            pass
        finally:
            for s in (client, server):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            t.join(timeout=5)
            server.close()

    def _down(self, server: socket.socket, client: socket.socket, state: dict[str, bool]) -> None:
        try:
            while True:
                data = server.recv(1 << 16)
                if not data:
                    break
                with self.stats.lock:
                    if not state["answered"]:
                        self.stats.in_flight -= 1
                    self.stats.bytes_down += len(data)
                state["answered"] = True
                client.sendall(data)
        except OSError:
            pass
        finally:
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class ServerProcess:
    """moto + a :class:`LatencyProxy` in a separate process (so that benchmarks do
    not share the GIL with the server): ``port`` is moto, ``proxy_port`` the proxy.
    """

    def __init__(self, latency: float = 0.005) -> None:
        import json
        import subprocess
        import sys

        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the S3 server process did not start")
        ports = json.loads(line)
        self.port = int(ports["port"])
        self.proxy_port = int(ports["proxy_port"])
        self.moto = MotoS3(server=None, port=self.port)

    def storage_options(self, through_proxy: bool = True) -> dict[str, Any]:
        port = self.proxy_port if through_proxy else self.port
        return self.moto.storage_options(f"http://127.0.0.1:{port}")

    def stats(self, reset: bool = False) -> dict[str, int]:
        """The proxy's counters (asked over the control pipe)."""
        import json

        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("reset\n" if reset else "stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(10)
            except Exception:  # noqa: BLE001 - make sure it is gone
                self.proc.kill()
                self.proc.wait(10)


def _serve(latency: float) -> None:
    import json
    import sys

    server = start_moto()
    proxy = LatencyProxy(("127.0.0.1", server.port), latency=latency).start()
    sys.stdout.write(json.dumps({"port": server.port, "proxy_port": proxy.port}) + "\n")
    sys.stdout.flush()
    for line in sys.stdin:  # commands until the parent closes the pipe
        cmd = line.strip()
        snap = proxy.stats.snapshot()
        if cmd == "reset":
            proxy.stats.reset()
        sys.stdout.write(json.dumps(snap) + "\n")
        sys.stdout.flush()
    proxy.stop()


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--serve":
        _serve(float(sys.argv[2]))
