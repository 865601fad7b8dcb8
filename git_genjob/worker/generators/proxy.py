"""`--allow-host HOST[:PORT]`: the only way out of a sandbox whose network is otherwise off.

The generator's network namespace holds nothing but loopback. Inside it, a relay (started
before the generator, `RELAY`) listens on 127.0.0.1:3128 and carries each connection to a Unix
socket in the attempt's directory; the worker's proxy on that socket (`HostProxy`) reads the
request (`CONNECT host:port`, or a plain-HTTP request with an absolute URL), opens the upstream
connection from the worker's own network only when the host (and port) is listed, and answers
403 otherwise. The relay runs inside the sandbox, so replacing it gains nothing: the socket is
the only path out, and the worker decides at its end. `HTTPS_PROXY`/`HTTP_PROXY` point agents
at it (what curl, Python's requests and httpx, and most agent CLIs read).
"""

from __future__ import annotations

import os
import socket
import threading
import urllib.parse

from git_genjob.documents.errors import BadInput

RELAY_PORT = 3128
GATEWAY_PORT = 3129  # the relay's second pair: the attempt's model gateway (worker.gateway, SPEC §12.1)
HEAD_MAX = 64 * 1024

# Run inside the sandbox as `python -I -S -c RELAY SOCKET PORT [SOCKET PORT]`: bind each, then
# fork; the parent exits 0 once the ports listen, so the generator starts only after it.
RELAY = r"""
import os, socket, sys, threading
pairs = [(sys.argv[i], int(sys.argv[i + 1])) for i in range(1, len(sys.argv) - 1, 2)]
servers = []
for path, port in pairs:
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", port))
    srv.listen(64)
    servers.append((srv, path))
if os.fork():
    os._exit(0)
os.setsid()
for fd in (0, 1, 2):
    os.dup2(os.open(os.devnull, os.O_RDWR), fd)
def pipe(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
def serve(client, path):
    try:
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        up.connect(path)
    except OSError:
        client.close()
        return
    threading.Thread(target=pipe, args=(client, up), daemon=True).start()
    pipe(up, client)
def accept(srv, path):
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, path), daemon=True).start()
for srv, path in servers[1:]:
    threading.Thread(target=accept, args=(srv, path), daemon=True).start()
accept(*servers[0])
"""


def parse_hosts(hosts: tuple[str, ...]) -> list[tuple[str, int | None]]:
    """`HOST` (any port) or `HOST:PORT` (`[v6]:PORT` for an IPv6 address); BadInput otherwise."""
    return [_parse_host(raw) for raw in hosts]


def _parse_host(raw: str) -> tuple[str, int | None]:
    text = raw.strip().lower()
    host, port = _split_port(raw, text)
    if not host or any(c in host for c in "/@ \t") or not host.isprintable() or (port is not None and port > 65535):
        raise BadInput(f"--allow-host {raw!r} is not a host name", "use HOST or HOST:PORT, e.g. api.openai.com:443")
    return host, port


def _split_port(raw: str, text: str) -> tuple[str, int | None]:
    """`text` (`raw` lowered) as its host and port (None: any port); BadInput for a port that is no number."""
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        if not rest:
            return host, None
        if not rest.startswith(":") or not rest[1:].isdigit():
            raise BadInput(f"--allow-host {raw!r}", "use HOST, HOST:PORT or [IPv6]:PORT")
        return host, int(rest[1:])
    if text.count(":") == 1:
        host, _, p = text.partition(":")
        if not p.isdigit():
            raise BadInput(f"--allow-host {raw!r}: the port must be a number", "use HOST or HOST:PORT")
        return host, int(p)
    return text, None


class HostProxy:
    """The worker's end: an HTTP proxy on a Unix socket that lets through listed hosts only."""

    def __init__(self, path: str, allowed: list[tuple[str, int | None]], owner: tuple[int, int] | None = None):
        self.path, self.allowed = path, allowed
        self.denied: list[str] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        os.chmod(path, 0o666)  # the generator may run as another user (nobody, for a root worker)
        if owner is not None:
            os.chown(path, *owner)
        self.sock.listen(64)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def allows(self, host: str, port: int) -> bool:
        host = host.lower().strip("[]")
        return any(h == host and (p is None or p == port) for h, p in self.allowed)

    def close(self) -> None:
        self.stopped.set()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()
        self.thread.join(timeout=5)

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            conn.settimeout(30)
            head = _read_head(conn)
            if head is None:
                conn.close()
                return
            head, _, rest = head.partition(b"\r\n\r\n")
            request = _parse_request(head)
            if request is None:
                return self._refuse(conn, 400, "only CONNECT and plain-HTTP requests with an absolute URL")
            host, port, first = request
            if not self.allows(host, port):
                self.denied.append(f"{host}:{port}")
                return self._refuse(conn, 403, f"genjob: {host}:{port} is not an allowed host (--allow-host)")
            try:
                upstream = socket.create_connection((host.strip("[]"), port), timeout=30)
            except OSError as exc:
                return self._refuse(conn, 502, f"genjob: cannot reach {host}:{port}: {exc}")
            _relay(conn, upstream, first, rest)
        except (OSError, ValueError, UnicodeError):
            conn.close()

    def _refuse(self, conn: socket.socket, status: int, text: str) -> None:
        body = (text + "\n").encode("utf-8")
        reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
        try:
            conn.sendall(f"HTTP/1.1 {status} {reason}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        except OSError:
            pass
        conn.close()


def _read_head(conn: socket.socket) -> bytes | None:
    """The bytes read up to the request's blank line (and any past it); None when the client
    closed first or sent more than HEAD_MAX without one."""
    head = b""
    while b"\r\n\r\n" not in head:
        data = conn.recv(4096)
        if not data or len(head) > HEAD_MAX:
            return None
        head += data
    return head


def _parse_request(head: bytes) -> tuple[str, int, bytes | None] | None:
    """(host, port, the request to send upstream) of a request's head; that request is None for
    a CONNECT (a tunnel), the head without its proxy headers for plain HTTP. None: neither."""
    lines = head.decode("latin-1").split("\r\n")
    method, target, version = (lines[0].split(" ") + ["", "", ""])[:3]
    if method.upper() == "CONNECT":
        host, _, port_text = target.rpartition(":")
        return host, int(port_text) if port_text.isdigit() else 443, None
    return _plain_request(method, target, version, lines[1:])


def _plain_request(method: str, target: str, version: str, headers: list[str]) -> tuple[str, int, bytes] | None:
    """A plain-HTTP request for an absolute URL as (host, port, the request its origin gets: the
    URL's path and query, no proxy headers); None for any other target."""
    url = urllib.parse.urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        return None
    hostname, port = url.hostname, url.port or 80
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    kept = [h for h in headers if not h.lower().startswith(("proxy-connection:", "proxy-authorization:"))]
    return hostname, port, "\r\n".join([f"{method} {path} {version}", *kept]).encode("latin-1") + b"\r\n\r\n"


def _relay(conn: socket.socket, upstream: socket.socket, first: bytes | None, rest: bytes) -> None:
    """Carry the connection both ways once upstream is open: a tunnel is told it is established,
    a plain-HTTP request goes upstream first; then whatever the client sent past its head."""
    conn.settimeout(None)
    upstream.settimeout(None)
    if first is None:
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
    else:
        upstream.sendall(first)
    if rest:
        upstream.sendall(rest)
    other = threading.Thread(target=_pipe, args=(conn, upstream), daemon=True)
    other.start()
    _pipe(upstream, conn)
    other.join()
    upstream.close()
    conn.close()


def _pipe(a: socket.socket, b: socket.socket) -> None:
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
