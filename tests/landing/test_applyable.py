"""`status --state applyable`: the docs' idiom picks a job apply can land, never a rejected one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.common import REPO_ROOT, git, run_genjob, setup_worker, submit_key, work


def test_the_docs_idiom_picks_an_applyable_job_not_a_rejected_one(repo: Path) -> None:
    key = setup_worker(repo)
    rejected = submit_key(repo, "-m", "First, and the generator changes nothing", "README.md")
    assert work(repo, key, "true", "--once").code == 0  # unchanged: a rejected receipt
    aborted = submit_key(repo, "-m", "Second, and the generator fails", "tests/test_user.py")
    assert work(repo, key, "exit 3", "--once").code == 0  # an aborted receipt
    good = submit_key(repo, "-m", "Third", "src/user.py")
    assert work(repo, key, "echo '# ok' >> src/user.py", "--once").code == 0
    done = json.loads(run_genjob("status", "--state", "done", "--json", cwd=repo).out)
    assert [r["key"] for r in done] == [rejected, aborted, good]  # [0] would be the rejected one
    res = run_genjob("status", "--state", "applyable", "--json", cwd=repo)
    assert res.code == 0, res.err
    assert [(r["key"], r["state"], r["result"]) for r in json.loads(res.out)] == [(good, "done", "ok")]
    human = run_genjob("status", "--state", "applyable", cwd=repo).out
    assert good in human and rejected not in human and aborted not in human
    # Every `--state …` idiom of the docs, run as written: it names the ok job, and apply lands it.
    idioms = set()
    for doc in (REPO_ROOT / "docs").glob("*.md"):
        idioms |= set(
            re.findall(r"\$\((git genjob status --state \w+ --json \| python3 -c '[^']*')\)", doc.read_text())
        )
    assert idioms and not any("--state done" in i for i in idioms)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    for idiom in (i for i in idioms if "--state applyable" in i):
        proc = subprocess.run(["sh", "-c", idiom], cwd=repo, env=env, capture_output=True, text=True)
        assert proc.stdout.strip() == good, (idiom, proc.stderr)
    assert run_genjob("apply", good, cwd=repo).code == 0
    assert "# ok" in git(repo, "show", "HEAD:src/user.py")
    assert run_genjob("status", "--state", "applyable", cwd=repo).out.startswith("no jobs in state applyable")
