"""Hooks end to end through real `git commit` and `git push` (SPEC §9)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.common import (
    git,
    make_repo,
    refs,
    repo_with_remote,
    run_genjob,
    setup_worker,
    submit_key,
    work,
)


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


@pytest.mark.parametrize("hooks", ["none", "genjob", "user"])
def test_the_committed_gate_runs_whatever_hooks_the_clone_has(tmp_path: Path, hooks: str) -> None:
    """[hooks] pre_apply is the repository's policy (SPEC §12.3): a clone without `init --hooks`
    runs it, genjob's own hook runs it once, and a user's own pre-apply hook does not replace it."""
    repo = make_repo(tmp_path / "r")
    key = setup_worker(repo)
    runs = tmp_path / "gate-runs"
    (repo / ".genjob/config.toml").write_text(
        f'[hooks]\npre_apply = "echo ran >> {runs}; grep -q ok $GENJOB_OUTPUTS/src/user.py"\n'
    )
    git(repo, "commit", "-qam", "policy")
    if hooks == "genjob":
        assert run_genjob("init", "--hooks", cwd=repo).code == 0
    user_ran = tmp_path / "user-hook-ran"
    if hooks == "user":
        hook = repo / ".git/hooks/pre-apply"
        hook.write_text(f'#!/bin/sh\necho "$1" >> {user_ran}\n')
        hook.chmod(0o755)
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key, "echo bad > src/user.py", "--once").code == 0
    head, status = git(repo, "rev-parse", "HEAD"), git(repo, "status", "--porcelain")
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "refused job" in res.err, res.err
    assert git(repo, "rev-parse", "HEAD") == head and git(repo, "status", "--porcelain") == status
    assert runs.read_text() == "ran\n"  # once, by whichever runner the clone has
    assert run_genjob("drop", k, "--why", "policy", cwd=repo).code == 0
    k2 = submit_key(repo, "-m", "y", "src/user.py")
    assert work(repo, key, "echo ok > src/user.py", "--once").code == 0
    res = run_genjob("apply", k2, "--json", cwd=repo)
    assert res.code == 0, res.err
    landed = json.loads(res.out)["commit"]
    assert git(repo, "rev-parse", "HEAD").strip() == landed and (repo / "src/user.py").read_text() == "ok\n"
    assert runs.read_text() == "ran\nran\n"
    if hooks == "user":
        assert user_ran.read_text() == f"{k}\n{k2}\n"


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


# -- speed without a change of verdict (issue 24) ---------------------------------------------


def _no_genjob_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """PATH without the directories that hold a git-genjob (CI's activated venv has one)."""
    path = os.environ.get("PATH", "").split(os.pathsep)
    monkeypatch.setenv("PATH", os.pathsep.join(d for d in path if not os.path.exists(os.path.join(d, "git-genjob"))))


def _hooks_without_python(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """genjob's scripts with an interpreter that does not exist and no git-genjob anywhere: a hook
    that reaches Python fails, so a hook that passes decided in sh alone. (CI runs the suite in
    an activated venv, whose bin/ holds a git-genjob: PATH leaves it out here.)"""
    from git_genjob.landing.hooks import HOOKS, render_hook

    _no_genjob_on_path(monkeypatch)

    for name in HOOKS:
        path = repo / ".git/hooks" / name
        path.write_text(render_hook(name, "/nonexistent/python3", "/nonexistent"))
        path.chmod(0o755)


def test_nothing_to_check_is_decided_without_python(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bare, repo = repo_with_remote(tmp_path, "a")
    _hooks_without_python(repo, monkeypatch)
    (repo / "README.md").write_text("edit\n")
    git(repo, "commit", "-qam", "plain commit\n\nGenjob mentioned mid-line is no trailer")
    proc = git_rc(repo, "push", "origin", "main")
    assert proc.returncode == 0, proc.stderr
    # ...and the same scripts do reach Python when there is something to check (not vacuous):
    proc = git_rc(repo, "commit", "--allow-empty", "-qm", "x\n\ngenjob-key: k")
    assert proc.returncode == 1 and "git-genjob is not installed" in proc.stderr
    git(repo, "commit", "--allow-empty", "-q", "--no-verify", "-m", "x\n\nGENJOB-key: k")  # any case
    before = refs(bare)
    proc = git_rc(repo, "push", "origin", "main")
    assert proc.returncode == 1 and "git-genjob is not installed" in proc.stderr
    assert refs(bare) == before
    setup_worker(repo)
    _hooks_without_python(repo, monkeypatch)
    submit_key(repo, "-m", "x", "src/user.py")
    proc = git_rc(repo, "commit", "--allow-empty", "-qm", "y")
    assert proc.returncode == 1 and "git-genjob is not installed" in proc.stderr


def test_pre_commit_sees_commit_a_packed_refs_and_a_stale_memo(repo: Path) -> None:
    """`git commit -a` commits a temporary index (GIT_INDEX_FILE); packed job refs and a memo of
    allowed paths that names other tips change nothing."""
    setup_worker(repo)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    k = submit_key(repo, "-m", "x", "src/user.py")
    git(repo, "pack-refs", "--all")
    assert not (repo / ".git/refs/genjob/jobs" / k).exists()
    memo = repo / ".git/genjob/hook-paths"
    memo.parent.mkdir(exist_ok=True)
    memo.write_text("0" * 40 + "\tsrc/user.py\nnot a line\n")
    (repo / "src/user.py").write_text("hand edit\n")
    head = git(repo, "rev-parse", "HEAD")
    proc = git_rc(repo, "commit", "-qam", "hand edit")
    assert proc.returncode == 1 and f"src/user.py is held by live job {k}" in proc.stderr
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "diff", "--cached", "--name-only") == ""  # the index git restored is untouched
    (repo / "README.md").write_text("edit\n")
    proc = git_rc(repo, "commit", "-qm", "other", "--", "README.md")  # `git commit PATH`: README only
    assert proc.returncode == 0, proc.stderr
    assert "src/user.py" in memo.read_text()  # the memo now holds the live tip
    (repo / "README.md").write_text("again\n")
    proc = git_rc(repo, "commit", "-qam", "both")  # -a includes the held path
    assert proc.returncode == 1 and "src/user.py is held" in proc.stderr


def test_pre_commit_on_the_first_commit_and_a_mode_only_change(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    setup_worker(repo)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    k = submit_key(repo, "-m", "x", "src/user.py")
    git(repo, "update-index", "--chmod=+x", "src/user.py")  # a mode change moves no held content
    assert git_rc(repo, "commit", "-qm", "mode").returncode == 0
    orphan = git_rc(repo, "checkout", "-q", "--orphan", "fresh")  # no HEAD: every staged path is new
    assert orphan.returncode == 0
    proc = git_rc(repo, "commit", "-qm", "first")
    assert proc.returncode == 1 and f"src/user.py is held by live job {k}" in proc.stderr


def test_hook_entries_as_installed_load_no_site_packages_until_needed(tmp_path: Path) -> None:
    """The installed scripts run `python -S`: the fast paths import nothing outside the standard
    library and git_genjob (no click, no libgit2), even with live jobs or a pushed commit."""
    import sys

    from git_genjob.landing.hooks import package_parent

    bare, repo = repo_with_remote(tmp_path, "a")
    setup_worker(repo)
    submit_key(repo, "-m", "x", "src/user.py")
    head = git(repo, "rev-parse", "HEAD").strip()
    msg = repo / "msg.txt"
    msg.write_text("plain\n\nSigned-off-by: A <a@x>\n")
    probe = (
        "import sys; sys.path.append(sys.argv[1]); from git_genjob.entry import main; code = main(sys.argv[2:]); "
        "bad = sorted(m for m in ('click', 'pygit2', 'nacl', 'site') if m in sys.modules); print(code, bad)"
    )
    pushed = f"refs/heads/main {head} refs/heads/main {'0' * 40}\n"
    # the first pre-commit judges the new job's planner signature (PyNaCl, once per job and
    # trust store); every later one reads that verdict from .git/genjob/hook-paths
    first = run_genjob("hook", "pre-commit", cwd=repo)
    assert first.code == 0, first.err
    for args, stdin in (
        (["hook", "pre-commit"], ""),
        (["hook", "commit-msg", str(msg)], ""),
        (["hook", "pre-push", "origin", str(bare)], pushed),
    ):
        out = subprocess.run(
            [sys.executable, "-S", "-P", "-c", probe, package_parent(), *args],
            cwd=repo,
            input=stdin,
            capture_output=True,
            text=True,
        )
        assert out.stdout.strip().splitlines()[-1] == "0 []", (args, out.stdout, out.stderr)


# -- trailers as git reads them (issue 22 item 8, SPEC §11) -------------------------------------

MESSAGES = [
    "s\n\nGenjob-Key: a\nGenjob-Job: b\n",
    "s\n\ngenjob-key: a\nGENJOB-JOB: b\n",
    "s\n\nGenjob-Key:a\n",
    "s\n\nGenjob-Key = a\n",
    "s\n\nGenjob-Key : a\nGenjob-Signer: x\n  continued\n",
    "s\n\nbody\nGenjob-Key: a\nmore body text that is not a trailer at all\n",
    "s\n\nGenjob-Key: a\n\nGenjob-Key: b\n",
    "s\n\n  Genjob-Key: a\n",
    "s\n\nGenjob-Key: a\n---\nGenjob-Job: b\n",
]


def _as_git_logs(repo: Path, message: str) -> dict[str, str]:
    git(repo, "commit", "--allow-empty", "-q", "--no-verify", "--cleanup=verbatim", "-m", message)
    out = git(repo, "log", "-1", "--format=%(trailers:only,unfold)")
    seen: dict[str, str] = {}
    for line in out.splitlines():
        key, _, value = line.partition(":")
        if key.lower().startswith("genjob-"):
            seen["-".join(p.capitalize() for p in key.split("-"))] = value.strip()
    return seen


def test_genjob_trailers_are_what_git_log_shows(repo: Path, monkeypatch: Any) -> None:
    from git_genjob.storage.gitdir import genjob_trailers_of, genjob_trailers_of_commit, read_commit_trailers

    monkeypatch.chdir(repo)
    for config in ([], ["trailer.separators", ":="]):
        if config:
            git(repo, "config", *config)
        made = []
        for message in MESSAGES:
            shown = _as_git_logs(repo, message)
            assert genjob_trailers_of(message) == shown, (config, message)
            made.append((git(repo, "rev-parse", "HEAD").strip(), message, shown))
        # the batch read of a range (audit, pre-push) agrees too
        gitdir = str(repo / ".git")
        read_commit_trailers(gitdir, [(oid, message) for oid, message, _ in made])
        for oid, message, shown in made:
            assert genjob_trailers_of_commit(oid, "", gitdir) == shown, (config, message)


def test_commit_msg_and_audit_read_trailers_as_git_does(repo: Path) -> None:
    key = setup_worker(repo)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    head = git(repo, "rev-parse", "HEAD")
    for message in ("x\n\ngenjob-key: nope\n", "x\n\nGenjob-Key:nope\n"):
        proc = git_rc(repo, "commit", "--allow-empty", "-qm", message)
        assert proc.returncode == 1 and "no verified receipt backs" in proc.stderr, message
        assert git(repo, "rev-parse", "HEAD") == head
    # With trailer.separators, git reads `Genjob-Key = x` as a trailer, and so does the hook.
    proc = git_rc(repo, "commit", "--allow-empty", "-qm", "x\n\nGenjob-Key = nope\n")
    assert proc.returncode == 0 and git(repo, "log", "-1", "--format=%(trailers:key=Genjob-Key)") == "\n"
    git(repo, "config", "trailer.separators", ":=")
    proc = git_rc(repo, "commit", "--allow-empty", "-qm", "x\n\nGenjob-Key = nope\n")
    assert proc.returncode == 1 and "no verified receipt backs" in proc.stderr
    git(repo, "config", "--unset", "trailer.separators")
    # audit: an applied commit whose trailers were rewritten in lower case is still a genjob
    # commit (git shows its trailers), so a tampered lower-case value fails it.
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key, "echo y > src/user.py", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    msg = git(repo, "log", "-1", "--format=%B").replace("Genjob-", "genjob-")
    git(repo, "commit", "--amend", "-q", "--no-verify", "-m", msg)
    assert k in git(repo, "log", "-1", "--format=%(trailers:key=Genjob-Key,valueonly)")
    res = run_genjob("audit", "HEAD~1..HEAD", cwd=repo)
    assert res.code == 0 and "1 genjob commit(s), 0 failing" in res.out, res.out + res.err
    tampered = msg.replace("genjob-Worker: w1", "genjob-Worker: mallory")
    git(repo, "commit", "--amend", "-q", "--no-verify", "-m", tampered)
    res = run_genjob("audit", "HEAD~1..HEAD", cwd=repo)
    assert res.code == 1 and "mallory" in res.out


def test_a_shared_hooks_directory_names_no_path_of_this_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tracked core.hooksPath: the scripts stay machine-independent and byte-identical across
    re-installs; this clone's interpreter is in its own config, and without it the script finds
    install.sh's ~/.local/bin/git-genjob when that is not on PATH (issue 22 item 7)."""
    import os
    import sys

    bare, repo = repo_with_remote(tmp_path, "a")
    setup_worker(repo)
    git(repo, "config", "core.hooksPath", ".githooks")
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    git(repo, "add", ".githooks")
    git(repo, "commit", "-qm", "shared hooks", "--no-verify")
    texts = {p.name: p.read_text() for p in (repo / ".githooks").iterdir()}
    assert not any(sys.executable in t or str(Path(sys.executable).parent) in t for t in texts.values())
    assert git(repo, "config", "genjob.hookPython").strip() == sys.executable
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    assert git(repo, "status", "--porcelain") == ""
    k = submit_key(repo, "-m", "x", "src/user.py")
    (repo / "src/user.py").write_text("hand edit\n")
    git(repo, "add", "src/user.py")
    proc = git_rc(repo, "commit", "-qm", "hand edit")
    assert proc.returncode == 1 and f"src/user.py is held by live job {k}" in proc.stderr
    # Another clone of the shared hooks with no genjob.hookPython: install.sh's default place.
    git(repo, "config", "--unset", "genjob.hookPython")
    home_bin = Path(os.environ["HOME"]) / ".local/bin"
    home_bin.mkdir(parents=True, exist_ok=True)
    (home_bin / "git-genjob").symlink_to(Path(sys.executable).parent / "git-genjob")
    proc = git_rc(repo, "commit", "-qm", "hand edit")
    assert proc.returncode == 1 and f"src/user.py is held by live job {k}" in proc.stderr
    (home_bin / "git-genjob").unlink()
    _no_genjob_on_path(monkeypatch)
    proc = git_rc(repo, "commit", "-qm", "hand edit")
    assert proc.returncode == 1 and "git-genjob is not installed" in proc.stderr


def test_a_file_of_the_repository_never_shadows_a_module_the_hook_imports(repo: Path) -> None:
    setup_worker(repo)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    for name in ("re", "json", "subprocess", "git_genjob"):
        (repo / f"{name}.py").write_text("raise SystemExit(99)\n")
    git(repo, "add", "-A")
    proc = git_rc(repo, "commit", "-qm", "sneaky\n\ngenjob-key: nope")
    assert proc.returncode == 1 and "no verified receipt backs" in proc.stderr


def _queued_job(repo: Path) -> str:
    return submit_key(repo, "-m", "Add a timeout", "src/user.py")


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
@pytest.mark.parametrize(
    "how",
    [
        ["commit", "-qam", "hand"],
        ["commit", "-qm", "hand", "src/user.py"],
        ["commit", "-qm", "hand", "--only", "src/user.py"],
    ],
    ids=["commit -a", "commit PATH", "commit --only"],
)
def test_pre_commit_sees_the_index_git_commits(repo: Path, how: list[str]) -> None:
    setup_worker(repo)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    k = _queued_job(repo)
    (repo / "src/user.py").write_text("hand edit, never staged\n")
    head = git(repo, "rev-parse", "HEAD")
    proc = subprocess.run(["git", *how], cwd=repo, capture_output=True, text=True)
    assert proc.returncode != 0 and f"src/user.py is held by live job {k}" in proc.stderr, proc.stderr
    assert git(repo, "rev-parse", "HEAD") == head
    (repo / "README.md").write_text("unrelated\n")
    assert subprocess.run(["git", "commit", "-qm", "ok", "README.md"], cwd=repo).returncode == 0
