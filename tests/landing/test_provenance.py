"""Provenance through real PR workflows: rebase, cherry-pick, squash merge (issue 11.14)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.common import git, run_genjob, setup_worker, submit_key, work


def _apply_job(repo: Path, key: Path, path: str, text: str) -> str:
    k = submit_key(repo, "-m", f"Rewrite {path}", path)
    assert work(repo, key, f"printf '{text}' > {path}", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0, k
    return k


def _audit(repo: Path, *args: str) -> dict:  # type: ignore[type-arg]
    res = run_genjob("audit", "--json", *args, cwd=repo)
    return json.loads(res.out) | {"code": res.code}  # type: ignore[no-any-return]


def test_rebase_cherry_pick_and_squash_say_what_still_holds(repo: Path) -> None:
    key = setup_worker(repo)
    git(repo, "switch", "-q", "-c", "feature")
    a = _apply_job(repo, key, "src/user.py", "def fetch_user(uid, timeout=10):\\n    return uid\\n")
    b = _apply_job(repo, key, "README.md", "project, documented\\n")
    (repo / "src/user.py").write_text("def fetch_user(uid, timeout=5):\n    return uid\n")
    git(repo, "commit", "-q", "-a", "-m", "Review: a shorter timeout")  # a human edit after job a
    git(repo, "switch", "-q", "main")
    (repo / "tests/test_user.py").write_text("def test_user():\n    assert 1\n")
    git(repo, "commit", "-q", "-a", "-m", "Unrelated work on main")

    # rebase: the notes follow (init set notes.rewriteRef), both commits still verify
    git(repo, "switch", "-q", "feature")
    git(repo, "rebase", "-q", "main")
    doc = _audit(repo, "main..feature")
    assert doc["code"] == 0, doc
    assert [(c["jobs"], c["provenance"]) for c in doc["commits"]] == [([b], "verified"), ([a], "verified")]

    # cherry-pick: git copies notes on rebase and amend only, so the new commit has none; audit
    # fails, naming the exact repair, and passes once it is done
    picked_from = git(repo, "rev-parse", "feature~2").strip()
    git(repo, "switch", "-q", "-c", "hotfix", "main~1")
    git(repo, "commit", "-q", "--allow-empty", "-m", "Hotfix base")  # a base no commit had: a new commit
    git(repo, "cherry-pick", picked_from)
    doc = _audit(repo, "main~1..hotfix")
    assert doc["code"] == 1 and doc["commits"][0]["provenance"] == "unproven"
    (problem,) = doc["commits"][0]["problems"]
    picked = git(repo, "rev-parse", "--short=12", "HEAD").strip()
    repair = problem.split("copy the notes: ", 1)[1].split("; ")
    # the envelope audit reads, then the summary git log shows, each copied from the job's own commit
    assert [c.split()[:4] for c in repair] == [
        ["git", "notes", f"--ref={r}", "copy"] for r in ("genjob-receipts", "genjob")
    ]
    assert all(c.endswith(f" {picked}") for c in repair)
    for command in repair:
        git(repo, *command.split()[1:])
    doc = _audit(repo, "main~1..hotfix")
    assert doc["code"] == 0 and doc["commits"][0]["provenance"] == "verified"

    # GitHub-style squash merge: one commit, the PR's messages in its body
    git(repo, "switch", "-q", "main")
    body = git(repo, "log", "--reverse", "--format=* %B", "main..feature")
    git(repo, "merge", "-q", "--squash", "feature")
    git(repo, "commit", "-q", "-m", f"Feature (#12)\n\n{body}\nCo-authored-by: Bot <bot@example.com>")
    doc = _audit(repo, "HEAD~1..HEAD")
    assert doc["code"] == 0, doc
    (squash,) = doc["commits"]
    assert squash["provenance"] == "squashed with 2 jobs" and squash["jobs"] == [a, b]
    assert squash["facts"] == [
        f"{a}: receipt verified; outputs since modified: src/user.py",
        f"{b}: receipt verified; outputs intact",
    ]
    human = run_genjob("audit", "HEAD~1..HEAD", cwd=repo).out
    assert "squashed with 2 jobs" in human and "outputs since modified: src/user.py" in human


def test_a_squash_naming_a_forged_receipt_fails(repo: Path) -> None:
    key = setup_worker(repo)
    a = _apply_job(repo, key, "src/user.py", "x = 1\\n")
    msg = git(repo, "log", "-1", "--format=%B")
    forged = msg.replace("Genjob-Receipt: sha256:", "Genjob-Receipt: sha256:00")[: len(msg)]
    (repo / "README.md").write_text("more\n")
    git(repo, "commit", "-q", "-a", "-m", f"Squash\n\n* {forged}\n* {msg}\nCo-authored-by: B <b@example.com>")
    doc = _audit(repo, "HEAD~1..HEAD")
    assert doc["code"] == 1
    assert any(p.startswith(f"{a}: the stored receipt hashes to") for p in doc["commits"][0]["problems"])


def test_a_squash_message_naming_hostile_keys_fails_cleanly(repo: Path) -> None:
    setup_worker(repo)
    (repo / "README.md").write_text("more\n")
    lines = "\n".join(f"Genjob-Key: {k}\nGenjob-Receipt: sha256:00" for k in ("../../etc", "a b", "x" * 300, "ok-key"))
    git(repo, "commit", "-q", "-a", "-m", f"Squash\n\n{lines}\n\nCo-authored-by: B <b@example.com>")
    doc = _audit(repo, "HEAD~1..HEAD")
    assert doc["code"] == 1
    (c,) = doc["commits"]
    assert c["provenance"] == "squashed with 3 jobs"  # "a b" is no key: a trailer value is one word
    assert c["jobs"] == ["../../etc", "x" * 300, "ok-key"]
    assert [p.split(":")[0] for p in c["problems"]] == ["'../../etc'", repr("x" * 80), "ok-key"]
