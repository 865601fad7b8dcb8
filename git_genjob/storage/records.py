"""Reading a job's event chain: the stored job, its meta, attempts, receipt and outputs."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any

import pygit2

from git_genjob.documents.attempts import Attempt, Attempts, Meta, parse_attempts, parse_meta
from git_genjob.documents.canonical import canonical_bytes, digest, sha256_hex
from git_genjob.documents.config import Limits
from git_genjob.documents.errors import BadInput, GenjobError, NoSuchJob
from git_genjob.documents.job import Job, job_signer
from git_genjob.documents.states import Event as JobEvent
from git_genjob.documents.states import JobState
from git_genjob.storage.archive import Archive
from git_genjob.storage.gitdir import genjob_trailers_of_commit, parse_trailers
from git_genjob.storage.layout import ARCHIVE_REF, job_ref
from git_genjob.storage.store import CONTENT_MAX, Store, lookup

__all__ = ["NoSuchJob", "parse_trailers"]


@dataclass
class Event:
    commit: pygit2.Oid
    event: str
    state: str
    epoch: int
    time: int
    trailers: dict[str, str]


@dataclass
class JobRecord:
    """One job as stored: live (tip of its ref) or archived (final tree)."""

    key: str
    job: Job
    job_bytes: bytes
    meta: Meta
    tree: pygit2.Tree
    store: Store
    tip: pygit2.Oid | None
    archived: bool = False
    attempts_doc: Attempts = field(default_factory=Attempts)
    receipt_bytes: bytes | None = None
    job_envelope: bytes | None = None  # the planner's DSSE signature over job_bytes (SPEC §11)

    @property
    def state(self) -> JobState:
        if self.archived:
            return self.meta.final.state if self.meta.final is not None else JobState.APPLIED
        if self.receipt_bytes is not None:
            return JobState.DONE
        return self.attempts_doc.state

    @property
    def epoch(self) -> int:
        return self.attempts_doc.epoch

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        return self.attempts_doc.attempts

    @functools.cached_property
    def files(self) -> dict[str, pygit2.Oid]:
        """{path: blob oid} of the whole stored tree (read on first use)."""
        return self.store.tree_files(self.tree)

    @property
    def digest(self) -> str:
        return self.job.digest

    def output_oids(self) -> dict[str, pygit2.Oid]:
        return {p[len("outputs/") :]: o for p, o in self.files.items() if p.startswith("outputs/")}


JOB_ENVELOPE = "job.dsse.json"
DROP_ENVELOPE = "drop.dsse.json"
EVENT_ENVELOPE = "event.dsse.json"  # on a requeue event only: who requeued a job that may have been sent
TOP_LEVEL = {
    EVENT_ENVELOPE,
    "job.json",
    JOB_ENVELOPE,
    DROP_ENVELOPE,
    "meta.json",
    "attempts.json",
    "receipt.json",
    "inputs",
    "outputs",
    "attempts",  # attempts/<n>/stdout, attempts/<n>/stderr: each attempt's generator output (never in a bundle)
}
ATTEMPT_LOGS = ("stdout", "stderr")
LOG_READ_MAX = 1 << 20  # a worker keeps 64 KiB of each; a bigger one came from elsewhere and is refused


def attempt_log_path(n: int, name: str) -> str:
    """Where attempt `n` keeps its generator's `name` (stdout or stderr) in the job's event tree."""
    return f"attempts/{n}/{name}"


def attempt_logs(record: JobRecord) -> dict[int, dict[str, bytes]]:
    """{attempt n: {stdout|stderr: bytes}} kept in the job's tree, oldest attempt first."""
    out: dict[int, dict[str, bytes]] = {}
    for path, oid in record.files.items():
        parts = path.split("/")
        if len(parts) == 3 and parts[0] == "attempts" and parts[1].isdigit() and parts[2] in ATTEMPT_LOGS:
            out.setdefault(int(parts[1]), {})[parts[2]] = record.store.read(oid, limit=LOG_READ_MAX)
    return {n: out[n] for n in sorted(out)}


