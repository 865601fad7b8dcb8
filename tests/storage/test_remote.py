"""Sharing refs/genjob/* through a plain git remote (SPEC §3)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from git_genjob.documents.keys import read_signing_key
from git_genjob.storage.store import Store
from tests.helpers.common import (
    ask,
    git,
    make_repo,
    refs,
    replace_tip,
    repo_with_remote,
    run_genjob,
    setup_worker,
    submit_key,
    work,
)


def _objects(repo: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {"blob": set(), "commit": set(), "tree": set()}
    listing = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objecttype) %(objectname)")
    for line in listing.splitlines():
        kind, oid = line.split()
        out.setdefault(kind, set()).add(oid)
    return out


def test_fetching_only_genjob_refs_brings_only_the_bundle(tmp_path: Path) -> None:
    files = {f"f{i}.py": f"x = {i}\n" for i in range(6)}
    planner = make_repo(tmp_path / "planner", files)
    (planner / "f0.py").write_text("x = 'second version'\n")
    git(planner, "commit", "-qam", "second")
    res = run_genjob("submit", "--json", "-m", "edit", "f0.py", "f1.py", "--create", "new.py", cwd=planner)
    assert res.code == 0
    worker = tmp_path / "worker"
    git(tmp_path, "init", "-q", "worker")
    git(worker, "fetch", "-q", str(planner), "refs/genjob/*:refs/genjob/*")
    blobs = _objects(worker)["blob"]
    project_blobs = {git(planner, "rev-parse", f"HEAD:{p}").strip() for p in files}
    assert blobs & project_blobs == {git(planner, "rev-parse", f"HEAD:{p}").strip() for p in ("f0.py", "f1.py")}
    project_commits = set(git(planner, "rev-list", "--all", "--branches").split())
    assert not _objects(worker)["commit"] & set(git(planner, "rev-list", "--branches").split())
    assert project_commits  # the planner has history the worker never saw
    old_f0 = git(planner, "rev-parse", "HEAD~1:f0.py").strip()
    assert old_f0 not in blobs
    key = json.loads(res.out)["key"]
    assert json.loads(run_genjob("show", key, "--json", cwd=worker).out)["state"] == "queued"


def test_init_keeps_plain_fetch_and_push_working(tmp_path: Path) -> None:
    bare, repo = repo_with_remote(tmp_path, "a")
    assert run_genjob("init", cwd=repo).code == 0
    specs = git(repo, "config", "--get-all", "remote.origin.fetch")
    assert "+refs/genjob/jobs/*:refs/genjob-remotes/origin/jobs/*" in specs  # the refs genjob writes, by name
    assert "+refs/genjob/*:" not in specs
    git(repo, "fetch", "-q", "origin")  # the remote has no genjob refs: must not fail
    (repo / "README.md").write_text("more\n")
    git(repo, "commit", "-qam", "more")
    git(repo, "push", "-q", "origin", "main")
    assert run_genjob("submit", "-m", "x", "README.md", cwd=repo).code == 0
    git(repo, "push", "-q", "origin", "main")  # no push refspec: genjob refs are not pushed by plain push
    assert not [r for r in git(bare, "for-each-ref").splitlines() if "refs/genjob" in r]


def test_push_then_fetch_round_trip(tmp_path: Path) -> None:
    bare, a = repo_with_remote(tmp_path, "a")
    res = run_genjob("submit", "--json", "-m", "x", "README.md", "--push", cwd=a)
    assert res.code == 0, res.err
    key = json.loads(res.out)["key"]
    assert refs(bare)[f"refs/genjob/jobs/{key}"] == refs(a)[f"refs/genjob/jobs/{key}"]
    git(tmp_path, "clone", "-q", str(bare), "b")
    b = tmp_path / "b"
    res = run_genjob("fetch", "--json", cwd=b)
    assert res.code == 0, res.err
    assert json.loads(res.out)["created"] == [key]
    assert refs(b)[f"refs/genjob/jobs/{key}"] == refs(a)[f"refs/genjob/jobs/{key}"]
    again = run_genjob("push", "--json", cwd=b)
    assert again.code == 0 and json.loads(again.out)["pushed"] == []


def test_push_refuses_a_diverged_job(tmp_path: Path) -> None:
    """Two trusted workers claimed one job, each in its own clone: the second push is a lost
    race (exit 4), and the remote keeps the first claim. (A fork no trusted key wrote is no race:
    tests/contract/test_authenticity.py.)"""
    from git_genjob.planner.ledger import claim
    from git_genjob.storage.publish import publisher
    from git_genjob.storage.records import load_live
    from tests.helpers.common import setup_worker

    bare, a = repo_with_remote(tmp_path, "a")
    key = setup_worker(a)
    git(a, "push", "-q", "origin", "main")
    res = run_genjob("submit", "--json", "-m", "x", "README.md", "--key", "k1", "--push", cwd=a)
    assert res.code == 0
    git(tmp_path, "clone", "-q", str(bare), "b")
    b = tmp_path / "b"
    assert run_genjob("fetch", cwd=b).code == 0
    for repo, worker in ((a, "from-a"), (b, "from-b")):
        store = Store.open(str(repo))
        record = load_live(store, "k1")
        assert record is not None
        claim(publisher(store), record, worker, 600, read_signing_key(str(key)))
    assert run_genjob("push", cwd=a).code == 0
    before = refs(bare)
    res = run_genjob("push", cwd=b)
    assert res.code == 4 and "k1" in res.err
    assert refs(bare) == before


def test_fetch_merges_diverged_replays_and_notes(tmp_path: Path) -> None:
    from tests.helpers.stubserver import Stub

    bare, a = repo_with_remote(tmp_path, "a")
    git(tmp_path, "clone", "-q", str(bare), "b")
    b = tmp_path / "b"
    stub = Stub()
    try:
        for repo, prompt in ((a, "first"), (b, "second")):
            code, text, _ = ask(repo, stub.url, prompt)
            assert code == 0, text
    finally:
        stub.close()
    head = git(a, "rev-parse", "HEAD").strip()
    git(a, "notes", "--ref=genjob", "add", "-m", "line from a", head)
    git(b, "notes", "--ref=genjob", "add", "-m", "line from b", head)
    assert run_genjob("push", cwd=a).code == 0
    res = run_genjob("fetch", "--json", cwd=b)
    assert res.code == 0, res.err
    assert set(json.loads(res.out)["merged"]) == {"refs/genjob/replays"}
    assert len(json.loads(run_genjob("cache", "ls", "--json", cwd=b).out)) == 2
    assert git(b, "rev-list", "--parents", "-1", "refs/genjob/replays").count(" ") == 2  # a merge
    # SPEC §12.2: a note is no union of lines anyone may add; a's note on a commit no job made is refused
    assert git(b, "notes", "--ref=genjob", "show", head) == "line from b\n"
    assert f"refused note {head[:12]} refs/notes/genjob: forged summary note" in res.err
    assert run_genjob("push", cwd=b).code == 0
    assert run_genjob("fetch", cwd=a).code == 0
    assert len(json.loads(run_genjob("cache", "ls", "--json", cwd=a).out)) == 2
    git(a, "fsck", "--strict")


def test_competing_answers_from_two_machines_are_a_drift(tmp_path: Path) -> None:
    from tests.helpers.stubserver import Stub

    bare, a = repo_with_remote(tmp_path, "a")
    key = setup_worker(a)  # answers signed by a trusted worker key count in every clone
    git(a, "push", "-q", "origin", "main")
    git(tmp_path, "clone", "-q", str(bare), "b")
    b = tmp_path / "b"
    stub = Stub()
    fps = []
    try:
        for repo, answer in ((a, "from a\n"), (b, "from b\n")):
            stub.answer = answer
            code, text, _ = ask(repo, stub.url, "same prompt", "--signing-key", str(key))
            assert code == 0, text
            fps.append(text.split()[1])
    finally:
        stub.close()
    assert fps[0] == fps[1]
    assert run_genjob("push", cwd=a).code == 0
    assert run_genjob("fetch", cwd=b).code == 0
    res = run_genjob("cache", "drift", fps[0], "--json", cwd=b)
    assert res.code == 1 and len(json.loads(res.out)["pending"]) == 1
    import hashlib

    assert run_genjob("cache", "accept", fps[0], hashlib.sha256(b"from b\n").hexdigest(), cwd=b).code == 0
    assert run_genjob("cache", "drift", fps[0], cwd=b).code == 0


def test_child_git_gets_only_allowed_git_variables(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A hook's GIT_DIR / GIT_INDEX_FILE must not point genjob's own git children elsewhere."""
    from git_genjob.storage.gitdir import clean_env

    for name in [k for k in os.environ if k.startswith("GIT_")]:
        monkeypatch.delenv(name)
    for name in ("GIT_DIR", "GIT_INDEX_FILE", "GIT_WORK_TREE", "GIT_OBJECT_DIRECTORY", "GIT_QUARANTINE_PATH"):
        monkeypatch.setenv(name, "/elsewhere")
    for name in ("GIT_SSH_COMMAND", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_KEY_0", "GIT_TRACE_PACKET"):
        monkeypatch.setenv(name, "kept")
    env = clean_env()
    assert sorted(k for k in env if k.startswith("GIT_") and k != "GIT_TERMINAL_PROMPT") == [
        "GIT_CONFIG_KEY_0",
        "GIT_CONFIG_PARAMETERS",
        "GIT_NO_REPLACE_OBJECTS",  # set, not passed through: objects by id (a replace ref swaps none)
        "GIT_SSH_COMMAND",
        "GIT_TRACE_PACKET",
    ]
    assert env["GIT_NO_REPLACE_OBJECTS"] == "1"


def test_a_remote_genjob_ref_that_names_no_commit_is_refused_and_the_rest_is_fetched(tmp_path: Path) -> None:
    """A hostile or broken remote: its archive a blob, its notes a tree, a job ref a tag. fetch
    imports every other ref, leaves those alone and says which (exit 1); push writes nothing
    over them. Before, both crashed (exit 70) in the ancestry check."""
    bare, a = repo_with_remote(tmp_path, "a")
    assert run_genjob("init", cwd=a).code == 0  # a's planner key, trusted in the store b clones
    git(a, "add", ".genjob")
    git(a, "commit", "-qm", "trust the planner")
    git(a, "push", "-q", "origin", "main")
    assert run_genjob("submit", "-m", "x", "README.md", "--key", "old", "--push", cwd=a).code == 0
    git(tmp_path, "clone", "-q", str(bare), "b")
    b = tmp_path / "b"
    assert run_genjob("fetch", cwd=b).code == 0
    assert run_genjob("drop", "old", "--why", "x", cwd=b).code == 0
    assert run_genjob("submit", "-m", "y", "src/user.py", "--key", "new", "--push", cwd=a).code == 0
    blob = git(bare, "hash-object", "-w", "--stdin", input="junk\n").strip()
    tree = git(bare, "mktree", input=f"100644 blob {blob}\tjunk\n").strip()
    main = git(bare, "rev-parse", "main").strip()
    tag = git(bare, "mktag", input=f"object {main}\ntype commit\ntag t\ntagger t <t@x> 0 +0000\n\nx\n").strip()
    for ref, oid in (("refs/genjob/archive", blob), ("refs/notes/genjob", tree), ("refs/genjob/jobs/old", tag)):
        git(bare, "update-ref", ref, oid)
    hostile, mine = refs(bare), refs(b)
    res = run_genjob("fetch", "--json", cwd=b)
    assert res.code == 1, res.err
    err = json.loads(res.err)
    assert "name no commit" in err["error"]
    assert sorted(d.split()[0] for d in err["details"]) == [
        "refs/genjob/archive",
        "refs/genjob/jobs/old",
        "refs/notes/genjob",
    ]
    after = refs(b)
    assert after["refs/genjob/jobs/new"] == hostile["refs/genjob/jobs/new"]  # the rest was fetched
    for ref in ("refs/genjob/archive", "refs/notes/genjob"):  # as they were (b has no notes yet)
        assert after.get(ref) == mine.get(ref)
    assert "refs/genjob/jobs/old" not in after  # dropped (archived) here, and not re-imported
    human = run_genjob("push", cwd=b)
    assert human.code == 1 and "refs/genjob/archive (blob " in human.err and "git push origin --delete" in human.err
    assert refs(bare) == hostile
    git(b, "fsck", "--strict")
    listing = run_genjob("status", "--all", cwd=b)  # the local archive is untouched and read as before
    assert listing.code == 0 and [line.split()[:2] for line in listing.out.splitlines()] == [
        ["old", "dropped"],
        ["new", "queued"],
    ]


def test_fetch_merges_back_what_a_forced_git_fetch_took_from_the_ledger(tmp_path: Path) -> None:
    """The old docs/ci.md line, run in a developer's clone with an unpushed apply: its forced
    refspecs put the remote's archive and notes over the local ones. `git genjob fetch` merges
    back what they lost, so the applied job and its note are there again and audit passes."""
    from tests.helpers.common import submit_key, work

    bare, a = repo_with_remote(tmp_path, "a")
    key = setup_worker(a)
    git(a, "push", "-q", "origin", "main")
    first = submit_key(a, "-m", "first", "src/user.py")
    assert work(a, key, "echo one > src/user.py", "--once").code == 0
    assert run_genjob("apply", first, cwd=a).code == 0
    assert run_genjob("push", cwd=a).code == 0  # the remote has the first apply
    second = submit_key(a, "-m", "second", "README.md")
    assert work(a, key, "echo two > README.md", "--once").code == 0
    assert run_genjob("apply", second, cwd=a).code == 0  # not pushed
    git(a, "fetch", "-q", "origin", "+refs/notes/genjob*:refs/notes/genjob*", "+refs/genjob/*:refs/genjob/*")
    assert run_genjob("audit", "HEAD~1..HEAD", cwd=a).code == 1  # the note of the second apply is gone
    res = run_genjob("fetch", "--json", cwd=a)
    assert res.code == 0, res.err
    recovered = sorted(json.loads(res.out)["recovered"])
    assert recovered == ["refs/genjob/archive", "refs/notes/genjob", "refs/notes/genjob-receipts"]
    assert run_genjob("audit", cwd=a).code == 0
    assert json.loads(run_genjob("show", second, "--json", cwd=a).out)["state"] == "applied"
    assert run_genjob("fetch", "--json", cwd=a).code == 0  # once merged back, nothing more to do
    assert json.loads(run_genjob("fetch", "--json", cwd=a).out)["recovered"] == []


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_a_document_bomb_from_a_remote_is_one_damaged_row_and_never_claimed(tmp_path: Path) -> None:
    """A pushed job whose attempts.json is 17 MiB of zeros (a few KiB packed) is refused by its
    size before it is inflated: `status` shows it damaged, naming the limit; no worker claims it."""
    from git_genjob.storage.store import DOCUMENT_MAX
    from tests.helpers.common import repo_with_remote

    bare, a = repo_with_remote(tmp_path, "a")
    assert run_genjob("init", cwd=a).code == 0  # the planner's key, which b trusts below (one HOME)
    bad = submit_key(a, "-m", "bomb", "README.md")
    good = submit_key(a, "-m", "fine", "src/user.py")
    replace_tip(a, bad, {"attempts.json": b"\0" * (DOCUMENT_MAX + 1)})
    git(a, "push", "-q", "origin", "refs/genjob/*:refs/genjob/*")
    git(tmp_path, "clone", "-q", str(bare), "b")
    b = tmp_path / "b"
    key = setup_worker(b)
    assert run_genjob("fetch", cwd=b).code == 0
    res = run_genjob("status", "--json", cwd=b)
    assert res.code == 0, res.err
    rows = {r["key"]: r for r in json.loads(res.out)}
    assert rows[bad]["state"] == "damaged" and f"over the {DOCUMENT_MAX}-byte limit" in rows[bad]["error"]
    assert rows[good]["state"] == "queued"
    for _ in range(2):
        assert work(b, key, "echo y >> src/user.py", "--once").code == 0
    after = {r["key"]: r["state"] for r in json.loads(run_genjob("status", "--json", cwd=b).out)}
    assert after == {bad: "damaged", good: "done"}


# From tests/test_first_messages.py: a first-time mistake gets a message naming its real cause (issue 22 item 15).
def test_fetch_of_many_jobs_prints_a_short_report(tmp_path: Path) -> None:
    from tests.helpers.common import repo_with_remote, submit_key

    bare, a = repo_with_remote(tmp_path)
    keys = [submit_key(a, "-m", f"job {i}", "README.md") for i in range(14)]
    assert run_genjob("push", cwd=a).code == 0
    git(tmp_path, "clone", "-q", str(bare), "b")
    b = tmp_path / "b"
    res = run_genjob("fetch", cwd=b)
    assert res.code == 0, res.err
    [line] = [x for x in res.out.splitlines() if x.strip().startswith("created:")]
    assert "created: 14 refs (" in line and "and 4 more; --json lists all)" in line
    assert len(line) < 600
    git(b, "update-ref", "-d", f"refs/genjob/jobs/{keys[0]}")
    doc = json.loads(run_genjob("fetch", "--json", cwd=b).out)
    assert doc["created"] == [keys[0]]
