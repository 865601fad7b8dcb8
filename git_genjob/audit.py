"""`log` and `audit`: provenance of commits and re-verification of genjob commits (SPEC §6)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pygit2

from git_genjob.apply import TRAILERS
from git_genjob.canonical import digest
from git_genjob.errors import BadInput, GenjobError
from git_genjob.notes import read_note
from git_genjob.receipt import Predicate, check_output_paths, check_signature, parse_envelope
from git_genjob.records import load_archived, load_live, parse_trailers
from git_genjob.store import Store
from git_genjob.verify import TrustStore, note_envelope, trust_from_tree


@dataclass
class CommitAudit:
    commit: str
    subject: str
    trailers: dict[str, str]
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

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
        }


def commits_in(store: Store, spec: str | None) -> list[pygit2.Commit]:
    """Commits of RANGE (`A..B` or a rev; default HEAD's history), newest first."""
    repo = store.repo
    spec = spec or "HEAD"
    try:
        if ".." in spec:
            a, b = spec.split("..", 1)
            walker = repo.walk(
                repo.revparse_single(b or "HEAD").peel(pygit2.Commit).id, pygit2.enums.SortMode.TOPOLOGICAL
            )
            walker.hide(repo.revparse_single(a).peel(pygit2.Commit).id)
        else:
            walker = repo.walk(repo.revparse_single(spec).peel(pygit2.Commit).id, pygit2.enums.SortMode.TOPOLOGICAL)
    except (KeyError, ValueError, pygit2.GitError):
        raise BadInput(f"{spec!r} is not a revision range", "give A..B or a branch") from None
    return list(walker)


def genjob_trailers(commit: pygit2.Commit) -> dict[str, str]:
    return {k: v for k, v in parse_trailers(commit.message).items() if k.startswith("Genjob-")}


def audit_commit(store: Store, commit: pygit2.Commit, tip_trust: TrustStore) -> CommitAudit:
    t = genjob_trailers(commit)
    result = CommitAudit(str(commit.id), commit.message.splitlines()[0] if commit.message else "", t)
    p = result.problems
    missing = [name for name in TRAILERS if name not in t]
    if missing:
        p.append("missing trailers: " + ", ".join(missing))
    note = read_note(store, commit.id)
    parsed = note_envelope(note) if note else None
    if parsed is None:
        p.append("no genjob note with an envelope on this commit (git genjob fetch brings notes)")
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
    here = trust_from_tree(store, commit.tree)
    trust = TrustStore(here.signers, here.revoked | tip_trust.revoked)
    try:
        signer = check_signature(env, trust.signers, trust.revoked, float(commit.committer.time))
        if signer.keyid != t.get("Genjob-Signer"):
            p.append(f"signer is {signer.keyid}, trailer says {t.get('Genjob-Signer')}")
    except GenjobError as exc:
        p.append(f"check 2: {exc.message}")
    if pred.status != "ok":
        p.append(f"check 4: status is {pred.status}")
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
            from git_genjob.verify import check_fresh

            p += [f"parent: {x}" for x in check_fresh(store, record, commit.parents[0].tree)]
    return result


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
            changed[delta.new_file.path] = digest(store.read(delta.new_file.id))
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


def audit(store: Store, spec: str | None, progress: Callable[[str], None] = lambda _: None) -> list[CommitAudit]:
    commits = commits_in(store, spec)
    tip_trust = trust_from_tree(store, commits[0].tree) if commits else TrustStore([], set())
    out = []
    for n, commit in enumerate(commits, 1):
        if n % 200 == 0:
            progress(f"audit: {n}/{len(commits)} commits")
        if genjob_trailers(commit):
            out.append(audit_commit(store, commit, tip_trust))
    return out