# Fixed by the submit commit; no later event may change them (meta.json too: its `base` bounds
# the search for an earlier landing, SPEC §11).
IDENTITY = ("job.json", JOB_ENVELOPE, "meta.json", "inputs")


def bundle_inputs(store: Store, record: JobRecord, limits: Limits | None = None) -> dict[str, bytes]:
    """The job's input bytes, rebuilt from job.json alone (SPEC §3: this is the bundle).

    Each non-null input is read from inputs/<path> and re-hashed against its digest in job.json;
    a missing, mismatched or extra file (a planted CLAUDE.md, say) refuses the whole job, since
    the stored tree lies outside the digest and may come from a hostile remote.
    """
    where = f"job {record.key}"
    extra = sorted(str(e.name) for e in record.tree if str(e.name) not in TOP_LEVEL)
    if extra:
        raise BadInput(f"{where}: its tree holds {', '.join(map(repr, extra))} beside the job's documents")
    stored = _stored_inputs(store, record.tree, where)
    wanted = {p: d for p, d in record.job.input_map.items() if d is not None}
    _check_input_paths(where, stored, wanted)
    _check_sizes(store, where, {p: stored[p] for p in wanted}, limits or Limits())
    return _read_inputs(store, where, stored, wanted)


def _stored_inputs(store: Store, tree: pygit2.Tree, where: str) -> dict[str, pygit2.Oid]:
    """{path: blob oid} under the job tree's inputs/ (none without one)."""
    inputs_entry = lookup(tree, "inputs")
    if inputs_entry is None:
        return {}
    sub = store.get(inputs_entry.id)
    if not isinstance(sub, pygit2.Tree):
        raise BadInput(f"{where}: inputs is not a directory")
    return store.tree_files(sub)


def _check_input_paths(where: str, stored: dict[str, pygit2.Oid], wanted: dict[str, str]) -> None:
    """Refuse files under inputs/ that job.json does not name, then an input it names that is missing."""
    planted = sorted(set(stored) - set(wanted))
    if planted:
        raise BadInput(
            f"{where}: inputs/ holds files that are not inputs of job.json: {', '.join(planted)}",
            "the ref was tampered with; drop the job and submit it again",
        )
    missing = sorted(set(wanted) - set(stored))
    if missing:
        raise BadInput(f"{where}: inputs/{missing[0]} is missing")


def _read_inputs(store: Store, where: str, stored: dict[str, pygit2.Oid], wanted: dict[str, str]) -> dict[str, bytes]:
    """Each input's bytes, in path order, each re-hashed against the digest job.json gives it."""
    out: dict[str, bytes] = {}
    for path, want in sorted(wanted.items()):
        data = store.read(stored[path], limit=CONTENT_MAX)
        have = digest(data)
        if have != want:
            raise BadInput(
                f"{where}: inputs/{path} hashes to {have}, job.json says {want}",
                "the ref was tampered with; drop the job and submit it again",
            )
        out[path] = data
    return out


def _check_sizes(store: Store, where: str, blobs: dict[str, pygit2.Oid], limits: Limits) -> None:
    """SPEC §8's limits, from each object's header before anything is inflated: a job from a
    remote may name a blob of gigabytes that packs into a few kilobytes."""
    total = 0
    for path, oid in sorted(blobs.items()):
        try:
            size = store.blob_size(oid)
        except KeyError:
            raise BadInput(f"{where}: inputs/{path} names an object this repository does not have") from None
        if size > limits.file_bytes:
            raise BadInput(
                f"{where}: inputs/{path} is {size} bytes, over the limit of {limits.file_bytes} per file",
                "the job cannot be worked; its owner drops it (limits.file_bytes in .genjob/config.toml)",
            )
        total += size
    if total > limits.receipt_bytes:
        raise BadInput(
            f"{where}: its inputs are {total} bytes together, over the limit of {limits.receipt_bytes} per job",
            "the job cannot be worked; its owner drops it (limits.receipt_bytes in .genjob/config.toml)",
        )


