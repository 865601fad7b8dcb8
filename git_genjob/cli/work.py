"""work and receipt: the worker side (SPEC §4, §5)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from git_genjob.storage.store import Store
    from git_genjob.worker.run import WorkReport

from git_genjob.cli.common import (
    CONTEXT,
    echo_lines,
    emit,
    git_config,
    json_option,
    key_arg,
    main,
    open_store,
    paint,
    parse_duration,
    progress_printer,
    remote_option,
    signing_key_of,
    signing_key_option,
    worker_id_of,
    worker_id_option,
)
from git_genjob.documents.errors import EXIT_CONFLICT
from git_genjob.documents.states import LEASE_S, TIMEOUT_S


@main.command(context_settings=CONTEXT)
@click.option(
    "--generator", "spec", help="exec:COMMAND, http:URL or openai:BASE_URL#MODEL (git config genjob.generator)."
)
@signing_key_option
@click.option("--once", is_flag=True, help="Work on at most one job.")
@click.option("--max-jobs", type=click.IntRange(min=1), help="Work on at most N jobs.")
@click.option("--wait", is_flag=True, help="Keep polling for new jobs instead of returning.")
@remote_option
@click.option(
    "--lease", "lease", default=f"{LEASE_S / 60:g}m", show_default=True, help="Lease length; renewed every third."
)
@click.option("--timeout", "timeout", default=f"{TIMEOUT_S / 60:g}m", show_default=True, help="Generator time limit.")
@worker_id_option
@click.option("--pass-env", multiple=True, help="Pass this environment variable to an exec generator.")
@click.option(
    "--allow-secrets", is_flag=True, help="Sign outputs that look like credentials (this worker's decision alone)."
)
@click.option("--strict", is_flag=True, help="Exit 1 if a stored receipt is rejected or aborted (default: exit 0).")
@click.option(
    "--allowed-signers",
    "trust_file",
    type=click.Path(dir_okay=False),
    help="Trust store for the planners' signatures when this clone has no .genjob/ (git config genjob.allowedSigners).",
)
@click.option(
    "--sandbox-ro", "sandbox_ro", multiple=True, metavar="PATH", help="Show an exec generator PATH, read-only."
)
@click.option(
    "--sandbox-rw", "sandbox_rw", multiple=True, metavar="PATH", help="Show an exec generator PATH, read-write."
)
@click.option("--allow-net", is_flag=True, help="Give an exec generator the worker's network (recorded in receipts).")
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="HOST[:PORT]",
    help="Let an exec generator reach this host (repeatable), through the worker's proxy (HTTPS_PROXY).",
)
@click.option(
    "--sandbox-limit",
    "sandbox_limits",
    multiple=True,
    metavar="NAME=VALUE",
    help="Raise or lower a limit: procs=512, memory=4G, file_size=1G, cpu=3600 (seconds).",
)
@click.option(
    "--no-sandbox", is_flag=True, help="Run an exec generator unconfined (each receipt records it; see docs/trust.md)."
)
@click.option(
    "--shard",
    metavar="I/N",
    help="Claim the jobs of shard I of N first (0 <= I < N; env GENJOB_SHARD), then help the others.",
)
@click.option(
    "--gateway",
    "gateways",
    multiple=True,
    metavar="NAME=URL",
    help="Send an exec generator's model calls through the worker's gateway to this upstream (repeatable).",
)
@click.option("--max-calls", type=click.IntRange(0), help="At most N model calls per job through the gateway.")
@click.option("--max-tokens", type=click.IntRange(0), help="At most N tokens per job through the gateway.")
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
    trust_file: str | None,
    sandbox_ro: tuple[str, ...],
    sandbox_rw: tuple[str, ...],
    allow_net: bool,
    allow_hosts: tuple[str, ...],
    sandbox_limits: tuple[str, ...],
    no_sandbox: bool,
    shard: str | None,
    gateways: tuple[str, ...],
    max_calls: int | None,
    max_tokens: int | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """The worker loop: claim, record sending, generate, sign, store.

    Only jobs signed by a planner that .genjob/allowed_signers trusts for genjob-job are
    claimed (the work tree's, HEAD's in a clone without one, or --allowed-signers FILE).

    Exit 0 when every receipt was stored (whatever its status) or nothing was queued; a
    rejected or aborted receipt is named on stderr, and is exit 1 with --strict. Exit 3: a
    generator was unavailable; exit 4: this worker was fenced. An exec generator runs in a
    process sandbox (bubblewrap, else Landlock; docs/generators.md): network off, nothing of
    the repository, the key or HOME in view; --sandbox-ro/--sandbox-rw add paths.
    """
    from git_genjob.documents.config import read_config
    from git_genjob.documents.errors import BadInput
    from git_genjob.worker.generators import parse_spec
    from git_genjob.worker.options import check_lease, gateway_upstreams, guarded, sandbox_options
    from git_genjob.worker.picker import parse_shard, shard_from_env
    from git_genjob.worker.run import WorkerOptions
    from git_genjob.worker.run import work as do_work

    shards = parse_shard(shard) if shard is not None else shard_from_env()  # refused before anything is read
    store = open_store()
    spec = _generator_spec(store, spec, key_file)
    if once and max_jobs:
        raise BadInput("give --once or --max-jobs, not both")
    timeout_s = parse_duration(timeout)
    lease_s = parse_duration(lease)
    check_lease(lease_s, lease)
    sandbox = sandbox_options(read_config(store).sandbox, sandbox_ro, sandbox_rw, allow_net, allow_hosts,
                              sandbox_limits, no_sandbox)  # fmt: skip
    sandbox = guarded(sandbox, store, key_file or git_config(store, "genjob.signingKey"), spec)
    upstreams, max_calls, max_tokens = gateway_upstreams(read_config(store), gateways, pass_env, max_calls, max_tokens)
    opts = WorkerOptions(
        generator=parse_spec(spec, timeout_s, sandbox),
        signing_key=signing_key_of(store, key_file, "work"),
        worker_id=worker_id_of(store, worker_id),
        lease_s=lease_s,
        max_jobs=1 if once else max_jobs,
        wait=wait,
        timeout_s=timeout_s,
        pass_env=pass_env,
        remote=remote,
        allow_secrets=allow_secrets,
        strict=strict,
        trust_file=trust_file or git_config(store, "genjob.allowedSigners"),
        shard=shards,
        gateways=upstreams,
        max_calls=max_calls,
        max_tokens=max_tokens,
    )
    report = _interruptible(lambda: do_work(store, opts, _progress(quiet, as_json)))
    _print_report(report, as_json)


def _generator_spec(store: Store, spec: str | None, key_file: str | None) -> str:
    """The generator to run (--generator, else git config genjob.generator); without it or a
    signing key, work is refused before anything runs."""
    from git_genjob.documents.errors import BadInput

    spec = spec or git_config(store, "genjob.generator")
    if not spec or not (key_file or git_config(store, "genjob.signingKey")):
        raise BadInput(
            "work needs --generator and --signing-key", "or set git config genjob.generator / genjob.signingKey"
        )
    return spec


def _print_report(report: WorkReport, as_json: bool) -> None:
    """The report, the rejected or aborted receipts on stderr, and the report's exit code."""
    emit(report.to_json(), as_json, lambda: echo_lines(report.lines(paint)))
    for line in report.warnings():
        click.echo(line, err=True)
    if report.exit_code:
        raise SystemExit(report.exit_code)


