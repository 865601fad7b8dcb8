"""A verified job lands on a branch that moved, and audit still proves it exactly (issue 23, SPEC §11)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import git, make_repo, refs, run_genjob, setup_worker, submit_key, work

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
    git(repo, "commit", "-qam", "teammate: " + new.strip())
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
    check8 = json.loads(res.out)["checks"][-1]
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
    check8 = json.loads(res.out)["checks"][-1]
    assert res.code == 1 and not check8["ok"] and "does not merge cleanly at src/a.py" in check8["detail"]
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
