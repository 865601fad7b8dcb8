"""`exec:COMMAND`: sh -c in a scratch directory holding only the allowed input files, in the
process sandbox of `worker.generators.sandbox` (unless the worker's owner says `--no-sandbox`)."""

from __future__ import annotations

import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, BinaryIO

from git_genjob.documents.errors import BadInput, GenjobError
from git_genjob.worker.generators.base import LOG_TAIL, GenContext, GenResult
from git_genjob.worker.generators.proxy import GATEWAY_PORT
from git_genjob.worker.generators.sandbox.choose import choose
from git_genjob.worker.generators.sandbox.confine import confine
from git_genjob.worker.generators.sandbox.options import Attempt, Launch, SandboxOptions
from git_genjob.worker.generators.sandbox.paths import check_paths, check_writable
from git_genjob.worker.generators.shell import ASSIGNMENT, SH_WORDS

if TYPE_CHECKING:
    from git_genjob.worker.gateway.server import Gateway


class ExecGenerator:
    kind = "exec"
    endpoint: str | None = None
    model: str | None = None

    def __init__(self, command: str, timeout: float, sandbox: SandboxOptions | None = None):
        self.command: str | None = resolve_command(command)
        self.timeout = timeout
        self.sandbox = sandbox if sandbox is not None else SandboxOptions()
        self.mechanism = choose(self.sandbox)  # refused here, before any claim, when none is usable
        check_paths(self.sandbox.ro, "--sandbox-ro")
        check_writable(self.sandbox.rw, self.mechanism)

    def describe(self) -> dict[str, str | None]:
        return {"kind": self.kind, "endpoint": None, "model": None, "command": self.command}

    def _env(self, ctx: GenContext) -> dict[str, str]:
        # Only what docs/generators.md names, and --pass-env: never the worker's own GENJOB_*
        # variables (a CI job holds its push token and worker key in them).
        env = {k: os.environ[k] for k in ("PATH", "HOME", "LANG") if k in os.environ}
        env.update({k: os.environ[k] for k in ctx.pass_env if k in os.environ})
        env["GENJOB_INSTRUCTION"] = ctx.job.instruction
        env["GENJOB_INSTRUCTION_FILE"] = ctx.instruction_file
        env["GENJOB_JOB"] = ctx.job_file
        env["GENJOB_KEY"] = ctx.job.key
        return env

    def generate(self, ctx: GenContext) -> GenResult:
        assert self.command is not None
        meta = os.path.dirname(ctx.job_file)
        attempt_dir = os.path.dirname(ctx.scratch)
        log_path = os.path.join(meta, "generator.log")
        err_path = os.path.join(meta, "generator.err")
        env = self._env(ctx)
        with open(log_path, "wb") as log, open(err_path, "wb") as err:
            attempt = Attempt(
                ctx.scratch,
                [ctx.job_file, ctx.instruction_file],
                log_path,
                os.path.join(attempt_dir, "home"),
                os.path.join(attempt_dir, "tmp"),
                err_log=err_path,
            )
            gateway, sock = self._open_gateway(ctx, env, attempt_dir)
            try:
                launch = confine(self.mechanism, self.sandbox, self.command, attempt, env.get("PATH", os.defpath), sock)
            except (OSError, GenjobError) as exc:
                if gateway is not None:
                    gateway.close()
                return GenResult("aborted", f"the sandbox could not be set up: {exc}")
            ctx.sandbox = launch.record
            if gateway is not None:
                _close_when_finished(launch, gateway)
            if self.mechanism != "none":
                env.update(HOME=attempt.home, **launch.env)
            proc = _start(launch, ctx, env, log, err)
            if isinstance(proc, GenResult):
                return proc
        return self._await(proc, ctx, launch, log_path, err_path)

    def _open_gateway(
        self, ctx: GenContext, env: dict[str, str], attempt_dir: str
    ) -> tuple[Gateway | None, str | None]:
        """The attempt's model gateway (SPEC §12.1), if it has one, its address put in `env`: on
        loopback when the generator shares the worker's network, else on a Unix socket (the
        second value) that the relay inside the sandbox serves."""
        if ctx.gateway is None:
            return None, None
        # the gateway loads libgit2 and PyNaCl: only an attempt that has one
        from git_genjob.worker.gateway.server import Gateway

        gateway = Gateway(list(ctx.upstreams), ctx.gateway)
        gateway.session.volatile.append(attempt_dir)
        if self.mechanism == "none" or self.sandbox.allow_net:
            env.update(gateway.env(f"http://127.0.0.1:{gateway.listen_tcp()}"))
            return gateway, None
        # through the relay inside the sandbox, with or without a network namespace
        sock = os.path.join(attempt_dir, "gateway", "sock")
        os.makedirs(os.path.dirname(sock), mode=0o755)
        os.chmod(os.path.dirname(sock), 0o755)
        gateway.listen_unix(sock)
        env.update(gateway.env(f"http://127.0.0.1:{GATEWAY_PORT}"))
        return gateway, sock

    def _await(
        self, proc: subprocess.Popen[bytes], ctx: GenContext, launch: Launch, log_path: str, err_path: str
    ) -> GenResult:
        """Wait for the generator within its time limit, then end its process group and keep its logs."""
        reaper = Reaper(proc.pid)
        try:
            limit = min(ctx.timeout, self.timeout)
            if not _wait(proc, time.monotonic() + limit, ctx):
                _kill(proc)
                if ctx.stop.is_set():
                    return GenResult("aborted", "stopped: the worker was fenced")
                return GenResult("aborted", f"timed out after {limit:g}s")
            _kill(proc)  # whatever it left running in the background goes with it
        except BaseException:  # an interrupt (SIGINT, or SIGTERM, which `work` turns into one): the group goes too
            _kill(proc)
            raise
        finally:
            reaper.release()
            launch.finish()
            ctx.logs = {"stdout": _tail(log_path, LOG_TAIL), "stderr": _tail(err_path, LOG_TAIL)}  # kept on any end
        return _exit_result(proc.returncode, ctx.logs)


