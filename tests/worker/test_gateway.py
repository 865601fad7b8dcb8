"""The gateway (SPEC §12.1): key out of sight, identity journaled before the send, replay, usage, budget."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import socket
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_genjob.storage.store import Store
from git_genjob.worker.gateway.calls import Session
from git_genjob.worker.gateway.dialects import parse_gateway
from git_genjob.worker.gateway.server import Gateway
from tests.helpers.stubprovider import Stub

KEY = "sk-real-worker-key-0123456789"


# The agent's side reaches the gateway on 127.0.0.1 directly, whatever proxy a test sets for the
# worker (urlopen's shared opener keeps the proxies of the environment it first saw: a test run
# alone went through the dead proxy it set for the gateway's upstream)
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post(url: str, token: str, doc: dict[str, Any], anthropic: bool = False) -> tuple[int, bytes]:
    headers = {"content-type": "application/json"}
    headers.update({"x-api-key": token} if anthropic else {"authorization": f"Bearer {token}"})
    req = urllib.request.Request(url, json.dumps(doc).encode(), headers)
    try:
        with DIRECT.open(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def attempt(store: Store, stub_url: str, n: int, monkeypatch: pytest.MonkeyPatch, **kw: Any) -> tuple[Gateway, str]:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    session = Session(store, "job-1", n, kw.pop("refresh", False), None, **kw)
    gw = Gateway([parse_gateway(f"openai={stub_url}"), parse_gateway(f"anthropic={stub_url}")], session)
    return gw, f"http://127.0.0.1:{gw.listen_tcp()}"


def session_calls(base: str, env: dict[str, str]) -> list[tuple[int, bytes]]:
    tok = env["OPENAI_API_KEY"]
    return [
        post(
            env["OPENAI_BASE_URL"] + "/chat/completions",
            tok,
            {"model": "m", "messages": [{"role": "user", "content": "x"}]},
        ),
        post(env["OPENAI_BASE_URL"] + "/chat/completions", tok, {"model": "m", "stream": True, "messages": []}),
        post(env["ANTHROPIC_BASE_URL"] + "/v1/messages", tok, {"model": "c", "stream": True, "messages": []}, True),
    ]


def test_calls_are_journaled_metered_and_replayed(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stub = Stub()
    store = Store.open(str(repo))
    gw, base = attempt(store, stub.url, 1, monkeypatch)
    env = gw.env(base)
    assert KEY not in json.dumps(env) and env["OPENAI_BASE_URL"].endswith("/v1")
    answers = session_calls(base, env)
    gw.close()
    assert [s for s, _ in answers] == [200, 200, 200]
    assert b"hel" in answers[1][1] and b"tool_calls" in answers[1][1]
    assert len(stub.requests) == 3 and all(r["auth"] in (KEY, f"Bearer {KEY}") for r in stub.requests)
    model = gw.session.model_record()
    assert model["usage"] == {"calls": 3, "sent": 3, "replayed": 0, "input_tokens": 41, "output_tokens": 21}
    journal = Path(gw.session.journal).read_text()
    rows = [json.loads(line) for line in journal.splitlines()]
    assert KEY not in journal and len(rows) == 7  # sending, then ok, per call; then the fold's
    assert [r["status"] for r in rows[:6]] == ["sending", "ok"] * 3 and "folded" in rows[6]
    # The next attempt of the job replays every call: nothing is sent, the same bytes come back.
    gw2, base2 = attempt(store, stub.url, 2, monkeypatch)
    again = session_calls(base2, gw2.env(base2))
    gw2.close()
    assert again == answers and len(stub.requests) == 3
    assert gw2.session.model_record()["usage"]["replayed"] == 3
    stub.close()


def test_bad_token_unknown_path_budget_and_refused_upstream(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stub = Stub()
    store = Store.open(str(repo))
    gw, base = attempt(store, stub.url, 1, monkeypatch, max_calls=1)
    env = gw.env(base)
    tok = env["OPENAI_API_KEY"]
    assert post(env["OPENAI_BASE_URL"] + "/chat/completions", KEY, {"model": "m"})[0] == 401
    assert post(base + "/openai/v1/nowhere", tok, {"model": "m"})[0] == 404
    req = urllib.request.Request(
        env["OPENAI_BASE_URL"] + "/chat/completions", b"{not json", {"authorization": f"Bearer {tok}"}
    )
    with pytest.raises(urllib.error.HTTPError) as bad:
        urllib.request.urlopen(req, timeout=10)
    assert bad.value.code == 400 and stub.requests == []
    assert post(env["OPENAI_BASE_URL"] + "/chat/completions", tok, {"model": "m"})[0] == 200
    status, body = post(env["OPENAI_BASE_URL"] + "/chat/completions", tok, {"model": "m", "n": 2})
    assert status == 429 and b"max_calls" in body and len(stub.requests) == 1
    assert gw.session.model_record()["budget"] == {"exceeded": "max_calls", "limit": 1}
    gw.close()
    stub.close()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    gw, base = attempt(store, dead, 3, monkeypatch)
    env = gw.env(base)
    status, _ = post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], {"model": "z"})
    gw.close()
    assert status == 502 and gw.session.model_record()["calls"][0]["status"] == "failed"
    assert os.path.exists(gw.session.journal)


AGENT = """import json, os, urllib.request
base, tok = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
for i in range(2):
    req = urllib.request.Request(base + "/chat/completions", json.dumps({"model": "m", "messages": [i]}).encode(),
                                 {"authorization": "Bearer " + tok, "content-type": "application/json"})
    urllib.request.urlopen(req).read()
open("out.txt", "w").write(open("/proc/self/environ", "rb").read().decode("latin-1").replace(chr(0), chr(10)))
"""


@pytest.mark.parametrize("sandbox", ["none", "bwrap", "landlock"])
def test_work_through_the_gateway_receipt_has_usage_and_no_key(
    repo: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    from tests.helpers.common import run_genjob, setup_worker, submit_key

    stub = Stub()
    key = setup_worker(repo)
    job = submit_key(repo, "-m", "call twice", "--create", "out.txt")
    agent = repo.parent / "agent.py"
    agent.write_text(AGENT)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    gen = ("--generator", f"exec:python3 {agent}", "--signing-key", str(key), "--gateway", f"openai={stub.url}")
    refused = run_genjob("work", *gen, "--pass-env", "OPENAI_API_KEY", "--once", cwd=repo)
    assert refused.code == 2 and "OPENAI_API_KEY" in refused.err
    if sandbox != "none":
        monkeypatch.setenv("GENJOB_SANDBOX", sandbox)
    r = run_genjob("work", *gen, *(["--no-sandbox"] if sandbox == "none" else []), "--once", "--json", cwd=repo)
    assert r.code == 0, r.err
    assert len(stub.requests) == 2 and all(x["auth"] == f"Bearer {KEY}" for x in stub.requests)
    shown = json.loads(run_genjob("show", job, "--json", cwd=repo).out)
    text = json.dumps(shown)
    at = text.find(KEY)
    assert at < 0, text[max(0, at - 300) : at + 50]
    import base64

    pred = json.loads(base64.b64decode(shown["receipt"]["payload"]))["predicate"]
    assert pred["status"] == "ok" and pred["model"]["usage"] == {
        "calls": 2, "sent": 2, "replayed": 0, "input_tokens": 20, "output_tokens": 10
    }  # fmt: skip
    stub.close()


BUDGETED = """import json, os, urllib.error, urllib.request
base, tok = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
seen = []
for i in range(2):
    req = urllib.request.Request(base + "/chat/completions", json.dumps({"model": "m", "messages": [i]}).encode(),
                                 {"authorization": "Bearer " + tok, "content-type": "application/json"})
    try:
        seen.append(str(urllib.request.urlopen(req).status))
    except urllib.error.HTTPError as exc:
        seen.append(f"{exc.code} {json.load(exc)['error']['message']}")
