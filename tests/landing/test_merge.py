"""A verified job lands on a branch that moved, and audit still proves it exactly (issue 23, SPEC §11)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pygit2
import pytest

from tests.helpers.common import git, make_repo, refs, run_genjob, setup_worker, submit_key, work

A_PY = "".join(
    [
        "def f():\n",
        "    return 1\n",
        "\n",
        "\n",
        "def h():\n",
        "    return 'middle'\n",
        "\n",
        "\n",
        "def g():\n",
        "    return 2\n",
    ]
)
EDIT_F = "sed -i 's/return 1/return 42/' src/a.py"
EDIT_F_OTHER = "sed -i 's/return 1/return 7/' src/a.py"
EDIT_G = "sed -i 's/return 2/return 99/' src/a.py"


def snapshot(repo: Path) -> tuple[str, str, str, dict[str, str]]:
    return (
        git(repo, "rev-parse", "HEAD"),
        git(repo, "ls-files", "-s"),
        git(repo, "status", "--porcelain"),
        refs(repo),
    )


@pytest.fixture
def ready(tmp_path: Path) -> tuple[Path, Path]:
    repo = make_repo(tmp_path / "repo", {"src/a.py": A_PY, "README.md": "project\n"})
    return repo, setup_worker(repo)


def job(repo: Path, key: Path, text: str, command: str) -> str:
    k = submit_key(repo, "-m", text, "src/a.py")
    res = work(repo, key, command, "--once")
    assert res.code == 0, res.err
    return k


def teammate(repo: Path, old: str, new: str) -> str:
    path = repo / "src/a.py"
    path.write_text(path.read_text().replace(old, new))
    git(repo, "commit", "-q", "--no-verify", "-am", "teammate: " + new.strip())  # their clone: no hook of ours
    return git(repo, "rev-parse", "HEAD").strip()


def audit_rows(repo: Path, *args: str) -> tuple[int, list[dict[str, object]]]:
    res = run_genjob("audit", "--json", *args, cwd=repo)
    return res.code, json.loads(res.out)["commits"]


def test_teammate_scenario_merges_keeps_their_line_and_audit_proves_it(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = job(repo, key, "Make f return 42", EDIT_F)
    tip = teammate(repo, "return 2", "return 3")
    res = run_genjob("verify", k, "--json", cwd=repo)
    assert res.code == 0, res.out
    (check8,) = [c for c in json.loads(res.out)["checks"] if c["check"] == 8]
    assert check8["ok"] and "apply will merge" in check8["detail"]
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 0, res.err
    assert f"(merged onto {tip[:12]})" in res.out
    text = (repo / "src/a.py").read_text()
    assert "return 42" in text and "return 3" in text  # the job's f() and the teammate's g()
    assert git(repo, "show", "HEAD:src/a.py") == text and git(repo, "status", "--porcelain") == ""
    assert f"Genjob-Merged-Onto: {tip}" in git(repo, "log", "-1", "--format=%B")
    code, rows = audit_rows(repo)
    assert code == 0 and [r["provenance"] for r in rows] == ["verified (merged)"], rows
    log = run_genjob("log", cwd=repo)
    assert log.code == 0 and "verified (merged)" in log.out
    # one byte of the landed file flipped in a later amend: audit fails that commit
    (repo / "src/a.py").write_text(text.replace("return 42", "return 43"))
    git(repo, "commit", "-q", "-a", "--amend", "--no-edit")
    code, rows = audit_rows(repo)
    assert code == 1 and rows[0]["provenance"] == "outputs since modified", rows
    assert "commit tree != recomputed merge of the receipt's outputs: differs at src/a.py" in rows[0]["problems"]


@pytest.mark.parametrize("first", ["f", "g"])
def test_two_jobs_on_disjoint_hunks_land_in_either_order(ready: tuple[Path, Path], first: str) -> None:
    repo, key = ready
    keys = {"f": job(repo, key, "Make f return 42", EDIT_F), "g": job(repo, key, "Make g return 99", EDIT_G)}
    second = "g" if first == "f" else "f"
    assert run_genjob("apply", keys[first], cwd=repo).code == 0
    res = run_genjob("apply", keys[second], cwd=repo)
    assert res.code == 0 and "merged onto" in res.out, res.err
    text = (repo / "src/a.py").read_text()
    assert "return 42" in text and "return 99" in text
    code, rows = audit_rows(repo)
    assert code == 0 and [r["provenance"] for r in rows] == ["verified (merged)", "verified"], rows


def test_two_jobs_on_the_same_hunk_the_second_refuses_with_the_hunk(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    one = job(repo, key, "Make f return 42", EDIT_F)
    two = job(repo, key, "Make f return 7", EDIT_F_OTHER)
    assert run_genjob("apply", one, cwd=repo).code == 0
    before = snapshot(repo)
    res = run_genjob("verify", two, "--json", cwd=repo)
    (check8,) = [c for c in json.loads(res.out)["checks"] if c["check"] == 8]
    assert res.code == 1 and not check8["ok"] and "does not merge cleanly at src/a.py" in check8["detail"]
    assert f"hint: land it beside the branch for a human merge: git genjob apply {two} --branch genjob/{two}" in (
        run_genjob("verify", two, cwd=repo).err
    )
    res = run_genjob("apply", two, cwd=repo)
    assert res.code == 1
    assert "is stale: its outputs do not merge cleanly" in res.err
    assert "src/a.py: the job and the branch changed the same lines" in res.err
    for line in ("<<<<<<< branch", "    return 42", "=======", "    return 7", ">>>>>>> job"):
        assert line in res.err, res.err
    assert snapshot(repo) == before  # no ref, index or work-tree change


def test_a_merge_that_the_branch_already_holds_is_refused(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = job(repo, key, "Make f return 42", EDIT_F)
    teammate(repo, "return 1", "return 42")  # the same change by hand
    before = snapshot(repo)
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "already holds everything its outputs change" in res.err
    assert snapshot(repo) == before


def test_a_rebased_merged_apply_still_audits(ready: tuple[Path, Path]) -> None:
    """docs/ci.md: a rebase replays the merged commit onto a new parent (the note follows), and
    audit recomputes the merge there."""
    repo, key = ready
    k = job(repo, key, "Make f return 42", EDIT_F)
    git(repo, "checkout", "-qb", "feature")
    teammate(repo, "return 2", "return 3")
    assert run_genjob("apply", k, cwd=repo).code == 0
    git(repo, "checkout", "-q", "main")
    (repo / "README.md").write_text("project, moved on\n")
    git(repo, "commit", "-qam", "main moves on elsewhere")
    git(repo, "checkout", "-q", "feature")
    git(repo, "rebase", "-q", "main")
    code, rows = audit_rows(repo)
    assert code == 0 and [r["provenance"] for r in rows] == ["verified (merged)"], rows
    assert any("now on" in str(f) for f in rows[0]["facts"]), rows  # type: ignore[attr-defined]


def test_a_merged_commit_whose_trailer_names_no_commit_fails_audit(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = job(repo, key, "Make f return 42", EDIT_F)
    teammate(repo, "return 2", "return 3")
    assert run_genjob("apply", k, cwd=repo).code == 0
    message = git(repo, "log", "-1", "--format=%B").replace("Genjob-Merged-Onto: ", "Genjob-Merged-Onto: x")
    git(repo, "commit", "-q", "--amend", "-m", message)
    code, rows = audit_rows(repo)
    assert code == 1 and "not a commit id" in str(rows[0]["problems"]), rows


def test_a_plain_apply_is_not_reported_merged(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = job(repo, key, "Make f return 42", EDIT_F)
    res = run_genjob("apply", k, "--json", cwd=repo)
    assert res.code == 0 and json.loads(res.out)["merged_onto"] is None
    assert "Genjob-Merged-Onto" not in git(repo, "log", "-1", "--format=%B")
    assert [r["provenance"] for r in audit_rows(repo)[1]] == ["verified"]


# -- creates, deletions, modes and binary follow git's rules -----------------------------------


def test_a_create_lands_beside_a_teammate_change_to_another_allowed_path(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = submit_key(repo, "-m", "Add b", "src/a.py", "--create", "src/b.py")
    assert work(repo, key, "echo 'B = 1' > src/b.py", "--once").code == 0
    teammate(repo, "return 2", "return 3")
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 0 and "merged onto" in res.out, res.err
    assert (repo / "src/b.py").read_text() == "B = 1\n" and "return 3" in (repo / "src/a.py").read_text()
    assert [r["provenance"] for r in audit_rows(repo)[1]] == ["verified (merged)"]


def test_a_delete_of_a_file_the_branch_changed_refuses(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = submit_key(repo, "-m", "Remove a", "src/a.py")
    assert work(repo, key, "rm src/a.py", "--once").code == 0
    teammate(repo, "return 2", "return 3")
    before = snapshot(repo)
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "src/a.py: the job deleted it, the branch changed it" in res.err, res.err
    assert snapshot(repo) == before


def test_an_edit_onto_a_file_the_branch_deleted_refuses(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = job(repo, key, "Make f return 42", EDIT_F)
    git(repo, "rm", "-q", "src/a.py")
    git(repo, "commit", "-qm", "teammate removes a.py")
    before = snapshot(repo)
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "src/a.py: the job changed it, the branch deleted it" in res.err, res.err
    assert snapshot(repo) == before


def test_a_mode_the_branch_set_is_kept(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = job(repo, key, "Make f return 42", EDIT_F)
    (repo / "src/a.py").chmod(0o755)
    teammate(repo, "return 2", "return 3")  # and makes it executable
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 0 and "merged onto" in res.out, res.err
    assert git(repo, "ls-tree", "HEAD", "src/a.py").startswith("100755 ")
    assert "return 42" in git(repo, "show", "HEAD:src/a.py") and "return 3" in git(repo, "show", "HEAD:src/a.py")
    assert [r["provenance"] for r in audit_rows(repo)[1]] == ["verified (merged)"]


def test_a_binary_file_both_sides_changed_refuses(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", {"data.bin": "x", "README.md": "project\n"})
    (repo / "data.bin").write_bytes(b"\0\1\2 original")
    git(repo, "commit", "-qam", "binary")
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Rewrite the data", "data.bin")
    assert work(repo, key, "printf 'job\\000' > data.bin", "--once").code == 0
    (repo / "data.bin").write_bytes(b"\0\1\2 teammate")
    git(repo, "commit", "-qam", "teammate data")
    before = snapshot(repo)
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "data.bin: a binary file both the job and the branch changed" in res.err, res.err
    assert snapshot(repo) == before


def test_pre_push_reports_a_merged_apply_and_refuses_one_byte_off(tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    repo = make_repo(tmp_path / "repo", {"src/a.py": A_PY, "README.md": "project\n"})
    git(repo, "remote", "add", "origin", str(bare))
    key = setup_worker(repo)
    assert run_genjob("init", "--hooks", cwd=repo).code == 0
    k = job(repo, key, "Make f return 42", EDIT_F)
    teammate(repo, "return 2", "return 3")
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert run_genjob("push", cwd=repo).code == 0
    proc = subprocess.run(["git", "push", "-q", "origin", "main"], cwd=repo, capture_output=True, text=True)
    short = git(repo, "rev-parse", "--short=12", "HEAD").strip()
    assert proc.returncode == 0 and f"git-genjob pre-push: {short} verified (merged)" in proc.stderr, proc.stderr
    (repo / "src/a.py").write_text((repo / "src/a.py").read_text().replace("return 42", "return 43"))
    git(repo, "commit", "-q", "-a", "--amend", "--no-edit", "--no-verify")
    assert run_genjob("push", cwd=repo).code == 0
    before = refs(bare)
    proc = subprocess.run(["git", "push", "-q", "-f", "origin", "main"], cwd=repo, capture_output=True, text=True)
    assert proc.returncode != 0 and "recomputed merge" in proc.stderr, proc.stderr
    assert refs(bare) == before


# -- apply --all: the apply queue ---------------------------------------------------------------


def test_apply_all_lands_in_submit_order_and_stops_at_the_first_conflict(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    first = job(repo, key, "Make f return 42", EDIT_F)
    second = job(repo, key, "Make g return 99", EDIT_G)
    third = job(repo, key, "Make f return 7", EDIT_F_OTHER)
    fourth = submit_key(repo, "-m", "Touch the readme", "README.md")
    assert work(repo, key, "echo more >> README.md", "--once").code == 0
    res = run_genjob("apply", "--all", "--json", cwd=repo)
    assert res.code == 1, res.err
    doc = json.loads(res.out)
    assert [a["key"] for a in doc["landed"]] == [first, second]
    assert doc["landed"][0]["merged_onto"] is None and doc["landed"][1]["merged_onto"] is not None
    assert doc["stopped"]["key"] == third and doc["stopped"]["exit_code"] == 1
    assert "  <<<<<<< branch" in doc["stopped"]["details"] and doc["remaining"] == [fourth]
    assert git(repo, "status", "--porcelain") == ""
    code, rows = audit_rows(repo)
    assert code == 0 and [r["provenance"] for r in rows] == ["verified (merged)", "verified"]
    # the human summary, once the conflicting job is dropped: the rest lands
    assert run_genjob("drop", third, "--why", "conflicts with f's other change", cwd=repo).code == 0
    res = run_genjob("apply", "--all", cwd=repo)
    assert res.code == 0, res.err
    assert res.out.splitlines()[-1] == "1 landed, 0 skipped", res.out


def test_apply_all_human_summary_names_what_landed_and_where_it_stopped(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    first = job(repo, key, "Make f return 42", EDIT_F)
    second = job(repo, key, "Make f return 7", EDIT_F_OTHER)
    res = run_genjob("apply", "--all", cwd=repo)
    assert res.code == 1
    lines = res.out.splitlines()
    assert lines[0].startswith(f"applied {first} as ")
    stale = f"job {second} is stale: its outputs do not merge cleanly onto refs/heads/main"
    assert lines[1] == f"stopped at {second}: {stale}"
    assert lines[-1] == f"1 landed, 0 skipped, stopped at {second}, 0 not attempted"
    assert f"git genjob resubmit {second}" in res.err


def test_apply_all_skips_a_receipt_that_does_not_verify(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    bad = submit_key(repo, "-m", "Fail", "src/a.py")
    assert work(repo, key, "exit 3", "--once").code == 0  # an aborted receipt
    good = job(repo, key, "Make g return 99", EDIT_G)
    res = run_genjob("apply", "--all", "--json", cwd=repo)
    doc = json.loads(res.out)
    assert res.code == 0 and [a["key"] for a in doc["landed"]] == [good], res.out
    assert [s["key"] for s in doc["skipped"]] == [bad] and "check 4" in doc["skipped"][0]["why"]


def test_apply_takes_key_or_all(ready: tuple[Path, Path]) -> None:
    repo, _ = ready
    before = snapshot(repo)
    assert run_genjob("apply", cwd=repo).code == 2
    assert run_genjob("apply", "--all", "abcd", cwd=repo).code == 2
    assert snapshot(repo) == before


# -- on conflict: a side branch, or a new job on the current content ----------------------------


def test_apply_to_genjob_branch_lands_the_job_on_its_base_beside_the_branch(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    base = git(repo, "rev-parse", "HEAD").strip()
    one = job(repo, key, "Make f return 42", EDIT_F)
    two = job(repo, key, "Make f return 7", EDIT_F_OTHER)
    assert run_genjob("apply", one, cwd=repo).code == 0
    main, worktree = git(repo, "rev-parse", "main").strip(), snapshot(repo)[1:3]
    res = run_genjob("apply", two, "--branch", f"genjob/{two}", cwd=repo)
    assert res.code == 0, res.err
    assert git(repo, "rev-parse", f"genjob/{two}^").strip() == base  # on the job's own base
    assert "return 7" in git(repo, "show", f"genjob/{two}:src/a.py")
    assert git(repo, "rev-parse", "main").strip() == main and snapshot(repo)[1:3] == worktree
    assert "Genjob-Merged-Onto" not in git(repo, "log", "-1", "--format=%B", f"genjob/{two}")
    code, rows = audit_rows(repo, f"genjob/{two}")
    assert code == 0 and [r["provenance"] for r in rows] == ["verified"], rows
    res = run_genjob("apply", two, "--branch", f"genjob/{two}", cwd=repo)
    assert res.code == 0 and "already applied" in res.out


def test_apply_to_a_genjob_branch_of_another_key_is_refused(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = job(repo, key, "Make f return 42", EDIT_F)
    before = snapshot(repo)
    res = run_genjob("apply", k, "--branch", "genjob/other", cwd=repo)
    assert res.code == 2 and "no branch genjob/other" in res.err
    assert snapshot(repo) == before


F_TO_7 = "sed -i '2s/.*/    return 7/' src/a.py"  # f's line, whatever it holds now


def test_resubmit_mints_a_new_job_on_the_current_content_and_the_old_one_ends_superseded(
    ready: tuple[Path, Path],
) -> None:
    repo, key = ready
    one = job(repo, key, "Make f return 42", EDIT_F)
    two = job(repo, key, "Make f return 7", F_TO_7)
    assert run_genjob("apply", one, cwd=repo).code == 0
    assert run_genjob("apply", two, cwd=repo).code == 1
    res = run_genjob("resubmit", two, "--json", cwd=repo)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    new = doc["new"]
    assert doc["old"] == two and new != two and doc["state"] == "queued" and not doc["already"]
    assert json.loads(run_genjob("status", two, "--json", cwd=repo).out)["state"] == "superseded"
    old_show, new_show = (json.loads(run_genjob("show", k, "--json", cwd=repo).out) for k in (two, new))
    assert old_show["meta"]["final"]["superseded_by"] == new and new_show["meta"]["supersedes"] == two
    assert new_show["job"]["instruction"] == old_show["job"]["instruction"]
    assert f"superseded by {new}" in run_genjob("show", two, cwd=repo).out
    assert f"supersedes {two}" in run_genjob("show", new, cwd=repo).out
    assert two in run_genjob("status", "--state", "superseded", cwd=repo).out
    res = run_genjob("apply", two, cwd=repo)
    assert res.code == 1 and f"job {two} was superseded: resubmitted as {new}" in res.err
    # end to end: the new job is worked and applied on top of the first one
    assert work(repo, key, F_TO_7, "--once").code == 0
    res = run_genjob("apply", new, cwd=repo)
    assert res.code == 0 and "merged onto" not in res.out, res.err
    assert "    return 7\n" in (repo / "src/a.py").read_text()
    code, rows = audit_rows(repo)
    assert code == 0 and [r["provenance"] for r in rows] == ["verified", "verified"]
    again = run_genjob("resubmit", two, "--json", cwd=repo)
    assert again.code == 0 and json.loads(again.out)["already"] and json.loads(again.out)["new"] == new


def test_resubmit_of_a_job_head_still_matches_is_refused(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = job(repo, key, "Make f return 42", EDIT_F)
    before = snapshot(repo)
    res = run_genjob("resubmit", k, cwd=repo)
    assert res.code == 1 and "HEAD still holds its inputs" in res.err
    assert snapshot(repo) == before


def test_rebase_cherry_pick_and_squash_of_a_merged_apply(ready: tuple[Path, Path]) -> None:
    """docs/ci.md's table, for a merged apply: rebase keeps the proof, a cherry-pick needs its
    note copied, then verifies; a squash names the job with a fact, not a failure."""
    repo, key = ready
    git(repo, "switch", "-q", "-c", "feature")
    a = job(repo, key, "Make f return 42", EDIT_F)
    teammate(repo, "return 2", "return 3")
    assert "merged onto" in run_genjob("apply", a, cwd=repo).out
    b = submit_key(repo, "-m", "Document", "README.md")
    assert work(repo, key, "echo documented >> README.md", "--once").code == 0
    assert run_genjob("apply", b, cwd=repo).code == 0
    git(repo, "switch", "-q", "main")
    (repo / "NOTES.txt").write_text("unrelated\n")
    git(repo, "add", "NOTES.txt")
    git(repo, "commit", "-q", "-m", "Unrelated work on main")
    # rebase
    git(repo, "switch", "-q", "feature")
    git(repo, "rebase", "-q", "main")
    code, rows = audit_rows(repo, "main..feature")
    assert code == 0 and [(r["jobs"], r["provenance"]) for r in rows] == [
        ([b], "verified"),
        ([a], "verified (merged)"),
    ], rows
    # cherry-pick of the merged commit onto main, which lacks the teammate's line: no note until copied
    merged_commit = git(repo, "rev-parse", "feature~1").strip()
    git(repo, "switch", "-q", "-c", "hotfix", "main")
    git(repo, "cherry-pick", merged_commit)
    code, rows = audit_rows(repo, "main..hotfix")
    assert code == 1 and rows[0]["provenance"] == "unproven"
    for ref in ("genjob", "genjob-receipts"):  # the repair audit prints: the summary and the envelope
        git(repo, "notes", f"--ref={ref}", "copy", merged_commit, "HEAD")
    code, rows = audit_rows(repo, "main..hotfix")
    assert code == 0 and rows[0]["provenance"] == "verified (merged)", rows
    assert "return 3" not in (repo / "src/a.py").read_text()  # recomputed on this parent
    # squash
    git(repo, "switch", "-q", "main")
    body = git(repo, "log", "--reverse", "--format=* %B", "main..feature")
    git(repo, "merge", "-q", "--squash", "feature")
    git(repo, "commit", "-q", "-m", f"Feature (#12)\n\n{body}\nCo-authored-by: Bot <bot@example.com>")
    code, rows = audit_rows(repo, "HEAD~1..HEAD")
    assert code == 0 and rows[0]["provenance"] == "squashed with 2 jobs", rows
    assert f"{a}: receipt verified; outputs since modified: src/a.py" in rows[0]["facts"]  # type: ignore[operator]


def test_a_symlink_the_branch_put_at_the_job_s_path_refuses(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = job(repo, key, "Make f return 42", EDIT_F)
    (repo / "src/a.py").unlink()
    (repo / "src/a.py").symlink_to("../README.md")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--no-verify", "-m", "a.py is now a link")
    before = snapshot(repo)
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "src/a.py: it is a symbolic link on the branch" in res.err, res.err
    assert snapshot(repo) == before


@pytest.mark.parametrize("swap", ["outputs/src/a.py", "inputs/src/a.py"])
def test_audit_of_a_merged_apply_rehashes_the_stored_job_it_recomputes_from(
    ready: tuple[Path, Path], swap: str
) -> None:
    """The blobs a merged apply is recomputed from lie outside every signature: a job ref whose
    outputs/ or inputs/ were swapped (anyone who can push refs/genjob/* can) fails audit."""
    from git_genjob.storage.archive import Archive
    from git_genjob.storage.layout import job_ref
    from git_genjob.storage.store import RefUpdate, Store
    from tests.helpers.common import raw_repo

    repo, key = ready
    k = job(repo, key, "Make f return 42", EDIT_F)
    teammate(repo, "return 2", "return 3")
    assert run_genjob("apply", k, cwd=repo).code == 0
    store = Store.open(str(repo))
    entry = Archive(store).entry(k)
    assert entry is not None
    files = store.tree_files(entry)
    files[swap] = store.blob((repo / "src/a.py").read_bytes())  # the landed, merged content
    raw = raw_repo(store)
    sig = pygit2.Signature("Mallory", "m@example.com")
    forged = raw.create_commit(None, sig, sig, "forged\n", store.build_tree(files), [])
    store.update_refs([RefUpdate(job_ref(k), None, forged)])  # a live ref is read before the archive
    code, rows = audit_rows(repo)
    assert code == 1 and rows[0]["provenance"] == "unproven", rows
    problems = str(rows[0]["problems"])
    # A forged chain of its own is damaged before its blobs are read (SPEC §11: a job is its submit commit).
    assert "live job ref is damaged" in problems and "does not start with a submit event" in problems, rows


def test_a_merged_apply_onto_a_branch_not_checked_out_leaves_the_work_tree(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    git(repo, "branch", "release")
    k = job(repo, key, "Make f return 42", EDIT_F)
    git(repo, "switch", "-q", "release")
    tip = teammate(repo, "return 2", "return 3")
    git(repo, "switch", "-q", "main")
    before = snapshot(repo)
    res = run_genjob("apply", k, "--branch", "release", "--json", cwd=repo)
    assert res.code == 0 and json.loads(res.out)["merged_onto"] == tip, res.err
    text = git(repo, "show", "release:src/a.py")
    assert "return 42" in text and "return 3" in text
    assert snapshot(repo)[:3] == before[:3]  # HEAD, index and work tree of main untouched
    code, rows = audit_rows(repo, "main..release")
    assert code == 0 and [r["provenance"] for r in rows] == ["verified (merged)"]


def _superseded_pair(tmp_path: Path) -> tuple[Path, Path, str]:
    """A repository with an origin, holding a job whose outputs no longer merge, everything pushed."""
    from tests.helpers.common import repo_with_remote

    bare, repo = repo_with_remote(tmp_path)
    (repo / "src/a.py").write_text(A_PY)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a.py")
    key = setup_worker(repo)
    one = job(repo, key, "Make f return 42", EDIT_F)
    two = job(repo, key, "Make f return 7", F_TO_7)
    assert run_genjob("apply", one, cwd=repo).code == 0
    git(repo, "push", "-q", "origin", "main")
    res = run_genjob("push", "origin", cwd=repo)
    assert res.code == 0, res.err
    return bare, repo, two


def test_resubmit_remote_publishes_the_new_job_and_the_superseded_old_one_in_one_push(tmp_path: Path) -> None:
    """Issue 35 item 1, SPEC §12.4: right after `git genjob push`, `resubmit --remote` lands both on the remote."""
    bare, repo, two = _superseded_pair(tmp_path)
    res = run_genjob("resubmit", two, "--remote", "origin", "--json", cwd=repo)
    assert res.code == 0, res.err
    new = json.loads(res.out)["new"]
    on_remote = refs(bare)
    assert f"refs/genjob/jobs/{new}" in on_remote and f"refs/genjob/jobs/{two}" not in on_remote
    mine = refs(repo)
    for name in (f"refs/genjob/jobs/{new}", "refs/genjob/archive"):
        assert mine[name] == on_remote[name], name
    assert f"refs/genjob/jobs/{two}" not in mine
    # a teammate's clone sees the old job superseded and the new one queued
    git(tmp_path, "clone", "-q", str(bare), "b")
    b = tmp_path / "b"
    assert run_genjob("fetch", "origin", cwd=b).code == 0
    assert json.loads(run_genjob("status", two, "--json", cwd=b).out)["state"] == "superseded"
    assert json.loads(run_genjob("status", new, "--json", cwd=b).out)["state"] == "queued"


def test_resubmit_remote_that_the_remote_refuses_leaves_both_sides_as_they_were(tmp_path: Path) -> None:
    """Issue 35 item 1: a pre-receive hook declines the push; no new job here or there, the old one stays done."""
    bare, repo, two = _superseded_pair(tmp_path)
    hook = bare / "hooks/pre-receive"
    hook.write_text("#!/bin/sh\necho 'no genjob writes today' >&2\nexit 1\n")
    hook.chmod(0o755)
    before_remote, before = refs(bare), snapshot(repo)
    res = run_genjob("resubmit", two, "--remote", "origin", cwd=repo)
    assert res.code == 1, res.err
    assert "origin refused the push: its hook declined it (no genjob writes today)" in res.err
    assert refs(bare) == before_remote and snapshot(repo) == before
    assert json.loads(run_genjob("status", two, "--json", cwd=repo).out)["state"] == "done"
    hook.unlink()  # once the remote takes it, the same command finishes
    res = run_genjob("resubmit", two, "--remote", "origin", "--json", cwd=repo)
    assert res.code == 0, res.err
    assert f"refs/genjob/jobs/{json.loads(res.out)['new']}" in refs(bare)


@pytest.mark.parametrize("fault", ["after-push", "ref-locked@1", "ref-locked@3"])
def test_resubmit_remote_killed_after_the_push_is_finished_by_the_next_run(tmp_path: Path, fault: str) -> None:
    """Issue 35: nothing moves before the one push (a refused push: the test above); killed after
    it, between any two local ref moves, the remote holds both jobs as after, and the next run
    brings this clone there and says it was done."""
    from tests.helpers.common import run_genjob_process

    bare, repo, two = _superseded_pair(tmp_path)
    res = run_genjob_process("resubmit", two, "--remote", "origin", cwd=repo, env={"GENJOB_FAULT": fault})
    assert res.code == -9, (res.code, res.err)
    on_remote = refs(bare)
    assert f"refs/genjob/jobs/{two}" not in on_remote
    assert len([r for r in on_remote if r.startswith("refs/genjob/jobs/")]) == 1  # both went out together
    assert run_genjob("recover", cwd=repo).code == 0  # clears a dead writer's lock
    res = run_genjob("resubmit", two, "--remote", "origin", "--json", cwd=repo)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["already"] and f"refs/genjob/jobs/{doc['new']}" in on_remote
    mine = refs(repo)
    assert f"refs/genjob/jobs/{two}" not in mine and mine["refs/genjob/archive"] == on_remote["refs/genjob/archive"]
    assert mine[f"refs/genjob/jobs/{doc['new']}"] == on_remote[f"refs/genjob/jobs/{doc['new']}"]
    assert refs(bare) == on_remote