def event_message(event: str, key: str, state: str, epoch: int, extra: dict[str, str] | None = None) -> str:
    lines = [f"genjob: {event} {key}", ""]
    trailers = {"Genjob-Event": event, "Genjob-State": state, "Genjob-Epoch": str(epoch)}
    trailers.update(extra or {})
    lines += [f"{k}: {v}" for k, v in trailers.items()]
    return "\n".join(lines) + "\n"


_PARSED_JOBS: dict[pygit2.Oid, tuple[Job, bytes]] = {}  # job.json by blob id: a blob never changes meaning
_PARSED_JOBS_MAX = 20_000


def _job_at(store: Store, tree: pygit2.Tree) -> tuple[Job, bytes] | None:
    """job.json of a stored tree, parsed and validated once per blob (every event repeats it)."""
    try:
        entry = tree["job.json"]
    except KeyError:
        return None
    if entry.type_str != "blob":
        return None
    hit = _PARSED_JOBS.get(entry.id)
    if hit is None:
        data = store.read(entry.id)
        hit = (Job.from_bytes(data), data)
        if len(_PARSED_JOBS) >= _PARSED_JOBS_MAX:
            _PARSED_JOBS.clear()
        _PARSED_JOBS[entry.id] = hit
    return hit


def load_tree(store: Store, key: str, tree: pygit2.Tree, tip: pygit2.Oid | None, archived: bool) -> JobRecord:
    where = f"{ARCHIVE_REF} entry" if archived else job_ref(key)
    job, job_bytes, meta_bytes = _stored_job(store, key, tree, where)
    meta, attempts = _stored_progress(store, key, tree, meta_bytes)
    receipt = store.file_at(tree, "receipt.json")
    envelope = store.file_at(tree, JOB_ENVELOPE)
    return JobRecord(key, job, job_bytes, meta, tree, store, tip, archived, attempts, receipt, envelope)


def _stored_job(store: Store, key: str, tree: pygit2.Tree, where: str) -> tuple[Job, bytes, bytes]:
    """(job, job.json, meta.json) of a stored job tree, its job checked to be job `key`."""
    try:
        parsed = _job_at(store, tree)
    except BadInput as exc:
        raise BadInput(f"job {key} ({where}): {exc.message}", "the ref is damaged; inspect it with git show") from None
    meta_bytes = store.file_at(tree, "meta.json")
    if parsed is None or meta_bytes is None:
        raise BadInput(
            f"job {key}: stored tree lacks job.json or meta.json", "the ref is damaged; inspect it with git show"
        )
    job, job_bytes = parsed
    if job.key != key:
        raise BadInput(f"job ref {key} holds a job whose key is {job.key}", "the ref is damaged or was renamed")
    return job, job_bytes, meta_bytes


def _stored_progress(store: Store, key: str, tree: pygit2.Tree, meta_bytes: bytes) -> tuple[Meta, Attempts]:
    """The meta and attempts of a stored job tree, its meta checked to name job `key`."""
    try:
        meta = parse_meta(meta_bytes)
        attempts = parse_attempts(store.file_at(tree, "attempts.json"))
    except BadInput as exc:
        raise BadInput(f"job {key}: {exc.message}", "the ref is damaged; inspect it with git show") from None
    if meta.key != key:
        raise BadInput(f"job {key}: meta.json names key {meta.key}", "the ref is damaged or was renamed")
    return meta, attempts


def load_live(store: Store, key: str) -> JobRecord | None:
    tip = store.ref_target(job_ref(key))
    if tip is None:
        return None
    commit = store.get_commit(tip)
    record = load_tree(store, key, commit.tree, tip, archived=False)
    check_identity(store, key, commit)
    return record


MAX_EVENTS = 10_000
_ROOTS: dict[pygit2.Oid, pygit2.Oid] = {}  # event commit -> its chain's submit commit (never changes)