open("out.txt", "w").write("\\n".join(seen) + "\\n")
"""


def test_the_committed_config_names_the_upstream_and_the_budget(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`[gateway.NAME]` and `[policy] max_calls` in .genjob/config.toml (SPEC §12.1): the worker's
    exec generator reaches the upstream with no --gateway, and the call past the budget is a 429
    that is never sent; an upstream that would carry the key in the clear is refused before a claim."""
    from tests.helpers.common import git, refs, run_genjob, setup_worker, submit_key

    stub = Stub()
    key = setup_worker(repo)
    config = repo / ".genjob" / "config.toml"
    text = f'[policy]\nmax_calls = 1\n\n[gateway.openai]\nupstream = "{stub.url}"\n'
    config.write_text(text)
    git(repo, "add", ".genjob/config.toml")
    git(repo, "commit", "-q", "-m", "route model calls through the gateway")
    job = submit_key(repo, "-m", "call twice", "--create", "out.txt")
    agent = repo.parent / "budgeted.py"
    agent.write_text(BUDGETED)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    gen = ("--generator", f"exec:python3 {agent}", "--signing-key", str(key), "--no-sandbox", "--once")
    r = run_genjob("work", *gen, "--json", cwd=repo)
    assert r.code == 0, r.err
    assert len(stub.requests) == 1 and stub.requests[0]["auth"] == f"Bearer {KEY}"
    import base64

    shown = json.loads(run_genjob("show", job, "--json", cwd=repo).out)
    pred = json.loads(base64.b64decode(shown["receipt"]["payload"]))["predicate"]
    assert pred["status"] == "ok" and pred["model"]["budget"] == {"exceeded": "max_calls", "limit": 1}
    assert pred["model"]["usage"]["sent"] == 1
    assert run_genjob("apply", job, cwd=repo).code == 0
    landed = (repo / "out.txt").read_text().splitlines()
    assert landed[0] == "200" and landed[1].startswith("429 the job's budget max_calls = 1")
    stub.close()
    # the key would cross a network in the clear: refused, nothing claimed
    submit_key(repo, "-m", "another", "--create", "b.txt")
    config.write_text(text.replace(stub.url, "http://models.example.com"))
    git(repo, "commit", "-q", "-am", "an upstream in the clear")
    before = refs(repo)
    r = run_genjob("work", *gen, cwd=repo)
    assert r.code == 2 and "must be an https:// URL" in r.err and refs(repo) == before


THREE_CALLS = """import json, os, sys, urllib.request
base, tok = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
for i in range(3):
    req = urllib.request.Request(base + "/chat/completions", json.dumps({"model": "m", "messages": [i]}).encode(),
                                 {"authorization": "Bearer " + tok, "content-type": "application/json"})
    urllib.request.urlopen(req, timeout=90).read()
open("out.txt", "w").write("three answers\\n")
"""


