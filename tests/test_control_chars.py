"""Item 9 of issue 22: a terminal escape in an instruction never reaches a commit message."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from git_genjob.documents.errors import BadInput
from git_genjob.documents.job import Job
from tests.conftest import git, refs, run_genjob, setup_worker, submit_key, work

TITLE_AND_CLEAR = "Fix the bug\x1b]0;pwned\x07\x1b[2J\x1b[H"


@pytest.mark.parametrize("how", ["-m", "-F"])
def test_submit_refuses_control_characters_and_writes_nothing(repo: Path, tmp_path: Path, how: str) -> None:
    setup_worker(repo)
    before_refs, before_tree = refs(repo), git(repo, "status", "--porcelain", "--ignored")
    arg = TITLE_AND_CLEAR
    if how == "-F":
        (tmp_path / "msg.txt").write_text(arg)
        arg = str(tmp_path / "msg.txt")
    proc = subprocess.run(
        [sys.executable, "-m", "git_genjob", "submit", how, arg, "src/user.py"],
        cwd=repo,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "control character U+001B (ESC" in proc.stderr and "line 1, column 12" in proc.stderr
    assert "\x1b" not in proc.stderr
    assert refs(repo) == before_refs
    assert git(repo, "status", "--porcelain", "--ignored") == before_tree


@pytest.mark.parametrize("text", ["a\rb", "a\x08b", "a\x7fb", "a\x9bb", "a\u202eb", "a\x00b"])
def test_every_terminal_control_is_refused(repo: Path, text: str) -> None:
    res = run_genjob("submit", "-m", text, "src/user.py", cwd=repo)
    assert res.code == 2 and "instruction contains" in res.err, res.err


def test_tabs_newlines_and_joiners_are_kept(repo: Path) -> None:
    text = "Fix\tthis\n\nin detail: \u0645\u200c\u06cc and 👩\u200d💻"
    k = submit_key(repo, "-m", text, "src/user.py")
    assert json.loads(git(repo, "show", f"refs/genjob/jobs/{k}:job.json"))["instruction"] == text


def test_a_job_minted_elsewhere_with_an_escape_lands_with_it_escaped(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_path = setup_worker(repo)
    with monkeypatch.context() as m:  # minted by a tool (or a genjob before this) that let it in
        m.setattr("git_genjob.documents.job._CONTROL", re.compile("(?!)"))
        k = submit_key(repo, "-m", TITLE_AND_CLEAR + "\nand \x1b[1A more", "src/user.py")
    with pytest.raises(BadInput):
        Job.mint(TITLE_AND_CLEAR, {}, "k")
    stored = Job.from_bytes(git(repo, "show", f"refs/genjob/jobs/{k}:job.json").encode())
    assert stored.instruction.startswith(TITLE_AND_CLEAR)  # read as it is: listed, shown escaped
    assert work(repo, key_path, "echo x >> src/user.py", "--once").code == 0
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 0, res.out + res.err
    message = git(repo, "log", "-1", "--format=%B")
    assert "\x1b" not in git(repo, "log", "--all", "--format=%B%n%N", "--notes=genjob")
    assert message.startswith("genjob: Fix the bug\\x1b]0;pwned\\x07\\x1b[2J\\x1b[H\n"), message
    assert "and \\x1b[1A more" in message
    assert run_genjob("audit", cwd=repo).code == 0
