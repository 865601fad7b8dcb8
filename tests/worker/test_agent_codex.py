"""Codex CLI, the real CLI (npm `@openai/codex`, pinned in .ci/run), as an exec generator through
the worker's gateway (SPEC §12.1): docs/generators.md's recipe verbatim, sandboxed, against a stub
OpenAI Responses API on 127.0.0.1 that scripts an apply_patch of src/user.py (through Codex's
`exec` tool, the one this version offers) and then a final message, streamed. The provider sees
the worker's key on every call, the agent never holds it, the receipt's usage is what the stub
served, and the edit lands."""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.agents import kill_while_held, receipt_predicate
from tests.helpers.common import REPO_ROOT, git, run_genjob, run_genjob_process, setup_worker, submit_key

VERSION = "0.171.0"
KEY = "sk-proj-worker-key-0123456789abcdef"
NEW = "def fetch_user(uid, timeout=1):\n    return uid\n"
PATCH = (
    "*** Begin Patch\n*** Update File: src/user.py\n@@\n"
    "-def fetch_user(uid):\n-    return {'id': uid}\n+def fetch_user(uid, timeout=1):\n+    return uid\n"
    "*** End Patch\n"
)
USAGE_IN, USAGE_OUT = 10, 5  # per call, as response.completed reports them


def _codex() -> str:
    found = REPO_ROOT / ".ci" / "npm" / "node_modules" / ".bin" / "codex"
    if not found.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f".ci/run installs @openai/codex@{VERSION} into .ci/npm; it is missing")
        pytest.skip(f"Codex is not installed: npm install --prefix .ci/npm @openai/codex@{VERSION}")
    return str(found)


