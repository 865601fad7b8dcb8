"""The command-line surface: fast help matches the commands, -h everywhere, JSON errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click

from git_genjob.cli import main
from git_genjob.fasthelp import GROUPS
from git_genjob.storage.store import Store
from tests.helpers.common import (
    git,
    live,
    run_genjob,
    run_genjob_process,
    setup_worker,
    submit_key,
    work,
)
from tests.landing.test_apply import GOOD


def _click_commands() -> dict[str, str]:
    ctx = click.Context(main, info_name="git genjob", help_option_names=["-h", "--help"])
    out = {}
    for name in main.list_commands(ctx):
        cmd = main.get_command(ctx, name)
        assert cmd is not None
        if not cmd.hidden:
            out[name] = cmd.get_short_help_str(limit=300)
    return out


def test_fast_help_lists_exactly_the_commands() -> None:
    fast = {name: text for _, cmds in GROUPS for name, text in cmds}
    assert fast == _click_commands()


def test_top_level_help_and_version(tmp_path: Path) -> None:
    res = run_genjob("-h", cwd=tmp_path)
    assert res.code == 0 and res.out.startswith("Usage: git genjob") and "submit" in res.out
    assert run_genjob(cwd=tmp_path).code == 2
    assert run_genjob("--version", cwd=tmp_path).out.startswith("git genjob, version ")


def test_every_command_has_h(tmp_path: Path) -> None:
    for name in _click_commands():
        res = run_genjob(name, "-h", cwd=tmp_path)
        assert res.code == 0 and "Usage: git genjob" in res.out, name
    for sub in ("add", "list", "revoke"):
        assert run_genjob("trust", sub, "-h", cwd=tmp_path).code == 0
    for sub in ("ls", "show", "drift", "accept", "reject", "explain", "import"):
        assert run_genjob("cache", sub, "-h", cwd=tmp_path).code == 0


def test_errors_outside_a_repository_and_as_json(tmp_path: Path) -> None:
    res = run_genjob("status", cwd=tmp_path)
    assert res.code == 2 and res.err.startswith("error: not a git repository") and "hint:" in res.err
    res = run_genjob("status", "--json", cwd=tmp_path)
    doc = json.loads(res.err)
    assert doc["exit_code"] == 2 and doc["hint"]


def _on_a_terminal(args: list[str], cwd: Path, env: dict[str, str]) -> str:
    import os
    import pty
    import subprocess
    import sys

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "git_genjob", *args],
        cwd=cwd,
        stdout=follower,
        stderr=follower,
        env={**os.environ, **env},
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=60)
    os.close(leader)
    return b"".join(chunks).decode("utf-8", "replace")


def test_colour_only_on_a_terminal_and_never_with_no_color(repo: Path) -> None:
    assert run_genjob("init", cwd=repo).code == 0  # a signed job: listed as queued, not unsigned
    assert run_genjob("submit", "-m", "x", "README.md", cwd=repo).code == 0
    assert "\x1b[" not in run_genjob("status", cwd=repo).out  # not a terminal
    coloured = _on_a_terminal(["status"], repo, {"NO_COLOR": ""})
    assert "\x1b[36mqueued" in coloured
    assert "\x1b[" not in _on_a_terminal(["status"], repo, {"NO_COLOR": "1"})


def test_quiet_silences_human_output_only(repo: Path) -> None:
    res = run_genjob("-q", "submit", "-m", "x", "README.md", cwd=repo)
    assert res.code == 0 and res.out == ""
    res = run_genjob("-q", "submit", "--json", "-m", "x", "README.md", cwd=repo)
    assert json.loads(res.out)["created"] is False
    res = run_genjob("-q", "show", "missing", cwd=repo)
    assert res.code == 2 and "error:" in res.err


def test_empty_status_says_so(repo: Path) -> None:
    assert run_genjob("status", cwd=repo).out == "no jobs\n"
    assert run_genjob("status", "--state", "done", cwd=repo).out == "no jobs in state done\n"


def _keys(doc: object) -> set[str]:
    if isinstance(doc, list):
        return _keys(doc[0]) if doc else set()
    assert isinstance(doc, dict)
    return set(doc)


def test_documented_json_shapes_match_the_output(repo: Path, tmp_path: Path) -> None:
    from git_genjob.cli.docgen import JSON_SHAPES

    key = setup_worker(repo)
    runs: dict[str, list[str]] = {
        "submit": ["submit", "-m", "x", "src/user.py"],
        "status": ["status"],
        "keygen": ["keygen", "--name", "other", "--out", str(tmp_path / "k2")],
        "trust list": ["trust", "list"],
        "work": ["work", "--generator", "exec:echo y > src/user.py", "--signing-key", str(key), "--once"],
        "recover": ["recover"],
    }
    seen = {}
    for name, args in runs.items():
        res = run_genjob(*args, "--json", cwd=repo)
        assert res.code == 0, (name, res.err)
        seen[name] = json.loads(res.out)
    job = seen["submit"]["key"]
    for name, args in {
        "show": ["show", job],
        "bundle": ["bundle", job, "-o", str(tmp_path / "b.tar")],
        "verify": ["verify", job],
        "apply": ["apply", job],
        "log": ["log"],
        "audit": ["audit"],
    }.items():
        res = run_genjob(*args, "--json", cwd=repo)
        assert res.code == 0, (name, res.err)
        seen[name] = json.loads(res.out)
    for name, doc in seen.items():
        assert _keys(doc) == _keys(JSON_SHAPES[name]), name


def test_reports_print_their_own_lines(tmp_path: Path) -> None:
    """init, recover, push and fetch print what their reports say, in the words users read."""
    import time

    from git_genjob.planner.ledger import claim
    from git_genjob.storage.publish import publisher
    from tests.helpers.common import repo_with_remote, submit_key

    _, repo = repo_with_remote(tmp_path)
    setup_worker(repo)  # runs init
    assert run_genjob("init", cwd=repo).out.splitlines()[0] == "already initialized"
    assert run_genjob("recover", cwd=repo).out == "no expired claims\n"
    lapsed = submit_key(repo, "-m", "Lapses", "README.md")
    store, record = live(repo, lapsed)
    claim(publisher(store), record, "w1", 0.05)
    time.sleep(0.1)
    assert run_genjob("recover", cwd=repo).out == f"requeued {lapsed} (lease lapsed before sending)\n"
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    pushed = run_genjob("push", cwd=repo).out.splitlines()
    assert pushed[0].startswith("pushed ") and pushed[0].endswith(" ref(s) to origin")
    assert any(line.startswith("  pushed: ") and k in line for line in pushed[1:]), pushed
    assert run_genjob("fetch", cwd=repo).out.splitlines()[0] == "fetched from origin"


def test_coloured_reports_render_through_the_painter_they_are_given(tmp_path: Path) -> None:
    """verify, audit and work build their own lines; colour comes only from the cli's painter."""
    from git_genjob.landing.auditrange import audit
    from git_genjob.landing.verdict import audit_lines
    from git_genjob.landing.verify import verify
    from git_genjob.worker.run import JobOutcome, WorkReport
    from tests.helpers.common import make_repo, submit_key, work

    def mark(text: str, colour: str) -> str:
        return f"<{colour}>{text}</{colour}>"

    repo = make_repo(tmp_path / "r")
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert work(repo, key, "echo 'x = 1' >> src/user.py", "--once").code == 0
    verdict = verify(Store.open(str(repo)), k)
    lines = verdict.lines(mark)
    assert lines[0].startswith("<green>ok  </green> 1 envelope") and lines[-1] == f"{k}: applyable"
    assert verdict.lines()[0].startswith("ok   1 envelope")  # plain without a painter
    assert run_genjob("apply", k, cwd=repo).code == 0
    results = audit(Store.open(str(repo)), None, lambda _: None)
    assert audit_lines(results, paint=mark)[0].startswith("<green>ok  </green> ")
    assert audit_lines(results, quiet=True) == ["1 genjob commit(s), 0 failing"]
    report = WorkReport([JobOutcome("k1", "ok", replayed=["f" * 64]), JobOutcome("k2", "rejected", "unchanged")])
    assert report.lines(mark)[0] == f"{'k1':<34} <green>ok</green>"
    assert "git genjob retry k1 --refresh asks afresh" in report.lines()[1]
    assert report.lines()[2] == f"{'k2':<34} rejected: unchanged"
    assert report.warnings() == [
        "warning: job k2: its receipt is rejected, nothing to apply; see git genjob show k2, "
        "then git genjob retry k2 or git genjob drop k2 --why TEXT"
    ]
    assert WorkReport().lines() == ["nothing to do: no queued job"]