def test_a_worker_killed_mid_session_is_unknown_and_the_retry_sends_only_the_rest(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SPEC §12.1 replay and resume: a worker SIGKILLed while call 3 of 3 is out leaves the job
    `unknown` and recovery resends nothing; `show --calls` reads the journal (two answered, one
    unknown); the owner's retry replays the two answered calls and sends only the third; a second
    retry replays all three (0 upstream requests); the edit lands with apply."""
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers.common import run_genjob, setup_worker, submit_key

    stub = Stub(hold_at=3)
    key = setup_worker(repo)
    job = submit_key(repo, "-m", "call three times", "--create", "out.txt")
    agent = repo.parent / "three.py"
    agent.write_text(THREE_CALLS)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    gen = ["--generator", f"exec:python3 {agent}", "--signing-key", str(key), "--gateway", f"openai={stub.url}"]
    gen += ["--no-sandbox", "--once", "--lease", "1s"]
    worker = subprocess.Popen(
        [sys.executable, "-m", "git_genjob", "work", *gen], cwd=repo, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert stub.held.wait(60), "the third call never reached the upstream"
    finally:
        os.killpg(worker.pid, signal.SIGKILL)  # the worker and the agent it started
        worker.wait(30)
        stub.release.set()
    assert len(stub.requests) == 3
    time.sleep(1.2)  # past the lease
    assert run_genjob("recover", cwd=repo).code == 0
    assert json.loads(run_genjob("status", job, "--json", cwd=repo).out)["state"] == "unknown"
    assert len(stub.requests) == 3  # recovery sent nothing
    calls = json.loads(run_genjob("show", job, "--calls", "--json", cwd=repo).out)
    assert calls["source"] == "journal"
    assert [(c["n"], c["status"]) for c in calls["calls"]] == [(1, "ok"), (2, "ok"), (3, "unknown")]
    assert calls["calls"][0]["answer"] and "hello" in calls["calls"][0]["answer"]
    human = run_genjob("show", job, "--calls", cwd=repo).out
    assert "call 3  openai m  unknown, sent" in human and KEY not in human
    # the two answers are in the journal's write-ahead rows (small: the rows carry them), not yet in the cache
    assert json.loads(run_genjob("cache", "ls", "--json", cwd=repo).out) == []
    journal = repo / f".git/genjob/gateway/{job}.jsonl"
    assert _waiting(journal) == 2
    assert run_genjob("retry", job, cwd=repo).code == 0
    r = run_genjob("work", *gen[:-2], "--json", cwd=repo)
    assert r.code == 0, r.err
    assert len(stub.requests) == 4  # n - k: only the call in flight at the kill is sent again
    assert len(json.loads(run_genjob("cache", "ls", "--json", cwd=repo).out)) == 3  # folded, and the third
    assert _waiting(journal) == 0 and os.listdir(repo / ".git/genjob/gateway/answers") == []
    shown = run_genjob("show", job, cwd=repo).out
    assert "model    3 calls (1 sent, 2 replayed), 30 in / 15 out tokens" in shown, shown
    doc = json.loads(run_genjob("show", job, "--calls", "--json", cwd=repo).out)
    assert doc["source"] == "receipt" and [c["replayed"] for c in doc["calls"]] == [True, True, False]
    assert KEY not in json.dumps(doc)
    assert run_genjob("apply", job, cwd=repo).code == 0
    assert (repo / "out.txt").read_text() == "three answers\n"
    totals = "model: 3 calls (1 sent, 2 replayed), 30 in / 15 out tokens"
    log = run_genjob("log", cwd=repo)
    assert log.code == 0 and totals in log.out, log.out
    from tests.helpers.common import git

    assert f"  {totals}\n" in git(repo, "notes", "--ref=genjob", "show", "HEAD")  # the rendered summary
    assert run_genjob("audit", cwd=repo).code == 0 and run_genjob("verify", "HEAD", cwd=repo).code == 0
    honest = git(repo, "notes", "--ref=genjob", "show", "HEAD")
    git(repo, "notes", "--ref=genjob", "add", "-f", "-m", honest.replace(totals, "model: 0 calls"), "HEAD")
    log = run_genjob("log", cwd=repo)  # an attacker who lowers the bill in the note a reviewer reads
    assert log.code == 1 and "forged summary note" in log.out and totals in log.out  # the verified totals
    stub.close()


FAILS_ONCE = """import json, os, sys, urllib.request
base, tok = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
for i in range(2):
    req = urllib.request.Request(base + "/chat/completions", json.dumps({"model": "m", "messages": [i]}).encode(),
                                 {"authorization": "Bearer " + tok, "content-type": "application/json"})
    urllib.request.urlopen(req, timeout=30).read()
flag = sys.argv[1]
if not os.path.exists(flag):
    open(flag, "w").close()
    sys.exit(7)  # an aborted receipt: the owner retries
open("out.txt", "w").write("second time lucky\\n")
"""


def test_the_owners_retry_after_an_aborted_receipt_replays_every_call(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers.common import run_genjob, setup_worker, submit_key

    stub = Stub()
    key = setup_worker(repo)
    job = submit_key(repo, "-m", "fail once", "--create", "out.txt")
    agent, flag = repo.parent / "fails_once.py", repo.parent / "failed-once"
    agent.write_text(FAILS_ONCE)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    gen = ["--generator", f"exec:python3 {agent} {flag}", "--signing-key", str(key), "--gateway", f"openai={stub.url}"]
    gen += ["--no-sandbox", "--once"]
    assert run_genjob("work", *gen, cwd=repo).code == 0
    ended = json.loads(run_genjob("show", job, "--json", cwd=repo).out)["ended"]
    assert ended["status"] == "aborted", ended
    assert len(stub.requests) == 2, ended
    assert run_genjob("retry", job, cwd=repo).code == 0
    assert run_genjob("work", *gen, cwd=repo).code == 0
    assert len(stub.requests) == 2  # every call answered from the record
    assert "model    2 calls (0 sent, 2 replayed), 20 in / 10 out tokens" in run_genjob("show", job, cwd=repo).out
    assert run_genjob("retry", job, "--refresh", cwd=repo).code == 1  # an ok receipt is not retried
    assert run_genjob("apply", job, cwd=repo).code == 0
    assert (repo / "out.txt").read_text() == "second time lucky\n"
    stub.close()


def codex_call(run: str, text: str) -> dict[str, Any]:
    """A Responses call as Codex 0.171 makes it: each run names a new session, thread and turn
    (UUIDs) in `client_metadata` and `prompt_cache_key`, and in the id of every input item."""
    meta = json.dumps({"session_id": run, "turn_id": run, "turn_started_at_unix_ms": int(run[:8], 16)})
    return {
        "model": "m", "stream": False, "prompt_cache_key": run,
        "client_metadata": {"thread_id": run, "x-codex-turn-metadata": meta},
        "input": [{"type": "message", "id": f"msg_{run}", "role": "user",
                   "content": [{"type": "input_text", "text": text}]}],
    }  # fmt: skip


def test_a_codex_retry_replays_though_its_session_ids_are_new(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found running Codex (tests/test_agent_codex.py): its per-run ids made every call of a retry
    a miss, so nothing replayed. They are not part of a call's fingerprint; what it asks still is."""
    stub = Stub()
    store = Store.open(str(repo))
    first = "01a25086-e036-7313-ae87-47a07c80762d"
    gw, base = attempt(store, stub.url, 1, monkeypatch)
    env = gw.env(base)
    answer = post(env["OPENAI_BASE_URL"] + "/responses", env["OPENAI_API_KEY"], codex_call(first, "add a timeout"))
    gw.close()
    second = "01a25086-f92b-7841-8260-b5adab4086b1"
    gw2, base2 = attempt(store, stub.url, 2, monkeypatch)
    env2 = gw2.env(base2)
    again = post(env2["OPENAI_BASE_URL"] + "/responses", env2["OPENAI_API_KEY"], codex_call(second, "add a timeout"))
    gw2.close()
    assert again == answer and len(stub.requests) == 1
    assert gw2.session.model_record()["usage"]["replayed"] == 1
    gw3, base3 = attempt(store, stub.url, 3, monkeypatch)
    env3 = gw3.env(base3)
    post(env3["OPENAI_BASE_URL"] + "/responses", env3["OPENAI_API_KEY"], codex_call(second, "add a retry"))
    gw3.close()
    assert len(stub.requests) == 2 and gw3.session.model_record()["usage"]["replayed"] == 0
    stub.close()


@pytest.mark.parametrize("big", [False, True], ids=["held", "spilled"])
@pytest.mark.parametrize("stream", [False, True])
def test_the_spooled_answer_document_is_the_canonical_one(tmp_path: Path, stream: bool, big: bool) -> None:
    """The answer written chunk by chunk (a multi-byte character split across chunks, quotes,
    control characters, a usage line split too) is byte for byte canonical_bytes of the whole:
    held in memory when small (its journal row carries it, no file made), in a file past
    INLINE_MAX, and no file left once closed."""
    import hashlib

    from git_genjob.documents.canonical import canonical_bytes
    from git_genjob.worker.gateway.spool import INLINE_MAX, Spool

    pad = "ü" * (INLINE_MAX if big else 8)
    body = ('data: {"choices": [{"delta": {"content": "é\\"\\\\\\u0001 ✓ 𝄞' + pad + '"}}]}\n\n'
            'data: {"choices": [], "usage": {"prompt_tokens": 11, "completion_tokens": 7}}\n\n')  # fmt: skip
    if not stream:
        body = json.dumps({"choices": [{"message": {"content": "é\" \\ ✓ 𝄞\u0001" + pad}}],
                           "usage": {"prompt_tokens": 11, "completion_tokens": 7}}, ensure_ascii=False)  # fmt: skip
    data = body.encode("utf-8")
    spool = Spool(str(tmp_path), 1 << 20, "openai", stream)
    for i in range(0, len(data), 3):  # every character split somewhere
        spool.add(data[i : i + 3])
    sha = spool.finish(200, "text/event-stream" if stream else "application/json")
    want = canonical_bytes(
        {
            "status": 200,
            "content_type": "text/event-stream" if stream else "application/json",
            "stream": stream,
            "body": body,
            "input_tokens": 11,
            "output_tokens": 7,
        }  # fmt: skip
    )
    assert sha == hashlib.sha256(want).hexdigest()
    if big:
        assert spool.inline() is None and Path(spool.file()).read_bytes() == want
    else:
        assert spool.inline() == want and list(tmp_path.iterdir()) == []
    assert spool.tokens == (11, 7)
    replayed: list[bytes] = []
    if not stream:
        spool.replay_to(replayed.append)
        assert b"".join(replayed) == data
    spool.close()
    assert list(tmp_path.iterdir()) == []


class Quiet(BaseHTTPRequestHandler):
    """An upstream's handler for these tests: HTTP/1.1, no request log."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def answer_json(self, doc: dict[str, Any]) -> None:
        """A plain 200 answer: `doc` as JSON, in one write after its headers."""
        data = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def serve(handler: type[BaseHTTPRequestHandler]) -> tuple[ThreadingHTTPServer, str]:
    """`handler` served on 127.0.0.1 from a thread of its own, and its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


class Hostile:
    """An upstream on 127.0.0.1 that answers badly, as `mode` says: endless, not UTF-8, a
    credential, stalling mid-answer."""

    def __init__(self, mode: str) -> None:
        import time

        self.mode, self.sent = mode, 0
        hostile = self

        class Handler(Quiet):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    if hostile.mode == "endless":
                        chunk = b"data: " + b"x" * 65536 + b"\n\n"
                        while hostile.sent < 64 << 20:  # bounded: the gateway cuts far sooner
                            self.wfile.write(chunk)
                            hostile.sent += len(chunk)
                    elif hostile.mode == "latin-1":
                        self.wfile.write(b"data: caf\xe9\n\n")
                    elif hostile.mode == "credential":
                        self.wfile.write(b"data: AKIA" + b"ABCDEFGHIJKLMNOP" + b"\n\n")
                    elif hostile.mode == "stall":
                        self.wfile.write(b"data: first\n\n")
                        self.wfile.flush()
                        time.sleep(3)
                except OSError:
                    pass

        self.server, self.url = serve(Handler)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("mode", ["endless", "latin-1", "credential", "stall"])
def test_a_bad_answer_is_cut_and_nothing_is_recorded(repo: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    """SPEC §12.1 bad input: an answer past the limit is cut there (the stream broken, never
    completed), one that is not UTF-8 or looks like a credential is not recorded, a stall past the
    call's deadline is 504 or a cut stream; each call `unknown`, the replay cache unchanged."""
    from tests.helpers.common import refs

    upstream = Hostile(mode)
    store = Store.open(str(repo))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    session = Session(store, "job-bad", 1, False, None)
    gw = Gateway([parse_gateway(f"openai={upstream.url}")], session, deadline_s=1.0, answer_max=1 << 20)
    base = f"http://127.0.0.1:{gw.listen_tcp()}"
    env = gw.env(base)
    before = refs(repo)
    req = urllib.request.Request(
        env["OPENAI_BASE_URL"] + "/chat/completions", json.dumps({"model": "m", "stream": True}).encode(),
        {"authorization": f"Bearer {env['OPENAI_API_KEY']}", "content-type": "application/json"},
    )  # fmt: skip
    completed = True
    try:
        with urllib.request.urlopen(req, timeout=20) as resp:
            resp.read()
    except (urllib.error.URLError, http.client.HTTPException, OSError):
        completed = False  # a cut stream: the agent never sees a whole answer
    gw.close()
    upstream.close()
    assert not completed or mode == "stall"  # a stall past the deadline may end cleanly mid-answer...
    assert session.model_record()["calls"][0]["status"] == "unknown"  # ...but it is never recorded
    assert refs(repo) == before  # no replay entry
    if mode == "endless":
        assert upstream.sent < 16 << 20  # the gateway stopped reading near the limit
    assert not any(Path(session.journal).parent.joinpath("spool").iterdir())  # no spool left


def test_four_concurrent_attempts_lose_and_duplicate_no_record(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four attempts of four jobs on one machine, 25 calls each at once through their own
    gateways: every call journaled once as sent and once as ok, every answer in the replay cache
    (the cache ref's compare-and-swap retried, never lost), and each job's retry replays all."""
    stub = Stub()
    store = Store.open(str(repo))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    gateways = []
    for job in range(4):
        session = Session(store, f"job-{job}", 1, False, None)
        gw = Gateway([parse_gateway(f"openai={stub.url}")], session)
        gateways.append((gw, gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")))
    failures: list[int] = []

    def drive(env: dict[str, str]) -> None:
        for n in range(25):
            status, _ = post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"],
                             {"model": "m", "messages": [{"role": "user", "content": f"{n}"}]})  # fmt: skip
            if status != 200:
                failures.append(status)

    threads = [threading.Thread(target=drive, args=(env,)) for _, env in gateways]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for gw, _ in gateways:
        gw.close()
    assert failures == [] and len(stub.requests) == 100
    from git_genjob.replay.cache import Cache

    fingerprints = set(Cache(Store.open(str(repo))).fingerprints())
    for gw, _ in gateways:
        rows = [json.loads(line) for line in Path(gw.session.journal).read_text().splitlines()]
        assert [r for r in rows if "n" not in r] == [r for r in rows if "folded" in r]
        assert sorted((r["n"], r["status"]) for r in rows if "n" in r) == sorted(
            [(n, "sending") for n in range(1, 26)] + [(n, "ok") for n in range(1, 26)]
        )
        assert {c["fingerprint"] for c in gw.session.model_record()["calls"]} <= fingerprints
    assert len(fingerprints) == 100
    again = Session(store, "job-2", 2, False, None)
    gw = Gateway([parse_gateway(f"openai={stub.url}")], again)
    env = gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")
    drive(env)
    gw.close()
    stub.close()
    assert len(stub.requests) == 100 and again.model_record()["usage"]["replayed"] == 25


class Echo:
    """An upstream that answers 200 with the Authorization header it was sent (a hostile or
    buggy provider echoing the key)."""

    def __init__(self) -> None:
        class Handler(Quiet):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                data = json.dumps({"choices": [{"message": {"content": self.headers.get("authorization", "")}}]})
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

        self.server, self.url = serve(Handler)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_an_answer_echoing_the_workers_key_is_never_recorded_or_shown(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team F2: a custom key matches no credential pattern; the gateway refuses an answer that
    holds the literal key it adds, 502, nothing recorded."""
    from tests.helpers.common import refs

    echo = Echo()
    custom = "local-model-key-NOT-A-KNOWN-PATTERN-1234"
    monkeypatch.setenv("LOCAL_MODEL_KEY", custom)
    store = Store.open(str(repo))
    session = Session(store, "job-echo", 1, False, None)
    gw = Gateway([parse_gateway(f"local={echo.url}", "openai", "LOCAL_MODEL_KEY")], session)
    env = gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")
    before = refs(repo)
    status, body = post(env["OPENAI_BASE_URL"] + "/chat/completions", env["LOCAL_MODEL_KEY"], {"model": "m"})
    gw.close()
    echo.close()
    assert status == 502 and custom.encode() not in body
    assert refs(repo) == before and session.model_record()["calls"][0]["status"] == "unknown"


def test_a_loopback_upstream_is_reached_without_the_environments_proxy(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team F3: HTTP_PROXY would carry a plain-http loopback call, key and all; the gateway
    reaches loopback upstreams directly."""
    stub = Stub()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead_proxy = f"http://127.0.0.1:{s.getsockname()[1]}"
    monkeypatch.setenv("HTTP_PROXY", dead_proxy)
    monkeypatch.setenv("http_proxy", dead_proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    store = Store.open(str(repo))
    gw, base = attempt(store, stub.url, 1, monkeypatch)
    env = gw.env(base)
    status, _ = post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], {"model": "m"})
    gw.close()
    stub.close()
    assert status == 200 and stub.requests[0]["auth"] == f"Bearer {KEY}"


def test_a_damaged_replay_entry_is_a_miss_sent_afresh(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team F4: an answer blob swapped under its name is never served, and the call is sent
    again rather than the agent's connection dropped."""
    import pygit2

    from git_genjob.storage.layout import REPLAYS_REF
    from git_genjob.storage.store import RefUpdate
    from tests.helpers.common import raw_repo

    stub = Stub()
    store = Store.open(str(repo))
    gw, base = attempt(store, stub.url, 1, monkeypatch)
    env = gw.env(base)
    first = post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], {"model": "m"})
    gw.close()
    tip = store.ref_target(REPLAYS_REF)
    assert tip is not None
    raw = raw_repo(store)
    tree = raw[tip].peel(pygit2.Commit).tree
    (fp,) = [c["fingerprint"] for c in gw.session.model_record()["calls"]]
    shard = tree[fp[:2]].peel(pygit2.Tree)
    entry = shard[fp].peel(pygit2.Tree)
    answers = entry["answers"].peel(pygit2.Tree)
    name = next(iter(answers)).name
    a = raw.TreeBuilder(answers)
    a.insert(name, raw.create_blob(b'{"body":"forged"}'), pygit2.enums.FileMode.BLOB)
    e = raw.TreeBuilder(entry)
    e.insert("answers", a.write(), pygit2.enums.FileMode.TREE)
    sh = raw.TreeBuilder(shard)
    sh.insert(fp, e.write(), pygit2.enums.FileMode.TREE)
    root = raw.TreeBuilder(tree)
    root.insert(fp[:2], sh.write(), pygit2.enums.FileMode.TREE)
    forged = store.commit(root.write(), [tip], "swap an answer\n")
    store.update_refs([RefUpdate(REPLAYS_REF, tip, forged)], message="test")
    gw2, base2 = attempt(store, stub.url, 2, monkeypatch)
    env2 = gw2.env(base2)
    again = post(env2["OPENAI_BASE_URL"] + "/chat/completions", env2["OPENAI_API_KEY"], {"model": "m"})
    gw2.close()
    stub.close()
    assert again[0] == 200 and b"forged" not in again[1] and again[1] == first[1]
    assert len(stub.requests) == 2 and gw2.session.model_record()["usage"]["sent"] == 1


@pytest.mark.parametrize("url", ["https://[::1", "https://example.invalid/\u001b[2J", "http://127.0.0.1:9/\u202e"])
def test_an_upstream_url_httpx_cannot_use_is_bad_input(url: str) -> None:
    """Red team F5/F6: refused when parsed (work, doctor), never a crash or raw escapes later."""
    from git_genjob.documents.errors import BadInput

    with pytest.raises(BadInput) as exc:
        parse_gateway(f"openai={url}")
    assert "\u001b" not in exc.value.message and "\u202e" not in exc.value.message


def test_an_error_answer_passes_through_as_it_is_and_dead_spools_are_swept(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upstream's 503 whose page is not UTF-8 reaches the agent byte for byte (only answers
    that are recorded must be text); a spool a killed worker left (its pid gone) is removed."""

    class Handler(Quiet):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(503)
            self.send_header("content-type", "text/html; charset=latin-1")
            self.send_header("content-length", "9")
            self.end_headers()
            self.wfile.write(b"busy caf\xe9")

    server, url = serve(Handler)
    store = Store.open(str(repo))
    spools = Path(store.common_dir) / "genjob" / "gateway" / "spool"
    spools.mkdir(parents=True, exist_ok=True)
    dead = spools / "answer-4194999-left"  # a pid above the kernel's pid_max: not running
    dead.write_bytes(b"partial")
    mine = spools / f"answer-{os.getpid()}-busy"
    mine.write_bytes(b"in use")
    gw, base = attempt(store, url, 1, monkeypatch)
    env = gw.env(base)
    status, body = post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], {"model": "m"})
    gw.close()
    server.shutdown()
    server.server_close()
    assert status == 503 and body == b"busy caf\xe9"
    assert gw.session.model_record()["calls"][0]["status"] == "error 503"
    assert not dead.exists() and mine.exists()


def test_a_huge_model_name_is_cut_in_the_receipt_and_the_transcript(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Red team: an agent's request naming a 1 MB model made the receipt and `show --calls` a
    megabyte long; the name is the generator's word, kept to MODEL_MAX characters."""
    from git_genjob.worker.gateway.calls import MODEL_MAX
    from git_genjob.worker.gateway.transcript import transcript_lines

    stub = Stub()
    gw, base = attempt(Store.open(str(repo)), stub.url, 1, monkeypatch)
    env = gw.env(base)
    status, _ = post(
        env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], {"model": "m" * (1 << 20), "messages": []}
    )
    gw.close()
    stub.close()
    assert status == 200
    (call,) = gw.session.model_record()["calls"]
    assert len(call["model"]) == MODEL_MAX and call["model"].endswith("…")
    lines = transcript_lines(
        {"key": "job-1", "source": "receipt", "calls": [{**call, "request": None, "answer": None}]}
    )
    assert max(len(line) for line in lines) < 400


def _crash(gw: Gateway) -> None:
    """The gateway stops as a SIGKILLed worker's does: no fold, its answers left in the journal."""
    assert gw.server is not None
    gw.server.shutdown()
    gw.server.server_close()
    gw.client.close()


@pytest.mark.parametrize("held", [False, True], ids=["answer-file", "answer-in-row"])
def test_a_journal_row_this_worker_did_not_sign_is_never_folded(
    repo: Path, monkeypatch: pytest.MonkeyPatch, held: bool
) -> None:
    """A leftover is folded into the cache as *this clone's own* event (replay-local: trusted
    here without a signature), so a row must prove it is what this worker recorded: its event
    signed by the session's key, a `recorded` event naming the row's fingerprint and answer. A
    row someone wrote into the journal (an unsigned event of their own and an answer that hashes
    to it, in a file of answers/ or carried in the row) never becomes the answer the job's retry
    replays."""
    import base64
    import hashlib

    from git_genjob.documents.canonical import canonical_bytes, sha256_hex
    from git_genjob.documents.keys import read_signing_key
    from tests.helpers.common import setup_worker

    stub = Stub()
    sign = read_signing_key(str(setup_worker(repo)))
    store = Store.open(str(repo))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    s1 = Session(store, "job-1", 1, False, sign)
    gw = Gateway([parse_gateway(f"openai={stub.url}")], s1)
    env = gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")
    doc = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    status, honest = post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], doc)
    assert status == 200
    _crash(gw)
    rows = [json.loads(line) for line in Path(s1.journal).read_text().splitlines()]
    (row,) = [r for r in rows if "wal" in r]
    answers = repo / ".git/genjob/gateway/answers"
    assert "answer" in row["wal"]  # a small answer: the row carries it, no file in answers/
    answers.mkdir(exist_ok=True)
    kept = [line for line in Path(s1.journal).read_text().splitlines() if "wal" not in json.loads(line)]
    Path(s1.journal).write_text("".join(line + "\n" for line in kept))  # only the forged one is left to fold
    evil = canonical_bytes({"body": '{"choices":[{"message":{"content":"EVIL"}}]}', "content_type": "application/json",
                            "input_tokens": None, "output_tokens": None, "status": 200, "stream": False})  # fmt: skip
    sha = hashlib.sha256(evil).hexdigest()
    event = canonical_bytes(
        {"type": "recorded", "answer": sha, "fp": row["fingerprint"], "time": row["time"], "host": "x"}
    )
    event_id = sha256_hex(event)
    wal = {"event": base64.b64encode(event).decode(), "event_id": event_id}
    if held:
        wal["answer"] = base64.b64encode(evil).decode()
    else:
        (answers / event_id).write_bytes(evil)
    forged = dict(row, answer_sha256=sha, wal=wal)
    with open(s1.journal, "a") as fh:
        fh.write(json.dumps(forged) + "\n")
    s2 = Session(store, "job-1", 2, False, sign)
    gw = Gateway([parse_gateway(f"openai={stub.url}")], s2)
    env = gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")
    status, again = post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], doc)
    gw.close()
    stub.close()
    assert status == 200 and b"EVIL" not in again
    assert s2.model_record()["calls"][0]["replayed"] is False  # nothing this worker recorded: sent afresh