def chain_root(store: Store, tip: pygit2.Oid) -> pygit2.Oid:
    """The submit commit of the chain ending at `tip` (first parents; bounded, memoized)."""
    seen: list[pygit2.Oid] = []
    oid = tip
    while oid not in _ROOTS:
        commit = store.get_commit(oid)
        seen.append(oid)
        if not commit.parent_ids:
            _ROOTS[oid] = oid
            break
        if len(seen) > MAX_EVENTS:
            raise BadInput(f"the chain at {str(tip)[:12]} has more than {MAX_EVENTS} events")
        oid = commit.parent_ids[0]
    root = _ROOTS[oid]
    if len(_ROOTS) > 100_000:
        _ROOTS.clear()
    for o in seen:
        _ROOTS[o] = root
    return root


def check_identity(store: Store, key: str, tip: pygit2.Commit) -> None:
    """A job is its first (submit) commit: every later event holds the same job.json, envelope
    and inputs, byte for byte (SPEC §11), else the job is damaged. What a remote appends can
    add attempts and receipts; it can never change the work order."""
    root = store.get_commit(chain_root(store, tip.id))
    if parse_trailers(root.message).get("Genjob-Event") != "submitted":
        raise BadInput(
            f"job {key}: its chain does not start with a submit event", "the ref was tampered with; drop the job"
        )
    if root.id == tip.id:
        return
    changed = [name for name in IDENTITY if _entry_id(root.tree, name) != _entry_id(tip.tree, name)]
    if changed:
        raise BadInput(
            f"job {key}: a later event changed {', '.join(changed)} since the submit commit {str(root.id)[:12]}",
            "the ref was tampered with (a job is immutable once stored); drop the job and submit it again",
        )


def _entry_id(tree: pygit2.Tree, name: str) -> pygit2.Oid | None:
    try:
        return tree[name].id
    except KeyError:
        return None


def load_archived(store: Store, key: str) -> JobRecord | None:
    tree = Archive(store).entry(key)
    if tree is None:
        return None
    return load_tree(store, key, tree, None, archived=True)


def find_job(store: Store, key: str) -> JobRecord:
    """An archived job, else a live one; exit 2 if neither exists.

    The archive is the final word: a live ref beside an archive entry is the leftover of a move
    that was interrupted between its two steps.
    """
    live_tip = store.ref_target(job_ref(key))
    archived = _archived_beside(store, key, live_tip)
    both = archived is not None and live_tip is not None
    # Both: the leftover of an interrupted move, unless the archive entry came from a remote
    # that this clone cannot vouch for; then the live job stands.
    if both and archived is not None and vouch_problem(store, key, archived.tree) is not None:
        return load_live(store, key) or archived
    record = archived or load_live(store, key)
    if record is None:
        raise NoSuchJob(f"no job with key {key!r}", "list jobs with: git genjob status --all")
    return record


def _archived_beside(store: Store, key: str, live_tip: pygit2.Oid | None) -> JobRecord | None:
    """The archived record of `key`; with a live job, a malformed archive entry counts as none."""
    try:
        return load_archived(store, key)
    except BadInput:
        if live_tip is None:
            raise
        # A malformed entry came from a remote (genjob writes none): it ends nothing here.
        return None


MIN_PREFIX = 4


def resolve_key(store: Store, text: str) -> str:
    """The full key of a job named by its key or a unique prefix of it (as `status` prints keys).

    An exact key always wins. A prefix is looked up in the live refs, then in the archive (a
    scan of its shards, paid only when the text is no job's key). Text that matches nothing is
    returned as it is, for the command's own lookup (possibly through a remote) to report.
    """
    if len(text) < MIN_PREFIX or store.ref_target(job_ref(text)) is not None or Archive(store).entry(text):
        return text
    matches = _prefix_matches(store, text)
    if len(matches) > 1:
        raise NoSuchJob(
            f"{text!r} is the prefix of {len(matches)} jobs' keys: " + ", ".join(matches[:5]), "give more characters"
        )
    return matches[0] if matches else text


