"""docs/generators.md's aider recipe, verbatim, with aider-chat from PyPI, sandboxed, against a
chat-completions server on 127.0.0.1 (issue 22 item 13): with the documented `[scratch] ignore`
line its receipt is `ok` (aider's own chat history named under `ignored`), and the job applies.
Each session makes two calls through the gateway (a broken answer, then the fix for aider's lint
errors): usage is what the server served, and a worker killed during the second call leaves a
job whose retry replays the first and sends only the second (issue 33)."""

from __future__ import annotations

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

from tests.helpers.agents import kill_while_held, receipt_predicate
from tests.helpers.common import REPO_ROOT, git, run_genjob, run_genjob_process, setup_worker, submit_key

NEW = "def fetch_user(uid, timeout=1):\n    return {'id': uid}\n"
# aider's "whole" edit format: the file name, then the whole new file in a fence. The first
# answer does not compile: aider's lint (on by default) sends its errors back, and the second
# answer fixes them, so that every session makes two calls.
BROKEN = f"src/user.py\n```\n{NEW.replace('):', ')')}```\n"
ANSWER = f"src/user.py\n```\n{NEW}```\n"
USAGE = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}


def _aider() -> str | None:
    """aider on PATH, or in the agents venv .ci/model-setup makes inside the project's venv."""
    beside = Path(sys.prefix) / "agents" / "bin" / "aider"
    return shutil.which("aider") or (str(beside) if beside.exists() else None)


class ChatServer:
    """OpenAI-style chat completions, streamed (server-sent events) as aider asks by default."""

    def __init__(self, hold_at: int | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str] = []
        self.hold_at = hold_at  # the call held open until `release` (the test kills the worker meanwhile)
        self.held = threading.Event()
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.auth.append(self.headers.get("Authorization", ""))
                if len(server.requests) == server.hold_at:
                    server.held.set()
                    server.release.wait(60)
                    return
                # the fix once aider has sent the broken answer back with its lint errors
                last = str(body.get("messages", [{}])[-1].get("content", ""))
                fixing = "# Fix any errors below" in last  # aider's linter.py
                answer = ANSWER if fixing else BROKEN
                head = {"id": "c1", "created": 0, "model": body.get("model")}
                if body.get("stream"):
                    chunks = [
                        {
                            **head,
                            "object": "chat.completion.chunk",
                            "choices": [{"index": 0, "delta": d, "finish_reason": f}],
                        }
                        for d, f in (({"role": "assistant", "content": answer}, None), ({}, "stop"))
                    ]
                    chunks.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": USAGE})
                    data = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
                    kind = "text/event-stream"
                else:
                    message = {"role": "assistant", "content": answer}
                    data = json.dumps(
                        {
                            **head,
                            "object": "chat.completion",
                            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                            "usage": USAGE,
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


KEY = "sk-test-worker-key-0123456789"


def _recipe(repo: Path, chat: ChatServer) -> tuple[list[str], dict[str, str]]:
    """The work command line docs/generators.md gives for aider, pointed at `chat`, and its
    environment (the key is the worker's alone), with the documented `[scratch] ignore` line."""
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
    # the documented upstream, pointed at the chat server here
    upstream = gateway.group(1).replace("https://api.openai.com", f"http://127.0.0.1:{chat.port}")
    env["OPENAI_API_KEY"] = KEY
    argv = ["work", "--generator", spec.group(1), "--signing-key", str(key), "--once", "--json",
            *upstream.split(" ", 1), "--timeout", "240s", *passed]  # fmt: skip
    return argv, env


def test_documented_aider_recipe_ends_in_a_verified_apply(repo: Path, chat: ChatServer) -> None:
    argv, env = _recipe(repo, chat)
    k = submit_key(repo, "-m", "Add a timeout parameter to fetch_user", "src/user.py")
    res = run_genjob_process(*argv, cwd=repo, env=env, timeout=300)
    assert res.code == 0, res.err
    job = json.loads(res.out)["jobs"][0]
    assert job["result"] == "ok", job
    assert len(chat.requests) == 2, "aider did not send its lint errors back"  # the broken answer, then the fix
    assert set(chat.auth) == {f"Bearer {KEY}"}  # the gateway added the worker's key, every call
    predicate = receipt_predicate(repo, k)
    assert predicate["model"]["usage"] == {
        "calls": 2, "sent": 2, "replayed": 0,
        "input_tokens": 2 * USAGE["prompt_tokens"], "output_tokens": 2 * USAGE["completion_tokens"],
    }  # fmt: skip  # what the server served, streamed usage included
    assert "sk-test-worker-key" not in json.dumps(predicate)
    assert ".aider.chat.history.md" in predicate["ignored"]  # aider's own file: named, never an output
    assert list(predicate["outputs"]) == ["src/user.py"]
    assert run_genjob("verify", k, cwd=repo).code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert git(repo, "show", "HEAD:src/user.py") == NEW
    assert "Assisted-by: exec:aider" in git(repo, "log", "-1", "--format=%B")
    assert run_genjob("audit", cwd=repo).code == 0


def test_aider_killed_mid_session_resumes_from_the_record(repo: Path) -> None:
    """The worker SIGKILLed while aider's second call (the lint fix) is out: the job is unknown,
    recovery sends nothing, and the owner's retry replays the first call from the record and
    sends only the second; the edit lands."""
    chat = ChatServer(hold_at=2)
    try:
        argv, env = _recipe(repo, chat)
        k = submit_key(repo, "-m", "Add a timeout parameter to fetch_user", "src/user.py")
        kill_while_held(repo, k, argv, env, chat.held, chat.release)
        assert len(chat.requests) == 2  # recovery resent nothing
        assert run_genjob("retry", k, cwd=repo).code == 0
        chat.hold_at = None
        res = run_genjob_process(*argv, cwd=repo, env=env, timeout=300)
        assert res.code == 0, res.out + res.err
        predicate = receipt_predicate(repo, k)
        assert predicate["status"] == "ok", predicate
        usage = predicate["model"]["usage"]
        assert (usage["calls"], usage["replayed"], usage["sent"]) == (2, 1, 1), usage
        assert len(chat.requests) == 3  # only the call in flight at the kill was sent again
        # the same request, now new work of the retry (aider's lint message names the attempt's scratch tree)
        same = [re.sub(r"genjob-scratch-[^/]+", "SCRATCH", json.dumps(r)) for r in chat.requests[1:]]
        assert same[0] == same[1]
        assert run_genjob("apply", k, cwd=repo).code == 0
        assert git(repo, "show", "HEAD:src/user.py") == NEW
    finally:
        chat.httpd.shutdown()
        chat.httpd.server_close()
