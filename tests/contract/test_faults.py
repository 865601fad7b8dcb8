"""The fault-injection matrix (issue 9): SIGKILL each multi-step write at every persistence step.

Each row runs one real command in its own process with GENJOB_FAULT naming a crash point
(git_genjob/storage/faults.py), asserts that it died there, and then checks what must hold after any
crash: `git fsck --strict` is clean, the job is neither lost nor applied twice, no output path
holds a torn file, and the ordinary next commands (`recover`, then work/retry/apply as the
state asks) reach the applied state without anyone clearing anything by hand.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.helpers.common import Result, git, make_repo, refs, run_genjob, run_genjob_process, setup_worker, submit_key

INPUT = "def fetch_user(uid):\n    return {'id': uid}\n"
OUTPUT = "def fetch_user(uid, timeout=1):\n    return uid\n"
GEN = f"printf '{OUTPUT}' > src/user.py".replace("\n", "\\n")
SLOW_GEN = f"sleep 0.8; {GEN}"
LEASE = "1s"


def _work(repo: Path, key: Path, fault: str | None = None, gen: str = GEN, *extra: str) -> Result:
    env = {"GENJOB_FAULT": fault} if fault else None
    args = ["work", "--generator", f"exec:{gen}", "--signing-key", str(key), "--worker-id", "w1"]
    return run_genjob_process(*args, "--once", "--lease", LEASE, "--json", *extra, cwd=repo, env=env, timeout=60)


def _state(repo: Path, k: str) -> str:
    res = run_genjob("status", k, "--json", cwd=repo)
    assert res.code == 0, res.err
    return str(json.loads(res.out)["state"])


def _drive_to_applied(repo: Path, key: Path, k: str) -> None:
    """What a user does next, step by step, until the job is applied; nothing cleared by hand."""
    time.sleep(1.1)  # every lease of a killed worker has lapsed
    rec = run_genjob("recover", "--json", cwd=repo)
    assert rec.code == 0, rec.err
    for _ in range(6):
        state = _state(repo, k)
        if state == "applied":
            return
        if state == "queued":
            assert _work(repo, key).code == 0
        elif state == "unknown":
            assert run_genjob("retry", k, cwd=repo).code == 0
        elif state == "done":
            res = run_genjob("apply", k, cwd=repo)
            assert res.code == 0, res.err
        else:
            time.sleep(1.1)
            assert run_genjob("recover", cwd=repo).code == 0
    raise AssertionError(f"job {k} did not reach applied: {_state(repo, k)}")


def _invariants(repo: Path, k: str, landed_text: str = OUTPUT) -> None:
    git(repo, "fsck", "--strict")
    rows = [r for r in json.loads(run_genjob("status", "--all", "--json", cwd=repo).out) if r["key"] == k]
    assert [r["state"] for r in rows] == ["applied"]  # never lost, never twice
    landed = git(repo, "log", "--format=%(trailers:key=Genjob-Key,valueonly)", "HEAD").split()
    assert landed.count(k) == 1  # applied exactly once
    assert (repo / "src/user.py").read_text() == landed_text  # no torn file
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    assert f"refs/genjob/jobs/{k}" not in refs(repo)
    assert not list((repo / ".git").rglob("*.lock"))
    assert run_genjob("audit", cwd=repo).code == 0


@pytest.fixture
def ready(repo: Path) -> tuple[Path, Path, str]:
    key = setup_worker(repo)
    return repo, key, submit_key(repo, "-m", "Add a timeout", "src/user.py")


SUBMIT_FAULTS = ["ref-locked"]
WORK_FAULTS = ["ref-locked@1", "after-claim", "ref-locked@2", "after-sending", "after-generate", "ref-locked@3"]
APPLY_FAULTS = [
    "ref-locked@1",
    "after-commit",
    "mid-checkout",
    "after-worktree",
    "ref-locked@2",
    "after-note",
    "ref-locked@3",
    "archive-written",
    "ref-locked@4",
]


@pytest.mark.slow
@pytest.mark.parametrize("fault", SUBMIT_FAULTS)
def test_submit_killed(repo: Path, fault: str) -> None:
    key = setup_worker(repo)
    res = run_genjob_process("submit", "-m", "Add a timeout", "src/user.py", cwd=repo, env={"GENJOB_FAULT": fault})
    assert res.code == -9, res.err
    assert run_genjob("recover", cwd=repo).code == 0  # clears the dead writer's lock
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    _drive_to_applied(repo, key, k)
    _invariants(repo, k)


@pytest.mark.slow
@pytest.mark.parametrize("fault", WORK_FAULTS)
def test_work_killed(ready: tuple[Path, Path, str], fault: str) -> None:
    repo, key, k = ready
    res = _work(repo, key, fault)
    assert res.code == -9, (res.code, res.err)
    _drive_to_applied(repo, key, k)
    _invariants(repo, k)


@pytest.mark.slow
def test_work_killed_while_renewing(ready: tuple[Path, Path, str]) -> None:
    repo, key, k = ready
    res = _work(repo, key, "ref-locked@3", SLOW_GEN)  # claim, sending, then the first renewal
    assert res.code == -9, (res.code, res.err)
    _drive_to_applied(repo, key, k)
    _invariants(repo, k)


@pytest.mark.slow
@pytest.mark.parametrize("fault", APPLY_FAULTS)
def test_apply_killed(ready: tuple[Path, Path, str], fault: str) -> None:
    repo, key, k = ready
    assert _work(repo, key).code == 0
    res = run_genjob_process("apply", k, cwd=repo, env={"GENJOB_FAULT": fault})
    assert res.code == -9, (res.code, res.err)
    _drive_to_applied(repo, key, k)
    _invariants(repo, k)


TAIL = "\n\n# unrelated\n\n\ndef other():\n    return 2\n"


@pytest.mark.slow
@pytest.mark.parametrize("fault", APPLY_FAULTS)
def test_merged_apply_killed(tmp_path: Path, fault: str) -> None:
    """SPEC §11: an apply that merges onto a moved branch, killed at each step, then finished."""
    repo = make_repo(tmp_path / "repo", {"src/user.py": INPUT + TAIL})
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert _work(repo, key, None, f"printf '{OUTPUT + TAIL}' > src/user.py".replace("\n", "\\n")).code == 0
    (repo / "src/user.py").write_text(INPUT + TAIL.replace("return 2", "return 3"))
    git(repo, "commit", "-qam", "a teammate moves the branch")
    res = run_genjob_process("apply", k, cwd=repo, env={"GENJOB_FAULT": fault})
    assert res.code == -9, (res.code, res.err)
    _drive_to_applied(repo, key, k)
    _invariants(repo, k, OUTPUT + TAIL.replace("return 2", "return 3"))
    assert "Genjob-Merged-Onto: " in git(repo, "log", "-1", "--format=%B")
    assert "verified (merged)" in run_genjob("audit", cwd=repo).out


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["ref-locked@1", "ref-locked@2", "archive-written"])
def test_resubmit_killed(ready: tuple[Path, Path, str], fault: str) -> None:
    """SPEC §11: resubmit is submit, then the old job's archive move; killed anywhere, run again."""
    repo, key, k = ready
    assert _work(repo, key).code == 0
    (repo / "src/user.py").write_text("def fetch_user(uid):\n    return 'moved on'\n")
    git(repo, "commit", "-qam", "the branch moves under the job")
    res = run_genjob_process("resubmit", k, cwd=repo, env={"GENJOB_FAULT": fault})
    assert res.code == -9, (res.code, res.err)
    assert run_genjob("recover", cwd=repo).code == 0  # clears a dead writer's lock
    res = run_genjob("resubmit", k, "--json", cwd=repo)
    assert res.code == 0, res.err
    new = json.loads(res.out)["new"]
    git(repo, "fsck", "--strict")
    rows = {r["key"]: r["state"] for r in json.loads(run_genjob("status", "--all", "--json", cwd=repo).out)}
    assert rows == {k: "superseded", new: "queued"}
    assert not list((repo / ".git").rglob("*.lock"))


