"""The gateway's HTTP server, one per attempt.

Server side: the standard library's threaded `http.server` (on a Unix socket under a sandbox,
on 127.0.0.1 without one). An agent's calls are few and long (a model answers in seconds), so
a thread per connection costs nothing that matters, and no event loop or new dependency is
needed; a semaphore bounds the connections (an agent opening 100 at once gets 503s, the worker
never crashes). Streamed answers pass through chunk by chunk as they arrive.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import socketserver
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from git_genjob.documents.errors import GenjobError
from git_genjob.storage.store import CONTENT_MAX
from git_genjob.worker.gateway.calls import Budget, Session
from git_genjob.worker.gateway.dialects import KEY_ENV, Upstream, offered
from git_genjob.worker.gateway.spool import Spool, TooBig
from git_genjob.worker.gateway.upstream import NOT_SENT, Client

MAX_CONNECTIONS = 32
# connections the kernel holds until the server accepts them: socketserver's 5 made the sixth of a
# burst a reset connection; past MAX_CONNECTIONS each is accepted and answered 503 instead
BACKLOG = 256
REQUEST_MAX = 64 * 1024 * 1024


class _TCPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = BACKLOG


class Gateway:
    """Upstreams, their keys (read from the worker's environment), the attempt's token."""

    def __init__(
        self, upstreams: list[Upstream], session: Session, deadline_s: float = 120.0, answer_max: int = CONTENT_MAX
    ):
        self.upstreams = {u.name: u for u in upstreams}
        self.keys = {u.name: os.environ.get(u.key_env, "") for u in upstreams}
        self.token = "genjob-" + secrets.token_hex(24)
        self.session = session
        session.volatile.append(self.token)
        self.deadline_s = deadline_s
        self.answer_max = answer_max  # SPEC §8's limit: an answer past it is cut there, nothing recorded
        self.client = Client(connect_s=min(10.0, deadline_s), read_s=deadline_s)  # a connect within the call's deadline
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.server: socketserver.BaseServer | None = None
        self.thread: threading.Thread | None = None

    def env(self, base: str) -> dict[str, str]:
        """What the generator sees: base URLs and, in each key variable, the token."""
        env = {"GENJOB_GATEWAY_URL": base}
        for u in self.upstreams.values():
            env[u.key_env] = self.token
            env.setdefault(KEY_ENV[u.dialect], self.token)  # where the dialect's SDKs look for a key
            if u.dialect == "openai":
                env.update(OPENAI_BASE_URL=f"{base}/{u.name}/v1", OPENAI_API_BASE=f"{base}/{u.name}/v1")
            else:
                env["ANTHROPIC_BASE_URL"] = f"{base}/{u.name}"
        return env

    def listen_unix(self, path: str) -> None:
        gw = self

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True
            request_queue_size = BACKLOG

        self._start(Server(path, _handler(gw)))
        os.chmod(path, 0o666)

    def listen_tcp(self) -> int:
        server = _TCPServer(("127.0.0.1", 0), _handler(self))
        self._start(server)
        return int(server.server_address[1])

    def _start(self, server: socketserver.BaseServer) -> None:
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        """Stop serving, then fold the attempt's recorded answers into the replay cache (one
        commit); answers that cannot be written now stay in the journal for the next attempt,
        and stderr says so (Session.fold_or_say)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
        self.client.close()
        self.session.fold_or_say()
        self.session.close_journal()


def _content_length(value: str | None) -> int | None:
    """A request's content-length header as a byte count (0 when there is none); None when it
    is not one: a negative number (`rfile.read(-1)` would read till the agent hangs up, past
    REQUEST_MAX) or no number at all."""
    if not value:
        return 0
    value = value.strip()
    return int(value) if value.isascii() and value.isdigit() else None


def _model_of(body: bytes) -> str | None:
    """The model a POST's JSON object names ("" when none); None when the body is no JSON object."""
    try:
        doc = json.loads(body)
        assert isinstance(doc, dict)
    except (ValueError, AssertionError):
        return None
    return str(doc.get("model", ""))


