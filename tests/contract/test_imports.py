"""The import graph per command (issue 24): click, libgit2 and PyNaCl load only where a command
needs them, so that start-up stays near the bare interpreter where people wait."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.common import repo_with_remote, setup_worker, submit_key

HEAVY = ("click", "pygit2", "nacl", "cryptography")
PROBE = (
    "import sys; from git_genjob.entry import main\n"
    "try:\n    code = main(sys.argv[1:])\nexcept SystemExit as exc:\n    code = exc.code\n"
    f"print(code, ' '.join(m for m in {HEAVY!r} if m in sys.modules))"
)


def loaded(repo: Path, *args: str, stdin: str = "") -> tuple[int, set[str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=repo, input=stdin, capture_output=True, text=True)
    code, *mods = proc.stdout.strip().splitlines()[-1].split(" ")
    return int(code), set(mods) - {""}


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A repository with a remote, a trusted worker and a live job: hooks have something to look at."""
    tmp = tmp_path_factory.mktemp("imports")
    bare, repo = repo_with_remote(tmp, "a")
    setup_worker(repo)
    submit_key(repo, "-m", "x", "src/user.py")
    (repo / "msg.txt").write_text("plain message\n\nSigned-off-by: A <a@example.com>\n")
    # a new live job's planner signature is judged (with PyNaCl) by the first pre-commit only:
    # the verdict is kept per job and trust store in .git/genjob/hook-paths
    assert loaded(repo, "hook", "pre-commit") == (0, {"nacl"})
    return bare, repo


@pytest.mark.parametrize(
    ("args", "allowed"),
    [
        (["-h"], set()),
        (["--version"], set()),
        (["hook", "pre-commit"], set()),  # a live job, nothing staged on its path
        (["hook", "commit-msg", "msg.txt"], set()),
        (["status", "-h"], {"click"}),
        (["submit", "-h"], {"click"}),
        (["ask", "-h"], {"click"}),
        (["ci", "init", "-h"], {"click"}),
        (["keygen", "--name", "k", "--out", "newkey"], {"click", "nacl"}),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else ",".join(sorted(v)) or "none",
)
def test_a_command_loads_only_what_it_needs(busy: tuple[Path, Path], args: list[str], allowed: set[str]) -> None:
    _, repo = busy
    code, mods = loaded(repo, *args)
    assert code == 0 and mods <= allowed, (args, code, mods)


def test_pre_push_of_plain_commits_loads_nothing_heavy(busy: tuple[Path, Path]) -> None:
    bare, repo = busy
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    code, mods = loaded(
        repo, "hook", "pre-push", "origin", str(bare), stdin=f"refs/heads/main {head} refs/heads/main {'0' * 40}\n"
    )
    assert code == 0 and mods == set()
