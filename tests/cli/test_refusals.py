"""Refusals outside submit and apply: each exits with the contract's code and writes nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.helpers.common import ask, refs, run_genjob, setup_worker, submit_key, work
from tests.helpers.stubserver import Stub


def files_under(path: Path) -> dict[str, bytes]:
    return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_worker_side_refusals_write_nothing(repo: Path, tmp_path: Path) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "x", "src/user.py")
    genjob_dir, keys_dir = repo / ".genjob", key.parent
    before = (refs(repo), files_under(genjob_dir), files_under(keys_dir))
    loose = tmp_path / "loose"
    loose.write_text(key.read_text())
    os.chmod(loose, 0o644)
    cases = [
        (2, "already exists", ["keygen", "--out", str(key)]),
        (2, "not an ssh-ed25519 public key", ["trust", "add", "eve", "ssh-rsa AAAA eve"]),
        (2, "must be one word", ["trust", "add", "two words", str(key) + ".pub"]),
        (2, "no trusted key named", ["trust", "revoke", "nobody"]),
        (2, "readable by others", ["work", "--generator", "exec:true", "--signing-key", str(loose)]),
        (2, "generator spec", ["work", "--generator", "nonsense", "--signing-key", str(key)]),
        (2, "not an allowed path", ["receipt", k, "--delete", "README.md", "--signing-key", str(key)]),
        (2, "no outputs given", ["receipt", k, "--signing-key", str(key)]),
        (2, "duration", ["work", "--generator", "exec:true", "--signing-key", str(key), "--lease", "soon"]),
        (1, "already queued", ["retry", k]),
        (2, "no job with key", ["verify", "nope"]),
        (2, "no job with key", ["drop", "nope", "--why", "x"]),
        (2, "is a public key; signing needs the private key", ["work", "--signing-key", f"{key}.pub",
                                                                "--generator", "exec:true"]),
        (2, "--trust-from 'nope' is not a commit", ["audit", "--trust-from", "nope"]),
        (2, "is not a command on PATH", ["work", "--generator", "exec:no-such-agent", "--signing-key", str(key)]),
        (2, "needs --model", ["ask", "--endpoint", "openai:http://127.0.0.1:9/v1", "--prompt-file", "x",
                              "--out-file", "o"]),
    ]  # fmt: skip
    for code, message, args in cases:
        res = run_genjob(*args, cwd=repo)
        assert res.code == code and message in res.err, (args, res.code, res.err)
        assert (refs(repo), files_under(genjob_dir), files_under(keys_dir)) == before, args


def test_ok_receipt_cannot_be_retried(repo: Path) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key, "echo y > src/user.py", "--once").code == 0
    before = refs(repo)
    res = run_genjob("retry", k, cwd=repo)
    assert res.code == 1 and f"git genjob apply {k}" in res.err
    assert refs(repo) == before


def test_cache_refusals_write_nothing(repo: Path, stub: Stub) -> None:
    import hashlib

    code, text, _ = ask(repo, stub.url, "Write hello")
    fp = text.split()[1]
    before = refs(repo)
    served = hashlib.sha256(b"hello\n").hexdigest()
    cases = [
        (1, "is the served answer", ["cache", "reject", fp, served]),
        (2, "has no answer", ["cache", "accept", fp, "0" * 64]),
        (2, "is not a fingerprint", ["cache", "show", "xyz"]),
        (2, "no cache entry", ["cache", "drift", "1" * 64]),
        (2, "no fingerprint's prefix", ["cache", "accept", ("0" if fp[0] != "0" else "1") * 6, served[:8]]),
        (2, "has no answer", ["cache", "accept", fp[:8], "f00d" * 4]),  # a prefix of no answer
        (
            2,
            "cannot read prompt file",
            ["ask", "--endpoint", stub.url, "--model", "m", "--prompt-file", "missing.txt", "--out-file", "o.txt"],
        ),
    ]
    for code, message, args in cases:
        res = run_genjob(*args, cwd=repo)
        assert res.code == code and message in res.err, (args, res.err)
        assert refs(repo) == before


# From tests/test_newcomer.py: a newcomer's first day (issue 11).
def test_commands_before_init_say_to_run_it(repo: Path) -> None:
    key = repo.parent / "k"
    assert run_genjob("keygen", "--name", "w1", "--out", str(key), cwd=repo).code == 0
    assert "run git genjob init" in run_genjob("trust", "list", cwd=repo).out
    k = submit_key(repo, "-m", "x", "src/user.py")
    before = refs(repo)
    res = work(repo, key, "echo y > src/user.py", "--once")  # no store to judge a planner by: refused
    assert res.code == 2 and "is missing from this checkout" in res.err and "git genjob init" in res.err
    assert refs(repo) == before
    import os

    pub = (Path(os.environ["XDG_CONFIG_HOME"]) / "git-genjob/keys/planner.pub").read_text().split()
    planners = repo.parent / "planners"  # a worker handed the planners it trusts
    planners.write_text(f'ada namespaces="genjob-job" {pub[0]} {pub[1]}\n')
    assert work(repo, key, "echo y > src/user.py", "--once", "--allowed-signers", str(planners)).code == 0
    for command in ("verify", "apply"):
        res = run_genjob(command, k, cwd=repo)
        assert res.code == 1 and "run git genjob init, then git genjob trust add NAME KEY.pub" in res.err, command
    assert not (repo / ".genjob").exists()


# From tests/test_first_messages.py: a first-time mistake gets a message naming its real cause (issue 22 item 15).
def test_trust_add_of_a_missing_file_says_no_such_file(repo: Path, tmp_path: Path) -> None:
    assert run_genjob("init", cwd=repo).code == 0
    before = (repo / ".genjob" / "allowed_signers").read_text()
    for arg in (str(tmp_path / "missing.pub"), "keys/w1.pub", "w1.pub"):
        res = run_genjob("trust", "add", "w1", arg, cwd=repo)
        assert res.code == 2 and f"no such file: {arg}" in res.err, res.err
        assert "not an ssh-ed25519 public key line" not in res.err
    res = run_genjob("trust", "add", "w1", str(tmp_path), cwd=repo)
    assert res.code == 2 and "is a directory" in res.err
    res = run_genjob("trust", "add", "w1", "ssh-ed25519 AAAAnotakey", cwd=repo)
    assert res.code == 2 and "no such file" not in res.err  # a key line: its own message
    assert (repo / ".genjob" / "allowed_signers").read_text() == before


# From tests/test_first_messages.py: a first-time mistake gets a message naming its real cause (issue 22 item 15).
def test_git_dir_set_outside_a_repository_is_named(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("GIT_DIR", str(repo / ".git"))
    res = run_genjob("status", cwd=elsewhere)
    assert res.code == 2
    assert f"ignores GIT_DIR={repo / '.git'}" in res.err and "unset GIT_DIR" in res.err
