"""`resubmit KEY`: a job whose outputs do not merge onto the branch gets a new job with the same
instruction on the current content, and ends `superseded` (SPEC §11).

Two steps, each the existing one: `submit` (idempotent by key) mints the new job, whose meta.json
names the old one (`supersedes`); then the old job moves to the archive with
`{"state": "superseded", "superseded_by": NEW}`. A crash between them leaves both live, and
running `resubmit` again collapses onto the new job and finishes the move.

With `--remote R` both go out in one atomic push with a lease per ref (`publish.OnePush`), and the
local refs move only after R took it: a refused push leaves both jobs as they were, here and on R
(SPEC §12.4).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pygit2

from git_genjob.documents.attempts import Final
from git_genjob.documents.canonical import utc_now
from git_genjob.documents.errors import Conflict, Refused
from git_genjob.documents.states import JobState
from git_genjob.landing.verify import check_fresh
from git_genjob.planner.ledger import archive
from git_genjob.planner.queue import submit
from git_genjob.planner.trust import planner_key
from git_genjob.storage.layout import job_ref
from git_genjob.storage.publish import OnePush, Publisher, publisher
from git_genjob.storage.records import JobRecord, find_job
from git_genjob.storage.store import Store, lookup


@dataclass
class Resubmitted:
    old: str
    new: str
    digest: str
    state: str  # the new job's
    already: bool = False

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def resubmit(store: Store, key: str, remote: str | None = None) -> Resubmitted:
    """Mint a new job with KEY's instruction and allowed paths on HEAD's content; KEY ends
    `superseded`, and the two jobs' meta name each other."""
    pub: Publisher = publisher(store) if remote is None else OnePush(store, remote)
    pub.refresh()  # through a remote: the leases are on what it holds now
    record = find_job(store, key)
    if record.archived:
        return _resubmitted_before(store, record)
    tree = _resubmittable(store, record)
    paths = [p for p in record.job.allowed_paths if lookup(tree, p) is not None]
    creates = [p for p in record.job.allowed_paths if p not in paths]
    new = submit(
        store, record.job.instruction, paths, creates, None, None, record.meta.allow_secrets, supersedes=key, pub=pub
    )
    if isinstance(pub, OnePush):
        pub.carry(job_ref(new.key))
    # Signed by the owner, as a drop is: other clones end the old job only on a trusted planner's word.
    archive(pub, record, _superseded(store, record, new.key), planner_key(store))
    if isinstance(pub, OnePush):
        pub.publish()
    return Resubmitted(key, new.key, new.digest, new.state)


def _resubmitted_before(store: Store, record: JobRecord) -> Resubmitted:
    """An archived job: the job it was resubmitted as (already), else refused."""
    final = record.meta.final
    if final is not None and final.state == JobState.SUPERSEDED and final.superseded_by:
        successor = find_job(store, final.superseded_by)
        return Resubmitted(record.key, successor.key, successor.digest, successor.state, already=True)
    raise Refused(f"job {record.key} is {record.state} and archived", "submit a new job: git genjob submit")


def _resubmittable(store: Store, record: JobRecord) -> pygit2.Tree | None:
    """HEAD's tree, where the job is neither held by a live worker nor still fresh there (then
    it needs no new job)."""
    key = record.key
    if record.state in (JobState.CLAIMED, JobState.SENDING):
        raise Conflict(f"job {key} is {record.state} by a live worker", "wait for its receipt, then resubmit")
    head = store.head_commit()
    tree = head.tree if head is not None else None
    if not check_fresh(store, record, tree):
        raise Refused(
            f"job {key}: HEAD still holds its inputs, so a new job would be the same work",
            f"apply it (git genjob apply {key}) or ask again (git genjob retry {key})",
        )
    return tree


def _superseded(store: Store, record: JobRecord, successor: str) -> Final:
    """The old job's end: superseded by `successor`, by this repository's user, now."""
    sig = store.signature()
    return Final(
        JobState.SUPERSEDED,
        superseded_by=successor,
        why=f"resubmitted as {successor}",
        by=f"{sig.name} <{sig.email}>",
        at=utc_now(),
        was=record.state,
    )
