"""`log` and `audit`: provenance of commits and re-verification of genjob commits (SPEC §6)."""

from __future__ import annotations

import re

import pygit2

from git_genjob.documents.canonical import digest
from git_genjob.documents.config import read_config
from git_genjob.documents.display import printable, usage_text
from git_genjob.documents.errors import BadInput, GenjobError
from git_genjob.documents.job import Job, check_key
from git_genjob.documents.keys import TrustedKey
from git_genjob.documents.receipt import (
    Envelope,
    Predicate,
    check_output_paths,
    check_signature,
    parse_envelope,
    sandbox_problems,
)
from git_genjob.landing.merge import MERGED_TRAILER, audit_merged
from git_genjob.landing.summary import FORGED, Facts, Party, check, expected_renderings, generator_label, quoted
from git_genjob.landing.verdict import CommitAudit, audit_counts, audit_exit, audit_lines
from git_genjob.landing.verify import TrustStore, check_fresh, note_envelope, note_job, trust_from_tree
from git_genjob.planner.trust import JobTrust, job_trust
from git_genjob.storage.gitdir import (
    TRAILERS,
    attributions,
    canonical_trailer_key,
    genjob_trailers_of_commit,
)
from git_genjob.storage.layout import NOTES_REF, RECEIPTS_REF
from git_genjob.storage.notes import note_path, read_note, receipt_note
from git_genjob.storage.records import JobRecord, load_archived, load_live
from git_genjob.storage.store import Store

__all__ = ["CommitAudit", "audit_counts", "audit_exit", "audit_lines"]  # their home is landing.verdict


def genjob_trailers(commit: pygit2.Commit, gitdir: str | None = None) -> dict[str, str]:
    """The Genjob-* trailers as git reads them (SPEC §11: case-insensitive keys, git's separators)."""
    return genjob_trailers_of_commit(str(commit.id), commit.message, gitdir)


def audit_commit(
    store: Store,
    commit: pygit2.Commit,
    tip_trust: TrustStore,
    trust_from: TrustStore | None = None,
    notes: tuple[bytes | None, bytes | None] | None = None,
    now: float | None = None,
) -> CommitAudit:
    """SPEC §6's audit rule for one commit: trust is read from the commit itself, unless
    `trust_from` (`audit --trust-from REV`) names the store to use instead; revocations at the
    tip of RANGE hold either way. `notes` (receipts note, summary note) judges those instead of
    the notes refs' (fetch's quarantine checks a remote's notes before it takes them). `now`:
    judge keys' validity at that time, not at the date the commit states (a commit new in an
    audited range, SPEC §12.2)."""
    t = genjob_trailers(commit, store.gitdir)
    result = CommitAudit(str(commit.id), subject_of(commit), t)
    p = result.problems
    p += _trailer_problems(commit, t)
    found, summary = _given_notes(*notes) if notes is not None else _stored_notes(store, commit)
    noted = _noted_receipt(store, commit, result, found, summary)
    if noted is None:
        return result
    found, env = noted
    pred = env.predicate
    result.model, result.sandbox = generator_label(pred.generator), pred.confinement.summary()
    here, trust = _trust_for(store, commit, tip_trust, trust_from)
    signer = _check_signer(result, env, trust, _when(commit, now), trust_from is not None)
    p += _status_problems(store, commit, pred)
    record, job = _answered_job(store, pred, found[1], t.get("Genjob-Receipt"), p, judged_notes=notes is not None)
    p += [f"check 5: {x}" for x in check_output_paths(pred, _allowed_paths(job, pred))]
    p += _binding_problems(pred, t)
    absent = store.missing_parents(commit)
    _check_tree(store, result, commit, record, pred, judged_notes=notes is not None, absent=absent)
    if job is None:
        p.append(
            "check 9: the job this receipt answers is neither stored here nor carried by its receipts note, so "
            "its planner's signature cannot be checked (git genjob fetch brings the archive)"
        )
        return result
    planned = _check_job(result, commit, job, pred, trust, _when(commit, now))
    if notes is None and record is not None and not absent:
        p += _freshness_problems(store, result, commit, record)
    if signer is not None:  # what follows is read from the receipt whose signature verified
        facts = _verified_facts(result, env.raw, pred, signer, planned, job[2])
        _judge_summary(result, summary, found, facts, [here, trust_from_tree(store, commit.tree)])
    return result


