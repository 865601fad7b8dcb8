"""`exec:COMMAND`: sh -c in a scratch directory holding only the allowed input files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from git_genjob.generators import GenContext, GenResult


class ExecGenerator:
    kind = "exec"
    endpoint: str | None = None
    model: str | None = None

    def __init__(self, command: str, timeout: float):
        self.command: str | None = command
        self.timeout = timeout

    def describe(self) -> dict[str, str | None]:
        return {"kind": self.kind, "endpoint": None, "model": None, "command": self.command}

    def _env(self, ctx: GenContext) -> dict[str, str]:
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
        env.update({k: v for k, v in os.environ.items() if k.startswith("GENJOB_") and k != "GENJOB_OUTPUTS"})
        env.update({k: os.environ[k] for k in ctx.pass_env if k in os.environ})
        env["GENJOB_INSTRUCTION"] = ctx.job.instruction
        env["GENJOB_INSTRUCTION_FILE"] = ctx.instruction_file
        env["GENJOB_JOB"] = ctx.job_file
        env["GENJOB_KEY"] = ctx.job.key
        return env

    def generate(self, ctx: GenContext) -> GenResult:
        assert self.command is not None
        log_path = os.path.join(os.path.dirname(ctx.job_file), "generator.log")
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                ["sh", "-c", self.command],
                cwd=ctx.scratch,
                env=self._env(ctx),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + min(ctx.timeout, self.timeout)
        while proc.poll() is None:
            if ctx.stop.wait(0.05):
                _kill(proc)
                return GenResult("aborted", "stopped: the worker was fenced")
            if time.monotonic() > deadline:
                _kill(proc)
                return GenResult("aborted", f"timed out after {min(ctx.timeout, self.timeout):g}s")
        with open(log_path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(log_path) - 2000))
            tail = fh.read().decode("utf-8", "replace")
        if proc.returncode != 0:
            return GenResult("aborted", f"command exited {proc.returncode}: {tail.strip()[-500:]}")
        return GenResult("ok")


def _die_with_parent() -> None:
    """Linux: the generator gets SIGKILL when the worker dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
