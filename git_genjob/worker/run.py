"""The worker: claim -> record sending -> generate -> sign -> store (SPEC §4, §5)."""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from git_genjob.documents.attempts import as_text
from git_genjob.documents.canonical import digest, utc_now
from git_genjob.documents.config import Config, read_config
from git_genjob.documents.display import printable
from git_genjob.documents.errors import (
    EXIT_CONFLICT,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNAVAILABLE,
    BadInput,
    Conflict,
    GeneratorUnavailable,
    GenjobError,
    Painter,
    Refused,
    StaleLock,
    plain,
)
from git_genjob.documents.keys import SigningKey
from git_genjob.documents.paths import check_path
from git_genjob.documents.receipt import build_statement, sign_statement
from git_genjob.documents.secretscan import redact
from git_genjob.documents.states import LEASE_S, TIMEOUT_S, AttemptState, JobState
from git_genjob.planner.ledger import Lease, claim, end_attempt, record_sending, renew, store_receipt
from git_genjob.planner.live import Head, archived_leftover
from git_genjob.planner.trust import missing_trust_error
from git_genjob.replay.cache import CacheClient
from git_genjob.storage.faults import crash_point
from git_genjob.storage.layout import job_ref
from git_genjob.storage.publish import Publisher, publisher
from git_genjob.storage.records import JobRecord, bundle_inputs, find_job, load_live
from git_genjob.storage.store import Store
from git_genjob.worker.gate import Gate
from git_genjob.worker.gateway.calls import Session
from git_genjob.worker.generators import sandbox_record
from git_genjob.worker.generators.base import GenContext, Generator, GenResult
from git_genjob.worker.judge import Verdict, judge
from git_genjob.worker.picker import PICK_WINDOW as PICK_WINDOW
from git_genjob.worker.picker import Picker as Picker
from git_genjob.worker.scratch import clean_stale_scratch, scratch_dir
from git_genjob.worker.stop import end_stopped

Progress = Callable[[str], None]


@dataclass
class JobOutcome:
    key: str
    result: str  # ok | rejected | aborted | failed_before_send | unknown | fenced | lost | refused
    reason: str = ""
    attempt: int | None = None
    replayed: list[str] = field(default_factory=list)  # model answers served from the job's recording

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class WorkReport:
    outcomes: list[JobOutcome] = field(default_factory=list)

    strict: bool = False  # `work --strict`: a receipt that is not ok is exit 1

    def lines(self, paint: Painter = plain) -> list[str]:
        """The human report: one line per job, and how to ask afresh after a replay."""
        if not self.outcomes:
            return ["nothing to do: no queued job"]
        out = []
        for o in self.outcomes:
            shown = paint(o.result, "green" if o.result == "ok" else "red")
            out.append(f"{o.key:<34} {shown}" + (f": {printable(o.reason)}" if o.reason else ""))
            if o.replayed:
                out.append(
                    f"{'':<34} replay of the answer recorded for this job ({o.replayed[0][:12]}); "
                    f"git genjob retry {o.key} --refresh asks afresh"
                )
        return out

    def warnings(self) -> list[str]:
        """One line per stored receipt that is not ok (for stderr: `work` itself succeeded)."""
        return [
            f"warning: job {o.key}: its receipt is {o.result}, nothing to apply; "
            f"see git genjob show {o.key}, then git genjob retry {o.key} or git genjob drop {o.key} --why TEXT"
            for o in self.not_ok
        ]

    @property
    def exit_code(self) -> int:
        results = {o.result for o in self.outcomes}
        if "fenced" in results:
            return EXIT_CONFLICT
        if results & {AttemptState.FAILED_BEFORE_SEND, AttemptState.UNKNOWN}:
            return EXIT_UNAVAILABLE
        if self.strict and self.not_ok or "refused" in results:
            return EXIT_REFUSED
        return EXIT_OK

    @property
    def not_ok(self) -> list[JobOutcome]:
        """Receipts stored with a status other than ok (SPEC §4: a result, exit 0 unless strict)."""
        return [o for o in self.outcomes if o.result in ("rejected", "aborted")]

    def to_json(self) -> dict[str, Any]:
        return {"jobs": [o.to_json() for o in self.outcomes], "exit_code": self.exit_code}