class Provider:
    """The OpenAI Responses API, streamed: the first call of a turn gets an `exec` tool call that
    applies PATCH (a path relative to the turn's working directory), the call carrying its output
    gets "done"."""

    def __init__(self, hold_at: int | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.hold_at, self.held, self.release = hold_at, threading.Event(), threading.Event()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                provider.requests.append({"path": self.path, "key": self._key(), "body": None})
                self._empty(404)

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                provider.requests.append({"path": self.path, "key": self._key(), "body": body})
                if len(provider.requests) == provider.hold_at:  # in flight when the test kills the worker
                    provider.held.set()
                    provider.release.wait(60)
                    return
                if not self.path.startswith("/v1/responses"):
                    self._empty(404)
                    return
                kinds = [item.get("type") for item in body.get("input") or [] if isinstance(item, dict)]
                if "custom_tool_call_output" in kinds:
                    done = [{"type": "output_text", "text": "done", "annotations": []}]
                    item: dict[str, Any] = {"type": "message", "role": "assistant", "id": "msg_" + uuid.uuid4().hex,
                                            "content": done}  # fmt: skip
                else:
                    item = {"type": "custom_tool_call", "id": "ctc_" + uuid.uuid4().hex, "name": "exec",
                            "call_id": "call_" + uuid.uuid4().hex[:24],
                            "input": f"text(await tools.apply_patch({json.dumps(PATCH)}));"}  # fmt: skip
                self._stream(item)

            def _key(self) -> str | None:
                auth = self.headers.get("authorization")
                return auth.removeprefix("Bearer ") if auth else None

            def _empty(self, status: int) -> None:
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def _stream(self, item: dict[str, Any]) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True

                def ev(data: dict[str, Any]) -> None:
                    self.wfile.write(f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()

                rid = "resp_" + uuid.uuid4().hex
                ev({"type": "response.created", "response": {"id": rid, "status": "in_progress"}})
                ev({"type": "response.output_item.added", "output_index": 0, "item": item})
                ev({"type": "response.output_item.done", "output_index": 0, "item": item})
                ev({"type": "response.completed", "response": {"id": rid, "status": "completed", "usage": {
                    "input_tokens": USAGE_IN, "input_tokens_details": {"cached_tokens": 0},
                    "output_tokens": USAGE_OUT, "output_tokens_details": {"reasoning_tokens": 0},
                    "total_tokens": USAGE_IN + USAGE_OUT}}})  # fmt: skip

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def _recipe(repo: Path, provider: Provider) -> tuple[list[str], dict[str, str], Path]:
    """The work command line docs/generators.md gives, pointed at `provider`, and its environment."""
    codex = _codex()
    docs = (REPO_ROOT / "docs" / "generators.md").read_text()
    spec = re.search(r"`(exec:codex [^`]+)`", docs)
    gateway = re.search(r"`exec:codex [^`]+`\s+with `(--gateway openai=[^`]+)`", docs)
    assert spec is not None and gateway is not None, "the Codex recipe left docs/generators.md"
    key = setup_worker(repo)
    upstream = gateway.group(1).replace("https://api.openai.com", provider.url)
    env = {"PATH": f"{os.path.dirname(codex)}:{os.environ['PATH']}", "OPENAI_API_KEY": KEY}
    argv = ["work", "--generator", spec.group(1), "--signing-key", str(key), "--once", "--json", "--strict",
            *upstream.split(" ", 1), "--timeout", "60s",
            "--sandbox-ro", str(Path(codex).parent.parent)]  # fmt: skip  # the recipe's: the node_modules holding it
    return argv, env, key


def test_the_documented_codex_recipe_edits_through_the_gateway(repo: Path) -> None:
    provider = Provider()
    argv, env, _ = _recipe(repo, provider)
    k = submit_key(repo, "-m", "Add a timeout parameter to fetch_user", "src/user.py")
    res = run_genjob_process(*argv, cwd=repo, env=env, timeout=180)
    provider.close()
    assert res.code == 0, res.out + res.err + run_genjob("show", k, "--log", cwd=repo).out
    calls = [r for r in provider.requests if r["path"].startswith("/v1/responses")]
    assert len(calls) == 2, provider.requests
    assert {r["key"] for r in provider.requests} == {KEY}  # the gateway added the worker's key, every call
    assert KEY not in json.dumps([r["body"] for r in provider.requests])
    answer = [i for i in calls[1]["body"]["input"] if i.get("type") == "custom_tool_call_output"]
    assert "Script completed" in json.dumps(answer), answer  # Codex applied the patch itself, in the scratch tree
    pred = receipt_predicate(repo, k)
    assert pred["status"] == "ok", pred
    assert pred["model"]["usage"] == {
        "calls": len(calls), "sent": len(calls), "replayed": 0,
        "input_tokens": USAGE_IN * len(calls), "output_tokens": USAGE_OUT * len(calls),
    }  # fmt: skip
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert git(repo, "show", "HEAD:src/user.py") == NEW


def test_codex_killed_mid_session_resumes_from_the_record(repo: Path) -> None:
    """The worker SIGKILLed while Codex's second call is out: the job is unknown, recovery sends
    nothing, and the owner's retry replays the first call (same fingerprint in the new attempt,
    though Codex names a new session, thread and turn in it) and sends only the second."""
    provider = Provider(hold_at=2)
    argv, env, _ = _recipe(repo, provider)
    k = submit_key(repo, "-m", "Add a timeout parameter to fetch_user", "src/user.py")
    kill_while_held(repo, k, argv, env, provider.held, provider.release, wait_s=60)
    assert len(provider.requests) == 2
    assert run_genjob("retry", k, cwd=repo).code == 0
    provider.hold_at = None
    res = run_genjob_process(*argv, cwd=repo, env=env, timeout=180)
    provider.close()
    assert res.code == 0, res.out + res.err + run_genjob("show", k, "--log", cwd=repo).out
    usage = receipt_predicate(repo, k)["model"]["usage"]
    assert usage == {"calls": 2, "sent": 1, "replayed": 1,
                     "input_tokens": USAGE_IN * 2, "output_tokens": USAGE_OUT * 2}, usage  # fmt: skip
    assert len(provider.requests) == 3
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert git(repo, "show", "HEAD:src/user.py") == NEW
