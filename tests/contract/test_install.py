"""install.sh on a fresh HOME: `git genjob` works from any repository (README's first command)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.common import REPO_ROOT, make_repo

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


def _files(root: Path) -> dict[str, str]:
    """Every file and link under `root`, with what it holds (a link: its target)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_symlink():
            out[str(p.relative_to(root))] = "-> " + os.readlink(p)
        elif p.is_file():
            out[str(p.relative_to(root))] = p.read_text(errors="replace")
    return out


@pytest.mark.slow
def test_install_writes_only_its_own_files_and_uninstall_removes_exactly_them(tmp_path: Path) -> None:
    """Issue 35 item 8: install.sh linked into the first writable directory on PATH (~/.cargo/bin,
    pyenv's shims). Now: ~/.local/bin, a note of what to add to PATH when PATH lacks it, a
    manifest, and --uninstall takes away what it lists, leaving HOME as it was."""
    src = tmp_path / "git-genjob"
    shutil.copytree(REPO_ROOT, src, ignore=IGNORE)
    home = tmp_path / "home"
    for d in ("bin", ".cargo/bin"):
        (home / d).mkdir(parents=True)
    (home / ".cargo/bin/cargo").write_text("#!/bin/sh\n")
    (home / ".gitconfig").write_text("[user]\n\tname = N\n\temail = n@example.com\n")
    dropped = ("GIT_", "XDG_", "VIRTUAL_ENV", "MANPATH", "PREFIX")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    env.update(
        HOME=str(home),
        PATH=f"{home}/.cargo/bin:{home}/bin:/usr/local/bin:/usr/bin:/bin",
        PIP_CACHE_DIR=os.environ.get("PIP_CACHE_DIR", os.path.expanduser("~/.cache/pip")),
        PYTHON=shutil.which("python3", path=os.environ["PATH"]) or "python3",
    )
    before = _files(home)
    proc = subprocess.run(["./install.sh"], cwd=src, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (home / ".local/bin/git-genjob").is_symlink()
    assert sorted(p.name for p in (home / ".cargo/bin").iterdir()) == ["cargo"] and list((home / "bin").iterdir()) == []
    assert f'export PATH="{home}/.local/bin:$PATH"' in proc.stdout  # what to add to PATH
    completion = home / ".local/share/bash-completion/completions/git-genjob"
    assert "_git_genjob()" in completion.read_text()
    manifest = (home / ".local/share/git-genjob/manifest").read_text().splitlines()
    assert f"link {home}/.local/bin/git-genjob" in manifest and f"file {completion}" in manifest
    repo = make_repo(tmp_path / "any")
    demo = subprocess.run(["git", "genjob", "-h"], cwd=repo, env=env, capture_output=True, text=True)
    assert demo.returncode == 0 and "Usage: git genjob" in demo.stdout, demo.stderr  # README's next command works
    res = subprocess.run(["./install.sh", "--bogus"], cwd=src, env=env, capture_output=True, text=True)
    assert res.returncode == 2 and "unknown option --bogus" in res.stderr
    proc = subprocess.run(["./install.sh", "--uninstall"], cwd=src, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = _files(home)
    gitconfig = after.pop(".gitconfig")
    assert "alias" not in gitconfig.replace("[alias]", "") and "genjob" not in gitconfig
    before.pop(".gitconfig")
    assert after == before  # every file install.sh wrote is gone, nothing else touched
    res = subprocess.run(["./install.sh", "--uninstall"], cwd=src, env=env, capture_output=True, text=True)
    assert res.returncode == 1 and "nothing to uninstall" in res.stderr


def test_uninstall_never_removes_a_file_the_manifest_was_edited_to_name(tmp_path: Path) -> None:
    """Attack: a manifest line `file ~/.bashrc` made --uninstall delete the user's .bashrc."""
    home = tmp_path / "ho me"
    data = home / ".local/share/git-genjob"
    data.mkdir(parents=True)
    bashrc = home / ".bashrc"
    bashrc.write_text("export KEEP=1\n")
    (data / "manifest").write_text(f"file {bashrc}\n")
    env = dict(os.environ, HOME=str(home), GIT_CONFIG_GLOBAL=str(home / ".gitconfig"))
    env.pop("PREFIX", None)
    proc = subprocess.run([str(REPO_ROOT / "install.sh"), "--uninstall"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert bashrc.read_text() == "export KEEP=1\n"


@pytest.mark.slow
def test_the_first_hour_through_the_installed_command(installed: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """Issue 35's acceptance walk on what install.sh put on PATH (fresh HOME, no planner key
    yet): init, keygen, submit, work under bubblewrap, apply, push, resubmit --remote, a
    teammate's clone that fetches, logs and audits, and doctor with no failure. Each step's
    outcome is asserted (an ok receipt under bwrap, a landed commit, a superseded job on the
    remote), and nothing prints a traceback."""
    import base64
    import json

    if shutil.which("bwrap") is None:
        if os.environ.get("CI") == "true":
            pytest.fail(".ci/run installs bubblewrap; it is missing")
        pytest.skip("bubblewrap is not installed")
    home, env = installed
    env = dict(env, GIT_CONFIG_NOSYSTEM="1")
    said: list[str] = []

    def run(cwd: Path, *argv: str, code: int = 0) -> str:
        proc = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        said.append(proc.stdout + proc.stderr)
        assert proc.returncode == code, f"{argv}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}"
        return proc.stdout

    bare = tmp_path / "remote.git"
    run(tmp_path, "git", "init", "-q", "--bare", str(bare))
    repo = make_repo(tmp_path / "author")
    run(repo, "git", "remote", "add", "origin", str(bare))
    run(repo, "git", "push", "-q", "origin", "main")
    run(repo, "git", "genjob", "init")
    worker_key = tmp_path / "keys" / "w1"
    run(repo, "git", "genjob", "keygen", "--name", "w1", "--out", str(worker_key))
    run(repo, "git", "genjob", "trust", "add", "w1", f"{worker_key}.pub")
    run(repo, "git", "add", ".genjob")
    run(repo, "git", "commit", "-qm", "genjob: trust w1")
    key = run(repo, "git", "genjob", "submit", "-m", "Make fetch_user return the id", "src/user.py", "--json")
    key = json.loads(key)["key"]
    edit = "exec:sed -i 's/return {.id.: uid}/return uid/' src/user.py"
    out = run(repo, "git", "genjob", "work", "--generator", edit, "--signing-key", str(worker_key), "--once", "--json")
    assert json.loads(out)["jobs"][0]["result"] == "ok", out
    shown = json.loads(run(repo, "git", "genjob", "show", key, "--json"))
    statement = json.loads(base64.b64decode(shown["receipt"]["payload"]))  # the signed bytes
    assert statement["predicate"]["sandbox"]["mechanism"] == "bwrap", statement["predicate"]
    run(repo, "git", "genjob", "apply", key)
    assert "return uid" in (repo / "src/user.py").read_text()
    assert key in run(repo, "git", "log", "-1", "--format=%B")
    run(repo, "git", "push", "-q", "origin", "main")
    run(repo, "git", "genjob", "push", "origin")
    # a job whose outputs no longer merge after a teammate's edit: resubmitted on the remote
    two = json.loads(run(repo, "git", "genjob", "submit", "-m", "Return a dict again", "src/user.py", "--json"))["key"]
    again = "exec:sed -i 's/return uid/return {\"id\": uid}/' src/user.py"
    run(repo, "git", "genjob", "work", "--generator", again, "--signing-key", str(worker_key), "--once", "--strict")
    (repo / "src/user.py").write_text("def fetch_user(uid):\n    return ('user', uid)\n")
    run(repo, "git", "commit", "-qam", "a teammate's edit of the same line")
    run(repo, "git", "push", "-q", "origin", "main")
    run(repo, "git", "genjob", "push", "origin")
    run(repo, "git", "genjob", "apply", two, code=1)
    new = json.loads(run(repo, "git", "genjob", "resubmit", two, "--remote", "origin", "--json"))["new"]
    mate = tmp_path / "teammate"
    run(tmp_path, "git", "clone", "-q", str(bare), str(mate))
    run(mate, "git", "genjob", "fetch", "origin")
    rows = {r["key"]: r["state"] for r in json.loads(run(mate, "git", "genjob", "status", "--all", "--json"))}
    assert rows == {key: "applied", two: "superseded", new: "queued"}, rows
    assert key in run(mate, "git", "genjob", "log")
    run(mate, "git", "genjob", "audit")
    for clone in (repo, mate):
        checks = json.loads(run(clone, "git", "genjob", "doctor", "--json"))["checks"]
        assert [c for c in checks if c["status"] == "fail"] == [], checks
    assert not [s for s in said if "Traceback" in s]
