"""`log` and `audit`: provenance of commits and re-verification of genjob commits (SPEC §6)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pygit2

from git_genjob.documents.canonical import digest
from git_genjob.documents.config import read_config
from git_genjob.documents.display import printable, usage_text
from git_genjob.documents.errors import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_UNAVAILABLE,
    BadInput,
    GenjobError,
    Painter,
    Unavailable,
    plain,
)
from git_genjob.documents.job import Job, check_key
from git_genjob.documents.receipt import (
    Predicate,
    check_output_paths,
    check_signature,
    parse_envelope,
    sandbox_problems,
)
from git_genjob.landing.merge import MERGED_TRAILER, audit_merged
from git_genjob.landing.summary import FORGED, Facts, Party, check, generator_label, quoted, renderings
from git_genjob.landing.verify import TrustStore, check_fresh, note_envelope, note_job, trust_from_tree
from git_genjob.landing.walk import BASE_HINT, Walk, commits_in, range_base, range_commit
from git_genjob.planner.trust import job_trust
from git_genjob.storage.archive import Archive
from git_genjob.storage.gitdir import (
    TRAILERS,
    attributions,
    canonical_trailer_key,
    genjob_trailers_of_commit,
    read_commit_trailers,
)
from git_genjob.storage.layout import NOTES_REF, RECEIPTS_REF
from git_genjob.storage.notes import note_blobs, note_path, read_note, receipt_note
from git_genjob.storage.records import JobRecord, load_archived, load_live
from git_genjob.storage.store import Store, lookup

NULL_OID = pygit2.Oid(hex="0" * 40)


@dataclass
class CommitAudit:
    commit: str
    subject: str
    trailers: dict[str, str]
    problems: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # what audit could still prove, failing or not
    # What this clone lacks to check (a shallow clone's boundary commit has no parent to diff
    # against): never a pass, never a failure verdict either.
    unchecked: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    squashed: bool = False
    merged: bool = False  # a merged apply (`Genjob-Merged-Onto`, SPEC §11)
    note: list[str] = field(default_factory=list)  # the verified summary (what git log shows), rendered
    forged_note: str | None = None  # a note in refs/notes/genjob that is not the rendering, quoted escaped
    envelope_ref: str | None = None  # the notes ref its envelope was read from (SPEC §11)
    # What the Markdown report shows beside the verdict (read from the receipt and the stored job).
    merged_onto: str | None = None
    instruction: str | None = None
    model: str | None = None
    sandbox: str | None = None
    planner: str | None = None
    signer_name: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and not self.unchecked

    @property
    def provenance(self) -> str:
        """One word for what holds: verified, squashed (N jobs), modified, unproven."""
        if self.squashed:
            return f"squashed with {len(self.jobs)} job{'s' if len(self.jobs) != 1 else ''}"
        if self.ok:
            return "verified (merged)" if self.merged else "verified"
        if any("commit diff != receipt outputs" in p or "!= recomputed merge" in p for p in self.problems):
            return "outputs since modified"
        if not self.problems:
            return "cannot check"
        return "unproven"

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "subject": self.subject,
            "key": self.trailers.get("Genjob-Key"),
            "receipt": self.trailers.get("Genjob-Receipt"),
            "signer": self.trailers.get("Genjob-Signer"),
            "signer_name": self.signer_name,
            "worker": self.trailers.get("Genjob-Worker"),
            "ok": self.ok,
            "problems": self.problems,
            "unchecked": self.unchecked,
            "provenance": self.provenance,
            "facts": self.facts,
            "note": self.note,
            "forged_note": self.forged_note,
            "envelope_ref": self.envelope_ref,
            "jobs": self.jobs or ([self.trailers["Genjob-Key"]] if "Genjob-Key" in self.trailers else []),
        }


def audit_lines(results: list[CommitAudit], quiet: bool = False, paint: Painter = plain) -> list[str]:
    """The human report of `audit`: each commit (failing ones only with `quiet`), then a count."""
    out = []
    for a in results:
        if quiet and a.ok:
            continue
        mark = paint("ok  ", "green") if a.ok else paint("FAIL", "red") if a.problems else paint("??  ", "yellow")
        out.append(f"{mark} {a.commit[:12]} {a.provenance:<22} {printable(a.subject)}")
        lines = a.facts + a.problems + a.unchecked
        out += [f"       {printable(line)}" for line in lines]  # they quote trailers and notes
    failing, unchecked = audit_counts(results)
    total = f"{len(results)} genjob commit(s), {failing} failing"
    return [*out, total + (f", {unchecked} cannot be checked in this clone" if unchecked else "")]


def audit_counts(results: list[CommitAudit]) -> tuple[int, int]:
    """(failing, cannot be checked): a commit with a problem fails whatever else it lacks."""
    failing = sum(1 for a in results if a.problems)
    return failing, sum(1 for a in results if not a.problems and a.unchecked)


def audit_exit(results: list[CommitAudit]) -> int:
    """1 when any commit fails; else 3 when any cannot be checked here (its parent was not
    fetched: a shallow clone), which is not a pass; else 0."""
    failing, unchecked = audit_counts(results)
    return EXIT_REFUSED if failing else EXIT_UNAVAILABLE if unchecked else EXIT_OK


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
    result = CommitAudit(str(commit.id), commit.message.splitlines()[0] if commit.message else "", t)
    p = result.problems
    missing = [name for name in TRAILERS if name not in t]
    if missing:
        p.append("missing trailers: " + ", ".join(missing))
    p += [
        f"unbacked attribution: Assisted-by names genjob receipt {printable(r)}, Genjob-Receipt is "
        f"{t.get('Genjob-Receipt')}"
        for r in attributions(commit.message)
        if r != t.get("Genjob-Receipt")
    ]
    if notes is None:
        found = receipt_note(store, commit.id)  # refs/notes/genjob-receipts, or a note from before the split
        summary = read_note(store, commit.id)
    else:
        found, summary = _given_notes(*notes)
    parsed = note_envelope(found[1], t.get("Genjob-Receipt")) if found else None
    if found is not None:
        result.envelope_ref = found[0]
    if parsed is None:
        if summary is not None:
            result.forged_note = quoted(summary)
            p.append(f"{FORGED}: no receipt on this commit backs it")
        p.append(
            f"no genjob note with an envelope on this commit (looked in {RECEIPTS_REF} and "
            f"{NOTES_REF}; git genjob fetch brings notes)" + _copy_hint(store, commit, t)
        )
        return result
    raw, ref_and_note = parsed[1], found
    assert ref_and_note is not None
    if digest(raw) != t.get("Genjob-Receipt"):
        p.append(f"note envelope hashes to {digest(raw)}, trailer says {t.get('Genjob-Receipt')}")
    try:
        env = parse_envelope(raw)
    except BadInput as exc:
        p.append(f"check 1: {exc.message}")
        return result
    pred = env.predicate
    result.model, result.sandbox = generator_label(pred.generator), pred.confinement.summary()
    here = trust_from if trust_from is not None else trust_from_tree(store, commit.tree)
    trust = TrustStore(here.signers, here.revoked | tip_trust.revoked)
    signer = None
    try:
        signer = check_signature(env, trust.signers, trust.revoked, _when(commit, now))
        result.signer_name = signer.principal
        if signer.keyid != t.get("Genjob-Signer"):
            p.append(f"signer is {signer.keyid}, trailer says {t.get('Genjob-Signer')}")
    except GenjobError as exc:
        p.append(f"check 2: {exc.message}" + ("" if trust_from is not None else TRUST_HINT))
    if pred.status != "ok":
        p.append(f"check 4: status is {pred.status}")
    p += [f"check 4: {x}" for x in sandbox_problems(pred, _require_sandbox(store, commit))]
    record = None
    if notes is None or note_job(ref_and_note[1], t.get("Genjob-Receipt")) is None:  # fetch reads no archive
        try:
            record = load_live(store, pred.key)
        except GenjobError as exc:  # a live ref a remote rewrote (SPEC §11): named, and the archive is read
            p.append(f"the live job ref is damaged: {exc.message}")
        record = record or load_archived(store, pred.key)
    job = _job_of(record, ref_and_note[1], t.get("Genjob-Receipt"))
    allowed = job[2].allowed_paths if job is not None else list(pred.outputs)
    p += [f"check 5: {x}" for x in check_output_paths(pred, allowed)]
    for field_name, trailer in (("key", "Genjob-Key"), ("job_digest", "Genjob-Job"), ("worker_id", "Genjob-Worker")):
        value = getattr(pred, field_name)
        if value != t.get(trailer):
            p.append(f"receipt {field_name} is {value}, trailer {trailer} says {t.get(trailer)}")
    absent = store.missing_parents(commit)
    merged_onto = result.merged_onto = t.get(MERGED_TRAILER)
    if notes is not None:
        pass  # the notes' own checks: the diff is the commit's, judged by audit when it is audited
    elif absent:
        result.unchecked.append(
            f"cannot check: parent {absent[0][:12]} not fetched (fetch-depth: 0 or git fetch --deepen); "
            "the commit's diff and the job's freshness are read against it"
        )
    elif merged_onto is not None:  # SPEC §11: the merge is recomputed in place of the diff and parent rules
        result.merged = True
        problems, facts = audit_merged(store, commit, record, pred, merged_onto)
        p += problems
        result.facts += facts
    else:
        p += _diff_problems(store, commit, pred)
    if job is None:
        p.append(
            "check 9: the job this receipt answers is neither stored here nor carried by its receipts note, so "
            "its planner's signature cannot be checked (git genjob fetch brings the archive)"
        )
        return result
    job_bytes, job_envelope, job_doc = job
    result.instruction = job_doc.instruction
    if digest(job_doc.canonical()) != pred.job_digest:
        p.append(f"check 3: the job hashes to {digest(job_doc.canonical())}, the receipt says {pred.job_digest}")
    # Check 9 (SPEC §11): a job no trusted planner signed fails, whatever signed its receipt.
    planned = job_trust(job_bytes, job_envelope, trust, _when(commit, now))
    result.planner = planned.detail if planned.ok else f"{planned.label}: {planned.detail}"
    if not planned.ok:
        p.append(f"check 9: the job is {planned.label}: {planned.detail}")
    else:
        result.facts.append(f"planner: {planned.detail}")
    if job_doc.digest != t.get("Genjob-Job"):
        p.append(f"stored job digest is {job_doc.digest}, trailer says {t.get('Genjob-Job')}")
    if not commit.message.startswith(message_head_of(job_doc, pred.key)):
        p.append("the commit message is not the one apply wrote: its subject or body is not the signed instruction")
    if notes is None and record is not None and commit.parents and not absent and merged_onto is None:
        p += [f"parent: {x}" for x in check_fresh(store, record, commit.parents[0].tree)]
    totals = (pred.model or {}).get("usage")
    if signer is not None and isinstance(totals, dict):  # from the receipt whose signature verified
        result.facts.append(f"model: {usage_text(totals)}")
    if signer is not None:
        rendered = Facts(
            pred.key,
            digest(raw),
            pred,
            Party(signer.principal, signer.keyid),
            Party(planned.signer.principal, planned.signer.keyid) if planned.signer is not None else None,
            job_doc.message_text,
        )
        _judge_summary(result, summary, ref_and_note, rendered, [here, trust_from_tree(store, commit.tree)])
    return result


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


def _job_of(record: JobRecord | None, note: bytes, receipt: str | None) -> tuple[bytes, bytes | None, Job] | None:
    """The job a receipt answers: the stored one, else the one its receipts note carries."""
    if record is not None:
        return record.job_bytes, record.job_envelope, record.job
    carried = note_job(note, receipt)
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
    expected: list[bytes] = []
    for named in _named(facts, stores):
        for want in renderings(named):
            if want not in expected:
                expected.append(want)
    if summary is None:
        result.note = []
    elif check(summary, expected, combined=found[0] == NOTES_REF):
        result.note = [line for line in expected[0].decode("utf-8").splitlines()]
    else:
        result.forged_note = quoted(summary)
        result.problems.append(f"{FORGED}: {NOTES_REF} does not hold what the verified receipt renders")
        result.note = []
    if found[0] == RECEIPTS_REF:
        carried = note_envelope(found[1], facts.receipt)
        line = carried[0] if carried else ""
        if line and line not in {want.decode("utf-8").splitlines()[0] for want in expected}:
            result.problems.append(f"{FORGED}: the receipts note's summary is not what the verified receipt renders")


def _named(facts: Facts, stores: list[TrustStore]) -> list[Facts]:
    """`facts` with signer and planner named each way one of `stores` names their keys."""

    def names(party: Party | None) -> list[Party | None]:
        if party is None:
            return [None]
        found = [Party(k.principal, k.keyid) for ts in stores for k in ts.signers if k.keyid == party.keyid]
        return list(dict.fromkeys([party, *found]))

    out = []
    for signer in names(facts.signer):
        assert signer is not None
        for planner in names(facts.planner):
            out.append(Facts(facts.key, facts.receipt, facts.pred, signer, planner, facts.instruction))
    return out


def _copy_hint(store: Store, commit: pygit2.Commit, t: dict[str, str]) -> str:
    """A cherry-pick (or a rebase without notes.rewriteRef) leaves the note on the original."""
    record = load_archived(store, t.get("Genjob-Key", "")) if t.get("Genjob-Key") else None
    final = record.meta.final if record is not None else None
    if final is None or final.commit is None or final.commit == str(commit.id) or not store.has(final.commit):
        return ""
    return (
        f"; job {record.key if record else ''} was applied as {final.commit[:12]}: if this commit is its "
        f"cherry-pick, copy the notes: "
        + "; ".join(
            f"git notes --ref={ref[len('refs/notes/') :]} copy {final.commit[:12]} {str(commit.id)[:12]}"
            for ref in (RECEIPTS_REF, NOTES_REF)
            if read_note(store, final.commit, ref) is not None
        )
    )


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
    if len({g.get("Genjob-Key") for g in groups}) > 1 or (groups and not trailers):
        result = audit_squash(store, commit, groups, tip_trust, trust_from, now)  # trailers in the body
        summary = read_note(store, commit.id)
        if summary is not None:  # apply never notes a squash: each job's note sits on its own commit
            result.forged_note = quoted(summary)
            result.problems.append(f"{FORGED}: a squash commit carries no genjob summary")
        return result
    if trailers:
        return audit_commit(store, commit, tip_trust, trust_from, now=now)
    claimed = attributions(commit.message)
    if claimed:  # SPEC §12.2: an attribution names a verified receipt on its own commit, or it is named
        subject = commit.message.splitlines()[0] if commit.message else ""
        unbacked = CommitAudit(str(commit.id), subject, {})
        unbacked.problems += [
            f"unbacked attribution: Assisted-by names genjob receipt {printable(r)}, but this commit has no "
            "Genjob trailers (genjob commits are made by git genjob apply)"
            for r in claimed
        ]
        return unbacked
    tree = notes_tree_of(store) if noted is True else noted
    if isinstance(tree, pygit2.Tree) and note_path(tree, str(commit.id)) is not None:
        return audit_unnamed(store, commit)
    return None


def notes_tree_of(store: Store) -> pygit2.Tree | None:
    tip = store.ref_target(NOTES_REF)
    return store.get_commit(tip).tree if tip is not None else None


def audit_unnamed(store: Store, commit: pygit2.Commit) -> CommitAudit:
    """A commit without Genjob trailers that carries a genjob summary note: no job made it, so
    the note claims what nothing signed."""
    subject = commit.message.splitlines()[0] if commit.message else ""
    result = CommitAudit(str(commit.id), subject, {})
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

    No note sits on a squash commit, so each receipt is read from the archive (or the live
    job) and trusted only because its digest is the one the message names and its signature
    verifies. Each output path then either still holds the signed content (intact) or was
    changed by a later commit of the squashed branch (since modified): a fact, not a failure,
    since the squash author's own edits are theirs. The squash commit's other changes are
    human-authored and are not claimed by any receipt.
    """
    subject = commit.message.splitlines()[0] if commit.message else ""
    result = CommitAudit(str(commit.id), subject, groups[0], squashed=True)
    here = trust_from if trust_from is not None else trust_from_tree(store, commit.tree)
    trust = TrustStore(here.signers, here.revoked | tip_trust.revoked)
    for g in groups:
        key = g.get("Genjob-Key", "?")
        result.jobs.append(key)
        p = []
        missing = [name for name in TRAILERS if name not in g]
        if missing:
            p.append("missing trailers: " + ", ".join(missing))
        try:
            check_key(key)
            record = load_archived(store, key) or load_live(store, key)
        except GenjobError as exc:
            result.problems.append(f"{key[:80]!r}: {exc.message}")
            continue
        if record is None or record.receipt_bytes is None:
            result.problems.append(f"{key}: no stored job with a receipt (git genjob fetch brings the archive)")
            continue
        raw = record.receipt_bytes
        if digest(raw) != g.get("Genjob-Receipt"):
            p.append(f"the stored receipt hashes to {digest(raw)}, the message says {g.get('Genjob-Receipt')}")
        try:
            env = parse_envelope(raw)
            pred = env.predicate
            signer = check_signature(env, trust.signers, trust.revoked, _when(commit, now))
            if signer.keyid != g.get("Genjob-Signer"):
                p.append(f"signer is {signer.keyid}, the message says {g.get('Genjob-Signer')}")
        except GenjobError as exc:
            result.problems.append(f"{key}: {exc.message}")
            continue
        if pred.status != "ok":
            p.append(f"check 4: status is {pred.status}")
        p += [f"check 4: {x}" for x in sandbox_problems(pred, _require_sandbox(store, commit))]
        p += [f"check 5: {x}" for x in check_output_paths(pred, record.job.allowed_paths)]
        for field_name, trailer in (
            ("key", "Genjob-Key"),
            ("job_digest", "Genjob-Job"),
            ("worker_id", "Genjob-Worker"),
        ):
            if getattr(pred, field_name) != g.get(trailer):
                p.append(f"receipt {field_name} is {getattr(pred, field_name)}, the message says {g.get(trailer)}")
        result.problems += [f"{key}: {x}" for x in p]
        if p:
            continue
        changed = [path for path, want in pred.outputs.items() if _digest_at(store, commit.tree, path) != want]
        if changed:
            result.facts.append(f"{key}: receipt verified; outputs since modified: {', '.join(sorted(changed))}")
        else:
            result.facts.append(f"{key}: receipt verified; outputs intact")
    return result


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
    outputs = pred.outputs
    if changed != outputs:
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
        return ["commit diff != receipt outputs: " + "; ".join(parts)]
    return []


