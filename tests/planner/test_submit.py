"""The planner: submit, status, show, bundle (SPEC §2.1, §5, §8)."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.helpers.common import git, make_repo, refs, run_genjob, run_genjob_process


def submit_json(repo: Path, *args: str, cwd: Path | None = None) -> dict:  # type: ignore[type-arg]
    res = run_genjob("submit", "--json", *args, cwd=cwd or repo)
    assert res.code == 0, res.err
    return json.loads(res.out)  # type: ignore[no-any-return]


def test_same_work_twice_is_one_job(repo: Path) -> None:
    first = submit_json(repo, "-m", "Add a timeout", "src/user.py", "--create", "tests/test_timeout.py")
    second = submit_json(repo, "-m", "Add a timeout", "src/user.py", "--create", "tests/test_timeout.py")
    assert first["created"] and not second["created"]
    assert (first["key"], first["digest"]) == (second["key"], second["digest"])
    assert len(first["key"]) == 32
    live = [r for r in refs(repo) if r.startswith("refs/genjob/jobs/")]
    assert live == [f"refs/genjob/jobs/{first['key']}"]
    res = run_genjob("submit", "-m", "Add a timeout", "src/user.py", "--create", "tests/test_timeout.py", cwd=repo)
    assert res.out.startswith(f"exists {first['key']}") and "state=queued" in res.out
    git(repo, "fsck", "--strict")


def test_stored_job_matches_contract(repo: Path) -> None:
    doc = submit_json(repo, "-m", "Add a timeout", "src/user.py", "--create", "tests/t.py", "--key", "op-1")
    ref = "refs/genjob/jobs/op-1"
    job = json.loads(git(repo, "show", f"{ref}:job.json"))
    assert job["schema"] == "genjob.job/v1" and job["key"] == "op-1"
    assert job["allowed_paths"] == ["src/user.py", "tests/t.py"]
    blob = git(repo, "rev-parse", "HEAD:src/user.py").strip()
    assert git(repo, "rev-parse", f"{ref}:inputs/src/user.py").strip() == blob
    assert job["inputs"]["tests/t.py"] is None
    import hashlib

    raw = git(repo, "cat-file", "blob", blob).encode()
    assert job["inputs"]["src/user.py"] == "sha256:" + hashlib.sha256(raw).hexdigest()
    stored = git(repo, "cat-file", "blob", f"{ref}:job.json").encode()
    assert doc["digest"] == "sha256:" + hashlib.sha256(stored).hexdigest()
    meta = json.loads(git(repo, "show", f"{ref}:meta.json"))
    assert meta["base"] == git(repo, "rev-parse", "HEAD").strip()
    assert meta["submitter"] == "Ada Author <ada@example.com>" and meta["created_at"].endswith("Z")
    assert git(repo, "rev-list", "--count", ref).strip() == "1"  # no parent from project history


def test_key_reuse_with_other_instruction_conflicts(repo: Path) -> None:
    submit_json(repo, "-m", "one", "src/user.py", "--key", "k1")
    before = refs(repo)
    res = run_genjob("submit", "-m", "two", "src/user.py", "README.md", "--key", "k1", cwd=repo)
    assert res.code == 4
    assert "instruction differs" in res.err and "allowed paths added: README.md" in res.err
    assert refs(repo) == before


def test_key_reuse_with_changed_input_names_the_path(repo: Path) -> None:
    submit_json(repo, "-m", "one", "src/user.py", "--key", "k1")
    (repo / "src/user.py").write_text("changed\n")
    git(repo, "commit", "-qam", "change")
    res = run_genjob("submit", "-m", "one", "src/user.py", "--key", "k1", cwd=repo)
    assert res.code == 4 and "input src/user.py changed from sha256:" in res.err


def test_inputs_hashed_as_git_stores_them(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r", {".gitattributes": "*.txt text eol=crlf\n", "a.txt": "one\ntwo\n"})
    doc = submit_json(repo, "-m", "x", "a.txt")
    out = git(repo, "hash-object", "--path=a.txt", "a.txt").strip()
    assert git(repo, "rev-parse", f"refs/genjob/jobs/{doc['key']}:inputs/a.txt").strip() == out


def test_dirty_path_refused_unless_rev(repo: Path) -> None:
    (repo / "src/user.py").write_text("dirty\n")
    before = refs(repo)
    res = run_genjob("submit", "-m", "x", "src/user.py", cwd=repo)
    assert res.code == 1 and "differs from HEAD at src/user.py" in res.err and "--rev" in res.err
    assert refs(repo) == before
    doc = submit_json(repo, "-m", "x", "src/user.py", "--rev", "HEAD")
    assert doc["created"]


def test_staged_change_is_dirty_too(repo: Path) -> None:
    (repo / "src/user.py").write_text("staged\n")
    git(repo, "add", "src/user.py")
    assert run_genjob("submit", "-m", "x", "src/user.py", cwd=repo).code == 1


def _unsafe_cases(repo: Path) -> list[tuple[str, list[str]]]:
    os.symlink("src/user.py", repo / "link.py")
    (repo / "big.txt").write_bytes(b"x" * 2048)
    (repo / "secret.txt").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")
    (repo / ".genjob").mkdir()
    (repo / ".genjob/config.toml").write_text("[limits]\nfile_bytes = 1024\nallowed_paths = 3\n")
    sub = make_repo(repo.parent / "subm", {"x": "y\n"})
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "vendored")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "fixtures")
    return [
        ("is outside the repository", ["../outside.py"]),
        ("has a .git component", [".git/config"]),
        ("under .genjob/", [".genjob/config.toml"]),
        ("is a symlink", ["link.py"]),
        ("is a directory", ["src"]),
        ("is a submodule", ["vendored"]),
        ("does not exist at HEAD", ["missing.py"]),
        ("exists at HEAD", ["--create", "src/user.py"]),
        ("is not a directory", ["--create", "README.md/x.py"]),
        ("looks like a private key block", ["secret.txt"]),
        ("over the limit of 1024", ["big.txt"]),
        ("over the limit of 3", ["src/user.py", "README.md", "tests/test_user.py", "--create", "n.py"]),
        ("not a valid job key", ["src/user.py", "--key", "Bad/Key"]),
        ("control character", ["src/a\x01.py"]),
        ("path given twice", ["src/user.py", "src/user.py"]),
        ("no paths given", []),
    ]


def test_unsafe_inputs_exit_2_and_write_nothing(repo: Path) -> None:
    cases = _unsafe_cases(repo)
    before = refs(repo)
    objects_before = git(repo, "count-objects", "-v")
    for expected, args in cases:
        res = run_genjob("submit", "-m", "do it", *args, cwd=repo)
        assert res.code == 2, (args, res.err)
        assert expected in res.err, (expected, res.err)
        assert refs(repo) == before
    assert git(repo, "status", "--porcelain") == ""
    assert "count: " in objects_before


def test_secret_instruction_refused_unless_allowed(repo: Path) -> None:
    token = "ghp_" + "A1b2C3d4" * 5
    res = run_genjob("submit", "-m", f"use {token}", "src/user.py", cwd=repo)
    assert res.code == 2 and "GitHub token" in res.err and token not in res.err
    assert not [r for r in refs(repo) if r.startswith("refs/genjob/")]
    assert submit_json(repo, "-m", f"use {token}", "src/user.py", "--allow-secrets")["created"]


def test_empty_instruction_and_oversized_instruction(repo: Path) -> None:
    assert run_genjob("submit", "-m", "  ", "src/user.py", cwd=repo).code == 2
    (repo / "big.txt").write_text("x" * (64 * 1024 + 1))
    res = run_genjob("submit", "-F", str(repo / "big.txt"), "src/user.py", cwd=repo)
    assert res.code == 2 and "over the limit of 65536" in res.err


def test_reftable_repository_is_refused(repo: Path) -> None:
    git(repo, "config", "core.repositoryformatversion", "1")
    git(repo, "config", "extensions.refStorage", "reftable")
    res = run_genjob("status", cwd=repo)
    assert res.code == 2 and "reftable" in res.err and "ref-format=files" in res.err


def test_works_from_subdirectory_and_linked_worktree(repo: Path, tmp_path: Path) -> None:
    doc = submit_json(repo, "-m", "x", "user.py", cwd=repo / "src")
    assert json.loads(git(repo, "show", f"refs/genjob/jobs/{doc['key']}:job.json"))["allowed_paths"] == ["src/user.py"]
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "side")
    wt = submit_json(tmp_path / "wt", "-m", "y", "README.md")
    assert f"refs/genjob/jobs/{wt['key']}" in refs(repo)  # refs are shared with the main worktree
    res = run_genjob("status", "--json", cwd=tmp_path / "wt")
    assert {r["key"] for r in json.loads(res.out)} == {doc["key"], wt["key"]}


def test_bare_repository_status_and_show(repo: Path, tmp_path: Path) -> None:
    doc = submit_json(repo, "-m", "x", "src/user.py")
    git(tmp_path, "clone", "-q", "--bare", "--mirror", str(repo), "bare.git")
    bare = tmp_path / "bare.git"
    res = run_genjob("status", cwd=bare)
    assert res.code == 0 and doc["key"] in res.out
    show = json.loads(run_genjob("show", doc["key"], "--json", cwd=bare).out)
    assert show["digest"] == doc["digest"] and show["events"][0]["event"] == "submitted"
    res = run_genjob("submit", "-m", "z", "README.md", cwd=bare)
    assert res.code == 2 and "--rev" in res.err
    assert submit_json(bare, "-m", "z", "README.md", "--rev", "main")["created"]


def test_status_filters_and_json(repo: Path) -> None:
    a = submit_json(repo, "-m", "first job", "src/user.py")
    rows = json.loads(run_genjob("status", "--json", cwd=repo).out)
    assert [r["key"] for r in rows] == [a["key"]] and rows[0]["state"] == "queued"
    assert json.loads(run_genjob("status", "--json", "--state", "done", cwd=repo).out) == []
    assert run_genjob("status", "--state", "bogus", cwd=repo).code == 2
    assert run_genjob("show", "nope", cwd=repo).code == 2


def test_bundle_is_byte_identical_and_exact(repo: Path, tmp_path: Path) -> None:
    doc = submit_json(repo, "-m", "x", "src/user.py", "--create", "src/new.py")
    assert run_genjob("bundle", doc["key"], "-o", str(tmp_path / "a.tar"), cwd=repo).code == 0
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(repo), "clone")
    git(clone, "fetch", "-q", "origin", "refs/genjob/*:refs/genjob/*")
    assert run_genjob("bundle", doc["key"], "-o", str(tmp_path / "b.tar"), cwd=clone).code == 0
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()
    with tarfile.open(tmp_path / "a.tar") as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == ["inputs/src/user.py", "job.json"]
        assert all(m.mode == 0o644 and m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in members)
        assert tar.extractfile("inputs/src/user.py").read() == (repo / "src/user.py").read_bytes()  # type: ignore[union-attr]


def test_init_is_idempotent_and_configures_notes(repo: Path) -> None:
    res = run_genjob("init", cwd=repo)
    assert res.code == 0 and "created .genjob/allowed_signers" in res.out
    assert git(repo, "config", "notes.displayRef").strip() == "refs/notes/genjo[b]"
    assert git(repo, "config", "notes.genjob.mergeStrategy").strip() == "cat_sort_uniq"
    assert run_genjob("init", cwd=repo).out.startswith("already initialized")
    assert git(repo, "config", "--get-all", "notes.displayRef").count("refs/notes/genjo") == 1
    proc = subprocess.run(["git", "show", "-s"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""  # no "notes ref refs/notes/genjob is invalid"


def test_init_replaces_the_plain_display_ref_of_older_versions(repo: Path) -> None:
    git(repo, "config", "notes.displayRef", "refs/notes/genjob")
    assert run_genjob("init", cwd=repo).code == 0
    assert git(repo, "config", "--get-all", "notes.displayRef").strip() == "refs/notes/genjo[b]"


@pytest.mark.slow
def test_python_dash_m_entry(repo: Path) -> None:
    res = run_genjob_process("submit", "-m", "x", "user.py", cwd=repo / "src")
    assert res.code == 0 and res.out.startswith("created ")


def test_damaged_job_refs_are_reported_not_fatal(repo: Path) -> None:
    assert run_genjob("init", cwd=repo).code == 0
    good = submit_json(repo, "-m", "fine", "src/user.py")["key"]
    blob = git(repo, "hash-object", "-w", "--stdin", input="not a commit").strip()
    git(repo, "update-ref", "refs/genjob/jobs/blobref", blob)
    tree = git(repo, "mktree", input=f"100644 blob {blob}\tjob.json\n100644 blob {blob}\tmeta.json\n").strip()
    commit = git(repo, "commit-tree", tree, "-m", "junk").strip()
    git(repo, "update-ref", "refs/genjob/jobs/badjson", commit)
    before = refs(repo)
    res = run_genjob("status", "--json", cwd=repo)
    assert res.code == 0, res.err
    rows = {r["key"]: r for r in json.loads(res.out)}
    assert rows[good]["state"] == "queued"
    assert rows["blobref"]["state"] == "damaged" and "not a commit" in rows["blobref"]["error"]
    assert rows["badjson"]["state"] == "damaged" and "job.json is not valid JSON" in rows["badjson"]["error"]
    res = run_genjob("show", "badjson", cwd=repo)
    assert res.code == 2 and "job.json is not valid JSON" in res.err
    assert refs(repo) == before
    assert submit_json(repo, "-m", "other", "src/user.py")["warnings"] == [
        f"live job {good} also holds src/user.py; "
        "whichever applies second merges onto the first, or refuses on a conflict"
    ]


def test_push_to_a_missing_remote_writes_nothing(repo: Path) -> None:
    before = refs(repo)
    res = run_genjob("submit", "-m", "x", "src/user.py", "--push", "nowhere", cwd=repo)
    assert res.code == 2 and "no remote named 'nowhere'" in res.err
    res = run_genjob("submit", "-m", "x", "src/user.py", "--push", cwd=repo)
    assert res.code == 2 and "no remote given" in res.err
    assert refs(repo) == before


# From tests/test_first_messages.py: a first-time mistake gets a message naming its real cause (issue 22 item 15).
def test_submit_in_a_repository_with_no_commits_says_so(tmp_path: Path) -> None:
    repo = tmp_path / "empty"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    (repo / "a.txt").write_text("a\n")
    res = run_genjob("submit", "-m", "x", "a.txt", cwd=repo)
    assert res.code == 2, res.err
    assert "this repository has no commits yet" in res.err and "git add a.txt && git commit" in res.err
    assert "does not exist at HEAD" not in res.err
    assert refs(repo) == {}


# From tests/test_first_messages.py: a first-time mistake gets a message naming its real cause (issue 22 item 15).
def test_submit_of_a_path_inside_a_submodule_names_the_submodule(tmp_path: Path) -> None:
    make_repo(tmp_path / "lib", {"lib.py": "x = 1\n"})
    repo = make_repo(tmp_path / "app")
    git(repo, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(tmp_path / "lib"), "vendor/lib")
    git(repo, "commit", "-q", "-m", "submodule")
    before = refs(repo)
    res = run_genjob("submit", "-m", "x", "vendor/lib/lib.py", cwd=repo)
    assert res.code == 2, res.err
    assert "vendor/lib/lib.py is inside the submodule vendor/lib" in res.err and "cd vendor/lib" in res.err
    assert "is not a directory" not in res.err
    assert refs(repo) == before
