"""A real HTTP model endpoint on 127.0.0.1 for tests: counts requests, answers as told."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Stub:
    def __init__(self) -> None:
        self.count = 0
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # each request's headers (the API key a client sent)
        self.mode = "ok"  # ok | status:N | truncate | reject_json_schema | length
        self.answer = "hello\n"
        self.error = b'{"error":"nope"}'  # the body of a `status:N` answer
        self.delay = 0.0  # seconds before each answer
        self.usage: dict[str, int] | None = None  # a chat completion's `usage`, as a provider reports it
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.count += 1
                stub.requests.append(body)
                stub.headers.append({k.title(): v for k, v in self.headers.items()})  # names as HTTP has them: any case
                if stub.delay:
                    import time

                    time.sleep(stub.delay)
                if stub.mode.startswith("status:"):
                    return self._send(int(stub.mode.split(":")[1]), stub.error)
                if stub.mode == "reject_json_schema" and body.get("response_format", {}).get("type") == "json_schema":
                    return self._send(500, b'{"error":"response_format json_schema is not supported"}')
                if self.path.endswith("/chat/completions"):
                    finish = "length" if stub.mode == "length" else "stop"
                    doc: dict[str, Any] = {
                        "choices": [{"message": {"role": "assistant", "content": stub.answer}, "finish_reason": finish}]
                    }
                    if stub.usage is not None:
                        doc["usage"] = stub.usage
                    data = json.dumps(doc).encode()
                else:
                    data = stub.answer.encode()
                if stub.mode == "truncate":
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(data) + 50))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                    self.close_connection = True
                    return None
                return self._send(200, data)

            def _send(self, code: int, data: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