def test_a_request_with_a_lone_surrogate_is_refused_and_the_gateway_serves_on(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON may escape a lone surrogate (`\\ud800`), which no UTF-8 document can hold: the
    request's fingerprint cannot be taken, so the agent gets a 400 naming it (not a dropped
    connection and a traceback on the worker's stderr), nothing is journaled or sent, and the
    next call goes through."""
    stub = Stub()
    store = Store.open(str(repo))
    gw, base = attempt(store, stub.url, 1, monkeypatch)
    env = gw.env(base)
    url = env["OPENAI_BASE_URL"] + "/chat/completions"
    body = b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}'
    req = urllib.request.Request(url, body, {"authorization": f"Bearer {env['OPENAI_API_KEY']}"})
    with pytest.raises(urllib.error.HTTPError) as bad:
        urllib.request.urlopen(req, timeout=10)
    assert bad.value.code == 400 and stub.requests == []
    assert post(url, env["OPENAI_API_KEY"], {"model": "m", "messages": []})[0] == 200
    gw.close()
    stub.close()
    assert [c["n"] for c in gw.session.model_record()["calls"]] == [1]


def test_the_journal_stays_small_whatever_the_agent_sends(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An agent chooses its requests' size (a whole conversation each call, up to REQUEST_MAX):
    the journal, kept for good, read whole by every later Session and by `show --calls`, holds
    each call's identity and its event, never a copy of a request over INLINE_MAX (that waits
    beside the answer in answers/ until the fold; a small one the row carries). A crashed
    attempt's leftovers still fold with their request, and `show --calls` still shows it
    unfolded."""
    from git_genjob.replay.cache import Cache
    from git_genjob.worker.gateway.transcript import transcript

    stub = Stub()
    store = Store.open(str(repo))
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    s1 = Session(store, "job-1", 1, False, None)
    gw = Gateway([parse_gateway(f"openai={stub.url}")], s1)
    env = gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")
    big = "y" * (1 << 20)
    for i in range(3):
        doc = {"model": "m", "messages": [{"role": "user", "content": f"{big} {i}"}]}
        assert post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], doc)[0] == 200
    _crash(gw)
    assert os.path.getsize(s1.journal) < 64 * 1024
    shown = transcript(store, "job-1", None)
    assert shown["source"] == "journal" and all(c["request"] and "yyyy" in c["request"] for c in shown["calls"])
    s2 = Session(store, "job-1", 2, False, None)  # folds the leftovers, requests and all
    assert os.listdir(repo / ".git/genjob/gateway/answers") == []
    cache = Cache(store)
    for c in s1.calls:
        entry = cache.entry(c["fingerprint"])
        assert entry is not None and entry.request is not None and big in entry.request["prompt"]
    assert s2.model_record()["calls"] == []
    stub.close()