def _prefix_matches(store: Store, prefix: str) -> list[str]:
    """The live jobs' keys that start with `prefix`, sorted; without one, the archived jobs'."""
    matches = sorted(k for k in store.live_keys() if k.startswith(prefix))
    return matches or sorted(k for k, _ in Archive(store).entries() if k.startswith(prefix))


def events(store: Store, tip: pygit2.Oid) -> list[Event]:
    """A live chain's events, oldest first (first parents only)."""
    out: list[Event] = []
    oid: pygit2.Oid | None = tip
    while oid is not None:
        commit = store.get_commit(oid)
        t = parse_trailers(commit.message)
        out.append(
            Event(
                oid,
                t.get("Genjob-Event", "?"),
                t.get("Genjob-State", "?"),
                _int(t.get("Genjob-Epoch", "0")),
                commit.commit_time,
                t,
            )
        )
        oid = commit.parent_ids[0] if commit.parent_ids else None
    return out[::-1]


def _int(text: str) -> int:
    return int(text) if text.isdigit() and len(text) < 19 else 0


def write_event(
    store: Store,
    record: JobRecord,
    event: str,
    files: dict[str, pygit2.Oid],
    attempts_doc: Attempts | None,
    state: str,
    extra: dict[str, str] | None = None,
) -> pygit2.Oid:
    """A new event commit on top of record.tip (no ref move)."""
    if attempts_doc is not None:
        files = dict(files)
        files["attempts.json"] = store.blob(attempts_doc.canonical)
    tree = store.build_tree(files)
    epoch = attempts_doc.epoch if attempts_doc is not None else record.epoch
    parents = [record.tip] if record.tip is not None else []
    trailers = {"Genjob-Created": record.meta.created_at, **(extra or {})}
    return store.commit(tree, parents, event_message(event, record.key, state, epoch, trailers))


def drop_payload(key: str, job_digest: str, why: str, at: str) -> bytes:
    """What the owner signs when ending a job (SPEC §11: a drop counts elsewhere only signed)."""
    return canonical_bytes({"at": at, "job_digest": job_digest, "key": key, "why": why})


def vouch_problem(store: Store, key: str, entry: pygit2.Tree) -> str | None:
    """Why this clone cannot take an archive entry's word that job `key` ended (None: it can).

    The archive arrives through a shared remote, which anyone with push access can rewrite. An
    entry vouches only for the job the live ref holds (the same job.json as its submit commit),
    and only as far as this clone can check it: `applied` where a commit carrying the job's
    Genjob-Key and Genjob-Job is on the local branch it names (or that branch's remote-tracking
    copy); `dropped` (or `superseded`) with the drop signed by a planner this clone's HEAD
    trusts, unless no trusted planner signed the job, which no worker would claim anyway."""
    try:
        record = load_tree(store, key, entry, None, archived=True)
    except BadInput as exc:
        return exc.message
    job_bytes, envelope = record.job_bytes, record.job_envelope
    live = _live_identity(store, key)
    if live is not None:
        if live[0] != job_bytes:
            return "its archive entry holds another job.json than the live job's submit commit"
        job_bytes, envelope = live
    final = record.meta.final
    if final is None:
        return "its archive entry does not say how it ended"
    if final.state == JobState.APPLIED:
        return _applied_problem(store, key, record.job.digest, final.commit, final.branch)
    return _drop_problem(store, record, job_bytes, envelope, final.why or "", final.at or "")


def _live_identity(store: Store, key: str) -> tuple[bytes, bytes | None] | None:
    """(job.json, its envelope) of the live job's submit commit, or None (no readable live job)."""
    tip = store.ref_target(job_ref(key))
    if tip is None:
        return None
    try:
        root = store.get_commit(chain_root(store, tip))
        data = store.file_at(root.tree, "job.json")
    except (BadInput, ValueError, KeyError):
        return None
    return (data, store.file_at(root.tree, JOB_ENVELOPE)) if data is not None else None


