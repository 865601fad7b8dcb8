"""`log` and `audit`: provenance of commits and re-verification of genjob commits (SPEC §6)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pygit2

from git_genjob.documents.canonical import digest
from git_genjob.documents.config import read_config
from git_genjob.documents.display import printable
from git_genjob.documents.errors import BadInput, GenjobError, Painter, plain
from git_genjob.documents.job import check_key
from git_genjob.documents.receipt import (
    Predicate,
    check_output_paths,
    check_signature,
    parse_envelope,
    sandbox_problems,
)
from git_genjob.landing.apply import TRAILERS
from git_genjob.landing.verify import TrustStore, note_envelope, trust_from_tree
from git_genjob.storage.notes import read_note
from git_genjob.storage.records import load_archived, load_live, parse_trailers
from git_genjob.storage.store import Store


@dataclass
class CommitAudit:
    commit: str
    subject: str
    trailers: dict[str, str]
    problems: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # what audit could still prove, failing or not
    jobs: list[str] = field(default_factory=list)
    squashed: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def provenance(self) -> str:
        """One word for what holds: verified, squashed (N jobs), modified, unproven."""
        if self.squashed:
            return f"squashed with {len(self.jobs)} job{'s' if len(self.jobs) != 1 else ''}"
        if self.ok:
            return "verified"
        if any("commit diff != receipt outputs" in p for p in self.problems):
            return "outputs since modified"
        return "unproven"

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "subject": self.subject,
            "key": self.trailers.get("Genjob-Key"),
            "receipt": self.trailers.get("Genjob-Receipt"),
            "signer": self.trailers.get("Genjob-Signer"),
            "worker": self.trailers.get("Genjob-Worker"),
            "ok": self.ok,
            "problems": self.problems,
            "provenance": self.provenance,
            "facts": self.facts,
            "jobs": self.jobs or ([self.trailers["Genjob-Key"]] if "Genjob-Key" in self.trailers else []),
        }


def audit_lines(results: list[CommitAudit], quiet: bool = False, paint: Painter = plain) -> list[str]:
    """The human report of `audit`: each commit (failing ones only with `quiet`), then a count."""
    out = []
    for a in results:
        if quiet and a.ok:
            continue
        mark = paint("ok  ", "green") if a.ok else paint("FAIL", "red")
        out.append(f"{mark} {a.commit[:12]} {a.provenance:<22} {printable(a.subject)}")
        out += [f"       {printable(line)}" for line in a.facts + a.problems]  # they quote trailers and notes
    failing = sum(1 for a in results if not a.ok)
    return [*out, f"{len(results)} genjob commit(s), {failing} failing"]


def commits_in(store: Store, spec: str | None) -> list[pygit2.Commit]:
    """Commits of RANGE (`A..B` or a rev; default HEAD's history), newest first."""
    spec = spec or "HEAD"
    try:
        if ".." in spec:
            a, b = spec.split("..", 1)
            walker = store.walk(store.revparse_commit(b or "HEAD").id, [store.revparse_commit(a).id])
        else:
            walker = store.walk(store.revparse_commit(spec).id)
    except (KeyError, ValueError, pygit2.GitError):
        raise BadInput(f"{spec!r} is not a revision range", "give A..B or a branch") from None
    return list(walker)


def genjob_trailers(commit: pygit2.Commit) -> dict[str, str]:
    return {k: v for k, v in parse_trailers(commit.message).items() if k.startswith("Genjob-")}


def audit_commit(
    store: Store, commit: pygit2.Commit, tip_trust: TrustStore, trust_from: TrustStore | None = None
) -> CommitAudit:
    """SPEC §6's audit rule for one commit: trust is read from the commit itself, unless
    `trust_from` (`audit --trust-from REV`) names the store to use instead; revocations at the
    tip of RANGE hold either way."""
    t = genjob_trailers(commit)
    result = CommitAudit(str(commit.id), commit.message.splitlines()[0] if commit.message else "", t)
    p = result.problems
    missing = [name for name in TRAILERS if name not in t]
    if missing:
        p.append("missing trailers: " + ", ".join(missing))
    note = read_note(store, commit.id)
    parsed = note_envelope(note) if note else None
    if parsed is None:
        p.append(
            "no genjob note with an envelope on this commit (git genjob fetch brings notes)"
            + _copy_hint(store, commit, t)
        )
        return result
    raw = parsed[1]
    if digest(raw) != t.get("Genjob-Receipt"):
        p.append(f"note envelope hashes to {digest(raw)}, trailer says {t.get('Genjob-Receipt')}")
    try:
        env = parse_envelope(raw)
    except BadInput as exc:
        p.append(f"check 1: {exc.message}")
        return result
    pred = env.predicate
    here = trust_from if trust_from is not None else trust_from_tree(store, commit.tree)
    trust = TrustStore(here.signers, here.revoked | tip_trust.revoked)
    try:
        signer = check_signature(env, trust.signers, trust.revoked, float(commit.committer.time))
        if signer.keyid != t.get("Genjob-Signer"):
            p.append(f"signer is {signer.keyid}, trailer says {t.get('Genjob-Signer')}")
    except GenjobError as exc:
        p.append(f"check 2: {exc.message}" + ("" if trust_from is not None else TRUST_HINT))
    if pred.status != "ok":
        p.append(f"check 4: status is {pred.status}")
    p += [f"check 4: {x}" for x in sandbox_problems(pred, _require_sandbox(store, commit))]
    record = load_live(store, pred.key) or load_archived(store, pred.key)
    allowed = record.job.allowed_paths if record else list(pred.outputs)
    p += [f"check 5: {x}" for x in check_output_paths(pred, allowed)]
    for field_name, trailer in (("key", "Genjob-Key"), ("job_digest", "Genjob-Job"), ("worker_id", "Genjob-Worker")):
        value = getattr(pred, field_name)
        if value != t.get(trailer):
            p.append(f"receipt {field_name} is {value}, trailer {trailer} says {t.get(trailer)}")
    p += _diff_problems(store, commit, pred)
    if record is not None:
        if record.job.digest != t.get("Genjob-Job"):
            p.append(f"stored job digest is {record.job.digest}, trailer says {t.get('Genjob-Job')}")
        if commit.parents:
            from git_genjob.landing.verify import check_fresh

            p += [f"parent: {x}" for x in check_fresh(store, record, commit.parents[0].tree)]
    return result


def _copy_hint(store: Store, commit: pygit2.Commit, t: dict[str, str]) -> str:
    """A cherry-pick (or a rebase without notes.rewriteRef) leaves the note on the original."""
    record = load_archived(store, t.get("Genjob-Key", "")) if t.get("Genjob-Key") else None
    final = record.meta.final if record is not None else None
    if final is None or final.commit is None or final.commit == str(commit.id) or not store.has(final.commit):
        return ""
    return (
        f"; job {record.key if record else ''} was applied as {final.commit[:12]}: if this commit is its "
        f"cherry-pick, copy the note: git notes --ref=genjob copy {final.commit[:12]} {str(commit.id)[:12]}"
    )


GROUP_LINE = re.compile(r"^\s*(Genjob-(?:Key|Job|Receipt|Signer|Worker)):\s*(\S+)\s*$")


def genjob_groups(message: str) -> list[dict[str, str]]:
    """Every job named in a message, in order: a squash merge keeps each commit's trailers in
    its body (GitHub's default squash message), so a new group starts at each Genjob-Key."""
    groups: list[dict[str, str]] = []
    for line in message.splitlines():
        m = GROUP_LINE.match(line)
        if m is None:
            continue
        if m.group(1) == "Genjob-Key" or not groups:
            groups.append({})
        groups[-1].setdefault(m.group(1), m.group(2))
    return groups


def audit_one(
    store: Store, commit: pygit2.Commit, tip_trust: TrustStore, trust_from: TrustStore | None = None
) -> CommitAudit | None:
    """The audit of one commit that names a job (None for a commit that names none)."""
    trailers, groups = genjob_trailers(commit), genjob_groups(commit.message)
    if len({g.get("Genjob-Key") for g in groups}) > 1 or (groups and not trailers):
        return audit_squash(store, commit, groups, tip_trust, trust_from)  # trailers in the body
    if trailers:
        return audit_commit(store, commit, tip_trust, trust_from)
    return None


def audit_squash(
    store: Store,
    commit: pygit2.Commit,
    groups: list[dict[str, str]],
    tip_trust: TrustStore,
    trust_from: TrustStore | None = None,
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
            signer = check_signature(env, trust.signers, trust.revoked, float(commit.committer.time))
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


def audit(
    store: Store, spec: str | None, progress: Callable[[str], None] = lambda _: None, trust_from: str | None = None
) -> list[CommitAudit]:
    commits = commits_in(store, spec)
    tip_trust = trust_from_tree(store, commits[0].tree) if commits else TrustStore([], set())
    fixed = None
    if trust_from is not None:
        try:
            fixed = trust_from_tree(store, store.revparse_commit(trust_from).tree)
        except (KeyError, ValueError, pygit2.GitError):
            raise BadInput(f"--trust-from {trust_from!r} is not a commit", "give a branch, tag or commit") from None
    out = []
    for n, commit in enumerate(commits, 1):
        if n % 200 == 0:
            progress(f"audit: {n}/{len(commits)} commits")
        checked = audit_one(store, commit, tip_trust, fixed)
        if checked is not None:
            out.append(checked)
    return out
