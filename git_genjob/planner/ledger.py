"""The job ledger: the one writer of a job's events (SPEC §3, §4, §11).

submit, claim, sending, renew, receipt, fail/unknown, recover, retry, drop and the archive move
are each a step that reads a record, asks the state table where the event leads, and writes one
event commit through a `Publisher` (this repository's refs, or a remote through leased pushes),
returning the record it wrote. Nothing else writes under refs/genjob/jobs/ or the archive, so
the rules of authenticity live here once: a job's identity (job.json, its planner's signature,
its inputs) is fixed by the submit commit and carried unchanged by every later event, and a
drop carries its owner's signature.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field

import pygit2

from git_genjob.documents.attempts import Attempts, Final, as_text
from git_genjob.documents.canonical import canonical_bytes, format_time, parse_time, utc_now
from git_genjob.documents.errors import BadInput, Conflict, Refused
from git_genjob.documents.keys import SigningKey
from git_genjob.documents.receipt import parse_envelope
from git_genjob.documents.signing import DROP_TYPE, EVENT_TYPE, seal
from git_genjob.documents.states import MAX_LEASE_S, AttemptState, Event, JobState, transition
from git_genjob.planner.live import live_jobs
from git_genjob.planner.rows import archive_row
from git_genjob.planner.trust import worker_trust
from git_genjob.storage import locks
from git_genjob.storage.archive import Archive
from git_genjob.storage.layout import job_ref
from git_genjob.storage.publish import Publisher, Settled
from git_genjob.storage.records import (
    DROP_ENVELOPE,
    EVENT_ENVELOPE,
    JobRecord,
    attempt_log_path,
    chain_root,
    drop_payload,
    event_message,
    events,
    find_job,
    lease_problem,
    load_tree,
    requeue_payload,
    requeue_problem,
    vouch_problem,
    write_event,
)
from git_genjob.storage.store import Store
from git_genjob.storage.truststore import TrustStore, trust_at_head


def record_submit(pub: Publisher, key: str, files: dict[str, pygit2.Oid], created_at: str) -> pygit2.Oid:
    """The submit event: the chain's first commit (no parent from the project's history) holding
    job.json, its planner's envelope, meta.json and the inputs; the ref is created only if absent
    (a lost create race is Conflict, and the caller compares digests)."""
    store = pub.store
    extra = {"Genjob-Created": created_at}
    message = event_message(Event.SUBMITTED, key, JobState.QUEUED, 0, extra)
    built: list[pygit2.Oid] = []

    def build() -> pygit2.Oid:
        built.append(store.commit(store.build_tree(files), [], message))
        return built[-1]

    pub.advance(job_ref(key), None, build, f"genjob: submit {key}")
    return built[-1]


def _files(record: JobRecord) -> dict[str, pygit2.Oid]:
    """What the next event carries forward: everything but the attempts (rewritten by each event)
    and the requeue signature (it belongs to the one event that wrote it)."""
    return {p: o for p, o in record.files.items() if p not in ("attempts.json", EVENT_ENVELOPE)}


def _advance(
    pub: Publisher,
    record: JobRecord,
    event: Event,
    attempts: Attempts,
    files: dict[str, pygit2.Oid] | None = None,
    extra: dict[str, str] | None = None,
    sign: SigningKey | None = None,
    defer: bool = False,
    ride: Settled | None = None,
) -> JobRecord:
    """Write one event on top of record.tip and move the ref by compare-and-swap; with `sign`,
    the event carries its writer's signature over (event, key, the commit it follows, its
    attempts.json: the lease it sets). With `defer` a remote publisher holds the event for the
    next one on this ref, with `ride` for its next push (see Publisher.advance)."""
    store = pub.store
    files = files if files is not None else _files(record)
    state = transition(record.state, event)  # the one table decides where the event leads
    doc = attempts.moved(state)
    if sign is not None and record.tip is not None:
        payload = requeue_payload(event, record.key, record.tip, doc.canonical)
        files = {**files, EVENT_ENVELOPE: store.blob(seal(EVENT_TYPE, payload, sign))}
    message = f"genjob: {event} {record.key}"
    tip = pub.advance(
        job_ref(record.key),
        record.tip,
        lambda: write_event(store, record, event, files, doc, state, extra),
        message,
        wait=event != Event.CLAIMED,  # a claim that meets another worker's lock picks another job
        defer=defer,
        ride=ride,
    )
    return load_tree(store, record.key, store.get_commit(tip).tree, tip, archived=False)


@dataclass
class Lease:
    record: JobRecord
    n: int
    claim: str
    lease_s: float
    sign: SigningKey | None = None  # the worker's key: it signs every event that sets the lease (SPEC §11)


def claim(
    pub: Publisher,
    record: JobRecord,
    worker_id: str,
    lease_s: float,
    sign: SigningKey | None = None,
    defer: bool = False,
) -> Lease:
    """Claim a queued job: a compare-and-swap from the state read, with a nonce. With `sign` (the
    worker's key) the claim and each later lease event carry the worker's signature, so a lease
    a keyless remote forges holds nothing up (`recover` fences it at once)."""
    if record.state != JobState.QUEUED:
        raise Conflict(f"job {record.key} is {record.state}, not queued", "pick another job")
    now = time.time()
    doc = record.attempts_doc.claimed(worker_id, format_time(now + lease_s), format_time(now))
    n = len(doc.attempts)
    extra = {"Genjob-Nonce": os.urandom(16).hex(), "Genjob-Attempt": str(n)}
    new = _advance(pub, record, Event.CLAIMED, doc, extra=extra, sign=sign, defer=defer)
    assert new.tip is not None
    return Lease(new, n, str(new.tip), lease_s, sign)


def _current(lease: Lease) -> Attempts:
    """The lease's job's attempts, while the lease's attempt is still the current one."""
    doc = lease.record.attempts_doc
    if doc.attempts[-1].n != lease.n:
        raise Conflict(f"job {lease.record.key}: attempt {lease.n} was superseded", "this worker was fenced")
    return doc


def record_sending(pub: Publisher, lease: Lease) -> None:
    """Durable `sending` before the first byte goes to a generator."""
    doc = _current(lease).sending(lease.claim, format_time(time.time() + lease.lease_s))
    extra = {"Genjob-Attempt": str(lease.n)}
    lease.record = _advance(pub, lease.record, Event.SENDING, doc, extra=extra, sign=lease.sign)


def renew(pub: Publisher, lease: Lease) -> None:
    doc = _current(lease).renewed(format_time(time.time() + lease.lease_s))
    extra = {"Genjob-Attempt": str(lease.n)}
    lease.record = _advance(pub, lease.record, Event.RENEWED, doc, extra=extra, sign=lease.sign)


def store_receipt(
    pub: Publisher,
    lease: Lease,
    envelope: bytes,
    outputs: dict[str, bytes | None],
    replays: list[str],
    ride: Settled | None = None,
    logs: dict[str, bytes] | None = None,
) -> JobRecord:
    """The signed receipt, committed on top of the claim that made it (else: fenced, exit 4).
    With `ride`, a remote publisher may send it with its next push (see Publisher.advance).
    `logs` (the generator's stdout and stderr, tails already redacted) are kept with the attempt
    at attempts/<n>/<name>, carried by every later event (SPEC §12.4)."""
    doc = _current(lease).finished(utc_now(), tuple(replays))  # spends `refresh`: asked afresh once
    files = _receipt_files(pub.store, lease, envelope, outputs, logs or {})
    extra = {"Genjob-Attempt": str(lease.n)}
    lease.record = _advance(pub, lease.record, Event.RECEIPT, doc, files, extra=extra, ride=ride)
    return lease.record


def _receipt_files(
    store: Store, lease: Lease, envelope: bytes, outputs: dict[str, bytes | None], logs: dict[str, bytes]
) -> dict[str, pygit2.Oid]:
    """The job's files with the receipt: the envelope, the outputs it names (a deletion is no
    file) and the attempt's logs, in place of any earlier attempt's outputs."""
    files = {p: o for p, o in _files(lease.record).items() if not p.startswith("outputs/")}
    files["receipt.json"] = store.blob(envelope)
    for path, data in outputs.items():
        if data is not None:
            files[f"outputs/{path}"] = store.blob(data)
    for name, data in logs.items():
        files[attempt_log_path(lease.n, name)] = store.blob(data)
    return files


def end_attempt(
    pub: Publisher,
    lease: Lease,
    state: AttemptState,
    reason: str,
    replays: list[str] | None = None,
    sign: SigningKey | None = None,
) -> None:
    """The worker's own verdict on an attempt without a receipt: failed_before_send or unknown.
    `failed` requeues a job that reached `sending`: the worker signs it with its key."""
    doc = _current(lease).ended(state, utc_now(), as_text(reason), tuple(replays or ()))
    event = Event.FAILED if state == AttemptState.FAILED_BEFORE_SEND else Event.UNKNOWN
    signer = sign if event == Event.FAILED else None
    lease.record = _advance(pub, lease.record, event, doc, extra={"Genjob-Attempt": str(lease.n)}, sign=signer)


def stop_attempt(pub: Publisher, lease: Lease, signal_name: str) -> str:
    """A worker stopped by the user ends its own attempt before it exits (SPEC §12.4), signed by
    its key as its lease events are: a claim it had not started is released (queued again), a
    send becomes unknown (its calls may have been sent: the owner retries or drops it, at once).
    Returns the job's state after."""
    started = lease.record.state == JobState.SENDING
    why = (
        f"the worker was stopped ({signal_name}) while its generator ran; calls may have been sent"
        if started
        else f"the worker was stopped ({signal_name}) before it started the job"
    )
    verdict = AttemptState.UNKNOWN if started else AttemptState.FAILED_BEFORE_SEND
    doc = _current(lease).ended(verdict, utc_now(), why)
    extra = {"Genjob-Attempt": str(lease.n)}
    lease.record = _advance(pub, lease.record, Event.STOPPED, doc, extra=extra, sign=lease.sign)
    return lease.record.state


@dataclass
class RecoverReport:
    requeued: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)  # interrupted archive moves completed
    locks: list[str] = field(default_factory=list)  # stale lock files cleared
    forged: list[str] = field(default_factory=list)  # of those fenced: a running lease no trusted worker signed

    def to_json(self) -> dict[str, list[str]]:
        return dict(self.__dict__)

    def lines(self) -> list[str]:
        """The human report."""
        out = [f"requeued {k} (lease lapsed before sending)" for k in self.requeued]
        out += [f"unknown  {k} (lease lapsed while sending; owner decides: retry or drop)" for k in self.unknown]
        out += [f"archived {k} (finished an interrupted archive move)" for k in self.archived]
        out += [f"cleared  {p} (stale lock of a writer that is gone)" for p in self.locks]
        out += [f"fenced   {k} before its lease ran out: no trusted worker signed it" for k in self.forged]
        return out or ["no expired claims"]


