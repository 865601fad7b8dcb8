"""click commands only: parse, call one core function, print. The only place that exits."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from git_genjob.errors import EXIT_USAGE, GenjobError, format_error
from git_genjob.states import LEASE_S, TIMEOUT_S

F = TypeVar("F", bound=Callable[..., Any])
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def emit(doc: Any, as_json: bool, human: Callable[[], None] | None = None) -> None:
    """One JSON document with --json; else the human text, unless `git genjob -q`."""
    if as_json:
        click.echo(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False))
    elif human is not None and not _quiet():
        human()


def _quiet() -> bool:
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.find_root().params.get("quiet"))


STATE_COLOURS = {
    "queued": "cyan",
    "claimed": "yellow",
    "sending": "yellow",
    "unknown": "red",
    "done": "green",
    "applied": "blue",
    "dropped": "white",
    "damaged": "red",
}


def paint(text: str, fg: str, stream_is_err: bool = False) -> str:
    """Colour only on a terminal, and never with NO_COLOR set."""
    stream = sys.stderr if stream_is_err else sys.stdout
    if os.environ.get("NO_COLOR") or not stream.isatty():
        return text
    return click.style(text, fg=fg)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")(f)


def _store() -> Any:
    """The repository around the working directory, opened once per command (a KEY argument's
    prefix lookup and the command itself share it)."""
    from git_genjob.store import Store

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return Store.open()
    meta = ctx.find_root().meta
    if "genjob.store" not in meta:
        meta["genjob.store"] = Store.open()
    return meta["genjob.store"]


def _key(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A KEY argument: the full key, or a unique prefix of one (as `status` and `log` print)."""
    if value is None or ctx.resilient_parsing:
        return value
    from git_genjob.records import resolve_key

    return resolve_key(_store(), value)


@click.group(context_settings=CONTEXT)
@click.version_option(package_name="git-genjob", prog_name="git genjob")
@click.option("-q", "--quiet", is_flag=True, help="No human output (errors and --json still print).")
def main(quiet: bool) -> None:
    """Model calls as keyed, replayable, signed writes recorded in git.

    A planner mints an immutable job (submit), a worker claims it and returns outputs
    with a signed receipt (work), and apply lands them as one commit with provenance.
    """


@main.command(context_settings=CONTEXT)
@click.option("--hooks", is_flag=True, help="Also install the git hooks (an existing hook is chained, run first).")
@click.option("--force", is_flag=True, help="With --hooks: proceed even if a chained hook already exists.")
@json_option
def init(hooks: bool, force: bool, as_json: bool) -> None:
    """Create .genjob/, the notes display and the remote refspecs."""
    from git_genjob.initrepo import init as do_init

    store = _store()
    report = do_init(store)
    if hooks:
        from git_genjob.hooks import install_hooks

        report.hooks = install_hooks(store, force=force)

    def human() -> None:
        for path in report.created:
            click.echo(f"created {path}")
        for item in report.config:
            click.echo(f"config  {item}")
        for item in report.hooks:
            click.echo(f"hook    {item}")
        if not (report.created or report.config or report.hooks):
            click.echo("already initialized")
        click.echo("next: git genjob keygen, git genjob trust add NAME KEY.pub, then commit .genjob/")

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
    remote = _remote_name(store, push_remote or None) if push_remote is not None else None  # before any write
    result = do_submit(store, instruction, rel, rel_create, key=key, rev=rev, allow_secrets=allow_secrets)
    doc = result.to_json()
    if remote is not None:
        from git_genjob.remote import push

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
        from git_genjob.userfiles import read_text

        return read_text(message_file, "instruction file")
    if not messages:
        raise BadInput("no instruction given", "pass -m TEXT or -F FILE")
    return "\n\n".join(messages)


def _state_choice() -> click.Choice[str]:
    from git_genjob.states import JobState

    return click.Choice([*(str(s) for s in JobState), "damaged"])


STATE_CHOICE = _state_choice()