@dataclass
class WorkerOptions:
    generator: Generator
    signing_key: SigningKey
    worker_id: str
    lease_s: float = LEASE_S
    max_jobs: int | None = None
    wait: bool = False
    poll_s: float = 2.0
    timeout_s: float = TIMEOUT_S
    pass_env: tuple[str, ...] = ()
    remote: str | None = None
    allow_secrets: bool = False
    strict: bool = False
    trust_file: str | None = None  # allowed_signers for planners, when the clone has no .genjob/
    gateways: tuple[Any, ...] = ()  # worker.gateway.dialects.Upstream (work --gateway)
    max_calls: int | None = None
    max_tokens: int | None = None
    refresh_s: float = 1.0  # through a remote: how old a view a claim may be picked from (s)
    shard: tuple[int, int] | None = None  # `work --shard I/N`: this runner's shard first (worker.picker)


def work(store: Store, opts: WorkerOptions, progress: Progress = lambda _: None) -> WorkReport:
    """Claim queued jobs oldest first until none is claimable (or max_jobs / forever with wait).

    Through a remote a worker fetches before a claim only when its last fetch is older than
    `opts.refresh_s`, it was fenced, or its view holds no claimable job (it fetches before it
    says the queue is empty), and before every claim for CONTENDED × refresh_s after it lost a
    race (other workers claim from this remote: an old view would lose again). Skipping a fetch
    weakens nothing: the claim goes out in a push leased on the job's tip this worker fetched
    and vetted, so a job another worker took, requeued or archived since is a rejected push,
    after which the worker fetches; every check before a claim (Gate) runs on the job it claims
    either way. A job's receipt goes out in the next claim's push (run_claimed with ride), or
    on its own when no claim follows: before the queue is called empty, at the end, on an error
    and on SIGINT/SIGTERM."""
    clean_stale_scratch()
    pub = publisher(store, opts.remote)
    report = WorkReport(strict=opts.strict)
    picker = Picker(store, shard=opts.shard, spread=pub.remote is not None)
    pace = _FetchPace(opts.refresh_s, remote=pub.remote is not None)
    refused: list[JobOutcome] = []  # the claims the remote refused in a row, lately
    done = 0
    try:
        while opts.max_jobs is None or done < opts.max_jobs:
            fresh = pace.due()
            if fresh:  # a receipt held for the next claim's push stays held: its lease is its own
                pub.refresh()
                pace.fetched()
            picker.refreshed(fresh)
            lease = _claim_next(pub, opts, report, progress, picker)
            if lease is None:
                if _pick_again(pub, opts, picker, pace, fresh):
                    continue
                break
            outcome = run_claimed(pub, lease, opts, progress, ride=True)
            report.outcomes.append(outcome)
            done += _count_outcome(outcome, pub, picker, pace, refused)
        pub.flush()  # the last receipt, before the report
    except BaseException as exc:  # an error, SIGINT or SIGTERM: a receipt held for the next push still goes out
        _flush_before_raise(pub, exc)
        raise
    return report


@dataclass
class _FetchPace:
    """When a worker fetches before a claim (see `work`): always without a remote; through one,
    when its last fetch is older than refresh_s, or while it is contended (it lost a race)."""

    refresh_s: float
    remote: bool
    fetched_at: float = float("-inf")  # when this worker last fetched from where events are published
    contended_until: float = float("-inf")  # until when this worker fetches before each claim (it lost a race)

    def due(self) -> bool:
        now = time.monotonic()
        return not self.remote or now - self.fetched_at > self.refresh_s or now < self.contended_until

    def fetched(self) -> None:
        self.fetched_at = time.monotonic()

    def stale(self) -> None:
        """Fetch before the next claim."""
        self.fetched_at = float("-inf")

    def contended(self) -> None:
        self.contended_until = time.monotonic() + CONTENDED * self.refresh_s