def _noted_receipt(
    store: Store, commit: pygit2.Commit, result: CommitAudit, found: tuple[str, bytes] | None, summary: bytes | None
) -> tuple[tuple[str, bytes], Envelope] | None:
    """(where the envelope is, the envelope) the commit's notes hold for its Genjob-Receipt;
    None when they hold none or it does not parse (the problems added to `result`)."""
    result.envelope_ref = found[0] if found else None
    raw = _envelope_in(found, result.trailers)
    if found is None or raw is None:
        result.problems += _no_envelope_problems(store, commit, result, summary)
        return None
    env = _note_receipt(raw, result.trailers, result.problems)
    return (found, env) if env is not None else None


def _answered_job(
    store: Store, pred: Predicate, note: bytes, want: str | None, problems: list[str], judged_notes: bool
) -> tuple[JobRecord | None, tuple[bytes, bytes | None, Job] | None]:
    """(the job as stored here, the job the receipt answers: the stored one, else the one the
    receipts note carries beside the envelope hashing to `want`); notes judged before fetch
    takes them read no archive when they carry their job."""
    carried = note_job(note, want)
    record = _stored_record(store, pred.key, problems) if not judged_notes or carried is None else None
    return record, _job_of(record, carried)


def _allowed_paths(job: tuple[bytes, bytes | None, Job] | None, pred: Predicate) -> list[str]:
    """The paths the job allows its outputs (without the job: the receipt's own outputs)."""
    return job[2].allowed_paths if job is not None else list(pred.outputs)


def _envelope_in(found: tuple[str, bytes] | None, t: dict[str, str]) -> bytes | None:
    """The envelope the note holds for the commit's Genjob-Receipt (None: no note, or none in it)."""
    parsed = note_envelope(found[1], t.get("Genjob-Receipt")) if found else None
    return parsed[1] if parsed else None


def _note_receipt(raw: bytes, t: dict[str, str], problems: list[str]) -> Envelope | None:
    """Check 1: the note's envelope parsed (None when it does not parse), and its digest against
    the Genjob-Receipt trailer (both named in `problems`)."""
    if digest(raw) != t.get("Genjob-Receipt"):
        problems.append(f"note envelope hashes to {digest(raw)}, trailer says {t.get('Genjob-Receipt')}")
    try:
        return parse_envelope(raw)
    except BadInput as exc:
        problems.append(f"check 1: {exc.message}")
        return None


def subject_of(commit: pygit2.Commit) -> str:
    """The commit message's first line ("" for an empty message)."""
    return commit.message.splitlines()[0] if commit.message else ""


def _stored_notes(store: Store, commit: pygit2.Commit) -> tuple[tuple[str, bytes] | None, bytes | None]:
    """(where the envelope is, the summary) as the notes refs hold them: refs/notes/genjob-receipts,
    or a note from before the split."""
    return receipt_note(store, commit.id), read_note(store, commit.id)


def _no_envelope_problems(store: Store, commit: pygit2.Commit, result: CommitAudit, summary: bytes | None) -> list[str]:
    """A commit whose notes hold no envelope: a summary note there is forged, and the commit
    cannot be checked (with how to copy its notes when it is a cherry-pick of an applied job)."""
    problems = []
    if summary is not None:
        result.forged_note = quoted(summary)
        problems.append(f"{FORGED}: no receipt on this commit backs it")
    problems.append(
        f"no genjob note with an envelope on this commit (looked in {RECEIPTS_REF} and "
        f"{NOTES_REF}; git genjob fetch brings notes)" + _copy_hint(store, commit, result.trailers)
    )
    return problems