def recover(pub: Publisher, now: float | None = None, trust_file: str | None = None) -> RecoverReport:
    """Fence expired claims: lapsed `claimed` -> failed_before_send (requeued), lapsed `sending` -> unknown.

    A lease counts only while it runs and, where this clone holds trust to judge by, while the
    event that set it is signed by a worker key trusted for receipts: a lease a keyless remote
    forged (or one set by an untrusted worker, whose receipt would not verify) is fenced now."""
    report = RecoverReport()
    report.locks = locks.clear_stale(pub.store.common_dir)
    pub.refresh()
    now = time.time() if now is None else now
    trust = worker_trust(pub.store, trust_file)
    for key in pub.store.live_keys():
        if Archive(pub.store).finish_move(key, vouch=vouch_problem):
            report.archived.append(key)
    running = (JobState.CLAIMED, JobState.SENDING)
    for record in live_jobs(pub.store, states=running):
        if record.state in running:
            _fence_expired(pub, record, now, trust, report)
    return report


def _fence_expired(pub: Publisher, record: JobRecord, now: float, trust: TrustStore, report: RecoverReport) -> None:
    """Fence a running job whose lease lapsed, or runs on a lease no trusted worker signed; the
    outcome goes into `report`."""
    attempt = record.attempts[-1]
    until = parse_time(attempt.lease_until)
    if now < until <= now + MAX_LEASE_S:  # beyond the longest lease a worker takes: forged, fenced
        if not trust.signers or lease_problem(pub.store, record, trust.signers, trust.revoked) is None:
            return
        report.forged.append(record.key)
    doc = record.attempts_doc.fenced(format_time(now))
    try:
        _advance(pub, record, Event.RECOVERED, doc, extra={"Genjob-Attempt": str(attempt.n)})
    except Conflict:
        report.lost.append(record.key)
        return
    (report.requeued if attempt.state == AttemptState.CLAIMED else report.unknown).append(record.key)


