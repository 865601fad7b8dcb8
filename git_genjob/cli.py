"""click commands only: parse, call one core function, print. The only place that exits."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from git_genjob.errors import EXIT_USAGE, GenjobError, format_error

F = TypeVar("F", bound=Callable[..., Any])
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def emit(doc: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))
    elif human is not None:
        human()


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(f)


def _store() -> Any:
    from git_genjob.store import Store

    return Store.open()


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="git-genjob", prog_name="git genjob")
def main() -> None:
    """Model calls as keyed, replayable, signed writes recorded in git.

    A planner mints an immutable job (submit), a worker claims it and returns outputs
    with a signed receipt (work), and apply lands them as one commit with provenance.
    """


@main.command(context_settings=CONTEXT)
@json_option
def init(as_json: bool) -> None:
    """Create .genjob/, the notes display and the remote refspecs."""
    from git_genjob.initrepo import init as do_init

    store = _store()
    report = do_init(store)

    def human() -> None:
        for path in report.created:
            click.echo(f"created {path}")
        for item in report.config:
            click.echo(f"config  {item}")
        for item in report.hooks:
            click.echo(f"hook    {item}")
        if not (report.created or report.config or report.hooks):
            click.echo("already initialized")
        click.echo("next: git genjob keygen, then git genjob trust add NAME KEY.pub")

    emit(report.to_json(), as_json, human)


@main.command(context_settings=CONTEXT)
@click.argument("paths", nargs=-1)
@click.option("-m", "--message", "messages", multiple=True, help="The instruction (repeat for paragraphs).")
@click.option(
    "-F",
    "--file",
    "message_file",
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Read the instruction from FILE (- for stdin).",
)
@click.option("--create", "creates", multiple=True, help="A path the job may create (repeatable).")
@click.option("--key", help="Idempotency key naming this operation (default: derived from the work order).")
@click.option("--rev", help="Mint from this commit instead of the work tree.")
@click.option("--allow-secrets", is_flag=True, help="Store an instruction or input that looks like a credential.")
@click.option(
    "--push",
    "push_remote",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[REMOTE]",
    help="Push the job to REMOTE afterwards.",
)
@json_option
def submit(
    paths: tuple[str, ...],
    messages: tuple[str, ...],
    message_file: str | None,
    creates: tuple[str, ...],
    key: str | None,
    rev: str | None,
    allow_secrets: bool,
    push_remote: str | None,
    as_json: bool,
) -> None:
    """Mint a job for PATH... and store it under refs/genjob/jobs/KEY."""
    from git_genjob.errors import BadInput
    from git_genjob.paths import from_cli
    from git_genjob.queue import submit as do_submit

    instruction = _instruction(messages, message_file)
    store = _store()
    root = store.workdir or ""
    cwd = os.getcwd() if store.workdir else root
    rel = [from_cli(p, cwd, root) if store.workdir else _bare_path(p) for p in paths]
    rel_create = [from_cli(p, cwd, root) if store.workdir else _bare_path(p) for p in creates]
    if not rel and not rel_create:
        raise BadInput("no paths given", "name the files the job may change: git genjob submit -m TEXT PATH...")
    result = do_submit(store, instruction, rel, rel_create, key=key, rev=rev, allow_secrets=allow_secrets)
    doc = result.to_json()
    if push_remote is not None:
        from git_genjob.remote import default_remote, push

        remote = push_remote or default_remote(store)
        doc["pushed"] = push(store, remote).pushed

    def human() -> None:
        verb = "created" if result.created else ("exists (archived)" if result.archived else "exists")
        click.echo(f"{verb} {result.key} {result.digest} state={result.state}")
        for w in result.warnings:
            click.echo(f"warning: {w}", err=True)

    emit(doc, as_json, human)


def _bare_path(p: str) -> str:
    from git_genjob.paths import check_path

    return check_path(p)


def _instruction(messages: tuple[str, ...], message_file: str | None) -> str:
    from git_genjob.errors import BadInput

    if messages and message_file:
        raise BadInput("give -m or -F, not both")
    if message_file:
        try:
            if message_file == "-":
                return sys.stdin.read()
            with open(message_file, encoding="utf-8") as fh:
                return fh.read()
        except (OSError, UnicodeDecodeError) as exc:
            raise BadInput(f"cannot read instruction file {message_file}: {exc}") from None
    if not messages:
        raise BadInput("no instruction given", "pass -m TEXT or -F FILE")
    return "\n\n".join(messages)


STATE_CHOICE = click.Choice(["queued", "claimed", "sending", "unknown", "done", "applied", "dropped"])


@main.command(context_settings=CONTEXT)
@click.argument("key", required=False)
@click.option("--state", type=STATE_CHOICE, help="Only jobs in this state.")
@click.option("--all", "include_all", is_flag=True, help="Include archived (applied or dropped) jobs.")
@json_option
def status(key: str | None, state: str | None, include_all: bool, as_json: bool) -> None:
    """The queue: one line per job (or one job's state)."""
    from git_genjob.queue import show, summarize
    from git_genjob.queue import status as do_status
    from git_genjob.records import find_job

    store = _store()
    if key:
        rows = [summarize(find_job(store, key))]
    else:
        rows = do_status(store, state, include_all or state in ("applied", "dropped"))

    def human() -> None:
        if not rows:
            click.echo("no jobs" + (f" in state {state}" if state else ""))
        for r in rows:
            click.echo(f"{r['key']:<34} {r['state']:<8} {r['instruction'][:60]}")

    _ = show
    emit(rows if not key else rows[0], as_json, human)


@main.command(context_settings=CONTEXT)
@click.argument("key")
@json_option
def show(key: str, as_json: bool) -> None:
    """One job: its work order, events, attempts and receipt."""
    from git_genjob.queue import show as do_show

    doc = do_show(_store(), key)

    def human() -> None:
        click.echo(f"job      {doc['key']}  ({doc['state']}{', archived' if doc['archived'] else ''})")
        click.echo(f"digest   {doc['digest']}")
        click.echo(f"created  {doc['meta'].get('created_at')} by {doc['meta'].get('submitter')}")
        click.echo(f"base     {doc['meta'].get('base')}")
        click.echo(
            "paths    " + ", ".join(f"{p}{' (create)' if v is None else ''}" for p, v in doc["job"]["inputs"].items())
        )
        click.echo("instruction:")
        for line in doc["job"]["instruction"].splitlines():
            click.echo(f"    {line}")
        click.echo("events:")
        for e in doc["events"]:
            click.echo(f"    {e['commit'][:12]} {e['event']:<10} -> {e['state']} (epoch {e['epoch']})")
        for a in doc["attempt_records"]:
            click.echo(f"attempt {a.get('n')}: {a.get('state')} worker={a.get('worker')} epoch={a.get('epoch')}")
        if doc["receipt"]:
            click.echo(f"receipt  present; outputs: {', '.join(doc['outputs']) or '(none)'}")

    emit(doc, as_json, human)


@main.command(context_settings=CONTEXT)
@click.argument("key")
@click.option(
    "-o",
    "--output",
    "out",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="Write the tar here (- for stdout).",
)
@json_option
def bundle(key: str, out: str, as_json: bool) -> None:
    """Write the exact, byte-identical bundle of job KEY as a tar."""
    from git_genjob.canonical import digest
    from git_genjob.queue import bundle_bytes

    data = bundle_bytes(_store(), key)
    if out == "-":
        sys.stdout.buffer.write(data)
        return
    tmp = out + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, out)
    emit(
        {"key": key, "file": out, "bytes": len(data), "digest": digest(data)},
        as_json,
        lambda: click.echo(f"wrote {out} ({len(data)} bytes, {digest(data)})"),
    )


