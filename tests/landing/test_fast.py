"""The fast paths of `verify KEY` and `log` (landing/fast.py) and the red team's inputs that change the slow
path's answer without moving anything the memo is stamped with (from tests/test_redteam_fast.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.common import git, repo_with_remote, run_genjob, setup_worker, submit_key, work
from tests.landing.test_verify_fast import done, slow_then_fast
from tests.planner.test_status_fast import probe

BIG = "head -c 5000000 /dev/zero | tr '\\0' a > src/user.py"  # above blobs.STREAM_ABOVE: read through git


def slow_now(repo: Path, *args: str) -> tuple[int, str]:
    """The slow path's answer for the inputs as they are now (every memo removed first)."""
    (repo / ".git/genjob/log-out").unlink(missing_ok=True)
    for memo in (repo / ".git/genjob/verify-out").glob("*"):
        memo.unlink()
    code, out, mods = probe(repo, *args)
    assert "pygit2" in mods
    return code, out


# From tests/test_redteam_fast.py: the red team of the fast paths (landing/fast.py).
def test_a_replace_ref_on_an_applied_commit_changes_nothing_log_reads(repo: Path) -> None:
    """genjob reads objects by id (GIT_NO_REPLACE_OBJECTS for every git it runs, as libgit2 and
    `git fsck` do): a local replace ref swapping the applied commit for one with another worker
    trailer changes neither the slow path's log nor the fast path's (which goes the slow way
    while any replace ref exists, loose or packed)."""
    key = setup_worker(repo)
    k = done(repo, key)
    assert run_genjob("apply", k, cwd=repo).code == 0
    listed = slow_then_fast(repo, "log")
    assert "FAILS" not in listed
    applied = git(repo, "rev-parse", "HEAD").strip()
    message = git(repo, "log", "-1", "--format=%B", applied)
    assert "Genjob-Worker: w1" in message
    fake = git(
        repo,
        "commit-tree",
        git(repo, "rev-parse", "HEAD^{tree}").strip(),
        "-p",
        "HEAD~1",
        input=message.replace("Genjob-Worker: w1", "Genjob-Worker: mallory"),
    ).strip()
    git(repo, "replace", applied, fake)  # only this clone's refs/replace/ moved
    assert "mallory" in git(repo, "log", "-1", "--format=%B", applied)  # git itself reads the replacement
    code, out, mods = probe(repo, "log")
    assert (code, out) == (0, listed) and "pygit2" in mods
    assert slow_now(repo, "log") == (0, listed)
    git(repo, "pack-refs", "--all")  # a packed replace ref too
    assert not list((repo / ".git/refs/replace").iterdir())
    again, out, mods = probe(repo, "log")
    assert (again, out) == (0, listed) and "pygit2" in mods
    git(repo, "replace", "-d", applied)  # none left: kept again
    assert slow_then_fast(repo, "log") == listed


# From tests/test_redteam_fast.py: the red team of the fast paths (landing/fast.py).
def test_a_replace_ref_on_a_large_output_blob_changes_neither_verify_nor_what_apply_lands(
    repo: Path, tmp_path: Path
) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "a large file", "src/user.py")
    res = work(repo, key, BIG, "--once")
    assert res.code == 0, res.err
    plain = slow_then_fast(repo, "verify", k)
    assert plain.endswith(f"{k}: applyable\n")
    blob = git(repo, "rev-parse", f"refs/genjob/jobs/{k}:outputs/src/user.py").strip()
    (tmp_path / "same-size").write_bytes(b"b" * 5000000)  # read through git (above 4 MiB)
    other = git(repo, "hash-object", "-w", str(tmp_path / "same-size")).strip()
    git(repo, "replace", "-f", blob, other)
    assert git(repo, "cat-file", "blob", blob)[:1] == "b"  # git itself reads the replacement
    code, out, mods = probe(repo, "verify", k)
    assert (code, out) == (0, plain) and "pygit2" in mods  # the bytes the receipt names, hashed
    assert slow_now(repo, "verify", k) == (0, plain)
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert git(repo, "rev-parse", "HEAD:src/user.py").strip() == blob
    landed = (repo / "src/user.py").read_bytes()
    assert len(landed) == 5000000 and set(landed) == {ord("a")}  # not the replacement's bytes
    assert git(repo, "status", "--porcelain") == ""


# From tests/test_redteam_fast.py: the red team of the fast paths (landing/fast.py).
def test_a_job_whose_objects_a_shared_clones_source_pruned_is_not_served_as_applyable(tmp_path: Path) -> None:
    bare, owner = repo_with_remote(tmp_path, "owner")
    key = setup_worker(owner)
    git(owner, "push", "-q", "origin", "main")
    k = done(owner, key)
    assert run_genjob("push", cwd=owner).code == 0
    shared = tmp_path / "shared"
    git(tmp_path, "clone", "-q", "--shared", str(bare), str(shared))  # objects borrowed from the remote's store
    assert run_genjob("fetch", cwd=shared).code == 0
    for _ in range(2):
        code, plain, mods = probe(shared, "verify", k)
        assert code == 0 and plain.endswith(f"{k}: applyable\n") and "pygit2" in mods  # never from files
    # whoever may write the source repository (not this clone) drops the job's ref there and prunes
    git(bare, "update-ref", "-d", f"refs/genjob/jobs/{k}")
    git(bare, "reflog", "expire", "--expire=now", "--all")
    git(bare, "gc", "-q", "--prune=now")
    served = probe(shared, "verify", k)
    code, now = slow_now(shared, "verify", k)
    assert code != 0, now  # the slow path cannot read the job any more
    assert served[:2] == (code, now) and "pygit2" in served[2]
    assert not (shared / ".git/genjob/verify-out" / k).exists()


# From tests/test_redteam_fast.py: the red team of the fast paths (landing/fast.py).
def test_what_held_branch_switch_detached_head_packed_refs_time_zone_and_policy(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Inputs that keep or change the slow path's verdict: the fast path answers as it would."""
    key = setup_worker(repo)
    k = done(repo, key)
    plain = slow_then_fast(repo, "verify", k)
    git(repo, "switch", "-q", "-c", "other")  # another branch, the same commit: the same verdict
    assert probe(repo, "verify", k) == (0, plain, set())
    assert slow_now(repo, "verify", k) == (0, plain)
    git(repo, "switch", "-q", "--detach")  # detached at the same commit
    assert probe(repo, "verify", k) == (0, plain, set())
    git(repo, "pack-refs", "--all")  # every ref packed: read from packed-refs, the same values
    assert not (repo / f".git/refs/genjob/jobs/{k}").exists()
    assert probe(repo, "verify", k) == (0, plain, set())
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # a validity time without Z is local time: decided again
    assert slow_then_fast(repo, "verify", k) == plain
    git(repo, "switch", "-q", "main")
    config = repo / ".genjob/config.toml"  # [policy] require_sandbox committed on HEAD
    config.write_text(config.read_text() + "\n[policy]\nrequire_sandbox = true\n")
    git(repo, "commit", "-q", "-am", "require a sandbox")
    served = probe(repo, "verify", k)
    assert "pygit2" in served[2] and served[:2] == slow_now(repo, "verify", k)