def _close_when_finished(launch: Launch, gateway: Gateway) -> None:
    """The attempt's gateway closes once its launch has finished."""
    finish = launch.finish

    def finished() -> None:
        finish()
        gateway.close()

    launch.finish = finished


def _start(
    launch: Launch, ctx: GenContext, env: dict[str, str], log: BinaryIO, err: BinaryIO
) -> subprocess.Popen[bytes] | GenResult:
    """The generator's process, started as the launch says; an aborted result when it could not start."""
    sandboxed = launch.preexec

    def preexec() -> None:
        _die_with_parent()
        if sandboxed is not None:
            sandboxed()

    try:
        return launch.start(
            lambda: subprocess.Popen(
                launch.argv,
                cwd=ctx.scratch,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=err,
                start_new_session=True,
                pass_fds=launch.fds,
                # No Python in the child when the launch needs none: Popen then uses vfork.
                preexec_fn=None if launch.tied and sandboxed is None else preexec,
            )
        )
    except (OSError, subprocess.SubprocessError) as exc:
        launch.finish()
        return GenResult("aborted", f"the sandboxed generator could not start: {exc}")
    finally:
        launch.close()


def _exit_result(returncode: int, logs: dict[str, bytes]) -> GenResult:
    """ok for exit 0; else aborted, with the end of what the generator said (stderr, or stdout when that is empty)."""
    said = logs["stderr"] if logs["stderr"].strip() else logs["stdout"]
    tail = said[-2000:].decode("utf-8", "replace")
    if returncode != 0:
        return GenResult("aborted", f"command exited {returncode}: {tail.strip()[-500:]}")
    return GenResult("ok")


def _tail(path: str, size: int) -> bytes:
    """The last `size` bytes of the file at `path`."""
    with open(path, "rb") as fh:
        fh.seek(max(0, os.path.getsize(path) - size))
        return fh.read()