def _pick_again(pub: Publisher, opts: WorkerOptions, picker: Picker, pace: _FetchPace, fresh: bool) -> bool:
    """No job was claimed: True to pick again (after a fetch, or a pause), False when the queue is done."""
    pub.flush()  # no next claim to carry a held receipt: it goes out on its own
    if not fresh:  # the queue looks empty from a view up to refresh_s old: fetch, then decide
        pace.stale()
        return True
    if opts.wait or picker.held:  # held: only jobs other shards' owners are about to take
        time.sleep(opts.poll_s if opts.wait else min(opts.poll_s, opts.refresh_s))
        pace.stale()
        return True
    return False


def _count_outcome(
    outcome: JobOutcome, pub: Publisher, picker: Picker, pace: _FetchPace, refused: list[JobOutcome]
) -> int:
    """1 for a job this run counts toward max_jobs; 0 for a claim refused or lost at the remote,
    which steers the next pick instead (MAX_REFUSALS refusals in a row stop the worker)."""
    if outcome.result in ("lost", "fenced"):
        pace.stale()  # the remote moved under this worker: fetch before the next claim
    if outcome.result == "refused":  # the remote's hook, a permission, a quota: no race decided it
        refused.append(outcome)
        picker.skip.add(outcome.key)
        if len(refused) >= MAX_REFUSALS:
            raise _refusals(pub, refused)
        return 0
    refused.clear()
    if outcome.result == "lost":  # a claim held for its `sending` lost at the remote
        picker.lost_on(outcome.key)
        pace.contended()
        return 0
    return 1


def _flush_before_raise(pub: Publisher, exc: BaseException) -> None:
    """Publish a receipt still held for the next push; a GenjobError names each one that could not go."""
    with contextlib.suppress(GenjobError):
        pub.flush()
    if isinstance(exc, GenjobError):  # never lost unsaid: each receipt still held is named
        exc.details += [
            f"job {name.rsplit('/', 1)[-1]}: its receipt was not published; the job stays sending on "
            f"{pub.remote} until git genjob recover holds it unknown (then retry or drop it)"
            for name in pub.unpublished()
        ]


MAX_REFUSALS = 3  # claims the remote refuses in a row before a worker stops (exit 1)


def _refusals(pub: Publisher, refused: list[JobOutcome]) -> Refused:
    return Refused(
        f"{pub.remote} refused {len(refused)} claims in a row; this worker stops",
        "the remote's hooks or permissions decide what it takes (ask its admin, or check the token's push rights); "
        "the refused jobs are still queued there and here, claimed by no one",
        details=[f"job {o.key}: {o.reason}" for o in refused],
    )


CONTENDED = 10  # after a lost race a worker fetches before each claim for this many refresh_s


def _claim_next(
    pub: Publisher, opts: WorkerOptions, report: WorkReport, progress: Progress, picker: Picker | None = None
) -> Lease | None:
    """Claim the oldest claimable queued job (see Picker for the order under contention)."""
    skipped: dict[str, tuple[str, str]] = {}  # key -> (damaged | unsigned | untrusted, why)
    store = pub.store
    picker = picker or Picker(store, shard=opts.shard, spread=pub.remote is not None)
    picker.scanned = False
    gate = Gate(store, opts.trust_file)
    while True:  # at most one scan per pick: a queue of damaged jobs ends the pick, never loops
        if not picker.candidates and picker.scanned:
            break
        head = picker.next()  # the hint, or one fresh scan when it ran out or is old
        if head is None:
            break
        record = _claimable(pub, gate, head, skipped)
        if record is None:
            continue
        lease = _try_claim(pub, record, opts, report, progress, picker)
        if lease is None:
            continue
        try:
            progress(f"claimed {record.key} attempt {lease.n}")
            _report_skipped(report, skipped, progress)
        except KeyboardInterrupt as stop:  # stopped right after the claim: it is released now
            end_stopped(pub, lease, stop)
        return lease
    _report_skipped(report, skipped, progress)
    return None


