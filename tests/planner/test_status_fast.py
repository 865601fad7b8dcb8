"""Plain `status` without libgit2 or click (issue 24): the listing the slow path printed last,
while no live ref, the archive ref and the trust store it read have moved; else the slow path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.contract.test_imports import PROBE
from tests.helpers.common import git, run_genjob, setup_worker, submit_key


def probe(repo: Path, *args: str) -> tuple[int, str, set[str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=repo, capture_output=True, text=True, timeout=120)
    lines = proc.stdout.splitlines(keepends=True)
    code, *mods = lines[-1].strip().split(" ")
    return int(code), "".join(lines[:-1]), set(mods) - {""}


def slow(repo: Path, *args: str) -> str:
    """What the slow path prints now (the memo removed first)."""
    (repo / ".git/genjob/status-out").unlink(missing_ok=True)
    code, out, mods = probe(repo, "status", *args)
    assert code == 0 and "pygit2" in mods
    return out


def test_status_prints_the_slow_paths_listing_without_libgit2_until_a_job_moves(repo: Path) -> None:
    setup_worker(repo)
    keys = [submit_key(repo, "-m", f"job {i}", "src/user.py") for i in range(3)]
    for args in ([], ["--json"]):
        expected = slow(repo, *args)
        assert all(k[:8] in expected for k in keys)
        assert probe(repo, "status", *args) == (0, expected, set())
    new = submit_key(repo, "-m", "one more", "README.md")  # a new live ref: the slow path again
    code, out, mods = probe(repo, "status")
    assert code == 0 and new[:8] in out and "pygit2" in mods
    assert probe(repo, "status") == (0, out, set())
    # archived: the archive ref and a live ref moved
    assert run_genjob("drop", keys[0], "--why", "not needed", cwd=repo).code == 0
    code, out, mods = probe(repo, "status")
    assert code == 0 and keys[0][:8] not in out and "pygit2" in mods
    assert out == slow(repo)
    assert probe(repo, "status", "--state", "queued")[2] >= {"pygit2", "click"}  # other options: the slow path


def test_a_change_to_the_trust_store_in_the_work_tree_lists_again(repo: Path) -> None:
    setup_worker(repo)
    submit_key(repo, "-m", "job", "src/user.py")
    trusted = slow(repo)
    assert probe(repo, "status") == (0, trusted, set())
    signers = repo / ".genjob/allowed_signers"
    kept = signers.read_text()
    signers.write_text("")  # uncommitted: status reads the work tree's, then HEAD's when it trusts nobody
    code, out, mods = probe(repo, "status")
    assert code == 0 and "pygit2" in mods and out == slow(repo)
    assert probe(repo, "status") == (0, out, set())
    git(repo, "rm", "-q", "--cached", ".genjob/allowed_signers")
    git(repo, "commit", "-q", "-m", "trust nobody")  # HEAD moved: what an empty work-tree store reads
    code, now, mods = probe(repo, "status")
    assert code == 0 and "pygit2" in mods and now == slow(repo)
    signers.write_text(kept)
    code, out, mods = probe(repo, "status")
    assert (code, out) == (0, trusted) and "pygit2" in mods


def test_a_damaged_job_is_never_remembered(repo: Path) -> None:
    setup_worker(repo)
    key = submit_key(repo, "-m", "job", "src/user.py")
    blob = git(repo, "hash-object", "-w", "--stdin", input="not a job\n").strip()
    tree = git(repo, "mktree", input=f"100644 blob {blob}\tjob.json\n").strip()
    commit = git(repo, "commit-tree", tree, "-m", "forged").strip()
    git(repo, "update-ref", f"refs/genjob/jobs/{key}", commit)
    code, out, mods = probe(repo, "status")
    assert code == 0 and "damaged" in out and "pygit2" in mods
    assert not (repo / ".git/genjob/status-out").exists()
    assert probe(repo, "status")[2] >= {"pygit2"}


def test_show_prints_the_slow_paths_text_without_libgit2_until_its_job_moves(repo: Path) -> None:
    setup_worker(repo)
    key = submit_key(repo, "-m", "job", "src/user.py")
    memo = repo / ".git/genjob/show-out" / key
    for args in ([key], [key, "--json"], ["--json", key]):
        memo.unlink(missing_ok=True)
        code, expected, mods = probe(repo, "show", *args)
        assert code == 0 and "pygit2" in mods and key in expected and memo.exists()
        assert probe(repo, "show", *args) == (0, expected, set())
    assert probe(repo, "show", key[:8])[2] >= {"pygit2"}  # a prefix: the slow path resolves it
    submit_key(repo, "-m", "another", "README.md")  # the set of jobs moved: decided again
    code, out, mods = probe(repo, "show", key)
    assert code == 0 and "pygit2" in mods and out == probe(repo, "show", key)[1]
    assert run_genjob("drop", key, "--why", "not needed", cwd=repo).code == 0
    code, out, mods = probe(repo, "show", key)
    assert code == 0 and "archived" in out and "pygit2" in mods
    assert probe(repo, "show", "nosuchjob")[0] == 2


def test_a_listing_is_not_served_outside_the_span_its_keys_were_judged_in(repo: Path) -> None:
    """A kept listing holds between the validity edges around the moment the slow path started:
    a clock set back before the last edge (here: the memo's span moved past now, as a clock set
    back would see it) or an edge reached sends the next call the slow way."""
    import json
    import time

    setup_worker(repo)
    submit_key(repo, "-m", "job", "src/user.py")
    expected = slow(repo)
    memo_path = repo / ".git/genjob/status-out"
    memo = json.loads(memo_path.read_text())
    assert memo["until"] is None and memo["since"] is None  # setup_worker's keys have no validity window
    for span in ({"since": time.time() + 3600}, {"until": time.time() - 1}):
        memo_path.write_text(json.dumps({**memo, **span}))
        code, out, mods = probe(repo, "status")
        assert (code, out) == (0, expected) and "pygit2" in mods
        assert probe(repo, "status") == (0, expected, set())  # the slow path kept a fresh span