@pytest.mark.slow
def test_recover_and_retry_killed(ready: tuple[Path, Path, str]) -> None:
    repo, key, k = ready
    assert _work(repo, key, "after-sending").code == -9
    time.sleep(1.1)
    res = run_genjob_process("recover", cwd=repo, env={"GENJOB_FAULT": "ref-locked"})
    assert res.code == -9
    assert run_genjob("recover", cwd=repo).code == 0
    assert _state(repo, k) == "unknown"
    res = run_genjob_process("retry", k, cwd=repo, env={"GENJOB_FAULT": "ref-locked"})
    assert res.code == -9
    _drive_to_applied(repo, key, k)
    _invariants(repo, k)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["ref-locked", "archive-written"])
def test_drop_killed(ready: tuple[Path, Path, str], fault: str) -> None:
    repo, _, k = ready
    res = run_genjob_process("drop", k, "--why", "not needed", cwd=repo, env={"GENJOB_FAULT": fault})
    assert res.code == -9
    assert run_genjob("recover", cwd=repo).code == 0
    res = run_genjob("drop", k, "--why", "not needed", "--json", cwd=repo)
    assert res.code == 0 and json.loads(res.out)["state"] == "dropped", res.err
    git(repo, "fsck", "--strict")
    assert [r["state"] for r in json.loads(run_genjob("status", "--all", "--json", cwd=repo).out)] == ["dropped"]
    assert f"refs/genjob/jobs/{k}" not in refs(repo)


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["replay-recorded", "ref-locked"])
def test_replay_record_killed(repo: Path, stub, fault: str) -> None:  # type: ignore[no-untyped-def]
    stub.answer = "the answer"
    (repo / "prompt.txt").write_text("What is it?\n")
    args = [
        "ask",
        "--endpoint",
        f"{stub.url}/v1",
        "--model",
        "m1",
        "--prompt-file",
        "prompt.txt",
        "--out-file",
        "o.txt",
    ]
    res = run_genjob_process(*args, cwd=repo, env={"GENJOB_FAULT": fault})
    assert res.code == -9
    assert run_genjob("recover", cwd=repo).code == 0
    res = run_genjob("ask", *args[1:], cwd=repo)
    assert res.code == 0, res.err
    assert (repo / "o.txt").read_text() == "the answer"
    res = run_genjob("ask", *args[1:], cwd=repo)
    assert res.code == 0 and "replay" in res.out
    git(repo, "fsck", "--strict")


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["after-push", "ref-locked@1"])
def test_remote_claim_killed(tmp_path: Path, fault: str) -> None:
    from tests.helpers.common import repo_with_remote

    bare, repo = repo_with_remote(tmp_path, "a")
    key = setup_worker(repo)
    git(repo, "push", "-q", "origin", "main")
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert run_genjob("push", cwd=repo).code == 0
    res = _work(repo, key, fault, GEN, "--remote", "origin")
    assert res.code == -9, res.err
    time.sleep(1.1)
    assert run_genjob("recover", "--remote", "origin", cwd=repo).code == 0
    for _ in range(4):
        state = _state(repo, k)
        if state == "done":
            break
        if state == "unknown":
            assert run_genjob("retry", k, "--remote", "origin", cwd=repo).code == 0
        assert _work(repo, key, None, GEN, "--remote", "origin").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    _invariants(repo, k)
    assert run_genjob("push", cwd=repo).code == 0
    git(bare, "fsck", "--strict")
