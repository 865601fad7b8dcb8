"""Sync refs/genjob/* and the notes with a remote through the git CLI (leases, never force)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pygit2

from git_genjob.documents.errors import BadInput, Conflict, GenjobError, Refused, RemoteUnavailable
from git_genjob.documents.job import Job, is_key, job_signer
from git_genjob.storage.archive import Archive, union_rows
from git_genjob.storage.faults import crash_point
from git_genjob.storage.gitdir import clean_env
from git_genjob.storage.layout import (
    ARCHIVE_REF,
    GENJOB_PREFIX,
    JOBS_PREFIX,
    NOTES_REF,
    NOTES_REFS,
    RECEIPTS_REF,
    REPLAYS_REF,
    TRACK,
)
from git_genjob.storage.notes import all_notes, merge_notes, notes_tree
from git_genjob.storage.records import JOB_ENVELOPE, chain_root, vouch_problem, vouched_events
from git_genjob.storage.store import RefUpdate, Store


def fetch_refspecs(remote: str, prefix: str | None = None) -> list[str]:
    """Refspecs that never make a plain `git fetch` fail (globs tolerate missing refs): only the
    refs genjob writes. A remote ref elsewhere under refs/genjob/ (refs/genjob/notes/genjob, say,
    pushed by anyone with push access) would track where refs/notes/genjob* do under a broad
    `refs/genjob/*` spec, and git refuses a fetch that maps two refs to one. `prefix`: where they
    track (init's config: refs/genjob-remotes/REMOTE/; a fetch: `tracking_prefix`)."""
    prefix = prefix or f"{TRACK}{remote}/"
    return [
        f"+{JOBS_PREFIX}*:{prefix}jobs/*",
        f"+{ARCHIVE_REF}*:{prefix}archive*",
        f"+{REPLAYS_REF}*:{prefix}replays*",
        f"+{NOTES_REF}*:{prefix}{NOTES_REF.removeprefix('refs/')}*",
    ]


def broad_refspec(remote: str) -> str:
    """The refspec `init` added before it named the refs genjob writes (replaced by `init`)."""
    return f"+{GENJOB_PREFIX}*:{TRACK}{remote}/*"


def git(store: Store, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        ["git", f"--git-dir={store.gitdir}", *args],
        capture_output=True,
        text=True,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
    )
    if check and proc.returncode != 0:
        raise RemoteUnavailable(
            f"git {' '.join(args[:2])} failed: {proc.stderr.strip()}",
            "check that the remote exists and is reachable (git remote -v)",
        )
    return proc


def default_remote(store: Store) -> str:
    names = store.remote_names()
    if "origin" in names:
        return "origin"
    if len(names) == 1:
        return names[0]
    raise BadInput("no remote given and no single default", "name one: git genjob push REMOTE")


def check_remote(store: Store, remote: str) -> str:
    if remote in store.remote_names() or "/" in remote or remote.startswith("."):
        return remote
    raise BadInput(f"no remote named {remote!r}", "add it with git remote add, or give a URL or path")


def tracking_prefix(remote: str) -> str:
    safe = remote if remote.replace("-", "").replace("_", "").replace(".", "").isalnum() else "url-" + _hash(remote)
    return f"{TRACK}{safe}/"


def _hash(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()[:12]


# A fetch starts `git maintenance run --auto` (gc --auto before git 2.29) after it ends: a process
# per fetch, and a worker fetches about once a second. These keep it from starting (older gits
# ignore maintenance.auto; gc.auto=0 is the same for them). The remote's own `gc --auto` after each
# push is its config's (receive.autogc, see docs/performance.md): `-c` here does not reach it.
NO_AUTO_MAINTENANCE = ("-c", "maintenance.auto=false", "-c", "gc.auto=0")


def fetch_raw(store: Store, remote: str) -> dict[str, pygit2.Oid]:
    """Fetch the remote's genjob refs into tracking refs; {remote ref name: oid}."""
    prefix = tracking_prefix(remote)
    git(
        store,
        *NO_AUTO_MAINTENANCE,
        "fetch",
        "--no-tags",
        "--prune",
        "--quiet",
        remote,
        *fetch_refspecs(remote, prefix),  # only the refs genjob writes
    )
    out: dict[str, pygit2.Oid] = {}
    for name, oid in store.iter_refs(prefix):
        rest = name[len(prefix) :]
        out[("refs/" + rest) if rest.startswith("notes/") else (GENJOB_PREFIX + rest)] = oid
    return out


def push_leases(store: Store, remote: str, updates: list[RefUpdate]) -> None:
    """One atomic `git push` with a lease per ref; a rejection is a lost race (exit 4)."""
    if not updates:
        return
    leases, specs = _leased(updates)
    proc = git(store, "push", "--porcelain", "--atomic", "--no-verify", *leases, remote, *specs, check=False)
    if proc.returncode == 0:
        return
    _raise_if_declined(proc, remote)
    rejected = _rejected(proc)
    if rejected or "stale info" in proc.stderr or "rejected" in proc.stdout + proc.stderr:
        raise Conflict(
            "the remote moved: " + (", ".join(rejected) or "push rejected"),
            "another machine wrote first; git genjob fetch, then try again",
        )
    raise RemoteUnavailable(f"git push to {remote} failed: {proc.stderr.strip()}", "check the remote")


def push_each(store: Store, remote: str, updates: list[RefUpdate]) -> set[str]:
    """One `git push` (not atomic) with a lease per ref: the remote decides each ref on its own
    lease, so one ref's lost race never holds back another's update. The names it refused."""
    leases, specs = _leased(updates)
    proc = git(store, "push", "--porcelain", "--no-verify", *leases, remote, *specs, check=False)
    _raise_if_declined(proc, remote)
    rejected = set(_rejected(proc))
    if proc.returncode != 0 and not rejected:
        raise RemoteUnavailable(f"git push to {remote} failed: {proc.stderr.strip()}", "check the remote")
    return rejected


def _leased(updates: list[RefUpdate]) -> tuple[list[str], list[str]]:
    """The `--force-with-lease` options and the refspecs that push `updates`, each leased on its expected value."""
    leases = [f"--force-with-lease={u.name}:{u.expected or ''}" for u in updates]
    specs = [f"{u.new}:{u.name}" if u.new is not None else f":{u.name}" for u in updates]
    return leases, specs


def _rejected(proc: subprocess.CompletedProcess[str]) -> list[str]:
    """The refs a `git push --porcelain` rejected (its `!` lines), in its order."""
    return [line.split("\t")[1].split(":")[-1] for line in proc.stdout.splitlines() if line.startswith("!\t")]


def _raise_if_declined(proc: subprocess.CompletedProcess[str], remote: str) -> None:
    """A push the remote's own hook declined lost no race: no lease decided it, and pushing again
    (another job, the same receipt) meets the same hook. Refused (exit 1), in the remote's words."""
    declined = [line for line in proc.stdout.splitlines() if line.startswith("!\t") and "hook declined" in line]
    if declined:
        said = [line[len("remote: ") :] for line in proc.stderr.splitlines() if line.startswith("remote: ")]
        raise Refused(
            f"{remote} refused the push: its hook declined it" + (f" ({said[0].strip()})" if said else ""),
            "the remote's hooks decide what it takes (ask its admin); nothing was lost here: the jobs are as "
            "the remote holds them, a job whose receipt was refused stays sending until git genjob recover",
            details=[line.split("\t", 1)[1] for line in declined] + said,
        )


@dataclass
class SyncReport:
    updated: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)
    pushed: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # remote refs that name no commit or no job: left alone
    kept: list[str] = field(default_factory=list)  # live jobs an archive entry this clone cannot vouch for did not end
    recovered: list[str] = field(default_factory=list)  # ledger refs moved backwards outside genjob, merged back
    refused_notes: list[str] = field(default_factory=list)  # a remote's notes that did not verify: not taken
    held_notes: list[str] = field(default_factory=list)  # a remote's notes on commits this clone lacks: not yet

    def to_json(self) -> dict[str, list[str]]:
        return dict(self.__dict__)

    def warnings(self) -> list[str]:
        """What stderr names: each of the remote's notes that was not taken, and why."""
        return [f"warning: refused note {n}" for n in self.refused_notes] + [
            f"warning: held note {n}" for n in self.held_notes
        ]

    def lines(self, headline: str) -> list[str]:
        """The human report under `headline`."""
        labels = ("created", "updated", "merged", "dropped", "pushed", "kept", "recovered")
        return [headline] + [_named(label, getattr(self, label)) for label in labels if getattr(self, label)]


SHOWN = 10  # refs named per line of a report; --json lists every one


def _named(label: str, names: list[str]) -> str:
    """`  label: a, b, c` for a few refs, `  label: 20000 refs (a, b, … and 19990 more; --json lists all)`."""
    if len(names) <= SHOWN:
        return f"  {label}: {', '.join(names)}"
    return f"  {label}: {len(names)} refs ({', '.join(names[:SHOWN])} and {len(names) - SHOWN} more; --json lists all)"


def _relation(store: Store, local: pygit2.Oid | None, remote: pygit2.Oid) -> str:
    if local is None:
        return "absent"
    if local == remote:
        return "same"
    if store.descendant_of(remote, local):
        return "behind"
    if store.descendant_of(local, remote):
        return "ahead"
    return "diverged"


def merge_union(store: Store, local: pygit2.Oid, remote: pygit2.Oid) -> pygit2.Oid:
    """A two-parent commit whose tree is the union of both trees: how the shared ledgers kept
    as union trees (the archive, the replay cache) merge; notes merge in notes.merge_notes."""
    a, b = store.get_commit(local), store.get_commit(remote)
    return store.commit(store.union_tree(a.tree, b.tree, merge_blobs=union_rows), [local, remote], "genjob: merge\n")


NotesReconciler = Callable[[Store, dict[str, pygit2.Oid], SyncReport], None]


def reconcile(
    store: Store, remote_refs: dict[str, pygit2.Oid], report: SyncReport, notes: NotesReconciler | None = None
) -> None:
    """Bring local refs up to what the remote holds, without losing local work. The notes refs
    are taken only through `notes` (landing.quarantine: only notes that verify, SPEC §12.2);
    without it they stay in their holding refs."""
    recover_kept(store, report)
    remote_refs = _importable(store, remote_refs, report)
    for name, merge in (
        (ARCHIVE_REF, merge_union),
        (REPLAYS_REF, merge_union),
    ):
        if name in remote_refs:
            _reconcile_mergeable(store, name, remote_refs[name], merge, report)
    if notes is not None:
        notes(store, {r: remote_refs[r] for r in NOTES_REFS if r in remote_refs}, report)
    forward = _job_moves(store, remote_refs, report)  # job refs the remote advanced: one transaction, one sync
    # each checked against the value read: a local writer since is a conflict (exit 4); a
    # transaction holds a lock file open per ref, so at most REFS_PER_TRANSACTION at a time
    for i in range(0, len(forward), REFS_PER_TRANSACTION):
        store.update_refs(forward[i : i + REFS_PER_TRANSACTION], message="genjob: fetch")
    _drop_archived_live(store, report)


def _importable(store: Store, remote_refs: dict[str, pygit2.Oid], report: SyncReport) -> dict[str, pygit2.Oid]:
    """The remote refs genjob could have written; the rest are reported as refused, never imported."""
    remote_refs = dict(remote_refs)
    for name, oid in sorted(remote_refs.items()):
        if name.startswith(JOBS_PREFIX) and not is_key(name[len(JOBS_PREFIX) :]):
            # not a job genjob could have written (a ref below a job's name, say): never imported,
            # where it would clash with a live job ref this clone holds
            report.refused.append(f"{name} (no job key)")
            del remote_refs[name]
            continue
        kind = store.object_type(oid)  # from the header: a hostile ref may name a huge blob
        if kind != "commit":  # genjob writes only commits there: never ours to import
            report.refused.append(f"{name} ({kind or 'missing'} {str(oid)[:12]})")
            del remote_refs[name]
    return remote_refs


def _job_moves(store: Store, remote_refs: dict[str, pygit2.Oid], report: SyncReport) -> list[RefUpdate]:
    """The job refs to move to the remote's value (new or fast-forward), in ref order."""
    forward: list[RefUpdate] = []
    for name, oid in sorted(remote_refs.items()):
        if name.startswith(JOBS_PREFIX):
            move = _job_move(store, name[len(JOBS_PREFIX) :], oid, report)
            if move is not None:
                forward.append(move)
    return forward


def _job_move(store: Store, key: str, remote: pygit2.Oid, report: SyncReport) -> RefUpdate | None:
    """How job `key`'s ref follows the remote's `remote`, reported: a new ref or a fast-forward,
    or None (archived here, the same, ahead, or diverged: a rival race or a foreign chain)."""
    name = JOBS_PREFIX + key
    local = store.ref_target(name)
    if local is None and Archive(store).entry(key) is not None:
        return None
    rel = _relation(store, local, remote)
    if rel in ("absent", "behind"):
        (report.created if rel == "absent" else report.updated).append(key)
        return RefUpdate(name, local, remote)
    if rel == "diverged":
        assert local is not None
        foreign = _foreign_chain(store, key, local, remote)
        if foreign is None:
            report.diverged.append(key)
        else:  # not this job's history: ours stands, and `push` puts it back (with a lease)
            report.kept.append(f"{key} ({foreign})")
    return None


REFS_PER_TRANSACTION = 128  # open files a fetch's ref transaction may hold (macOS allows 256 by default)


def _foreign_chain(store: Store, key: str, local: pygit2.Oid, remote: pygit2.Oid) -> str | None:
    """Why the remote's chain for a job is no rival history of it (None: it is one).

    A job is its submit commit (SPEC §11). Two chains from one submit commit are a real race
    (exit 4, and a person decides) when a trusted key wrote any of the remote's events since
    the fork (a signed lease or requeue, a receipt); else no worker or owner wrote them. A
    remote chain from another root is another job under this key; it counts as a rival only
    if a planner HEAD trusts signed that root's job under this key. What is no rival is a
    keyless remote's doing: it changes nothing here, and push puts ours back."""
    from git_genjob.storage.truststore import trust_at_head  # loads PyNaCl: only when a rival chain is judged

    try:
        ours, theirs = chain_root(store, local), chain_root(store, remote)
    except (GenjobError, KeyError, ValueError):
        return None
    if ours == theirs:
        base = store.merge_base(local, remote)
        trust = trust_at_head(store)
        if base is None or vouched_events(store, key, remote, base, trust.signers, trust.revoked):
            return None  # a real race: exit 4, and a person decides
        return f"the remote's events since {str(base)[:12]} are signed by no trusted worker or owner"
    root = store.get_commit(theirs)
    try:
        data = store.file_at(root.tree, "job.json") or b""
        if Job.from_bytes(data).key != key:
            return f"the remote's ref holds another job's chain, from {str(theirs)[:12]}"
        trust = trust_at_head(store)
        job_signer(data, store.file_at(root.tree, JOB_ENVELOPE), trust.signers, trust.revoked, time.time())
    except GenjobError:
        return f"the remote's ref holds another chain, from {str(theirs)[:12]}, not signed by a trusted planner"
    return None


def recover_kept(store: Store, report: SyncReport) -> None:
    """Merge back what a forced `git fetch` (or any write outside genjob) took from a ledger ref.

    genjob only ever moves the archive, the replay cache and the notes forwards or merges them,
    and remembers the last value it gave each (`Store.kept_tip`). A current value that does not
    contain that one lost history: it is merged back (a union; nothing is ever dropped), while
    its commits still exist (reflogs and unreachable objects keep them until a gc prunes them).
    """
    for name, merge in (
        (ARCHIVE_REF, merge_union),
        (REPLAYS_REF, merge_union),
        (NOTES_REF, merge_notes),
        (RECEIPTS_REF, merge_notes),
    ):
        if _recover_ledger(store, name, merge):
            report.recovered.append(name)


def _recover_ledger(store: Store, name: str, merge: Callable[[Store, pygit2.Oid, pygit2.Oid], pygit2.Oid]) -> bool:
    """Merge the last value genjob gave ledger ref `name` back into it, if the ref lost it; whether it did."""
    kept = store.kept_tip(name)
    current = store.ref_target(name)
    if kept is None or kept == current or (current is not None and store.descendant_of(current, kept)):
        return False
    if current is None:
        store.update_refs([RefUpdate(name, None, kept)], message="genjob: recover")
    elif store.object_type(current) == "commit":
        store.update_refs([RefUpdate(name, current, merge(store, current, kept))], message="genjob: recover")
    else:
        return False  # not a commit: fetch names it, and the user decides
    return True


def _reconcile_mergeable(
    store: Store,
    name: str,
    remote: pygit2.Oid,
    merge: Callable[[Store, pygit2.Oid, pygit2.Oid], pygit2.Oid],
    report: SyncReport,
) -> None:
    local = store.ref_target(name)
    rel = _relation(store, local, remote)
    if rel in ("absent", "behind"):
        store.update_refs([RefUpdate(name, local, remote)], message="genjob: fetch")
        report.updated.append(name)
    elif rel == "diverged":
        assert local is not None
        merged = merge(store, local, remote)
        store.update_refs([RefUpdate(name, local, merged)], message="genjob: merge")
        report.merged.append(name)


def _drop_archived_live(store: Store, report: SyncReport) -> None:
    archive = store.ref_target(ARCHIVE_REF)
    if archive is None:
        return
    for key in store.live_keys():
        tip = store.ref_target(JOBS_PREFIX + key)
        if tip is None or Archive(store).entry(key) is None:
            continue
        if tip == archive or store.descendant_of(archive, tip):
            _drop_if_vouched(store, key, tip, report)


def _drop_if_vouched(store: Store, key: str, tip: pygit2.Oid, report: SyncReport) -> None:
    """Drop live job `key`, archived elsewhere, if this clone can vouch for its archive entry; else keep it."""
    entry = Archive(store).entry(key)
    problem = vouch_problem(store, key, entry) if entry is not None else "no archive entry"
    if problem is not None:  # SPEC §11: a live job is dropped only for an entry this clone can see
        report.kept.append(f"{key} ({problem})")
        return
    store.update_refs([RefUpdate(JOBS_PREFIX + key, tip, None)], message="genjob: archived elsewhere")
    report.dropped.append(key)


def fetch(store: Store, remote: str, notes: NotesReconciler | None = None) -> SyncReport:
    """`git genjob fetch`: fast-forward, merge the shared ledgers, drop what was archived; the
    notes through `notes` (their quarantine)."""
    report = SyncReport()
    reconcile(store, fetch_raw(store, remote), report, notes)
    _refuse_non_commits(report, remote)
    if report.diverged:
        raise Conflict(
            "job refs diverged from the remote: " + ", ".join(report.diverged),
            "two machines wrote different events for the same job; inspect with git genjob show KEY",
        )
    return report


def _notes_to_push(store: Store, local: pygit2.Oid, remote: pygit2.Oid) -> pygit2.Oid:
    """What a notes push sends: ours, or, where the remote holds notes ours lacks on commits this
    clone does not have (held by the quarantine, unchecked here), ours plus those, so a push
    never drops another clone's notes. A refused note on a commit this clone has is replaced by
    ours (or dropped): the push puts back what verifies."""
    if store.descendant_of(local, remote):
        return local
    mine = all_notes(store, store.get_commit(local).tree)
    theirs = all_notes(store, store.get_commit(remote).tree)
    kept = {obj: blob for obj, blob in theirs.items() if obj not in mine and store.object_type(obj) is None}
    tree = notes_tree(store, {**mine, **kept})
    return store.commit(tree, [local, remote], "genjob: notes, and the remote's on commits not fetched here\n")


def _refuse_non_commits(report: SyncReport, remote: str) -> None:
    """A remote genjob ref that names no commit (or no job key) was not imported (and is never pushed over):
    the rest of the fetch stands, and the user decides what to do with that ref."""
    if report.refused:
        raise Refused(
            f"{remote} holds genjob refs that name no commit or no job; they were not fetched",
            f"look with: git ls-remote {remote} '{GENJOB_PREFIX}*' '{NOTES_REF}*'; if nothing there is "
            f"yours, delete them (git push {remote} --delete REF) and run this again",
            details=report.refused,
        )


def push(store: Store, remote: str, notes: NotesReconciler | None = None) -> SyncReport:
    """`git genjob push`: fetch and reconcile first, then push what differs, atomically with leases.
    Without `notes` (the quarantine) the notes refs are neither taken nor pushed."""
    report = SyncReport()
    remote_refs = fetch_raw(store, remote)
    reconcile(store, remote_refs, report, notes)
    _refuse_non_commits(report, remote)
    updates = _outgoing(store, remote_refs, report, notes is not None) + _archived_here(store, remote_refs)
    push_leases(store, remote, updates)
    crash_point("after-push")
    report.pushed = [u.name for u in updates]
    if report.diverged:
        raise Conflict(
            "job refs diverged from the remote: "
            + ", ".join(report.diverged)
            + (f" (pushed the rest: {len(report.pushed)} refs)" if report.pushed else ""),
            f"inspect with git genjob show KEY; the remote's events are under {TRACK}",
        )
    return report


def _outgoing(
    store: Store, remote_refs: dict[str, pygit2.Oid], report: SyncReport, with_notes: bool
) -> list[RefUpdate]:
    """The local genjob refs (and notes refs, `with_notes`) whose value the remote lacks, each
    leased on the remote's value; a diverged job's ref is held back."""
    updates: list[RefUpdate] = []
    local_names = _pushable(store, with_notes)
    held_back = {JOBS_PREFIX + key for key in report.diverged}  # the rest goes out; these are exit 4 after
    for name in local_names:
        update = None if name in held_back else _outgoing_update(store, name, remote_refs.get(name))
        if update is not None:
            updates.append(update)
    return updates


def _pushable(store: Store, with_notes: bool) -> list[str]:
    """The local refs a push may send: every genjob ref, then (`with_notes`) each notes ref there is."""
    local_names = [n for n, _ in store.iter_refs(GENJOB_PREFIX)]
    if with_notes:
        local_names += [r for r in NOTES_REFS if store.ref_target(r)]
    return local_names


def _outgoing_update(store: Store, name: str, theirs: pygit2.Oid | None) -> RefUpdate | None:
    """The push of local ref `name`, leased on the remote's value `theirs`; None when the remote
    holds it already (for a notes ref: all that a push of it would send)."""
    oid = store.ref_target(name)
    if oid is None or theirs == oid:
        return None
    if name in NOTES_REFS and theirs is not None:
        oid = _notes_to_push(store, oid, theirs)
    return RefUpdate(name, theirs, oid) if oid != theirs else None


def _archived_here(store: Store, remote_refs: dict[str, pygit2.Oid]) -> list[RefUpdate]:
    """Deletions of the remote's job refs for jobs archived here (and gone from here)."""
    updates: list[RefUpdate] = []
    for name, oid in remote_refs.items():
        key = name[len(JOBS_PREFIX) :]
        archived = name.startswith(JOBS_PREFIX) and Archive(store).entry(key) is not None
        if archived and store.ref_target(name) is None:
            updates.append(RefUpdate(name, oid, None))
    return updates