def _trust_for(
    store: Store, commit: pygit2.Commit, tip_trust: TrustStore, trust_from: TrustStore | None
) -> tuple[TrustStore, TrustStore]:
    """(the trust store read, the one judged by): the commit's own unless `trust_from` is given,
    with the revocations at the tip of the range added."""
    here = trust_from if trust_from is not None else trust_from_tree(store, commit.tree)
    return here, TrustStore(here.signers, here.revoked | tip_trust.revoked)


def _status_problems(store: Store, commit: pygit2.Commit, pred: Predicate) -> list[str]:
    """Check 4: the receipt's status, and its sandbox against the commit's `[policy]`."""
    problems = [f"check 4: status is {pred.status}"] if pred.status != "ok" else []
    return problems + [f"check 4: {x}" for x in sandbox_problems(pred, _require_sandbox(store, commit))]


def _freshness_problems(store: Store, result: CommitAudit, commit: pygit2.Commit, record: JobRecord) -> list[str]:
    """The stored job against the commit's first parent (no parent, or a merged apply: nothing)."""
    if not commit.parents or result.merged_onto is not None:
        return []
    return [f"parent: {x}" for x in check_fresh(store, record, commit.parents[0].tree)]


def _verified_facts(
    result: CommitAudit, raw: bytes, pred: Predicate, signer: TrustedKey, planned: JobTrust, job: Job
) -> Facts:
    """What the verified receipt and its job say, as the summary note renders it (the model's
    usage added to `result`'s facts)."""
    totals = (pred.model or {}).get("usage")
    if isinstance(totals, dict):
        result.facts.append(f"model: {usage_text(totals)}")
    planner = Party(planned.signer.principal, planned.signer.keyid) if planned.signer is not None else None
    return Facts(pred.key, digest(raw), pred, Party(signer.principal, signer.keyid), planner, job.message_text)


def _stored_record(store: Store, key: str, problems: list[str]) -> JobRecord | None:
    """The job as stored here: the live ref, else the archive (a live ref a remote rewrote is
    named in `problems`, SPEC §11, and the archive is read)."""
    record = None
    try:
        record = load_live(store, key)
    except GenjobError as exc:
        problems.append(f"the live job ref is damaged: {exc.message}")
    return record or load_archived(store, key)


def _trailer_problems(commit: pygit2.Commit, t: dict[str, str]) -> list[str]:
    """The trailers apply writes, all present, and no `Assisted-by` naming another receipt."""
    return _missing_trailers(t) + [
        f"unbacked attribution: Assisted-by names genjob receipt {printable(r)}, Genjob-Receipt is "
        f"{t.get('Genjob-Receipt')}"
        for r in attributions(commit.message)
        if r != t.get("Genjob-Receipt")
    ]


def _missing_trailers(t: dict[str, str]) -> list[str]:
    """The trailers apply writes that `t` lacks, as one problem (none when all are there)."""
    missing = [name for name in TRAILERS if name not in t]
    return ["missing trailers: " + ", ".join(missing)] if missing else []


def _check_signer(
    result: CommitAudit, env: Envelope, trust: TrustStore, when: float, trust_given: bool
) -> TrustedKey | None:
    """Check 2: the receipt's signer, trusted at `when` and the one `Genjob-Signer` names; None
    when no trusted key signed it (its problem added to `result`)."""
    try:
        signer = check_signature(env, trust.signers, trust.revoked, when)
    except GenjobError as exc:
        result.problems.append(f"check 2: {exc.message}" + ("" if trust_given else TRUST_HINT))
        return None
    result.signer_name = signer.principal
    if signer.keyid != result.trailers.get("Genjob-Signer"):
        result.problems.append(f"signer is {signer.keyid}, trailer says {result.trailers.get('Genjob-Signer')}")
    return signer


def _bindings(pred: Predicate) -> list[tuple[str, str, str]]:
    """(field, the trailer naming it, the receipt's value) of the receipt's key, job digest and worker."""
    pairs = (("key", "Genjob-Key"), ("job_digest", "Genjob-Job"), ("worker_id", "Genjob-Worker"))
    return [(name, trailer, getattr(pred, name)) for name, trailer in pairs]


