"""verify, apply, resubmit, log and audit: landing outputs and reading provenance (SPEC §6, §10, §11)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from git_genjob.landing.audit import CommitAudit

from git_genjob.cli.common import (
    CONTEXT,
    commit_not_key,
    echo_lines,
    emit,
    json_option,
    key_arg,
    main,
    open_store,
    paint,
    progress_printer,
)

F = TypeVar("F", bound=Callable[..., Any])


@main.command("verify", context_settings=CONTEXT)
@click.argument("key")
@click.option("--branch", help="Check freshness against this branch (default: HEAD).")
@json_option
def verify_cmd(key: str, branch: str | None, as_json: bool) -> None:
    """Every check of the receipt of KEY; exit 0 only if applyable.

    KEY may also be a commit (any revision: HEAD, a sha, main~2): the checks `audit` makes of
    that one commit (its receipt, its diff, its summary note against the verified rendering);
    exit 0 only if all hold, 1 when one fails, 3 when this clone cannot check it (notes not
    fetched, a shallow boundary)."""
    from git_genjob.landing.verify import next_step, verify

    store = open_store()
    commit = _commit_named(store, key)
    if commit is not None and branch is None:
        _verify_commit(store, commit, as_json)
        return
    if commit is None:
        from git_genjob.storage.records import resolve_key

        key = resolve_key(store, key)
    verdict = verify(store, key, branch, progress=progress_printer(False))
    if branch is None and verdict.ok:  # what `verify KEY` prints from here on without libgit2
        from git_genjob.landing.fast import remember_verify

        remember_verify(store, key, verdict)

    def human() -> None:
        echo_lines(verdict.lines(paint))
        hint = next_step(verdict) if not verdict.ok else ""
        if hint and not hint.startswith("see: "):
            click.echo(f"hint: {hint}", err=True)

    emit(verdict.to_json(), as_json, human)
    if verdict.exit_code:
        raise SystemExit(verdict.exit_code)


def _commit_named(store: Any, text: str) -> str | None:
    """The commit `text` names when it names no job (verify COMMIT), else None; text that is a
    revision and also a job key's prefix is refused, since a submitter chooses keys."""
    commit = commit_not_key(store, text)
    if commit is None:
        return None
    from git_genjob.storage.records import MIN_PREFIX

    if len(text) >= MIN_PREFIX and any(k.startswith(text) for k in store.live_keys()):
        from git_genjob.documents.errors import BadInput

        raise BadInput(  # a job's key is the submitter's choice: it never shadows a revision
            f"{text!r} names commit {commit[:12]} and is the prefix of a job's key",
            f"give the full commit ({commit}) or the job's full key",
        )
    return commit


def _verify_commit(store: Any, commit: str, as_json: bool) -> None:
    from git_genjob.documents.errors import BadInput
    from git_genjob.landing.auditrange import audit
    from git_genjob.landing.verdict import audit_exit, audit_lines
    from git_genjob.landing.walk import Walk

    results = audit(store, Walk(revs=(commit,), max_count=1))
    if not results:
        raise BadInput(
            f"commit {commit[:12]} has no job behind it (no Genjob trailers, no genjob note, no attribution)",
            "git genjob log lists the genjob commits; git genjob verify KEY checks a job's receipt",
        )
    doc = {"commit": commit, **results[0].to_json(), "exit": audit_exit(results)}
    emit(doc, as_json, lambda: echo_lines(audit_lines(results, paint=paint)[:-1]))
    if doc["exit"]:
        raise SystemExit(doc["exit"])


@main.command("apply", context_settings=CONTEXT)
@click.argument("key", required=False, callback=key_arg)
@click.option("--branch", help="Commit onto this branch (default: the checked-out one).")
@click.option(
    "--all",
    "all_",
    is_flag=True,
    help="Apply every job whose receipt verifies, in submit order, each merged onto the branch as the ones "
    "before it left it; stop at the first refusal (a conflict) with a summary of what landed.",
)
@json_option
def apply_cmd(key: str | None, branch: str | None, all_: bool, as_json: bool) -> None:
    """Verify, run the pre-apply hook, and commit the outputs of KEY.

    When the branch moved since the job was submitted, the outputs are merged onto it (git's
    3-way merge, the job's inputs as the base); a conflict refuses with the paths and hunks.
    """
    from git_genjob.documents.errors import BadInput

    if all_ == (key is not None):
        raise BadInput("give KEY or --all, not both or neither", "git genjob apply KEY, or git genjob apply --all")
    if all_:
        _apply_all(branch, as_json)
        return
    from git_genjob.landing.apply import apply

    assert key is not None
    result = apply(open_store(), key, branch)

    def human() -> None:
        if result.already:
            click.echo(f"already applied: {key} as {result.commit[:12]} on {result.branch}")
        else:
            onto = f" (merged onto {result.merged_onto[:12]})" if result.merged_onto else ""
            click.echo(f"applied {key} as {result.commit[:12]} on {result.branch}{onto}")
        for path in result.kept:
            click.echo(f"warning: kept your local changes at {path} (the commit holds the job's output)", err=True)

    emit(result.to_json(), as_json, human)