def test_status_and_show_render_their_own_lines(repo: Path) -> None:
    """`status` rows and `show` text come from the planner; the cli prints them as they are."""
    from git_genjob.planner.queue import show
    from git_genjob.planner.rows import StatusRow, status_lines, summarize
    from git_genjob.planner.showtext import show_lines
    from git_genjob.storage.records import find_job
    from tests.helpers.common import submit_key

    assert run_genjob("init", cwd=repo).code == 0
    k = submit_key(repo, "-m", "Add a timeout\nto fetch_user", "src/user.py", "--create", "tests/t.py")
    store = Store.open(str(repo))
    row = StatusRow.of(summarize(find_job(store, k)))
    assert row.text() == f"{k:<34} {'queued':<8} Add a timeout\n"  # the first line
    assert row.text(lambda text, colour: f"<{colour}>{text}</{colour}>").startswith(f"{k:<34} <cyan>queued  </cyan>")
    assert run_genjob("status", cwd=repo).out == status_lines([row])[0] == f"{k} queued Add a timeout\n"
    assert run_genjob("status", k, cwd=repo).out == status_lines([row])[0]
    lines = show_lines(show(store, k))
    assert lines[0] == f"job      {k}  (queued)"
    assert lines[4] == "paths    src/user.py, tests/t.py (create)"
    assert lines[5:8] == ["instruction:", "    Add a timeout", "    to fetch_user"]
    assert lines[8] == "events:" and lines[9].endswith("submitted  -> queued (epoch 0)")
    assert run_genjob("show", k, cwd=repo).out == "\n".join(lines) + "\n"