def retry(pub: Publisher, key: str, refresh: bool = False, sign: SigningKey | None = None) -> JobRecord:
    """The owner's explicit new attempt of the same job (same key, same digest), signed with the
    owner's planner key `sign` (a worker claims a job that was sent once only on that word).

    With `refresh` the new attempt asks the model afresh instead of replaying the answer this
    job already recorded; a different answer is recorded as a drift candidate (SPEC §7).
    """
    pub.refresh()
    record = find_job(pub.store, key)
    _check_retryable(pub, record, key)
    doc = record.attempts_doc.retried(refresh)
    files = {p: o for p, o in _files(record).items() if p != "receipt.json" and not p.startswith("outputs/")}
    return _advance(pub, record, Event.RETRIED, doc, files, sign=sign)


def _check_retryable(pub: Publisher, record: JobRecord, key: str) -> None:
    """Refuse a retry of an archived job, one a lease may still hold, one already queued for a
    worker, or one with an ok receipt."""
    if record.archived:
        raise BadInput(f"job {key} is {record.state} and archived", "submit a new job (with a new --key) instead")
    if record.state in (JobState.CLAIMED, JobState.SENDING):
        raise Conflict(
            f"job {key} is {record.state} by a worker whose lease may still run",
            "wait for the lease to lapse and run git genjob recover first",
        )
    if record.state == JobState.QUEUED and not _requeued_unsigned(pub, record):
        raise Refused(f"job {key} is already queued", "a worker will pick it up: git genjob work")
    if record.state == JobState.DONE and _receipt_status(record) == "ok":
        raise Refused(f"job {key} has an ok receipt", f"apply it (git genjob apply {key}) or drop it")