def _binding_problems(pred: Predicate, t: dict[str, str]) -> list[str]:
    """The receipt's key, job digest and worker against the commit's trailers."""
    return [
        f"receipt {name} is {value}, trailer {trailer} says {t.get(trailer)}"
        for name, trailer, value in _bindings(pred)
        if value != t.get(trailer)
    ]


def _check_tree(
    store: Store,
    result: CommitAudit,
    commit: pygit2.Commit,
    record: JobRecord | None,
    pred: Predicate,
    judged_notes: bool,
    absent: list[str],
) -> None:
    """The commit's change against the receipt: its diff, or for a merged apply the merge
    recomputed in place of the diff and parent rules (SPEC §11); unchecked where a parent was
    not fetched; not judged here for notes checked before fetch takes them."""
    merged_onto = result.merged_onto = result.trailers.get(MERGED_TRAILER)
    if judged_notes:
        return  # the notes' own checks: the diff is the commit's, judged by audit when it is audited
    if absent:
        result.unchecked.append(
            f"cannot check: parent {absent[0][:12]} not fetched (fetch-depth: 0 or git fetch --deepen); "
            "the commit's diff and the job's freshness are read against it"
        )
    elif merged_onto is not None:
        result.merged = True
        problems, facts = audit_merged(store, commit, record, pred, merged_onto)
        result.problems += problems
        result.facts += facts
    else:
        result.problems += _diff_problems(store, commit, pred)


def _check_job(
    result: CommitAudit,
    commit: pygit2.Commit,
    job: tuple[bytes, bytes | None, Job],
    pred: Predicate,
    trust: TrustStore,
    when: float,
) -> JobTrust:
    """Checks 3 and 9 and the commit's message against the job the receipt answers: its digest,
    a trusted planner's signature (SPEC §11: a job no trusted planner signed fails, whatever
    signed its receipt), and the subject and body apply wrote from the signed instruction."""
    job_bytes, job_envelope, job_doc = job
    p, t = result.problems, result.trailers
    result.instruction = job_doc.instruction
    if digest(job_doc.canonical()) != pred.job_digest:
        p.append(f"check 3: the job hashes to {digest(job_doc.canonical())}, the receipt says {pred.job_digest}")
    planned = job_trust(job_bytes, job_envelope, trust, when)
    result.planner = planned.detail if planned.ok else f"{planned.label}: {planned.detail}"
    if not planned.ok:
        p.append(f"check 9: the job is {planned.label}: {planned.detail}")
    else:
        result.facts.append(f"planner: {planned.detail}")
    if job_doc.digest != t.get("Genjob-Job"):
        p.append(f"stored job digest is {job_doc.digest}, trailer says {t.get('Genjob-Job')}")
    if not commit.message.startswith(message_head_of(job_doc, pred.key)):
        p.append("the commit message is not the one apply wrote: its subject or body is not the signed instruction")
    return planned


def _when(commit: pygit2.Commit, now: float | None) -> float:
    return float(commit.committer.time) if now is None else now


def _given_notes(receipts: bytes | None, summary: bytes | None) -> tuple[tuple[str, bytes] | None, bytes | None]:
    """(where the envelope is, the summary) of candidate notes, as receipt_note reads the refs."""
    if receipts is not None and b'"envelope"' in receipts:
        return (RECEIPTS_REF, receipts), summary
    if summary is not None and b'"envelope"' in summary:
        return (NOTES_REF, summary), summary
    return None, summary


def message_head_of(job: Job, key: str) -> str:
    """The message head apply writes for `job` (landing.apply.message_head)."""
    instruction = job.message_text
    first = instruction.splitlines()[0] if instruction else key
    return f"genjob: {first}\n\n{instruction}\n\n"


def _job_of(
    record: JobRecord | None, carried: tuple[bytes, bytes | None] | None
) -> tuple[bytes, bytes | None, Job] | None:
    """The job a receipt answers: the stored one, else the one its receipts note carries."""
    if record is not None:
        return record.job_bytes, record.job_envelope, record.job
    if carried is None:
        return None
    try:
        return carried[0], carried[1], Job.from_bytes(carried[0])
    except GenjobError:
        return None


