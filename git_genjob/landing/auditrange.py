"""`audit RANGE` and `log`'s walk (SPEC §6, §12.2): each commit of a range audited as
landing.audit judges one, under the trust the range's tip and base say; a partial clone's
missing objects fetched in one batch first, and a clone without notes told so once."""

from __future__ import annotations

import time
from collections.abc import Callable

import pygit2

from git_genjob.documents.errors import BadInput, Unavailable
from git_genjob.landing.audit import audit_one, genjob_groups, genjob_trailers, names_several_jobs, notes_tree_of
from git_genjob.landing.verdict import CommitAudit
from git_genjob.landing.verify import TrustStore, trust_from_tree
from git_genjob.landing.walk import BASE_HINT, Walk, commits_in, range_base, range_commit
from git_genjob.storage.archive import Archive
from git_genjob.storage.gitdir import read_commit_trailers
from git_genjob.storage.layout import NOTES_REF, RECEIPTS_REF
from git_genjob.storage.notes import note_blobs
from git_genjob.storage.store import Store, lookup

NULL_OID = pygit2.Oid(hex="0" * 40)


def _prefetch(store: Store, commits: list[pygit2.Commit]) -> None:
    """A partial clone (git clone --filter=blob:none) lacks the notes and the changed files audit
    reads: fetch them in one batch first, not one process per blob."""
    named = [c for c in commits if "Genjob-" in (c.message or "")]
    notes: list[pygit2.Oid] = note_blobs(store, [c.id for c in named])
    read = [*named, *commits[:1]]
    files = _files_read(Archive(store), read)
    diffs = [oid for c in read for oid in _diff_blobs(c)]
    store.fetch_missing(w for w in [*notes, *diffs, *files] if w != NULL_OID)


def _files_read(archive: Archive, commits: list[pygit2.Commit]) -> list[pygit2.Oid]:
    """The blobs of the trees auditing `commits` reads (their .genjob/, each named job's archive entry)."""
    trees = [tree for c in commits for tree in _trees_read(archive, c)]
    return [e.id for tree in trees for e in tree if e.type_str == "blob"]


def _trees_read(archive: Archive, commit: pygit2.Commit) -> list[pygit2.Tree]:
    """The trees whose files auditing `commit` reads: its .genjob/ and each named job's archive entry."""
    trust = lookup(commit.tree, ".genjob")
    keys = [g["Genjob-Key"] for g in genjob_groups(commit.message) if g.get("Genjob-Key")]
    entries = [archive.entry(key) for key in keys]
    return [t for t in [trust, *entries] if isinstance(t, pygit2.Tree)]


def _diff_blobs(commit: pygit2.Commit) -> list[pygit2.Oid]:
    """Both sides of a one-parent commit's diff: the diff check and the freshness check read them."""
    if len(commit.parents) != 1:
        return []
    deltas = commit.tree.diff_to_tree(commit.parents[0].tree, swap=True).deltas
    return [f.id for d in deltas for f in (d.new_file, d.old_file)]


def _notes_fetched(store: Store, commits: list[pygit2.Commit], spec: str | None | Walk) -> None:
    """A fresh `git clone` has no notes: one message with the fix and exit 3, not a FAIL per commit."""
    if any(store.ref_target(ref) is not None for ref in (NOTES_REF, RECEIPTS_REF)):
        return
    named = [c for c in commits if genjob_trailers(c, store.gitdir) or genjob_groups(c.message)]
    if all(names_several_jobs(genjob_groups(c.message)) for c in named):
        return  # none, or all squash commits: those are read from the archive, not from notes
    where = spec.label if isinstance(spec, Walk) else spec or "HEAD"
    raise Unavailable(
        f"notes not fetched: {len(named)} genjob commit(s) in {where}, but this clone has no "
        f"{RECEIPTS_REF} or {NOTES_REF} (git clone does not fetch notes), so none can be checked",
        f"git genjob fetch {_remote_name(store)}",
    )


def _remote_name(store: Store) -> str:
    """The remote to name in a fetch hint: origin, else the only one, else REMOTE."""
    names = store.remote_names()
    return "origin" if "origin" in names else names[0] if len(names) == 1 else "REMOTE"


def audit(
    store: Store,
    spec: str | None | Walk,
    progress: Callable[[str], None] = lambda _: None,
    trust_from: str | None = None,
) -> list[CommitAudit]:
    commits = commits_in(store, spec)
    tip_trust = _tip_trust(store, spec, commits)
    fixed, now, base = _judging_trust(store, spec, trust_from)
    if store.promisor_remote is not None:
        _prefetch(store, commits)
    read_commit_trailers(store.gitdir, [(str(c.id), c.message) for c in commits])  # one git for the range
    _notes_fetched(store, commits, spec)
    hint = BASE_HINT.format(base=base) if base is not None and trust_from is None else ""
    out = []
    noted = notes_tree_of(store)
    for n, commit in enumerate(commits, 1):
        if n % 200 == 0:
            progress(f"audit: {n}/{len(commits)} commits")
        checked = audit_one(store, commit, tip_trust, fixed, noted, now)
        if checked is not None:
            out.append(_with_base_hint(checked, hint))
    return out


def _with_base_hint(checked: CommitAudit, hint: str) -> CommitAudit:
    """`checked` with `hint` (where the range's trust was read) after each check-2 problem."""
    checked.problems = [p + (hint if p.startswith("check 2:") else "") for p in checked.problems]
    return checked


def _tip_trust(store: Store, spec: str | None | Walk, commits: list[pygit2.Commit]) -> TrustStore:
    """The trust store at the newest commit of the range, whose revocations hold for all of it."""
    newest = commits[-1] if isinstance(spec, Walk) and spec.reverse and commits else commits[0] if commits else None
    return trust_from_tree(store, newest.tree) if newest is not None else TrustStore([], set())


def _judging_trust(
    store: Store, spec: str | None | Walk, trust_from: str | None
) -> tuple[TrustStore | None, float | None, str | None]:
    """(the trust store every commit is judged by, None: each its own; the time keys are judged
    at, None: each commit's date; the range's BASE or None), from --trust-from and BASE..HEAD."""
    fixed = None
    if trust_from is not None:
        try:
            fixed = trust_from_tree(store, store.revparse_commit(trust_from).tree)
        except (KeyError, ValueError, pygit2.GitError):
            raise BadInput(f"--trust-from {trust_from!r} is not a commit", "give a branch, tag or commit") from None
    base = range_base(spec)
    if base is None:
        return fixed, None, None
    # SPEC §12.2: commits new in BASE..HEAD are judged by the trust in force now, read from
    # BASE unless --trust-from says otherwise: a branch cannot vouch for its own key, and no
    # verdict depends on a date a commit states.
    now = time.time()
    if fixed is None:
        fixed = trust_from_tree(store, range_commit(store, base, base).tree)
    return fixed, now, base