TRUST_HINT = (
    " (trust is read from this commit's .genjob/; if it was applied before the trust store was committed, "
    "check it against a later one: git genjob audit --trust-from REV)"
)


def _prefetch(store: Store, commits: list[pygit2.Commit]) -> None:
    """A partial clone (git clone --filter=blob:none) lacks the notes and the changed files audit
    reads: fetch them in one batch first, not one process per blob."""
    named = [c for c in commits if "Genjob-" in (c.message or "")]
    want: list[pygit2.Oid] = note_blobs(store, [c.id for c in named])
    trees: list[pygit2.Tree] = []
    for c in [*named, *commits[:1]]:
        trust = lookup(c.tree, ".genjob")
        trees += [trust] if isinstance(trust, pygit2.Tree) else []
        for group in genjob_groups(c.message):
            entry = Archive(store).entry(group.get("Genjob-Key", "")) if group.get("Genjob-Key") else None
            trees += [entry] if entry is not None else []
        if len(c.parents) == 1:
            deltas = c.tree.diff_to_tree(c.parents[0].tree, swap=True).deltas
            want += [f.id for d in deltas for f in (d.new_file, d.old_file)]  # the diff and the freshness check
    want += [e.id for tree in trees for e in tree if e.type_str == "blob"]
    store.fetch_missing(w for w in want if w != NULL_OID)