def _judge_summary(
    result: CommitAudit,
    summary: bytes | None,
    found: tuple[str, bytes],
    facts: Facts,
    stores: list[TrustStore],
) -> None:
    """The summary note counts only as a rendering of what verified (landing.summary): under the
    trust that verified it or the commit's own, in today's form or the one before it."""
    expected = expected_renderings(facts, [k for ts in stores for k in ts.signers])
    if summary is None:
        result.note = []
    elif check(summary, expected, combined=found[0] == NOTES_REF):
        result.note = [line for line in expected[0].decode("utf-8").splitlines()]
    else:
        result.forged_note = quoted(summary)
        result.problems.append(f"{FORGED}: {NOTES_REF} does not hold what the verified receipt renders")
        result.note = []
    if found[0] == RECEIPTS_REF and not _carries_rendering(found[1], facts.receipt, expected):
        result.problems.append(f"{FORGED}: the receipts note's summary is not what the verified receipt renders")


def _carries_rendering(note: bytes, receipt: str, expected: list[bytes]) -> bool:
    """Whether the summary line a receipts note carries beside the envelope hashing to `receipt`
    (none is fine) is the first line of one of the `expected` renderings."""
    carried = note_envelope(note, receipt)
    line = carried[0] if carried else ""
    return not line or line in {want.decode("utf-8").splitlines()[0] for want in expected}


def _copy_hint(store: Store, commit: pygit2.Commit, t: dict[str, str]) -> str:
    """A cherry-pick (or a rebase without notes.rewriteRef) leaves the note on the original."""
    record = load_archived(store, t.get("Genjob-Key", "")) if t.get("Genjob-Key") else None
    applied = _applied_as_other(store, commit, record)
    if applied is None:
        return ""
    return (
        f"; job {record.key if record else ''} was applied as {applied[:12]}: if this commit is its "
        f"cherry-pick, copy the notes: "
        + "; ".join(
            f"git notes --ref={ref[len('refs/notes/') :]} copy {applied[:12]} {str(commit.id)[:12]}"
            for ref in (RECEIPTS_REF, NOTES_REF)
            if read_note(store, applied, ref) is not None
        )
    )


def _applied_as_other(store: Store, commit: pygit2.Commit, record: JobRecord | None) -> str | None:
    """The commit the archived job was applied as, when that is another commit this repository has."""
    final = record.meta.final if record is not None else None
    if final is None or final.commit is None or final.commit == str(commit.id) or not store.has(final.commit):
        return None
    return final.commit


GROUP_LINE = re.compile(r"^\s*(Genjob-(?:Key|Job|Receipt|Signer|Worker)):\s*(\S+)\s*$", re.IGNORECASE)


def genjob_groups(message: str) -> list[dict[str, str]]:
    """Every job named in a message, in order: a squash merge keeps each commit's trailers in
    its body (GitHub's default squash message), so a new group starts at each Genjob-Key."""
    groups: list[dict[str, str]] = []
    for line in message.splitlines():
        m = GROUP_LINE.match(line)
        if m is None:
            continue
        name = canonical_trailer_key(m.group(1))  # keys are case-insensitive, as git reads trailers
        if name == "Genjob-Key" or not groups:
            groups.append({})
        groups[-1].setdefault(name, m.group(2))
    return groups


def names_several_jobs(groups: list[dict[str, str]]) -> bool:
    """Whether a message's trailer groups (genjob_groups) name more than one job: a squash commit."""
    return len({g.get("Genjob-Key") for g in groups}) > 1


def audit_one(
    store: Store,
    commit: pygit2.Commit,
    tip_trust: TrustStore,
    trust_from: TrustStore | None = None,
    noted: pygit2.Tree | None | bool = True,
    now: float | None = None,
) -> CommitAudit | None:
    """The audit of one commit that names a job or carries a genjob summary note (None for a
    commit that does neither). `noted` is refs/notes/genjob's tree (None: no notes; True: read it)."""
    trailers, groups = genjob_trailers(commit, store.gitdir), genjob_groups(commit.message)
    if names_several_jobs(groups) or (groups and not trailers):
        return audit_squash(store, commit, groups, tip_trust, trust_from, now)  # trailers in the body
    if trailers:
        return audit_commit(store, commit, tip_trust, trust_from, now=now)
    claimed = attributions(commit.message)
    if claimed:  # SPEC §12.2: an attribution names a verified receipt on its own commit, or it is named
        return _unbacked(commit, claimed)
    tree = notes_tree_of(store) if noted is True else noted
    if isinstance(tree, pygit2.Tree) and note_path(tree, str(commit.id)) is not None:
        return audit_unnamed(store, commit)
    return None


