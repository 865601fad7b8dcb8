"""The command line: parse, call one core function, render. The only plane that prints and exits.

Each module holds the commands of one SPEC area and registers them on `main` (common.py) when
imported; `run` is the one place a GenjobError becomes its message and exit code.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import Iterator

import click

from git_genjob.cli import cache, ci, jobs, landing, sync, tools, trustcmd, work  # noqa: F401 - registers the commands
from git_genjob.cli.common import main, paint
from git_genjob.documents.errors import EXIT_USAGE, GenjobError, format_error

__all__ = ["main", "run"]


# Commands whose writes move refs and the work tree together: a stop signal is held until the
# command ends, so an interrupt leaves everything as before or as after, never between.
DEFERRED = frozenset({"submit", "apply", "resubmit", "push"})
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def deferred_stops(held: list[int]) -> Iterator[None]:
    """Record SIGINT/SIGTERM/SIGHUP in `held` instead of acting on them (git's sigchain idea), and
    restore the previous handlers after; signals a caller ignores stay ignored."""

    def hold(signum: int, _frame: object) -> None:
        held.append(signum)

    previous = {s: signal.getsignal(s) for s in STOPS}
    for s in STOPS:
        if previous[s] != signal.SIG_IGN:
            signal.signal(s, hold)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def run(args: list[str]) -> int:
    """Run the CLI; convert GenjobError to its message and exit code in one place. A stop signal
    during a DEFERRED command lets it finish, then exits 128 + the signal's number."""
    held: list[int] = []
    command = next((a for a in args if not a.startswith("-")), "")
    with deferred_stops(held) if command in DEFERRED else contextlib.nullcontext():
        code = _run(args)
    if held:
        name = signal.Signals(held[0]).name
        click.echo(f"interrupted: {name} arrived while {command} wrote; it finished first (exit {code})", err=True)
        return 128 + held[0]
    return code


def _run(args: list[str]) -> int:
    as_json = "--json" in args
    try:
        main.main(args=args, prog_name="git genjob", standalone_mode=False)
    except GenjobError as err:
        return _report(err, as_json)
    except click.exceptions.Exit as exc:
        return int(exc.exit_code or 0)
    except SystemExit as exc:
        if type(sys.stdout).__name__ == "_PacifyFlushWrapper":  # click's answer to EPIPE: exit 1
            sys.stdout = sys.__stdout__
            raise BrokenPipeError("stdout was closed") from exc  # entry.main ends it as git does
        return int(exc.code or 0)
    except click.ClickException as exc:
        exc.show()
        return EXIT_USAGE
    except click.Abort:
        click.echo("aborted", err=True)
        return 130
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        return 130
    return 0


def _report(err: GenjobError, as_json: bool) -> int:
    """The one place an error becomes its message on stderr (a JSON document with --json) and
    its exit code."""
    if as_json:
        click.echo(json.dumps(err.to_json(), indent=2, sort_keys=True), err=True)
    else:
        click.echo(format_error(err).replace("error:", paint("error:", "red", True), 1), err=True)
    return err.exit_code
