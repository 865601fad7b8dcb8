"""install.sh on a fresh HOME: `git genjob` works from any repository (README's first command)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT, make_repo

IGNORE = shutil.ignore_patterns(
    ".git", ".ci", "*.egg-info", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache", "build", "dist"
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    base = tmp_path_factory.mktemp("install")
    src = base / "git-genjob"
    shutil.copytree(REPO_ROOT, src, ignore=IGNORE)
    home = base / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = N\n\temail = n@example.com\n[init]\n\tdefaultBranch = main\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_", "VIRTUAL_ENV"))}
    env.update(
        HOME=str(home),
        PATH=f"{home}/.local/bin:/usr/local/bin:/usr/bin:/bin",
        PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", os.path.expanduser("~/.cache/pip")),
    )
    env["PYTHON"] = shutil.which("python3", path=os.environ["PATH"]) or "python3"
    proc = subprocess.run(["./install.sh"], cwd=src, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "installed git-genjob" in proc.stdout
    return home, env


@pytest.mark.slow
def test_install_then_help_from_a_subdirectory(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    home, env = installed
    assert (home / ".local/bin/git-genjob").exists()
    repo = make_repo(tmp_path / "any")
    proc = subprocess.run(["git", "genjob", "-h"], cwd=repo / "src", env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "Usage: git genjob" in proc.stdout, proc.stderr
    init = subprocess.run(["git", "genjob", "init"], cwd=repo, env=env, capture_output=True, text=True)
    assert init.returncode == 0, init.stderr  # the planner key submit signs with (SPEC §12.4)
    proc = subprocess.run(
        ["git", "genjob", "submit", "-m", "x", "user.py"], cwd=repo / "src", env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0 and proc.stdout.startswith("created "), proc.stderr


@pytest.mark.slow
def test_install_is_safe_to_rerun(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    home, env = installed
    src = home.parent / "git-genjob"
    proc = subprocess.run(["./install.sh"], cwd=src, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "creating venv" not in proc.stdout


@pytest.mark.slow
def test_help_shows_the_man_page(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    home, env = installed
    page = home / ".local/share/man/man1/git-genjob.1"
    assert page.exists()
    env = dict(env, MANPATH=f"{home}/.local/share/man:", MANPAGER="cat", PAGER="cat", MANWIDTH="80")
    proc = subprocess.run(["git", "genjob", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "GIT-GENJOB(1)" in proc.stdout and "git genjob submit" in proc.stdout


@pytest.mark.slow
def test_without_local_bin_on_path_the_link_goes_to_a_path_dir_of_yours_and_help_works(tmp_path: Path) -> None:
    """Issue 22 item 7: through an alias git answers `git genjob --help` with the alias itself,
    so install.sh links into a directory of the user's that PATH already has (here ~/bin), where
    git finds the command and man finds the page; no alias is written."""
    src = tmp_path / "git-genjob"
    shutil.copytree(REPO_ROOT, src, ignore=IGNORE)
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]\n\tname = N\n\temail = n@example.com\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "XDG_", "VIRTUAL_ENV", "MANPATH"))}
    env.update(
        HOME=str(home),
        PATH=f"{home}/bin:/usr/local/bin:/usr/bin:/bin",
        PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", os.path.expanduser("~/.cache/pip")),
        PYTHON=shutil.which("python3", path=os.environ["PATH"]) or "python3",
    )
    proc = subprocess.run(["./install.sh"], cwd=src, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (home / "bin/git-genjob").exists() and not (home / ".local/bin/git-genjob").exists()
    aliased = subprocess.run(["git", "config", "--global", "--get", "alias.genjob"], env=env, capture_output=True)
    assert aliased.returncode == 1  # no alias: git runs the command itself
    env = dict(env, MANPAGER="cat", PAGER="cat", MANWIDTH="80")  # no MANPATH: man derives it from PATH
    proc = subprocess.run(["git", "genjob", "--help"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "GIT-GENJOB(1)" in proc.stdout, proc.stdout + proc.stderr
    proc = subprocess.run(["git", "help", "genjob"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and "GIT-GENJOB(1)" in proc.stdout, proc.stdout + proc.stderr