def test_help_version_and_their_bad_input(tmp_path: Path) -> None:
    """`git genjob help [COMMAND]` is -h's text; an unknown COMMAND is exit 2 with the list."""
    assert run_genjob("help", cwd=tmp_path).out == run_genjob("-h", cwd=tmp_path).out
    for cmd in (["work"], ["trust", "add"], ["help"]):
        res = run_genjob("help", *cmd, cwd=tmp_path)
        assert res.code == 0 and res.out == run_genjob(*cmd, "-h", cwd=tmp_path).out or cmd == ["help"], cmd
    res = run_genjob("help", "wrok", cwd=tmp_path)
    assert res.code == 2 and res.out == "" and "no such command" in res.err and "work, receipt" in res.err
    assert run_genjob("version", cwd=tmp_path).out == run_genjob("--version", cwd=tmp_path).out
    res = run_genjob("completion", "fish", cwd=tmp_path)
    assert res.code == 2 and "bash" in res.err and res.out == ""


def test_help_and_version_do_not_import_click(tmp_path: Path) -> None:
    code = (
        "import sys; from git_genjob.entry import main; "
        "codes = [main(['help']), main(['version'])]; "
        "assert codes == [0, 0] and 'click' not in sys.modules, (codes, 'click' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_bash_completion_lists_commands_through_gits_completion(tmp_path: Path) -> None:
    """The script `git genjob completion bash` prints, run by bash: through git's own completion
    (`git genjob st<TAB>`, which calls _git_genjob) where it is installed, and directly."""
    shim = tmp_path / "bin" / "git-genjob"  # what git runs for `git genjob`: this checkout's code
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m git_genjob "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"}
    script = f'source <("{sys.executable}" -m git_genjob completion bash)\n'
    direct = script + 'COMP_WORDS=(git genjob ""); COMP_CWORD=2; _git_genjob; echo "${COMPREPLY[*]}"\n'
    direct += 'COMP_WORDS=(git genjob work --sig); COMP_CWORD=3; _git_genjob; echo "${COMPREPLY[*]}"\n'
    proc = subprocess.run(["bash", "-c", direct], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 0 and len(lines) == 2, proc.stderr
    assert {"submit", "work", "apply", "help", "completion"} <= set(lines[0].split())
    assert lines[1] == "--signing-key"
    git_completion = Path("/usr/share/bash-completion/completions/git")
    if git_completion.exists():
        via_git = (
            f"source {git_completion}\n{script}"
            'COMP_WORDS=(git genjob st); COMP_CWORD=2; COMP_LINE="git genjob st"; COMP_POINT=${#COMP_LINE}\n'
            '__git_wrap__git_main git st git; echo "${COMPREPLY[*]}"\n'
        )
        proc = subprocess.run(
            ["bash", "-c", via_git], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert proc.stdout.split() == ["status"], proc.stderr


def _queued_job(repo: Path) -> str:
    return submit_key(repo, "-m", "Add a timeout", "src/user.py")


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_show_of_applied_and_dropped_jobs(ready: tuple[Path, Path]) -> None:
    repo, key = ready
    k = _queued_job(repo)
    assert work(repo, key, GOOD, "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    res = run_genjob("show", k, cwd=repo)
    assert res.code == 0 and "receipt" in res.out and "(applied, archived)" in res.out, res.err
    shown = json.loads(run_genjob("show", k, "--json", cwd=repo).out)
    assert [e["event"] for e in shown["events"]] == ["submitted", "claimed", "sending", "receipt"]
    d = submit_key(repo, "-m", "Other", "tests/test_user.py")
    assert run_genjob("drop", d, "--why", "not needed", cwd=repo).code == 0
    res = run_genjob("show", d, cwd=repo)
    assert res.code == 0 and "dropped" in res.out, res.err


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
def test_unexpected_exception_goes_through_one_funnel(repo: Path, hermetic_seal: Path) -> None:
    """A bug exits 70 with one line naming the traceback file (pre-commit's error_handler)."""
    git(repo, "config", "genjob.workerId", "w1")
    broken = hermetic_seal / "sitecustomize_dir"
    broken.mkdir()
    # A real bug path: a generator module that raises an unexpected error when imported.
    (broken / "sitecustomize.py").write_text(
        "import git_genjob.planner.queue as q\n"
        "def boom(*a, **k):\n    raise ZeroDivisionError('simulated bug')\n"
        "q.status = boom\n"
    )
    env = {"PYTHONPATH": f"{broken}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    res = run_genjob_process("status", cwd=repo, env=env)
    assert res.code == 70, (res.code, res.err)
    lines = [line for line in res.err.splitlines() if line.strip()]
    assert len(lines) == 2 and "ZeroDivisionError" in lines[0] and "crash.log" in lines[0]
    log = hermetic_seal / ".cache/git-genjob/crash.log"
    assert "Traceback" in log.read_text() and "simulated bug" in log.read_text()


# From tests/test_newcomer.py: a newcomer's first day (issue 11).
def test_key_prefixes_work_everywhere_a_key_is_typed(repo: Path) -> None:

    key = setup_worker(repo)
    a = submit_key(repo, "-m", "a", "src/user.py")
    b = submit_key(repo, "-m", "b", "README.md")
    short = a[:8]
    assert json.loads(run_genjob("status", short, "--json", cwd=repo).out)["key"] == a
    assert json.loads(run_genjob("show", short, "--json", cwd=repo).out)["key"] == a
    common = next(
        (a[:n] for n in range(4, 32) if b.startswith(a[:n]) and not b.startswith(a[: n + 1])), None
    )  # the two keys share no 4-character prefix almost always; an exact key always wins
    if common is not None:
        assert run_genjob("show", common, cwd=repo).code == 2
    assert work(repo, key, "echo y > src/user.py", "--once").code == 0
    assert run_genjob("verify", short, cwd=repo).code == 0
    assert run_genjob("apply", short, cwd=repo).code == 0
    assert json.loads(run_genjob("show", short, "--json", cwd=repo).out)["state"] == "applied"  # archived
    assert run_genjob("drop", b[:6], "--why", "not needed", cwd=repo).code == 0
    assert run_genjob("show", "abc", cwd=repo).code == 2  # under 4 characters: never a prefix


# From tests/test_newcomer.py: a newcomer's first day (issue 11).
def test_ambiguous_prefix_is_refused(repo: Path) -> None:

    setup_worker(repo)
    a = submit_key(repo, "-m", "a", "src/user.py", "--key", "fix-timeout-1")
    b = submit_key(repo, "-m", "b", "README.md", "--key", "fix-timeout-2")
    res = run_genjob("show", "fix-timeout", cwd=repo)
    assert res.code == 2 and "is the prefix of 2 jobs' keys" in res.err and a in res.err and b in res.err
    assert json.loads(run_genjob("show", "fix-timeout-2", "--json", cwd=repo).out)["key"] == b