def _apply_all(branch: str | None, as_json: bool) -> None:
    from git_genjob.landing.batch import apply_all

    report = apply_all(open_store(), branch)

    def human() -> None:
        echo_lines(report.lines())
        if report.stopped is not None and report.stopped.hint:
            click.echo(f"hint: {report.stopped.hint}", err=True)

    emit(report.to_json(), as_json, human)
    if report.exit_code:
        raise SystemExit(report.exit_code)


@main.command("resubmit", context_settings=CONTEXT)
@click.argument("key", callback=key_arg)
@click.option(
    "--remote",
    help="Publish the new job and the old one's superseded end through this remote: one atomic push, or neither.",
)
@json_option
def resubmit_cmd(key: str, remote: str | None, as_json: bool) -> None:
    """A new job with the instruction of KEY on the current content; KEY ends superseded.

    For a job whose outputs do not merge onto the branch that moved: the new job is queued for a
    worker, and `show` links the two.
    """
    from git_genjob.landing.resubmit import resubmit

    result = resubmit(open_store(), key, remote)

    def human() -> None:
        verb = "already resubmitted" if result.already else "resubmitted"
        click.echo(f"{verb} {key} as {result.new} ({result.state}); {key} is superseded")

    emit(result.to_json(), as_json, human)


def format_option(f: F) -> F:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["text", "md"]),
        default="text",
        show_default=True,
        help="md: a Markdown table for a CI job summary or a merge-request comment, failures first "
        "with what to run next, every cell escaped.",
    )(f)


def _markdown(fmt: str, as_json: bool) -> bool:
    from git_genjob.documents.errors import BadInput

    if fmt == "md" and as_json:
        raise BadInput("--format md and --json are two outputs", "give one of them")
    return fmt == "md"


