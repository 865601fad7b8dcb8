"""One end-to-end test (issue 25): the GitLab file `ci init gitlab` writes, run by
gitlab-ci-local 4.60.0 with the shell executor against a bare remote served over git smart HTTP
on 127.0.0.1. Jobs are submitted and pushed, the worker matrix claims them (no double claims,
each generated once), the land job applies them on genjob/land and opens the merge request by
push options, and the audit job of that merge request names every commit.

.ci/run installs gitlab-ci-local into .ci/npm and rsync from apt; under CI=true this test never
skips. About a minute on a 2-core machine; every step is bounded.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.common import REPO_ROOT, git, make_repo, run_genjob, setup_worker, shared_dir, submit_key
from tests.helpers.githttp import serve_git

JOBS = 6
WORKERS = 3
GEN = """#!/bin/sh
# deterministic: every allowed path gets the instruction; each run is logged once
set -e
for p in $(python3 -c 'import json,os; print(" ".join(json.load(open(os.environ["GENJOB_JOB"]))["allowed_paths"]))'); do
  mkdir -p "$(dirname "$p")"
  printf '%s\\n' "$GENJOB_INSTRUCTION" > "$p"
done
printf '%s\\n' "$GENJOB_KEY" >> "$(dirname "$0")/runs.log"
"""


def gitlab_ci_local() -> str:
    found = os.environ.get("GITLAB_CI_LOCAL") or shutil.which(
        "gitlab-ci-local", path=str(REPO_ROOT / ".ci/npm/node_modules/.bin")
    )
    missing = [name for name, ok in (("gitlab-ci-local", found), ("rsync", shutil.which("rsync"))) if not ok]
    if missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{', '.join(missing)} missing: .ci/run installs them (npm into .ci/npm, apt rsync)")
        pytest.skip(f"{', '.join(missing)} not installed (.ci/run installs them)")
    assert found is not None
    return found


def pipeline(glc: str, project: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
        "NO_COLOR": "1",
        "FORCE_COLOR": "0",
    }
    return subprocess.run(
        [glc, "--shell-executor-no-image", "--shell-isolation", "--home", str(project.parent / "glc-home"), *args],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.slow
@pytest.mark.forge
def test_gitlab_pipeline_end_to_end_under_gitlab_ci_local(tmp_path: Path) -> None:
    glc = gitlab_ci_local()
    served = tmp_path / "served"
    served.mkdir()
    bare = served / "project.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    git(bare, "config", "http.receivepack", "true")
    git(bare, "config", "receive.advertisePushOptions", "true")  # GitLab's merge_request.* push options
    shared = shared_dir(tmp_path)
    (shared / "gen.sh").write_text(GEN)
    with serve_git(served) as base:
        url = f"{base}/project.git"
        planner = make_repo(tmp_path / "planner")
        git(planner, "remote", "add", "origin", url)
        worker_key = setup_worker(planner, "ci-worker")
        res = run_genjob(
            "ci", "init", "gitlab", "--workers", str(WORKERS), "--max-jobs", "3",
            "--generator", f"exec:sh {shared}/gen.sh", "--install", "git genjob --version",
            f"--work-option=--sandbox-rw={shared}", "--json", cwd=planner,
        )  # fmt: skip
        assert res.code == 0, res.err
        git(planner, "add", ".gitlab", ".gitlab-ci.yml")
        git(planner, "commit", "-q", "-m", "ci: genjob workers, land and audit")
        git(planner, "push", "-q", "origin", "main")
        keys = [submit_key(planner, "-m", f"write gen/{n}.txt", "--create", f"gen/{n}.txt") for n in range(JOBS)]
        assert run_genjob("push", "origin", cwd=planner).code == 0
        base_sha = git(planner, "rev-parse", "HEAD").strip()

        project = tmp_path / "checkout"  # what the runner checks out: a fresh clone over HTTP
        git(tmp_path, "clone", "-q", url, str(project))
        run = pipeline(
            glc, project, "--variable", "CI_PIPELINE_SOURCE=web", "--variable", f"GENJOB_WORKER_KEY={worker_key}",
            timeout=170,
        )  # fmt: skip
        log = run.stdout + run.stderr
        assert run.returncode == 0, log[-6000:]
        for n in range(1, WORKERS + 1):
            assert f"PASS  genjob-work: [{n}/{WORKERS}]" in log, log[-6000:]
        assert "git genjob recover --remote origin" in log, log[-6000:]
        assert not re.search(r"> recover exited \d", log), log[-6000:]  # it ran, and without an error

        runs = (shared / "runs.log").read_text().split()
        assert sorted(runs) == sorted(keys), log[-4000:]  # each job generated exactly once
        git(planner, "fetch", "-q", "origin", "genjob/land:genjob/land")  # the commits the archive names
        assert run_genjob("fetch", "origin", cwd=planner).code == 0
        for key in keys:
            doc = json.loads(run_genjob("show", key, "--json", cwd=planner).out)
            events = [e["event"] for e in doc["events"]]
            assert events.count("claimed") == 1, (key, events)  # no double claim
            assert doc["state"] == "applied", (key, doc["state"])
        land = git(planner, "rev-parse", "genjob/land").strip()
        assert git(planner, "ls-remote", "origin", "refs/heads/genjob/land").split()[0] == land
        landed = git(planner, "rev-list", "--reverse", f"{base_sha}..{land}").split()
        assert len(landed) == JOBS
        for n in range(JOBS):
            assert git(planner, "show", f"{land}:gen/{n}.txt") == f"write gen/{n}.txt\n"
        assert run_genjob("audit", f"{base_sha}..{land}", cwd=planner).code == 0

        # the merge request's pipeline, opened from a fork: the audit job, read-only
        git(project, "fetch", "-q", "origin", "genjob/land")
        git(project, "checkout", "-q", "-B", "genjob/land", "FETCH_HEAD")
        audit = pipeline(
            glc, project, "genjob-audit",
            "--variable", "CI_PIPELINE_SOURCE=merge_request_event",
            "--variable", f"CI_MERGE_REQUEST_DIFF_BASE_SHA={base_sha}",
            "--variable", "CI_MERGE_REQUEST_TARGET_BRANCH_NAME=main",
            "--variable", "CI_MERGE_REQUEST_PROJECT_ID=1",
            "--variable", "CI_MERGE_REQUEST_SOURCE_PROJECT_ID=2",
            timeout=90,
        )  # fmt: skip
        out = audit.stdout + audit.stderr
        assert "cannot push refs/genjob from a fork; audit ran read-only" in out, out[-4000:]
        assert audit.returncode == 0, out[-6000:]
        assert "| commit | job |" in out, out[-4000:]  # the Markdown report's table
        for commit in landed:  # one row per genjob commit: its id or its job's key names it
            key = git(planner, "log", "-1", "--format=%(trailers:key=Genjob-Key,valueonly)", commit).strip()
            assert key in keys and (commit[:7] in out or key[:8] in out), (commit, key, out[-4000:])
