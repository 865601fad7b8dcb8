"""Receipt verification: every check of SPEC §6, numbered as there, all failures reported."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pygit2

from git_genjob.documents.canonical import digest, parse_strict
from git_genjob.documents.config import read_config
from git_genjob.documents.display import printable
from git_genjob.documents.errors import EXIT_OK, EXIT_REFUSED, BadInput, GenjobError, Painter, Refused, plain
from git_genjob.documents.keys import TrustedKey
from git_genjob.documents.receipt import (
    Envelope,
    Predicate,
    check_output_paths,
    check_signature,
    parse_envelope,
    sandbox_problems,
)
from git_genjob.documents.states import Event, JobState
from git_genjob.landing.merge import check_merge
from git_genjob.planner.trust import TrustStore, job_trust, trust_from_tree, trust_from_worktree, untrusted_hint
from git_genjob.storage.blobs import blob_digests
from git_genjob.storage.records import JobRecord, find_job, parse_trailers
from git_genjob.storage.store import Store, blocking_prefix, lookup

__all__ = ["TrustStore", "trust_from_tree", "trust_from_worktree"]

CHECKS = {
    1: "envelope",
    2: "signature",
    3: "job",
    4: "status",
    5: "paths",
    6: "outputs",
    7: "fencing",
    8: "fresh",
    9: "planner",
}


@dataclass
class Check:
    n: int
    ok: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"check": self.n, "code": CHECKS[self.n], "ok": self.ok, "detail": self.detail}


@dataclass
class Verdict:
    key: str
    checks: list[Check] = field(default_factory=list)
    envelope: Envelope | None = None
    signer: TrustedKey | None = None
    record: JobRecord | None = None
    planner: TrustedKey | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def lines(self, paint: Painter = plain) -> list[str]:
        """The human report: every check, then whether the job is applyable."""
        out = []
        for c in sorted(self.checks, key=lambda c: c.n):
            mark = paint("ok  ", "green") if c.ok else paint("FAIL", "red")
            out.append(f"{mark} {c.n} {CHECKS[c.n]:<9} {printable(c.detail)}")  # a detail quotes the receipt
        return [*out, f"{self.key}: {'applyable' if self.ok else 'NOT applyable'}"]

    @property
    def exit_code(self) -> int:
        """`verify`'s exit: 0 only if applyable (SPEC §5)."""
        return EXIT_OK if self.ok else EXIT_REFUSED

    def failures(self) -> list[str]:
        return [f"check {c.n} ({CHECKS[c.n]}): {c.detail}" for c in self.checks if not c.ok]

    def add(self, n: int, problems: list[str], passed: str) -> None:
        self.checks.append(Check(n, not problems, "; ".join(problems) if problems else passed))

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "ok": self.ok,
            "checks": [c.to_json() for c in sorted(self.checks, key=lambda c: c.n)],
            "signer": self.signer.keyid if self.signer else None,
            "planner": self.planner.keyid if self.planner else None,
            "receipt": self.envelope.digest if self.envelope else None,
        }


def check_receipt(
    store: Store,
    record: JobRecord,
    trust: TrustStore,
    when: float | None = None,
    progress: Callable[[str], None] = lambda _: None,
    committed: TrustStore | None = None,
    require_sandbox: bool | None = None,
) -> Verdict:
    """Checks 1-7 of SPEC §6 against one stored job; collects every failure.

    `committed` is the trust store of the branch the outputs would land on: the applied commit
    carries that one, and `audit` and pre-push check it there, so a signer the work tree's
    uncommitted store alone trusts fails check 2 here too, not later at push time.
    `require_sandbox` is `[policy] require_sandbox` of that branch's .genjob/config.toml (None:
    the work tree's): check 4 then refuses a receipt whose generator ran unconfined.
    """
    verdict = Verdict(record.key, record=record)
    when = time.time() if when is None else when
    # 1. The envelope parses; payloadType and predicateType are exact.
    if record.receipt_bytes is None:
        verdict.add(1, [f"job {record.key} has no receipt (state {record.state})"], "")
        return verdict
    try:
        env = parse_envelope(record.receipt_bytes)
    except BadInput as exc:
        verdict.add(1, [exc.message], "")
        return verdict
    verdict.envelope = env
    verdict.add(1, [], "DSSE envelope around an in-toto Statement v1")
    pred = env.predicate
    # 2. A signature verifies with a trusted, in-window, unrevoked key.
    verdict.signer, problems, detail = _check_signer(env, trust, committed, when)
    verdict.add(2, problems, detail)
    # 3. key and job_digest equal the stored job's, recomputed from job.json.
    verdict.add(3, *_check_job_digest(record, pred))
    # 4. status is ok.
    if require_sandbox is None:
        require_sandbox = read_config(store).require_sandbox
    verdict.add(4, *_check_status(pred, require_sandbox))
    # 5. Output paths within allowed_paths, each safe.
    verdict.add(5, check_output_paths(pred, record.job.allowed_paths), "outputs within the allowed paths")
    # 6. Every stored output blob re-hashes to its declared digest.
    verdict.add(6, _check_blobs(store, record, pred, progress), f"{len(pred.outputs)} output(s) re-hashed")
    # 7. The signed claim is the claim event it sits on, with no fencing event after it.
    verdict.add(7, _check_fencing(store, record, pred), f"on claim {pred.claim[:12]}")
    # 9. The job itself is signed by a planner trusted for genjob-job (SPEC §11); check 3 tied
    #    the receipt to this job.json, whose bytes the planner's envelope signs.
    planned = job_trust(record.job_bytes, record.job_envelope, trust, when)
    verdict.planner = planned.signer
    verdict.add(9, [] if planned.ok else [f"job {record.key} is {planned.label}: {planned.detail}"], planned.detail)
    return verdict


