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
from tests.helpers.common import git, refs, run_genjob, setup_worker, submit_key, work

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


DECEPTIVE_CASES = {
    "\u2028": "line or paragraph separator",
    "\u2029": "line or paragraph separator",
    "\u200b": "zero-width or invisible",
    "\u2060": "zero-width or invisible",
    "\ufeff": "zero-width or invisible",
    "\u115f": "zero-width or invisible",
    "\u1160": "zero-width or invisible",
    "\u3164": "zero-width or invisible",
    "\u061c": "bidi control",
    "\u200e": "bidi control",
    "\u200f": "bidi control",
    "\u2066": "bidi control",
    "\u202e": "bidi control",
}


@pytest.mark.parametrize("char", list(DECEPTIVE_CASES), ids=[f"U+{ord(c):04X}" for c in DECEPTIVE_CASES])
def test_instructions_and_paths_refuse_what_shows_a_reader_something_else(repo: Path, char: str) -> None:
    """SPEC §12.2: what reorders, hides or breaks a line unseen is refused with the character
    named (issue 32 item 9), in an instruction and in a path `submit --create` would write."""
    before = refs(repo)
    res = run_genjob("submit", "-m", f"Bump version{char} (reviewed)", "src/user.py", cwd=repo)
    assert res.code == 2 and f"U+{ord(char):04X} (a {DECEPTIVE_CASES[char]}" in res.err, res.err
    assert char not in res.err
    res = run_genjob("submit", "-m", "Add a file", "--create", f"src/{char}yp.a", cwd=repo)
    assert res.code == 2 and f"U+{ord(char):04X}" in res.err, res.err
    assert char not in res.err
    assert refs(repo) == before and not (repo / "src" / f"{char}yp.a").exists()


def test_a_joiner_between_ascii_letters_is_refused_and_one_in_a_word_is_kept(repo: Path) -> None:
    res = run_genjob("submit", "-m", "ap\u200cproved by security", "src/user.py", cwd=repo)
    assert res.code == 2 and "U+200C" in res.err
    assert submit_key(repo, "-m", "in Persian: \u0645\u200c\u06cc", "src/user.py")


def test_a_job_minted_elsewhere_with_a_filler_is_printed_escaped(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_path = setup_worker(repo)
    with monkeypatch.context() as m:  # minted by a tool (or a genjob before this) that let it in
        m.setattr("git_genjob.documents.job._CONTROL", re.compile("(?!)"))
        k = submit_key(repo, "-m", "Bump version\u3164\u2028approved by security", "src/user.py")
    shown = run_genjob("show", k, cwd=repo)
    assert shown.code == 0 and "\u3164" not in shown.out and "\u2028" not in shown.out
    assert "\\u3164" in shown.out
    assert work(repo, key_path, "echo 'x = 1' > src/user.py", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    message = git(repo, "log", "-1", "--format=%B")
    assert "\u3164" not in message and "\u2028" not in message and "\\u3164" in message
    log = run_genjob("log", cwd=repo)
    assert log.code == 0 and "\u3164" not in log.out and "\u2028" not in log.out
