"""The README's promises on a fresh machine, and the demo (issue: a newcomer's first hour)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.common import REPO_ROOT, run_genjob


def test_readme_names_the_two_commands() -> None:
    text = (REPO_ROOT / "README.md").read_text()
    assert "./install.sh && git genjob demo" in text
    assert re.search(r"^\.ci/run\b", text, re.M)
    ci = (REPO_ROOT / ".ci/run").read_text()
    assert "python -m pytest -q" in ci and "python -m pytest -q" in text


def test_demo_ends_with_trailers_note_and_passing_verify(tmp_path: Path) -> None:
    res = run_genjob("demo", "--keep", "--json", cwd=tmp_path)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    repo = doc["repository"]
    try:
        _check_kept_demo(doc, repo)
    finally:  # --keep leaves it for the user; a test run leaves nothing in /tmp
        shutil.rmtree(os.path.dirname(repo))


def _check_kept_demo(doc: dict, repo: str) -> None:  # type: ignore[type-arg]
    body = subprocess.run(
        ["git", "-C", repo, "log", "-1", "--notes=genjob", "--format=%B%n%N"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for trailer in ("Genjob-Key:", "Genjob-Job:", "Genjob-Receipt:", "Genjob-Signer:", "Genjob-Worker:"):
        assert trailer in body
    assert f"genjob {doc['key']} ok: signed by" in body
    # the demo agent's model call went through the worker's gateway: metered in the signed receipt
    assert "  model: 1 call (1 sent, 0 replayed), " in body
    calls = json.loads(run_genjob("show", doc["key"], "--calls", "--json", cwd=repo).out)
    assert [(c["n"], c["status"], c["upstream"]) for c in calls["calls"]] == [(1, "ok", "openai")]
    assert "fetch_user" in calls["calls"][0]["answer"] and "demo-model-key" not in json.dumps(calls)
    assert all(line.strip().startswith("ok") for line in doc["verify"])
    assert run_genjob("verify", doc["key"], cwd=repo).code == 0
    assert run_genjob("audit", cwd=repo).code == 0
    tests = subprocess.run(
        ["python3", "-m", "pytest", "-q", "tests"],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": "src"},
    )
    assert "1 passed" in tests.stdout, tests.stdout + tests.stderr


def test_demo_leaves_no_trace_without_keep(tmp_path: Path, hermetic_seal: Path) -> None:
    before = sorted(p.name for p in hermetic_seal.iterdir())
    res = run_genjob("demo", "--json", cwd=tmp_path)
    assert res.code == 0 and json.loads(res.out)["repository"] is None
    assert sorted(p.name for p in hermetic_seal.iterdir()) == before


@pytest.mark.slow
def test_readme_main_command_in_a_fresh_clone(tmp_path: Path) -> None:
    """Typed verbatim where ~/.local/bin is not on PATH (the default on many machines)."""
    from tests.contract.test_install import IGNORE
    from tests.helpers.common import make_repo

    src = tmp_path / "clone"
    shutil.copytree(REPO_ROOT, src, ignore=IGNORE)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_", "VIRTUAL_ENV"))}
    env.update(
        HOME=str(home),
        PATH="/usr/local/bin:/usr/bin:/bin",
        PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", os.path.expanduser("~/.cache/pip")),
    )
    (home / ".gitconfig").write_text("[user]\n\tname = N\n\temail = n@example.com\n")
    proc = subprocess.run(
        ["sh", "-c", "./install.sh && git genjob demo"], cwd=src, env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Genjob-Receipt:" in proc.stdout and "applied as" in proc.stdout
    assert f'export PATH="{home}/.local/bin:$PATH"' in proc.stdout  # and says how to fix PATH for good
    # the alias keeps git's own rule: paths are relative to the directory the command is typed in
    repo = make_repo(tmp_path / "any")
    init = subprocess.run(["git", "genjob", "init"], cwd=repo, env=env, capture_output=True, text=True)
    assert init.returncode == 0 and "created planner key" in init.stdout, init.stderr  # submit signs with it
    sub = subprocess.run(
        ["git", "genjob", "submit", "-m", "x", "user.py"], cwd=repo / "src", env=env, capture_output=True, text=True
    )
    assert sub.returncode == 0 and sub.stdout.startswith("created "), sub.stderr
    rows = subprocess.run(["git", "genjob", "status", "--json"], cwd=repo, env=env, capture_output=True, text=True)
    assert [r["allowed_paths"] for r in json.loads(rows.stdout)] == [["src/user.py"]]


def test_cli_docs_are_generated_from_the_code(tmp_path: Path) -> None:
    res = run_genjob("man", "--markdown", cwd=tmp_path)
    assert res.code == 0
    assert (REPO_ROOT / "docs/cli.md").read_text() == res.out, "regenerate: git genjob man --markdown > docs/cli.md"


def test_demo_against_an_openai_compatible_server(tmp_path: Path, stub) -> None:  # type: ignore[no-untyped-def]
    stub.answer = json.dumps(
        {
            "src/user.py": "def fetch_user(uid, timeout=10.0):\n    return uid\n",
            "tests/test_timeout.py": "def test_timeout():\n    assert True\n",
        }
    )
    res = run_genjob("demo", "--model", f"{stub.url}/v1#tiny", "--json", cwd=tmp_path)
    assert res.code == 0, res.err
    assert stub.count == 1 and stub.requests[0]["model"] == "tiny"
    assert all(line.strip().startswith("ok") for line in json.loads(res.out)["verify"])


@pytest.mark.model
def test_demo_against_the_local_llama_cpp_server(tmp_path: Path, llama_server: str) -> None:
    res = run_genjob("demo", "--model", f"{llama_server}/v1#smollm2", "--json", cwd=tmp_path)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert re.fullmatch(r"[0-9a-f]{40}", doc["commit"])
    assert all(line.strip().startswith("ok") for line in doc["verify"])
    assert "Assisted-by: openai:smollm2" in doc["log"]