def _progress(quiet: bool, as_json: bool) -> Any:
    """Progress as a worker goes: on a terminal, lines on stderr as ever; off one (a CI log), one
    line per job event on stdout (claimed, sending, receipt, pushed, …) with the job key and the
    seconds since the worker started, `[  1.2s] claimed KEY attempt 1`, flushed at once. With
    --json stdout is the report alone, so no event lines go there."""
    import sys
    import time

    from git_genjob.cli.common import quiet_mode
    from git_genjob.documents.display import printable

    if quiet or quiet_mode() or sys.stderr.isatty() or as_json:
        return progress_printer(quiet)
    started = time.monotonic()
    return lambda msg: click.echo(f"[{time.monotonic() - started:5.1f}s] {printable(msg)}")


INTERRUPTED = (
    "interrupted: no generator of this worker was running (an attempt it runs is ended when it is stopped); "
    "a claim it had only just made, if any, is requeued by git genjob recover once its lease lapses"
)


def _interruptible(run: Any) -> Any:
    """Run the worker loop with SIGTERM and SIGHUP handled as SIGINT is: a CI runner cancelled by
    its forge (SIGINT or SIGTERM, then SIGKILL), or a closed terminal, stops its generator's
    process group, ends the attempt (worker.run.run_claimed) and exits 130, as a Ctrl-C does."""
    import signal
    import threading

    def cancel(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    installed = threading.current_thread() is threading.main_thread()
    # a signal the parent ignores (nohup, a background job's SIGINT) stays ignored
    stops = [s for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if signal.getsignal(s) != signal.SIG_IGN]
    previous = {s: signal.signal(s, cancel) for s in stops} if installed else {}
    try:
        return run()
    except KeyboardInterrupt as stop:
        from git_genjob.documents.display import printable

        said = stop.args[1] if len(stop.args) > 1 else None  # what became of the attempt it ended
        click.echo(f"interrupted: {printable(said)}" if said else INTERRUPTED, err=True)
        raise SystemExit(130) from None
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@main.command("receipt", context_settings=CONTEXT)
@click.argument("key", callback=key_arg)
@click.option("--outputs", "outputs_dir", type=click.Path(file_okay=False), help="Directory holding new file contents.")
@click.option("--delete", "deletes", multiple=True, help="Delete this allowed path (repeatable).")
@signing_key_option
@click.option(
    "--status",
    "status_",
    type=click.Choice(["ok", "rejected", "aborted"]),
    default="ok",
    show_default=True,
    help="The receipt's status (a generator that failed out of band: rejected or aborted).",
)
@click.option("--reason", default="", help="Why, for a status other than ok.")
@worker_id_option
@remote_option
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
    from git_genjob.documents.errors import BadInput
    from git_genjob.worker.run import receipt_out_of_band

    store = open_store()
    signing_key = signing_key_of(store, key_file, "receipt")
    if outputs_dir is None and not deletes and status_ == "ok":
        raise BadInput("no outputs given", "pass --outputs DIR and/or --delete PATH")
    outcome = receipt_out_of_band(
        store,
        key,
        outputs_dir,
        list(deletes),
        signing_key,
        worker_id_of(store, worker_id),
        status_,
        reason,
        remote,
    )
    emit(outcome.to_json(), as_json, lambda: click.echo(f"receipt {key} {outcome.result} {outcome.reason}".rstrip()))
    if outcome.result == "fenced":
        raise SystemExit(EXIT_CONFLICT)
