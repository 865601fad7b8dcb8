"""Issue 35 "Bad input", SPEC §12.4: a stop signal (SIGINT, SIGTERM, SIGHUP) at any fault point of
`submit`, `apply` (plain and merged), `resubmit --remote` and `push` leaves the refs, here and on
the bare remote, the index and the work tree as before or as after, never between; the command
exits 128 + the signal's number, and running it again completes."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.contract.test_faults import _work
from tests.helpers.common import (
    drop_planner_key,
    git,
    make_repo,
    refs,
    repo_with_remote,
    run_genjob,
    run_genjob_process,
    setup_worker,
    submit_key,
)

OUTPUT = "def fetch_user(uid, timeout=1):\n    return uid\n"
GEN = f"printf '{OUTPUT}' > src/user.py".replace("\n", "\\n")
SIGS = ["INT", "TERM", "HUP"]


def _stopped(args: list[str], repo: Path, fault: str, sig: str) -> None:
    res = run_genjob_process(*args, cwd=repo, env={"GENJOB_FAULT": fault, "GENJOB_FAULT_SIGNAL": sig})
    assert res.code == 128 + getattr(signal, f"SIG{sig}"), (res.code, res.err)
    assert f"interrupted: SIG{sig}" in res.err
    assert "Traceback" not in res.err
    git(repo, "fsck", "--strict")
    assert not list((repo / ".git").rglob("*.lock"))


def _worktree(repo: Path) -> tuple[str, str, str, bytes]:
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "ls-files", "-s"),
        git(repo, "status", "--porcelain"),
        (repo / "src/user.py").read_bytes(),
    )


def _state(repo: Path, k: str) -> str:
    return str(json.loads(run_genjob("status", k, "--json", cwd=repo).out)["state"])


@pytest.mark.parametrize(("fault", "sig"), [("ref-locked", s) for s in SIGS])
def test_submit_interrupted_stores_the_job_whole(repo: Path, fault: str, sig: str) -> None:
    setup_worker(repo)
    before = _worktree(repo)
    _stopped(["submit", "-m", "Add a timeout", "src/user.py"], repo, fault, sig)
    assert _worktree(repo) == before
    rows = json.loads(run_genjob("status", "--all", "--json", cwd=repo).out)
    assert [r["state"] for r in rows] == ["queued"]  # as after: one whole job
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")  # the rerun: already stored
    assert [r["key"] for r in rows] == [k]


APPLY_POINTS = ["ref-locked@1", "after-commit", "mid-checkout", "after-worktree", "after-note", "archive-written"]


@pytest.mark.parametrize("fault", APPLY_POINTS)
def test_apply_interrupted_lands_whole(repo: Path, fault: str) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert _work(repo, key).code == 0
    sig = SIGS[APPLY_POINTS.index(fault) % 3]
    _stopped(["apply", k], repo, fault, sig)
    assert _state(repo, k) == "applied"
    assert (repo / "src/user.py").read_text() == OUTPUT
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert git(repo, "log", "-1", "--format=%(trailers:key=Genjob-Key,valueonly)").strip() == k
    assert run_genjob("apply", k, cwd=repo).code == 0  # the rerun: already applied
    assert run_genjob("audit", cwd=repo).code == 0


TAIL = "\n\n# unrelated\n\n\ndef other():\n    return 2\n"


@pytest.mark.parametrize("fault", ["after-commit", "mid-checkout", "archive-written"])
def test_merged_apply_interrupted_lands_whole(tmp_path: Path, fault: str) -> None:
    repo = make_repo(tmp_path / "repo", {"src/user.py": "def fetch_user(uid):\n    return {'id': uid}\n" + TAIL})
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert _work(repo, key, None, f"printf '{OUTPUT + TAIL}' > src/user.py".replace("\n", "\\n")).code == 0
    (repo / "src/user.py").write_text("def fetch_user(uid):\n    return {'id': uid}\n" + TAIL.replace("2", "3"))
    git(repo, "commit", "-qam", "a teammate moves the branch")
    _stopped(["apply", k], repo, fault, "INT")
    assert _state(repo, k) == "applied"
    assert (repo / "src/user.py").read_text() == OUTPUT + TAIL.replace("2", "3")
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert "Genjob-Merged-Onto: " in git(repo, "log", "-1", "--format=%B")


@pytest.mark.parametrize(("fault", "sig"), [("after-push", s) for s in SIGS])
def test_push_interrupted_publishes_whole(tmp_path: Path, fault: str, sig: str) -> None:
    bare, repo = repo_with_remote(tmp_path, "a")
    setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    before = _worktree(repo)
    _stopped(["push", "origin"], repo, fault, sig)
    git(bare, "fsck", "--strict")
    assert _worktree(repo) == before
    mine, theirs = refs(repo), refs(bare)
    assert theirs[f"refs/genjob/jobs/{k}"] == mine[f"refs/genjob/jobs/{k}"]
    assert run_genjob("push", "origin", cwd=repo).code == 0
    assert refs(bare)[f"refs/genjob/jobs/{k}"] == mine[f"refs/genjob/jobs/{k}"]


@pytest.mark.parametrize(("fault", "sig"), [("ref-locked@1", "INT"), ("after-push", "TERM"), ("ref-locked@3", "HUP")])
def test_resubmit_remote_interrupted_supersedes_whole(tmp_path: Path, fault: str, sig: str) -> None:
    from tests.landing.test_merge import _superseded_pair

    bare, repo, two = _superseded_pair(tmp_path)
    before = _worktree(repo) if (repo / "src/user.py").exists() else None
    _stopped(["resubmit", two, "--remote", "origin"], repo, fault, sig)
    git(bare, "fsck", "--strict")
    if before is not None:
        assert _worktree(repo) == before
    mine, theirs = refs(repo), refs(bare)
    jobs = [r for r in theirs if r.startswith("refs/genjob/jobs/")]
    assert f"refs/genjob/jobs/{two}" not in theirs and len(jobs) == 1  # as after, on the remote
    assert mine[jobs[0]] == theirs[jobs[0]] and mine["refs/genjob/archive"] == theirs["refs/genjob/archive"]
    assert _state(repo, two) == "superseded"
    res = run_genjob("resubmit", two, "--remote", "origin", "--json", cwd=repo)  # the rerun says it is done
    assert res.code == 0, res.err


def test_errors_a_doctor_check_explains_end_their_hint_with_doctor(repo: Path, tmp_path: Path) -> None:
    """Issue 35: a missing planner key, a missing or unsafe worker key (doctor's keys checks): each hint
    ends with `git genjob doctor`, and nothing was written."""
    before = refs(repo)
    res = run_genjob("work", "--generator", "exec:true", "--once", "--signing-key", str(tmp_path / "nokey"), cwd=repo)
    assert res.code == 2 and res.err.rstrip().endswith("git genjob doctor"), res.err
    drop_planner_key()
    assert run_genjob("init", "--no-planner-key", cwd=repo).code == 0
    before = refs(repo)
    res = run_genjob("submit", "-m", "Add a timeout", "src/user.py", cwd=repo)  # no planner key
    assert res.code == 2 and res.err.rstrip().endswith("git genjob doctor"), res.err
    assert refs(repo) == before
    key = tmp_path / "keys" / "w1"
    assert run_genjob("keygen", "--name", "w1", "--out", str(key), cwd=repo).code == 0
    key.chmod(0o644)
    res = run_genjob("work", "--generator", "exec:true", "--once", "--signing-key", str(key), cwd=repo)
    assert res.code == 2 and res.err.rstrip().endswith("git genjob doctor"), res.err
    assert refs(repo) == before
