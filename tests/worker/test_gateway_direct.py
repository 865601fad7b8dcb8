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
