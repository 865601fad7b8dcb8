"""`verify KEY` and `log` without libgit2 or click (issue 24): the answer the slow path gave last,
while nothing it read has moved (refs, notes, the trust store, config, a key's validity window);
a refusal is never kept, and a receipt or note an attacker sends goes the slow way."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tests.helpers.common import git, repo_with_remote, run_genjob, run_genjob_process, setup_worker, submit_key, work
from tests.planner.test_status_fast import probe

GOOD = "echo 'def fetch_user(uid, timeout=1):\n    return uid' > src/user.py"


def done(repo: Path, key: Path, path: str = "src/user.py") -> str:
    k = submit_key(repo, "-m", "Add a timeout", path)
    res = work(repo, key, GOOD.replace("src/user.py", path), "--once")
    assert res.code == 0, res.err
    return k


def slow_then_fast(repo: Path, *args: str, code: int = 0) -> str:
    """The slow path decides (libgit2 loaded), then the fast path prints the same bytes."""
    got, out, mods = probe(repo, *args)
    assert got == code and "pygit2" in mods, (args, got, out, mods)
    assert probe(repo, *args) == (code, out, set())
    return out


def refused_twice(repo: Path, *args: str) -> str:
    """A refusal: decided by the slow path, and again on the next call."""
    got, out, mods = probe(repo, *args)
    assert got == 1 and "pygit2" in mods, (args, got, out)
    assert probe(repo, *args)[::2] == (1, mods)
    return out


def test_verify_prints_the_slow_paths_verdict_without_libgit2_until_what_it_read_moves(repo: Path) -> None:
    key = setup_worker(repo)
    k = done(repo, key)
    plain = slow_then_fast(repo, "verify", k)
    assert plain.endswith(f"{k}: applyable\n") and plain == run_genjob("verify", k, cwd=repo).out
    (repo / ".git/genjob/verify-out" / k).unlink()
    slow, fast = (run_genjob_process("verify", k, cwd=repo) for _ in range(2))  # stderr too: none either way
    assert (slow.code, slow.out, slow.err) == (fast.code, fast.out, fast.err) == (0, plain, "")
    for args in ([k, "--json"], ["--json", k]):
        out = probe(repo, "verify", *args)
        assert out[::2] == (0, set()) and json.loads(out[1])["ok"] is True
    assert probe(repo, "verify", k[:8])[2] >= {"pygit2"}  # a prefix: the slow path resolves it
    assert probe(repo, "verify", k, "--branch", "main")[2] >= {"pygit2"}  # another option
    submit_key(repo, "-m", "another job", "README.md")  # another job's ref: this verdict stands
    assert probe(repo, "verify", k) == (0, plain, set())
    (repo / "notes.txt").write_text("unrelated\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "HEAD moves")  # check 8 and the committed trust store read HEAD
    assert slow_then_fast(repo, "verify", k) == plain
    git(repo, "notes", "--ref=genjob", "add", "-m", "a note", "HEAD")  # a notes ref moved
    assert slow_then_fast(repo, "verify", k) == plain
    git(repo, "config", "trailer.separators", ":#")  # git config changed
    assert slow_then_fast(repo, "verify", k) == plain
    # the job's own ref moves back to its claim: refused, never served
    tip = git(repo, "rev-parse", f"refs/genjob/jobs/{k}").strip()
    git(repo, "update-ref", f"refs/genjob/jobs/{k}", f"{tip}~1")
    refused_twice(repo, "verify", k)
    git(repo, "update-ref", f"refs/genjob/jobs/{k}", tip)
    assert probe(repo, "verify", k) == (0, plain, set())  # the very inputs the kept verdict was decided from


def test_a_revoked_or_rotated_key_in_the_work_tree_sends_verify_the_slow_way(repo: Path, tmp_path: Path) -> None:
    key = setup_worker(repo)
    k = done(repo, key)
    plain = slow_then_fast(repo, "verify", k)
    revoked = repo / ".genjob/revoked_keys"
    kept = revoked.read_text() if revoked.exists() else None
    assert run_genjob("trust", "revoke", "w1", cwd=repo).code == 0  # uncommitted: the work tree's store
    assert "revoked" in refused_twice(repo, "verify", k)
    if kept is None:
        revoked.unlink()
    else:
        revoked.write_text(kept)
    assert probe(repo, "verify", k) == (0, plain, set())  # the trust store it was decided from, byte for byte
    other = tmp_path / "keys" / "w9"
    assert run_genjob("keygen", "--name", "w9", "--out", str(other), cwd=repo).code == 0
    signers = repo / ".genjob/allowed_signers"
    before = signers.read_text()
    assert run_genjob("trust", "add", "w9", str(other) + ".pub", cwd=repo).code == 0
    assert slow_then_fast(repo, "verify", k) == plain  # another key trusted: decided again, the same verdict
    worker = [line for line in before.splitlines() if line.startswith("w1 ")]
    assert len(worker) == 1
    signers.write_text(signers.read_text().replace(worker[0] + "\n", ""))  # the worker's key rotated out
    assert "no signature verifies" in refused_twice(repo, "verify", k)


def test_a_verdict_ends_when_its_signers_validity_window_closes(repo: Path, tmp_path: Path) -> None:
    setup_worker(repo)
    key = tmp_path / "keys" / "w2"
    assert run_genjob("keygen", "--name", "w2", "--out", str(key), cwd=repo).code == 0
    ends = time.time() + 8
    until = time.strftime("%Y%m%d%H%M%S", time.gmtime(ends)) + "Z"
    assert run_genjob("trust", "add", "w2", str(key) + ".pub", "--valid-before", until, cwd=repo).code == 0
    git(repo, "add", ".genjob")
    git(repo, "commit", "-q", "-m", "trust w2 for a few seconds")
    k = done(repo, key)
    slow_then_fast(repo, "verify", k)
    time.sleep(max(0.0, int(ends) + 1.5 - time.time()))  # the key's window has closed (second precision)
    assert "expired" in refused_twice(repo, "verify", k)


def test_a_forged_receipt_fetched_from_a_remote_is_never_served_as_verified(tmp_path: Path) -> None:
    bare, owner = repo_with_remote(tmp_path, "owner")
    key = setup_worker(owner)
    git(owner, "push", "-q", "origin", "main")
    k = submit_key(owner, "-m", "Add a timeout", "src/user.py")
    assert run_genjob("push", cwd=owner).code == 0
    attacker = tmp_path / "attacker"
    git(tmp_path, "clone", "-q", str(bare), str(attacker))
    assert run_genjob("fetch", cwd=attacker).code == 0
    assert work(owner, key, GOOD, "--once").code == 0
    plain = slow_then_fast(owner, "verify", k)
    # the attacker works the same job with its own, untrusted key and rewrites the remote's ref
    evil = tmp_path / "keys" / "mallory"
    assert run_genjob("keygen", "--name", "mallory", "--out", str(evil), cwd=attacker).code == 0
    res = work(attacker, evil, "echo 'import os' > src/user.py", "--once")
    assert res.code == 0, res.err
    git(attacker, "push", "-q", "-f", "origin", f"refs/genjob/jobs/{k}:refs/genjob/jobs/{k}")
    git(owner, "fetch", "-q", "origin", f"+refs/genjob/jobs/{k}:refs/genjob/jobs/{k}")
    out = refused_twice(owner, "verify", k)
    assert out != plain and "NOT applyable" in out


def test_log_prints_the_slow_paths_listing_without_libgit2_until_head_notes_or_a_job_move(tmp_path: Path) -> None:
    bare, owner = repo_with_remote(tmp_path, "owner")
    key = setup_worker(owner)
    assert slow_then_fast(owner, "log") == "no genjob commits\n"
    k = done(owner, key)
    assert run_genjob("apply", k, cwd=owner).code == 0  # HEAD and both notes refs move
    listed = slow_then_fast(owner, "log")
    assert f" {k} " in listed and "verified" in listed and listed == run_genjob("log", cwd=owner).out
    code, doc, mods = probe(owner, "log", "--json")  # the same memo keeps both renderings
    assert (code, mods) == (0, set()) and json.loads(doc)[0]["ok"] is True
    (owner / ".git/genjob/log-out").unlink()
    assert slow_then_fast(owner, "log", "--json") == doc
    assert probe(owner, "log", "HEAD")[2] >= {"pygit2"}  # a range: the slow path
    k2 = submit_key(owner, "-m", "another", "README.md")  # a job no row names: the listing stands
    assert probe(owner, "log") == (0, listed, set())
    (owner / "notes.txt").write_text("unrelated\n")
    git(owner, "add", "notes.txt")
    git(owner, "commit", "-q", "-m", "HEAD moves")
    assert slow_then_fast(owner, "log") == listed
    # an attacker rewrites the receipt note of the applied commit; the owner fetches it
    git(owner, "push", "-q", "origin", "main", "refs/notes/genjob-receipts", "refs/notes/genjob")
    attacker = tmp_path / "attacker"
    git(tmp_path, "clone", "-q", str(bare), str(attacker))
    git(attacker, "fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    applied = git(attacker, "rev-parse", "HEAD~1").strip()
    note = git(attacker, "notes", "--ref=genjob-receipts", "show", applied)
    at = note.index('\\"sig\\":\\"') + len('\\"sig\\":\\"')
    forged = note[:at] + ("B" if note[at] == "A" else "A") + note[at + 1 :]  # one character of the signature
    git(attacker, "notes", "--ref=genjob-receipts", "add", "-f", "-m", forged, applied)
    git(attacker, "push", "-q", "-f", "origin", "refs/notes/genjob-receipts")
    git(owner, "fetch", "-q", "origin", "+refs/notes/genjob-receipts:refs/notes/genjob-receipts")
    got, out, mods = probe(owner, "log")
    assert got == 1 and "FAILS" in out and "pygit2" in mods  # log exits 1 on a failing commit
    assert probe(owner, "log")[1:] == (out, mods)  # a failing row is never kept
    del k2


def test_a_git_config_that_includes_another_file_is_never_decided_from_files(repo: Path) -> None:
    key = setup_worker(repo)
    k = done(repo, key)
    plain = slow_then_fast(repo, "verify", k)
    listed = slow_then_fast(repo, "log")
    (repo / ".git/extra.inc").write_text("[trailer]\n\tseparators = :#\n")
    git(repo, "config", "include.path", "extra.inc")  # what it includes is not stamped: never kept
    for _ in range(2):
        for args in (["verify", k], ["log"]):
            code, out, mods = probe(repo, *args)
            assert code == 0 and "pygit2" in mods and out == (plain if args[0] == "verify" else listed)
    git(repo, "config", "--unset", "include.path")  # the config as it was: the kept answers hold again
    assert probe(repo, "verify", k) == (0, plain, set())
    assert probe(repo, "log") == (0, listed, set())


def test_a_linked_worktree_takes_the_slow_path_and_keeps_nothing(repo: Path, tmp_path: Path) -> None:
    key = setup_worker(repo)
    k = done(repo, key)
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    for _ in range(2):
        for args in (["verify", k], ["log"]):
            code, _, mods = probe(linked, *args)
            assert code == 0 and "pygit2" in mods, args
    assert not (repo / ".git/genjob/verify-out").exists() and not (repo / ".git/genjob/log-out").exists()
