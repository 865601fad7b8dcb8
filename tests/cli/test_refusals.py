"""Refusals outside submit and apply: each exits with the contract's code and writes nothing."""

from __future__ import annotations

import os
from pathlib import Path

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
