"""Fetch's quarantine for the notes refs (SPEC §12.2): a remote's notes count only once checked.

`git genjob fetch` (and `push`, which fetches first) leave the remote's refs/notes/genjob and
refs/notes/genjob-receipts in their holding refs (refs/genjob-remotes/REMOTE/notes/…), and take
into the local notes only what verifies on this clone's commits:

- a receipts note whose envelope hashes to its commit's Genjob-Receipt trailer;
- a summary note that is exactly the rendering of the receipt that verifies there
  (landing.summary);
- where both sides hold a note on one commit and the local one verifies, the local one stays.

Every other note is refused and named with its commit and why (a note on a commit without
Genjob trailers, an edited summary, an envelope the trailer does not name). A note on a commit
this clone does not have cannot be checked: it is held (named, left in the holding ref) and taken
by a later fetch once the commit's branch is here. Nothing refused reaches the local notes'
history either, so `git log --notes` never shows it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pygit2

from git_genjob.landing.audit import CommitAudit, audit_commit, genjob_groups, genjob_trailers, names_several_jobs
from git_genjob.landing.summary import FORGED
from git_genjob.landing.verify import TrustStore, trust_from_tree
from git_genjob.storage.layout import NOTES_REF, RECEIPTS_REF
from git_genjob.storage.notes import all_notes, notes_tree
from git_genjob.storage.remote import SyncReport
from git_genjob.storage.store import RefUpdate, Store, lookup

REFS = (RECEIPTS_REF, NOTES_REF)  # the envelope first: the summary is judged against it
KEPT = "the remote's differs; the local note verifies and is kept"
ENVELOPE_PROBLEMS = ("no genjob note with an envelope", "note envelope hashes", "check 1:")


@dataclass
class _Side:
    tip: pygit2.Oid | None
    notes: dict[str, pygit2.Oid] = field(default_factory=dict)
    read: bool = False


def reconcile_notes(store: Store, remote_refs: dict[str, pygit2.Oid], report: SyncReport) -> None:
    """Take into the local notes refs what of the remote's verifies (module docstring)."""
    ours, theirs, todo = _sides(store, remote_refs)
    if not todo:
        return
    _read_all(store, ours)
    if store.promisor_remote is not None:
        _prefetch(store, todo, ours, theirs)
    tip_trust = _head_trust(store)
    taken: dict[str, dict[str, pygit2.Oid]] = {ref: {} for ref in REFS}
    refused: dict[str, list[str]] = {ref: [] for ref in REFS}
    held: dict[str, list[str]] = {ref: [] for ref in REFS}
    for obj in sorted(todo):
        _judge(store, obj, ours, theirs, tip_trust, taken, refused, held)
    for ref in REFS:
        _write(store, ref, ours[ref], theirs[ref], taken[ref], clean=not refused[ref] and not held[ref], report=report)
        report.refused_notes += refused[ref]
        report.held_notes += held[ref]


def _read_all(store: Store, sides: dict[str, _Side]) -> None:
    """Each side's notes read, where _sides left them unread: the summary is judged against the
    receipts note, new or not."""
    for side in sides.values():
        if not side.read:
            side.notes, side.read = _notes(store, side.tip), True


def _head_trust(store: Store) -> TrustStore:
    """The trust store at HEAD, whose revocations hold for every note judged (none: no HEAD)."""
    head = store.ref_target("HEAD")
    return trust_from_tree(store, store.get_commit(head).tree) if head is not None else TrustStore([], set())


