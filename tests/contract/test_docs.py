"""Every docs/*.md block marked `<!-- runnable -->` runs, in order, in an empty directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.common import REPO_ROOT

DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))
MARKED = re.compile(r"<!-- runnable -->\s*\n```sh\n(.*?)```", re.S)


def runnable(doc: Path) -> str:
    return "\n".join(MARKED.findall(doc.read_text()))


@pytest.mark.parametrize("doc", [d for d in DOCS if runnable(d)], ids=lambda d: d.name)
def test_runnable_blocks(doc: Path, tmp_path: Path) -> None:
    """Each block asserts its outcome (`work --strict`, a status or file check), not only that
    every command exits 0: `work` exits 0 on an aborted receipt."""
    script = "set -e\n" + runnable(doc)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run(["sh", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{doc.name}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_every_runnable_work_asserts_its_receipt() -> None:
    for doc in DOCS:
        for line in runnable(doc).splitlines():
            if line.startswith("git genjob work "):
                assert "--strict" in line, f"{doc.name}: {line}"


def test_the_generators_example_runs_under_landlock(tmp_path: Path) -> None:
    from git_genjob.worker.generators.sandbox.choose import landlock_problem

    if landlock_problem(False) is not None:
        pytest.skip("Landlock is not usable here")
    script = "set -e\n" + runnable(REPO_ROOT / "docs" / "generators.md")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}", GENJOB_SANDBOX="landlock")
    proc = subprocess.run(["sh", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"generators.md:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_some_docs_are_runnable() -> None:
    assert {d.name for d in DOCS if runnable(d)} >= {"tutorial.md", "generators.md", "ci.md"}