@main.command(context_settings=CONTEXT)
@click.argument("key", required=False, callback=_key)
@click.option("--state", type=STATE_CHOICE, help="Only jobs in this state.")
@click.option("--all", "include_all", is_flag=True, help="Include archived (applied or dropped) jobs.")
@json_option
def status(key: str | None, state: str | None, include_all: bool, as_json: bool) -> None:
    """The queue: one line per job (or one job's state)."""
    from git_genjob.queue import StatusRow, summarize
    from git_genjob.queue import status as do_status
    from git_genjob.records import find_job

    store = _store()
    if key:
        doc = summarize(find_job(store, key))
        emit(doc, as_json, lambda: _status_line(StatusRow.of(doc)))
        return
    rows = do_status(store, state, include_all or state in ("applied", "dropped"))
    if as_json:  # one document, written in blocks of rows: 100,000 rows are never one string
        _write_blocks(
            ["[\n" if rows else "[]\n"]
            + [r.json + (",\n" if n + 1 < len(rows) else "\n") for n, r in enumerate(rows)]
            + (["]\n"] if rows else [])
        )
    elif not _quiet():
        if not rows:
            click.echo("no jobs" + (f" in state {state}" if state else ""))
        colour = not os.environ.get("NO_COLOR") and sys.stdout.isatty()
        _write_blocks([_status_text(r, colour) for r in rows])


def _write_blocks(lines: list[str], block: int = 2000) -> None:
    for start in range(0, len(lines), block):
        sys.stdout.write("".join(lines[start : start + block]))
    sys.stdout.flush()


def _status_text(r: Any, colour: bool) -> str:
    label = r.state if r.result in (None, "ok") else str(r.result)
    shown = f"{label:<8}"
    if colour:
        shown = click.style(shown, fg="red" if label != r.state else STATE_COLOURS.get(r.state, "white"))
    return f"{r.key:<34} {shown} {r.instruction[:60]}\n"


def _status_line(r: Any) -> None:
    colour = not os.environ.get("NO_COLOR") and sys.stdout.isatty()
    click.echo(_status_text(r, colour), nl=False)


@main.command(context_settings=CONTEXT)
@click.argument("key", callback=_key)
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
@click.argument("key", callback=_key)
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
    from git_genjob.userfiles import write_atomic

    write_atomic(out, data)
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
    from git_genjob.remote import push as do_push

    store = _store()
    remote = _remote_name(store, remote)
    report = do_push(store, remote)
    emit(report.to_json(), as_json, lambda: _sync_human(report, f"pushed {len(report.pushed)} ref(s) to {remote}"))


@main.command(context_settings=CONTEXT)
@click.argument("remote", required=False)
@json_option
def fetch(remote: str | None, as_json: bool) -> None:
    """Fetch refs/genjob/* and the notes from REMOTE and reconcile them."""
    from git_genjob.remote import fetch as do_fetch

    store = _store()
    remote = _remote_name(store, remote)
    report = do_fetch(store, remote)
    emit(report.to_json(), as_json, lambda: _sync_human(report, f"fetched from {remote}"))


def _remote_name(store: Any, remote: str | None) -> str:
    from git_genjob.remote import check_remote, default_remote

    return str(check_remote(store, remote) if remote else default_remote(store))


def _sync_human(report: Any, headline: str) -> None:
    click.echo(headline)
    for label in ("created", "updated", "merged", "dropped", "pushed"):
        items = getattr(report, label)
        if items:
            click.echo(f"  {label}: {', '.join(items)}")


def parse_duration(text: str) -> float:
    from git_genjob.errors import BadInput

    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    for suffix in ("ms", "s", "m", "h"):
        if text.endswith(suffix) and text[: -len(suffix)].replace(".", "", 1).isdigit():
            return float(text[: -len(suffix)]) * units[suffix]
    if text.replace(".", "", 1).isdigit():
        return float(text)
    raise BadInput(f"duration {text!r} is malformed", "use e.g. 90s, 10m, 1h")


def _git_config(store: Any, name: str) -> str | None:
    try:
        return str(store.repo.config[name])
    except KeyError:
        return None