def _claimable(pub: Publisher, gate: Gate, head: Head, skipped: dict[str, tuple[str, str]]) -> JobRecord | None:
    """The picked job's record when it is still queued, shared with the remote and passes the
    gate; None to pass it by (a damaged, unsigned or untrusted job is noted in `skipped`)."""
    store = pub.store
    if store.ref_target(job_ref(head.key)) != head.tip:
        return None  # an event since the hint was read: claimed elsewhere (the next scan sees a requeue)
    if archived_leftover(store, head.key):
        return None
    if gate.missing:  # a job is there, and not one could be judged: say why, not "untrusted" for each
        raise missing_trust_error()
    try:
        record = load_live(store, head.key)
        if record is None or record.state != JobState.QUEUED:
            return None
        if not pub.shares(job_ref(head.key), record.tip):
            return None  # local events the remote lacks: never claim from a view the remote does not share
        refusal = gate.refusal(record)  # checked before the claim: a job no trusted planner signed never starts
    except GenjobError as exc:
        skipped[head.key] = ("damaged", exc.message)
        return None
    if refusal is not None:
        skipped[head.key] = refusal
        return None
    return record


def _try_claim(
    pub: Publisher, record: JobRecord, opts: WorkerOptions, report: WorkReport, progress: Progress, picker: Picker
) -> Lease | None:
    """Claim a vetted job; None when another writer got there first (the lost race is reported)."""
    try:
        # through a remote the claim goes out with its `sending`, in one push (run_claimed)
        return claim(pub, record, opts.worker_id, opts.lease_s, opts.signing_key, defer=True)
    except StaleLock:
        raise  # no race to lose: a dead writer's lock blocks the job until recover clears it
    except Conflict as exc:  # its own words say which race: the ref moved, or a lock was held
        report.outcomes.append(JobOutcome(record.key, "lost", f"another writer got there first: {exc.message}"))
        progress(f"lost    {record.key} (claimed elsewhere)")
        picker.lost_on(record.key)
        return None


def _report_skipped(report: WorkReport, skipped: dict[str, tuple[str, str]], progress: Progress) -> None:
    """Name each damaged, unsigned or untrusted job once per run; it is skipped, never fatal for the queue."""
    seen = {o.key for o in report.outcomes if o.result in ("damaged", "unsigned", "untrusted", "unsigned requeue")}
    for key, (result, why) in sorted(skipped.items()):
        if key not in seen:
            report.outcomes.append(JobOutcome(key, result, why))
            progress(f"{result} {key}: {why} (skipped)")


class _Renewer(threading.Thread):
    """Renews the lease every third of its length; a failed renewal fences the attempt."""

    def __init__(
        self, pub: Publisher, lease: Lease, lock: threading.Lock, stop: threading.Event, deadline: float = float("inf")
    ):
        super().__init__(daemon=True)
        self.pub, self.lease, self.lock, self.stop = pub, lease, lock, stop
        self.deadline = deadline  # the generator's --timeout: no renewal after it
        self.fenced: str | None = None
        self.finished = threading.Event()

    def run(self) -> None:
        own = self.pub.twin(Store.open(self.pub.store.gitdir))
        while not self.finished.wait(max(0.0, min(self.lease.lease_s / 3, self.deadline - time.monotonic()))):
            if time.monotonic() >= self.deadline:
                return  # past --timeout the generator ends by its own deadline; the lease may lapse
            with self.lock:
                try:
                    renew(own, self.lease)
                    self.pub.adopt(own)
                except GenjobError as exc:
                    self.fenced = exc.message
                    self.stop.set()
                    return


def run_claimed(
    pub: Publisher, lease: Lease, opts: WorkerOptions, progress: Progress, ride: bool = False
) -> JobOutcome:
    """Record `sending`, generate, judge, sign and store the receipt. With `ride`, a remote
    publisher may hold the receipt for its next push (the next claim's): the caller flushes it,
    and the outcome returned is settled when the receipt is published (fenced if refused).
    Stopped (SIGINT, SIGTERM, SIGHUP: a KeyboardInterrupt), the worker ends the attempt itself
    before the interrupt goes on (SPEC §12.4), so nothing waits for the lease to lapse."""
    try:
        return _run_claimed(pub, lease, opts, progress, ride)
    except KeyboardInterrupt as stop:
        end_stopped(pub, lease, stop)