def _sides(store: Store, remote_refs: dict[str, pygit2.Oid]) -> tuple[dict[str, _Side], dict[str, _Side], set[str]]:
    """(our notes refs, the remote's, the objects whose notes differ): each ref's notes are read
    only where the remote's tip brings something ours lacks."""
    ours: dict[str, _Side] = {}
    theirs: dict[str, _Side] = {}
    todo: set[str] = set()
    for ref in REFS:
        tip, remote = store.ref_target(ref), remote_refs.get(ref)
        ours[ref], theirs[ref] = _Side(tip), _Side(remote)
        if remote is None or remote == tip or (tip is not None and store.descendant_of(tip, remote)):
            continue  # nothing the remote has is new here: ours is what counts
        ours[ref].notes, theirs[ref].notes = _notes(store, tip), _notes(store, remote)
        ours[ref].read = True
        todo |= {obj for obj, blob in theirs[ref].notes.items() if ours[ref].notes.get(obj) != blob}
    return ours, theirs, todo


def _prefetch(store: Store, todo: set[str], ours: dict[str, _Side], theirs: dict[str, _Side]) -> None:
    """A partial clone lacks the notes' blobs and what judging them reads (each commit's trust
    store; the job travels in the receipts note): one batch, not one process per blob."""
    want = [side[ref].notes[obj] for side in (ours, theirs) for ref in REFS for obj in todo if obj in side[ref].notes]
    store.fetch_missing(want)
    trees = _trust_trees(store, todo)
    store.fetch_missing(e.id for tree in trees for e in tree if e.type_str == "blob")


def _trust_trees(store: Store, objs: set[str]) -> list[pygit2.Tree]:
    """The .genjob/ tree of each of `objs` that is a commit with one."""
    trees = []
    for obj in objs:
        if store.object_type(obj) != "commit":
            continue
        commit = store.get_commit(pygit2.Oid(hex=obj))
        trust = lookup(commit.tree, ".genjob")
        trees += [trust] if isinstance(trust, pygit2.Tree) else []
    return trees


def _notes(store: Store, tip: pygit2.Oid | None) -> dict[str, pygit2.Oid]:
    return all_notes(store, store.get_commit(tip).tree) if tip is not None else {}


def _judge(
    store: Store,
    obj: str,
    ours: dict[str, _Side],
    theirs: dict[str, _Side],
    tip_trust: TrustStore,
    taken: dict[str, dict[str, pygit2.Oid]],
    refused: dict[str, list[str]],
    held: dict[str, list[str]],
) -> None:
    """Decide the remote's notes on one annotated object."""
    new = _differing(obj, ours, theirs)
    commit = _landed_commit(store, obj, new, refused, held) if new else None
    if commit is None:
        return

    def audit(receipts: bytes | None, summary: bytes | None) -> CommitAudit:
        return audit_commit(store, commit, tip_trust, notes=(receipts, summary))

    receipts = _read(store, ours, RECEIPTS_REF, obj)
    verdicts: dict[str, str | None] = {}
    if RECEIPTS_REF in new:
        receipts, verdicts[RECEIPTS_REF] = _receipts_verdict(audit, receipts, _read(store, theirs, RECEIPTS_REF, obj))
    if NOTES_REF in new:
        verdicts[NOTES_REF] = _summary_verdict(
            audit, receipts, _read(store, ours, NOTES_REF, obj), lambda: _read(store, theirs, NOTES_REF, obj)
        )
    for ref, why in verdicts.items():
        if why is None:
            taken[ref][obj] = new[ref]
        else:
            refused[ref].append(f"{obj[:12]} {ref}: {why}")


Audit = Callable[[bytes | None, bytes | None], CommitAudit]  # the commit audited with these notes


def _read(store: Store, side: dict[str, _Side], ref: str, obj: str) -> bytes | None:
    """The note `side` holds on `obj` in `ref`, or None."""
    blob = side[ref].notes.get(obj)
    return store.read(blob) if blob is not None else None


def _receipts_verdict(audit: Audit, receipts: bytes | None, candidate: bytes | None) -> tuple[bytes | None, str | None]:
    """(the receipts note that counts, why the remote's is refused or None: taken): ours when
    its envelope verifies, else the remote's when its does."""
    if receipts is not None and _envelope_ok(audit(receipts, None)):
        return receipts, KEPT
    why = _envelope_why(audit(candidate, None))
    return (candidate if why is None else receipts), why


