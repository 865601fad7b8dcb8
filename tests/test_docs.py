"""Every docs/*.md block marked `<!-- runnable -->` runs, in order, in an empty directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))
MARKED = re.compile(r"<!-- runnable -->\s*\n```sh\n(.*?)```", re.S)


def runnable(doc: Path) -> str:
    return "\n".join(MARKED.findall(doc.read_text()))


@pytest.mark.parametrize("doc", [d for d in DOCS if runnable(d)], ids=lambda d: d.name)
def test_runnable_blocks(doc: Path, tmp_path: Path) -> None:
    script = "set -e\n" + runnable(doc)
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run(["sh", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"{doc.name}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


def test_some_docs_are_runnable() -> None:
    assert {d.name for d in DOCS if runnable(d)} >= {"tutorial.md", "generators.md", "ci.md"}
