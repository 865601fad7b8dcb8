"""docs/generators.md's aider recipe, verbatim, with aider-chat from PyPI, sandboxed, against a
chat-completions server on 127.0.0.1 (issue 22 item 13): with the documented `[scratch] ignore`
line its receipt is `ok` (aider's own chat history named under `ignored`), and the job applies."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.common import REPO_ROOT, git, run_genjob, run_genjob_process, setup_worker, submit_key

NEW = "def fetch_user(uid, timeout=1):\n    return {'id': uid}\n"
# aider's "whole" edit format: the file name, then the whole new file in a fence.
ANSWER = f"src/user.py\n```\n{NEW}```\n"


def _aider() -> str | None:
    """aider on PATH, or in the agents venv .ci/model-setup makes inside the project's venv."""
    beside = Path(sys.prefix) / "agents" / "bin" / "aider"
    return shutil.which("aider") or (str(beside) if beside.exists() else None)


class ChatServer:
    """OpenAI-style chat completions, streamed (server-sent events) as aider asks by default."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.auth.append(self.headers.get("Authorization", ""))
                head = {"id": "c1", "created": 0, "model": body.get("model")}
                if body.get("stream"):
                    chunks = [
                        {
                            **head,
                            "object": "chat.completion.chunk",
                            "choices": [{"index": 0, "delta": d, "finish_reason": f}],
                        }
                        for d, f in (({"role": "assistant", "content": ANSWER}, None), ({}, "stop"))
                    ]
                    data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                    kind = "text/event-stream"
                else:
                    message = {"role": "assistant", "content": ANSWER}
                    data = json.dumps(
                        {
                            **head,
                            "object": "chat.completion",
                            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        }
                    )
                    kind = "application/json"
                raw = data.encode()
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])


@pytest.fixture
def chat() -> Iterator[ChatServer]:
    server = ChatServer()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


def test_documented_aider_recipe_ends_in_a_verified_apply(repo: Path, chat: ChatServer) -> None:
    aider = _aider()
    if aider is None:
        if os.environ.get("CI"):
            raise AssertionError("CI must install aider-chat (.ci/model-setup)")
        pytest.skip("aider not installed (run .ci/model-setup)")
    docs = (REPO_ROOT / "docs/generators.md").read_text()
    spec = re.search(r"`(exec:aider [^`]+)`", docs)
    ignore = re.search(r'`(ignore = \[[^`]*"\.aider\*"\])`', docs)
    assert spec is not None and ignore is not None, "the aider recipe or its ignore line left docs/generators.md"
    key = setup_worker(repo)
    config = repo / ".genjob/config.toml"
    config.write_text(config.read_text().replace("[scratch]\n", f"[scratch]\n{ignore.group(1)}\n", 1))
    git(repo, "commit", "-qam", "aider's own files are not outputs")
    k = submit_key(repo, "-m", "Add a timeout parameter to fetch_user", "src/user.py")
    gateway = re.search(r"with `(--gateway openai=[^`]+)`", docs)
    assert gateway is not None and "--pass-env OPENAI_API_KEY" not in docs
    env = {
        "PATH": f"{os.path.dirname(aider)}:{os.environ['PATH']}",
        "AIDER_MODEL": "openai/m1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "AIDER_ANALYTICS_DISABLE": "true",
        "AIDER_CHECK_UPDATE": "false",
    }
    passed = [a for name in env if name != "PATH" for a in ("--pass-env", name)]
    # the documented upstream, pointed at the chat server here; the key is the worker's alone
    upstream = gateway.group(1).replace("https://api.openai.com", f"http://127.0.0.1:{chat.port}")
    env["OPENAI_API_KEY"] = "sk-test-worker-key-0123456789"
    res = run_genjob_process(
        "work", "--generator", spec.group(1), "--signing-key", str(key), "--once", "--json",
        *upstream.split(" ", 1), "--timeout", "240s", *passed, cwd=repo, env=env, timeout=300,
    )  # fmt: skip
    assert res.code == 0, res.err
    job = json.loads(res.out)["jobs"][0]
    assert job["result"] == "ok", job
    assert chat.requests, "aider never asked the model"
    assert set(chat.auth) == {"Bearer sk-test-worker-key-0123456789"}  # the gateway added the worker's key
    envelope = json.loads(git(repo, "show", f"refs/genjob/jobs/{k}:receipt.json"))
    predicate = json.loads(base64.b64decode(envelope["payload"]))["predicate"]
    assert predicate["model"]["usage"]["calls"] == predicate["model"]["usage"]["sent"] == len(chat.requests)
    assert "sk-test-worker-key" not in json.dumps(predicate)
    assert ".aider.chat.history.md" in predicate["ignored"]  # aider's own file: named, never an output
    assert list(predicate["outputs"]) == ["src/user.py"]
    assert run_genjob("verify", k, cwd=repo).code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert git(repo, "show", "HEAD:src/user.py") == NEW
    assert "Assisted-by: exec:aider" in git(repo, "log", "-1", "--format=%B")
    assert run_genjob("audit", cwd=repo).code == 0
