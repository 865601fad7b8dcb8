"""What every command shares: the `main` group, output (--json, -q, colour), the store opened
once per command, KEY prefixes, durations, and the worker options `work` and `receipt` both take."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from git_genjob.documents.display import printable, terminal_json

F = TypeVar("F", bound=Callable[..., Any])
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def emit(doc: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    """One JSON document with --json; else the human text, unless `git genjob -q`."""
    if as_json:
        click.echo(terminal_json(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)))
    elif human is not None and not quiet_mode():
        human()


def echo_lines(lines: list[str]) -> None:
    """A report's own human lines, printed."""
    for line in lines:
        click.echo(line)


def quiet_mode() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.find_root().params.get("quiet"))


def paint(text: str, fg: str, stream_is_err: bool = False) -> str:
    """Colour where `colour_wanted` says so."""
    if not colour_wanted(stream_is_err):
        return text
    return click.style(text, fg=fg)


NO_COLOUR_WORDS = ("never", "false", "no", "off", "0")


def colour_wanted(stream_is_err: bool = False) -> bool:
    """Colour as git decides it: `color.genjob`, else `color.ui` (never/false: none; always:
    even into a pipe; auto/true or unset: on a terminal whose TERM is not `dumb`), and never
    with NO_COLOR set (https://no-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    setting = _colour_setting(os.getcwd(), os.environ.get("GIT_CONFIG_PARAMETERS", ""))
    if setting in NO_COLOUR_WORDS:
        return False
    if setting == "always":
        return True
    stream = sys.stderr if stream_is_err else sys.stdout
    return os.environ.get("TERM") != "dumb" and stream.isatty()


@functools.cache
def _colour_setting(cwd: str, given: str) -> str:
    """`color.genjob`, else `color.ui`, as git config gives it in `cwd` (with `git -c`'s
    `given`), lower case; asked once per process."""
    for name in ("color.genjob", "color.ui"):
        try:
            out = subprocess.run(["git", "config", "--get", name], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return ""
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().lower()
    return ""


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(f)


def open_store() -> Any:
    """The repository around the working directory, opened once per command (a KEY argument's
    prefix lookup and the command itself share it)."""
    from git_genjob.storage.store import Store

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return Store.open()
    meta = ctx.find_root().meta
    if "genjob.store" not in meta:
        meta["genjob.store"] = Store.open()
    return meta["genjob.store"]


def commit_not_key(store: Any, text: str) -> str | None:
    """The commit `text` names when it names no job by its exact key (`show COMMIT`, `verify
    COMMIT`), else None: an exact key wins, and text that is no revision is left to the job lookup."""
    import pygit2

    from git_genjob.documents.errors import GenjobError
    from git_genjob.storage.archive import Archive
    from git_genjob.storage.layout import job_ref

    if store.ref_target(job_ref(text)) is not None or Archive(store).entry(text) is not None:
        return None
    try:
        return str(store.revparse_commit(text).id)
    except (KeyError, ValueError, pygit2.GitError, GenjobError):
        return None


def key_arg(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A KEY argument: the full key, or a unique prefix of one (as `status` and `log` print)."""
    if value is None or ctx.resilient_parsing:
        return value
    from git_genjob.storage.records import resolve_key

    return resolve_key(open_store(), value)


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="git-genjob", prog_name="git genjob")
@click.option("-q", "--quiet", is_flag=True, help="No human output (errors and --json still print).")
def main(quiet: bool) -> None:
    """Model calls as keyed, replayable, signed writes recorded in git.

    A planner mints an immutable job (submit), a worker claims it and returns outputs
    with a signed receipt (work), and apply lands them as one commit with provenance.
    """


def remote_name(store: Any, remote: str | None) -> str:
    from git_genjob.storage.remote import check_remote, default_remote

    return str(check_remote(store, remote) if remote else default_remote(store))


def parse_duration(text: str) -> float:
    from git_genjob.documents.errors import BadInput

    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for suffix in ("ms", "s", "m", "h"):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * units[suffix]
    if text.replace(".", "", 1).isdigit():
        return float(text)
    raise BadInput(f"duration {text!r} is malformed", "use e.g. 90s, 10m, 1h")


def git_config(store: Any, name: str) -> str | None:
    return store.config_get(name)  # type: ignore[no-any-return]


def worker_id_of(store: Any, given: str | None) -> str:
    """The worker name that goes into attempts, receipts and the Genjob-Worker trailer: one safe line."""
    import socket

    from git_genjob.documents.attempts import check_label

    return check_label(given or git_config(store, "genjob.workerId") or socket.gethostname(), "--worker-id")


def progress_printer(quiet: bool) -> Callable[[str], None]:
    """Progress lines on a terminal's stderr only."""
    if quiet or quiet_mode() or not sys.stderr.isatty():
        return lambda _: None
    return lambda msg: click.echo(printable(msg), err=True)  # a progress line may quote a generator


# -- the options `work` and `receipt` share, with one default and one help each -----------------


def signing_key_option(f: F) -> F:
    return click.option(
        "--signing-key", "key_file", type=click.Path(dir_okay=False), help="Private key (git config genjob.signingKey)."
    )(f)


def worker_id_option(f: F) -> F:
    return click.option("--worker-id", help="Worker name in attempts and receipts (git config genjob.workerId).")(f)


def remote_option(f: F) -> F:
    return click.option("--remote", help="Claim and publish through this remote (leased pushes).")(f)


def signing_key_of(store: Any, given: str | None, command: str) -> Any:
    """The signing key from --signing-key, else git config genjob.signingKey."""
    from git_genjob.documents.errors import BadInput
    from git_genjob.documents.keys import read_signing_key

    path = given or git_config(store, "genjob.signingKey")
    if not path:
        raise BadInput(
            f"{command} needs --signing-key",
            "or set git config genjob.signingKey (git genjob keygen makes one); git genjob doctor",
        )
    return read_signing_key(os.path.expanduser(path))
