"""verify and apply: idempotence, crash reconcile, notes and audit (SPEC §6, §10); the hostile corpus of
receipts is data, tests/contract/hostile_corpus.toml."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pygit2
import pytest

from git_genjob.documents.canonical import canonical_bytes, digest
from git_genjob.documents.keys import read_signing_key
from git_genjob.documents.receipt import build_statement, sign_statement
from git_genjob.planner.ledger import claim, record_sending, recover
from git_genjob.storage.blobs import STREAM_ABOVE
from git_genjob.storage.layout import job_ref
from git_genjob.storage.publish import publisher
from git_genjob.storage.records import load_live, write_event
from git_genjob.storage.store import RefUpdate, Store
from tests.helpers.common import (
    git,
    live,
    raw_repo,
    refs,
    replace_tip,
    run_genjob,
    run_genjob_process,
    setup_worker,
    submit_key,
    work,
)

GOOD = "echo 'def fetch_user(uid, timeout=1):\n    return uid' > src/user.py"


def snapshot(repo: Path) -> tuple[str, str, str]:
    return (git(repo, "rev-parse", "HEAD"), git(repo, "ls-files", "-s"), git(repo, "status", "--porcelain"))


@pytest.fixture
def done(repo: Path) -> tuple[Path, Path, str]:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert work(repo, key, GOOD, "--once").code == 0
    return repo, key, k


def _envelope(repo: Path, k: str) -> dict[str, Any]:
    return json.loads(git(repo, "show", f"refs/genjob/jobs/{k}:receipt.json"))  # type: ignore[no-any-return]


def _statement(repo: Path, k: str) -> dict[str, Any]:
    return json.loads(base64.b64decode(_envelope(repo, k)["payload"]))  # type: ignore[no-any-return]


OUT = digest(b"x\n")


def test_receipt_copied_from_another_job_is_refused(done: tuple[Path, Path, str]) -> None:
    repo, key_path, k = done
    other = submit_key(repo, "-m", "Something else", "src/user.py")
    assert work(repo, key_path, GOOD, "--once").code == 0
    replace_tip(repo, other, {"receipt.json": git(repo, "show", f"refs/genjob/jobs/{k}:receipt.json").encode()})
    res = run_genjob("verify", other, "--json", cwd=repo)
    failed = [c["check"] for c in json.loads(res.out)["checks"] if not c["ok"]]
    assert res.code == 1 and failed == [3, 7], res.out  # another job's key and digest, another chain's claim


def test_fenced_receipt_is_refused(repo: Path) -> None:
    key_path = setup_worker(repo)
    k = submit_key(repo, "-m", "x", "src/user.py")
    store, record = live(repo, k)
    lease = claim(publisher(store), record, "w1", 1)
    record_sending(publisher(store), lease)
    recover(publisher(store), now=time.time() + 5)
    fenced = load_live(store, k)
    assert fenced is not None
    pred = {
        "job_digest": record.job.digest,
        "key": k,
        "claim": lease.claim,
        "status": "ok",
        "reason": "",
        "outputs": {"src/user.py": OUT},
        "ignored": [],
        "worker_id": "w1",
        "attempt": lease.n,
        "generator": {"kind": "exec", "endpoint": None, "model": None, "command": "x"},
        "replays": [],
        "started_at": "2026-12-02T00:00:00.000Z",
        "finished_at": "2026-12-02T00:00:01.000Z",
    }
    env = sign_statement(build_statement(pred), read_signing_key(str(key_path)))
    files = dict(fenced.files)
    files["receipt.json"] = store.blob(env)
    files["outputs/src/user.py"] = store.blob(b"x\n")
    commit = write_event(store, fenced, "receipt", files, fenced.attempts_doc, "done", {"Genjob-Attempt": "1"})
    store.update_refs([RefUpdate(job_ref(k), fenced.tip, commit)])
    res = run_genjob("verify", k, "--json", cwd=repo)
    checks = {c["check"]: c for c in json.loads(res.out)["checks"]}
    assert res.code == 1 and [n for n, c in checks.items() if not c["ok"]] == [7], res.out
    assert "recovered" in checks[7]["detail"]


def test_dirty_allowed_path_refuses_apply(done: tuple[Path, Path, str]) -> None:
    repo, _, k = done
    (repo / "src/user.py").write_text("local edit\n")
    before = snapshot(repo)
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "local changes at src/user.py" in res.err
    assert snapshot(repo) == before and (repo / "src/user.py").read_text() == "local edit\n"


def test_apply_commit_trailers_note_and_worktree(done: tuple[Path, Path, str]) -> None:
    repo, _, k = done
    (repo / "README.md").write_text("unrelated local edit\n")
    res = run_genjob("apply", k, "--json", cwd=repo)
    assert res.code == 0, res.err
    commit = json.loads(res.out)["commit"]
    assert git(repo, "rev-parse", "HEAD").strip() == commit
    job_digest = json.loads(run_genjob("show", k, "--json", cwd=repo).out)["digest"]
    assert git(repo, "log", "-1", "--format=%(trailers:key=Genjob-Job,valueonly)").strip() == job_digest
    assert git(repo, "log", "-1", "--format=%an <%ae>").strip() == "Ada Author <ada@example.com>"
    assert "Assisted-by: exec:echo" in git(repo, "log", "-1", "--format=%B")
    shown = git(repo, "log", "-1", "--notes=genjob")
    assert f"genjob {k} ok: signed by w1 (SHA256:" in shown  # named as the trust store names the key
    assert (repo / "src/user.py").read_text().startswith("def fetch_user(uid, timeout=1)")
    assert git(repo, "status", "--porcelain") == " M README.md\n"  # unrelated edits survive
    assert f"refs/genjob/jobs/{k}" not in refs(repo) and "refs/genjob/archive" in refs(repo)
    assert json.loads(run_genjob("status", "--all", "--json", cwd=repo).out)[0]["state"] == "applied"
    git(repo, "fsck", "--strict")
    again = run_genjob("apply", k, "--json", cwd=repo)
    assert again.code == 0 and json.loads(again.out)["already"] and json.loads(again.out)["commit"] == commit
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "3"
    assert run_genjob("verify", k, cwd=repo).code == 0  # archived jobs still verify


def _as_killed_after_commit(repo: Path, k: str) -> str:
    """Apply, then put back the state a SIGKILL after step 5 leaves: branch moved, job still live,
    no archive, and the intent apply wrote before moving the branch (test_faults.py kills it for
    real). Returns the landed commit."""
    live_tip = refs(repo)[f"refs/genjob/jobs/{k}"]
    assert run_genjob("apply", k, cwd=repo).code == 0
    head = git(repo, "rev-parse", "HEAD").strip()
    receipt = git(repo, "log", "-1", "--format=%(trailers:key=Genjob-Receipt,valueonly)").strip()
    (repo / ".git/genjob/applying").mkdir(exist_ok=True)
    (repo / ".git/genjob/applying" / k).write_text(f"{head} {receipt} refs/heads/main\n")
    git(repo, "update-ref", f"refs/genjob/jobs/{k}", live_tip)
    git(repo, "update-ref", "-d", "refs/genjob/archive")
    return head


def test_crash_between_commit_and_archive_is_reconciled(done: tuple[Path, Path, str]) -> None:
    repo, _, k = done
    head = _as_killed_after_commit(repo, k)
    git(repo, "update-ref", "-d", "refs/notes/genjob")
    res = run_genjob("apply", k, "--json", cwd=repo)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["reconciled"] and doc["commit"] == head
    assert git(repo, "rev-parse", "HEAD").strip() == head and git(repo, "rev-list", "--count", "HEAD").strip() == "3"
    assert f"refs/genjob/jobs/{k}" not in refs(repo) and "genjob " + k in git(repo, "log", "-1", "--notes=genjob")


def test_crash_then_amended_branch_is_found_by_its_trailers(done: tuple[Path, Path, str]) -> None:
    """The intent's commit was rewritten after the crash (amend): the trailers still name the job."""
    repo, _, k = done
    head = _as_killed_after_commit(repo, k)
    git(repo, "commit", "--amend", "-q", "--no-edit", "--date=2030-01-01T00:00:00")
    amended = git(repo, "rev-parse", "HEAD").strip()
    assert amended != head
    res = run_genjob("apply", k, "--json", cwd=repo)
    assert res.code == 0, res.err
    assert json.loads(res.out)["commit"] == amended and json.loads(res.out)["reconciled"]
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "3"
    assert not (repo / ".git/genjob/applying" / k).exists()


