"""apply beside a human's git (issue 22 items 10-11): git's index lock and ref locks, held by a
running git or left by a killed one. apply checks every lock it needs before the branch moves and
exits 4 naming the lock, since when and how to clear it, with nothing written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from git_genjob.documents.errors import LockHeld
from git_genjob.storage.notes import write_note
from git_genjob.storage.store import Store
from tests.helpers.common import git, refs, run_genjob, setup_worker, submit_key, work

GOOD = "echo 'def fetch_user(uid, timeout=1):\n    return uid' > src/user.py"


def state(repo: Path) -> tuple[dict[str, str], str, str, bytes]:
    """Everything apply could half-write: every ref (branch, notes, archive, job), the index,
    the work tree's status and the output file's bytes."""
    return (
        refs(repo),
        git(repo, "ls-files", "-s"),
        git(repo, "status", "--porcelain"),
        (repo / "src/user.py").read_bytes(),
    )


@pytest.fixture
def done(repo: Path) -> tuple[Path, str]:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert work(repo, key, GOOD, "--once").code == 0
    return repo, k


def wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


@pytest.fixture
def editor_commit(done: tuple[Path, str], tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """A human's `git commit -a` with its editor open: git holds index.lock meanwhile (a plain
    `git commit` of what is staged releases it before the editor starts; `-a` and a pathspec do not)."""
    repo, _k = done
    (repo / "README.md").write_text("project, edited by hand\n")
    go = tmp_path / "editor-done"
    editor = tmp_path / "editor.sh"
    editor.write_text(f'#!/bin/sh\nwhile [ ! -e {go} ]; do sleep 0.05; done\necho "hand edit" > "$1"\n')
    editor.chmod(0o755)
    env = {**os.environ, "GIT_EDITOR": str(editor)}
    proc = subprocess.Popen(["git", "commit", "-q", "-a"], cwd=repo, env=env, start_new_session=True)
    wait_for(repo / ".git" / "index.lock", proc)
    yield proc, go
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_apply_while_git_commit_waits_for_its_editor_exits_4_and_writes_nothing(
    done: tuple[Path, str], editor_commit: tuple[subprocess.Popen[bytes], Path]
) -> None:
    repo, k = done
    proc, go = editor_commit
    before = state(repo)
    res = run_genjob("apply", k, "--json", cwd=repo)
    assert res.code == 4, res.err
    err = json.loads(res.out or res.err)
    assert ".git/index.lock" in err["error"] and "since" in err["error"]
    assert "nothing was written" in err["error"]
    assert "git commit" in err["hint"]
    assert state(repo) == before  # branch, index, work tree, notes, archive and job ref unchanged
    # The human's commit then lands as they meant it, reverting nothing; apply, retried, lands after it.
    go.write_text("")
    assert proc.wait(timeout=60) == 0
    assert git(repo, "log", "-1", "--format=%s") == "hand edit\n"
    assert git(repo, "show", "HEAD", "--stat", "--format=").split()[0] == "README.md"
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 0, res.err
    assert "timeout=1" in git(repo, "show", "HEAD:src/user.py")
    assert git(repo, "show", "HEAD:README.md") == "project, edited by hand\n"
    assert git(repo, "status", "--porcelain") == ""


def test_apply_after_a_killed_git_left_index_lock_names_it_and_how_to_clear_it(
    done: tuple[Path, str], editor_commit: tuple[subprocess.Popen[bytes], Path]
) -> None:
    repo, k = done
    proc, _go = editor_commit
    os.killpg(proc.pid, signal.SIGKILL)  # git killed mid-commit: its index.lock stays behind
    proc.wait()
    lock = repo / ".git" / "index.lock"
    assert lock.exists()
    before = state(repo)
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 4
    assert str(lock) in res.err and "since" in res.err
    assert f"rm {lock}" in res.err and "kept moving" not in res.err
    assert state(repo) == before
    lock.unlink()  # the one command the message gives
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 0, res.err
    assert "timeout=1" in git(repo, "show", "HEAD:src/user.py")


def hold_ref_lock(repo: Path, ref: str) -> subprocess.Popen[bytes]:
    """A real git holding `ref`'s lock: `git update-ref --stdin` between prepare and commit."""
    head = git(repo, "rev-parse", "HEAD").strip()
    proc = subprocess.Popen(["git", "update-ref", "--stdin"], cwd=repo, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(f"start\nupdate {ref} {head}\nprepare\n".encode())
    proc.stdin.flush()
    assert proc.stdout.readline() == b"start: ok\n"
    assert proc.stdout.readline() == b"prepare: ok\n"
    return proc


@pytest.mark.parametrize("ref", ["refs/notes/genjob", "refs/genjob/archive"])
def test_a_ref_lock_left_by_a_killed_git_refuses_before_the_branch_moves(done: tuple[Path, str], ref: str) -> None:
    repo, k = done
    holder = hold_ref_lock(repo, ref)
    holder.kill()
    holder.wait()
    lock = repo / ".git" / f"{ref}.lock"
    assert lock.exists()
    before = state(repo)
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 4
    assert f"{ref}.lock" in res.err and "since" in res.err and f"rm {lock}" in res.err
    assert "kept moving" not in res.err
    assert state(repo) == before  # the commit did not land: no job without its note
    lock.unlink()
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert "genjob" in git(repo, "notes", "--ref=genjob", "show", "HEAD")


def test_a_held_notes_lock_is_reported_as_a_lock_not_as_a_ref_that_kept_moving(repo: Path) -> None:
    """The shared CAS retry helper gives up on a lock at once (after git's brief wait): it never
    spends 50 tries on it and never calls it a race."""
    holder = hold_ref_lock(repo, "refs/notes/genjob")
    try:
        store = Store.open(str(repo))
        head = store.ref_target("refs/heads/main")
        assert head is not None
        with pytest.raises(LockHeld, match=r"refs/notes/genjob\.lock") as err:
            write_note(store, head, b"a note\n")
        assert "kept moving" not in err.value.message
        assert "refs/notes/genjob" not in refs(repo)
    finally:
        holder.kill()
        holder.wait()


def test_checkout_with_the_index_locked_writes_nothing_and_says_so(
    done: tuple[Path, str], editor_commit: tuple[subprocess.Popen[bytes], Path]
) -> None:
    """What apply's last-instant rollback rests on: when git took index.lock after apply's check,
    checkout_outputs fails before writing the index or the work tree (IndexUntouched), so moving
    the branch back leaves everything as it was."""
    from git_genjob.storage.worktree import IndexUntouched, checkout_outputs

    repo, _k = done
    before = state(repo)
    store = Store.open(str(repo))
    blob = store.blob(b"def fetch_user(uid, timeout=1):\n    return uid\n")
    with pytest.raises(IndexUntouched, match=r"index\.lock"):
        checkout_outputs(store, {"src/user.py": blob}, {})
    assert state(repo) == before