def _worker_id(store: Any, given: str | None) -> str:
    """The worker name that goes into attempts, receipts and the Genjob-Worker trailer: one safe line."""
    import socket

    from git_genjob.documents import check_label

    return check_label(given or _git_config(store, "genjob.workerId") or socket.gethostname(), "--worker-id")


def _progress(quiet: bool) -> Callable[[str], None]:
    """Progress lines on a terminal's stderr only."""
    if quiet or _quiet() or not sys.stderr.isatty():
        return lambda _: None
    return lambda msg: click.echo(msg, err=True)


# -- keys and trust ------------------------------------------------------------------------------


@main.command(context_settings=CONTEXT)
@click.option("--name", default="genjob-worker", show_default=True, help="Key name (comment and file name).")
@click.option("--out", "out", type=click.Path(dir_okay=False), help="Private key file (default under XDG config).")
@json_option
def keygen(name: str, out: str | None, as_json: bool) -> None:
    """Create an Ed25519 key (OpenSSH format, mode 0600) and print its public line."""
    from git_genjob.documents import check_label
    from git_genjob.keys import default_key_path, generate, write_key_files

    check_label(name, "key name")
    path = out or default_key_path(name)
    key = generate(name)
    line = write_key_files(key, path)
    doc = {"private_key": path, "public_key": path + ".pub", "public_line": line, "keyid": key.keyid}

    def human() -> None:
        click.echo(line)
        click.echo(f"private key: {path} ({key.keyid})", err=True)

    emit(doc, as_json, human)


@main.group(context_settings=CONTEXT)
def trust() -> None:
    """Edit the trust store .genjob/allowed_signers."""


@trust.command("add", context_settings=CONTEXT)
@click.argument("name")
@click.argument("pubkey")
@click.option("--valid-before", help="Expiry (YYYYMMDD[HHMM[SS]] or YYYY-MM-DD), UTC.")
@click.option("--valid-after", help="Start of validity, UTC.")
@json_option
def trust_add(name: str, pubkey: str, valid_before: str | None, valid_after: str | None, as_json: bool) -> None:
    """Trust PUBKEY (a line or a .pub file) as NAME for genjob receipts."""
    from git_genjob.trust import add

    doc = add(_store(), name, pubkey, valid_before, valid_after)
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
    from git_genjob.trust import listing

    rows = listing(_store())

    def human() -> None:
        if not rows:
            store = _store()
            if store.workdir and not os.path.isdir(os.path.join(store.workdir, ".genjob")):
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
    from git_genjob.trust import revoke

    count = revoke(_store(), name)
    emit({"name": name, "revoked": count}, as_json, lambda: click.echo(f"revoked {count} key(s) of {name}"))


# -- workers -------------------------------------------------------------------------------------