class GitLogCommand(click.Command):
    """A command that reads git log's arguments as git does: `-N` is `--max-count=N`, and what
    follows `--` is paths, never revisions."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            at = args.index("--")
            args, ctx.meta["genjob.paths"] = args[:at], tuple(args[at + 1 :])
        args = [f"--max-count={a[1:]}" if len(a) > 1 and a[0] == "-" and a[1:].isdigit() else a for a in args]
        return super().parse_args(ctx, args)


def walk_options(f: F) -> F:
    """git log's limiting options (SPEC §12.2), passed through to git's own revision walk."""
    for option in reversed(
        [
            click.argument("revs", metavar="[REVISION-RANGE]... [-- PATH...]", nargs=-1),
            click.option("-n", "--max-count", "max_count", type=click.IntRange(min=0), help="As git log: -N too."),
            click.option("--since", "--after", "since", metavar="DATE", help="As git log."),
            click.option("--until", "--before", "until", metavar="DATE", help="As git log."),
            click.option("--author", "authors", multiple=True, metavar="PATTERN", help="As git log."),
            click.option("--grep", "greps", multiple=True, metavar="PATTERN", help="As git log."),
            click.option("--reverse", is_flag=True, help="Oldest first, after the limits (as git log)."),
            click.option("--first-parent", is_flag=True, help="As git log."),
        ]
    ):
        f = option(f)
    return f


def _walk(revs: tuple[str, ...], opts: dict[str, Any]) -> Any:
    from git_genjob.documents.errors import BadInput
    from git_genjob.landing.walk import Walk

    bad = [r for r in revs if r.startswith("-")]
    if bad:
        raise BadInput(f"unknown option {bad[0]!r}", "see git genjob log -h; paths go after --")
    paths = click.get_current_context().meta.get("genjob.paths", ())
    return Walk(revs=revs, paths=paths, **opts)


@main.command("log", cls=GitLogCommand, context_settings=CONTEXT)
@walk_options
@click.option("--oneline", is_flag=True, help="One line per commit: short sha, verdict, job key, subject.")
@format_option
@json_option
def log_cmd(revs: tuple[str, ...], oneline: bool, fmt: str, as_json: bool, **opts: Any) -> None:
    """Provenance of genjob commits in RANGE, and whether each receipt still verifies.

    RANGE and the options mean what they mean to git log (git's revision walk applies them):
    `git genjob log -3 --author=ada main -- src/`. Each summary shown is rendered from the
    receipt that verified; a note that is not that rendering is named as forged and quoted
    escaped. Exit 1 when any commit fails, 3 when one cannot be checked in this clone or the
    notes were never fetched (git genjob fetch)."""
    from git_genjob.landing.auditrange import audit
    from git_genjob.landing.verdict import audit_exit

    markdown = _markdown(fmt, as_json)
    store = open_store()
    walk = _walk(revs, opts)
    results = audit(store, walk)
    code = audit_exit(results)
    plain = walk == type(walk)()
    if markdown:
        from git_genjob.landing.report import markdown_report

        emit(None, False, lambda: click.echo(markdown_report(f"git genjob log {walk.label}", results)))
    else:
        _emit_log(store, results, oneline, plain, as_json)
    if code:
        raise SystemExit(code)


def _emit_log(store: Any, results: list[CommitAudit], oneline: bool, plain: bool, as_json: bool) -> None:
    """`log`'s commits as lines or JSON; plain `log` keeps both renderings for the fast path."""
    rows = [a.to_json() for a in results]
    text = "".join(f"{line}\n" for line in (oneline_lines(rows) if oneline else log_lines(rows)))
    if plain and not oneline:  # what plain `log` prints from here on without libgit2
        from git_genjob.documents.display import terminal_json
        from git_genjob.landing.fast import remember_log

        doc = terminal_json(json.dumps(rows, indent=2, sort_keys=True, ensure_ascii=False)) + "\n"
        remember_log(store, results, text, doc)
    emit(rows, as_json, lambda: click.echo(text, nl=False))


def oneline_lines(rows: list[dict[str, Any]]) -> list[str]:
    """`log --oneline`: short sha, verdict, job key, subject; one line per commit."""
    from git_genjob.documents.display import printable

    if not rows:
        return ["no genjob commits"]
    out = []
    for r in rows:
        verdict = "verified" if r["ok"] else "FAILS" if r["problems"] else "unchecked"
        keys = ",".join(r["jobs"]) or "-"
        out.append(f"{r['commit'][:12]} {verdict:<9} {keys} {printable(r['subject'])}")
    return out


def log_lines(rows: list[dict[str, Any]]) -> list[str]:
    """`log`'s human lines, one commit each with its facts, note and where its receipt is."""
    from git_genjob.documents.display import printable

    if not rows:
        return ["no genjob commits"]
    out = []
    for r in rows:
        out.append(printable(f"{r['commit'][:12]} {r['key']} {_signer_text(r)} {_verdict_text(r)}"))
        out += _detail_lines(r)
    return out


def _verdict_text(r: dict[str, Any]) -> str:
    """The commit's provenance, then what was not checked or every check that failed."""
    if r["ok"] or not r["problems"]:
        return "; ".join([r["provenance"], *r["unchecked"]])
    return f"{r['provenance']}, FAILS: " + "; ".join(r["problems"])


def _signer_text(r: dict[str, Any]) -> str:
    if r.get("signer_name"):  # the trust store's name for the key whose signature verified
        who = f"signer={r['signer_name']} ({r['signer']})"
        if r["worker"] != r["signer_name"]:
            who += f" worker id={r['worker']} (self-asserted)"
        return who
    return f"signer={r['signer']} (not verified) worker id={r['worker']} (self-asserted)"


def _detail_lines(r: dict[str, Any]) -> list[str]:
    """The indented lines under a commit: facts, the verified note, a forged one, the receipt."""
    out = [f"             {fact}" for fact in r["facts"]]
    out += [f"             note: {line.strip()}" for line in r["note"]]  # SPEC §11: the verified rendering
    if r.get("forged_note") is not None:  # never shown as a summary: quoted, escaped, named
        out.append(f"             NOT VERIFIED, forged note reads: {r['forged_note']}")
    if r["envelope_ref"]:  # then where the envelope is
        out.append(f"             receipt: {r['receipt']} in {r['envelope_ref']}")
    return out


@main.command("audit", cls=GitLogCommand, context_settings=CONTEXT)
@walk_options
@click.option("-q", "--quiet", is_flag=True, help="Print only failing commits and the total.")
@click.option(
    "--trust-from",
    metavar="REV",
    help="Check signers against .genjob/ at REV instead of each commit's own (repairs history "
    "applied before the trust store was committed).",
)
@format_option
@json_option
def audit_cmd(revs: tuple[str, ...], quiet: bool, trust_from: str | None, fmt: str, as_json: bool, **opts: Any) -> None:
    """Re-verify every commit with Genjob-* trailers in RANGE (for CI); exit 1 on any failure.

    Exit 3 when none fails but one cannot be checked in this clone (a shallow clone: its parent
    was not fetched; see docs/ci.md) or when the notes were never fetched (a fresh git clone:
    git genjob fetch), 2 when RANGE names no commit. RANGE and the limiting options mean what
    they mean to git log: `git genjob audit -20 origin/main..HEAD -- src/`."""
    from git_genjob.landing.auditrange import audit
    from git_genjob.landing.verdict import audit_counts, audit_exit, audit_lines

    markdown = _markdown(fmt, as_json)
    walk = _walk(revs, opts)
    results = audit(open_store(), walk, progress_printer(quiet), trust_from)
    failing, unchecked = audit_counts(results)
    if markdown:
        from git_genjob.landing.report import markdown_report

        text = markdown_report(f"git genjob audit {walk.label}", results, quiet)
        emit(None, False, lambda: click.echo(text))
    else:
        emit(
            {"commits": [a.to_json() for a in results], "failing": failing, "unchecked": unchecked},
            as_json,
            lambda: echo_lines(audit_lines(results, quiet, paint)),
        )
    code = audit_exit(results)
    if code:
        raise SystemExit(code)
