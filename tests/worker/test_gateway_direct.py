"""Red team: the http: and openai: generators through the gateway's direct door (SPEC §7, §12.1)."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.common import git, run_genjob, setup_worker, submit_key
from tests.helpers.stubserver import Stub

# Not a pattern the secret scan knows (a local server's key): only the worker knows it is its own.
KEY = "local-model-key-Zq81pX"


def _work(repo: Path, key: Path, spec: str) -> dict:  # type: ignore[type-arg]
    res = run_genjob("work", "--generator", spec, "--signing-key", str(key), "--json", "--once", cwd=repo)
    return json.loads(res.out)  # type: ignore[no-any-return]


def _everything(repo: Path) -> str:
    """Every object git holds, as text, and the gateway's files: where a key must never be."""
    raw = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True, check=True
    ).stdout
    out = raw.decode("utf-8", "replace")
    for path in (repo / ".git" / "genjob").rglob("*"):
        if path.is_file():
            out += path.read_text("utf-8", "replace")
    return out


def _predicate(repo: Path, k: str) -> dict:  # type: ignore[type-arg]
    raw = git(repo, "show", f"refs/genjob/jobs/{k}:receipt.json")
    return json.loads(base64.b64decode(json.loads(raw)["payload"]))["predicate"]  # type: ignore[no-any-return]


def test_an_error_answer_echoing_the_workers_key_never_reaches_the_job(
    repo: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that answers 401 with the key it was sent: the attempt's reason (pushed with the
    job) names the error, never the key."""
    monkeypatch.setenv("GENJOB_API_KEY", KEY)
    key = setup_worker(repo)
    submit_key(repo, "-m", "rewrite", "src/user.py")
    stub.mode = "status:401"
    stub.error = json.dumps({"error": f"invalid api key {KEY}"}).encode()
    _work(repo, key, f"openai:{stub.url}/v1#tiny")
    assert stub.headers[0]["Authorization"] == f"Bearer {KEY}"
    assert KEY not in _everything(repo)


def test_an_answer_echoing_the_workers_key_is_never_recorded(
    repo: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The gateway's HTTP door never records an answer that holds the worker's key; the direct
    door of the openai: generator must not either (the replay cache is shared through git)."""
    monkeypatch.setenv("GENJOB_API_KEY", KEY)
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "rewrite", "src/user.py")
    stub.answer = f"TOKEN = '{KEY}'\n"
    _work(repo, key, f"openai:{stub.url}/v1#tiny")
    assert KEY not in _everything(repo)
    assert _predicate(repo, k)["status"] == "aborted"


def test_the_json_object_fallbacks_first_call_says_its_error_status(repo: Path, stub: Stub) -> None:
    """The first request of the fallback answered 500 (json_schema unsupported): the receipt's
    call says `error 500`, as the gateway's HTTP door journals it, not `failed`."""
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "two files", "src/user.py", "--create", "src/b.py")
    stub.mode = "reject_json_schema"
    stub.answer = json.dumps({"src/user.py": "x = 1\n", "src/b.py": "b = 1\n"})
    _work(repo, key, f"openai:{stub.url}/v1#tiny")
    calls = _predicate(repo, k)["model"]["calls"]
    assert [c["status"] for c in calls] == ["error 500", "ok"], calls


class _Redirecting:
    """A server on 127.0.0.1 answering every POST `status` with a Location on another origin
    (`target`, a second server on another port), which records whatever reaches it."""

    def __init__(self, status: int) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        from threading import Thread

        self.reached: list[tuple[str, str, str]] = []  # (method, path, authorization) at the target
        box = self

        class Target(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                box.reached.append((self.command, self.path, self.headers.get("authorization", "")))
                body = json.dumps({"choices": [{"message": {"content": "STOLEN"}, "finish_reason": "stop"}]})
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body.encode())

            do_GET = do_POST = _any

        class Redirect(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(status)
                self.send_header("location", f"{box.target}/steal")
                self.send_header("content-length", "0")
                self.end_headers()

        self.servers = [ThreadingHTTPServer(("127.0.0.1", 0), h) for h in (Target, Redirect)]
        for s in self.servers:
            Thread(target=s.serve_forever, daemon=True).start()
        self.target, self.url = (f"http://127.0.0.1:{s.server_address[1]}" for s in self.servers)

    def close(self) -> None:
        for s in self.servers:
            s.shutdown()
            s.server_close()


@pytest.mark.parametrize("status", [307, 302, 303, 308])
def test_a_redirect_is_never_followed_by_the_direct_door_or_ask(
    repo: Path, monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    """Red team (gateway leftovers 5): SPEC §12.1 sends a model call, key and all, to the
    upstream the job names. A redirect to another origin is refused with its reason (the
    Location, not followed), the call journaled `error N`, nothing recorded, and the target
    never reached: by the openai: generator's direct door, and by `ask`'s POST (urllib followed
    a 302 or 303 as a GET to wherever it pointed, the Authorization header with it)."""
    from git_genjob.documents.errors import HttpStatusError
    from git_genjob.replay.web import api_headers, post_json
    from git_genjob.storage.store import Store
    from git_genjob.worker.gateway.calls import Session
    from git_genjob.worker.gateway.direct import Direct, openai_upstream

    monkeypatch.setenv("GENJOB_API_KEY", KEY)
    server = _Redirecting(status)
    session = Session(Store.open(str(repo)), "job-1", 1, False, None)
    door = Direct(session, openai_upstream(server.url + "/v1"), 10.0)
    doc = {"model": "m", "messages": []}
    with pytest.raises(HttpStatusError) as direct:
        door.post("/chat/completions", doc, "f" * 64, 10.0)
    door.close()
    with pytest.raises(HttpStatusError) as asked:
        post_json(server.url + "/v1/chat/completions", doc, 10.0, api_headers())
    server.close()
    assert server.reached == []
    for err in (direct.value, asked.value):
        assert err.status == status and f"a redirect to {server.target}/steal, not followed" in err.message
        assert err.hint is not None and "never follows" in err.hint
    assert session.model_record()["calls"][0]["status"] == f"error {status}"