@main.command(context_settings=CONTEXT)
@click.option(
    "--generator", "spec", help="exec:COMMAND, http:URL or openai:BASE_URL#MODEL (git config genjob.generator)."
)
@click.option(
    "--signing-key", "key_file", type=click.Path(dir_okay=False), help="Private key (git config genjob.signingKey)."
)
@click.option("--once", is_flag=True, help="Work on at most one job.")
@click.option("--max-jobs", type=click.IntRange(min=1), help="Work on at most N jobs.")
@click.option("--wait", is_flag=True, help="Keep polling for new jobs instead of returning.")
@click.option("--remote", help="Claim and publish through this remote (leased pushes).")
@click.option(
    "--lease", "lease", default=f"{LEASE_S / 60:g}m", show_default=True, help="Lease length; renewed every third."
)
@click.option("--timeout", "timeout", default=f"{TIMEOUT_S / 60:g}m", show_default=True, help="Generator time limit.")
@click.option("--worker-id", help="Worker name in attempts and receipts (git config genjob.workerId).")
@click.option("--pass-env", multiple=True, help="Pass this environment variable to an exec generator.")
@click.option(
    "--allow-secrets", is_flag=True, help="Sign outputs that look like credentials (this worker's decision alone)."
)
@click.option("--strict", is_flag=True, help="Exit 1 if a stored receipt is rejected or aborted (default: exit 0).")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
@json_option
def work(
    spec: str | None,
    key_file: str | None,
    once: bool,
    max_jobs: int | None,
    wait: bool,
    remote: str | None,
    lease: str,
    timeout: str,
    worker_id: str | None,
    pass_env: tuple[str, ...],
    allow_secrets: bool,
    strict: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """The worker loop: claim, record sending, generate, sign, store.

    Exit 0 when every receipt was stored (whatever its status) or nothing was queued; a
    rejected or aborted receipt is named on stderr, and is exit 1 with --strict. Exit 3: a
    generator was unavailable; exit 4: this worker was fenced.
    """
    from git_genjob.errors import BadInput
    from git_genjob.generators import parse_spec
    from git_genjob.keys import read_signing_key
    from git_genjob.worker import WorkerOptions
    from git_genjob.worker import work as do_work

    store = _store()
    spec = spec or _git_config(store, "genjob.generator")
    key_file = key_file or _git_config(store, "genjob.signingKey")
    if not spec or not key_file:
        raise BadInput(
            "work needs --generator and --signing-key", "or set git config genjob.generator / genjob.signingKey"
        )
    if once and max_jobs:
        raise BadInput("give --once or --max-jobs, not both")
    timeout_s = parse_duration(timeout)
    opts = WorkerOptions(
        generator=parse_spec(spec, timeout_s),
        signing_key=read_signing_key(os.path.expanduser(key_file)),
        worker_id=_worker_id(store, worker_id),
        lease_s=parse_duration(lease),
        max_jobs=1 if once else max_jobs,
        wait=wait,
        timeout_s=timeout_s,
        pass_env=pass_env,
        remote=remote,
        allow_secrets=allow_secrets,
        strict=strict,
    )
    report = do_work(store, opts, _progress(quiet))

    def human() -> None:
        if not report.outcomes:
            click.echo("nothing to do: no queued job")
        for o in report.outcomes:
            shown = paint(o.result, "green" if o.result == "ok" else "red")
            click.echo(f"{o.key:<34} {shown}" + (f": {o.reason}" if o.reason else ""))
            if o.replayed:
                click.echo(
                    f"{'':<34} replay of the answer recorded for this job ({o.replayed[0][:12]}); "
                    f"git genjob retry {o.key} --refresh asks afresh"
                )

    emit(report.to_json(), as_json, human)
    for o in report.not_ok:
        click.echo(
            f"warning: job {o.key}: its receipt is {o.result}, nothing to apply; "
            f"see git genjob show {o.key}, then git genjob retry {o.key} or git genjob drop {o.key} --why TEXT",
            err=True,
        )
    if report.exit_code:
        raise SystemExit(report.exit_code)


@main.command("receipt", context_settings=CONTEXT)
@click.argument("key", callback=_key)
@click.option("--outputs", "outputs_dir", type=click.Path(file_okay=False), help="Directory holding new file contents.")
@click.option("--delete", "deletes", multiple=True, help="Delete this allowed path (repeatable).")
@click.option(
    "--signing-key", "key_file", type=click.Path(dir_okay=False), help="Private key (git config genjob.signingKey)."
)
@click.option(
    "--status",
    "status_",
    type=click.Choice(["ok", "rejected", "aborted"]),
    default="ok",
    show_default=True,
    help="The receipt's status (a generator that failed out of band: rejected or aborted).",
)
@click.option("--reason", default="", help="Why, for a status other than ok.")
@click.option("--worker-id", help="Worker name (git config genjob.workerId).")
@click.option("--remote", help="Claim and publish through this remote.")
@json_option
def receipt_cmd(
    key: str,
    outputs_dir: str | None,
    deletes: tuple[str, ...],
    key_file: str | None,
    status_: str,
    reason: str,
    worker_id: str | None,
    remote: str | None,
    as_json: bool,
) -> None:
    """Sign and store a receipt for outputs produced out of band (claims the job itself)."""
    from git_genjob.errors import BadInput
    from git_genjob.keys import read_signing_key
    from git_genjob.worker import receipt_out_of_band

    store = _store()
    key_file = key_file or _git_config(store, "genjob.signingKey")
    if not key_file:
        raise BadInput("receipt needs --signing-key", "or set git config genjob.signingKey")
    if outputs_dir is None and not deletes and status_ == "ok":
        raise BadInput("no outputs given", "pass --outputs DIR and/or --delete PATH")
    outcome = receipt_out_of_band(
        store,
        key,
        outputs_dir,
        list(deletes),
        read_signing_key(os.path.expanduser(key_file)),
        _worker_id(store, worker_id),
        status_,
        reason,
        remote,
    )
    emit(outcome.to_json(), as_json, lambda: click.echo(f"receipt {key} {outcome.result} {outcome.reason}".rstrip()))
    if outcome.result == "fenced":
        raise SystemExit(4)


@main.command(context_settings=CONTEXT)
@click.option("--remote", help="Recover jobs on this remote (leased pushes).")
@json_option
def recover(remote: str | None, as_json: bool) -> None:
    """Fence expired claims: requeue lapsed claims, hold lapsed sends as unknown."""
    from git_genjob.lifecycle import Publisher
    from git_genjob.lifecycle import recover as do_recover

    report = do_recover(Publisher(_store(), remote))

    def human() -> None:
        for k in report.requeued:
            click.echo(f"requeued {k} (lease lapsed before sending)")
        for k in report.unknown:
            click.echo(f"unknown  {k} (lease lapsed while sending; owner decides: retry or drop)")
        for k in report.archived:
            click.echo(f"archived {k} (finished an interrupted archive move)")
        for path in report.locks:
            click.echo(f"cleared  {path} (stale lock of a writer that is gone)")
        if not (report.requeued or report.unknown or report.archived or report.locks):
            click.echo("no expired claims")

    emit(report.to_json(), as_json, human)


@main.command(context_settings=CONTEXT)
@click.argument("key", callback=_key)
@click.option("--remote", help="Publish through this remote.")
@click.option(
    "--refresh",
    is_flag=True,
    help="Ask the model afresh instead of replaying the answer this job recorded (a different "
    "answer is recorded as a drift candidate).",
)
@json_option
def retry(key: str, remote: str | None, refresh: bool, as_json: bool) -> None:
    """The owner starts a new attempt of job KEY (same key, same digest).

    A model generator replays the answer this job already paid for unless --refresh is given.
    """
    from git_genjob.lifecycle import Publisher
    from git_genjob.lifecycle import retry as do_retry

    record = do_retry(Publisher(_store(), remote), key, refresh)

    def human() -> None:
        how = (
            "a model will be asked afresh"
            if refresh
            else "a model answer it recorded is replayed; --refresh asks afresh"
        )
        click.echo(f"queued {key} again (epoch {record.epoch}; {how})")

    emit({"key": key, "state": record.state, "epoch": record.epoch, "refresh": refresh}, as_json, human)


@main.command(context_settings=CONTEXT)
@click.argument("key", callback=_key)
@click.option("--why", required=True, help="Why the job ends (kept in the archive).")
@click.option("--remote", help="Publish through this remote.")
@json_option
def drop(key: str, why: str, remote: str | None, as_json: bool) -> None:
    """The owner ends job KEY: it moves to refs/genjob/archive."""
    from git_genjob.lifecycle import Publisher
    from git_genjob.lifecycle import drop as do_drop

    store = _store()
    sig = store.signature()
    record = do_drop(Publisher(store, remote), key, why, f"{sig.name} <{sig.email}>")
    emit({"key": key, "state": record.state}, as_json, lambda: click.echo(f"dropped {key} ({record.state})"))


# -- replay cache --------------------------------------------------------------------------------


@main.command(context_settings=CONTEXT)
@click.option(
    "--endpoint",
    required=True,
    help="http:URL or a bare URL (POST {prompt, format: text}, the body is the answer), or "
    "openai:BASE_URL (chat completions at BASE_URL/chat/completions).",
)
@click.option("--model", help="Model name (required with openai:; recorded in the fingerprint).")
@click.option("--prompt-file", required=True, type=click.Path(dir_okay=False, allow_dash=True), help="The prompt.")
@click.option("--out-file", required=True, type=click.Path(dir_okay=False), help="Where the answer is written.")
@click.option(
    "--mode",
    type=click.Choice(["replay", "offline", "refresh"]),
    default="replay",
    show_default=True,
    help="replay: serve or ask and record; offline: never ask (a miss is exit 3); refresh: ask again.",
)
@click.option("--key", help="Scope the answer to this operation.")
@click.option("--timeout", default="120s", show_default=True, help="How long to wait for the endpoint.")
@json_option
def ask(
    endpoint: str,
    model: str | None,
    prompt_file: str,
    out_file: str,
    mode: str,
    key: str | None,
    timeout: str,
    as_json: bool,
) -> None:
    """One cached model call: replay what was asked before, else ask and record.

    Dialects as the generators name them: `--endpoint http://127.0.0.1:8080/model` (or
    http:URL) is the plain one, `--endpoint openai:http://127.0.0.1:8080/v1 --model M` chat
    completions.
    """
    from git_genjob.cachecli import ask as do_ask

    doc = do_ask(_store(), endpoint, model, prompt_file, out_file, mode, key, parse_duration(timeout))
    emit(doc, as_json, lambda: click.echo(f"{doc['source']} {doc['fingerprint']}"))


@main.group(context_settings=CONTEXT)
def cache() -> None:
    """The replay cache in refs/genjob/replays."""


@cache.command("ls", context_settings=CONTEXT)
@json_option
def cache_ls(as_json: bool) -> None:
    """Every fingerprint, its served answer and pending drift."""
    from git_genjob.cachecli import ls

    rows = ls(_store())

    def human() -> None:
        for r in rows:
            click.echo(f"{r['fingerprint']} {(r['served'] or '-')[:12]} {'DRIFT' if r['pending'] else ''}".rstrip())

    emit(rows, as_json, human)


@cache.command("show", context_settings=CONTEXT)
@click.argument("fp")
@json_option
def cache_show(fp: str, as_json: bool) -> None:
    """One fingerprint: request, events and answers."""
    from git_genjob.cachecli import show as do_show

    doc = do_show(_store(), fp)
    emit(doc, as_json, lambda: click.echo(json.dumps(doc, indent=2, ensure_ascii=False)))


@cache.command("drift", context_settings=CONTEXT)
@click.argument("fp")
@json_option
def cache_drift(fp: str, as_json: bool) -> None:
    """Exit 1 while a drift of FP awaits review."""
    from git_genjob.cachecli import show as do_show

    doc = do_show(_store(), fp)
    fp = doc["fingerprint"]
    emit(
        {"fingerprint": fp, "served": doc["served"], "pending": doc["pending"]},
        as_json,
        lambda: click.echo(f"drift {fp}: " + ", ".join(doc["pending"]) if doc["pending"] else f"no drift {fp}"),
    )
    if doc["pending"]:
        raise SystemExit(1)


@cache.command("accept", context_settings=CONTEXT)
@click.argument("fp")
@click.argument("sha")
def cache_accept(fp: str, sha: str) -> None:
    """Serve answer SHA for FP from now on."""
    from git_genjob.replay import Cache, accept

    cache = Cache(_store())
    sha = accept(cache, fp, sha)
    click.echo(f"accepted {sha[:19]} for {cache.resolve(fp)}")


@cache.command("reject", context_settings=CONTEXT)
@click.argument("fp")
@click.argument("sha")
def cache_reject(fp: str, sha: str) -> None:
    """Reject candidate answer SHA for FP (the served answer stays)."""
    from git_genjob.replay import Cache, reject

    cache = Cache(_store())
    sha = reject(cache, fp, sha)
    click.echo(f"rejected {sha[:19]} for {cache.resolve(fp)}")


@cache.command("explain", context_settings=CONTEXT)
@click.option("--prompt-file", required=True, type=click.Path(dir_okay=False, allow_dash=True), help="The prompt.")
@click.option("--endpoint", required=True, help="As for ask: http:URL or a bare URL, or openai:BASE_URL.")
@click.option("--model", help="Model name (required with openai:).")
@click.option("--key", help="Operation scope.")
@json_option
def cache_explain(prompt_file: str, endpoint: str, model: str | None, key: str | None, as_json: bool) -> None:
    """Print every fingerprint component and every rewrite of the prompt."""
    from git_genjob.cachecli import explain

    doc = explain(_store(), prompt_file, endpoint, model, key)

    def human() -> None:
        click.echo(f"fingerprint {doc['fingerprint']}")
        for k in ("endpoint", "model", "key"):
            click.echo(f"{k:<9} {doc['request'].get(k)}")
        click.echo(f"params    {json.dumps(doc['request']['params'], sort_keys=True)}")
        for r in doc["rewrites"]:
            click.echo(f"rewrite   {r}")
        click.echo("prompt (normalized):")
        click.echo(doc["request"]["prompt"])

    emit(doc, as_json, human)


@cache.command("import", context_settings=CONTEXT)
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@json_option
def cache_import(directory: str, as_json: bool) -> None:
    """Import <fingerprint>.jsonl replay logs from DIRECTORY."""
    from git_genjob.replay import Cache, import_dir

    fps = import_dir(Cache(_store()), directory)
    emit({"imported": fps}, as_json, lambda: click.echo(f"imported {len(fps)} fingerprint(s)"))


# -- apply plane -----------------------------------------------------------------------------------


@main.command("verify", context_settings=CONTEXT)
@click.argument("key", callback=_key)
@click.option("--branch", help="Check freshness against this branch (default: HEAD).")
@json_option
def verify_cmd(key: str, branch: str | None, as_json: bool) -> None:
    """Every check of the receipt of KEY; exit 0 only if applyable."""
    from git_genjob.verify import CHECKS, next_step, verify

    verdict = verify(_store(), key, branch, progress=_progress(False))

    def human() -> None:
        for c in verdict.checks:
            mark = paint("ok  ", "green") if c.ok else paint("FAIL", "red")
            click.echo(f"{mark} {c.n} {CHECKS[c.n]:<9} {c.detail}")
        click.echo(f"{key}: {'applyable' if verdict.ok else 'NOT applyable'}")
        hint = next_step(verdict) if not verdict.ok else ""
        if hint and not hint.startswith("see: "):
            click.echo(f"hint: {hint}", err=True)

    emit(verdict.to_json(), as_json, human)
    if not verdict.ok:
        raise SystemExit(1)


@main.command("apply", context_settings=CONTEXT)
@click.argument("key", callback=_key)
@click.option("--branch", help="Commit onto this branch (default: the checked-out one).")
@json_option
def apply_cmd(key: str, branch: str | None, as_json: bool) -> None:
    """Verify, run the pre-apply hook, and commit the outputs of KEY."""
    from git_genjob.apply import apply

    result = apply(_store(), key, branch)

    def human() -> None:
        if result.already:
            click.echo(f"already applied: {key} as {result.commit[:12]} on {result.branch}")
        else:
            click.echo(f"applied {key} as {result.commit[:12]} on {result.branch}")
        for path in result.kept:
            click.echo(f"warning: kept your local changes at {path} (the commit holds the job's output)", err=True)

    emit(result.to_json(), as_json, human)


@main.command("log", context_settings=CONTEXT)
@click.argument("range_", metavar="[RANGE]", required=False)
@json_option
def log_cmd(range_: str | None, as_json: bool) -> None:
    """Provenance of genjob commits in RANGE, and whether each receipt still verifies."""
    from git_genjob.audit import audit

    rows = [a.to_json() for a in audit(_store(), range_)]

    def human() -> None:
        if not rows:
            click.echo("no genjob commits")
        for r in rows:
            mark = r["provenance"] if r["ok"] else f"{r['provenance']}, FAILS: " + "; ".join(r["problems"])
            click.echo(f"{r['commit'][:12]} {r['key']} worker={r['worker']} signer={r['signer']} {mark}")
            for fact in r["facts"]:
                click.echo(f"             {fact}")

    emit(rows, as_json, human)


@main.command("audit", context_settings=CONTEXT)
@click.argument("range_", metavar="[RANGE]", required=False)
@click.option("-q", "--quiet", is_flag=True, help="Print only failing commits and the total.")
@click.option(
    "--trust-from",
    metavar="REV",
    help="Check signers against .genjob/ at REV instead of each commit's own (repairs history "
    "applied before the trust store was committed).",
)
@json_option
def audit_cmd(range_: str | None, quiet: bool, trust_from: str | None, as_json: bool) -> None:
    """Re-verify every commit with Genjob-* trailers in RANGE (for CI); exit 1 on any failure."""
    from git_genjob.audit import audit

    results = audit(_store(), range_, _progress(quiet), trust_from)
    bad = [a for a in results if not a.ok]

    def human() -> None:
        for a in results:
            if quiet and a.ok:
                continue
            mark = paint("ok  ", "green") if a.ok else paint("FAIL", "red")
            click.echo(f"{mark} {a.commit[:12]} {a.provenance:<22} {a.subject}")
            for line in a.facts + a.problems:
                click.echo(f"       {line}")
        click.echo(f"{len(results)} genjob commit(s), {len(bad)} failing")

    emit({"commits": [a.to_json() for a in results], "failing": len(bad)}, as_json, human)
    if bad:
        raise SystemExit(1)


@main.command(context_settings=CONTEXT)
@click.option("--keep", is_flag=True, help="Keep the temporary repository and print its path.")
@click.option(
    "--model", metavar="BASE_URL#MODEL", help="Use an OpenAI-compatible server instead of the built-in generator."
)
@json_option
def demo(keep: bool, model: str | None, as_json: bool) -> None:
    """A full round trip in a temporary repository, with nothing to configure."""
    from git_genjob.demo import run_demo

    result = run_demo(keep, model, (lambda _: None) if as_json else click.echo)
    doc = {
        "repository": result.path if keep else None,
        "key": result.key,
        "commit": result.commit,
        "verify": result.verify,
        "log": result.log,
    }
    emit(doc, as_json, lambda: click.echo(f"\nkept the demo repository: {result.path}" if keep else "\ndone."))


@main.command(context_settings=CONTEXT)
@click.argument("name", type=click.Choice(["pre-commit", "commit-msg", "pre-push", "pre-apply"]))
@click.argument("args", nargs=-1)
def hook(name: str, args: tuple[str, ...]) -> None:
    """What the installed hook scripts call (git genjob hook NAME ARGS...)."""
    from git_genjob.hooks import run_hook

    code = run_hook(name, list(args))
    if code:
        raise SystemExit(code)


@main.command(hidden=True, context_settings=CONTEXT)
@click.option("--out", "out_dir", type=click.Path(file_okay=False), help="Write git-genjob.1 into this directory.")
@click.option("--markdown", is_flag=True, help="Print docs/cli.md instead.")
def man(out_dir: str | None, markdown: bool) -> None:
    """Generate the man page (or docs/cli.md) from these commands."""
    from git_genjob import __version__
    from git_genjob.docgen import manpage
    from git_genjob.docgen import markdown as to_markdown

    if markdown:
        click.echo(to_markdown(main), nl=False)
        return
    text = manpage(main, __version__)
    if out_dir is None:
        click.echo(text, nl=False)
        return
    from git_genjob.userfiles import write_atomic

    write_atomic(os.path.join(out_dir, "git-genjob.1"), text)
    click.echo(os.path.join(out_dir, "git-genjob.1"))


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