def _applied_problem(store: Store, key: str, job_digest: str, commit: str | None, branch: str | None) -> str | None:
    if not commit or not branch:
        return "its archive entry names no applied commit and branch"
    if not branch.startswith("refs/heads/"):
        return f"its archive entry names {branch}, which is not a branch"
    try:
        landed = store.get_commit(commit)
    except (BadInput, ValueError, KeyError):
        return f"applied as {commit[:12]}, a commit this clone does not have (fetch {branch})"
    t = genjob_trailers_of_commit(str(landed.id), landed.message, store.gitdir)  # as git reads them
    if t.get("Genjob-Key") != key or t.get("Genjob-Job") != job_digest:
        return f"applied as {commit[:12]}, which does not carry this job's Genjob-Key and Genjob-Job"
    if _branch_holds(store, branch, landed.id):
        return None
    return f"applied as {commit[:12]} on {branch}, which does not hold that commit here"


def _branch_holds(store: Store, branch: str, commit: pygit2.Oid) -> bool:
    """Whether local `branch` or a remote-tracking copy of it holds `commit`."""
    short = branch.removeprefix("refs/heads/")
    tips = [store.ref_target(branch)] + [o for n, o in store.iter_refs("refs/remotes/") if n.endswith(f"/{short}")]
    return any(t is not None and (t == commit or store.descendant_of(t, commit)) for t in tips)


def _drop_problem(
    store: Store, record: JobRecord, job_bytes: bytes, envelope: bytes | None, why: str, at: str
) -> str | None:
    # These load PyNaCl: only a drop's signature is judged here, and most commands never do.
    from git_genjob.documents.keys import NS_JOB
    from git_genjob.documents.signing import DROP_TYPE, signer_of, unseal
    from git_genjob.storage.truststore import trust_at_head

    try:
        trust = trust_at_head(store)
    except BadInput as exc:
        return f"the trust store on HEAD is unreadable: {exc.message}"
    signers, revoked = trust.signers, trust.revoked
    when = time.time()
    try:
        job_signer(job_bytes, envelope, signers, revoked, when)
    except GenjobError:
        return None  # no trusted planner signed the job: nothing a worker would claim is lost
    envelope = store.file_at(record.tree, DROP_ENVELOPE)
    if envelope is None:
        return "its archive entry says it was dropped, unsigned"
    try:
        sealed = unseal(envelope, DROP_TYPE, "drop")
        if sealed.payload != drop_payload(record.key, record.job.digest, why, at):
            return "its drop signature is over another drop"
        signer_of(sealed, signers, revoked, when, NS_JOB, "drop")
    except GenjobError as exc:
        return f"its drop is not signed by a trusted planner: {exc.message}"
    return None


def requeue_payload(event: str, key: str, parent: pygit2.Oid, attempts: bytes) -> bytes:
    """What the writer of a signed event (a lease it sets, a requeue) signs: the event, the job,
    the commit it follows and the sha256 of its attempts.json (the lease and the attempts), so
    a signature cannot be carried onto another lease."""
    return canonical_bytes({"attempts": sha256_hex(attempts), "event": event, "key": key, "parent": str(parent)})


REQUEUE_SIGNERS: dict[str, str] = {
    JobEvent.RETRIED: "genjob-job",
    JobEvent.FAILED: "genjob-receipt",
}  # the owner's, the worker's
LEASE_EVENTS = (JobEvent.CLAIMED, JobEvent.SENDING, JobEvent.RENEWED)  # each sets lease_until, signed by the worker


def _signed_event_problem(
    store: Store, key: str, commit: pygit2.Commit, event: str, namespace: str, signers: list[Any], revoked: set[bytes]
) -> str | None:
    """Why event commit `commit` does not carry its writer's signature over (event, key, parent)."""
    from git_genjob.documents.signing import EVENT_TYPE, signer_of, unseal  # loads PyNaCl: only when judged

    envelope = store.file_at(commit.tree, EVENT_ENVELOPE)
    if envelope is None or not commit.parent_ids:
        return f"its {event} event is unsigned"
    try:
        sealed = unseal(envelope, EVENT_TYPE, event)
        attempts = store.file_at(commit.tree, "attempts.json") or b""
        if sealed.payload != requeue_payload(event, key, commit.parent_ids[0], attempts):
            return f"its {event} signature is over another event"
        signer_of(sealed, signers, revoked, time.time(), namespace, event)
    except GenjobError as exc:
        return f"its {event} event is not signed by a key trusted for {namespace}: {exc.message}"
    return None


