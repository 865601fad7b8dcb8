"""Text from a job, a remote or a generator reaches a terminal only escaped; --json keeps it exact."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from git_genjob.documents.display import DECEPTIVE, one_line, printable
from git_genjob.documents.errors import BadInput, format_error
from tests.helpers.common import git, repo_with_remote, run_genjob, setup_worker, submit_key, work
from tests.helpers.stubserver import Stub

# Clear the screen, set the window title, a C1 CSI, DEL, a bell and a right-to-left override.
HOSTILE = "fix\x1b[2J\x1b]0;pwned\x07 it\x9b1m\x7f \u202ereversed"
CONTROLS = ("\x1b", "\x07", "\x9b", "\x7f", "\u202e")


@given(st.text() | st.sampled_from(sorted(DECEPTIVE)).map(lambda c: "a" + c + "b"))
def test_printable_text_is_kept_and_anything_else_is_escaped(text: str) -> None:
    shown = printable(text)
    assert shown.isprintable() and DECEPTIVE.isdisjoint(shown)
    # kept as it is exactly when printable and free of the characters that pass for others
    # (U+034F and the like are printable to Python, never to a reviewer)
    assert (shown == text) == (text.isprintable() and DECEPTIVE.isdisjoint(text))
    line = one_line(text)
    assert line.isprintable() and line == line.strip() and "  " not in line


def test_escapes_say_which_character_it_was() -> None:
    assert printable("a\x1b[2Jb\u202e") == "a\\x1b[2Jb\\u202e"
    assert printable("two\nlines\x07", keep="\n") == "two\nlines\\x07"
    assert one_line("  a\t\tb\nc \x1b ") == "a b c \\x1b"


def test_an_error_quoting_a_hostile_name_prints_it_escaped() -> None:
    text = format_error(BadInput(f"entry {HOSTILE!s} is not a tree", "see\x1b[8m hidden", details=["d\x1b[1A"]))
    assert not any(c in text for c in CONTROLS)
    assert text.splitlines()[0].startswith("error: entry fix\\x1b[2J")


def _shown(*results: object) -> str:
    return "".join(r.out + r.err for r in results)  # type: ignore[attr-defined]


def test_a_fetched_job_s_instruction_reaches_the_terminal_escaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job minted elsewhere (a hostile instruction), fetched, listed, shown, worked and
    archived: no human line carries a control character, and --json carries it exact."""
    bare, a = repo_with_remote(tmp_path, "a")
    assert run_genjob("init", cwd=a).code == 0  # the planner's key, which b trusts below (one HOME)
    with monkeypatch.context() as m:  # minted by a tool (or a genjob before 22) that let them in
        m.setattr("git_genjob.documents.job._CONTROL", re.compile("(?!)"))
        k = submit_key(a, "-m", HOSTILE + "\nsecond line \x1b[1A", "src/user.py")
    assert run_genjob("push", cwd=a).code == 0
    git(tmp_path, "clone", "-q", str(bare), "b")
    b = tmp_path / "b"
    key = setup_worker(b)
    assert run_genjob("fetch", cwd=b).code == 0
    human = [run_genjob("status", cwd=b), run_genjob("status", k, cwd=b), run_genjob("show", k, cwd=b)]
    assert all(r.code == 0 for r in human), _shown(*human)
    assert not any(c in _shown(*human) for c in CONTROLS), _shown(*human)
    assert "fix\\x1b[2J\\x1b]0;pwned\\x07 it" in human[0].out
    assert "    second line \\x1b[1A" in human[2].out
    doc = json.loads(run_genjob("show", k, "--json", cwd=b).out)
    assert doc["job"]["instruction"] == HOSTILE + "\nsecond line \x1b[1A"
    # A generator that fails saying something hostile: the work report shows it escaped.
    failed = work(b, key, "printf 'no\\033[2J\\033]0;x\\007' >&2; exit 3", "--once")
    assert failed.code == 0, _shown(failed)  # the receipt says aborted, with the words escaped
    assert not any(c in _shown(failed) for c in CONTROLS), _shown(failed)
    receipt = json.loads(run_genjob("show", k, "--json", cwd=b).out)["receipt"]
    assert receipt is not None
    shown = run_genjob("show", k, cwd=b)
    assert not any(c in _shown(shown) for c in CONTROLS), _shown(shown)
    assert run_genjob("drop", k, "--why", "hostile", cwd=b).code == 0
    archived = run_genjob("status", "--all", cwd=b)
    assert archived.code == 0 and k in archived.out
    assert not any(c in archived.out for c in CONTROLS), archived.out
    rows = json.loads(run_genjob("status", "--all", "--json", cwd=b).out)
    assert [r["instruction"] for r in rows] == [HOSTILE]  # the first line, exact


def test_a_model_server_s_hostile_error_is_recorded_escaped_and_the_job_moves_on(repo: Path, stub: Stub) -> None:
    """An HTTP error body is a server's words: the attempt records them escaped (before, a
    control character in them made the attempt's document invalid and left the job `sending`)."""
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "ask the server", "src/user.py")
    stub.mode, stub.error = "status:500", b"overloaded\x1b[2J\x1b]52;c;cm0gLXJmIH4=\x07"
    res = run_genjob("work", "--generator", f"http:{stub.url}/gen", "--signing-key", str(key), "--once", cwd=repo)
    assert res.code == 3, _shown(res)
    assert not any(c in _shown(res) for c in CONTROLS), _shown(res)
    doc = json.loads(run_genjob("show", k, "--json", cwd=repo).out)
    assert doc["state"] == "queued"  # failed before send: requeued, not stuck
    assert doc["attempt_records"][-1]["reason"].endswith("overloaded\\x1b[2J\\x1b]52;c;cm0gLXJmIH4=\\x07")
    assert stub.count == 1


RAW_IN_JSON = ("\u202e", "\x9b", "\x7f", "\u200b", "\u2028")


@given(st.text())
def test_terminal_json_is_the_same_json_value(text: str) -> None:
    from git_genjob.documents.display import terminal_json

    doc = json.dumps({"s": text}, ensure_ascii=False)
    shown = terminal_json(doc)
    assert json.loads(shown) == {"s": text}
    assert not any(c in shown for c in RAW_IN_JSON)


def test_json_output_escapes_what_a_terminal_would_act_on_and_keeps_the_value(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """JSON escapes only C0: a C1 CSI, DEL, a bidi override, a zero-width space or a line
    separator would reach the terminal raw in --json output; they are written as \\uXXXX."""
    instruction = "fix \u202eit\x9b1m\x7f\u200b\u2028 now"
    with monkeypatch.context() as m:  # a job minted elsewhere: submit refuses these
        m.setattr("git_genjob.documents.job._CONTROL", re.compile("(?!)"))
        k = submit_key(repo, "-m", instruction, "src/user.py")
    live = [run_genjob("status", "--json", cwd=repo), run_genjob("show", k, "--json", cwd=repo)]
    assert run_genjob("drop", k, "--why", "x", cwd=repo).code == 0
    archived = run_genjob("status", "--all", "--json", cwd=repo)
    for res in [*live, archived]:
        assert res.code == 0, res.err
        assert not any(c in res.out for c in RAW_IN_JSON), res.out
    assert [r["instruction"] for r in json.loads(live[0].out)] == [instruction.splitlines()[0]]
    assert json.loads(live[1].out)["job"]["instruction"] == instruction
    assert [r["instruction"] for r in json.loads(archived.out)] == [instruction.splitlines()[0]]
