"""The pre-commit framework runs genjob's hooks from .pre-commit-hooks.yaml (issue 22 item 6):
pre-commit installed from the registry (the dev extras), a real commit and push to a bare remote."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.common import REPO_ROOT, git, refs, repo_with_remote, run_genjob, setup_worker, submit_key, work

BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    # git finds `git genjob` (git-genjob) on PATH, as in a normal install.
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}


def _run(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), cwd=repo, capture_output=True, text=True, env=env or _env(), stdin=subprocess.DEVNULL
    )


def _hooks_repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository holding this checkout's .pre-commit-hooks.yaml, as users reference ours."""
    hooks_repo = tmp_path / "genjob-hooks"
    hooks_repo.mkdir()
    shutil.copy(REPO_ROOT / ".pre-commit-hooks.yaml", hooks_repo)
    git(hooks_repo, "init", "-q", "-b", "main")
    git(hooks_repo, "add", "-A")
    git(hooks_repo, "commit", "-qm", "hooks")
    return hooks_repo, git(hooks_repo, "rev-parse", "HEAD").strip()


def test_pre_commit_framework_blocks_what_the_built_in_hooks_block(tmp_path: Path) -> None:
    pre_commit = shutil.which("pre-commit", path=str(BIN))
    assert pre_commit, "pre-commit comes with the dev extras (pip install -e '.[dev]')"
    bare, repo = repo_with_remote(tmp_path, "a")
    key = setup_worker(repo)
    hooks_repo, rev = _hooks_repo(tmp_path)
    (repo / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {hooks_repo}\n  rev: {rev}\n  hooks:\n"
        "  - id: genjob-pre-commit\n  - id: genjob-commit-msg\n  - id: genjob-pre-push\n"
    )
    git(repo, "add", ".pre-commit-config.yaml")
    git(repo, "commit", "-qm", "use pre-commit")
    installed = _run(repo, pre_commit, "install", "-t", "pre-commit", "-t", "commit-msg", "-t", "pre-push")
    assert installed.returncode == 0, installed.stdout + installed.stderr

    # pre-commit: a hand commit of a path a live job holds
    k = submit_key(repo, "-m", "x", "src/user.py")
    (repo / "src/user.py").write_text("hand edit\n")
    git(repo, "add", "src/user.py")
    head = git(repo, "rev-parse", "HEAD")
    proc = _run(repo, "git", "commit", "-qm", "hand edit")
    assert proc.returncode == 1 and f"src/user.py is held by live job {k}" in proc.stdout + proc.stderr
    assert git(repo, "rev-parse", "HEAD") == head
    git(repo, "checkout", "-q", "HEAD", "--", "src/user.py")

    # commit-msg: trailers no receipt backs
    (repo / "README.md").write_text("edit\n")
    git(repo, "add", "README.md")
    proc = _run(repo, "git", "commit", "-qm", "sneaky\n\nGenjob-Key: nope")
    assert proc.returncode == 1 and "no verified receipt backs" in proc.stdout + proc.stderr
    proc = _run(repo, "git", "commit", "-qm", "plain")
    assert proc.returncode == 0, proc.stdout + proc.stderr

    # pre-push: a genjob commit whose note the remote does not have (pre-commit hands the hook
    # PRE_COMMIT_* variables, not git's stdin)
    assert work(repo, key, "echo y > src/user.py", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    before = refs(bare)
    proc = _run(repo, "git", "push", "origin", "main")
    assert proc.returncode == 1 and "its note is not on origin" in proc.stdout + proc.stderr
    assert refs(bare) == before
    proc = _run(repo, "git", "push", "origin", "main:refs/heads/new-branch")  # a branch the remote lacks
    assert proc.returncode == 1 and "its note is not on origin" in proc.stdout + proc.stderr
    assert refs(bare) == before
    assert run_genjob("push", cwd=repo).code == 0
    proc = _run(repo, "git", "push", "origin", "main")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert refs(bare)["refs/heads/main"] == git(repo, "rev-parse", "HEAD").strip()

    # install.sh's default when ~/.local/bin is not on PATH: no git-genjob on PATH, a global
    # alias instead. The framework's entries run `git genjob`, so they still block.
    alias = f'!f() {{ cd "${{GIT_PREFIX:-.}}" && exec \'{BIN / "git-genjob"}\' "$@"; }}; f'
    git(repo, "config", "--global", "alias.genjob", alias)
    # every directory holding a git-genjob (this venv's, and any other venv a shell activated)
    bare_path = os.pathsep.join(
        p for p in os.environ["PATH"].split(os.pathsep) if not (Path(p) / "git-genjob").exists()
    )
    assert shutil.which("git-genjob", path=bare_path) is None
    (repo / "README.md").write_text("again\n")
    git(repo, "add", "README.md")
    proc = _run(repo, "git", "commit", "-qm", "sneaky\n\nGenjob-Key: nope", env={**os.environ, "PATH": bare_path})
    assert proc.returncode == 1 and "no verified receipt backs" in proc.stdout + proc.stderr
