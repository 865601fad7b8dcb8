"""The clones CI and developers actually have: shallow (actions/checkout's depth 1), blob-less
partial clones and sparse checkouts, each made by the git CLI from a real bare remote."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.common import REPO_ROOT, git, make_repo, run_genjob, setup_worker, submit_key, work


def published(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A bare remote holding `main` (with the trust store) and `feature` (two applied jobs on
    top of main), with refs/genjob/* and the notes pushed: what a PR's CI run sees."""
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    dev = make_repo(tmp_path / "dev")
    key = setup_worker(dev)
    git(dev, "remote", "add", "origin", bare.as_uri())
    git(dev, "push", "-q", "origin", "main")
    git(dev, "checkout", "-q", "-b", "feature")
    keys = []
    for i, path in enumerate(["src/user.py", "README.md"]):
        k = submit_key(dev, "-m", f"Change {i}", path)
        assert work(dev, key, f"echo 'x = {i}' >> {path}", "--once").code == 0
        assert run_genjob("apply", k, cwd=dev).code == 0
        keys.append(k)
    git(dev, "push", "-q", "origin", "feature")
    assert run_genjob("push", "origin", cwd=dev).code == 0
    return bare, dev, keys


def checkout(bare: Path, dest: Path, depth: int | None) -> Path:
    """What actions/checkout@v4 runs for a push to `feature` (fetch-depth: 1, its default, or 0)."""
    git(dest.parent, "init", "-q", str(dest))
    git(dest, "remote", "add", "origin", bare.as_uri())
    sha = git(bare, "rev-parse", "refs/heads/feature").strip()
    if depth:
        git(dest, "-c", "protocol.version=2", "fetch", "--no-tags", "--prune", "--no-recurse-submodules",
            f"--depth={depth}", "origin", f"+{sha}:refs/remotes/origin/feature")  # fmt: skip
    else:
        git(dest, "-c", "protocol.version=2", "fetch", "--prune", "--no-recurse-submodules", "origin",
            "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*")  # fmt: skip
    git(dest, "checkout", "-q", "--force", "-B", "feature", "refs/remotes/origin/feature")
    return dest