def _check_signer(
    env: Envelope, trust: TrustStore, committed: TrustStore | None, when: float
) -> tuple[TrustedKey | None, list[str], str]:
    """Check 2: (the signer, the problems, what passed): a trusted, in-window, unrevoked key,
    trusted by the branch's committed store too (else audit and pre-push would fail the commit)."""
    signer = None
    try:
        signer = check_signature(env, trust.signers, trust.revoked, when)
        if committed is not None and committed != trust:
            try:
                check_signature(env, committed.signers, committed.revoked, when)
            except GenjobError:
                raise Refused(
                    f"signer {signer.principal} ({signer.keyid}) is trusted only by the uncommitted "
                    ".genjob/ of the work tree; the applied commit would fail audit and pre-push",
                ) from None
    except GenjobError as exc:  # Refused or BadInput: both are a failed check
        return signer, [exc.message, *trust.problems], ""
    return signer, [], f"signed by {signer.principal} ({signer.keyid})"


def _check_job_digest(record: JobRecord, pred: Predicate) -> tuple[list[str], str]:
    """Check 3: (the problems, what passed): the receipt's key and job digest are the stored job's."""
    recomputed = digest(record.job.canonical())
    problems = []
    if digest(record.job_bytes) != recomputed:
        problems.append("stored job.json is not canonical")
    if pred.key != record.key:
        problems.append(f"receipt key is {pred.key}, job key is {record.key}")
    if pred.job_digest != recomputed:
        problems.append(f"receipt job_digest is {pred.job_digest}, job.json hashes to {recomputed}")
    return problems, f"job {record.key} {recomputed}"


def _check_status(pred: Predicate, require_sandbox: bool) -> tuple[list[str], str]:
    """Check 4: (the problems, what passed): status ok with something to apply, and the sandbox
    `[policy] require_sandbox` asks for."""
    status = [] if pred.status == "ok" else [f"status is {pred.status}: {pred.reason}"]
    if pred.status == "ok" and not pred.outputs:  # never an empty commit
        status.append("status is ok but the receipt changes nothing: there is nothing to apply")
    status += sandbox_problems(pred, require_sandbox)
    return status, "ok" + (f" (sandbox: {pred.confinement.summary()})" if require_sandbox else "")


def next_step(verdict: Verdict) -> str:
    """What to do next, for the failures a newcomer meets first: a failed run, an unknown signer."""
    key = verdict.key
    failed = {c.n for c in verdict.checks if not c.ok}
    if failed == {4}:
        return (
            f"the worker ran but there is nothing to apply; ask again: git genjob retry {key} "
            f"(--refresh to skip a recorded model answer), or end it: git genjob drop {key} --why TEXT"
        )
    if failed == {8}:  # SPEC §11: it does not merge onto the target
        return (
            f"land it beside the branch for a human merge: git genjob apply {key} --branch genjob/{key}; "
            f"or mint a new job on the current content: git genjob resubmit {key}"
        )
    if _signer_failed(verdict, ("uncommitted .genjob/",)):
        return 'commit the trust store first: git add .genjob && git commit -m "genjob: trust store"'
    if _no_trust_store(verdict):
        return "this repository has no .genjob/ yet: run git genjob init, then git genjob trust add NAME KEY.pub"
    if _signer_failed(verdict, ("no signature verifies", "is empty")) and verdict.envelope is not None:
        hint = untrusted_hint(verdict.envelope)
        if hint:
            return hint
    return f"see: git genjob verify {key}"


def _signer_failed(verdict: Verdict, words: tuple[str, ...]) -> bool:
    """Whether check 2 failed with one of `words` in its detail."""
    return any(c.n == 2 and not c.ok and any(w in c.detail for w in words) for c in verdict.checks)


