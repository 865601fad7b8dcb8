"""HTTP plumbing shared by the model generators and `ask`: one POST, errors sorted by whether it was sent.

`timeout` is a deadline for the whole call: connecting, sending, the status line, the headers
and every byte of the body. A socket timeout alone bounds each read, so a server that drips one
byte a second would hold the call forever; here a watchdog shuts the connection at the deadline
whatever the server does. The body is read up to SPEC §8's answer limit: a longer one (a chunked
body that never ends) is refused with nothing recorded, before it exhausts memory.

It imports nothing of the repository, so the generators may use it (tests/contract/test_architecture.py).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

from git_genjob.documents.errors import GeneratorUnavailable, HttpStatusError

ANSWER_MAX = 256 * 1024 * 1024  # SPEC §8: an answer is at most 256 MiB
ERROR_BODY_MAX = 64 * 1024  # of a non-2xx answer, what is kept for the message


class Watchdog:
    """Shuts every socket the call opened once the deadline passes, so a blocked read returns."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.socks: list[socket.socket] = []
        self.fired = False
        self.lock = threading.Lock()
        self.timer = threading.Timer(max(0.0, timeout), self._fire)
        self.timer.daemon = True

    def register(self, sock: socket.socket) -> socket.socket:
        with self.lock:
            self.socks.append(sock)
            if self.fired:
                _shut(sock)
        return sock

    def left(self) -> float:
        return max(0.001, self.deadline - time.monotonic())

    def _fire(self) -> None:
        with self.lock:
            self.fired = True
            for sock in self.socks:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


