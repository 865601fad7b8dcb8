"""`git genjob demo` (cli/demo.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.common import git, run_genjob


# From tests/test_first_messages.py: a first-time mistake gets a message naming its real cause (issue 22 item 15).
def test_the_demo_transcript_replays_word_for_word(tmp_path: Path) -> None:
    from git_genjob.cli.demo import _make_repo

    res = run_genjob("demo", cwd=tmp_path)
    assert res.code == 0, res.err
    commands = [line[2:] for line in res.out.splitlines() if line.startswith("$ ")]
    old_base = os.path.dirname(commands[0].split(" ", 1)[1])  # `cd BASE/repo`
    base = tmp_path / "replay"
    base.mkdir()
    repo = _make_repo(str(base))
    script = "set -e\n" + "\n".join(c.replace(old_base, str(base)) for c in commands) + "\n"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run(["sh", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    key = commands[-2].split()[-1]  # `git genjob apply KEY`
    assert f"Genjob-Key: {key}" in git(repo, "log", "-1", "--format=%B")
    assert run_genjob("audit", cwd=repo).code == 0