class Counting:
    """An upstream whose n-th answer says n: two sends of one call answer differently. `pad`
    characters more make each answer's document pass INLINE_MAX: kept in a file of answers/."""

    def __init__(self, pad: int = 0) -> None:
        self.count = 0
        counting = self

        class Handler(Quiet):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                counting.count += 1
                text = f"answer {counting.count}" + "z" * pad
                self.answer_json({"choices": [{"message": {"content": text}}]})

        self.server, self.url = serve(Handler)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


CALL = {"model": "m", "messages": [{"role": "user", "content": "x"}]}


def _one_call(store: Store, job: str, n: int, url: str, crash: bool = False) -> Session:
    """Attempt `n` of `job`: one call through the gateway's HTTP door, then its close (or a
    SIGKILLed worker's stop, `crash`)."""
    session = Session(store, job, n, False, None)
    gw = Gateway([parse_gateway(f"openai={url}")], session)
    env = gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")
    assert post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], CALL)[0] == 200
    _crash(gw) if crash else gw.close()
    return session


def _waiting(journal: Path | str) -> int:
    """How many answers a job's journal holds that no fold took yet: rows with a `wal` that no
    `folded` row names, whose answer the row carries or whose file is in answers/."""
    rows = [json.loads(line) for line in Path(journal).read_text().splitlines()]
    folded = {i for r in rows for i in r.get("folded", [])}
    answers = Path(journal).parent / "answers"
    return sum(
        1
        for r in rows
        if "wal" in r and r["wal"]["event_id"] not in folded
        and ("answer" in r["wal"] or (answers / r["wal"]["event_id"]).exists())
    )  # fmt: skip