SIGNED_EVENTS: dict[str, str] = {**REQUEUE_SIGNERS, **{e: "genjob-receipt" for e in LEASE_EVENTS}}


def vouched_events(
    store: Store, key: str, tip: pygit2.Oid, base: pygit2.Oid, signers: list[Any], revoked: set[bytes]
) -> bool:
    """Whether any event from `base` (exclusive) to `tip` was written by a trusted key: a signed
    lease or requeue, or a receipt (signed by its worker; judged fully by verify). A chain that
    forks off a job with none of these is not a rival history another machine wrote: no worker
    and no owner wrote it (SPEC §11)."""
    oid = tip
    for _ in range(MAX_EVENTS):
        if oid == base:
            return False
        commit = store.get_commit(oid)
        if not commit.parent_ids:
            return False
        parent = store.get_commit(commit.parent_ids[0])
        event = parse_trailers(commit.message).get("Genjob-Event", "")
        namespace = SIGNED_EVENTS.get(event)
        if (
            namespace is not None
            and _signed_event_problem(store, key, commit, event, namespace, signers, revoked) is None
        ):
            return True
        if _entry_id(commit.tree, "receipt.json") not in (None, _entry_id(parent.tree, "receipt.json")):
            return True
        oid = commit.parent_ids[0]
    return True  # too long to judge: treat it as a rival, a person decides


def lease_problem(store: Store, record: JobRecord, signers: list[Any], revoked: set[bytes]) -> str | None:
    """Why a claimed or sending job's lease holds nothing up (None: it does). The event that set
    the lease (the chain's tip: a claim, `sending` or a renewal) must be signed by a worker key
    trusted for receipts (SPEC §11); anything else was forged, or written by a worker whose
    receipt would not verify, and `recover` fences it without waiting for it to run out."""
    assert record.tip is not None
    tip = store.get_commit(record.tip)
    event = parse_trailers(tip.message).get("Genjob-Event", "")
    if event not in LEASE_EVENTS:
        return f"its lease was set by a {event or 'nameless'} event"
    return _signed_event_problem(store, record.key, tip, event, "genjob-receipt", signers, revoked)


def requeue_problem(store: Store, record: JobRecord, signers: list[Any], revoked: set[bytes]) -> str | None:
    """Why a queued job may not be claimed again (None: it may). SPEC §4: an attempt that reached
    `sending` may have been answered, and only its worker (`failed`: nothing was sent) or its
    owner (`retried`) requeues it. Both sign that event (SPEC §11), so a requeue a remote
    appends never makes a worker send the job again."""
    assert record.tip is not None
    chain = events(store, record.tip)
    sent = [n for n, e in enumerate(chain) if e.event == JobEvent.SENDING]
    if not sent or _signed_requeue(store, record.key, chain[sent[-1] + 1 :], signers, revoked):
        return None
    return (
        "its last attempt reached the generator, and no signed requeue (its worker's 'failed' or its "
        "owner's 'retried') follows; never sent again by a worker"
    )


def _signed_requeue(store: Store, key: str, later: list[Event], signers: list[Any], revoked: set[bytes]) -> bool:
    """Whether one of the events `later` is a requeue signed by the writer REQUEUE_SIGNERS names."""
    for e in later:
        namespace = REQUEUE_SIGNERS.get(e.event)
        if namespace is None:
            continue
        commit = store.get_commit(e.commit)
        if _signed_event_problem(store, key, commit, e.event, namespace, signers, revoked) is None:
            return True
    return False