def _no_trust_store(verdict: Verdict) -> bool:
    """Whether the job's repository has a work tree without .genjob/allowed_signers."""
    store = verdict.record.store if verdict.record is not None else None
    return store is not None and bool(store.workdir) and store.worktree_file(".genjob/allowed_signers") is None


def _check_blobs(store: Store, record: JobRecord, pred: Predicate, progress: Callable[[str], None]) -> list[str]:
    # Each output is re-hashed with sha256 against its signed digest below, which subsumes
    # libgit2's own (slow, SHA-1) object check: skip that one for these reads only.
    pygit2.settings.enable_strict_hash_verification(False)
    try:
        return _rehash_outputs(store, record, pred, progress)
    finally:
        pygit2.settings.enable_strict_hash_verification(True)


def _rehash_outputs(store: Store, record: JobRecord, pred: Predicate, progress: Callable[[str], None]) -> list[str]:
    stored = record.output_oids()
    problems, want_blobs = _outputs_to_hash(store, stored, pred)
    digests = blob_digests(store, {stored[path] for path in want_blobs}, _hash_progress(progress, len(want_blobs)))
    for path, want in want_blobs.items():
        have = digests[stored[path]][0]
        if have != want:
            problems.append(f"{path}: stored blob hashes to {have}, receipt says {want}")
    for path in stored:
        if path not in pred.outputs:
            problems.append(f"{path}: output blob stored but not in the receipt")
    return problems


def _outputs_to_hash(store: Store, stored: dict[str, pygit2.Oid], pred: Predicate) -> tuple[list[str], dict[str, str]]:
    """(the problems of the receipt's outputs against the stored blobs, {path: signed digest} of
    each stored blob to re-hash): a deleted output has no blob, every other one a readable blob."""
    problems = []
    want_blobs = {}
    for path, want in pred.outputs.items():
        if want is None:
            if path in stored:
                problems.append(f"{path} is declared deleted but an output blob is stored")
        elif path not in stored:
            problems.append(f"{path}: no output blob stored")
        else:
            try:
                store.blob_size(stored[path])
                want_blobs[path] = want
            except (BadInput, KeyError) as exc:
                problems.append(f"{path}: the stored output cannot be read as a blob ({exc})")
    return problems, want_blobs


def _hash_progress(progress: Callable[[str], None], total: int) -> Callable[[int], None]:
    """Called with each hashed blob's size: a progress line per blob once 8 MiB are hashed."""
    hashed = [0, 0]

    def done(size: int) -> None:
        hashed[0] += 1
        hashed[1] += size
        if hashed[1] > 8 * 1024 * 1024:
            progress(f"verify: {hashed[0]}/{total} outputs, {hashed[1] // (1024 * 1024)} MiB hashed")

    return done


def _receipt_commit(store: Store, record: JobRecord) -> pygit2.Oid | None:
    if record.tip is not None:
        oid: pygit2.Oid | None = record.tip
        while oid is not None:
            commit = store.get_commit(oid)
            if parse_trailers(commit.message).get("Genjob-Event") == "receipt":
                return oid
            oid = _first_parent(commit)
        return None
    receipts = [c.commit for c in record.meta.chain if c.event == "receipt"]
    return pygit2.Oid(hex=receipts[-1]) if receipts else None


def _check_fencing(store: Store, record: JobRecord, pred: Predicate) -> list[str]:
    try:
        rc = _receipt_commit(store, record)
        if rc is None:
            return ["no receipt event in the job's chain"]
        receipt_commit = store.get_commit(rc)
        tree_receipt = store.file_at(receipt_commit.tree, "receipt.json")
        if tree_receipt != record.receipt_bytes:
            return ["the receipt differs from the one its receipt event stored"]
        return _events_since_claim(store, _first_parent(receipt_commit), pred)
    except (BadInput, KeyError, ValueError) as exc:
        return [f"cannot read the job's chain: {exc}"]


def _events_since_claim(store: Store, oid: pygit2.Oid | None, pred: Predicate) -> list[str]:
    """Walking down from `oid` (below the receipt event): only the attempt's sending and renewed
    events until its claim, which is the receipt's `claim` commit."""
    attempt = str(pred.attempt)
    while oid is not None:
        commit = store.get_commit(oid)
        t = parse_trailers(commit.message)
        if str(oid) == pred.claim:
            if t.get("Genjob-Event") != Event.CLAIMED or t.get("Genjob-Attempt") != attempt:
                return [f"commit {str(oid)[:12]} is not the claim of attempt {attempt}"]
            return []
        if t.get("Genjob-Event") not in (Event.SENDING, Event.RENEWED) or t.get("Genjob-Attempt") != attempt:
            return [f"a {t.get('Genjob-Event', '?')} event came between claim {pred.claim[:12]} and the receipt"]
        oid = _first_parent(commit)
    return [f"claim {pred.claim[:12]} is not in the chain below the receipt"]