def _handlers(dog: Watchdog) -> list[urllib.request.BaseHandler]:
    """urllib's HTTP and HTTPS handlers with connections whose sockets the watchdog holds (proxy
    settings from the environment still apply: urllib's ProxyHandler runs before these)."""

    def create(address: tuple[str, int], timeout: Any = None, source_address: Any = None) -> socket.socket:
        sock = socket.create_connection(address, min(dog.left(), timeout or dog.left()), source_address)
        return dog.register(sock)

    class Conn(http.client.HTTPConnection):
        def connect(self) -> None:
            self._create_connection = create
            super().connect()

    class TLSConn(http.client.HTTPSConnection):
        def connect(self) -> None:
            self._create_connection = create
            super().connect()

    class Plain(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Conn, req)

    class Secure(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(TLSConn, req, context=self._context)  # type: ignore[attr-defined]

    return [Plain(), Secure(), _NoRedirect()]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """urllib followed a 301/302/303 to a POST as a GET to wherever it pointed, the API key's
    header and all (another host, or https to plain http): no redirect is followed."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def redirect_refused(status: int, location: str, url: str) -> HttpStatusError:
    """A 3xx answer to a model call, never followed (`ask` and the worker's gateway alike): the
    request and its key go to the URL the user gave, never to one an answer names."""
    where = location[:120] or "(no Location)"
    err = HttpStatusError(status, f"a redirect to {where}, not followed (nothing was recorded)", url)
    err.hint = "if you trust where it points, give that URL instead; genjob never follows a model's redirect"
    return err


def timed_out(url: str, timeout: float) -> GeneratorUnavailable:
    return GeneratorUnavailable(
        f"{url}: timed out after {timeout:g}s with the request sent",
        sent=True,
        hint="the outcome is unknown; the owner decides: git genjob retry KEY",
    )


def _read_capped(resp: Any, limit: int, url: str) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = resp.read(min(1 << 20, limit + 1 - size))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise GeneratorUnavailable(
                f"{url}: the answer is longer than {limit} bytes (SPEC §8's limit); nothing was recorded",
                sent=True,
                hint="the outcome is unknown; the owner decides: git genjob retry KEY",
            )


def post_json(
    url: str, doc: dict[str, Any], timeout: float, headers: dict[str, str] | None = None, limit: int = ANSWER_MAX
) -> str:
    """POST JSON; return the body text. Before an answer: sent=False; timeout, cut or overlong
    answer: sent=True. `timeout` bounds the whole call (see the module's docstring)."""
    data = json.dumps(doc, ensure_ascii=False).encode("utf-8")
    req = urllib.request.Request(
        url, data=data, method="POST", headers={"Content-Type": "application/json", **(headers or {})}
    )
    dog = Watchdog(timeout)
    opener = urllib.request.build_opener(*_handlers(dog))
    dog.timer.start()
    try:
        with opener.open(req, timeout=timeout) as resp:
            return _read_answer(resp, limit, url, dog)
    except GeneratorUnavailable:
        raise
    except (OSError, http.client.HTTPException, UnicodeDecodeError) as exc:
        raise _failure(exc, url, dog) from None
    finally:
        dog.timer.cancel()


def _read_answer(resp: Any, limit: int, url: str, dog: Watchdog) -> str:
    """The whole body of a 2xx answer as text, refused when the deadline cut it or it is shorter
    than its Content-Length."""
    body = _read_capped(resp, limit, url)
    if dog.fired:
        raise timed_out(url, dog.timeout)
    length = resp.headers.get("Content-Length")
    if length is not None and int(length) != len(body):
        raise GeneratorUnavailable(f"{url}: answer cut short", sent=True)
    return bytes(body).decode("utf-8")


def _failure(
    exc: OSError | http.client.HTTPException | UnicodeDecodeError, url: str, dog: Watchdog
) -> GeneratorUnavailable:
    """What a failed POST is for the caller. The cases overlap (an HTTPError is a URLError is an
    OSError), so they are tried in this order."""
    if isinstance(exc, urllib.error.HTTPError):
        return _status_failure(exc, url, dog)
    if isinstance(exc, TimeoutError):
        return timed_out(url, dog.timeout)
    if isinstance(exc, urllib.error.URLError):
        return _unreachable(exc, url, dog)
    if isinstance(exc, UnicodeDecodeError):
        return GeneratorUnavailable(f"{url}: answer is not UTF-8", sent=True)
    if dog.fired:
        return timed_out(url, dog.timeout)
    if isinstance(exc, http.client.IncompleteRead):
        return GeneratorUnavailable(f"{url}: answer cut short", sent=True)
    return GeneratorUnavailable(f"{url}: {exc}", sent=True)


def _status_failure(exc: urllib.error.HTTPError, url: str, dog: Watchdog) -> GeneratorUnavailable:
    """A non-2xx answer: a redirect refused, or the status with the start of its body."""
    if dog.fired:
        return timed_out(url, dog.timeout)
    if 300 <= exc.code < 400:
        return redirect_refused(exc.code, exc.headers.get("Location") or "", url)
    try:
        text = _read_capped(exc, ERROR_BODY_MAX, url).decode("utf-8", "replace")
    except (GeneratorUnavailable, OSError, http.client.HTTPException):
        text = ""
    return HttpStatusError(exc.code, text, url)


def _unreachable(exc: urllib.error.URLError, url: str, dog: Watchdog) -> GeneratorUnavailable:
    """No answer at all: a timeout once the request may have gone, else nothing was sent."""
    reason = exc.reason
    if isinstance(reason, (TimeoutError, socket.timeout)) or dog.fired:
        return GeneratorUnavailable(f"{url}: timed out", sent=True)
    return GeneratorUnavailable(f"{url}: {reason}", sent=False, hint="start the model server or fix the URL")


# The one chat-completions client: `work --generator openai:…` and `ask --endpoint openai:…` both
# call it, so both send the same API key and read answers the same way. The key comes from the
# environment, by name, and never enters a job, a receipt, the replay cache or a fingerprint:
# GENJOB_API_KEY if set, else OPENAI_API_KEY, sent as `Authorization: Bearer KEY`. A local server
# (llama.cpp) needs neither.
KEY_VARIABLES = ("GENJOB_API_KEY", "OPENAI_API_KEY")


def api_headers() -> dict[str, str]:
    """The Authorization header of the first key variable that is set, or none."""
    for name in KEY_VARIABLES:
        key = os.environ.get(name)
        if key:
            return {"Authorization": f"Bearer {key}"}
    return {}


Post = Callable[[dict[str, Any], float], str]  # (body, timeout) -> the answer's text


def chat_completion(
    base_url: str, body: dict[str, Any], timeout: float, hint: str | None = None, post: Post | None = None
) -> str:
    """POST `body` to BASE_URL/chat/completions with the API key; the answer's message content.
    A malformed answer, or a `finish_reason` other than `stop` (a partial answer), is exit 3.
    `post` sends it instead (the worker's gateway, which adds the key itself)."""
    url = f"{base_url.rstrip('/')}/chat/completions"
    raw = post(body, timeout) if post is not None else post_json(url, body, timeout, api_headers())
    try:
        choice = json.loads(raw)["choices"][0]
        content = choice["message"]["content"]
        finish = choice.get("finish_reason")
    except (ValueError, KeyError, IndexError, TypeError):
        raise GeneratorUnavailable(f"{url}: the answer is not a chat completion", sent=True) from None
    if finish != "stop" or not isinstance(content, str):
        raise GeneratorUnavailable(f"{url}: partial answer (finish_reason={finish})", sent=True, hint=hint)
    return content
