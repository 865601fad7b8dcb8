"""Locks (storage/locks.py): a lock a killed writer left is named, and `recover` clears it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.common import (
    run_genjob,
    run_genjob_process,
    submit_key,
    work,
)
from tests.landing.test_apply import GOOD


def _queued_job(repo: Path) -> str:
    return submit_key(repo, "-m", "Add a timeout", "src/user.py")


def _done_job(repo: Path, key: Path) -> str:
    k = _queued_job(repo)
    assert work(repo, key, GOOD, "--once").code == 0
    return k


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_a_lock_left_by_a_killed_writer_is_named_and_cleared_by_recover(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = _done_job(repo, key)
    res = run_genjob_process("apply", k, cwd=repo, env={"GENJOB_FAULT": "ref-locked"})
    assert res.code == -9
    lock = repo / ".git/refs/heads/main.lock"
    assert lock.exists()  # the first ref apply locks is the branch
    res = run_genjob_process("apply", k, cwd=repo, timeout=30)
    assert res.code == 4 and str(lock) in res.err and "no longer running" in res.err, res.err
    assert "git genjob recover" in res.err
    rec = run_genjob("recover", "--json", cwd=repo)  # the dead writer recorded it: safe to clear
    assert json.loads(rec.out)["locks"] == [str(lock)] and not lock.exists()
    assert run_genjob("apply", k, cwd=repo).code == 0


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_a_stale_job_ref_lock_is_cleared_by_recover(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = _queued_job(repo)
    res = run_genjob_process("work", "--generator", "exec:true", "--signing-key", str(key), "--once",
                             cwd=repo, env={"GENJOB_FAULT": "ref-locked"})  # fmt: skip
    assert res.code == -9
    lock = repo / f".git/refs/genjob/jobs/{k}.lock"
    assert lock.exists()
    res = work(repo, key, GOOD, "--once")
    assert res.code == 4 and "stale lock" in res.out + res.err
    rec = run_genjob("recover", "--json", cwd=repo)
    assert json.loads(rec.out)["locks"] == [str(lock)]
    assert work(repo, key, GOOD, "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