BIG = 32 * 1024  # pad of an answer kept in a file (Counting(pad=BIG)), past INLINE_MAX


def _served(store: Store, fp: str) -> tuple[str | None, list[str]]:
    from git_genjob.replay.cache import Cache

    entry = Cache(store).entry(fp)
    return (entry.served(), entry.pending()) if entry is not None else (None, [])


@pytest.mark.parametrize("pad", [0, BIG], ids=["answer-in-row", "answer-file"])
def test_a_fold_that_fails_at_close_says_so_and_loses_nothing(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], pad: int
) -> None:
    """Red team (gateway leftovers 1): a stale lock on refs/genjob/replays made the fold at the
    gateway's close fail with no word; the answers waited for the next Session unannounced. Now
    stderr says what failed, that the answers are kept and folded by the next attempt, and what
    to do; the next Session folds them once the lock is gone."""
    stub = Counting(pad)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = Store.open(str(repo))
    lock = repo / ".git/refs/genjob/replays.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")  # a writer that died holding it
    s1 = _one_call(store, "job-1", 1, stub.url)
    err = capfd.readouterr().err
    assert "warning: job job-1: 1 recorded model answer(s) could not be folded into the replay cache" in err
    assert "nothing is lost: they are kept in the gateway's journal" in err
    assert "the job's next attempt in this clone folds them" in err and "hint: " in err
    fp, sha = s1.calls[0]["fingerprint"], s1.calls[0]["answer_sha256"]
    assert _served(store, fp) == (None, [])
    assert _waiting(s1.journal) == 1
    if pad:  # the answer's file; its small request the row carries
        assert len(os.listdir(repo / ".git/genjob/gateway/answers")) == 1
    lock.unlink()
    Session(store, "job-1", 2, False, None)
    stub.close()
    assert _served(store, fp) == (sha, [])
    assert _waiting(s1.journal) == 0 and os.listdir(repo / ".git/genjob/gateway/answers") == []


