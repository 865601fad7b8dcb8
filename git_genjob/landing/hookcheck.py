"""The hooks' full checks, run once a hook's cheap look (landing/hooks.py, libgit2-free) found
something to check: a commit message's Genjob-* trailers against the verified receipt, the
genjob commits and summary notes a push sends, and `[hooks] pre_apply`. Loads libgit2."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pygit2

from git_genjob.documents.config import read_config
from git_genjob.documents.errors import GenjobError
from git_genjob.landing.audit import audit_one
from git_genjob.landing.summary import FORGED
from git_genjob.landing.verify import TrustStore, check_receipt, trust_from_tree, trust_from_worktree
from git_genjob.storage.gitdir import clean_env, read_commit_trailers
from git_genjob.storage.layout import NOTES_REF, NOTES_REFS
from git_genjob.storage.notes import all_notes, read_note
from git_genjob.storage.records import find_job
from git_genjob.storage.store import Store

PushLine = tuple[str, str, str, str]  # local ref, local id, remote ref, remote id (hooks.PushLine)


def trailer_problems(trailers: dict[str, str]) -> list[str]:
    """What of a commit message's Genjob-* trailers the verified receipt of its job does not back."""
    store = Store.open()
    problems = []
    key = trailers.get("Genjob-Key")
    if not key:
        problems.append("Genjob-* trailers without Genjob-Key")
    else:
        try:
            record = find_job(store, key)
            verdict = check_receipt(store, record, trust_from_worktree(store))
            problems += verdict.failures()
            if trailers.get("Genjob-Job") != record.job.digest:
                problems.append(f"Genjob-Job is {trailers.get('Genjob-Job')}, job {key} is {record.job.digest}")
            if verdict.envelope and trailers.get("Genjob-Receipt") != verdict.envelope.digest:
                problems.append(
                    f"Genjob-Receipt is {trailers.get('Genjob-Receipt')}, receipt is {verdict.envelope.digest}"
                )
        except GenjobError as exc:  # any failure to find or read the job means: not backed
            problems.append(exc.message)
    return problems


def push_problems(
    remote: str, checked: list[PushLine], summaries: list[PushLine], pushing_notes: set[str]
) -> list[str]:
    """What fails in a push: each summary note pushed (`summaries`) and each genjob commit the
    `checked` refs send, audited, with its notes on the remote or in the push."""
    store = Store.open()
    notes_on_remote = _RemoteNotes(store, remote)
    problems = []
    for _local_ref, local_sha, _remote_ref, remote_sha in summaries:
        problems += _check_pushed_notes(store, local_sha, remote_sha)
    for _local_ref, local_sha, _remote_ref, remote_sha in checked:
        problems += _check_pushed(store, remote, local_sha, remote_sha, pushing_notes, notes_on_remote)
    return problems


def pre_apply_command() -> tuple[str | None, str]:
    """`[hooks] pre_apply` of .genjob/config.toml, and the directory it runs in."""
    store = Store.open()
    return read_config(store).pre_apply, store.workdir or store.gitdir


class _RemoteNotes:
    """Which commits the remote's refs/notes/genjob and refs/notes/genjob-receipts annotate
    (asked once, with one ls-remote, only if needed)."""

    def __init__(self, store: Store, remote: str):
        self.store, self.remote = store, remote
        self._notes: dict[str, set[str]] | None = None

    def has(self, ref: str, commit_id: str) -> bool:
        if self._notes is None:
            self._notes = self._load()
        return commit_id in self._notes.get(ref, set())

    def _load(self) -> dict[str, set[str]]:
        proc = subprocess.run(
            ["git", "ls-remote", self.remote, *NOTES_REFS], capture_output=True, text=True, env=clean_env()
        )
        out: dict[str, set[str]] = {}
        for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
            oid, _, ref = line.partition("\t")
            if ref in NOTES_REFS and self.store.has(oid):
                out[ref] = set(all_notes(self.store, self.store.get_commit(oid).tree))
        return out


