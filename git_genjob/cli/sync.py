"""push and fetch: refs/genjob/* and the notes through a remote (SPEC §9)."""

from __future__ import annotations

import click

from git_genjob.cli.common import (
    CONTEXT,
    echo_lines,
    emit,
    json_option,
    main,
    open_store,
    remote_name,
)


@main.command(context_settings=CONTEXT)
@click.argument("remote", required=False)
@json_option
def push(remote: str | None, as_json: bool) -> None:
    """Fast-forward from REMOTE, then push refs/genjob/* and the notes with leases."""
    from git_genjob.storage.remote import push as do_push

    store = open_store()
    remote = remote_name(store, remote)
    from git_genjob.landing.quarantine import reconcile_notes

    report = do_push(store, remote, reconcile_notes)
    for line in report.warnings():
        click.echo(line, err=True)
    emit(report.to_json(), as_json, lambda: echo_lines(report.lines(f"pushed {len(report.pushed)} ref(s) to {remote}")))


@main.command(context_settings=CONTEXT)
@click.argument("remote", required=False)
@json_option
def fetch(remote: str | None, as_json: bool) -> None:
    """Fetch refs/genjob/* and the notes from REMOTE and reconcile them."""
    from git_genjob.storage.remote import fetch as do_fetch

    store = open_store()
    remote = remote_name(store, remote)
    from git_genjob.landing.quarantine import reconcile_notes

    report = do_fetch(store, remote, reconcile_notes)
    for line in report.warnings():
        click.echo(line, err=True)
    emit(report.to_json(), as_json, lambda: echo_lines(report.lines(f"fetched from {remote}")))
