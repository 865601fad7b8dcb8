"""The command line: parse, call one core function, render. The only plane that prints and exits.

Each module holds the commands of one SPEC area and registers them on `main` (common.py) when
imported; `run` is the one place a GenjobError becomes its message and exit code.
"""

from __future__ import annotations

import json
import sys

import click

from git_genjob.cli import cache, ci, jobs, landing, sync, tools, trustcmd, work  # noqa: F401 - registers the commands
from git_genjob.cli.common import main, paint
from git_genjob.documents.errors import EXIT_USAGE, GenjobError, format_error

__all__ = ["main", "run"]


def run(args: list[str]) -> int:
    """Run the CLI; convert GenjobError to its message and exit code in one place."""
    as_json = "--json" in args
    try:
        main.main(args=args, prog_name="git genjob", standalone_mode=False)
    except GenjobError as err:
        if as_json:
            click.echo(json.dumps(err.to_json(), indent=2, sort_keys=True), err=True)
        else:
            click.echo(format_error(err).replace("error:", paint("error:", "red", True), 1), err=True)
        return err.exit_code
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