def _run_claimed(pub: Publisher, lease: Lease, opts: WorkerOptions, progress: Progress, ride: bool) -> JobOutcome:
    store, record = pub.store, lease.record
    key = record.key
    crash_point("after-claim")
    not_sent = _record_sending(pub, lease, progress)
    if not_sent is not None:
        return not_sent
    crash_point("after-sending")
    cfg = read_config(store)
    tmp = scratch_dir()
    try:
        scratch, ctx = _prepare(store, record, tmp, opts)
        result, fenced = _generate(pub, lease, opts, ctx, progress)
        crash_point("after-generate")
        _report_cache(ctx, key, progress)
        if fenced is not None:
            progress(f"fenced  {key}: {fenced}")
            return JobOutcome(key, "fenced", fenced, lease.n)
        if isinstance(result, GeneratorUnavailable):
            return _end_unavailable(pub, lease, result, ctx, opts, progress)
        outcome = _finish(pub, lease, record, result, scratch, ctx, cfg, opts, progress, ride)
        outcome.replayed = [fp for fp, source in getattr(ctx.cache, "sources", []) if source == "replay"]
        return outcome
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _record_sending(pub: Publisher, lease: Lease, progress: Progress) -> JobOutcome | None:
    """Record `sending`; the outcome when that lost a race, was fenced or refused (None: the attempt goes on)."""
    key = lease.record.key
    try:
        record_sending(pub, lease)
    except Conflict as exc:
        if pub.remote is not None:  # the claim went out with it: the remote took another's
            progress(f"lost    {key} (claimed elsewhere)")
            return JobOutcome(key, "lost", f"another writer got there first: {exc.message}")
        return JobOutcome(key, "fenced", exc.message, lease.n)
    except Refused as exc:
        if pub.remote is None:
            raise
        # the claim went out with it and the remote declined the push: nothing moved there or here
        progress(f"refused {key}: {exc.message}")
        return JobOutcome(key, "refused", exc.message)
    return None


def _generate(
    pub: Publisher, lease: Lease, opts: WorkerOptions, ctx: GenContext, progress: Progress
) -> tuple[GenResult | GeneratorUnavailable, str | None]:
    """Run the generator while the lease is renewed: its result, and why the attempt was fenced meanwhile (or None)."""
    lock, stop = threading.Lock(), ctx.stop
    renewer = _Renewer(pub, lease, lock, stop, time.monotonic() + opts.timeout_s)
    renewer.start()
    progress(f"sending {lease.record.key} to {opts.generator.kind}")
    try:
        result: GenResult | GeneratorUnavailable = opts.generator.generate(ctx)
    except GeneratorUnavailable as exc:
        result = exc
    except GenjobError as exc:
        # A model's answer refused (it looked like a credential) or a damaged replay-cache
        # entry: the attempt ends now with a receipt that says why, not `sending` until the
        # lease lapses; the owner retries or drops it.
        result = GenResult("aborted", exc.message + (f" ({exc.hint})" if exc.hint else ""))
    finally:
        renewer.finished.set()
        renewer.join()
    return result, renewer.fenced


def _end_unavailable(
    pub: Publisher, lease: Lease, result: GeneratorUnavailable, ctx: GenContext, opts: WorkerOptions, progress: Progress
) -> JobOutcome:
    """End the attempt the generator could not serve: unknown if a call may have been sent, else failed_before_send."""
    key = lease.record.key
    state = AttemptState.UNKNOWN if result.sent else AttemptState.FAILED_BEFORE_SEND
    try:
        end_attempt(pub, lease, state, result.message, ctx.replays, sign=opts.signing_key)
    except Conflict as exc:
        return JobOutcome(key, "fenced", exc.message, lease.n)
    progress(f"{state} {key}: {result.message}")
    return JobOutcome(key, state, result.message, lease.n)


def _report_cache(ctx: GenContext, key: str, progress: Progress) -> None:
    """Say where each model answer came from: a replay is not a new answer (SPEC §7)."""
    for fp, source in getattr(ctx.cache, "sources", []):
        if source == "replay":
            progress(
                f"replay {fp}: the answer job {key} recorded before (git genjob retry {key} --refresh asks afresh)"
            )
        elif source == "drift":
            progress(f"drift  {fp}: a new answer, recorded for review (git genjob cache show {fp[:12]})")
        else:
            progress(f"fresh  {fp}")