@pytest.mark.parametrize("pad", [0, BIG], ids=["answer-in-row", "answer-file"])
def test_an_oserror_in_the_leftover_fold_is_said_and_the_worker_goes_on(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], pad: int
) -> None:
    """Red team (gateway leftovers 3): an OSError inside the leftover fold (here replay-local,
    which the fold appends to, is a directory) crashed the next Session's init, so the worker
    died before its generator ran. Now it is a warning, the journal and the answer stay, the
    attempt goes on, and a later Session folds them."""
    stub = Counting(pad)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = Store.open(str(repo))
    s1 = _one_call(store, "job-1", 1, stub.url, crash=True)
    local = repo / ".git/genjob/replay-local"
    local.mkdir(parents=True)
    journal = Path(s1.journal).read_bytes()
    s2 = _one_call(store, "job-1", 2, stub.url)  # init's fold and close's fold both fail
    err = capfd.readouterr().err
    assert "warning: job job-1: 1 recorded model answer(s) could not be folded" in err
    assert "Is a directory" in err and "nothing is lost" in err
    assert Path(s1.journal).read_bytes().startswith(journal)
    assert s2.calls[0]["status"] == "ok"
    local.rmdir()
    Session(store, "job-1", 3, False, None)
    stub.close()
    assert _served(store, s1.calls[0]["fingerprint"]) == (s2.calls[0]["answer_sha256"], [])
    assert _waiting(s1.journal) == 0 and os.listdir(repo / ".git/genjob/gateway/answers") == []


def test_a_late_leftover_never_competes_with_the_answer_a_later_attempt_sent(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Red team (gateway leftovers 4): attempt 1 recorded answer 1 and died; attempt 2 could not
    fold it (a lock), sent the call afresh and got answer 2. Folding both made two `recorded`
    heads for one fingerprint (a drift nobody asked for); and a leftover the cache no longer
    needs (a later attempt's answer already folded) did the same when it turned up. The last
    answer is the one folded; the superseded leftover's files go. (Answers kept in files: the
    second half hides attempt 1's from attempt 2 by moving answers/ aside.)"""
    up = Counting(BIG)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = Store.open(str(repo))
    answers = repo / ".git/genjob/gateway/answers"
    s1 = _one_call(store, "job-1", 1, up.url, crash=True)
    lock = repo / ".git/refs/genjob/replays.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    lock.write_text("")
    s2 = Session(store, "job-1", 2, False, None)
    lock.unlink()
    gw = Gateway([parse_gateway(f"openai={up.url}")], s2)
    env = gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")
    assert b"answer 2" in post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], CALL)[1]
    gw.close()
    fp = s1.calls[0]["fingerprint"]
    assert fp == s2.calls[0]["fingerprint"] and s1.calls[0]["answer_sha256"] != s2.calls[0]["answer_sha256"]
    assert _served(store, fp) == (s2.calls[0]["answer_sha256"], [])
    assert os.listdir(answers) == []
    # a leftover turning up after a later attempt's answer was folded: superseded, never a head
    s3 = _one_call(store, "job-2", 1, up.url, crash=True)
    aside = repo / "aside"
    os.rename(answers, aside)  # not there when attempt 2 opens: it sends afresh
    s4 = _one_call(store, "job-2", 2, up.url)
    os.rmdir(answers)
    os.rename(aside, answers)
    Session(store, "job-2", 3, False, None)
    up.close()
    assert _served(store, s3.calls[0]["fingerprint"]) == (s4.calls[0]["answer_sha256"], [])
    assert os.listdir(answers) == []
    capfd.readouterr()


def test_two_sessions_folding_at_once_keep_one_line_of_history(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team (gateway leftovers 4): two workers' Sessions folding leftovers at the same moment
    (each its own repository handle) both land, on one line of refs/genjob/replays: the fold is a
    compare-and-swap re-read and retried, never a second head."""
    from tests.conftest import git

    stub = Stub()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = Store.open(str(repo))
    first = [_one_call(store, f"job-{i}", 1, stub.url, crash=True) for i in range(4)]
    stub.close()
    go = threading.Barrier(4)
    errors: list[BaseException] = []

    def fold(i: int) -> None:
        try:
            go.wait()
            Session(Store.open(str(repo)), f"job-{i}", 2, False, None)
        except BaseException as exc:  # noqa: BLE001 (reported below)
            errors.append(exc)

    threads = [threading.Thread(target=fold, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for s in first:
        assert _served(store, s.calls[0]["fingerprint"]) == (s.calls[0]["answer_sha256"], [])
    lines = git(repo, "rev-list", "--parents", "refs/genjob/replays").splitlines()
    assert all(len(line.split()) <= 2 for line in lines) and len(lines) <= 4


def test_orphaned_answer_files_are_swept_and_no_live_one(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Red team (gateway leftovers 2): an answer file no journal row names (a worker killed
    between the file's move and its row), or named only by a job no longer live here (dropped
    or finished elsewhere), stayed in answers/ for good. A Session sweeps those once they are
    older than a day; a fresh file (a live session may be about to name it) and a live job's
    leftover stay."""
    import time

    from tests.conftest import git

    stub = Counting(BIG)  # answers kept in files
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = Store.open(str(repo))
    answers = repo / ".git/genjob/gateway/answers"
    live = _one_call(store, "job-live", 1, stub.url, crash=True)
    git(repo, "update-ref", "refs/genjob/jobs/job-live", "HEAD")
    _one_call(store, "job-gone", 1, stub.url, crash=True)
    stub.close()
    live_id = next(json.loads(x)["wal"]["event_id"] for x in Path(live.journal).read_text().splitlines() if "wal" in x)
    orphan, fresh = "a" * 64, "b" * 64
    for name in (orphan, orphan + ".request", fresh):
        (answers / name).write_text("x")
    old = time.time() - 2 * 24 * 3600
    for name in os.listdir(answers):
        if name != fresh:
            os.utime(answers / name, (old, old))
    before = set(os.listdir(answers))
    assert len(before) == 5  # job-live's answer, job-gone's, the orphan's two, a fresh one (small requests: in rows)
    Session(store, "job-other", 1, False, None)
    assert set(os.listdir(answers)) == {live_id, fresh}


class RefusingProxy:
    """An HTTPS proxy on 127.0.0.1 that refuses every tunnel (403 to CONNECT): the request never
    leaves the worker's side."""

    def __init__(self) -> None:
        self.connects: list[str] = []
        proxy = self

        class Handler(Quiet):
            def do_CONNECT(self) -> None:
                proxy.connects.append(self.path)
                self.send_response(403)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server, self.url = serve(Handler)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class HungProxy:
    """A proxy port whose TCP connect never completes (httpx.ConnectTimeout): a listener whose
    backlog is full, so the kernel drops every further SYN."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(0)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.fill = []
        for _ in range(4):
            c = socket.socket()
            c.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                c.connect(self.listener.getsockname())
            self.fill.append(c)
        self.connects: list[str] | None = None  # nothing gets as far as a CONNECT

    def close(self) -> None:
        for c in [*self.fill, self.listener]:
            c.close()


def _proxied(monkeypatch: pytest.MonkeyPatch, how: str) -> RefusingProxy | HungProxy | None:
    """HTTPS_PROXY set to a proxy that refuses the tunnel, one whose connect hangs, or a closed
    port."""
    proxy: RefusingProxy | HungProxy | None = {"refusing": RefusingProxy, "hung": HungProxy}.get(how, lambda: None)()
    if proxy is not None:
        url = proxy.url
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"http://127.0.0.1:{s.getsockname()[1]}"
    for name in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return proxy


@pytest.mark.parametrize("how", ["refusing", "closed", "hung"])
def test_a_proxy_that_never_carries_the_call_is_not_sent(repo: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Red team (gateway leftovers 6): a proxy that refuses the tunnel (httpx.ProxyError) was a
    call `unknown`, answered 504 "stalled or broke mid-answer", as if the upstream may have
    acted on it. The request never left: 502 naming the failure, the call `failed` (safe to
    send again), nothing cached; a closed proxy port is the same, and so is one whose connect
    never completes (httpx.ConnectTimeout, within the call's deadline)."""
    from tests.conftest import refs

    proxy = _proxied(monkeypatch, how)
    store = Store.open(str(repo))
    session = Session(store, "job-1", 1, False, None)
    gw = Gateway([parse_gateway("openai=https://api.openai.invalid/v1")], session, deadline_s=2.0)
    env = gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")
    before = refs(repo)
    status, body = post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], CALL)
    gw.close()
    if proxy is not None:
        proxy.close()
        assert proxy.connects in (["api.openai.invalid:443"], None)
    assert status == 502 and b"nothing was sent" in body, body
    assert session.model_record()["calls"][0]["status"] == "failed"
    assert session.model_record()["usage"]["sent"] == 1 and refs(repo) == before


