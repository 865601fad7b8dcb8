"""The gateway's figures (issue 33): overhead per call against calling the upstream directly,
a 1 MB streamed answer, the replay of a 20-call session against live, and the peak memory of a
gateway fed an endless answer. Run through `bench/run --only gateway` (rows in bench/suite.py);
`python bench/bench_gateway.py child URL` is the child whose peak memory the last row reads."""

from __future__ import annotations

import http.client
import json
import os
import socket
import statistics
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MiB = 1024 * 1024


class Upstream:
    """An OpenAI-dialect upstream on 127.0.0.1: plain answers of `size` bytes, streams of
    `stream_size` bytes in 16 KiB events, `delay` seconds before each answer, or `endless` bytes."""

    def __init__(self, size: int = 1024, stream_size: int = MiB, delay: float = 0.0, endless: int = 0):
        self.requests = 0
        up = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def setup(self) -> None:  # one write a response, as real servers do (no Nagle wait on reuse)
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                up.requests += 1
                if delay:
                    time.sleep(delay)
                if endless or body.get("stream"):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.close_connection = True
                    event = b'data: {"choices":[{"delta":{"content":"' + b"x" * 16300 + b'"}}]}\n\n'
                    sent, total = 0, endless or stream_size
                    try:
                        while sent < total:
                            self.wfile.write(event)
                            sent += len(event)
                        self.wfile.write(b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9}}\n\n')
                    except OSError:
                        pass
                    return
                doc = {"choices": [{"message": {"role": "assistant", "content": "y" * size}}],
                       "usage": {"prompt_tokens": 5, "completion_tokens": 9}}  # fmt: skip
                data = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def call(base: str, token: str, n: int, stream: bool = False) -> tuple[float, float]:
    """(seconds to the first byte, seconds to the last) of one chat completion."""
    doc = {"model": "m", "stream": stream, "messages": [{"role": "user", "content": f"call {n}"}]}
    req = urllib.request.Request(base + "/chat/completions", json.dumps(doc).encode(),
                                 {"authorization": f"Bearer {token}", "content-type": "application/json"})  # fmt: skip
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as resp:
        resp.read(1)
        first = time.perf_counter() - t
        while resp.read(65536):
            pass
    return first, time.perf_counter() - t


def gateway(repo: str, upstream: str, attempt: int = 1, key: str = "job-bench", answer_max: int | None = None) -> Any:
    from git_genjob.storage.store import Store
    from git_genjob.worker.gateway.calls import Session
    from git_genjob.worker.gateway.dialects import parse_gateway
    from git_genjob.worker.gateway.server import Gateway

    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-0123456789")
    session = Session(Store.open(repo), key, attempt, False, None)
    kw = {"answer_max": answer_max} if answer_max else {}
    gw = Gateway([parse_gateway(f"openai={upstream}")], session, **kw)
    env = gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")
    return gw, env["OPENAI_BASE_URL"], env["OPENAI_API_KEY"]


def overhead(repo: str, calls: int) -> dict[str, float]:
    """Medians of `calls` plain 1 KB answers and of 1 MB streams, direct and through the gateway."""
    up = Upstream()
    gw, base, token = gateway(repo, up.url)
    direct = [call(up.url + "/v1", "k", n)[1] for n in range(calls)]
    through = [call(base, token, n)[1] for n in range(calls)]
    s_direct = [call(up.url + "/v1", "k", n, stream=True) for n in range(max(3, calls // 10))]
    s_through = [call(base, token, 10_000 + n, stream=True) for n in range(max(3, calls // 10))]
    gw.close()
    up.close()
    med = statistics.median
    return {
        "plain_direct_ms": med(direct) * 1000,
        "plain_gateway_ms": med(through) * 1000,
        "stream_direct_ms": med(t for _, t in s_direct) * 1000,
        "stream_gateway_ms": med(t for _, t in s_through) * 1000,
        "first_byte_direct_ms": med(f for f, _ in s_direct) * 1000,
        "first_byte_gateway_ms": med(f for f, _ in s_through) * 1000,
    }


def replay(repo: str, calls: int = 20, delay: float = 0.2) -> dict[str, float]:
    """A session of `calls` calls to an upstream taking `delay` a call, live, then replayed."""
    up = Upstream(delay=delay)
    gw, base, token = gateway(repo, up.url, 1, "job-replay")
    t = time.perf_counter()
    for n in range(calls):
        call(base, token, n)
    live = time.perf_counter() - t
    gw.close()
    sent = up.requests
    gw, base, token = gateway(repo, up.url, 2, "job-replay")
    t = time.perf_counter()
    for n in range(calls):
        call(base, token, n)
    replayed = time.perf_counter() - t
    gw.close()
    up.close()
    return {"live_s": live, "replay_s": replayed, "live_requests": sent, "replay_requests": up.requests - sent}


def child(upstream: str, repo: str) -> None:
    """One call through a gateway to an endless upstream, cut at the limit; prints VmHWM."""
    gw, base, token = gateway(repo, upstream, key="job-endless")
    try:
        call(base, token, 0, stream=True)
        cut = False
    except (OSError, http.client.HTTPException):  # the stream broken where the limit was passed
        cut = True
    gw.close()
    with open("/proc/self/status") as fh:
        hwm = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
    print(json.dumps({"hwm_kb": hwm, "cut": cut}))


if __name__ == "__main__" and sys.argv[1:2] == ["child"]:
    child(sys.argv[2], sys.argv[3])