def _prepare(store: Store, record: JobRecord, tmp: str, opts: WorkerOptions) -> tuple[str, GenContext]:
    scratch = os.path.join(tmp, "work")
    meta = os.path.join(tmp, "meta")
    os.makedirs(scratch)
    os.makedirs(meta)
    inputs = bundle_inputs(store, record, read_config(store).limits)
    _write_scratch(scratch, record.job.allowed_paths, inputs)
    instruction_file, job_file = _write_meta(meta, record)
    cache = _replay_cache(store, record, opts)
    ctx = GenContext(
        record.job, scratch, instruction_file, job_file, inputs, opts.timeout_s, threading.Event(), opts.pass_env, cache
    )
    if opts.generator.kind in ("http", "openai") or (opts.gateways and opts.generator.kind == "exec"):
        refresh = bool(record.attempts_doc.refresh)
        n = max((a.n for a in record.attempts), default=1)
        ctx.gateway = Session(store, record.key, n, refresh, opts.signing_key, opts.max_calls, opts.max_tokens)
        ctx.upstreams = opts.gateways
    return scratch, ctx


def _write_scratch(scratch: str, allowed_paths: list[str], inputs: dict[str, bytes]) -> None:
    """The scratch tree: the job's input files, and the directory of each path it may create."""
    for path in allowed_paths:  # a path the job may create gets its directory, as in the repo
        os.makedirs(os.path.dirname(os.path.join(scratch, path)), exist_ok=True)
    for path, data in inputs.items():
        target = os.path.join(scratch, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            fh.write(data)


def _write_meta(meta: str, record: JobRecord) -> tuple[str, str]:
    """The job's instruction and job.json beside the scratch tree; their paths."""
    instruction_file = os.path.join(meta, "instruction.txt")
    with open(instruction_file, "w", encoding="utf-8") as fh:
        fh.write(record.job.instruction)
    job_file = os.path.join(meta, "job.json")
    with open(job_file, "wb") as fh:
        fh.write(record.job_bytes)
    return instruction_file, job_file


def _replay_cache(store: Store, record: JobRecord, opts: WorkerOptions) -> CacheClient | None:
    """The model-answer cache of an http: or openai: generator (None for others)."""
    if opts.generator.kind not in ("http", "openai"):
        return None
    mode = "refresh" if record.attempts_doc.refresh else "replay"
    return CacheClient(store, scope_key=record.key, mode=mode, sign=opts.signing_key)  # who paid signs the answer


def predicate_for(
    record: JobRecord, lease: Lease, verdict: Verdict, ctx: GenContext, opts: WorkerOptions
) -> dict[str, Any]:
    started = next((a.started_at for a in record.attempts if a.n == lease.n), utc_now())
    return {
        "job_digest": record.job.digest,
        "key": record.key,
        "claim": lease.claim,
        "status": verdict.status,
        "reason": as_text(verdict.reason),  # a generator's own words: never a reason to lose the receipt
        "outputs": {p: (digest(d) if d is not None else None) for p, d in sorted(verdict.outputs.items())},
        "ignored": verdict.ignored,
        "worker_id": opts.worker_id,
        "attempt": lease.n,
        "generator": opts.generator.describe(),
        "replays": list(ctx.replays),
        "sandbox": sandbox_record(opts.generator.kind, ctx.sandbox),
        **({"model": ctx.gateway.model_record()} if ctx.gateway is not None else {}),
        "started_at": started,
        "finished_at": utc_now(),
    }


def _finish(
    pub: Publisher,
    lease: Lease,
    record: JobRecord,
    result: GenResult,
    scratch: str,
    ctx: GenContext,
    cfg: Config,
    opts: WorkerOptions,
    progress: Progress,
    ride: bool = False,
) -> JobOutcome:
    """Judge, sign, and store the receipt on top of the claim that made it (with `ride`, maybe
    in the publisher's next push: the outcome is settled then)."""
    verdict = judge(result, scratch, record, ctx, cfg, opts.allow_secrets)
    envelope = sign_statement(build_statement(predicate_for(record, lease, verdict, ctx, opts)), opts.signing_key)
    outcome = JobOutcome(record.key, verdict.status, verdict.reason, lease.n)

    progress(f"receipt {record.key} {verdict.status}" + (f": {verdict.reason}" if verdict.reason else ""))

    def settled(refused: str | None) -> None:
        if refused is None:
            if pub.remote is not None:
                progress(f"pushed  {record.key} (its receipt is on {pub.remote})")
        else:
            progress(f"fenced  {record.key}: {refused}")
            outcome.result, outcome.reason = "fenced", refused

    logs = kept_logs(ctx.logs)
    try:
        store_receipt(
            pub, lease, envelope, verdict.outputs, list(ctx.replays), ride=settled if ride else None, logs=logs
        )
    except Conflict as exc:
        settled(exc.message)
        return outcome
    if not ride:
        settled(None)
    return outcome


def kept_logs(logs: dict[str, bytes]) -> dict[str, bytes]:
    """The generator's stdout and stderr as its attempt keeps them (SPEC §12.4): the last 64 KiB
    of each (the generator cut them), as UTF-8 text with every credential-looking match
    replaced by its pattern's name, as an aborted receipt's reason is (`secretscan.redact`).
    Redacted, not refused: a log is what tells the owner what went wrong, and the answer it
    judged is the scratch tree, scanned as outputs are. Empty streams are not kept."""
    return {name: redact(data.decode("utf-8", "replace")).encode("utf-8") for name, data in logs.items() if data}


class OutOfBand:
    kind = "out-of-band"
    endpoint: str | None = None
    model: str | None = None
    command: str | None = None

    def describe(self) -> dict[str, str | None]:
        return {"kind": self.kind, "endpoint": None, "model": None, "command": None}

    def generate(self, ctx: GenContext) -> GenResult:
        return GenResult("ok")


def receipt_out_of_band(
    store: Store,
    key: str,
    outputs_dir: str | None,
    deletes: list[str],
    signing_key: SigningKey,
    worker_id: str,
    status: str = "ok",
    reason: str = "",
    remote: str | None = None,
) -> JobOutcome:
    """Sign and store a receipt for outputs made elsewhere: claim, then receipt (two events)."""
    pub = publisher(store, remote)
    pub.refresh()
    record = find_job(store, key)
    _check_out_of_band(key, record, outputs_dir, deletes)
    opts = WorkerOptions(OutOfBand(), signing_key, worker_id)
    refusal = Gate(store).refusal(record)  # a damaged or untrusted job is refused before the claim
    if refusal is not None:
        raise Refused(f"job {key} is {refusal[0]}: {refusal[1]}", "ask its planner to sign it")
    lease = claim(pub, record, worker_id, opts.lease_s, opts.signing_key)
    tmp = scratch_dir()
    try:
        scratch, ctx = _prepare(store, lease.record, tmp, opts)
        _lay_out(scratch, outputs_dir, deletes)
        result = GenResult(status, reason)
        return _finish(pub, lease, lease.record, result, scratch, ctx, read_config(store), opts, lambda _: None)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check_out_of_band(key: str, record: JobRecord, outputs_dir: str | None, deletes: list[str]) -> None:
    """BadInput unless each --delete is an allowed path of the job and --outputs is a directory."""
    for path in deletes:
        check_path(path)
        if path not in record.job.allowed_paths:
            raise BadInput(f"--delete {path}: not an allowed path of job {key}")
    if outputs_dir is not None and not os.path.isdir(outputs_dir):
        raise BadInput(f"--outputs {outputs_dir} is not a directory")


def _lay_out(scratch: str, outputs_dir: str | None, deletes: list[str]) -> None:
    """The scratch tree as the outputs made elsewhere left it: --outputs copied over, each --delete removed."""
    if outputs_dir is not None:
        shutil.copytree(outputs_dir, scratch, symlinks=True, dirs_exist_ok=True)
    for path in deletes:
        target = os.path.join(scratch, path)
        if os.path.lexists(target):
            os.unlink(target)
