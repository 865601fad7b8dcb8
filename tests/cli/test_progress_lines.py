"""A worker off a terminal prints one line per job event (issue 34 item 8, SPEC §12.3): a CI log
shows what is happening while it happens, and --json stays the machine format."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.storage.test_remote_view import _fleet

EVENT = re.compile(r"^\[\s*\d+\.\d+s\] (claimed|sending|receipt|pushed) +(r\d)\b")


def _work(clone: Path, planner: Path, key: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "git_genjob", "work", "--remote", "origin", "--worker-id", "wa"]
        + ["--signing-key", str(key), "--allowed-signers", str(planner / ".genjob" / "allowed_signers")]
        + ["--no-sandbox", "--generator", "exec:echo x > src/user.py", *extra],
        cwd=clone,
        stdout=subprocess.PIPE,  # a pipe, as a CI runner's log is
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def test_off_a_terminal_each_job_event_is_a_line_on_stdout_as_it_happens(tmp_path: Path) -> None:
    _, planner, key, (wa, _) = _fleet(tmp_path, 2)
    proc = _work(wa, planner, key)
    assert proc.stdout is not None
    first = proc.stdout.readline()  # read while the worker runs: the line is flushed, not held to the end
    assert EVENT.match(first) and " claimed " in first, first
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    lines = [first, *rest.splitlines()]
    events = [(m.group(2), m.group(1)) for m in map(EVENT.match, lines) if m]
    for job in ("r0", "r1"):
        assert [e for k, e in events if k == job] == ["claimed", "sending", "receipt", "pushed"], lines
    assert all(re.match(r"^\[\s*\d+\.\d+s\] ", line) for line in lines[: len(events)]), lines
    assert any(line.startswith("r0") and "ok" in line for line in lines), lines  # then the report, as before


def test_with_json_stdout_is_the_report_alone(tmp_path: Path) -> None:
    _, planner, key, (wa, _) = _fleet(tmp_path, 1)
    proc = _work(wa, planner, key, "--json")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert [j["result"] for j in json.loads(out)["jobs"]] == ["ok"]