def _unbacked(commit: pygit2.Commit, claimed: list[str]) -> CommitAudit:
    """A commit without Genjob trailers whose message attributes it to genjob receipts."""
    unbacked = CommitAudit(str(commit.id), subject_of(commit), {})
    unbacked.problems += [
        f"unbacked attribution: Assisted-by names genjob receipt {printable(r)}, but this commit has no "
        "Genjob trailers (genjob commits are made by git genjob apply)"
        for r in claimed
    ]
    return unbacked


def notes_tree_of(store: Store) -> pygit2.Tree | None:
    tip = store.ref_target(NOTES_REF)
    return store.get_commit(tip).tree if tip is not None else None


def audit_unnamed(store: Store, commit: pygit2.Commit) -> CommitAudit:
    """A commit without Genjob trailers that carries a genjob summary note: no job made it, so
    the note claims what nothing signed."""
    result = CommitAudit(str(commit.id), subject_of(commit), {})
    note = read_note(store, commit.id) or b""
    result.forged_note = quoted(note)
    result.problems.append(f"{FORGED}: this commit has no Genjob trailers, so no job made it")
    return result


def audit_squash(
    store: Store,
    commit: pygit2.Commit,
    groups: list[dict[str, str]],
    tip_trust: TrustStore,
    trust_from: TrustStore | None = None,
    now: float | None = None,
) -> CommitAudit:
    """A commit carrying several jobs' trailers: what each job's receipt still proves.

    No note sits on a squash commit (a summary note there is forged), so each receipt is read
    from the archive (or the live job) and trusted only because its digest is the one the
    message names and its signature verifies. Each output path then either still holds the
    signed content (intact) or was changed by a later commit of the squashed branch (since
    modified): a fact, not a failure, since the squash author's own edits are theirs. The
    squash commit's other changes are human-authored and are not claimed by any receipt.
    """
    result = CommitAudit(str(commit.id), subject_of(commit), groups[0], squashed=True)
    trust = _trust_for(store, commit, tip_trust, trust_from)[1]
    for g in groups:
        key = g.get("Genjob-Key", "?")
        result.jobs.append(key)
        problems, fact = _squashed_job(store, commit, g, trust, _when(commit, now))
        result.problems += problems
        result.facts += fact
    summary = read_note(store, commit.id)
    if summary is not None:  # apply never notes a squash: each job's note sits on its own commit
        result.forged_note = quoted(summary)
        result.problems.append(f"{FORGED}: a squash commit carries no genjob summary")
    return result


def _squashed_job(
    store: Store, commit: pygit2.Commit, g: dict[str, str], trust: TrustStore, when: float
) -> tuple[list[str], list[str]]:
    """(problems, facts) of one job of a squash commit: its stored receipt, checked against the
    trailers the message keeps for it; once it verifies, whether its outputs are still intact."""
    key = g.get("Genjob-Key", "?")
    try:
        check_key(key)
        record = load_archived(store, key) or load_live(store, key)
    except GenjobError as exc:
        return [f"{key[:80]!r}: {exc.message}"], []
    if record is None or record.receipt_bytes is None:
        return [f"{key}: no stored job with a receipt (git genjob fetch brings the archive)"], []
    raw = record.receipt_bytes
    try:
        env = parse_envelope(raw)
        signer = check_signature(env, trust.signers, trust.revoked, when)
    except GenjobError as exc:
        return [f"{key}: {exc.message}"], []
    p = _against_message(store, commit, g, record, env, signer)
    if p:
        return [f"{key}: {x}" for x in p], []
    return [], [_outputs_fact(store, commit, key, env.predicate)]


