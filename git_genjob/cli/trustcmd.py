"""keygen and trust add/list/revoke: signing keys and the trust store (SPEC §6)."""

from __future__ import annotations

import click

from git_genjob.cli.common import (
    CONTEXT,
    emit,
    json_option,
    main,
    open_store,
)


@main.command(context_settings=CONTEXT)
@click.option("--name", default="genjob-worker", show_default=True, help="Key name (comment and file name).")
@click.option("--out", "out", type=click.Path(dir_okay=False), help="Private key file (default under XDG config).")
@click.option(
    "--planner",
    is_flag=True,
    help="Your planner key (the one submit signs with: git config genjob.plannerKey, else keys/planner "
    "under XDG config), created if missing and trusted in .genjob/allowed_signers, as init does.",
)
@json_option
def keygen(name: str, out: str | None, planner: bool, as_json: bool) -> None:
    """Create an Ed25519 key (OpenSSH format, mode 0600) and print its public line."""
    from git_genjob.documents.attempts import check_label
    from git_genjob.documents.keys import default_key_path, generate, write_key_files

    if planner:
        _planner_keygen(out, as_json)
        return
    check_label(name, "key name")
    path = out or default_key_path(name)
    key = generate(name)
    line = write_key_files(key, path)
    doc = {"private_key": path, "public_key": path + ".pub", "public_line": line, "keyid": key.keyid}

    def human() -> None:
        click.echo(line)
        click.echo(f"private key: {path} ({key.keyid})", err=True)

    emit(doc, as_json, human)


def _planner_keygen(out: str | None, as_json: bool) -> None:
    from git_genjob.documents.errors import BadInput
    from git_genjob.planner.trust import ensure_planner, planner_key, planner_key_path

    if out is not None:
        raise BadInput("--planner and --out: the planner key's place is git config genjob.plannerKey", "drop --out")
    store = open_store()
    done = ensure_planner(store)
    key = planner_key(store)
    path = planner_key_path(store)[0]
    doc = {"private_key": path, "public_key": path + ".pub", "keyid": key.keyid, "done": done}

    def human() -> None:
        for line in done or [f"planner key {path} ({key.keyid}) exists and is trusted in .genjob/allowed_signers"]:
            click.echo(line)
        if done:
            click.echo("next: commit .genjob/allowed_signers (workers trust your jobs once it is on their branch)")

    emit(doc, as_json, human)


@main.group(context_settings=CONTEXT)
def trust() -> None:
    """Edit the trust store .genjob/allowed_signers."""


@trust.command("add", context_settings=CONTEXT)
@click.argument("name")
@click.argument("pubkey")
@click.option("--valid-before", help="Expiry (YYYYMMDD[HHMM[SS]] or YYYY-MM-DD), UTC.")
@click.option("--valid-after", help="Start of validity, UTC.")
@click.option(
    "--as",
    "roles",
    multiple=True,
    type=click.Choice(["worker", "planner", "reviewer"]),
    help="What the key may sign (repeatable): worker = receipts and replay answers (the default), "
    "planner = jobs, drops and answer reviews, reviewer = answer reviews.",
)
@json_option
def trust_add(
    name: str, pubkey: str, valid_before: str | None, valid_after: str | None, roles: tuple[str, ...], as_json: bool
) -> None:
    """Trust PUBKEY (a line or a .pub file) as NAME: a worker's by default (--as for others)."""
    from git_genjob.planner.trust import add

    doc = add(open_store(), name, pubkey, valid_before, valid_after, roles or ("worker",))
    emit(
        doc,
        as_json,
        lambda: click.echo(
            f"trusted {name} in .genjob/allowed_signers; commit it before apply "
            f'(git add .genjob && git commit -m "genjob: trust {name}")'
            if doc["added"]
            else f"{name} is already trusted"
        ),
    )


@trust.command("list", context_settings=CONTEXT)
@json_option
def trust_list(as_json: bool) -> None:
    """List trusted keys with their validity and revocation."""
    from git_genjob.planner.trust import listing

    rows = listing(open_store())

    def human() -> None:
        if not rows:
            store = open_store()
            if store.workdir and store.worktree_file(".genjob/allowed_signers") is None:
                click.echo("no .genjob/ yet: run git genjob init, then git genjob trust add NAME KEY.pub")
            else:
                click.echo("no trusted keys (git genjob trust add NAME KEY.pub)")
        for r in rows:
            click.echo(f"{r['name']:<20} {r['keyid']}{'  REVOKED' if r['revoked'] else ''}")

    emit(rows, as_json, human)


@trust.command("revoke", context_settings=CONTEXT)
@click.argument("name")
@json_option
def trust_revoke(name: str, as_json: bool) -> None:
    """Revoke every key trusted as NAME (it stays listed; revocation holds at any time)."""
    from git_genjob.planner.trust import revoke

    count = revoke(open_store(), name)
    emit({"name": name, "revoked": count}, as_json, lambda: click.echo(f"revoked {count} key(s) of {name}"))
