"""The demo's model: an OpenAI-dialect chat server on 127.0.0.1, deterministic, no weights.

The demo's worker reaches it through its gateway (SPEC §12.1) as any agent reaches a provider:
the demo agent asks it which of the named functions should take a timeout, and it answers with
the function names the question holds, reporting token usage as a provider would."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class DemoModel:
    def __init__(self) -> None:
        self.calls = 0
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                try:
                    doc = json.loads(self.rfile.read(size))
                    question = str(doc["messages"][-1]["content"])
                except (ValueError, KeyError, IndexError, TypeError):
                    return self._send(400, {"error": {"message": "a chat completion request, please"}})
                model.calls += 1
                names = re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", question)
                answer = json.dumps(sorted(set(names)))
                self._send(200, {
                    "id": f"demo-{model.calls}", "object": "chat.completion", "model": doc.get("model", "demo"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": answer},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": len(question.split()), "completion_tokens": len(names) + 2},
                })  # fmt: skip

            def _send(self, status: int, doc: dict[str, Any]) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
