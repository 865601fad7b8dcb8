"""A real HTTP stub provider on 127.0.0.1 speaking the OpenAI and Anthropic dialects, plain and
streamed (SSE), with a tool call; it counts requests and records the auth header it saw."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Stub:
    def __init__(self, hold_at: int | None = None) -> None:
        """`hold_at`: the request (counting from 1) the stub holds unanswered until `release`
        is set (a call in flight when a test kills the worker); `held` is set when it arrives."""
        self.requests: list[dict[str, Any]] = []
        self.hold_at, self.held, self.release = hold_at, threading.Event(), threading.Event()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # /v1/models: what doctor asks an upstream
                auth = self.headers.get("x-api-key") or self.headers.get("authorization", "")
                stub.requests.append({"path": self.path, "auth": auth, "body": None})
                self._send({"object": "list", "data": [{"id": "m", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                auth = self.headers.get("x-api-key") or self.headers.get("authorization", "")
                stub.requests.append({"path": self.path, "auth": auth, "body": body})
                if len(stub.requests) == stub.hold_at:
                    stub.held.set()
                    stub.release.wait(60)
                    return
                if self.path.startswith("/v1/messages"):
                    self._anthropic(body)
                else:
                    self._openai(body)

            def _send(self, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, events: list[dict[str, Any]]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for e in events:
                    self.wfile.write(f"data: {json.dumps(e)}\n\n".encode())
                    self.wfile.flush()
                self.close_connection = True

            def _openai(self, body: dict[str, Any]) -> None:
                if body.get("stream"):
                    self._sse(
                        [
                            {"choices": [{"delta": {"content": "hel"}}]},
                            {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": {"name": "w"}}]}}]},
                            {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7}},
                        ]
                    )
                else:
                    self._send(
                        {
                            "choices": [{"message": {"role": "assistant", "content": "hello"}}],
                            "usage": {"prompt_tokens": 10, "completion_tokens": 5},
                        }
                    )

            def _anthropic(self, body: dict[str, Any]) -> None:
                if body.get("stream"):
                    self._sse(
                        [
                            {"type": "message_start", "message": {"usage": {"input_tokens": 20, "output_tokens": 1}}},
                            {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "hi"}},
                            {"type": "message_delta", "usage": {"output_tokens": 9}},
                        ]
                    )
                else:
                    self._send(
                        {"content": [{"type": "text", "text": "hi"}], "usage": {"input_tokens": 3, "output_tokens": 4}}
                    )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