def run_steps(block: str, cwd: Path) -> None:
    """Run the `- run:` lines of a docs/ci.md YAML block as a runner would (base_ref = main)."""
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    for line in re.findall(r"^- run: (.*)$", block, re.M):
        command = line.replace("${{ github.base_ref }}", "main")
        proc = subprocess.run(["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{command}: {proc.stdout}{proc.stderr}"


def ci_block(name: str) -> str:
    text = (REPO_ROOT / "docs" / "ci.md").read_text()
    m = re.search(rf"<!-- ci-checkout: {name} -->\s*\n```yaml\n(.*?)```", text, re.S)
    assert m is not None, name
    return m.group(1)


def test_audit_in_a_depth_1_clone_never_gives_a_false_verdict(tmp_path: Path) -> None:
    bare, _, keys = published(tmp_path)
    ci = checkout(bare, tmp_path / "ci", depth=1)
    assert run_genjob("fetch", "origin", cwd=ci).code == 0
    # The boundary commit's parent is not here: it cannot be checked, which is not a pass.
    res = run_genjob("audit", "--json", cwd=ci)
    assert res.code == 3, res.out + res.err
    doc = json.loads(res.out)
    assert doc["failing"] == 0 and doc["unchecked"] == 1
    [row] = doc["commits"]
    assert row["provenance"] == "cannot check" and not row["ok"] and row["problems"] == []
    assert row["key"] == keys[1]
    assert (
        "parent" in row["unchecked"][0] and "not fetched (fetch-depth: 0 or git fetch --deepen)" in row["unchecked"][0]
    )
    human = run_genjob("audit", cwd=ci)
    assert human.code == 3 and "outputs since modified" not in human.out and "verified" not in human.out
    assert "1 cannot be checked in this clone" in human.out
    # A range whose base was not fetched says so (not "not a revision range").
    for spec, rev in (("origin/main..HEAD", "'origin/main'"), ("HEAD~1..HEAD", "'HEAD~1'")):
        res = run_genjob("audit", spec, cwd=ci)
        assert res.code == 3, res.err
        assert f"{rev} (of '{spec}') is not in this shallow clone" in res.err
        assert "fetch-depth: 0" in res.err and "not a revision range" not in res.err
    # A real failure still fails in a shallow clone: a forged trailer on the boundary commit.
    orig = git(ci, "rev-parse", "HEAD").strip()
    msg = git(ci, "log", "-1", "--format=%B").replace("Genjob-Worker: w1", "Genjob-Worker: mallory")
    git(ci, "commit", "--amend", "-q", "-m", msg)
    for ref in ("genjob", "genjob-receipts"):  # the summary and the envelope (SPEC §11)
        git(ci, "notes", f"--ref={ref}", "copy", orig, "HEAD")
    res = run_genjob("audit", cwd=ci)
    assert res.code == 1 and "FAIL" in res.out and "Genjob-Worker says mallory" in res.out, res.out


def test_audit_in_a_non_shallow_clone_names_a_missing_base(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    res = run_genjob("audit", "origin/main..HEAD", cwd=repo)
    assert res.code == 2 and "'origin/main' (of 'origin/main..HEAD') names no commit" in res.err
    assert "git fetch origin main" in res.err


@pytest.mark.parametrize("variant,depth", [("full", 0), ("shallow", 1)])
def test_docs_ci_checkout_lines_make_audit_pass(tmp_path: Path, variant: str, depth: int) -> None:
    bare, _, keys = published(tmp_path)
    ci = checkout(bare, tmp_path / "ci", depth=depth)
    run_steps(ci_block(variant), ci)  # the audit step among them exits 0
    res = run_genjob("audit", "origin/main..HEAD", "--json", cwd=ci)
    assert res.code == 0, res.out + res.err
    doc = json.loads(res.out)
    assert [c["key"] for c in doc["commits"]] == keys[::-1]
    assert all(c["provenance"] == "verified" for c in doc["commits"])


def packs(repo: Path) -> set[str]:
    return {p.name for p in (repo / ".git" / "objects" / "pack").glob("*.pack")}


def test_a_blob_less_partial_clone_reads_jobs_by_fetching_the_blobs_it_needs(tmp_path: Path) -> None:
    bare, dev, keys = published(tmp_path)
    git(bare, "config", "uploadpack.allowFilter", "true")
    # A job submitted on the developer's machine, for a worker that clones without blobs.
    fresh = submit_key(dev, "-m", "Third", "README.md")
    assert run_genjob("push", "origin", cwd=dev).code == 0
    pc = tmp_path / "pc"
    git(tmp_path, "clone", "-q", "--filter=blob:none", "-b", "feature", bare.as_uri(), str(pc))
    assert git(pc, "config", "remote.origin.promisor").strip() == "true"
    assert run_genjob("fetch", "origin", cwd=pc).code == 0
    missing = git(pc, "rev-list", "--objects", "--missing=print", "refs/genjob/archive")
    assert "\n?" in "\n" + missing  # the archive's documents really are not here yet
    # status and show read archived jobs (not "damaged: … is not a blob"); status fetches the
    # documents it reads in one batch (one new pack), not one process per blob.
    before = packs(pc)
    res = run_genjob("status", "--all", "--json", cwd=pc)
    assert len(packs(pc) - before) == 1
    assert res.code == 0, res.err
    states = {row["key"]: row["state"] for row in json.loads(res.out)}
    assert states == {keys[0]: "applied", keys[1]: "applied", fresh: "queued"}, res.out
    shown = run_genjob("show", keys[0], cwd=pc)
    assert shown.code == 0 and "damaged" not in shown.out + shown.err, shown.out + shown.err
    # audit fetches the notes and the changed files it reads in one batch (one new pack).
    before = packs(pc)
    res = run_genjob("audit", "origin/main..HEAD", "--json", cwd=pc)
    assert res.code == 0, res.out + res.err
    assert [c["provenance"] for c in json.loads(res.out)["commits"]] == ["verified", "verified"]
    assert len(packs(pc) - before) == 1
    # A worker in the blob-less clone takes the fresh job instead of calling it damaged.
    wkey = tmp_path / "keys" / "w1"  # setup_worker's key, trusted at feature's tip
    res = work(pc, wkey, "echo third >> README.md", "--once")
    assert res.code == 0, res.out + res.err
    assert json.loads(run_genjob("status", "--json", cwd=pc).out)[0]["state"] == "done"
    assert run_genjob("verify", fresh, cwd=pc).code == 0


def test_a_blob_less_clone_verifies_and_applies_a_job_worked_elsewhere(tmp_path: Path) -> None:
    bare, dev, _ = published(tmp_path)
    git(bare, "config", "uploadpack.allowFilter", "true")
    k = submit_key(dev, "-m", "Worked on the developer's machine", "src/user.py")
    assert work(dev, tmp_path / "keys" / "w1", "echo 'z = 3' >> src/user.py", "--once").code == 0
    assert run_genjob("push", "origin", cwd=dev).code == 0
    pc = tmp_path / "pc"
    git(tmp_path, "clone", "-q", "--filter=blob:none", "-b", "feature", bare.as_uri(), str(pc))
    assert run_genjob("fetch", "origin", cwd=pc).code == 0
    assert "?" in git(pc, "rev-list", "--objects", "--missing=print", f"refs/genjob/jobs/{k}")
    res = run_genjob("verify", k, cwd=pc)
    assert res.code == 0, res.out + res.err
    res = run_genjob("apply", k, cwd=pc)
    assert res.code == 0, res.out + res.err
    assert "z = 3" in (pc / "src" / "user.py").read_text()
    assert run_genjob("audit", "origin/main..HEAD", cwd=pc).code == 0


def test_a_partial_clone_whose_remote_is_gone_says_so(tmp_path: Path) -> None:
    bare, _, keys = published(tmp_path)
    git(bare, "config", "uploadpack.allowFilter", "true")
    pc = tmp_path / "pc"
    git(tmp_path, "clone", "-q", "--filter=blob:none", "-b", "feature", bare.as_uri(), str(pc))
    assert run_genjob("fetch", "origin", cwd=pc).code == 0
    bare.rename(tmp_path / "gone.git")
    before = git(pc, "for-each-ref")
    res = run_genjob("show", keys[0], cwd=pc)
    assert res.code == 3, res.out + res.err
    assert "partial clone" in res.err and "fetching them from origin failed" in res.err
    assert "damaged" not in res.err and "not a blob" not in res.err
    assert git(pc, "for-each-ref") == before


@pytest.mark.parametrize(
    "argv",
    [
        ["init"],
        ["init", "--hooks"],
        ["status"],
        ["submit", "-m", "x", "a.txt"],
        ["work", "--once", "--generator", "exec:true", "--signing-key", "k"],
        ["verify", "0123456789abcdef0123456789abcdef"],
        ["apply", "0123456789abcdef0123456789abcdef"],
        ["audit"],
        ["log"],
        ["fetch"],
        ["push"],
        ["recover"],
        ["trust", "list"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_a_sha256_repository_gets_one_clear_refusal(tmp_path: Path, argv: list[str]) -> None:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "--object-format=sha256", "-b", "main", str(repo))
    (repo / "a.txt").write_text("a\n")
    git(repo, "add", "a.txt")
    git(repo, "commit", "-q", "-m", "init")
    before = (git(repo, "for-each-ref"), sorted(p.name for p in repo.iterdir()))
    res = run_genjob(*argv, cwd=repo)
    assert res.code == 2, res.out + res.err
    assert "uses SHA-256 object names (extensions.objectFormat=sha256)" in res.err
    assert "SHA-1 repositories" in res.err and "unknown object format" not in res.err
    assert (git(repo, "for-each-ref"), sorted(p.name for p in repo.iterdir())) == before


def test_a_sha256_repository_refuses_at_the_hooks(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "--object-format=sha256", "-b", "main", str(repo))
    (repo / "msg").write_text("x\n\nGenjob-Key: 0123456789abcdef0123456789abcdef\n")
    res = run_genjob("hook", "commit-msg", str(repo / "msg"), cwd=repo)
    assert res.code == 2 and "SHA-256" in res.err, res.out + res.err


def test_a_sparse_cone_checkout_reads_the_trust_store_from_the_index(tmp_path: Path) -> None:
    bare, _, _ = published(tmp_path)
    sp = tmp_path / "sp"
    git(tmp_path, "clone", "-q", "-b", "feature", bare.as_uri(), str(sp))
    git(sp, "sparse-checkout", "set", "--cone", "src")
    assert not (sp / ".genjob").exists() and not (sp / "tests").exists()
    assert "S .genjob/allowed_signers" in git(sp, "ls-files", "-t")
    # verify and apply read .genjob/ from the index, as git does for a path outside the cone.
    k = submit_key(sp, "-m", "Inside the cone", "src/user.py")
    assert work(sp, tmp_path / "keys" / "w1", "echo 'y = 1' >> src/user.py", "--once").code == 0
    res = run_genjob("verify", k, cwd=sp)
    assert res.code == 0, res.out + res.err
    assert "empty" not in res.out + res.err and "init" not in res.out + res.err
    res = run_genjob("apply", k, cwd=sp)
    assert res.code == 0, res.out + res.err
    assert "y = 1" in (sp / "src" / "user.py").read_text()
    listed = json.loads(run_genjob("trust", "list", "--json", cwd=sp).out)
    assert [r["name"] for r in listed] == ["ada@example.com", "w1"]  # the planner init trusted, the worker
    # A path outside the cone names the real cause, not "commit or stash"; nothing is written.
    before = git(sp, "for-each-ref")
    res = run_genjob("submit", "-m", "Outside", "tests/test_user.py", cwd=sp)
    assert res.code == 2, res.out + res.err
    assert "outside this sparse checkout" in res.err and "git sparse-checkout add tests" in res.err
    assert "commit or stash" not in res.err
    # Editing the trust store outside the cone would drop the lines the index holds: refused.
    res = run_genjob("trust", "add", "w2", str(tmp_path / "keys" / "w1.pub"), cwd=sp)
    assert res.code == 2 and "git sparse-checkout add .genjob" in res.err, res.out + res.err
    assert not (sp / ".genjob").exists()
    assert git(sp, "for-each-ref") == before