def _summary_verdict(
    audit: Audit, receipts: bytes | None, mine: bytes | None, candidate: Callable[[], bytes | None]
) -> str | None:
    """Why the remote's summary note is refused, or None (taken): ours stays when it renders the
    receipt that verifies, else the remote's counts only when it does."""
    if mine is not None and _summary_ok(audit(receipts, mine)):
        return KEPT
    checked = audit(receipts, candidate())
    if _summary_ok(checked):
        return None
    forged = [p for p in checked.problems if p.startswith(FORGED)]
    return forged[0] if forged else "its commit's receipt does not verify, so no summary of it counts"


def _differing(obj: str, ours: dict[str, _Side], theirs: dict[str, _Side]) -> dict[str, pygit2.Oid]:
    """The remote's notes on `obj` that differ from ours, by notes ref."""
    new: dict[str, pygit2.Oid] = {}
    for ref in REFS:
        blob = theirs[ref].notes.get(obj)
        if blob is not None and blob != ours[ref].notes.get(obj):  # a note the remote lacks: ours stays
            new[ref] = blob
    return new


def _landed_commit(
    store: Store, obj: str, new: dict[str, pygit2.Oid], refused: dict[str, list[str]], held: dict[str, list[str]]
) -> pygit2.Commit | None:
    """The commit `obj` names when genjob landed it (one job's Genjob trailers); else None, each of
    the remote's `new` notes on it held (the commit is not in this clone yet) or refused (it
    annotates no commit, or one no job landed)."""
    short = obj[:12]
    if store.object_type(obj) is None:
        for ref in new:
            held[ref].append(f"{short} {ref}: the commit is not in this clone (fetch its branch, then fetch again)")
        return None
    if store.object_type(obj) != "commit":
        for ref in new:
            refused[ref].append(f"{short} {ref}: {FORGED}: it annotates a {store.object_type(obj)}, not a commit")
        return None
    commit = store.get_commit(pygit2.Oid(hex=obj))
    if not genjob_trailers(commit, store.gitdir) or names_several_jobs(genjob_groups(commit.message)):
        for ref in new:
            refused[ref].append(
                f"{short} {ref}: {FORGED}: the commit has no Genjob trailers (or is a squash of several)"
            )
        return None
    return commit


def _envelope_why(a: CommitAudit) -> str | None:
    bad = [p for p in a.problems if p.startswith(ENVELOPE_PROBLEMS)]
    return bad[0] if bad else None


def _envelope_ok(a: CommitAudit) -> bool:
    return _envelope_why(a) is None


def _summary_ok(a: CommitAudit) -> bool:
    return a.signer_name is not None and a.forged_note is None and not any(p.startswith(FORGED) for p in a.problems)


def _write(
    store: Store,
    ref: str,
    ours: _Side,
    theirs: _Side,
    taken: dict[str, pygit2.Oid],
    clean: bool,
    report: SyncReport,
) -> None:
    """Move `ref` to hold what was taken: the remote's own commit when everything of it was, a
    commit on ours (no refused note in its history) otherwise."""
    if theirs.tip is None or not taken:
        return
    merged = {**ours.notes, **taken}
    if clean and merged == theirs.notes and (ours.tip is None or store.descendant_of(theirs.tip, ours.tip)):
        store.update_refs([RefUpdate(ref, ours.tip, theirs.tip)], message="genjob: fetch")  # all of it verified
        report.updated.append(ref)
        return
    if clean and ours.tip is not None:
        new = store.commit(notes_tree(store, merged), [ours.tip, theirs.tip], "genjob: merge notes\n")
        store.update_refs([RefUpdate(ref, ours.tip, new)], message="genjob: merge")
        report.merged.append(ref)
        return
    parents = [ours.tip] if ours.tip is not None else []
    new = store.commit(notes_tree(store, merged), parents, "genjob: notes that verified\n")
    store.update_refs([RefUpdate(ref, ours.tip, new)], message="genjob: fetch (checked notes)")
    report.updated.append(ref)