def _requeued_unsigned(pub: Publisher, record: JobRecord) -> bool:
    """A job listed as queued that no worker will send again (a requeue nobody trusted signed):
    the owner's signed retry is what releases it."""
    trust = trust_at_head(pub.store)
    return requeue_problem(pub.store, record, trust.signers, trust.revoked) is not None


def _receipt_status(record: JobRecord) -> str | None:
    if record.receipt_bytes is None:
        return None
    try:
        return parse_envelope(record.receipt_bytes).predicate.status
    except BadInput:
        return None


def archive(pub: Publisher, record: JobRecord, final: Final, sign: SigningKey | None = None) -> None:
    """Move a live job into refs/genjob/archive (one atomic two-ref update).

    With `sign` (the owner's planner key) a drop carries the owner's signature, without which
    no other clone takes the archive's word that the job ended (SPEC §11)."""
    store = pub.store
    assert record.tip is not None
    tree = store.build_tree(_archived_files(store, record, record.tip, final, sign))
    state = final.state
    msg = f"genjob: archive {record.key} ({state})\n\nGenjob-Key: {record.key}\nGenjob-State: {state}\n"
    final_tree = store.get(tree)
    assert isinstance(final_tree, pygit2.Tree)
    row = archive_row(load_tree(store, record.key, final_tree, None, archived=True))
    pub.archive(record.key, record.tip, tree, msg, row)


def _archived_files(
    store: Store, record: JobRecord, tip: pygit2.Oid, final: Final, sign: SigningKey | None
) -> dict[str, pygit2.Oid]:
    """The job's files as the archive keeps them: meta.json with how it ended and its chain of
    events, and with `sign` the owner's signed drop."""
    meta = record.meta.to_dict()
    meta["final"] = final.to_dict()
    meta["chain"] = [{"commit": str(e.commit), "event": e.event, "state": e.state} for e in events(store, tip)]
    files = dict(record.files)
    files["meta.json"] = store.blob(canonical_bytes(meta))
    if sign is not None:
        payload = drop_payload(record.key, record.job.digest, final.why or "", final.at or "")
        files[DROP_ENVELOPE] = store.blob(seal(DROP_TYPE, payload, sign))
    return files


def drop(pub: Publisher, key: str, why: str, by: str, sign: SigningKey | None = None) -> JobRecord:
    """The owner ends a job: it moves to the archive with the reason, signed with `sign`."""
    if not why.strip():
        raise BadInput("drop needs a reason", "pass --why TEXT")
    pub.refresh()
    try:
        record = find_job(pub.store, key)
    except BadInput:
        record = _as_submitted(pub, key)  # damaged after submit: the owner still ends it
    if record.archived:
        return record
    if record.state in (JobState.CLAIMED, JobState.SENDING):
        raise Conflict(f"job {key} is {record.state} by a live worker", "wait for the lease, run recover, then drop")
    final = Final(JobState.DROPPED, why=why, by=by, at=utc_now(), was=record.state)
    archive(pub, record, final, sign)
    return find_job(pub.store, key)


def _as_submitted(pub: Publisher, key: str) -> JobRecord:
    """A damaged live job as its submit commit stored it, at the ref's current tip (so the
    archive move's lease is on what the ref holds now). What was appended after the submit is
    dropped with it; the drop's signature covers the submitted job.json, which is what another
    clone judges it by. Raises the damage itself when even the submit commit is unreadable."""
    store = pub.store
    tip = store.ref_target(job_ref(key))
    if tip is None:
        raise BadInput(f"job {key} is damaged and not live here", "inspect it with git show")
    root = store.get_commit(chain_root(store, tip))
    record = load_tree(store, key, root.tree, tip, archived=False)
    if record.state in (JobState.CLAIMED, JobState.SENDING):  # the submit commit says queued; be sure anyway
        raise Conflict(f"job {key} is {record.state}", "wait for the lease, run recover, then drop")
    return record
