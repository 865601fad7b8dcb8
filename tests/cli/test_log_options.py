"""`log` and `audit` take git log's limiting options (issue 32 item 4, SPEC §12.2) and mean by
each what `git log` means: git's own revision walk applies them. Each is checked against `git
log` on the same history (same commits, same order), with paths and a range with merges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.common import git, run_genjob, setup_worker, submit_key, work

DAY = 86_400


@pytest.fixture
def history(repo: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """main: A (src/user.py), a human commit by Bob (CHANGES), B (README.md), then a merge of
    side, which holds C (src/user.py); each a day after the one before."""
    key = setup_worker(repo)
    when = 1_700_000_000

    def at(n: int) -> None:
        stamp = f"{when + n * DAY} +0000"
        monkeypatch.setenv("GIT_AUTHOR_DATE", stamp)
        monkeypatch.setenv("GIT_COMMITTER_DATE", stamp)

    def job(n: int, message: str, path: str, command: str) -> None:
        at(n)
        k = submit_key(repo, "-m", message, path)
        assert work(repo, key, command, "--once").code == 0
        res = run_genjob("apply", k, cwd=repo)
        assert res.code == 0, res.err

    job(1, "Add a timeout to fetch_user", "src/user.py", "echo 'def fetch_user(uid, timeout=1): pass' > src/user.py")
    at(2)
    (repo / "CHANGES").write_text("human\n")
    git(repo, "add", "CHANGES")
    git(repo, "commit", "-q", "--author=Bob Builder <bob@example.com>", "-m", "Note the change")
    job(3, "Describe the project", "README.md", "echo 'the project' > README.md")
    git(repo, "checkout", "-q", "-b", "side", "HEAD~2")
    job(4, "Retry fetch_user with a timeout", "src/user.py", "echo 'def fetch_user(uid): retry()' > src/user.py")
    git(repo, "checkout", "-q", "main")
    at(5)
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge side", "side")
    return repo


def _genjob_commits(repo: Path) -> set[str]:
    return set(git(repo, "log", "main", "side", "--format=%H", "--grep=^Genjob-Key:").split())


CASES = [
    [],
    ["-1"],
    ["-n", "2"],
    ["--max-count=3"],
    ["--since=2023-11-16"],
    ["--until=2023-11-16"],
    ["--author=Ada"],
    ["--author=Bob"],
    ["--grep=timeout"],
    ["--reverse"],
    ["-2", "--reverse"],
    ["--first-parent"],
    ["main~1..main"],
    ["side", "^main~1"],
    ["--", "src/user.py"],
    ["--first-parent", "--", "src/user.py"],
    ["main", "--", "README.md", "CHANGES"],
]


def test_log_and_audit_select_what_git_log_selects(history: Path) -> None:
    genjob = _genjob_commits(history)
    assert len(genjob) == 3
    picked = set()
    for args in CASES:
        want = [c for c in git(history, "log", "--format=%H", *args).split() if c in genjob]
        picked.add(tuple(want))
        log = run_genjob("log", "--json", *args, cwd=history)
        assert log.code == 0, (args, log.err)
        assert [r["commit"] for r in json.loads(log.out)] == want, args
        audit = run_genjob("audit", "--json", *args, cwd=history)
        assert audit.code == 0, (args, audit.err)
        assert [r["commit"] for r in json.loads(audit.out)["commits"]] == want, args
    assert len(picked) >= 7  # the options really select different commits: the comparison proves something


def test_log_oneline_and_paths_after_dashes(history: Path) -> None:
    _oneline(history)
    _dashes(history)


def _oneline(history: Path) -> None:
    genjob = _genjob_commits(history)
    out = run_genjob("log", "--oneline", "-4", cwd=history)
    assert out.code == 0
    lines = out.out.splitlines()
    want = [line for line in git(history, "log", "-4", "--format=%H %s").splitlines() if line.split()[0] in genjob]
    assert len(lines) == len(want) == 2  # -4 walks four commits, as git log does: two are genjob commits
    for line, expect in zip(lines, want, strict=True):
        sha, subject = expect.split(" ", 1)
        parts = line.split(maxsplit=3)
        assert parts[0] == sha[:12] and parts[1] == "verified" and len(parts[2]) == 32, line
        assert parts[3].strip() == subject, line


def _dashes(history: Path) -> None:
    res = run_genjob("log", "--json", "--", "CHANGES", cwd=history)
    assert res.code == 0 and json.loads(res.out) == []  # CHANGES: only the human commit touches it
    res = run_genjob("log", "--output=/tmp/x", cwd=history)
    assert res.code == 2 and "--output" in res.err
    res = run_genjob("audit", "no-such-branch", cwd=history)
    assert res.code == 2 and "names no commit" in res.err
