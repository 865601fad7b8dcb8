"""The gateway under load, races and a hostile agent (SPEC §12.1): attempts of one job and of
several at once on one machine, a retry opened while an earlier attempt's call is out, a
request whose length is no byte count, a model named like a credential."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from git_genjob.storage.store import Store
from git_genjob.worker.gateway.calls import Session
from git_genjob.worker.gateway.dialects import parse_gateway
from git_genjob.worker.gateway.server import Gateway
from git_genjob.worker.gateway.spool import INLINE_MAX
from tests.worker.test_gateway import CALL, KEY, Quiet, serve


class Tagged:
    """An upstream whose answer names the prompt it was sent and how many answers came before
    (a model that never answers twice alike), plain or streamed; `hold` makes every call wait
    for `release` (a call that is out while a test does something else)."""

    def __init__(self, hold: bool = False) -> None:
        self.count, self.lock = 0, threading.Lock()
        self.held, self.release = threading.Event(), threading.Event()
        if not hold:
            self.release.set()
        up = self

        class Handler(Quiet):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
                with up.lock:
                    up.count += 1
                    text = f"{body['messages'][0]['content'] if body['messages'] else ''} #{up.count}"
                up.held.set()
                up.release.wait(20)
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("connection", "close")
                    self.end_headers()
                    for part in (text[:3], text[3:]):
                        self.wfile.write(
                            f"data: {json.dumps({'choices': [{'delta': {'content': part}}]})}\n\n".encode()
                        )
                        self.wfile.flush()
                    self.close_connection = True
                    return
                self.answer_json({"choices": [{"message": {"content": text}}]})

        self.server, self.url = serve(Handler)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()


def post(url: str, token: str, doc: dict[str, Any]) -> tuple[int, bytes]:
    """test_gateway's post, with room for a loaded machine's fsyncs (200 calls at once)."""
    req = urllib.request.Request(url, json.dumps(doc).encode(), {"authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _open(store: Store, job: str, n: int, url: str) -> tuple[Gateway, dict[str, str]]:
    session = Session(store, job, n, False, None)
    gw = Gateway([parse_gateway(f"openai={url}")], session)
    return gw, gw.env(f"http://127.0.0.1:{gw.listen_tcp()}")


def _drive(env: dict[str, str], job: str, calls: int, out: dict[int, tuple[int, bytes]]) -> None:
    """`calls` calls of `job`, one after another (as an agent makes them), every third streamed."""
    for n in range(1, calls + 1):
        doc = {"model": "m", "stream": n % 3 == 0, "messages": [{"role": "user", "content": f"{job} call {n}"}]}
        out[n] = post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], doc)


def _fds(under: Path) -> list[str]:
    """The files under `under` this process holds open (a spool, a journal, an answer file)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(under)):
            out.append(target)
    return sorted(out)


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts descriptors in /proc")
def test_four_attempts_at_once_and_their_retries_lose_duplicate_and_swap_nothing(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Four gateways on one machine, 50 calls each at once: two attempts of one job (a retry
    while the first still runs) and two other jobs. Every call is journaled once `sending` and
    once `ok`, its answer served; answers/ and the spool are empty once all have closed (no
    early request file left, none taken as an answer); no descriptor is left open; and each
    job's next attempt replays every call with exactly an answer its call got, none sent."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    up = Tagged()
    store = Store.open(str(repo))
    fds = _fds(repo)
    plan = [("job-a", 1), ("job-a", 2), ("job-b", 1), ("job-c", 1)]
    gateways = [_open(store, job, n, up.url) for job, n in plan]
    got: list[dict[int, tuple[int, bytes]]] = [{} for _ in plan]
    threads = [
        threading.Thread(target=_drive, args=(env, job, 50, got[i]))
        for i, ((_, env), (job, _)) in enumerate(zip(gateways, plan, strict=True))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    for gw, _ in gateways:
        gw.close()
    assert up.count == 200
    for (gw, _), answers in zip(gateways, got, strict=True):
        assert sorted(answers) == list(range(1, 51)) and {s for s, _ in answers.values()} == {200}
        rows = [
            r
            for r in map(json.loads, Path(gw.session.journal).read_text().splitlines())
            if r["attempt"] == gw.session.attempt and "n" in r  # not the fold's `folded` row
        ]
        assert sorted((r["n"], r["status"]) for r in rows) == sorted(
            [(n, "sending") for n in range(1, 51)] + [(n, "ok") for n in range(1, 51)]
        )
    answers_dir = gateways[0][0].session.answers
    assert os.listdir(answers_dir) == []
    assert os.listdir(os.path.join(os.path.dirname(answers_dir), "spool")) == []
    for job, n in (("job-a", 3), ("job-b", 2)):
        gw, env = _open(store, job, n, up.url)
        again: dict[int, tuple[int, bytes]] = {}
        _drive(env, job, 50, again)
        gw.close()
        assert gw.session.model_record()["usage"]["replayed"] == 50
        earlier = [answers for answers, (j, _) in zip(got, plan, strict=True) if j == job]
        for call, answer in again.items():
            assert answer in [answers[call] for answers in earlier]
    assert up.count == 200
    assert _fds(repo) == fds == []
    up.close()


def test_a_retry_opened_while_a_call_is_out_leaves_that_call_recorded(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A later attempt's Session (a retry on this clone) opened while an earlier attempt's call
    is out removes the early request files of the earlier attempt's calls it takes for a killed
    worker's: the call that is out still has its answer recorded (its request written afresh),
    never a 502 for an answer the upstream gave."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    up = Tagged(hold=True)
    store = Store.open(str(repo))
    gw, env = _open(store, "job-1", 1, up.url)
    out: list[tuple[int, bytes]] = []
    # a request past INLINE_MAX: written to answers/ while the call is out (a small one rides in its row)
    big = {"model": "m", "messages": [{"role": "user", "content": "q" * (INLINE_MAX + 1)}]}
    t = threading.Thread(
        target=lambda: out.append(post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], big))
    )
    t.start()
    assert up.held.wait(10)
    for _ in range(500):  # the early request file written while the call is out
        if any(name.endswith(".request") for name in os.listdir(gw.session.answers)):
            break
        time.sleep(0.01)
    else:
        raise AssertionError("no early request file was written while the call was out")
    Session(store, "job-1", 2, False, None)
    up.release.set()
    t.join(10)
    gw.close()
    up.close()
    assert out[0][0] == 200 and gw.session.model_record()["calls"][0]["status"] == "ok"
    again = Session(store, "job-1", 3, False, None)
    assert again._recorded(gw.session.calls[0]["fingerprint"])[0] is not None


@pytest.mark.parametrize("length", ["-1", "abc", "1e3", "+5"])
def test_a_content_length_that_is_no_byte_count_is_a_400_and_the_gateway_serves_on(
    repo: Path, monkeypatch: pytest.MonkeyPatch, length: str
) -> None:
    """`content-length: -1` made the gateway read the body till the agent hung up (past
    REQUEST_MAX, into memory); one that is no number raised in the handler (a traceback on the
    worker's stderr, no answer). Both are a 400 now, the connection closed, nothing journaled."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    up = Tagged()
    gw, env = _open(Store.open(str(repo)), "job-1", 1, up.url)
    port = int(env["GENJOB_GATEWAY_URL"].rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        head = f"POST /openai/v1/chat/completions HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {gw.token}\r\n"
        sock.sendall(f"{head}content-length: {length}\r\n\r\n{{}}".encode())
        answer = sock.makefile("rb").read()  # to the end: the gateway closes the connection
    assert answer.startswith(b"HTTP/1.1 400 ") and b"not a number of bytes" in answer
    assert post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], CALL)[0] == 200
    gw.close()
    up.close()
    assert [c["n"] for c in gw.session.model_record()["calls"]] == [1]


def test_a_model_named_like_a_credential_is_stored_nowhere(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The prompt the secret scan reads has ids (`call_…`, `msg_…`) replaced, so an AWS key
    id glued to one in the request's model slipped past it, into the early request file and
    the replay cache's request.json (shared through git); and the model of every call is in
    the journal and the signed receipt. Now the call is not recorded (as a prompt's credential
    is not) and its model is redacted where it is kept."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    up = Tagged()
    store = Store.open(str(repo))
    gw, env = _open(store, "job-1", 1, up.url)
    doc = {"model": "call_AKIAIOSFODNN7EXAMPLE", "messages": [{"role": "user", "content": "x"}]}
    status, _ = post(env["OPENAI_BASE_URL"] + "/chat/completions", env["OPENAI_API_KEY"], doc)
    gw.close()
    up.close()
    assert status == 502 and up.count == 1
    kept = [json.dumps(gw.session.model_record()), Path(gw.session.journal).read_text()]
    for folder, _, names in os.walk(os.path.join(repo, ".git")):
        for name in names:
            with open(os.path.join(folder, name), "rb") as fh:
                kept.append(fh.read().decode("latin-1"))
    kept += [str(store.get(blob.id).data) for blob in _blobs(store)]
    assert not any("AKIAIOSFODNN7EXAMPLE" in text for text in kept)


def _blobs(store: Store) -> list[Any]:
    """Every blob of refs/genjob/replays' tree (none when the cache is empty)."""
    import pygit2

    from git_genjob.storage.layout import REPLAYS_REF

    tip = store.ref_target(REPLAYS_REF)
    if tip is None:
        return []
    out: list[Any] = []
    trees = [store.get_commit(tip).tree]
    while trees:
        for entry in trees.pop():
            obj = store.get(entry.id)
            (trees.append(obj) if isinstance(obj, pygit2.Tree) else out.append(obj))
    return out


def test_a_hundred_connections_at_once_are_each_answered_and_the_gateway_serves_on(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent that opens 100 connections at once: MAX_CONNECTIONS calls go out, every other
    one is answered 503 at once; none is reset by the kernel (the listen backlog was 5: red team
    saw 16 of 100 reset), the journal holds exactly the calls that went out, and the gateway
    serves on."""
    from git_genjob.worker.gateway.server import MAX_CONNECTIONS

    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    up = Tagged(hold=True)
    gw, env = _open(Store.open(str(repo)), "job-1", 1, up.url)
    url = env["OPENAI_BASE_URL"] + "/chat/completions"
    got: list[int | str] = []

    def call(i: int) -> None:
        try:
            got.append(
                post(url, env["OPENAI_API_KEY"], {"model": "m", "messages": [{"role": "user", "content": f"{i}"}]})[0]
            )
        except OSError as exc:  # a reset or refused connection
            got.append(type(exc).__name__)

    threads = [threading.Thread(target=call, args=(i,)) for i in range(100)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while got.count(503) < 100 - MAX_CONNECTIONS and time.monotonic() < deadline:
        time.sleep(0.05)
    up.release.set()
    for t in threads:
        t.join(60)
    assert sorted(got, key=str) == sorted([200] * MAX_CONNECTIONS + [503] * (100 - MAX_CONNECTIONS), key=str)
    assert post(url, env["OPENAI_API_KEY"], CALL)[0] == 200
    gw.close()
    up.close()
    assert gw.session.model_record()["usage"]["calls"] == MAX_CONNECTIONS + 1