def resolve_command(command: str) -> str:
    """The command as the scratch directory will run it: a relative program path made absolute.

    The generator runs in a scratch directory, so `./gen.py` would only fail there (exit 127)
    after the job was claimed and an attempt spent. Resolved here against the directory `work`
    runs in, or refused (exit 2) before any claim when the program does not exist.
    """
    try:
        words = shlex.split(command)
    except ValueError:
        return command  # sh will parse it; an unbalanced quote is its own error message
    program = next((w for w in words if not ASSIGNMENT.match(w)), None)
    if program is None or program in SH_WORDS:
        return command
    fix = "the generator runs in a scratch directory: name it by an absolute path or a command on PATH"
    if "/" not in program:
        if shutil.which(program) is None:
            raise BadInput(f"exec generator: {program!r} is not a command on PATH", fix)
        return command
    path = _runnable_file(program, fix)
    if os.path.isabs(program):
        return command
    return _with_absolute_program(command, words, program, path, fix)


def _runnable_file(program: str, fix: str) -> str:
    """The absolute path of a program named by its path; BadInput unless it is an executable file."""
    path = os.path.abspath(os.path.expanduser(program))
    if not os.path.isfile(path):
        raise BadInput(f"exec generator: {program} is not a file (looked for {path})", fix)
    if not os.access(path, os.X_OK):
        raise BadInput(
            f"exec generator: {path} is not executable",
            f"chmod +x {shlex.quote(path)}, or run it through its interpreter: exec:python3 {shlex.quote(path)}",
        )
    return path


def _with_absolute_program(command: str, words: list[str], program: str, path: str, fix: str) -> str:
    """`command` with its relative program path replaced by `path`; BadInput when that word is quoted."""
    head, sep, rest = command.partition(program)  # only an unquoted word is rewritten
    if not sep or shlex.split(head + program) != words[: words.index(program) + 1]:
        raise BadInput(f"exec generator: {program} is a relative path", f"{fix}, e.g. exec:{shlex.quote(path)}")
    return head + shlex.quote(path) + rest


class Reaper:
    """Kills the generator's process group if this worker dies, even by SIGKILL.

    PR_SET_PDEATHSIG reaches only the generator's `sh`; what it started (an agent CLI, a
    `sleep`) would be left running under init. The reaper is a tiny `sh` in its own session
    that blocks reading a pipe only this process holds the write end of: the kernel closes it
    when the worker dies however it dies, `read` returns without "done", and the reaper kills
    the whole group. A normal end writes "done" first, so a finished group is never signalled.
    """

    SCRIPT = 'read line; [ "$line" = done ] || kill -s KILL -- "-$1" 2>/dev/null'  # dash: -s KILL --

    def __init__(self, pgid: int):
        read_end, self._write_end = os.pipe()
        try:
            self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                ["sh", "-c", self.SCRIPT, "genjob-reaper", str(pgid)],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a Ctrl-C to the worker's terminal must not kill the reaper first
            )
        except OSError:
            self._proc = None
        finally:
            os.close(read_end)

    def release(self) -> None:
        try:
            os.write(self._write_end, b"done\n")
        except OSError:
            pass
        os.close(self._write_end)
        if self._proc is not None:
            self._proc.wait()


def _wait(proc: subprocess.Popen[bytes], deadline: float, ctx: GenContext) -> bool:
    """Wait for the generator's exit (True), its deadline or a fencing stop (False).

    The exit is waited on through a pidfd, so the worker notices it at once, not at the next
    poll; the stop event is looked at every 50 ms.
    """
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while proc.poll() is None:
            if ctx.stop.is_set():
                return False
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if pidfd is not None:
                select.select([pidfd], [], [], min(left, 0.05))
            else:
                ctx.stop.wait(min(left, 0.05))
        return True
    finally:
        if pidfd is not None:
            os.close(pidfd)


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