def test_apply_leaves_no_intent_behind(done: tuple[Path, Path, str]) -> None:
    repo, _, k = done
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert list((repo / ".git/genjob/applying").iterdir()) == []


def test_apply_to_a_branch_not_checked_out(done: tuple[Path, Path, str]) -> None:
    repo, _, k = done
    git(repo, "branch", "target")
    before = snapshot(repo)
    res = run_genjob("apply", k, "--branch", "target", "--json", cwd=repo)
    assert res.code == 0, res.err
    assert snapshot(repo) == before
    assert "timeout=1" in git(repo, "show", "target:src/user.py")


def test_audit_passes_then_fails_on_tampering(done: tuple[Path, Path, str]) -> None:
    repo, key_path, k = done
    assert run_genjob("apply", k, cwd=repo).code == 0
    k2 = submit_key(repo, "-m", "Second", "README.md")
    assert work(repo, key_path, "echo new > README.md", "--once").code == 0
    assert run_genjob("apply", k2, cwd=repo).code == 0
    res = run_genjob("audit", cwd=repo)
    assert res.code == 0 and "2 genjob commit(s), 0 failing" in res.out, res.out + res.err
    assert "verified" in run_genjob("log", cwd=repo).out
    # A tampered note: the envelope (in refs/notes/genjob-receipts, SPEC §11) no longer matches the trailer.
    note = git(repo, "notes", "--ref=genjob-receipts", "show", "HEAD")
    git(
        repo,
        "notes",
        "--ref=genjob-receipts",
        "add",
        "-f",
        "-m",
        note.replace("ok: signed", "ok: SIGNED").replace('\\"payloadType', '\\"payloadType\\":\\"x\\",\\"y'),
        "HEAD",
    )
    res = run_genjob("audit", cwd=repo)
    assert res.code == 1 and "FAIL" in res.out
    git(repo, "notes", "--ref=genjob-receipts", "add", "-f", "-m", note.strip(), "HEAD")
    assert run_genjob("audit", cwd=repo).code == 0
    # A tampered trailer: amend the commit's worker name.
    msg = git(repo, "log", "-1", "--format=%B").replace("Genjob-Worker: w1", "Genjob-Worker: mallory")
    git(repo, "commit", "--amend", "-q", "-m", msg)
    res = run_genjob("audit", cwd=repo)
    assert res.code == 1 and "Genjob-Worker says mallory" in res.out
    # A missing receipt note is a failure, never a skip (the summary alone proves nothing).
    git(repo, "notes", "--ref=genjob-receipts", "remove", "HEAD")
    assert run_genjob("audit", "HEAD~1..HEAD", cwd=repo).code == 1