def _handler(gw: Gateway) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # no request line (or key) in any log
            pass

        def setup(self) -> None:
            super().setup()
            if self.connection.family in (socket.AF_INET, socket.AF_INET6):
                # headers and body are separate writes: without this, Nagle's algorithm holds the
                # body for the client's delayed ACK (40 ms a call on Linux loopback)
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_GET(self) -> None:
            self._serve()

        def do_POST(self) -> None:
            self._serve()

        def _serve(self) -> None:
            if not gw.slots.acquire(blocking=False):
                return self._error(503, "too many connections to the gateway at once")
            try:
                self._call()
            except (OSError, ConnectionError):
                self.close_connection = True
            finally:
                gw.slots.release()

        def _error(self, status: int, text: str, kind: str = "genjob_gateway") -> None:
            body = json.dumps({"error": {"type": kind, "message": text}}).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _call(self) -> None:
            name, _, rest = self.path.lstrip("/").partition("/")
            up = gw.upstreams.get(name)
            path = "/" + rest
            if up is None or not offered(up, path):
                return self._error(404, f"{self.path} is not a path of this gateway's dialects")
            auth = self.headers.get("x-api-key") or self.headers.get("authorization", "").removeprefix("Bearer ")
            if not secrets.compare_digest(auth.strip().encode(), gw.token.encode()):
                return self._error(401, "not this attempt's token", "authentication_error")
            body = self._request_body()
            if body is None:
                return None
            model = _model_of(body) if self.command == "POST" else ""
            if model is None:
                return self._error(400, "the request body is not a JSON object")
            try:
                call, replay = gw.session.begin(up, path, body, model)
            except Budget as exc:
                return self._error(429, f"the job's budget {exc.name} = {exc.limit} is spent", "budget_exceeded")
            except UnicodeError:  # not UTF-8, or JSON escaping a lone surrogate no UTF-8 document holds
                return self._error(400, "the request body is not UTF-8 text")
            if replay is not None:
                return self._answer(replay.status, replay.content_type, [replay.body], replay.stream)
            self._send(up, path, body, call)

        def _request_body(self) -> bytes | None:
            """The request's body, read; None when its content-length is refused (answered 400)."""
            size = _content_length(self.headers.get("content-length"))
            if size is None:  # its body never read (till EOF, past REQUEST_MAX): the connection goes
                self.close_connection = True
                self._error(400, "the request's content-length is not a number of bytes")
                return None
            if size > REQUEST_MAX:
                self._error(400, "request too large")
                return None
            return self.rfile.read(size) if size else b""

        def _answer(self, status: int, ctype: str, chunks: list[bytes], stream: bool) -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            if stream:
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for c in chunks:
                    self._chunk(c)
                self.wfile.write(b"0\r\n\r\n")
            else:
                data = b"".join(chunks)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        def _chunk(self, data: bytes) -> None:
            if data:
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

        def _send(self, up: Upstream, path: str, body: bytes, call: dict[str, Any]) -> None:
            deadline = time.monotonic() + gw.deadline_s
            started = False
            spool = None
            try:
                with gw.client.send(up, gw.keys[up.name], self.command, path, dict(self.headers), body) as resp:
                    ctype = resp.headers.get("content-type", "application/json")
                    stream = "text/event-stream" in ctype
                    ok = 200 <= resp.status_code < 300
                    spool = gw.session.spool(up, stream, gw.answer_max, tuple(gw.keys.values()), recording=ok)
                    held = b""
                    if stream:
                        self._start_stream(resp.status_code, ctype)
                        started = True
                    for data in resp.iter_bytes():
                        if time.monotonic() > deadline:
                            raise httpx.ReadTimeout("the call's deadline passed")
                        spool.add(data)
                        if stream:  # passed through as it comes, all but the last bytes
                            self._chunk(held)
                            held = data
                    if 200 <= resp.status_code < 300:
                        gw.session.record(call, spool, resp.status_code, ctype)
                        gw.session.end(call, "ok")
                    else:
                        gw.session.end(call, f"error {resp.status_code}")
                    if stream:
                        self._chunk(held)
                        self.wfile.write(b"0\r\n\r\n")
                    else:
                        self._answer_spooled(resp.status_code, ctype, spool)
            except NOT_SENT as exc:
                gw.session.end(call, "failed")  # never reached the upstream: nothing was sent
                self._error(502, f"the upstream {up.name} could not be reached ({exc}); nothing was sent")
            except TooBig:
                gw.session.end(call, "unknown")
                self._fail(started, 502, "the upstream's answer is over the size limit; nothing recorded")
            except UnicodeDecodeError:
                gw.session.end(call, "unknown")
                self._fail(started, 502, "the upstream's answer is not UTF-8 text; nothing recorded")
            except GenjobError as exc:
                gw.session.end(call, "unknown")
                self._fail(started, 502, f"the answer was not recorded: {exc.message}")
            except httpx.HTTPError as exc:
                gw.session.end(call, "unknown")
                self._fail(started, 504, f"the upstream {up.name} stalled or broke mid-answer: {exc}")
            except OSError as exc:  # the record could not be written (or the agent hung up): never `ok`
                gw.session.end(call, "unknown")
                self._fail(started, 502, f"the answer was not recorded: {exc.strerror or exc}")
            finally:
                if spool is not None:
                    spool.close()

        def _start_stream(self, status: int, ctype: str) -> None:
            """A streamed answer's status and headers sent, its chunks to follow."""
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()

        def _answer_spooled(self, status: int, ctype: str, spool: Spool) -> None:
            """A whole answer sent from its spool, after it was recorded."""
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(spool.size))
            self.end_headers()
            spool.replay_to(self.wfile.write)

        def _fail(self, started: bool, status: int, text: str) -> None:
            self.close_connection = True
            if started:  # the stream is cut: no final chunk, the agent sees a broken answer
                self.connection.shutdown(socket.SHUT_RDWR)
            else:
                self._error(status, text)

    return Handler