def _check_pushed(
    store: Store, remote: str, local_sha: str, remote_sha: str, pushing_notes: set[str], notes: _RemoteNotes
) -> list[str]:
    problems: list[str] = []
    tip_trust: TrustStore | None = None
    commits = list(_new_commits(store, remote, local_sha, remote_sha))
    read_commit_trailers(store.gitdir, [(str(c.id), c.message) for c in commits])
    for commit in commits:
        tip_trust = tip_trust or trust_from_tree(store, store.get_commit(local_sha).tree)
        checked = audit_one(store, commit, tip_trust)
        if checked is None:
            continue
        short = str(commit.id)[:12]
        problems += [f"{short}: {p}" for p in checked.problems]
        if checked.ok and checked.merged:  # SPEC §11: say which pushed commits audit proved as merges
            print(f"git-genjob pre-push: {short} {checked.provenance}", file=sys.stderr)
        problems += _notes_left_behind(store, commit, remote, pushing_notes, notes)
    return problems


def _notes_left_behind(
    store: Store, commit: pygit2.Commit, remote: str, pushing_notes: set[str], notes: _RemoteNotes
) -> list[str]:
    """A pushed commit's notes that neither this push nor the remote carries."""
    short = str(commit.id)[:12]
    return [
        f"{short}: its note is not on {remote} ({ref}; run git genjob push first)"
        for ref in NOTES_REFS  # the summary and, since SPEC §11, the envelope in its own ref
        if read_note(store, commit.id, ref) is not None
        and ref not in pushing_notes
        and not notes.has(ref, str(commit.id))
    ]


def _check_pushed_notes(store: Store, local_sha: str, remote_sha: str) -> list[str]:
    """A push of refs/notes/genjob: every summary note it adds or changes must be the rendering
    of the verified receipt on its commit (landing.summary), else it is a forged summary."""
    new = all_notes(store, store.get_commit(local_sha).tree)
    old = all_notes(store, store.get_commit(remote_sha).tree) if _remote_has(store, remote_sha) else {}
    head = store.ref_target("HEAD")
    tip_trust = trust_from_tree(store, store.get_commit(head).tree) if head is not None else None
    problems = []
    for obj, blob in sorted(new.items()):
        if old.get(obj) != blob:
            problems += _summary_note_problems(store, obj, tip_trust)
    return problems


def _summary_note_problems(store: Store, obj: str, tip_trust: TrustStore | None) -> list[str]:
    """Why a summary note a push adds or changes on `obj` is forged (none: it is the rendering of
    the verified receipt there)."""
    if not store.has(obj):
        return [f"{obj[:12]}: {FORGED}: it annotates an object this repository does not have"]
    try:
        commit = store.get_commit(pygit2.Oid(hex=obj))
    except (GenjobError, ValueError, KeyError):
        return [f"{obj[:12]}: {FORGED}: it annotates an object that is not a commit"]
    checked = audit_one(store, commit, tip_trust or trust_from_tree(store, commit.tree))
    forged = [p for p in (checked.problems if checked else []) if p.startswith(FORGED)]
    return [f"{obj[:12]}: {p} ({NOTES_REF})" for p in forged]


def _remote_has(store: Store, remote_sha: str) -> bool:
    """Whether the remote's side of a pushed ref is a commit here (not the zeros of a new ref)."""
    return set(remote_sha) != {"0"} and store.has(remote_sha)


def _new_commits(store: Store, remote: str, local_sha: str, remote_sha: str) -> Iterator[pygit2.Commit]:
    """Commits the push sends: reachable from local_sha, not from what the remote already has."""
    hide = [oid for _name, oid in store.iter_refs(f"refs/remotes/{remote}/")]
    if _remote_has(store, remote_sha):
        hide.append(pygit2.Oid(hex=remote_sha))
    yield from store.walk(pygit2.Oid(hex=local_sha), hide)