def test_pre_apply_hook_refuses(done: tuple[Path, Path, str]) -> None:
    repo, _, k = done
    hook = repo / ".git/hooks/pre-apply"
    hook.write_text('#!/bin/sh\ngrep -q timeout "$GENJOB_OUTPUTS/src/user.py" && echo "policy says no: $1" && exit 1\n')
    hook.chmod(0o755)
    before = snapshot(repo)
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "pre-apply hook refused" in res.err and f"policy says no: {k}" in res.err
    assert snapshot(repo) == before
    hook.chmod(0o644)
    assert run_genjob("apply", k, cwd=repo).code == 0


def test_apply_uses_verified_blob_ids(done: tuple[Path, Path, str]) -> None:
    repo, _, k = done
    out_blob = git(repo, "rev-parse", f"refs/genjob/jobs/{k}:outputs/src/user.py").strip()
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert git(repo, "rev-parse", "HEAD:src/user.py").strip() == out_blob
    assert pygit2.Repository(str(repo)).head.peel(pygit2.Commit).parents[0].id


@pytest.mark.slow
def test_sigkill_between_commit_and_archive_then_apply_again(done: tuple[Path, Path, str]) -> None:
    import subprocess
    import sys

    repo, _, k = done
    proc = subprocess.run(
        [sys.executable, "-m", "git_genjob", "apply", k],
        cwd=repo,
        capture_output=True,
        env={**os.environ, "GENJOB_FAULT": "after-commit"},
    )
    assert proc.returncode == -9  # SIGKILL right after the branch moved
    head = git(repo, "rev-parse", "HEAD").strip()
    assert f"refs/genjob/jobs/{k}" in refs(repo) and "refs/notes/genjob" not in refs(repo)
    res = run_genjob("apply", k, "--json", cwd=repo)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["reconciled"] and doc["commit"] == head
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "3"  # still one genjob commit
    assert f"refs/genjob/jobs/{k}" not in refs(repo) and "refs/genjob/archive" in refs(repo)
    assert f"genjob {k} ok" in git(repo, "log", "-1", "--notes=genjob")
    assert git(repo, "status", "--porcelain") == ""  # work tree and index caught up
    assert run_genjob("audit", cwd=repo).code == 0


