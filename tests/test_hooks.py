"""Hooks end to end through real `git commit` and `git push` (SPEC §9)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import git, make_repo, refs, repo_with_remote, run_genjob, setup_worker, submit_key, work


def git_rc(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)


def test_install_chains_an_existing_user_hook(repo: Path, tmp_path: Path) -> None:
    user_hook = repo / ".git/hooks/pre-commit"
    marker = tmp_path / "user-hook-ran"
    user_hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    user_hook.chmod(0o755)
    res = run_genjob("init", "--hooks", cwd=repo)
    assert res.code == 0 and "kept as pre-commit.genjob-chained" in res.out
    assert run_genjob("init", "--hooks", cwd=repo).code == 0  # re-running replaces only genjob's scripts
    assert (repo / ".git/hooks/pre-commit.genjob-chained").read_text().startswith("#!/bin/sh\ntouch")
    (repo / "README.md").write_text("edit\n")
    git(repo, "commit", "-qam", "hand edit")
    assert marker.exists()


def test_pre_commit_refuses_paths_held_by_a_live_job(repo: Path) -> None:
    setup_worker(repo)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    k = submit_key(repo, "-m", "x", "src/user.py")
    (repo / "src/user.py").write_text("hand edit\n")
    git(repo, "add", "src/user.py")
    head = git(repo, "rev-parse", "HEAD")
    proc = git_rc(repo, "commit", "-qm", "hand edit")
    assert proc.returncode != 0 and f"src/user.py is held by live job {k}" in proc.stderr  # git reports 1
    assert git(repo, "rev-parse", "HEAD") == head
    assert git_rc(repo, "commit", "-qm", "hand edit", "--no-verify").returncode == 0


def test_commit_msg_refuses_unbacked_trailers(repo: Path) -> None:
    key = setup_worker(repo)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    (repo / "README.md").write_text("edit\n")
    git(repo, "add", "README.md")
    proc = git_rc(repo, "commit", "-qm", "sneaky\n\nGenjob-Key: nope\nGenjob-Job: sha256:" + "0" * 64)
    assert proc.returncode == 1 and "no verified receipt backs" in proc.stderr
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key, "echo y > src/user.py", "--once").code == 0
    proc = git_rc(repo, "commit", "-qm", f"claims a job\n\nGenjob-Key: {k}\nGenjob-Job: sha256:" + "1" * 64)
    assert proc.returncode == 1 and "Genjob-Job is sha256:111" in proc.stderr
    assert git_rc(repo, "commit", "-qm", "plain").returncode == 0


def test_pre_push_demands_notes_and_audit(tmp_path: Path) -> None:
    bare, repo = repo_with_remote(tmp_path, "a")
    key = setup_worker(repo)
    git(repo, "config", "core.hooksPath", ".githooks")
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    assert (repo / ".githooks/pre-push").exists()
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key, "echo y > src/user.py", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    before = refs(bare)
    proc = git_rc(repo, "push", "origin", "main")
    assert proc.returncode != 0 and "its note is not on origin" in proc.stderr
    assert refs(bare) == before
    assert run_genjob("push", cwd=repo).code == 0
    proc = git_rc(repo, "push", "origin", "main")
    assert proc.returncode == 0, proc.stderr
    # A tampered genjob commit is refused even with its note on the remote.
    msg = git(repo, "log", "-1", "--format=%B").replace("Genjob-Worker: w1", "Genjob-Worker: mallory")
    git(repo, "commit", "--amend", "-q", "--no-verify", "-m", msg)
    assert run_genjob("push", cwd=repo).code == 0
    proc = git_rc(repo, "push", "-f", "origin", "main")
    assert proc.returncode != 0 and "mallory" in proc.stderr


def test_pre_apply_policy_from_config(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    key = setup_worker(repo)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    (repo / ".genjob/config.toml").write_text('[hooks]\npre_apply = "grep -q ok $GENJOB_OUTPUTS/src/user.py"\n')
    git(repo, "commit", "-qam", "policy")
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key, "echo bad > src/user.py", "--once").code == 0
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "pre-apply hook refused" in res.err
    assert run_genjob("drop", k, "--why", "policy", cwd=repo).code == 0
    k2 = submit_key(repo, "-m", "y", "src/user.py")
    assert work(repo, key, "echo ok > src/user.py", "--once").code == 0
    res = run_genjob("apply", k2, "--json", cwd=repo)
    assert res.code == 0 and json.loads(res.out)["commit"]


def test_an_unknown_hook_over_a_chained_one_needs_force(repo: Path) -> None:
    hooks = repo / ".git/hooks"
    (hooks / "commit-msg").write_text("#!/bin/sh\necho first\n")
    (hooks / "commit-msg").chmod(0o755)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    (hooks / "commit-msg").write_text("#!/bin/sh\necho second\n")  # the user replaced ours
    before = {p.name: p.read_text() for p in hooks.iterdir() if not p.name.endswith(".sample")}
    res = run_genjob("init", "--hooks", cwd=repo)
    assert res.code == 2 and "--force" in res.err
    assert {p.name: p.read_text() for p in hooks.iterdir() if not p.name.endswith(".sample")} == before
    assert run_genjob("init", "--hooks", "--force", cwd=repo).code == 0
    assert (hooks / "commit-msg.genjob-chained").read_text().endswith("echo second\n")
    assert (hooks / "commit-msg.genjob-chained.old").read_text().endswith("echo first\n")


def test_hook_entries_load_neither_click_nor_libgit2_when_idle(repo: Path) -> None:
    import sys

    probe = (
        "import sys; from git_genjob.entry import main; code = main(sys.argv[1:]); "
        "print(code, 'click' in sys.modules, 'pygit2' in sys.modules)"
    )
    msg = repo / "msg.txt"
    msg.write_text("plain message\n")
    for args in (["hook", "pre-commit"], ["hook", "commit-msg", str(msg)], ["-h"]):
        out = subprocess.run([sys.executable, "-c", probe, *args], cwd=repo, capture_output=True, text=True)
        assert out.stdout.strip().splitlines()[-1] == "0 False False", (args, out.stdout, out.stderr)
