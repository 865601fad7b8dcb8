"""A job's state machine in one place: its states, the events that move it, the moves allowed.

Every event the ledger writes asks `transition` for the state it leads to, so a job can
only move the way SPEC §4 draws it:

    queued --claimed--> claimed --sending--> sending --receipt--> done --(apply/drop/resubmit)--> archived
      ^                    | recovered           | recovered / unknown
      |                    v                     v
      +--retried (owner)-- queued               unknown   (never resent by recovery)

A stopped worker ends its own attempt (`stopped`): a claim goes back to queued, a send to unknown.

A document plane module: it knows nothing of refs or commits.
"""

from __future__ import annotations

from enum import StrEnum

from git_genjob.documents.errors import Conflict


class JobState(StrEnum):
    QUEUED = "queued"
    CLAIMED = "claimed"
    SENDING = "sending"
    UNKNOWN = "unknown"
    DONE = "done"
    APPLIED = "applied"  # archived
    DROPPED = "dropped"  # archived
    SUPERSEDED = "superseded"  # archived: `resubmit` minted a new job for it on the current content (SPEC §11)


class AttemptState(StrEnum):
    CLAIMED = "claimed"
    SENDING = "sending"
    FINISHED = "finished"
    FAILED_BEFORE_SEND = "failed_before_send"
    UNKNOWN = "unknown"


class Event(StrEnum):
    SUBMITTED = "submitted"
    CLAIMED = "claimed"
    SENDING = "sending"
    RENEWED = "renewed"
    RECEIPT = "receipt"
    FAILED = "failed"  # the worker's own verdict: failed before send, requeued
    UNKNOWN = "unknown"  # the worker's own verdict: sent, outcome uncertain
    RECOVERED = "recovered"  # the sweeper fenced a lapsed lease
    RETRIED = "retried"  # the owner's new attempt
    STOPPED = "stopped"  # the worker, stopped (SIGINT, SIGTERM, SIGHUP), ends its own attempt (SPEC §12.4)


LEASE_S = 600.0  # a claim's lease (`work --lease`, `receipt`'s own claim), renewed every third
# The longest lease a worker may take. A lease_until further than this from now was written by
# no worker (attempts.json comes through a shared remote): `recover` fences it as lapsed.
MAX_LEASE_S = 24 * 3600.0
TIMEOUT_S = 1800.0  # `work --timeout`: how long a generator may run

# The colour a terminal shows each state in (the cli's painter applies it; NO_COLOR and pipes get none).
STATE_COLOURS = {
    "queued": "cyan",
    "claimed": "yellow",
    "sending": "yellow",
    "unknown": "red",
    "done": "green",
    "applied": "blue",
    "dropped": "white",
    "superseded": "white",
    "damaged": "red",
}
# `status --state applyable`: a done job whose receipt says ok, what `apply` lands (after it
# verifies). A filter, not a state: `done` also holds rejected and aborted receipts.
APPLYABLE = "applyable"


def is_applyable(state: str, result: str | None) -> bool:
    return state == JobState.DONE and result == "ok"


LIVE_STATES = (JobState.QUEUED, JobState.CLAIMED, JobState.SENDING, JobState.UNKNOWN, JobState.DONE)
ARCHIVED_STATES = (JobState.APPLIED, JobState.DROPPED, JobState.SUPERSEDED)

Q, C, S, U, D = JobState.QUEUED, JobState.CLAIMED, JobState.SENDING, JobState.UNKNOWN, JobState.DONE
# (state, event) -> the state the event moves the job to. One target per move: the ledger
# never names the next state, it asks `transition`.
TRANSITIONS: dict[tuple[JobState, Event], JobState] = {
    (Q, Event.CLAIMED): C,
    (C, Event.SENDING): S,
    (C, Event.RENEWED): C,
    (S, Event.RENEWED): S,
    (C, Event.RECEIPT): D,  # `git genjob receipt`: out of band, nothing is sent by genjob
    (S, Event.RECEIPT): D,
    (S, Event.FAILED): Q,
    (S, Event.UNKNOWN): U,
    (C, Event.RECOVERED): Q,
    (S, Event.RECOVERED): U,
    (U, Event.RETRIED): Q,
    (D, Event.RETRIED): Q,  # a receipt that is not ok
    (Q, Event.RETRIED): Q,  # the owner's signed word over a requeue nobody trusted signed (SPEC §11)
    (C, Event.STOPPED): Q,  # a claim its worker had not started: released at once
    (S, Event.STOPPED): U,  # a generator its worker stopped: calls may have been sent, the owner decides
}


def transition(state: str, event: str) -> JobState:
    """The state `event` moves a job in `state` to; a move off the table means the writer is
    stale (it read the job before another event moved it): exit 4, nothing written."""
    target = TRANSITIONS.get((JobState(state), Event(event)))
    if target is None:
        raise Conflict(
            f"a job in state {state} cannot take event {event}",
            "the job moved since it was read; read it again (git genjob status)",
        )
    return target
