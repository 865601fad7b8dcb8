"""verify -> pre-apply hook -> commit, notes, idempotent reconcile (SPEC §6, §9, §10)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pygit2

from git_genjob.documents.attempts import Final
from git_genjob.documents.config import read_config
from git_genjob.documents.errors import BadInput, Conflict, LockHeld, Refused
from git_genjob.documents.receipt import GeneratorInfo
from git_genjob.documents.states import JobState
from git_genjob.landing.hooks import installed_by_genjob
from git_genjob.landing.merge import MERGED_TRAILER, Merge, changed_paths, merge_onto, side_branch_base
from git_genjob.landing.summary import Facts, Party, generator_label, render
from git_genjob.landing.verify import Verdict, check_for_target, check_fresh, next_step
from git_genjob.planner.ledger import archive
from git_genjob.storage import locks
from git_genjob.storage.archive import Archive
from git_genjob.storage.blobs import blob_chunks
from git_genjob.storage.faults import crash_point
from git_genjob.storage.gitdir import clean_env, genjob_trailers_of_commit, may_name_a_job, read_commit_trailers
from git_genjob.storage.layout import (
    ARCHIVE_REF,
    NOTES_REF,
    RECEIPTS_REF,
    apply_lock_path,
    applying_path,
    job_ref,
)
from git_genjob.storage.notes import write_note
from git_genjob.storage.publish import publisher
from git_genjob.storage.records import JobRecord, find_job, parse_trailers, vouch_problem
from git_genjob.storage.store import LOCK_WAIT_S, RefUpdate, Store, lookup, retry_cas
from git_genjob.storage.usercommit import user_commit
from git_genjob.storage.worktree import (
    IndexUntouched,
    blocked_paths,
    checkout_outputs,
    dirty_paths,
    index_oids,
    sparse_paths,
    worktree_oids,
)
from git_genjob.worker.scratch import scratch_dir


@dataclass
class Applied:
    key: str
    commit: str
    branch: str
    already: bool
    reconciled: bool = False
    kept: list[str] = field(default_factory=list)
    merged_onto: str | None = None  # the branch tip the outputs were merged onto (SPEC §11)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _branch(store: Store, branch: str | None) -> tuple[str, bool]:
    """(full ref name, whether it is checked out in this work tree)."""
    current = store.head_branch()
    if branch is None:
        if current is None:
            raise BadInput("HEAD is detached", "check out a branch or pass --branch B")
        return current, store.workdir is not None
    name = branch if branch.startswith("refs/heads/") else f"refs/heads/{branch}"
    if store.ref_target(name) is None:
        raise BadInput(f"no branch {branch}", "create it first (git branch B)")
    return name, name == current and store.workdir is not None


def disclosure(cfg_name: str | None, gen: GeneratorInfo) -> str | None:
    if not cfg_name:
        return None
    return f"{cfg_name}: {generator_label(gen)}"


def message_head(record: JobRecord) -> str:
    """What an applied commit's message says before its trailers: subject and instruction, from
    the signed job (audit compares it, so an amended subject is named)."""
    instruction = record.job.message_text  # no control character reaches git log
    first = instruction.splitlines()[0] if instruction else record.key
    return f"genjob: {first}\n\n{instruction}\n\n"


def commit_message(
    record: JobRecord, verdict: Verdict, disclosure_line: str | None, merged_onto: str | None = None
) -> str:
    assert verdict.envelope is not None and verdict.signer is not None
    pred = verdict.envelope.predicate
    trailers = [
        f"Genjob-Key: {record.key}",
        f"Genjob-Job: {record.job.digest}",
        f"Genjob-Receipt: {verdict.envelope.digest}",
        f"Genjob-Signer: {verdict.signer.keyid}",
        f"Genjob-Worker: {pred.worker_id}",
    ]
    if merged_onto is not None:
        trailers.append(f"{MERGED_TRAILER}: {merged_onto}")
    if disclosure_line:
        trailers.append(disclosure_line)
    return message_head(record) + "\n".join(trailers) + "\n"


def summary_facts(record: JobRecord, verdict: Verdict) -> Facts:
    assert verdict.envelope is not None and verdict.signer is not None
    planner = verdict.planner
    return Facts(
        key=record.key,
        receipt=verdict.envelope.digest,
        pred=verdict.envelope.predicate,
        signer=Party(verdict.signer.principal, verdict.signer.keyid),
        planner=Party(planner.principal, planner.keyid) if planner is not None else None,
        instruction=record.job.message_text,
    )


def note_text(record: JobRecord, verdict: Verdict) -> bytes:
    """The human summary in refs/notes/genjob, what `git log` shows (SPEC §11): a rendering of the
    verified receipt (landing.summary), which audit renders again and compares."""
    return render(summary_facts(record, verdict))


def receipt_note_text(record: JobRecord, verdict: Verdict) -> bytes:
    """The note in refs/notes/genjob-receipts: one compact JSON line {"summary", "envelope", "job",
    "job_envelope"}: the receipt and the planner-signed job it answers travel together, so audit
    checks the planner's signature where the job's refs were never fetched."""
    import json

    assert verdict.envelope is not None and verdict.signer is not None
    summary = note_text(record, verdict).decode("utf-8").splitlines()[0]
    doc = {"summary": summary, "envelope": verdict.envelope.raw.decode("utf-8")}
    doc["job"] = record.job_bytes.decode("utf-8")
    if record.job_envelope is not None:
        doc["job_envelope"] = record.job_envelope.decode("utf-8")
    line = json.dumps(doc, separators=(",", ":"), ensure_ascii=True, sort_keys=True)  # one line, whatever the job holds
    return (line + "\n").encode("utf-8")


def find_applied(store: Store, head: pygit2.Oid, receipt_digest: str, key: str, limit: int = 5000) -> pygit2.Oid | None:
    """A commit on the branch whose trailers name this receipt: a bounded history walk.

    Only the rare path reads history: an intent whose commit is no longer reachable (the branch
    was rewritten after a crash). The normal path is `landed`.
    """
    for n, commit in enumerate(store.walk(head)):
        if n >= limit:
            break
        t = parse_trailers(commit.message)
        if t.get("Genjob-Receipt") == receipt_digest and t.get("Genjob-Key") == key:
            return commit.id
    return None


UNBASED_WALK = 10_000


def applied_before(store: Store, head: pygit2.Oid | None, record: JobRecord) -> tuple[pygit2.Oid, str | None] | None:
    """(commit, its Genjob-Receipt) of a commit on the branch that already carries this job's
    Genjob-Key as git reads trailers, or None. The walk covers the commits since the job's base
    commit (those are the only ones that can hold it), or the last UNBASED_WALK when the base is
    not an ancestor; git is asked once, for the commits that could name a job at all."""
    if head is None:
        return None
    candidates = _naming_commits(store, head, _base_hidden(store, head, record))
    read_commit_trailers(store.gitdir, candidates)
    for oid, message in candidates:  # newest first
        t = genjob_trailers_of_commit(oid, message, store.gitdir)
        if t.get("Genjob-Key") == record.key:
            return pygit2.Oid(hex=oid), t.get("Genjob-Receipt")
    return None


def _base_hidden(store: Store, head: pygit2.Oid, record: JobRecord) -> list[pygit2.Oid]:
    """[the job's base commit] when it is `head` or an ancestor of it (the walk stops there), else []."""
    if record.meta.base:
        try:
            base = store.get_commit(record.meta.base).id
            if base == head or store.descendant_of(head, base):
                return [base]
        except (BadInput, ValueError, KeyError):
            pass
    return []


def _naming_commits(store: Store, head: pygit2.Oid, hide: list[pygit2.Oid]) -> list[tuple[str, str]]:
    """(oid, message) of each commit from `head` down to `hide` (or the last UNBASED_WALK) whose
    message may name a job, newest first."""
    candidates = []
    for n, commit in enumerate(store.walk(head, hide)):
        if not hide and n >= UNBASED_WALK:
            break
        if may_name_a_job(commit.message):
            candidates.append((str(commit.id), commit.message))
    return candidates


@dataclass(frozen=True)
class Intent:
    """What an apply is about to land, written durably before the branch moves."""

    commit: str
    receipt: str
    branch: str


def _intent_path(store: Store, key: str) -> str:
    return applying_path(store.common_dir, key)


def write_intent(store: Store, key: str, intent: Intent) -> None:
    path = _intent_path(store, key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(f"{intent.commit} {intent.receipt} {intent.branch}\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_intent(store: Store, key: str) -> Intent | None:
    try:
        with open(_intent_path(store, key), encoding="utf-8") as fh:
            parts = fh.read().split()
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return Intent(*parts) if len(parts) == 3 else None


def clear_intent(store: Store, key: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_intent_path(store, key))


def landed(store: Store, head: pygit2.Oid | None, key: str, receipt_digest: str) -> pygit2.Oid | None:
    """The commit an interrupted apply of this receipt already put on the branch, or None.

    Without an intent no apply of this job got as far as moving a branch, so nothing is read;
    with one, its commit is looked up (normally it is the branch tip or close to it).
    """
    intent = read_intent(store, key)
    if head is None or intent is None or intent.receipt != receipt_digest:
        return None
    try:
        commit = pygit2.Oid(hex=intent.commit)
        if commit == head or store.descendant_of(head, commit):
            return commit
    except (ValueError, KeyError, pygit2.GitError):
        pass
    return find_applied(store, head, receipt_digest, key)


def run_pre_apply(store: Store, record: JobRecord, outputs: dict[str, pygit2.Oid | None]) -> None:
    """The gate before a job lands: the local `pre-apply` hook where one is installed, and the
    committed `[hooks] pre_apply` of .genjob/config.toml always (the repository's policy, not a
    local hook choice: a clone without `init --hooks` runs it too; genjob's own hook runs it once)."""
    gates = _pre_apply_gates(store, record.key)
    if not gates:
        return
    tmp = scratch_dir()
    try:
        _write_outputs(store, tmp, outputs)
        env = {**clean_env(), "GENJOB_OUTPUTS": tmp, "GENJOB_KEY": record.key}
        for argv, what in gates:
            proc = subprocess.run(argv, cwd=store.workdir or store.gitdir, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise Refused(
                    f"{what} refused job {record.key} (exit {proc.returncode})",
                    "fix what it reports, or drop the job",
                    details=(proc.stdout + proc.stderr).strip().splitlines()[-20:],
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _pre_apply_gates(store: Store, key: str) -> list[tuple[list[str], str]]:
    """(argv, what it is) of each gate to run, in order: the local hook, then the committed
    command unless the hook is genjob's own (which runs it)."""
    hook = os.path.join(store.hooks_dir(), "pre-apply")
    gates: list[tuple[list[str], str]] = []
    ours = False
    if os.path.isfile(hook) and os.access(hook, os.X_OK):
        ours = installed_by_genjob(hook)
        gates.append(([hook, key], "the pre-apply hook"))
    command = read_config(store).pre_apply
    if command and not ours:
        committed = "the pre-apply gate ([hooks] pre_apply in .genjob/config.toml)"
        gates.append((["sh", "-c", command, "pre-apply", key], committed))
    return gates


def _write_outputs(store: Store, root: str, outputs: dict[str, pygit2.Oid | None]) -> None:
    """The outputs' files under `root` (deleted paths left out), as the gates read them."""
    for path, oid in outputs.items():
        if oid is None:
            continue
        target = os.path.join(root, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as fh:
            for data in blob_chunks(store, oid):
                fh.write(data)


def apply(store: Store, key: str, branch: str | None = None) -> Applied:
    """Verify, run the pre-apply hook, commit the outputs: one apply at a time per repository.

    Applies wait for each other on an flock (released by the kernel if the holder dies, so it
    can never go stale): a second apply of the same job then finds it applied, and two jobs'
    checkouts never contend for git's index lock.
    """
    with _apply_lock(store):
        return _apply(store, key, branch)


@contextlib.contextmanager
def _apply_lock(store: Store, timeout: float = 300.0) -> Iterator[None]:
    import fcntl
    import time

    path = apply_lock_path(store.common_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise Conflict(
                        f"another apply has held {path} for {timeout:g}s", "wait for it, then retry"
                    ) from None
                time.sleep(0.02)
        yield
    finally:
        os.close(fd)


def _apply(store: Store, key: str, branch: str | None = None) -> Applied:
    record = find_job(store, key)
    if record.archived:
        return _archived(store, record)
    side, ref_name, checked_out, head = _target(store, record, key, branch)
    tree = store.get_commit(head).tree if head is not None else None
    verdict = _verified(store, record, key, tree)  # 1. verify (checks 1-7)
    assert verdict.envelope is not None
    done = landed(store, head, key, verdict.envelope.digest)
    if done is not None:  # a crash after the commit: reconcile, never commit again
        kept = _reconcile_landed(store, record, verdict, done, ref_name, checked_out)
        return Applied(key, str(done), ref_name, already=True, reconciled=True, kept=kept)
    # 2. applied once, everywhere (SPEC §11): a commit on the branch since the job's base that
    #    carries this job's key is its landing, whatever the refs under refs/genjob now say.
    before = _applied_elsewhere(store, record, verdict, head, ref_name)
    if before is not None:
        return before
    # 3. check 8 against the target branch: inputs that moved are merged (SPEC §11); a conflict refuses here
    outputs, merge = _landing(store, record, verdict, tree, ref_name)
    # 4. a dirty allowed path, or a work tree that cannot take an output, refuses the apply
    if checked_out:
        _check_worktree(store, record, outputs)
    # 5. the pre-apply hook (policy)
    run_pre_apply(store, record, outputs)
    # 6. the commit from the verified blob ids, branch moved by CAS
    merged_onto = str(head) if merge is not None else None
    commit = _commit(store, record, verdict, head, (tree, outputs, merge), merged_onto)
    # Every lock this apply will need is free before the branch moves (a `git commit` waiting for
    # its editor holds index.lock; a killed git leaves a lock behind): else exit 4, nothing written.
    needed = [ref_name, NOTES_REF, RECEIPTS_REF, ARCHIVE_REF, job_ref(key)]
    locks.wait_unlocked(store.common_dir, store.gitdir, needed, checked_out, LOCK_WAIT_S)
    write_intent(store, key, Intent(str(commit), verdict.envelope.digest, ref_name))
    if not _move_branch(store, key, verdict, ref_name, head if side is None else None, commit):
        return _apply(store, key, branch)
    crash_point("after-commit")
    # 7. index and work tree for the output paths only, checked out as git would (filters, eol)
    if checked_out:
        _check_out(store, key, outputs, ref_name, head, commit)
    _finish_landed(store, key, record, verdict, commit, ref_name)  # 8-9. note, then archive
    return Applied(key, str(commit), ref_name, already=False, merged_onto=merged_onto)


def _verified(store: Store, record: JobRecord, key: str, tree: pygit2.Tree | None) -> Verdict:
    """1. verify (checks 1-7), against the work tree's trust store and the one the commit will
    carry: a receipt that does not verify refuses the apply."""
    verdict = check_for_target(store, record, tree)
    if not verdict.ok:
        raise Refused(f"receipt of job {key} does not verify", next_step(verdict), details=verdict.failures())
    return verdict


def _reconcile_landed(
    store: Store, record: JobRecord, verdict: Verdict, done: pygit2.Oid, ref_name: str, checked_out: bool
) -> list[str]:
    """The commit an interrupted apply landed: the work tree brought to it where it is checked
    out (the paths kept, as _reconcile_worktree says), then its note and archive."""
    kept = _reconcile_worktree(store, done, _landed_changes(store, done, record, verdict)) if checked_out else []
    _finish(store, record, verdict, done, ref_name)
    return kept


def _finish_landed(
    store: Store, key: str, record: JobRecord, verdict: Verdict, commit: pygit2.Oid, ref_name: str
) -> None:
    """8-9. note, then archive; a lock held then names the commit that already landed."""
    try:
        _finish(store, record, verdict, commit, ref_name)
    except LockHeld as exc:
        raise LockHeld(
            f"job {key} landed as {str(commit)[:12]} on {ref_name}, but {exc.message}",
            f"{exc.hint}; then run git genjob apply {key} again to record its note and archive it",
            details=exc.details,
        ) from None


def _target(
    store: Store, record: JobRecord, key: str, branch: str | None
) -> tuple[pygit2.Oid | None, str, bool, pygit2.Oid | None]:
    """(the side branch's base or None, the ref the commit goes to, whether it is checked out,
    its tip): SPEC §11's `--branch genjob/KEY` starts at the job's base, never checked out."""
    side = side_branch_base(store, record, branch)
    if side is not None:
        return side, f"refs/heads/genjob/{key}", False, side
    ref_name, checked_out = _branch(store, branch)
    return None, ref_name, checked_out, store.ref_target(ref_name)


def _landing(
    store: Store, record: JobRecord, verdict: Verdict, tree: pygit2.Tree | None, ref_name: str
) -> tuple[dict[str, pygit2.Oid | None], Merge | None]:
    """(what lands, the merge or None): the receipt's outputs, or where its inputs moved on the
    branch, the merged content of each allowed path the merge changes."""
    outputs = _outputs(store, record, verdict)
    if not check_fresh(store, record, tree):
        return outputs, None
    merge = merge_onto(store, record, outputs, tree, ref_name)
    return merge.changes, merge


def _commit(
    store: Store,
    record: JobRecord,
    verdict: Verdict,
    head: pygit2.Oid | None,
    landing: tuple[pygit2.Tree | None, dict[str, pygit2.Oid | None], Merge | None],
    merged_onto: str | None,
) -> pygit2.Oid:
    """The job's commit on `head` of what lands (the outputs on the branch's tree, or the
    merge's tree), with the message and trailers apply writes, as git signs."""
    assert verdict.envelope is not None
    tree, outputs, merge = landing
    cfg = read_config(store)
    new_tree = store.outputs_tree(tree, outputs) if merge is None else merge.tree
    assert new_tree is not None
    message = commit_message(
        record, verdict, disclosure(cfg.disclosure, verdict.envelope.predicate.generator), merged_onto
    )
    return user_commit(store, new_tree, [head] if head else [], message, f"genjob apply {record.key}")


def _move_branch(
    store: Store, key: str, verdict: Verdict, ref_name: str, expected: pygit2.Oid | None, commit: pygit2.Oid
) -> bool:
    """Move the branch to `commit` by CAS from `expected` (None: a side branch, created, never
    moved); False when another apply of this same job won it (success, not a race lost: apply
    again to finish it), a lost race to another change raises Conflict."""
    assert verdict.envelope is not None
    try:
        store.update_refs([RefUpdate(ref_name, expected, commit)], message=f"genjob: apply {key}")
    except Conflict:
        moved = store.ref_target(ref_name)
        if landed(store, moved, key, verdict.envelope.digest) is None:
            clear_intent(store, key)  # our commit never landed
            raise
        return False
    return True


def _check_out(
    store: Store,
    key: str,
    outputs: dict[str, pygit2.Oid | None],
    ref_name: str,
    head: pygit2.Oid | None,
    commit: pygit2.Oid,
) -> None:
    """The output paths of the index and work tree, as git would check them out (filters, eol)."""
    try:
        checkout_outputs(store, outputs, _modes(store, commit, outputs))
    except IndexUntouched:
        # A git command took index.lock after the check above: nothing reached the index,
        # so the branch goes back (by CAS) rather than leave a staged revert of the job.
        _unland(store, ref_name, head, commit, key)
        raise
    crash_point("after-worktree")


def _archived(store: Store, record: JobRecord) -> Applied:
    """An archived job: finish a move a crash interrupted; `applied` is done (where this clone
    sees it, SPEC §11: the archive may come from a remote), any other end refuses."""
    key = record.key
    Archive(store).finish_move(key, vouch=vouch_problem)
    clear_intent(store, key)
    final = record.meta.final
    if final is not None and final.state == JobState.APPLIED:
        problem = vouch_problem(store, key, record.tree)
        if problem is not None:
            raise Refused(
                f"job {key}: the archive says it was {problem}",
                f"fetch that branch to see it, or ask who applied it to push it; git genjob show {key}",
            )
        return Applied(key, str(final.commit), str(final.branch), already=True)
    raise Refused(f"job {key} was {record.state}: {final.why if final else ''}", "submit a new job (with a new --key)")


def _applied_elsewhere(
    store: Store, record: JobRecord, verdict: Verdict, head: pygit2.Oid | None, ref_name: str
) -> Applied | None:
    """Applied once, everywhere (SPEC §11): a commit on the branch since the job's base that
    carries this job's key is its landing, whatever the refs under refs/genjob now say; one
    with another receipt is a second answer to the job, refused."""
    assert verdict.envelope is not None
    before = applied_before(store, head, record)
    if before is None:
        return None
    commit_id, receipt = before
    if receipt != verdict.envelope.digest:
        raise Refused(
            f"job {record.key} was already applied as {str(commit_id)[:12]} on {ref_name} with another receipt "
            f"({receipt}); this one ({verdict.envelope.digest}) is a second answer to the same job",
            "a job lands once: submit a new job (with a new --key) for another change",
        )
    _finish(store, record, verdict, commit_id, ref_name)
    return Applied(record.key, str(commit_id), ref_name, already=True)


def _check_worktree(store: Store, record: JobRecord, outputs: dict[str, pygit2.Oid | None]) -> None:
    """A dirty allowed path, or a work tree that cannot take an output, refuses the apply."""
    dirty = dirty_paths(store, record.job.allowed_paths)
    if dirty:
        raise Refused("local changes at " + ", ".join(dirty), "commit or stash them, then apply again")
    blocked = blocked_paths(store, [p for p, oid in outputs.items() if oid is not None])
    if blocked:
        raise Refused("the work tree cannot take the outputs", "move these away, then apply again", details=blocked)


def _unland(store: Store, ref_name: str, head: pygit2.Oid | None, commit: pygit2.Oid, key: str) -> None:
    """Move the branch back from `commit` to `head` when the index could not follow it."""
    with contextlib.suppress(Conflict):  # moved again since: leave it, the intent reconciles later
        if head is None:
            store.update_refs([RefUpdate(ref_name, commit, None)], message=f"genjob: apply {key} undone")
        else:
            store.update_refs([RefUpdate(ref_name, commit, head)], message=f"genjob: apply {key} undone")
        clear_intent(store, key)


def _modes(store: Store, commit: pygit2.Oid, outputs: dict[str, pygit2.Oid | None]) -> dict[str, int]:
    tree = store.get_commit(commit).tree
    return {p: int(e.filemode) for p in outputs if (e := lookup(tree, p)) is not None}


def _landed_changes(
    store: Store, landed: pygit2.Oid, record: JobRecord, verdict: Verdict
) -> dict[str, pygit2.Oid | None]:
    """What a landed apply wrote at the job's paths: the outputs, or their merge (SPEC §11)."""
    commit = store.get_commit(landed)
    if not commit.parents or MERGED_TRAILER not in parse_trailers(commit.message):
        return _outputs(store, record, verdict)
    changes = changed_paths(commit.parents[0].tree, commit.tree)
    return {p: oid for p, oid in changes.items() if p in record.job.input_map}


def _reconcile_worktree(store: Store, landed: pygit2.Oid, outputs: dict[str, pygit2.Oid | None]) -> list[str]:
    """After a crash: bring each output path's index and work tree to the landed commit.

    A path is brought forward only while its index entry and work-tree content each hold either
    the job's input (the landed commit's parent) or its output: whatever else is there is a
    user's edit since the crash, kept and named, never overwritten.
    """
    commit = store.get_commit(landed)
    parent = commit.parents[0].tree if commit.parents else None
    paths = list(outputs)
    sparse = sparse_paths(store, paths)
    in_index, on_disk = index_oids(store, paths), worktree_oids(store, paths)
    todo: dict[str, pygit2.Oid | None] = {}
    kept = []
    for path, out in outputs.items():
        entry = lookup(parent, path)
        ok = {out, entry.id if entry is not None else None}
        if in_index[path] in ok and (path in sparse or on_disk[path] in ok):
            if in_index[path] != out or (path not in sparse and on_disk[path] != out):
                todo[path] = out
        else:
            kept.append(path)
    checkout_outputs(store, todo, _modes(store, landed, todo))
    return kept


def _finish(store: Store, record: JobRecord, verdict: Verdict, commit: pygit2.Oid, ref_name: str) -> None:
    write_note(store, commit, receipt_note_text(record, verdict), RECEIPTS_REF)  # the envelope first: audit needs it
    write_note(store, commit, note_text(record, verdict), replace=True)  # a rendering, never a union
    crash_point("after-note")
    receipt = verdict.envelope.digest if verdict.envelope else None  # an ok verdict has its envelope
    final = Final(JobState.APPLIED, commit=str(commit), branch=ref_name, receipt=receipt)

    def attempt() -> None:
        live = find_job(store, record.key)
        if live.archived:
            Archive(store).finish_move(record.key, vouch=vouch_problem)
        else:  # a lost race means the archive moved (another job's apply, or this one's twin): read it again
            archive(publisher(store), live, final)
        clear_intent(store, record.key)

    retry_cas(ARCHIVE_REF, attempt, f"run git genjob apply {record.key} again to finish")


def _outputs(store: Store, record: JobRecord, verdict: Verdict) -> dict[str, pygit2.Oid | None]:
    assert verdict.envelope is not None
    stored = record.output_oids()
    return {p: (stored[p] if d is not None else None) for p, d in verdict.envelope.predicate.outputs.items()}
