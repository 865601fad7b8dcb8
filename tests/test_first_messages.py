"""Item 15 of issue 22: first-time mistakes get a message naming their real cause."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.common import REPO_ROOT, git, make_repo, refs, run_genjob


def test_trust_add_of_a_missing_file_says_no_such_file(repo: Path, tmp_path: Path) -> None:
    assert run_genjob("init", cwd=repo).code == 0
    before = (repo / ".genjob" / "allowed_signers").read_text()
    for arg in (str(tmp_path / "missing.pub"), "keys/w1.pub", "w1.pub"):
        res = run_genjob("trust", "add", "w1", arg, cwd=repo)
        assert res.code == 2 and f"no such file: {arg}" in res.err, res.err
        assert "not an ssh-ed25519 public key line" not in res.err
    res = run_genjob("trust", "add", "w1", str(tmp_path), cwd=repo)
    assert res.code == 2 and "is a directory" in res.err
    res = run_genjob("trust", "add", "w1", "ssh-ed25519 AAAAnotakey", cwd=repo)
    assert res.code == 2 and "no such file" not in res.err  # a key line: its own message
    assert (repo / ".genjob" / "allowed_signers").read_text() == before


def test_submit_in_a_repository_with_no_commits_says_so(tmp_path: Path) -> None:
    repo = tmp_path / "empty"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    (repo / "a.txt").write_text("a\n")
    res = run_genjob("submit", "-m", "x", "a.txt", cwd=repo)
    assert res.code == 2, res.err
    assert "this repository has no commits yet" in res.err and "git add a.txt && git commit" in res.err
    assert "does not exist at HEAD" not in res.err
    assert refs(repo) == {}


def test_submit_of_a_path_inside_a_submodule_names_the_submodule(tmp_path: Path) -> None:
    make_repo(tmp_path / "lib", {"lib.py": "x = 1\n"})
    repo = make_repo(tmp_path / "app")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(tmp_path / "lib"), "vendor/lib")
    git(repo, "commit", "-q", "-m", "submodule")
    before = refs(repo)
    res = run_genjob("submit", "-m", "x", "vendor/lib/lib.py", cwd=repo)
    assert res.code == 2, res.err
    assert "vendor/lib/lib.py is inside the submodule vendor/lib" in res.err and "cd vendor/lib" in res.err
    assert "is not a directory" not in res.err
    assert refs(repo) == before


def test_git_dir_set_outside_a_repository_is_named(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    res = run_genjob("status", cwd=elsewhere)
    assert res.code == 2
    assert f"ignores GIT_DIR={repo / '.git'}" in res.err and "unset GIT_DIR" in res.err


def test_receipts_md_verification_snippet_runs_after_apply(repo: Path, tmp_path: Path) -> None:
    from tests.helpers.common import setup_worker, submit_key, work

    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Fix", "src/user.py")
    assert work(repo, key, "echo '# x' >> src/user.py", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert "refs/genjob/jobs/" + k not in refs(repo)  # archived: the snippet must not read the live ref
    text = (REPO_ROOT / "docs" / "receipts.md").read_text()
    m = re.search(r"<!-- receipt-verify -->\s*\n```python\n(.*?)```", text, re.S)
    assert m is not None
    (tmp_path / "verify_receipt.py").write_text(m.group(1))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "verify_receipt.py"), k, str(key) + ".pub"],
        cwd=repo, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0 and "receipt verifies" in proc.stdout, proc.stderr


def test_the_demo_transcript_replays_word_for_word(tmp_path: Path) -> None:
    from git_genjob.cli.demo import _make_repo

    res = run_genjob("demo", cwd=tmp_path)
    assert res.code == 0, res.err
    commands = [line[2:] for line in res.out.splitlines() if line.startswith("$ ")]
    old_base = os.path.dirname(commands[0].split(" ", 1)[1])  # `cd BASE/repo`
    base = tmp_path / "replay"
    base.mkdir()
    repo = _make_repo(str(base))
    script = "set -e\n" + "\n".join(c.replace(old_base, str(base)) for c in commands) + "\n"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run(["sh", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    key = commands[-2].split()[-1]  # `git genjob apply KEY`
    assert f"Genjob-Key: {key}" in git(repo, "log", "-1", "--format=%B")
    assert run_genjob("audit", cwd=repo).code == 0


def test_fetch_of_many_jobs_prints_a_short_report(tmp_path: Path) -> None:
    from tests.helpers.common import repo_with_remote, submit_key

    bare, a = repo_with_remote(tmp_path)
    keys = [submit_key(a, "-m", f"job {i}", "README.md") for i in range(14)]
    assert run_genjob("push", cwd=a).code == 0
    git(tmp_path, "clone", "-q", str(bare), "b")
    b = tmp_path / "b"
    res = run_genjob("fetch", cwd=b)
    assert res.code == 0, res.err
    [line] = [x for x in res.out.splitlines() if x.strip().startswith("created:")]
    assert "created: 14 refs (" in line and "and 4 more; --json lists all)" in line
    assert len(line) < 600
    git(b, "update-ref", "-d", f"refs/genjob/jobs/{keys[0]}")
    doc = json.loads(run_genjob("fetch", "--json", cwd=b).out)
    assert doc["created"] == [keys[0]]
