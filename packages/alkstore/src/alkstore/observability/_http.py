"""A small threaded HTTP server for WSGI apps, on the standard library.

``wsgiref`` serves one request at a time and asks DNS for its own name at
bind; this wraps it in ``ThreadingMixIn``, skips the DNS look-up, logs
through ``logging`` instead of stderr, and runs ``serve_forever`` on one
daemon thread that :meth:`HTTPService.close` stops.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from alkstore.errors import InvalidArgument

from ._closing import Closing

__all__ = [
    "HTTPService",
    "ServedApp",
    "StartResponse",
    "WSGIApp",
    "WSGIEnviron",
    "is_loopback",
    "parse_bind",
    "serve_wsgi",
]

log = logging.getLogger("alkstore.http")

WSGIEnviron = dict[str, Any]
StartResponse = Callable[..., Any]
WSGIApp = Callable[[WSGIEnviron, StartResponse], Iterable[bytes]]

#: Seconds a connection may sit idle before its thread gives it up.
_REQUEST_TIMEOUT_S = 30.0


def parse_bind(text: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``PORT``, ``:PORT``, ``HOST:PORT`` or ``[IPv6]:PORT`` as ``(host,
    port)``; the host defaults to *default_host*. Port 0 asks the system for a
    free one."""
    value = text.strip()
    host, sep, port_text = value.rpartition(":")
    if not sep:
        host, port_text = "", value
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise InvalidArgument(f"write an IPv6 address in brackets: [{host}]:{port_text}")
    try:
        port = int(port_text)
    except ValueError:
        raise InvalidArgument(f"not a [HOST:]PORT: {text!r}") from None
    if not 0 <= port <= 65535:
        raise InvalidArgument(f"port must be in 0..65535, got {port}")
    return host or default_host, port


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Handler(WSGIRequestHandler):
    timeout = _REQUEST_TIMEOUT_S

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self) -> None:
        # HTTPServer.server_bind asks DNS for the host's full name, which can
        # stall on a machine without a resolver; the bound address will do.
        import socketserver

        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)
        self.setup_environ()


class _Server6(_Server):
    address_family = socket.AF_INET6


class HTTPService(Closing):
    """A running server: :attr:`url` is where it listens; :meth:`close`
    stops it and waits for its thread."""

    def __init__(self, app: WSGIApp, host: str, port: int, name: str) -> None:
        server_class = _Server6 if ":" in host else _Server
        try:
            self._server = server_class((host, port), _Handler)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from exc
        self._server.set_app(app)
        self.host = host
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name=name, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class ServedApp(Closing):
    """What an app served by an :class:`HTTPService` shows of it: its
    :attr:`port`; :meth:`close` stops the service, then runs *on_close*
    (whatever else the app's owner must stop)."""

    def __init__(self, service: HTTPService, on_close: Callable[[], None] = lambda: None) -> None:
        self._service = service
        self._on_close = on_close

    @property
    def port(self) -> int:
        return self._service.port

    def close(self) -> None:
        try:
            self._service.close()
        finally:
            self._on_close()


def serve_wsgi(app: WSGIApp, host: str, port: int, name: str = "alkstore-http") -> HTTPService:
    """Serve *app* on ``host:port`` from a background thread."""
    return HTTPService(app, host, port, name)