@pytest.mark.parametrize("setting, trailer", [('"off"', None), ('"Generated-by"', "Generated-by: exec:echo")])
def test_disclosure_trailer_is_configurable(repo: Path, setting: str, trailer: str | None) -> None:
    key_path = setup_worker(repo)
    (repo / ".genjob/config.toml").write_text(f"[commit]\ndisclosure = {setting}\n")
    git(repo, "commit", "-qam", "disclosure policy")
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key_path, GOOD, "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    body = git(repo, "log", "-1", "--format=%B")
    assert "Assisted-by:" not in body
    assert body.rstrip().splitlines()[-1] == (trailer or "Genjob-Worker: w1")


def test_audit_honours_a_later_revocation(done: tuple[Path, Path, str]) -> None:
    repo, _, k = done
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert run_genjob("audit", cwd=repo).code == 0
    assert run_genjob("trust", "revoke", "w1", cwd=repo).code == 0
    git(repo, "commit", "-qam", "revoke w1")
    res = run_genjob("audit", cwd=repo)
    assert res.code == 1 and "revoked" in res.out


def test_outputs_larger_than_the_stream_threshold_verify_and_apply(repo: Path) -> None:
    """Outputs above STREAM_ABOVE are hashed and copied a chunk at a time through git."""

    key = setup_worker(repo)
    k = submit_key(repo, "-m", "big", "src/user.py", "--create", "data.bin")
    size = STREAM_ABOVE + 123_457
    script = repo.parent / "big.py"
    line = b"0123456789 abcdefghij klmnopqrstuvwxyz\n"  # text: the secret scan reads it fast
    script.write_text(f"open('data.bin', 'wb').write({line!r} * ({size} // {len(line)}) + b'tail')\n")
    assert work(repo, key, f"python3 {script}", "--once").code == 0
    hook = repo / ".git/hooks/pre-apply"
    hook.write_text('#!/bin/sh\ncmp "$GENJOB_OUTPUTS/data.bin" data.bin.expected\n')
    hook.chmod(0o755)
    (repo / "data.bin.expected").write_bytes(line * (size // len(line)) + b"tail")
    res = run_genjob("verify", k, "--json", cwd=repo)
    assert res.code == 0, res.out
    checks = {c["check"]: c for c in json.loads(res.out)["checks"]}
    assert checks[6]["ok"] and checks[6]["detail"] == "1 output(s) re-hashed"
    assert run_genjob("apply", k, cwd=repo).code == 0  # the hook compared the streamed copy
    assert (repo / "data.bin").read_bytes() == (repo / "data.bin.expected").read_bytes()


def test_apply_commits_as_git_would_under_the_same_environment(
    done: tuple[Path, Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Author and committer come apart, dates from GIT_*_DATE: `git commit` is the reference."""
    repo, _, k = done
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Bea Author")
    monkeypatch.setenv("GIT_AUTHOR_DATE", "1700000000 +0130")
    monkeypatch.setenv("GIT_COMMITTER_NAME", "Cy Committer")
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", "cy@example.com")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2023-11-15T08:00:00-05:00")
    assert run_genjob("apply", k, cwd=repo).code == 0
    shape = "--format=%an <%ae> %at %ai|%cn <%ce> %ct %ci"
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", str(other))
    git(other, "commit", "-q", "--allow-empty", "-m", "reference")
    assert git(repo, "log", "-1", shape) == git(other, "log", "-1", shape)
    assert git(repo, "log", "-1", "--format=%an|%cn|%ct").strip() == "Bea Author|Cy Committer|1700053200"


def test_apply_without_an_identity_or_with_a_bad_date_changes_nothing(
    done: tuple[Path, Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _, k = done
    before = snapshot(repo)
    monkeypatch.setenv("GIT_COMMITTER_DATE", "last tuesday")
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 2 and "GIT_COMMITTER_DATE='last tuesday' is not a date git understands" in res.err
    assert snapshot(repo) == before
    monkeypatch.delenv("GIT_COMMITTER_DATE")
    for var in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(var)
    git(repo, "config", "--global", "--unset", "user.name")
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 2 and "no git identity" in res.err and "git config user.name" in res.err
    assert snapshot(repo) == before


def _raw_tree(store: Store, entries: list[tuple[str, bytes, pygit2.Oid]]) -> pygit2.Oid:
    """A tree object written byte by byte, so names libgit2's builder refuses ('..', '.git') can exist."""
    body = b"".join(mode + b" " + name.encode() + b"\0" + oid.raw for name, mode, oid in sorted(entries))
    return raw_repo(store).odb.write(pygit2.enums.ObjectType.TREE, body)


def _queued_job(repo: Path) -> str:
    return submit_key(repo, "-m", "Add a timeout", "src/user.py")


def _done_job(repo: Path, key: Path) -> str:
    k = _queued_job(repo)
    assert work(repo, key, GOOD, "--once").code == 0
    return k


def _apply_killed_at(repo: Path, point: str, k: str) -> None:
    res = run_genjob_process("apply", k, cwd=repo, env={"GENJOB_FAULT": point})
    assert res.code == -9, (point, res.code, res.err)


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_an_output_entry_naming_a_tree_fails_check6(ready: tuple[Path, Path]) -> None:
    """A hostile remote's job tree may give outputs/<path> a blob mode over a tree object (git
    fsck would object; a push with fsck off takes it): check 6 fails, naming the path; no crash."""
    repo, key = ready
    k = _queued_job(repo)
    assert work(repo, key, GOOD, "--once").code == 0
    store = Store.open(str(repo))
    tip = store.ref_target(job_ref(k))
    assert tip is not None
    commit = store.get_commit(tip)
    empty = raw_repo(store).odb.write(pygit2.enums.ObjectType.TREE, b"")
    src = _raw_tree(store, [("user.py", b"100644", empty)])
    outputs = _raw_tree(store, [("src", b"40000", src)])
    top = [(str(e.name), b"40000" if e.type_str == "tree" else b"100644", e.id) for e in commit.tree]
    top = [t for t in top if t[0] != "outputs"] + [("outputs", b"40000", outputs)]
    new = raw_repo(store).create_commit(
        None, commit.author, commit.committer, commit.message, _raw_tree(store, top), list(commit.parent_ids)
    )
    store.update_refs([RefUpdate(job_ref(k), tip, new)])
    before = snapshot(repo), refs(repo)
    res = run_genjob("verify", k, "--json", cwd=repo)
    checks = json.loads(res.out)["checks"]
    assert res.code == 1 and [c["check"] for c in checks if not c["ok"]] == [6], res.out
    assert "src/user.py: the stored output cannot be read as a blob" in checks[5]["detail"]
    assert run_genjob("apply", k, cwd=repo).code == 1
    assert (snapshot(repo), refs(repo)) == before


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
@pytest.mark.parametrize(
    "field, value",
    [
        ("worker_id", "w1\nGenjob-Signer: SHA256:forged"),
        ("worker_id", ["x"]),
        ("claim", 5),
        ("attempt", "1"),
        ("generator", "exec"),
        ("generator", {"kind": "exec", "endpoint": None, "model": "m\nSigned-off-by: x", "command": None}),
        ("reason", "\x1b[31mred"),
        ("replays", ["not-a-fingerprint"]),
        ("started_at", "yesterday"),
    ],
)
def test_trusted_receipt_with_malformed_fields_fails_check1(
    ready: tuple[Path, Path], field: str, value: object
) -> None:
    """Even signed by a trusted key, a predicate field of the wrong type or shape is check 1, never a crash."""
    repo, key = ready
    k = _queued_job(repo)
    assert work(repo, key, GOOD, "--once").code == 0
    st = _statement(repo, k)
    st["predicate"][field] = value
    payload = canonical_bytes(st)
    from git_genjob.documents.receipt import PAYLOAD_TYPE
    from git_genjob.documents.signing import pae

    signer = read_signing_key(str(key))
    env = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [
            {"keyid": signer.keyid, "sig": base64.b64encode(signer.sign(pae(PAYLOAD_TYPE, payload))).decode()}
        ],
    }
    replace_tip(repo, k, {"receipt.json": canonical_bytes(env)})
    before, refs_before = snapshot(repo), refs(repo)
    res = run_genjob("verify", k, "--json", cwd=repo)
    assert res.code == 1, res.err
    checks = json.loads(res.out)["checks"]
    assert [c["check"] for c in checks if not c["ok"]] == [1]
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "check 1" in res.err, res.err
    assert snapshot(repo) == before and refs(repo) == refs_before


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_kill_between_archive_and_live_ref_deletion_loses_nothing(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = _done_job(repo, key)
    _apply_killed_at(repo, "archive-written", k)
    assert f"refs/genjob/jobs/{k}" in refs(repo) and "refs/genjob/archive" in refs(repo)
    rows = json.loads(run_genjob("status", "--all", "--json", cwd=repo).out)
    assert [(r["key"], r["state"]) for r in rows] == [(k, "applied")]  # one row, the archive's
    assert json.loads(run_genjob("show", k, "--json", cwd=repo).out)["state"] == "applied"
    rec = run_genjob("recover", "--json", cwd=repo)
    assert json.loads(rec.out)["archived"] == [k]
    assert f"refs/genjob/jobs/{k}" not in refs(repo)
    again = run_genjob("apply", k, "--json", cwd=repo)
    assert again.code == 0 and json.loads(again.out)["already"]
    assert git(repo, "rev-list", "--count", "HEAD").strip() == "3"
    git(repo, "fsck", "--strict")


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_reapply_finishes_an_interrupted_archive_move(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = _done_job(repo, key)
    _apply_killed_at(repo, "archive-written", k)
    res = run_genjob("apply", k, "--json", cwd=repo)
    assert res.code == 0 and json.loads(res.out)["already"]
    assert f"refs/genjob/jobs/{k}" not in refs(repo)


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
@pytest.mark.parametrize("point", ["after-commit", "mid-checkout", "after-worktree", "after-note"])
def test_reapply_after_a_kill_leaves_no_staged_revert(ready: tuple[Path, Path], point: str) -> None:
    repo, key = ready
    k = _done_job(repo, key)
    _apply_killed_at(repo, point, k)
    res = run_genjob("apply", k, "--json", cwd=repo)
    assert res.code == 0 and json.loads(res.out)["already"], res.err
    assert git(repo, "status", "--porcelain", "--untracked-files=no") == ""
    git(repo, "commit", "-qam", "next commit", "--allow-empty")
    assert "timeout=1" in git(repo, "show", "HEAD:src/user.py")  # the next commit keeps the job's work
    assert git(repo, "notes", "--ref=genjob", "list", "HEAD~1").strip()
    git(repo, "fsck", "--strict")


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_reconcile_keeps_a_users_edit_made_after_the_crash(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = _done_job(repo, key)
    _apply_killed_at(repo, "after-commit", k)
    (repo / "src/user.py").write_text("my edit after the crash\n")
    res = run_genjob("apply", k, "--json", cwd=repo)
    assert res.code == 0 and json.loads(res.out)["kept"] == ["src/user.py"]
    assert (repo / "src/user.py").read_text() == "my edit after the crash\n"


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_apply_checks_out_through_smudge_filters(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    rot13 = "tr 'A-Za-z' 'N-ZA-Mn-za-m'"
    git(repo, "config", "filter.rot13.clean", rot13)
    git(repo, "config", "filter.rot13.smudge", rot13)
    (repo / ".gitattributes").write_text("*.txt filter=rot13\n")
    (repo / "notes.txt").write_text("Hello\n")
    git(repo, "add", ".gitattributes", "notes.txt")
    git(repo, "commit", "-qm", "rot13 notes")
    k = submit_key(repo, "-m", "Greet", "notes.txt")
    assert work(repo, key, "echo 'Hello world' > notes.txt", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    committed = git(repo, "cat-file", "-p", "HEAD:notes.txt")
    assert committed == "Hello world\n"  # the verified blob, as the generator wrote it
    assert git(repo, "status", "--porcelain") == ""
    git(repo, "commit", "-qam", "nothing to commit", "--allow-empty")
    assert git(repo, "cat-file", "-p", "HEAD:notes.txt") == "Hello world\n"  # no bytes nobody wrote


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_apply_in_a_sparse_checkout_outside_the_cone(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = submit_key(repo, "-m", "Touch tests", "tests/test_user.py")
    assert work(repo, key, "echo 'def test_more(): pass' >> tests/test_user.py", "--once").code == 0
    git(repo, "sparse-checkout", "set", "src", ".genjob")
    assert not (repo / "tests/test_user.py").exists()
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 0, res.err
    assert not (repo / "tests/test_user.py").exists()  # still outside the cone
    assert "test_more" in git(repo, "show", "HEAD:tests/test_user.py")
    assert git(repo, "status", "--porcelain") == ""
    assert "S tests/test_user.py" in git(repo, "ls-files", "-t", "tests/test_user.py")


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
@pytest.mark.parametrize(
    "setup",
    [[], ["--index-version", "4"], ["--split-index"]],
    ids=["plain", "index-v4", "split-index"],
)
def test_a_skip_worktree_bit_set_by_hand_is_kept_by_apply(ready: tuple[Path, Path], setup: list[str]) -> None:
    """No sparse checkout configured, only `git update-index --skip-worktree` (what some tools do):
    apply must still see the bit, whatever the index version or a split index, and keep it."""
    repo, key = ready
    k = submit_key(repo, "-m", "Touch tests", "tests/test_user.py")
    assert work(repo, key, "echo 'def test_more(): pass' >> tests/test_user.py", "--once").code == 0
    if setup:
        git(repo, "update-index", *setup)
    git(repo, "update-index", "--skip-worktree", "tests/test_user.py")
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 0, res.err
    assert "test_more" in git(repo, "show", "HEAD:tests/test_user.py")
    assert "test_more" not in (repo / "tests/test_user.py").read_text()  # skip-worktree: not written
    assert "S tests/test_user.py" in git(repo, "ls-files", "-t", "tests/test_user.py")


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_concurrent_applies_of_one_job_both_succeed_once(ready: tuple[Path, Path]) -> None:
    """No "no job" during the archive window, no lost race reported for the job's own apply."""
    import sys

    repo, key = ready
    for n in range(3):
        k = submit_key(repo, "-m", f"Create module {n}", "--create", f"src/m{n}.py")
        assert work(repo, key, f"echo 'x = {n}' > src/m{n}.py", "--once").code == 0  # src/ is there
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "git_genjob", "apply", k, "--json"],
                cwd=repo,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for _ in range(3)
        ]
        results = [(p.wait(timeout=60), p.communicate()) for p in procs]
        assert [code for code, _ in results] == [0, 0, 0], results
        commits = {json.loads(out)["commit"] for _, (out, _err) in results}
        assert len(commits) == 1
        landed = git(repo, "log", "--format=%(trailers:key=Genjob-Key,valueonly)").split()
        assert landed.count(k) == 1
    git(repo, "fsck", "--strict")