def _against_message(
    store: Store, commit: pygit2.Commit, g: dict[str, str], record: JobRecord, env: Envelope, signer: TrustedKey
) -> list[str]:
    """A squashed job's verified receipt against the trailers the message keeps for it, and
    checks 4 and 5."""
    pred = env.predicate
    p = _missing_trailers(g)
    if digest(env.raw) != g.get("Genjob-Receipt"):
        p.append(f"the stored receipt hashes to {digest(env.raw)}, the message says {g.get('Genjob-Receipt')}")
    if signer.keyid != g.get("Genjob-Signer"):
        p.append(f"signer is {signer.keyid}, the message says {g.get('Genjob-Signer')}")
    p += _status_problems(store, commit, pred)
    p += [f"check 5: {x}" for x in check_output_paths(pred, record.job.allowed_paths)]
    return p + [
        f"receipt {name} is {value}, the message says {g.get(trailer)}"
        for name, trailer, value in _bindings(pred)
        if value != g.get(trailer)
    ]


def _outputs_fact(store: Store, commit: pygit2.Commit, key: str, pred: Predicate) -> str:
    """Whether a verified squashed job's outputs still hold the signed content in the commit."""
    changed = [path for path, want in pred.outputs.items() if _digest_at(store, commit.tree, path) != want]
    if changed:
        return f"{key}: receipt verified; outputs since modified: {', '.join(sorted(changed))}"
    return f"{key}: receipt verified; outputs intact"


def _require_sandbox(store: Store, commit: pygit2.Commit) -> bool:
    """`[policy] require_sandbox` of the audited commit's own .genjob/config.toml (a malformed
    file requires nothing here: audit names receipts, the config's own errors are reported elsewhere)."""
    try:
        return read_config(store, commit.tree).require_sandbox
    except GenjobError:
        return False


def _digest_at(store: Store, tree: pygit2.Tree, path: str) -> str | None:
    data = store.file_at(tree, path, limit=None)  # a file of the audited history
    return digest(data) if data is not None else None


def _diff_problems(store: Store, commit: pygit2.Commit, pred: Predicate) -> list[str]:
    """The commit's diff from its first parent is exactly the receipt's outputs."""
    changed = _changed_paths(store, commit)
    if changed == pred.outputs:
        return []
    return ["commit diff != receipt outputs: " + "; ".join(_output_mismatches(changed, pred.outputs))]


def _changed_paths(store: Store, commit: pygit2.Commit) -> dict[str, str | None]:
    """Each path the commit changes from its first parent: its new content's digest (None: deleted)."""
    parent_tree = commit.parents[0].tree if commit.parents else None
    changed: dict[str, str | None] = {}
    diff = (
        commit.tree.diff_to_tree(parent_tree, swap=True)
        if parent_tree is not None
        else commit.tree.diff_to_tree(swap=True)
    )
    for delta in diff.deltas:
        if delta.status == pygit2.enums.DeltaStatus.DELETED:
            changed[delta.old_file.path] = None
        else:
            changed[delta.new_file.path] = digest(store.read(delta.new_file.id, limit=None))
    return changed


def _output_mismatches(changed: dict[str, str | None], outputs: dict[str, str | None]) -> list[str]:
    """How a diff differs from the receipt's outputs: extra paths, other content, missing outputs."""
    extra = sorted(set(changed) - set(outputs))
    other = sorted(k for k in set(changed) & set(outputs) if changed[k] != outputs[k])
    lacking = sorted(set(outputs) - set(changed))
    parts = []
    if extra:
        parts.append("changes paths the receipt does not name: " + ", ".join(extra))
    if other:
        parts.append("content differs from the receipt at: " + ", ".join(other))
    if lacking:
        parts.append("lacks receipt outputs: " + ", ".join(lacking))
    return parts


TRUST_HINT = (
    " (trust is read from this commit's .genjob/; if it was applied before the trust store was committed, "
    "check it against a later one: git genjob audit --trust-from REV)"
)
