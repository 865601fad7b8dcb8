"""Claude Code, the real CLI (npm `@anthropic-ai/claude-code`, pinned in .ci/run), as an exec
generator through the worker's gateway (SPEC §12.1, issue 33): docs/generators.md's recipe
verbatim, sandboxed, against a stub Anthropic provider on 127.0.0.1 that scripts a Write tool
call and then ends the turn, streamed. The provider sees the worker's key on every call, the
agent never holds it, the receipt's usage is what the stub served, and the edit lands."""

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

VERSION = "2.1.332"
KEY = "sk-ant-worker-key-0123456789abcdef"
NEW = "def fetch_user(uid, timeout=1):\n    return uid\n"
USAGE_IN, USAGE_OUT = 10, 5  # per call, as message_start and message_delta report them


def _claude() -> str:
    found = REPO_ROOT / ".ci" / "npm" / "node_modules" / ".bin" / "claude"
    if not found.exists():
        if os.environ.get("CI") == "true":
            pytest.fail(f".ci/run installs @anthropic-ai/claude-code@{VERSION} into .ci/npm; it is missing")
        pytest.skip(f"Claude Code is not installed: npm install --prefix .ci/npm @anthropic-ai/claude-code@{VERSION}")
    return str(found)


class Provider:
    """The Anthropic Messages API, streamed: the first call of a turn gets a Write of
    src/user.py in the working directory the request names, the call with its result gets
    "done"."""

    def __init__(self, hold_at: int | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.hold_at, self.held, self.release = hold_at, threading.Event(), threading.Event()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
                provider.requests.append({"path": self.path, "key": self.headers.get("x-api-key"), "body": body})
                if len(provider.requests) == provider.hold_at:  # in flight when the test kills the worker
                    provider.held.set()
                    provider.release.wait(60)
                    return
                if not self.path.startswith("/v1/messages"):
                    self.send_response(404)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                text = json.dumps(body)
                where = re.search(r"Primary working directory: ([^\\\\\n\"]+)", text)
                last = (body.get("messages") or [{}])[-1].get("content")
                answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
                if answered or where is None:
                    blocks: list[dict[str, Any]] = [{"type": "text", "text": "done"}]
                    stop = "end_turn"
                else:
                    path = where.group(1).strip() + "/src/user.py"
                    blocks = [{"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24], "name": "Write",
                               "input": {"file_path": path, "content": NEW}}]  # fmt: skip
                    stop = "tool_use"
                self._stream(body.get("model", "claude"), blocks, stop)

            def _stream(self, model: str, blocks: list[dict[str, Any]], stop: str) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True

                def ev(name: str, data: dict[str, Any]) -> None:
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()

                ev("message_start", {"type": "message_start", "message": {
                    "id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant", "model": model,
                    "content": [], "stop_reason": None, "stop_sequence": None,
                    "usage": {"input_tokens": USAGE_IN, "output_tokens": 1}}})  # fmt: skip
                for i, b in enumerate(blocks):
                    if b["type"] == "text":
                        ev("content_block_start", {"type": "content_block_start", "index": i,
                                                   "content_block": {"type": "text", "text": ""}})  # fmt: skip
                        ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "text_delta", "text": b["text"]}})  # fmt: skip
                    else:
                        ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                            "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})  # fmt: skip
                        js = json.dumps(b["input"])
                        for part in (js[: len(js) // 2], js[len(js) // 2 :]):
                            delta = {"type": "input_json_delta", "partial_json": part}
                            ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta})
                    ev("content_block_stop", {"type": "content_block_stop", "index": i})
                ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": USAGE_OUT}})  # fmt: skip
                ev("message_stop", {"type": "message_stop"})

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
    claude = _claude()
    docs = (REPO_ROOT / "docs" / "generators.md").read_text()
    spec = re.search(r"`(exec:claude [^`]+)`", docs)
    gateway = re.search(r"`exec:claude [^`]+`\s+with `(--gateway anthropic=[^`]+)`", docs)
    assert spec is not None and gateway is not None, "the Claude Code recipe left docs/generators.md"
    quiet = re.search(r"Claude Code[^\n]*?: `((?:[A-Z_]+=1 ?)+)`", docs)
    assert quiet is not None, "the recipe's environment line left docs/generators.md"
    key = setup_worker(repo)
    upstream = gateway.group(1).replace("https://api.anthropic.com", provider.url)
    names = [pair.split("=")[0] for pair in quiet.group(1).split()]
    env = {"PATH": f"{os.path.dirname(claude)}:{os.environ['PATH']}", "ANTHROPIC_API_KEY": KEY}
    env |= {name: "1" for name in names}
    passed = [a for name in names for a in ("--pass-env", name)]
    argv = ["work", "--generator", spec.group(1), "--signing-key", str(key), "--once", "--json", "--strict",
            *upstream.split(" ", 1), *passed, "--timeout", "240s",
            "--sandbox-ro", str(Path(claude).parent.parent)]  # fmt: skip  # the recipe's: the node_modules holding it
    return argv, env, key


def test_the_documented_claude_code_recipe_edits_through_the_gateway(repo: Path) -> None:
    provider = Provider()
    argv, env, _ = _recipe(repo, provider)
    k = submit_key(repo, "-m", "Add a timeout parameter to fetch_user", "src/user.py")
    res = run_genjob_process(*argv, cwd=repo, env=env, timeout=300)
    provider.close()
    assert res.code == 0, res.out + res.err
    calls = [r for r in provider.requests if r["path"].startswith("/v1/messages")]
    assert len(calls) >= 2, provider.requests
    assert {r["key"] for r in provider.requests} == {KEY}  # the gateway added the worker's key, every call
    assert KEY not in json.dumps([r["body"] for r in provider.requests])
    pred = receipt_predicate(repo, k)
    assert pred["status"] == "ok", pred
    assert pred["model"]["usage"] == {
        "calls": len(calls), "sent": len(calls), "replayed": 0,
        "input_tokens": USAGE_IN * len(calls), "output_tokens": USAGE_OUT * len(calls),
    }  # fmt: skip
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert git(repo, "show", "HEAD:src/user.py") == NEW


def test_claude_code_killed_mid_session_resumes_from_the_record(repo: Path) -> None:
    """The worker SIGKILLed while Claude Code's second call is out: the job is unknown, recovery
    sends nothing, and the owner's retry replays the first call (same fingerprint in the new
    attempt) and sends only the second."""
    provider = Provider(hold_at=2)
    argv, env, _ = _recipe(repo, provider)
    k = submit_key(repo, "-m", "Add a timeout parameter to fetch_user", "src/user.py")
    kill_while_held(repo, k, argv, env, provider.held, provider.release, wait_s=120)
    assert len(provider.requests) == 2
    assert run_genjob("retry", k, cwd=repo).code == 0
    provider.hold_at = None
    res = run_genjob_process(*argv, cwd=repo, env=env, timeout=300)
    provider.close()
    assert res.code == 0, res.out + res.err
    usage = receipt_predicate(repo, k)["model"]["usage"]
    assert usage["replayed"] == 1 and usage["sent"] == usage["calls"] - 1, usage
    assert len(provider.requests) == 2 + usage["sent"]
    assert run_genjob("apply", k, cwd=repo).code == 0