@pytest.mark.parametrize("how", ["refusing", "closed", "hung"])
def test_the_direct_door_through_a_proxy_that_never_carries_the_call(
    repo: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """The same for the `openai:` generator's direct door: GeneratorUnavailable with sent=False
    (the worker's `failed_before_send`), the call `failed`."""
    from git_genjob.documents.errors import GeneratorUnavailable
    from git_genjob.worker.gateway.direct import Direct, openai_upstream

    proxy = _proxied(monkeypatch, how)
    session = Session(Store.open(str(repo)), "job-1", 1, False, None)
    door = Direct(session, openai_upstream("https://api.openai.invalid/v1"), 2.0)
    with pytest.raises(GeneratorUnavailable) as failed:
        door.post("/chat/completions", CALL, "f" * 64, 2.0)
    door.close()
    if proxy is not None:
        proxy.close()
    assert failed.value.sent is False and "nothing was sent" in failed.value.message
    assert session.model_record()["calls"][0]["status"] == "failed"


def test_a_libgit2_failure_in_the_fold_at_close_is_said_never_raised(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Red team (h-red2): the fold catches GenjobError and OSError, but what libgit2 raises when it
    cannot read an answer or write the cache's objects (a file gone from answers/, a full disk)
    is pygit2.GitError. It went up through Gateway.close, so the worker died before it signed its
    receipt. Now it is the same warning, and the next Session starts."""
    stub = Counting(BIG)  # an answer kept in a file, which libgit2 reads at the fold
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = Store.open(str(repo))
    session = Session(store, "job-1", 1, False, None)
    gw = Gateway([parse_gateway(f"openai={stub.url}")], session)
    env = gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")
    assert post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], CALL)[0] == 200
    answers = repo / ".git/genjob/gateway/answers"
    for name in os.listdir(answers):
        if not name.endswith(".request"):
            os.unlink(answers / name)  # libgit2 reads it: NotFoundError, a GitError
    gw.close()
    err = capfd.readouterr().err
    assert "warning: job job-1: 1 recorded model answer(s) could not be folded into the replay cache" in err
    assert session.calls[0]["status"] == "ok"
    Session(store, "job-1", 2, False, None)  # the leftover's file is gone: nothing to fold, no crash
    stub.close()


def test_an_answer_its_row_carries_is_folded_once(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A small answer stays in its journal row for good (the row is its record before the fold);
    once the cache holds it, a `folded` row names it, so no later Session of the job folds it
    again: a replay cache the owner cleared stays clear, and the job's next attempt asks afresh."""
    from tests.conftest import git

    up = Counting()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    store = Store.open(str(repo))
    s1 = _one_call(store, "job-1", 1, up.url)
    fp, sha = s1.calls[0]["fingerprint"], s1.calls[0]["answer_sha256"]
    assert _served(store, fp) == (sha, []) and _waiting(s1.journal) == 0
    git(repo, "update-ref", "-d", "refs/genjob/replays")
    (repo / ".git/genjob/replay-local").unlink(missing_ok=True)
    assert _served(store, fp) == (None, [])
    s2 = _one_call(store, "job-1", 2, up.url)
    up.close()
    assert up.count == 2 and s2.calls[0]["replayed"] is False
    assert _served(store, fp) == (s2.calls[0]["answer_sha256"], []) != (sha, [])


@given(
    st.lists(st.sampled_from(["short", "usage", "long"]), max_size=12),
    st.lists(st.integers(1, 300), min_size=1, max_size=8),
)
@settings(max_examples=200, deadline=None)
def test_usage_is_read_from_short_lines_whatever_the_chunks(lines: list[str], cuts: list[int]) -> None:
    """The stream's usage is read from its SSE lines however the upstream chunks them (a line
    split anywhere, many lines in one chunk, lines past LINE_MAX around it that the reader skips
    while it carries them)."""
    import git_genjob.worker.gateway.spool as spool_module

    text = {
        "short": b'data: {"choices":[{"delta":{"content":"hi"}}]}',
        "usage": b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}',
        "long": b'data: {"c":"' + b"x" * 200 + b'"}',
    }
    data = b"".join(text[k] + b"\n\n" for k in lines)
    old, spool_module.LINE_MAX = spool_module.LINE_MAX, 100
    try:
        spool = spool_module.Spool("/nonexistent", 1 << 20, "openai", True)
        at = n = 0
        while at < len(data):
            size = cuts[n % len(cuts)]
            spool._lines(data[at : at + size])
            at, n = at + size, n + 1
    finally:
        spool_module.LINE_MAX = old
    assert spool.tokens == ((3, 4) if "usage" in lines else (None, None))
