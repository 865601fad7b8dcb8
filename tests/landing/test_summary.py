"""What a reviewer reads is what was signed (issue 32 item 1, SPEC §12.2): the summary note of a
genjob commit counts only as the rendering of the receipt that verifies on it. An attacker who
can push refs/notes/genjob but holds no key edits exactly the text a reviewer reads; `log` names
it as forged (quoted, escaped) and exits non-zero, `audit` fails, pre-push refuses it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.helpers.common import git, refs, repo_with_remote, run_genjob, setup_worker, submit_key, work

GOOD = "echo 'def fetch_user(uid, timeout=1):\n    return uid' > src/user.py"
LIE = "instruction: Bump version (reviewed, no code change)"


def _apply(repo: Path, message: str = "Add a timeout\n\nto fetch_user") -> str:
    key = setup_worker(repo)
    k = submit_key(repo, "-m", message, "src/user.py")
    assert work(repo, key, GOOD, "--once").code == 0
    res = run_genjob("apply", k, "--json", cwd=repo)
    assert res.code == 0, res.err
    return k


@pytest.fixture
def applied(repo: Path) -> tuple[Path, str]:
    return repo, _apply(repo)


def _forge(repo: Path, rev: str, text: str) -> None:
    git(repo, "notes", "--ref=genjob", "add", "-f", "-m", text, rev)


def _log(repo: Path, *args: str) -> tuple[int, str, list[dict[str, object]]]:
    human = run_genjob("log", *args, cwd=repo)
    rows = run_genjob("log", "--json", *args, cwd=repo)
    return human.code, human.out, json.loads(rows.out)


def test_the_honest_summary_is_rendered_and_verifies(applied: tuple[Path, str]) -> None:
    repo, k = applied
    note = git(repo, "notes", "--ref=genjob", "show", "HEAD")
    assert note.startswith(f"genjob {k} ok: signed by w1 (SHA256:")
    assert "worker id:" not in note  # the worker's id is the signer's name: nothing self-asserted to show
    code, out, rows = _log(repo)
    assert code == 0 and "NOT VERIFIED" not in out and f"note: genjob {k} ok: signed by w1" in out
    assert rows[0]["ok"] and rows[0]["forged_note"] is None
    assert run_genjob("audit", cwd=repo).code == 0


def test_an_edited_summary_is_named_forged_and_never_shown_as_one(applied: tuple[Path, str]) -> None:
    repo, k = applied
    honest = git(repo, "notes", "--ref=genjob", "show", "HEAD")
    first = honest.splitlines()[0]
    _forge(repo, "HEAD", f"{first.replace('w1', 'release-bot')}\n  {LIE}\n")
    assert "Bump version" in git(repo, "log", "-1", "--notes=genjob")  # what git itself shows
    code, out, rows = _log(repo)
    assert code == 1, out
    assert "forged summary note" in out and "NOT VERIFIED, forged note reads:" in out
    assert f"note: {first}" not in out and "note: genjob" not in out  # never printed as a summary
    assert not rows[0]["ok"] and "Bump version" in str(rows[0]["forged_note"]) and rows[0]["note"] == []
    audit = run_genjob("audit", cwd=repo)
    assert audit.code == 1 and "forged summary note" in audit.out
    md = run_genjob("audit", "--format", "md", cwd=repo)
    assert md.code == 1 and "forged summary note" in md.out
    assert k in out  # the key the trailers name, beside what verified


def test_a_genjob_looking_note_on_a_human_commit_is_forged(applied: tuple[Path, str]) -> None:
    repo, k = applied
    (repo / "README.md").write_text("a human change\n")
    git(repo, "commit", "-q", "-am", "Refactor auth")
    before = _log(repo)[2]
    assert len(before) == 1  # a commit without trailers names no job
    honest = git(repo, "notes", "--ref=genjob", "show", "HEAD~1")
    _forge(repo, "HEAD", honest)  # the genjob commit's own (valid) summary, copied onto the human's
    code, out, rows = _log(repo)
    assert code == 1 and len(rows) == 2
    human = rows[0]
    assert human["subject"] == "Refactor auth" and not human["ok"]
    assert "no Genjob trailers" in " ".join(human["problems"])  # type: ignore[arg-type]
    assert run_genjob("audit", cwd=repo).code == 1


def test_an_amended_subject_that_keeps_the_trailers_is_named(applied: tuple[Path, str]) -> None:
    repo, _ = applied
    message = git(repo, "log", "-1", "--format=%B")
    forged = message.replace("genjob: Add a timeout", "genjob: Bump version (reviewed, no code change)", 1)
    assert forged != message
    git(repo, "commit", "-q", "--amend", "-m", forged)  # notes.rewriteRef (init) carries both notes
    code, out, rows = _log(repo)
    assert code == 1
    assert any("not the signed instruction" in p for p in rows[0]["problems"])  # type: ignore[union-attr]
    assert run_genjob("audit", cwd=repo).code == 1


def test_a_merge_carrying_a_genjob_commits_notes_is_forged(applied: tuple[Path, str]) -> None:
    repo, _ = applied
    git(repo, "checkout", "-q", "-b", "side", "HEAD~1")
    (repo / "README.md").write_text("side\n")
    git(repo, "commit", "-q", "-am", "side work")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "Merge side", "side")
    for ref in ("genjob", "genjob-receipts"):
        git(repo, "notes", f"--ref={ref}", "copy", "HEAD^1", "HEAD")
    code, out, rows = _log(repo)
    assert code == 1 and rows[0]["subject"] == "Merge side" and not rows[0]["ok"]
    assert "forged summary note" in out
    assert rows[1]["ok"]  # the genjob commit itself still verifies


@pytest.mark.parametrize(
    "payload",
    [b"genjob x ok\x1b]0;owned\x07\x1b[2J approved by security\n", b"\xff\xfe not utf-8 \xc3\n", b"A" * 1_000_000],
    ids=["terminal escapes", "not UTF-8", "one megabyte"],
)
def test_a_hostile_note_is_printed_escaped_and_bounded(applied: tuple[Path, str], payload: bytes) -> None:
    repo, _ = applied
    blob = (
        subprocess.run(
            ["git", "hash-object", "-w", "--stdin"], cwd=repo, input=payload, capture_output=True, check=True
        )
        .stdout.decode()
        .strip()
    )
    git(repo, "notes", "--ref=genjob", "add", "-f", "-C", blob, "HEAD")
    for args in ((), ("--json",)):
        res = run_genjob("log", *args, cwd=repo)
        assert res.code == 1
        assert "\x1b" not in res.out and "\x07" not in res.out  # no terminal ever executes it
        assert len(res.out) < 4000  # quoted at most 200 bytes, never a megabyte
    out = run_genjob("log", cwd=repo).out
    assert "NOT VERIFIED, forged note reads:" in out
    audit = run_genjob("audit", cwd=repo)
    assert audit.code == 1 and "\x1b" not in audit.out and len(audit.out) < 4000


def test_pre_push_refuses_a_forged_summary_and_passes_the_honest_one(tmp_path: Path) -> None:
    bare, repo = repo_with_remote(tmp_path, "a")
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    _apply(repo)
    push = ["git", "push", "origin", "main", "refs/notes/genjob", "refs/notes/genjob-receipts"]
    proc = subprocess.run(push, cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    honest = git(repo, "rev-parse", "refs/notes/genjob").strip()
    _forge(repo, "HEAD", f"genjob x ok: signed by release-bot\n  {LIE}\n")
    before = refs(bare)
    proc = subprocess.run(["git", "push", "origin", "refs/notes/genjob"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode != 0 and "forged summary note" in proc.stderr, proc.stderr
    assert refs(bare) == before
    # a note on a commit without trailers, pushed alone, is refused too
    git(repo, "update-ref", "refs/notes/genjob", honest)
    (repo / "README.md").write_text("human\n")
    git(repo, "commit", "-q", "-am", "human")
    git(repo, "push", "-q", "origin", "main")
    before = refs(bare)
    _forge(repo, "HEAD", "genjob y ok: signed by w1\n")
    proc = subprocess.run(["git", "push", "origin", "refs/notes/genjob"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode != 0 and "no Genjob trailers" in proc.stderr, proc.stderr
    assert refs(bare) == before


def _published(tmp_path: Path) -> tuple[Path, Path, str]:
    bare, repo = repo_with_remote(tmp_path, "a")
    k = _apply(repo)
    git(repo, "push", "-q", "origin", "main")
    assert run_genjob("push", cwd=repo).code == 0
    return bare, repo, k


def test_fetch_takes_notes_that_verify_and_refuses_a_forged_summary(tmp_path: Path) -> None:
    bare, repo, k = _published(tmp_path)
    reviewer = tmp_path / "reviewer"
    git(tmp_path, "clone", "-q", str(bare), str(reviewer))
    res = run_genjob("fetch", cwd=reviewer)
    assert res.code == 0 and "refused note" not in res.err, res.err
    honest = git(repo, "notes", "--ref=genjob", "show", "HEAD")
    assert git(reviewer, "notes", "--ref=genjob", "show", "HEAD") == honest
    assert run_genjob("log", cwd=reviewer).code == 0
    # the attacker (push access, no key) rewrites the summary on the remote
    attacker = tmp_path / "attacker"
    git(tmp_path, "clone", "-q", str(bare), str(attacker))
    git(attacker, "fetch", "-q", "origin", "refs/notes/*:refs/notes/*")
    _forge(attacker, "HEAD", f"genjob {k} ok: signed by release-bot\n  {LIE}\n")
    git(attacker, "push", "-q", "--no-verify", "-f", "origin", "refs/notes/genjob")
    before = refs(reviewer)
    res = run_genjob("fetch", "--json", cwd=reviewer)
    assert res.code == 0, res.err
    head = git(reviewer, "rev-parse", "HEAD").strip()
    assert f"refused note {head[:12]} refs/notes/genjob: the remote's differs; the local note verifies" in res.err
    assert any(head[:12] in n for n in json.loads(res.out)["refused_notes"])
    # a clone with no notes of its own checks the remote's and takes none of the forgery
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(bare), str(fresh))
    res = run_genjob("fetch", cwd=fresh)
    assert res.code == 0 and f"refused note {head[:12]} refs/notes/genjob: forged summary note" in res.err, res.err
    assert "refs/notes/genjob" not in refs(fresh) and "refs/notes/genjob-receipts" in refs(fresh)
    assert git(fresh, "log", "-1", "--notes=genjob", "--format=%N").strip() == ""
    assert run_genjob("audit", cwd=fresh).code == 0  # the receipt verified; only the summary was refused
    after = refs(reviewer)
    assert after["refs/notes/genjob"] == before["refs/notes/genjob"]  # the reviewer's notes are unchanged
    assert git(reviewer, "notes", "--ref=genjob", "show", "HEAD") == honest
    assert "Bump version" not in git(reviewer, "log", "--notes=genjob", "-1")
    # push puts back what verifies
    assert run_genjob("push", cwd=reviewer).code == 0
    assert git(bare, "notes", "--ref=genjob", "show", head) == honest


def test_a_fresh_clone_without_notes_says_so_once_and_exits_3(tmp_path: Path) -> None:
    bare, _, k = _published(tmp_path)
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(bare), str(clone))
    before = refs(clone)
    for command in (["audit"], ["log"], ["audit", "--json"], ["log", "--json"]):
        res = run_genjob(*command, cwd=clone)
        assert res.code == 3, res.out + res.err
        assert "notes not fetched" in res.err and "git genjob fetch origin" in res.err
        assert "FAIL" not in res.out and res.err.count("notes not fetched") == 1
    assert refs(clone) == before  # nothing written
    assert run_genjob("fetch", cwd=clone).code == 0
    res = run_genjob("audit", cwd=clone)
    assert res.code == 0 and "1 genjob commit(s), 0 failing" in res.out
    assert k in run_genjob("log", cwd=clone).out


def test_an_assisted_by_line_no_receipt_backs_is_refused_everywhere(tmp_path: Path) -> None:
    """Issue 32 item 9: `Assisted-by: … via genjob (receipt …)` on a hand commit is a provenance
    claim nothing backs: commit-msg refuses it, audit and log name it, pre-push refuses it."""
    bare, repo = repo_with_remote(tmp_path, "a")
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    _apply(repo)
    assert run_genjob("push", cwd=repo).code == 0  # the notes first: pre-push wants them on the remote
    git(repo, "push", "-q", "origin", "main")
    claim = "Assisted-by: w1 via genjob (receipt sha256:" + "0" * 63 + "1)"
    (repo / "README.md").write_text("by hand\n")
    git(repo, "add", "README.md")
    before = refs(repo)
    commit = ["git", "commit", "-q", "-m", f"Tidy up\n\n{claim}"]
    proc = subprocess.run(commit, cwd=repo, capture_output=True, text=True)
    assert proc.returncode != 0 and "no Genjob trailers" in proc.stderr, proc.stderr
    assert refs(repo) == before
    git(repo, "commit", "-q", "--no-verify", "-m", f"Tidy up\n\n{claim.lower()}")  # in any case
    audit = run_genjob("audit", cwd=repo)
    assert audit.code == 1 and "unbacked attribution" in audit.out
    assert run_genjob("log", cwd=repo).code == 1
    before = refs(bare)
    proc = subprocess.run(["git", "push", "origin", "main"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode != 0 and "unbacked attribution" in proc.stderr, proc.stderr
    assert refs(bare) == before


def test_show_names_the_commit_the_reason_and_the_signer_and_reads_a_commit(applied: tuple[Path, str]) -> None:
    """Issue 32 item 6: `show KEY` answers where the job landed and who signed; `show COMMIT`
    shows the job behind a genjob commit, or says a commit has none."""
    repo, k = applied
    head = git(repo, "rev-parse", "HEAD").strip()
    out = run_genjob("show", k, cwd=repo)
    assert out.code == 0
    assert f"applied  as {head[:12]} on refs/heads/main" in out.out
    assert "signed   by w1 (SHA256:" in out.out and "result   ok" in out.out
    doc = json.loads(run_genjob("show", k, "--json", cwd=repo).out)
    assert doc["landed"]["commit"] == head and doc["signer"]["name"] == "w1" and doc["signer"]["verified"]
    assert doc["ended"]["status"] == "ok"
    for rev in ("HEAD", head, head[:10]):
        shown = run_genjob("show", rev, cwd=repo)
        assert shown.code == 0, shown.err
        assert f"commit   {head} is the landing of job {k}" in shown.out and f"job      {k}" in shown.out
    res = run_genjob("show", "HEAD~1", cwd=repo)
    assert res.code == 2 and "has no job behind it" in res.err
    # an aborted receipt: show says why
    key = repo.parent / "keys" / "w1"
    k2 = submit_key(repo, "-m", "Fail on purpose", "src/user.py")
    assert work(repo, key, "exit 7", "--once").code == 0
    out = run_genjob("show", k2, cwd=repo).out
    assert "result   aborted: " in out or "result   rejected: " in out, out


def test_verify_commit_checks_what_audit_checks_of_that_commit(applied: tuple[Path, str]) -> None:
    """Issue 32 item 1: `verify COMMIT` passes the honest genjob commit and fails the one whose
    summary note an attacker edited, naming it forged; a commit with no job is bad input."""
    repo, k = applied
    head = git(repo, "rev-parse", "HEAD").strip()
    for rev in ("HEAD", head[:10]):
        res = run_genjob("verify", rev, cwd=repo)
        assert res.code == 0, res.out + res.err
        assert res.out.startswith(f"ok   {head[:12]} verified") and "FAIL" not in res.out
    doc = json.loads(run_genjob("verify", "HEAD", "--json", cwd=repo).out)
    assert doc["ok"] and doc["commit"] == head and doc["key"] == k and doc["exit"] == 0
    assert run_genjob("verify", k, cwd=repo).code == 0  # a key is still a job's receipt
    honest = git(repo, "notes", "--ref=genjob", "show", "HEAD")
    _forge(repo, "HEAD", honest.splitlines()[0] + f"\n  {LIE}\n")
    before = refs(repo)
    res = run_genjob("verify", "HEAD", cwd=repo)
    assert res.code == 1 and "FAIL" in res.out and "forged summary note" in res.out, res.out
    doc = json.loads(run_genjob("verify", "HEAD", "--json", cwd=repo).out)
    assert not doc["ok"] and "Bump version" in str(doc["forged_note"]) and doc["exit"] == 1
    assert refs(repo) == before  # verify writes nothing
    decoy = submit_key(repo, "--key", f"{head[:8]}-decoy", "-m", "a key chosen to shadow the commit", "README.md")
    assert decoy == f"{head[:8]}-decoy"
    res = run_genjob("verify", head[:8], cwd=repo)  # a job's key never stands in for the forged commit
    assert res.code == 2 and "prefix of a job's key" in res.err, res.out + res.err
    assert run_genjob("verify", head, cwd=repo).code == 1
    (repo / "README.md").write_text("a human change\n")
    git(repo, "commit", "-q", "-am", "Refactor auth")
    res = run_genjob("verify", "HEAD", cwd=repo)
    assert res.code == 2 and "has no job behind it" in res.err
    _forge(repo, "HEAD", honest)  # a genjob note copied onto the human commit
    res = run_genjob("verify", "HEAD", cwd=repo)
    assert res.code == 1 and "no Genjob trailers" in res.out
