"""Process entry: the hook fast path without click, everything else through cli."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    try:
        code = _dispatch(args)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at interpreter exit
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except KeyboardInterrupt:  # Ctrl-C before a command took over its own stop (while importing)
        sys.stderr.write("interrupted\n")
        return 130
    except SystemExit:
        raise
    except Exception as exc:  # the one funnel for bugs: every command and hook comes through here
        from git_genjob.documents.errors import report_crash

        return report_crash(exc, args)


def _dispatch(args: list[str]) -> int:
    import os

    if os.environ.get("_GIT_GENJOB_COMPLETE"):  # a shell asking for completions (click's protocol)
        return _complete(os.environ["_GIT_GENJOB_COMPLETE"])
    code = _answer_without_click(args)
    if code is None:
        code = _fast_path(args)
    return _cli(args) if code is None else code


def _complete(instruction: str) -> int:
    from click.shell_completion import shell_complete

    from git_genjob.cli import main as group

    return shell_complete(group, {}, "git-genjob", "_GIT_GENJOB_COMPLETE", instruction)


def _answer_without_click(args: list[str]) -> int | None:
    """Help, the version and the hooks, which never need click; None for every other command."""
    code = _help(args)
    if code is not None:
        return code
    if args in (["--version"], ["version"]):
        from git_genjob import __version__

        sys.stdout.write(f"git genjob, version {__version__}\n")
        return 0
    if args[:1] == ["hook"] and len(args) >= 2 and args[1] not in ("-h", "--help"):
        from git_genjob.landing.hooks import run_hook

        return run_hook(args[1], args[2:])
    return None


def _help(args: list[str]) -> int | None:
    """`help [COMMAND]`, and the overview for no arguments, -h or --help; None otherwise."""
    if args[:1] == ["help"] and args[1:2] not in (["-h"], ["--help"]):
        from git_genjob.fasthelp import help_command

        return help_command(args[1:], _cli)
    if not args or args in (["-h"], ["--help"]):
        from git_genjob.fasthelp import render

        sys.stdout.write(render())
        return 0 if args else 2
    return None


def _fast_path(args: list[str]) -> int | None:
    """A fast path's answer, or None when the slow path (click, libgit2) must run."""
    if args[:1] == ["ask"]:
        from git_genjob.replay.fast import try_ask

        return try_ask(args)  # a replay hit the slow path already served, without libgit2 or click
    if args[:1] in (["status"], ["show"]):
        from git_genjob.planner.statusfast import try_show, try_status

        # what the slow path printed last, while nothing it read has moved
        return try_status(args) if args[0] == "status" else try_show(args)
    if args[:1] in (["verify"], ["log"]):
        from git_genjob.landing.fast import try_log, try_verify

        # a verdict the slow path reached from the same refs, trust store, config and time
        return try_verify(args) if args[0] == "verify" else try_log(args)
    return None


def _cli(args: list[str]) -> int:
    from git_genjob.cli import run

    return run(args)


EXIT_SIGPIPE = 141  # 128 + SIGPIPE: what git (killed by the signal) reports to the shell


def _closed_pipe() -> int:
    """The reader went away (`git genjob log | head -1`): end quietly, as git does. What is
    still buffered for stdout goes nowhere, so the interpreter's exit has nothing to fail on."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    return EXIT_SIGPIPE
