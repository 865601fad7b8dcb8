"""What a reviewer sees (issue 22 item 16, SPEC §11): refs/notes/genjob holds a few lines of
summary, which `git log` shows; the receipt envelope lives in refs/notes/genjob-receipts, carried
by push, fetch, notes.rewriteRef and the pre-push check; notes written before the split (the
envelope in refs/notes/genjob) keep verifying."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.common import git, refs, repo_with_remote, run_genjob, setup_worker, submit_key, work

GOOD = "echo 'def fetch_user(uid, timeout=1):\n    return uid' > src/user.py"


@pytest.fixture
def applied(repo: Path) -> tuple[Path, str]:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout\n\nto fetch_user", "src/user.py")
    assert work(repo, key, GOOD, "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    return repo, k


def test_git_log_shows_a_short_summary_and_the_envelope_is_in_its_own_ref(applied: tuple[Path, str]) -> None:
    repo, k = applied
    log = git(repo, "log", "-1")  # init's notes.displayRef: what a reviewer sees
    notes = log.split("Notes (genjob):\n", 1)[1].splitlines()
    assert len(notes) <= 6 and len(log) < 1200
    assert notes[0].strip().startswith(f"genjob {k} ok: signed by w1 (SHA256:")  # the trust store's name
    assert "instruction: Add a timeout" in log and "generator: exec:echo" in log and "sandbox " in log
    assert "planner: " in log
    assert "envelope" not in log and "payloadType" not in log  # no base64 envelope in the log
    receipt_note = git(repo, "notes", "--ref=genjob-receipts", "show", "HEAD")
    (line,) = receipt_note.splitlines()
    doc = json.loads(line)
    trailer = git(repo, "log", "-1", "--format=%(trailers:key=Genjob-Receipt,valueonly)").strip()
    assert json.loads(doc["envelope"])["payloadType"] and trailer.startswith("sha256:")
    res = run_genjob("audit", cwd=repo)
    assert res.code == 0 and "1 genjob commit(s), 0 failing" in res.out
    rows = json.loads(run_genjob("log", "--json", cwd=repo).out)
    assert rows[0]["envelope_ref"] == "refs/notes/genjob-receipts" and rows[0]["note"][0].startswith(f"genjob {k}")
    human = run_genjob("log", cwd=repo).out
    assert f"note: genjob {k} ok" in human and f"receipt: {trailer} in refs/notes/genjob-receipts" in human


def test_an_audit_without_the_receipts_ref_fails_and_names_both_refs(applied: tuple[Path, str]) -> None:
    repo, _k = applied
    git(repo, "update-ref", "-d", "refs/notes/genjob-receipts")  # the summary alone proves nothing
    res = run_genjob("audit", cwd=repo)
    assert res.code == 1 and "refs/notes/genjob-receipts" in res.out


def test_a_note_from_before_the_split_keeps_verifying(applied: tuple[Path, str]) -> None:
    """A repository applied before SPEC §11 holds the summary line and the JSON envelope line in
    refs/notes/genjob, and no refs/notes/genjob-receipts: audit, log and pre-push accept it."""
    repo, _k = applied
    summary = git(repo, "notes", "--ref=genjob", "show", "HEAD").splitlines()[0]
    envelope_line = git(repo, "notes", "--ref=genjob-receipts", "show", "HEAD").strip()
    git(repo, "update-ref", "-d", "refs/notes/genjob")
    git(repo, "update-ref", "-d", "refs/notes/genjob-receipts")
    git(repo, "notes", "--ref=genjob", "add", "-m", f"{summary}\n{envelope_line}", "HEAD")
    assert "refs/notes/genjob-receipts" not in refs(repo)
    res = run_genjob("audit", cwd=repo)
    assert res.code == 0, res.out
    rows = json.loads(run_genjob("log", "--json", cwd=repo).out)
    assert rows[0]["ok"] and rows[0]["envelope_ref"] == "refs/notes/genjob"


def test_init_makes_both_notes_follow_amend_and_rebase(applied: tuple[Path, str]) -> None:
    repo, _k = applied
    assert git(repo, "config", "--get-all", "notes.rewriteRef").split() == [
        "refs/notes/genjob",
        "refs/notes/genjob-receipts",
    ]
    assert git(repo, "config", "notes.genjob-receipts.mergeStrategy").strip() == "cat_sort_uniq"
    git(repo, "commit", "--amend", "-q", "--no-edit", "--date=1700000100 +0000")
    assert git(repo, "notes", "--ref=genjob-receipts", "show", "HEAD").startswith("{")
    assert git(repo, "notes", "--ref=genjob", "show", "HEAD").startswith("genjob ")
    assert run_genjob("audit", "HEAD~1..HEAD", cwd=repo).code == 0


def test_push_and_fetch_carry_the_receipts_ref_and_a_fresh_clone_audits(tmp_path: Path) -> None:
    bare, a = repo_with_remote(tmp_path, "a")
    key = setup_worker(a)
    k = submit_key(a, "-m", "Add a timeout", "src/user.py")
    assert work(a, key, GOOD, "--once").code == 0
    assert run_genjob("apply", k, cwd=a).code == 0
    assert run_genjob("push", cwd=a).code == 0
    git(a, "push", "-q", "--no-verify", "origin", "main")
    on_remote = refs(bare)
    assert on_remote["refs/notes/genjob-receipts"] == refs(a)["refs/notes/genjob-receipts"]
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(bare), str(b))
    assert run_genjob("audit", cwd=b).code == 3  # a plain clone has no notes: said once, exit 3 (SPEC §12.2)
    assert run_genjob("fetch", cwd=b).code == 0
    assert refs(b)["refs/notes/genjob-receipts"] == on_remote["refs/notes/genjob-receipts"]
    assert run_genjob("audit", cwd=b).code == 0


def test_pre_push_demands_the_receipts_note_on_the_remote(tmp_path: Path) -> None:
    bare, repo = repo_with_remote(tmp_path, "a")
    key = setup_worker(repo)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key, "echo y > src/user.py", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    git(repo, "push", "-q", "--no-verify", "origin", "refs/notes/genjob")  # the summary, not the envelope
    before = refs(bare)
    proc = subprocess.run(["git", "push", "origin", "main"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "its note is not on origin (refs/notes/genjob-receipts" in proc.stderr
    assert refs(bare) == before
    # Pushing the envelope's ref in the same push is enough, as for the summary.
    proc = subprocess.run(
        ["git", "push", "origin", "main", "refs/notes/genjob-receipts"], cwd=repo, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_two_clones_applying_at_once_merge_their_receipts_notes(tmp_path: Path) -> None:
    """Two clones each apply a job and `git genjob push`: the second push merges the diverged
    refs/notes/genjob-receipts (cat_sort_uniq, as refs/notes/genjob) and the remote keeps both."""
    bare, a = repo_with_remote(tmp_path, "a")
    key = setup_worker(a)
    git(a, "push", "-q", "--no-verify", "origin", "main")
    b = tmp_path / "b"
    git(tmp_path, "clone", "-q", str(bare), str(b))
    assert run_genjob("init", cwd=b).code == 0
    landed = []
    for clone, path in ((a, "src/user.py"), (b, "README.md")):
        k = submit_key(clone, "-m", f"edit {path}", path)
        assert work(clone, key, f"echo new > {path}", "--once").code == 0
        assert run_genjob("apply", k, cwd=clone).code == 0
        landed.append(git(clone, "rev-parse", "HEAD").strip())
    assert run_genjob("push", cwd=a).code == 0
    res = run_genjob("push", "--json", cwd=b)
    assert res.code == 0, res.err
    tree = git(bare, "ls-tree", "-r", "--name-only", "refs/notes/genjob-receipts").split()
    assert sorted(name.replace("/", "") for name in tree) == sorted(landed)
    assert run_genjob("fetch", cwd=a).code == 0
    assert run_genjob("audit", cwd=a).code == 0
