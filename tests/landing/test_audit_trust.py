"""Audit checks what verify checks (issue 32 item 3, SPEC §12.2): the planner-signed job travels
with its receipt, so audit checks the planner where the job's refs are absent; a range is judged
by its base's trust as of now, never by a date a commit states."""

from __future__ import annotations

import json
from pathlib import Path

from git_genjob.documents.job import seal_job
from git_genjob.documents.keys import generate
from tests.helpers.common import git, refs, repo_with_remote, run_genjob, setup_worker, submit_key, work

GOOD = "echo 'def fetch_user(uid, timeout=1):\n    return uid' > src/user.py"


def _applied(repo: Path) -> str:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert work(repo, key, GOOD, "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    return k


def _notes_only_clone(tmp_path: Path, bare: Path) -> Path:
    """A clone with the branch and the notes but none of the job's refs (the job minted elsewhere)."""
    clone = tmp_path / "reviewer"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    git(clone, "fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    assert not [r for r in refs(clone) if r.startswith("refs/genjob/")]
    return clone


def _rewrite_receipts_note(repo: Path, change: dict[str, str | None]) -> None:
    doc = json.loads(git(repo, "notes", "--ref=genjob-receipts", "show", "HEAD"))
    for name, value in change.items():
        if value is None:
            doc.pop(name, None)
        else:
            doc[name] = value
    line = json.dumps(doc, separators=(",", ":"), sort_keys=True)
    git(repo, "notes", "--ref=genjob-receipts", "add", "-f", "-m", line, "HEAD")


def test_the_job_travels_with_the_receipt_and_its_planner_is_checked(tmp_path: Path) -> None:
    bare, repo = repo_with_remote(tmp_path, "a")
    _applied(repo)
    git(repo, "push", "-q", "--no-verify", "origin", "main", "refs/notes/genjob", "refs/notes/genjob-receipts")
    clone = _notes_only_clone(tmp_path, bare)
    res = run_genjob("audit", "--json", cwd=clone)
    assert res.code == 0, res.out
    (row,) = json.loads(res.out)["commits"]
    assert any(f.startswith("planner: planned by ada@example.com") for f in row["facts"]), row

    # unsigned: the planner's envelope dropped from the note
    _rewrite_receipts_note(clone, {"job_envelope": None})
    res = run_genjob("audit", cwd=clone)
    assert res.code == 1 and "check 9: the job is unsigned" in res.out, res.out

    # signed by a planner nobody here trusts
    job = json.loads(git(repo, "notes", "--ref=genjob-receipts", "show", "HEAD"))["job"].encode()
    foreign = seal_job(job, generate("planner mallory@example.com")).decode()
    _rewrite_receipts_note(clone, {"job_envelope": foreign})
    res = run_genjob("audit", cwd=clone)
    assert res.code == 1 and "check 9: the job is untrusted" in res.out, res.out

    # the job nowhere: neither stored here nor carried by the note
    _rewrite_receipts_note(clone, {"job": None, "job_envelope": None})
    res = run_genjob("audit", cwd=clone)
    assert res.code == 1 and "check 9: the job this receipt answers is neither stored here" in res.out, res.out


def test_a_back_dated_commit_signed_by_an_expired_key_fails_a_range_audit(repo: Path) -> None:
    _applied(repo)
    applied = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "-b", "expired", "HEAD~1")
    signers = repo / ".genjob" / "allowed_signers"
    text = signers.read_text()
    line = next(x for x in text.splitlines() if x.startswith("w1 "))
    signers.write_text(text.replace(line, line.replace('namespaces="', 'valid-before="20260101",namespaces="', 1)))
    git(repo, "commit", "-q", "-am", "the worker key expires on 2026-01-01")
    base = git(repo, "rev-parse", "HEAD").strip()
    env_date = "2025-06-01T00:00:00+0000"
    import os
    import subprocess

    proc = subprocess.run(
        ["git", "cherry-pick", applied],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, "GIT_COMMITTER_DATE": env_date, "GIT_AUTHOR_DATE": env_date},
    )
    assert proc.returncode == 0, proc.stderr
    for ref in ("genjob", "genjob-receipts"):
        git(repo, "notes", f"--ref={ref}", "copy", "-f", applied, "HEAD")
    for args in ([f"{base}..HEAD"], ["--trust-from", base, f"{base}..HEAD"], [f"^{base}", "HEAD"]):
        res = run_genjob("audit", *args, cwd=repo)
        assert res.code == 1 and "check 2:" in res.out and "expired" in res.out, (args, res.out)


def _uncommitted_worker(repo: Path, name: str = "w1") -> Path:
    """The walkthrough as a newcomer types it: init, keygen, trust add, and no commit of .genjob/."""
    assert run_genjob("init", cwd=repo).code == 0
    key = repo.parent / "keys" / name
    assert run_genjob("keygen", "--name", name, "--out", str(key), cwd=repo).code == 0
    res = run_genjob("trust", "add", name, f"{key}.pub", cwd=repo)
    assert res.code == 0 and 'git add .genjob && git commit -m "genjob: trust w1"' in res.out
    return key


# From tests/test_newcomer.py: a newcomer's first day (issue 11).
def test_audit_trust_from_repairs_history_applied_before_the_store_was_committed(repo: Path) -> None:
    """A commit made by an older genjob (which applied with the work tree's store alone)."""
    key = _uncommitted_worker(repo)
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key, "echo new > src/user.py", "--once").code == 0
    signers = (repo / ".genjob/allowed_signers").read_text()
    git(repo, "add", ".genjob")
    git(repo, "commit", "-q", "-m", "trust")
    assert run_genjob("apply", k, cwd=repo).code == 0
    # rewrite history as the old walkthrough left it: the trust commit after the applied one
    git(repo, "rebase", "-q", "--onto", "HEAD~2", "HEAD~1")  # drop the trust commit below the apply
    (repo / ".genjob").mkdir()
    (repo / ".genjob/allowed_signers").write_text(signers)
    git(repo, "add", ".genjob")
    git(repo, "commit", "-q", "-m", "trust, committed late")
    res = run_genjob("audit", "--json", cwd=repo)
    assert res.code == 1
    (failing,) = [c for c in json.loads(res.out)["commits"] if not c["ok"]]
    assert any("git genjob audit --trust-from REV" in p for p in failing["problems"])
    res = run_genjob("audit", "--trust-from", "HEAD", cwd=repo)
    assert res.code == 0, res.out