def _first_parent(commit: pygit2.Commit) -> pygit2.Oid | None:
    return commit.parent_ids[0] if commit.parent_ids else None


def check_fresh(store: Store, record: JobRecord, tree: pygit2.Tree | None) -> list[str]:
    """Check 8: each allowed path in the target still has its input digest from job.json (null = absent).

    Only the digests in job.json count: the blobs stored under inputs/ lie outside the digest, and
    anyone who can push a ref could swap them. A leading directory of a path that is now a file
    (or anything but a directory) is a file/directory conflict, refused like a change.
    """
    problems = []
    for path, want in record.job.input_map.items():
        blocker = blocking_prefix(tree, path)
        if blocker is not None:
            problems.append(f"{path}: {blocker} is now a file, not a directory (a file/directory conflict)")
            continue
        entry = lookup(tree, path)
        if want is None:
            if entry is not None:
                problems.append(f"{path} now exists (the job expected to create it)")
        elif entry is None:
            problems.append(f"{path} is gone (want {want})")
        elif entry.type_str != "blob":
            problems.append(f"{path} is now a {entry.type_str}, not a file (want {want})")
        else:
            have = digest(store.read(entry.id, limit=None))  # the branch's own file
            if have != want:
                problems.append(f"{path} changed since it was submitted (want {want}, have {have})")
    return problems


def verify(
    store: Store, key: str, branch: str | None = None, progress: Callable[[str], None] = lambda _: None
) -> Verdict:
    record = find_job(store, key)
    if record.archived and record.state == JobState.APPLIED:
        head = store.head_commit()
        policy = read_config(store, head.tree).require_sandbox if head is not None else False
        verdict = check_receipt(store, record, trust_from_worktree(store), progress=progress, require_sandbox=policy)
        verdict.add(8, [], f"applied as {record.meta.final.commit if record.meta.final else '?'}")
        return verdict
    tree = target_tree(store, branch)
    verdict = check_for_target(store, record, tree, progress)
    pred = verdict.envelope.predicate if verdict.ok and verdict.envelope is not None else None
    # check 8 as SPEC §11 reads it: stale = does not merge
    verdict.add(8, *check_merge(store, record, pred, tree, check_fresh(store, record, tree)))
    return verdict


def check_for_target(
    store: Store, record: JobRecord, tree: pygit2.Tree | None, progress: Callable[[str], None] = lambda _: None
) -> Verdict:
    """Checks 1-7 as `verify` and `apply` run them: against the work tree's trust store and the
    one committed in `tree`, the target branch's, which the applied commit would carry."""
    return check_receipt(
        store,
        record,
        trust_from_worktree(store),
        progress=progress,
        committed=trust_from_tree(store, tree),
        require_sandbox=read_config(store, tree).require_sandbox if tree is not None else False,
    )


def target_tree(store: Store, branch: str | None) -> pygit2.Tree | None:
    if branch is None:
        head = store.head_commit()
        return head.tree if head is not None else None
    tip = store.ref_target(f"refs/heads/{branch}")
    if tip is None:
        raise BadInput(f"no branch {branch}", "create it first, or omit --branch")
    return store.get_commit(tip).tree


def note_envelope(note: bytes, want: str | None = None) -> tuple[str, bytes] | None:
    """(summary, envelope bytes) from a genjob note's JSON line: the one whose envelope hashes to
    `want` (a commit's Genjob-Receipt) when there is one, else the first. Notes merge as sorted
    unions of lines, so a line a remote added may sort before the real one."""
    first = None
    for doc in _envelope_lines(note):
        found = str(doc.get("summary", "")), doc["envelope"].encode("utf-8")
        if want is None or digest(found[1]) == want:
            return found
        first = first or found
    return first


def note_job(note: bytes, want: str | None) -> tuple[bytes, bytes | None] | None:
    """(job.json, the planner's envelope or None) the receipts note's JSON line for the envelope
    hashing to `want` carries (apply writes them beside the envelope, SPEC §11), or None."""
    for doc in _envelope_lines(note):
        if want is not None and digest(doc["envelope"].encode("utf-8")) != want:
            continue
        job, envelope = doc.get("job"), doc.get("job_envelope")
        if isinstance(job, str):
            return job.encode("utf-8"), envelope.encode("utf-8") if isinstance(envelope, str) else None
    return None


def _envelope_lines(note: bytes) -> Iterator[dict[str, Any]]:
    """Each JSON line of a note, in order, that parses strictly to an object with an envelope string."""
    for line in note.decode("utf-8", "replace").split("\n"):  # JSON may hold U+2028 raw
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = parse_strict(line.encode("utf-8"), "note")
        except BadInput:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("envelope"), str):
            yield doc
