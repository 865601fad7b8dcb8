"""Output per git (SPEC §12.4): colour per color.ui / NO_COLOR / TERM=dumb, a closed pipe ends
quietly with git's exit (141), columns sized to their content. Through real pipes and a pty."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

from tests.helpers.common import git, run_genjob, submit_key

ESC = "\x1b["


def _genjob(repo: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "git_genjob", *args], cwd=repo, env={**os.environ, **(env or {})},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _on_a_terminal(repo: Path, *args: str, env: dict[str, str]) -> str:
    """What `git genjob ARGS` prints with a pseudo-terminal as its stdout."""
    main, sub = pty.openpty()
    full = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    proc = subprocess.Popen([sys.executable, "-m", "git_genjob", *args], cwd=repo, env={**full, **env},
                            stdout=sub, stderr=sub, stdin=subprocess.DEVNULL)  # fmt: skip
    os.close(sub)
    out = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # EIO: the writer has gone
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=60)
    os.close(main)
    return out.decode("utf-8", "replace")


def test_colour_follows_color_ui_no_color_and_term(repo: Path) -> None:
    submit_key(repo, "-m", "colour me", "src/user.py")
    term = {"TERM": "xterm"}
    assert ESC in _on_a_terminal(repo, "status", env=term)
    assert ESC not in _on_a_terminal(repo, "status", env={"TERM": "dumb"})
    assert ESC not in _on_a_terminal(repo, "status", env={**term, "NO_COLOR": "1"})
    git(repo, "config", "color.ui", "never")
    assert ESC not in _on_a_terminal(repo, "status", env=term)
    git(repo, "config", "color.ui", "always")
    piped = _genjob(repo, "status", env={"NO_COLOR": ""})
    assert piped.returncode == 0 and ESC in piped.stdout  # always: into a pipe too
    assert ESC not in _genjob(repo, "status", env={"NO_COLOR": "1"}).stdout
    git(repo, "config", "--unset", "color.ui")
    assert ESC not in _genjob(repo, "status", env={"NO_COLOR": ""}).stdout  # auto: not into a pipe
    out = subprocess.run(["git", "-c", "color.ui=always", "genjob", "status"], cwd=repo, capture_output=True,
                         text=True, env={**os.environ, "NO_COLOR": "",
                                         "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})  # fmt: skip
    if out.returncode == 0:  # git-genjob on PATH (the venv's entry point)
        assert ESC in out.stdout


def test_a_closed_pipe_ends_quietly_with_gits_exit(repo: Path) -> None:
    for _ in range(3):
        submit_key(repo, "-m", "one of several", "src/user.py")
    for args in ("status --all", "log", "-h", "status"):
        proc = subprocess.run(
            ["bash", "-c", f'"{sys.executable}" -m git_genjob {args} | true; echo "${{PIPESTATUS[0]}}"'],
            cwd=repo, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.stdout.strip() == "141", (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr and "Exception" not in proc.stderr
    proc = subprocess.run(["bash", "-c", f'"{sys.executable}" -m git_genjob status --all | head -1'], cwd=repo,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0 and len(proc.stdout.splitlines()) == 1 and proc.stderr == ""


def test_status_columns_are_as_wide_as_their_content(repo: Path) -> None:
    submit_key(repo, "-m", "stays queued", "src/user.py")
    gone = submit_key(repo, "-m", "dropped one", "src/user.py")
    assert run_genjob("drop", gone, "--why", "not needed", cwd=repo).code == 0
    lines = run_genjob("status", "--all", cwd=repo).out.splitlines()
    assert len(lines) == 2
    starts = {line.index("stays queued") if "stays" in line else line.index("dropped one") for line in lines}
    assert len(starts) == 1  # the instructions line up, whatever the state's length
    widest = max(len(line.split()[1]) for line in lines)
    key_width = len(lines[0].split()[0])
    assert starts == {key_width + 1 + widest + 1}  # one space after the widest state, none wasted
