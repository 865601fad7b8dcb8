"""What the real-agent tests (Claude Code, Codex, aider) share: the receipt's predicate, and a
worker SIGKILLed while the provider holds one of the agent's calls, then recovered."""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tests.helpers.common import git, run_genjob


def receipt_predicate(repo: Path, key: str) -> dict[str, Any]:
    """The in-toto predicate of job `key`'s receipt, as stored on its job ref."""
    envelope = json.loads(git(repo, "show", f"refs/genjob/jobs/{key}:receipt.json"))
    return json.loads(base64.b64decode(envelope["payload"]))["predicate"]  # type: ignore[no-any-return]


def kill_while_held(
    repo: Path,
    key: str,
    argv: list[str],
    env: dict[str, str],
    held: threading.Event,
    release: threading.Event,
    wait_s: float = 120,
) -> None:
    """Run `git genjob *argv` (a one-second lease) until the provider holds a call (`held`),
    SIGKILL the worker's whole session, let the provider go (`release`), and recover once the
    lease has run out: job `key` must then be `unknown` (nothing was resent)."""
    worker = subprocess.Popen([sys.executable, "-m", "git_genjob", *argv, "--lease", "1s"], cwd=repo,
                              env={**os.environ, **env}, start_new_session=True, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)  # fmt: skip
    try:
        assert held.wait(wait_s), "the agent never made the call the provider holds"
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(30)
        release.set()
    time.sleep(1.2)  # past the lease
    assert run_genjob("recover", cwd=repo).code == 0
    assert json.loads(run_genjob("status", key, "--json", cwd=repo).out)["state"] == "unknown"