def _notes_fetched(store: Store, commits: list[pygit2.Commit], spec: str | None | Walk) -> None:
    """A fresh `git clone` has no notes: one message with the fix and exit 3, not a FAIL per commit."""
    if any(store.ref_target(ref) is not None for ref in (NOTES_REF, RECEIPTS_REF)):
        return
    named = [c for c in commits if genjob_trailers(c, store.gitdir) or genjob_groups(c.message)]
    if not named or all(len({g.get("Genjob-Key") for g in genjob_groups(c.message)}) > 1 for c in named):
        return  # squash commits are read from the archive, not from notes
    names, where = store.remote_names(), spec.label if isinstance(spec, Walk) else spec or "HEAD"
    remote = "origin" if "origin" in names else names[0] if len(names) == 1 else "REMOTE"
    raise Unavailable(
        f"notes not fetched: {len(named)} genjob commit(s) in {where}, but this clone has no "
        f"{RECEIPTS_REF} or {NOTES_REF} (git clone does not fetch notes), so none can be checked",
        f"git genjob fetch {remote}",
    )


def audit(
    store: Store,
    spec: str | None | Walk,
    progress: Callable[[str], None] = lambda _: None,
    trust_from: str | None = None,
) -> list[CommitAudit]:
    commits = commits_in(store, spec)
    newest = commits[-1] if isinstance(spec, Walk) and spec.reverse and commits else commits[0] if commits else None
    tip_trust = trust_from_tree(store, newest.tree) if newest is not None else TrustStore([], set())
    fixed = None
    if trust_from is not None:
        try:
            fixed = trust_from_tree(store, store.revparse_commit(trust_from).tree)
        except (KeyError, ValueError, pygit2.GitError):
            raise BadInput(f"--trust-from {trust_from!r} is not a commit", "give a branch, tag or commit") from None
    now, base = None, range_base(spec)
    if base is not None:
        # SPEC §12.2: commits new in BASE..HEAD are judged by the trust in force now, read from
        # BASE unless --trust-from says otherwise: a branch cannot vouch for its own key, and no
        # verdict depends on a date a commit states.
        now = time.time()
        if fixed is None:
            fixed = trust_from_tree(store, range_commit(store, base, base).tree)
    if store.promisor_remote is not None:
        _prefetch(store, commits)
    read_commit_trailers(store.gitdir, [(str(c.id), c.message) for c in commits])  # one git for the range
    _notes_fetched(store, commits, spec)
    out = []
    noted = notes_tree_of(store)
    for n, commit in enumerate(commits, 1):
        if n % 200 == 0:
            progress(f"audit: {n}/{len(commits)} commits")
        checked = audit_one(store, commit, tip_trust, fixed, noted, now)
        if checked is not None:
            if base is not None and trust_from is None:
                checked.problems = [
                    p + (BASE_HINT.format(base=base) if p.startswith("check 2:") else "") for p in checked.problems
                ]
            out.append(checked)
    return out
