"""Commands on jobs as their owner sees them (SPEC §2, §4): init, submit, status, show, bundle,
recover, retry, drop."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from git_genjob.planner.queue import SubmitResult
    from git_genjob.planner.rows import StatusRow
    from git_genjob.storage.store import Store

from git_genjob.cli.common import (
    CONTEXT,
    colour_wanted,
    echo_lines,
    emit,
    git_config,
    json_option,
    key_arg,
    main,
    open_store,
    paint,
    quiet_mode,
    remote_name,
)
from git_genjob.documents.display import printable, terminal_json
from git_genjob.documents.errors import Painter, plain


@main.command(context_settings=CONTEXT)
@click.option("--hooks", is_flag=True, help="Also install the git hooks (an existing hook is chained, run first).")
@click.option("--force", is_flag=True, help="With --hooks: proceed even if a chained hook already exists.")
@click.option(
    "--no-planner-key",
    "no_planner",
    is_flag=True,
    help="Do not create or trust your planner key (a worker-only clone).",
)
@json_option
def init(hooks: bool, force: bool, no_planner: bool, as_json: bool) -> None:
    """Create .genjob/, the notes display and the remote refspecs.

    Also your planner key: it (~/.config/git-genjob/keys/planner, or git config genjob.plannerKey) signs
    the jobs you submit; init trusts it in .genjob/allowed_signers for genjob-job and
    genjob-review. Commit .genjob/ so that workers claim your jobs."""
    from git_genjob.planner.initrepo import init as do_init

    store = open_store()
    report = do_init(store, planner=not no_planner)
    if hooks:
        from git_genjob.landing.hooks import install_hooks

        report.hooks = install_hooks(store, force=force)

    emit(report.to_json(), as_json, lambda: echo_lines(report.lines()))


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
@click.option(
    "--signing-key",
    "key_file",
    type=click.Path(dir_okay=False),
    help="The planner's private key (default: git config genjob.plannerKey, else the key init created).",
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
    key_file: str | None,
    as_json: bool,
) -> None:
    """Mint a job for PATH... and store it under refs/genjob/jobs/KEY.

    The job is signed by your planner key (the one init created, git config genjob.plannerKey, or
    --signing-key); workers claim only jobs a planner in .genjob/allowed_signers signed."""
    from git_genjob.documents.errors import BadInput
    from git_genjob.planner.queue import submit as do_submit

    instruction = _instruction(messages, message_file)
    store = open_store()
    rel = _repo_paths(store, paths)
    rel_create = _repo_paths(store, creates)
    if not rel and not rel_create:
        raise BadInput("no paths given", "name the files the job may change: git genjob submit -m TEXT PATH...")
    remote = remote_name(store, push_remote or None) if push_remote is not None else None  # before any write
    from git_genjob.planner.trust import planner_key

    signing_key = planner_key(store, key_file)  # before any write: a bad key file writes nothing
    result = do_submit(
        store, instruction, rel, rel_create, key=key, rev=rev, allow_secrets=allow_secrets, signing_key=signing_key
    )
    doc = result.to_json()
    if remote is not None:
        from git_genjob.landing.quarantine import reconcile_notes
        from git_genjob.storage.remote import push

        doc["pushed"] = push(store, remote, reconcile_notes).pushed
    emit(doc, as_json, lambda: _echo_submitted(result))


def _repo_paths(store: Store, paths: tuple[str, ...]) -> list[str]:
    """PATH arguments as repository paths: from the current directory in a work tree, as
    given in a bare repository."""
    from git_genjob.documents.paths import from_cli

    if not store.workdir:
        return [_bare_path(p) for p in paths]
    cwd = os.getcwd()
    return [from_cli(p, cwd, store.workdir) for p in paths]


def _echo_submitted(result: SubmitResult) -> None:
    verb = "created" if result.created else ("exists (archived)" if result.archived else "exists")
    click.echo(f"{verb} {result.key} {result.digest} state={result.state}")
    for w in result.warnings:
        click.echo(f"warning: {printable(w)}", err=True)


def _bare_path(p: str) -> str:
    from git_genjob.documents.paths import check_path

    return check_path(p)


def _instruction(messages: tuple[str, ...], message_file: str | None) -> str:
    from git_genjob.documents.errors import BadInput

    if messages and message_file:
        raise BadInput("give -m or -F, not both")
    if message_file:
        from git_genjob.planner.userfiles import read_text

        return read_text(message_file, "instruction file")
    if not messages:
        raise BadInput("no instruction given", "pass -m TEXT or -F FILE")
    return "\n\n".join(messages)


def _state_choice() -> click.Choice[str]:
    from git_genjob.documents.states import APPLYABLE, JobState

    return click.Choice([*(str(s) for s in JobState), "damaged", APPLYABLE])


STATE_CHOICE = _state_choice()


@main.command(context_settings=CONTEXT)
@click.argument("key", required=False, callback=key_arg)
@click.option(
    "--state",
    type=STATE_CHOICE,
    help="Only jobs in this state; applyable: done with an ok receipt (done also holds rejected and aborted ones).",
)
@click.option("--all", "include_all", is_flag=True, help="Include archived (applied, dropped or superseded) jobs.")
@json_option
def status(key: str | None, state: str | None, include_all: bool, as_json: bool) -> None:
    """The queue: one line per job (or one job's state)."""
    from git_genjob.planner.rows import StatusRow, status_lines, summarize

    store = open_store()
    painter = _row_painter()
    if key:
        from git_genjob.storage.records import find_job

        doc = summarize(find_job(store, key))
        emit(doc, as_json, lambda: click.echo(status_lines([StatusRow.of(doc)], painter)[0], nl=False))
        return
    rows = _queue_rows(store, state, include_all, painter)
    if as_json:
        _write_json_rows(rows)
    elif not quiet_mode():
        if not rows:
            click.echo("no jobs" + (f" in state {state}" if state else ""))
        _write_blocks(status_lines(rows, painter))


def _queue_rows(store: Store, state: str | None, include_all: bool, painter: Painter) -> list[StatusRow]:
    """The rows `status` lists for --state and --all (applyable: done with an ok receipt)."""
    from git_genjob.documents.states import APPLYABLE, ARCHIVED_STATES, JobState, is_applyable
    from git_genjob.planner import statusfast
    from git_genjob.planner.queue import status as do_status

    # plain `status` is kept for the fast path; the stamp is taken before anything is read
    taken = statusfast.before(store) if state is None and not include_all else None
    archived_state = state in ARCHIVED_STATES
    rows = do_status(store, JobState.DONE if state == APPLYABLE else state, include_all or archived_state)
    if taken is not None:  # what `status` prints from here on without libgit2
        statusfast.remember(store, taken, rows, coloured=painter is not plain)
    if state == APPLYABLE:
        rows = [r for r in rows if is_applyable(r.state, r.result)]
    return rows


def _write_json_rows(rows: list[StatusRow]) -> None:
    """One document, written in blocks of rows: 100,000 rows are never one string."""
    sys.stdout.write("[\n" if rows else "[]\n")
    for n in range(0, len(rows), 2000):
        block = ",\n".join(r.json for r in rows[n : n + 2000])
        sys.stdout.write((",\n" if n else "") + terminal_json(block))
    sys.stdout.write("\n]\n" if rows else "")
    sys.stdout.flush()


def _row_painter() -> Painter:
    """`paint`, decided once for the whole listing (`colour_wanted`)."""
    return paint if colour_wanted() else plain


def _job_behind(store: Store, text: str) -> tuple[str, str] | None:
    """(commit, job key) when `text` names no job but a commit: the job its Genjob-Key names;
    a commit with none is refused here, saying so. None when `text` is a job's key."""
    from git_genjob.cli.common import commit_not_key
    from git_genjob.documents.errors import BadInput
    from git_genjob.storage.gitdir import genjob_trailers_of_commit

    commit = commit_not_key(store, text)
    if commit is None:  # a job's key, or no revision either: the job lookup names it
        return None
    message = store.get_commit(commit).message
    found = genjob_trailers_of_commit(commit, message, store.gitdir).get("Genjob-Key")
    if not found:
        raise BadInput(
            f"commit {commit[:12]} has no job behind it (no Genjob-Key trailer)",
            "git genjob log lists the genjob commits",
        )
    return commit, found


def _write_blocks(lines: list[str], block: int = 2000) -> None:
    for start in range(0, len(lines), block):
        sys.stdout.write("".join(lines[start : start + block]))
    sys.stdout.flush()


@main.command(context_settings=CONTEXT)
@click.argument("key", callback=key_arg)
@click.option("--log", "log", is_flag=True, help="Each attempt's generator stdout and stderr (the last 64 KiB).")
@click.option(
    "--calls",
    is_flag=True,
    help="The model calls of the last attempt through the gateway: each request and answer from the record "
    "(credential-looking text redacted), with its status, replay and tokens.",
)
@json_option
def show(key: str, log: bool, calls: bool, as_json: bool) -> None:
    """One job: its work order, events, attempts and receipt; how it ended and why, who signed
    its receipt, and the commit it became.

    KEY may also be a commit (any revision: HEAD, a sha, main~2): the job behind that genjob
    commit is shown, or the command says the commit has none."""
    store = open_store()
    behind = _job_behind(store, key)
    job = key if behind is None else behind[1]
    if calls:
        _show_calls(store, job, as_json)
    elif log:
        from git_genjob.planner.queue import log_lines, show_logs

        logs = show_logs(store, job)
        emit(logs, as_json, lambda: echo_lines(log_lines(logs)))
    elif behind is not None:
        from git_genjob.planner.queue import show as do_show
        from git_genjob.planner.showtext import show_lines

        doc = do_show(store, job)
        doc["commit_shown"] = behind[0]
        emit(doc, as_json, lambda: echo_lines(show_lines(doc)))
    else:
        _show_job(store, job, as_json)


def _show_calls(store: Store, key: str, as_json: bool) -> None:
    """`show --calls`: the gateway's transcript of the last attempt's model calls."""
    from git_genjob.documents.receipt import parse_envelope
    from git_genjob.storage.records import find_job
    from git_genjob.worker.gateway.transcript import transcript, transcript_lines

    record = find_job(store, key)
    pred = parse_envelope(record.receipt_bytes).predicate if record.receipt_bytes is not None else None
    doc = transcript(store, record.key, pred.model if pred else None, pred.attempt if pred else 0)
    emit(doc, as_json, lambda: echo_lines(transcript_lines(doc)))


def _show_job(store: Store, key: str, as_json: bool) -> None:
    """Plain `show KEY`, kept for the fast path."""
    from git_genjob.planner import statusfast
    from git_genjob.planner.queue import show as do_show
    from git_genjob.planner.showtext import show_lines

    taken = statusfast.before_show(store)  # before the job is read
    doc = do_show(store, key)
    lines = show_lines(doc)
    if taken is not None:  # what `show KEY` prints from here on without libgit2
        statusfast.remember_show(store, taken, key, doc, lines)
    emit(doc, as_json, lambda: echo_lines(lines))


@main.command(context_settings=CONTEXT)
@click.argument("key", callback=key_arg)
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
    from git_genjob.documents.canonical import digest
    from git_genjob.planner.queue import bundle_bytes

    data = bundle_bytes(open_store(), key)
    if out == "-":
        sys.stdout.buffer.write(data)
        return
    from git_genjob.planner.userfiles import write_atomic

    write_atomic(out, data)
    emit(
        {"key": key, "file": out, "bytes": len(data), "digest": digest(data)},
        as_json,
        lambda: click.echo(f"wrote {out} ({len(data)} bytes, {digest(data)})"),
    )


@main.command(context_settings=CONTEXT)
@click.option("--remote", help="Recover jobs on this remote (leased pushes).")
@click.option(
    "--allowed-signers",
    "trust_file",
    type=click.Path(dir_okay=False),
    help="Trust store for the workers' lease signatures when this clone has no .genjob/ "
    "(git config genjob.allowedSigners).",
)
@json_option
def recover(remote: str | None, trust_file: str | None, as_json: bool) -> None:
    """Fence expired claims: requeue lapsed claims, hold lapsed sends as unknown.

    A lease that no worker trusted for receipts signed is fenced at once, running or not."""
    from git_genjob.planner.ledger import recover as do_recover
    from git_genjob.storage.publish import publisher

    store = open_store()
    trust_file = trust_file or git_config(store, "genjob.allowedSigners")
    report = do_recover(publisher(store, remote), trust_file=trust_file)

    emit(report.to_json(), as_json, lambda: echo_lines(report.lines()))


@main.command(context_settings=CONTEXT)
@click.argument("key", callback=key_arg)
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
    from git_genjob.planner.ledger import retry as do_retry
    from git_genjob.planner.trust import planner_key
    from git_genjob.storage.publish import publisher

    store = open_store()
    sign = planner_key(store)
    record = do_retry(publisher(store, remote), key, refresh, sign=sign)
    if sign is None:
        click.echo(
            "warning: an unsigned retry: no worker sends a job again on it once an attempt reached the "
            "generator; create your planner key (git genjob init) and retry",
            err=True,
        )

    def human() -> None:
        how = (
            "a model will be asked afresh"
            if refresh
            else "a model answer it recorded is replayed; --refresh asks afresh"
        )
        click.echo(f"queued {key} again (epoch {record.epoch}; {how})")

    emit({"key": key, "state": record.state, "epoch": record.epoch, "refresh": refresh}, as_json, human)


@main.command(context_settings=CONTEXT)
@click.argument("key", callback=key_arg)
@click.option("--why", required=True, help="Why the job ends (kept in the archive).")
@click.option("--remote", help="Publish through this remote.")
@json_option
def drop(key: str, why: str, remote: str | None, as_json: bool) -> None:
    """The owner ends job KEY: it moves to refs/genjob/archive."""
    from git_genjob.planner.ledger import drop as do_drop
    from git_genjob.planner.trust import planner_key
    from git_genjob.storage.publish import publisher

    store = open_store()
    sig = store.signature()
    record = do_drop(publisher(store, remote), key, why, f"{sig.name} <{sig.email}>", planner_key(store))
    emit({"key": key, "state": record.state}, as_json, lambda: click.echo(f"dropped {key} ({record.state})"))