@main.command(context_settings=CONTEXT)
@click.argument("remote", required=False)
@json_option
def push(remote: str | None, as_json: bool) -> None:
    """Fast-forward from REMOTE, then push refs/genjob/* and the notes with leases."""
    from git_genjob.remote import check_remote, default_remote
    from git_genjob.remote import push as do_push

    store = _store()
    remote = check_remote(store, remote) if remote else default_remote(store)
    report = do_push(store, remote)
    emit(report.to_json(), as_json, lambda: _sync_human(report, f"pushed {len(report.pushed)} ref(s) to {remote}"))


@main.command(context_settings=CONTEXT)
@click.argument("remote", required=False)
@json_option
def fetch(remote: str | None, as_json: bool) -> None:
    """Fetch refs/genjob/* and the notes from REMOTE and reconcile them."""
    from git_genjob.remote import check_remote, default_remote
    from git_genjob.remote import fetch as do_fetch

    store = _store()
    remote = check_remote(store, remote) if remote else default_remote(store)
    report = do_fetch(store, remote)
    emit(report.to_json(), as_json, lambda: _sync_human(report, f"fetched from {remote}"))


def _sync_human(report: Any, headline: str) -> None:
    click.echo(headline)
    for label in ("created", "updated", "merged", "dropped", "pushed"):
        items = getattr(report, label)
        if items:
            click.echo(f"  {label}: {', '.join(items)}")


def run(args: list[str]) -> int:
    """Run the CLI; convert GenjobError to its message and exit code in one place."""
    as_json = "--json" in args
    try:
        main.main(args=args, prog_name="git genjob", standalone_mode=False)
    except GenjobError as err:
        if as_json:
            click.echo(json.dumps(err.to_json(), indent=2, sort_keys=True), err=True)
        else:
            click.echo(format_error(err), err=True)
        return err.exit_code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code or 0)
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
