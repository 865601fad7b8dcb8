"""Typed, validated values for the operational documents (attempts.json, meta.json) and the field grammar.

Every document read from a ref is hostile until parsed here: one `parse_*` per document turns
bytes into frozen values whose every field has the type and shape the code downstream relies on,
or raises BadInput (exit 2). Nothing else indexes the raw JSON.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import Any

from git_genjob.documents.canonical import canonical_bytes, parse_strict
from git_genjob.documents.display import printable
from git_genjob.documents.errors import BadInput
from git_genjob.documents.states import ARCHIVED_STATES, LIVE_STATES, AttemptState, JobState

JOB_STATES = tuple(str(s) for s in LIVE_STATES)  # attempts.json: a live job's states
ATTEMPT_STATES = tuple(str(s) for s in AttemptState)
FINAL_STATES = tuple(str(s) for s in ARCHIVED_STATES)
_TIME_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
_OID_RE = re.compile(r"^[0-9a-f]{40}$")
_FP_RE = re.compile(r"^[0-9a-f]{64}$")
MAX_LABEL = 128
MAX_TEXT = 8192


def check_label(value: object, what: str, limit: int = MAX_LABEL) -> str:
    """A value that may reach a commit message, trailer or note: one line, printable, bounded."""
    if not isinstance(value, str):
        raise BadInput(f"{what} must be a string, found {type(value).__name__}")
    if not value or len(value) > limit:
        raise BadInput(f"{what} must be 1 to {limit} characters", "use a short single-line name")
    if value != value.strip() or not value.isprintable():
        raise BadInput(f"{what} {value!r} must be one line of printable characters without surrounding spaces")
    return value


def check_text(value: object, what: str, limit: int = MAX_TEXT) -> str:
    """Free text (a reason): bounded, no control characters but newline and tab."""
    if not isinstance(value, str):
        raise BadInput(f"{what} must be a string, found {type(value).__name__}")
    if len(value) > limit:
        raise BadInput(f"{what} is longer than {limit} characters")
    if any(not (c.isprintable() or c in "\n\t") for c in value):
        raise BadInput(f"{what} contains control characters")
    return value


def as_text(value: str, limit: int = MAX_TEXT) -> str:
    """Words a worker did not write (a generator's stderr, a server's error) as free text that
    `check_text` accepts: control characters but newline and tab escaped, cut to `limit`."""
    text = printable(value, keep="\n\t")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_time(value: object, what: str) -> str:
    if not isinstance(value, str) or not _TIME_RE.match(value):
        raise BadInput(f"{what} must be an RFC 3339 UTC time with milliseconds, found {value!r}")
    return value


def check_oid(value: object, what: str) -> str:
    if not isinstance(value, str) or not _OID_RE.match(value):
        raise BadInput(f"{what} must be a 40-hex commit id, found {value!r}")
    return value


def check_int(value: object, what: str, minimum: int = 0) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise BadInput(f"{what} must be an integer >= {minimum}, found {value!r}")
    return value


def check_choice(value: object, what: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise BadInput(f"{what} is {value!r}, not one of {', '.join(choices)}")
    assert isinstance(value, str)
    return value


def _object(
    doc: object, what: str, required: set[str], optional: frozenset[str] | set[str] = frozenset()
) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise BadInput(f"{what} must be a JSON object")
    missing = required - set(doc)
    unknown = set(doc) - required - optional
    if missing or unknown:
        parts = ([f"missing {', '.join(sorted(missing))}"] if missing else []) + (
            [f"unknown {', '.join(sorted(unknown))}"] if unknown else []
        )
        raise BadInput(f"{what} has the wrong fields: {'; '.join(parts)}")
    return doc


def _opt(doc: dict[str, Any], name: str, check: Any, what: str) -> Any:
    value = doc.get(name)
    return None if value is None else check(value, f"{what}.{name}")


# -- attempts.json -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    n: int
    worker: str
    epoch: int
    lease_until: str
    state: AttemptState
    started_at: str
    claim: str | None = None
    finished_at: str | None = None
    reason: str | None = None
    replays: tuple[str, ...] | None = None
    recovered_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "worker": self.worker,
            "epoch": self.epoch,
            "lease_until": self.lease_until,
            "state": str(self.state),
            "started_at": self.started_at,
        }
        for name in ("claim", "finished_at", "reason", "recovered_at"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        if self.replays is not None:
            out["replays"] = list(self.replays)
        return out


_ATTEMPT_REQUIRED = {"n", "worker", "epoch", "lease_until", "state", "started_at"}
_ATTEMPT_OPTIONAL = {"claim", "finished_at", "reason", "replays", "recovered_at"}


def _attempt(doc: object, what: str) -> Attempt:
    d = _object(doc, what, _ATTEMPT_REQUIRED, _ATTEMPT_OPTIONAL)
    replays = d.get("replays")
    if replays is not None and (
        not isinstance(replays, list) or not all(isinstance(r, str) and _FP_RE.match(r) for r in replays)
    ):
        raise BadInput(f"{what}.replays must be a list of 64-hex fingerprints")
    return Attempt(
        n=check_int(d["n"], f"{what}.n", 1),
        worker=check_label(d["worker"], f"{what}.worker"),
        epoch=check_int(d["epoch"], f"{what}.epoch"),
        lease_until=check_time(d["lease_until"], f"{what}.lease_until"),
        state=AttemptState(check_choice(d["state"], f"{what}.state", ATTEMPT_STATES)),
        started_at=check_time(d["started_at"], f"{what}.started_at"),
        claim=_opt(d, "claim", check_oid, what),
        finished_at=_opt(d, "finished_at", check_time, what),
        reason=_opt(d, "reason", check_text, what),
        replays=None if replays is None else tuple(replays),
        recovered_at=_opt(d, "recovered_at", check_time, what),
    )


@dataclass(frozen=True)
class Attempts:
    """attempts.json: the epoch (bumped by every fencing event), the job's state, each attempt."""

    epoch: int = 0
    state: JobState = JobState.QUEUED
    attempts: tuple[Attempt, ...] = ()
    refresh: bool = False  # `retry --refresh`: the next attempt asks the model afresh

    # -- transitions: each returns the next value; the ledger names the job's state through
    # `moved` with what `states.transition` answers, never by hand.

    def moved(self, state: JobState) -> Attempts:
        """The job's state after an event (`states.transition` decides it)."""
        return replace(self, state=state)

    def claimed(self, worker: str, lease_until: str, started_at: str) -> Attempts:
        """A new attempt by `worker`: the epoch is bumped, fencing every earlier one."""
        epoch = self.epoch + 1
        attempt = Attempt(len(self.attempts) + 1, worker, epoch, lease_until, AttemptState.CLAIMED, started_at)
        return replace(self, epoch=epoch, attempts=(*self.attempts, attempt))

    def sending(self, claim: str, lease_until: str) -> Attempts:
        """The current attempt, durably sending before its first byte goes out."""
        return self._last(state=AttemptState.SENDING, claim=claim, lease_until=lease_until)

    def renewed(self, lease_until: str) -> Attempts:
        return self._last(lease_until=lease_until)

    def finished(self, at: str, replays: tuple[str, ...]) -> Attempts:
        """The current attempt's receipt; `refresh` is spent (a later retry replays unless asked again)."""
        return replace(self._last(state=AttemptState.FINISHED, finished_at=at, replays=replays), refresh=False)

    def ended(self, state: AttemptState, at: str, reason: str, replays: tuple[str, ...] | None = None) -> Attempts:
        """The worker's own verdict without a receipt (failed before send, unknown); `replays`
        None keeps what the attempt held. Fencing: the epoch is bumped."""
        changes: dict[str, Any] = {"state": state, "finished_at": at, "reason": reason}
        if replays is not None:
            changes["replays"] = replays
        return replace(self._last(**changes), epoch=self.epoch + 1)

    def fenced(self, at: str) -> Attempts:
        """A lapsed lease fenced by `recover`: a claim failed before send, a send is unknown."""
        was = self.attempts[-1].state
        state = AttemptState.FAILED_BEFORE_SEND if was == AttemptState.CLAIMED else AttemptState.UNKNOWN
        return replace(self._last(state=state, recovered_at=at), epoch=self.epoch + 1)

    def retried(self, refresh: bool) -> Attempts:
        """The owner's new attempt: fencing (epoch bumped), asking the model afresh with `refresh`."""
        return replace(self, epoch=self.epoch + 1, refresh=refresh)

    def _last(self, **changes: Any) -> Attempts:
        return replace(self, attempts=(*self.attempts[:-1], replace(self.attempts[-1], **changes)))

    @functools.cached_property
    def canonical(self) -> bytes:
        """attempts.json's one byte form, serialized once: what an event stores and its writer signs."""
        return canonical_bytes(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "epoch": self.epoch,
            "state": str(self.state),
            "attempts": [a.to_dict() for a in self.attempts],
        }
        if self.refresh:
            doc["refresh"] = True
        return doc


def parse_attempts(data: bytes | None) -> Attempts:
    if data is None:
        return Attempts()
    d = _object(parse_strict(data, "attempts.json"), "attempts.json", {"epoch", "state", "attempts"}, {"refresh"})
    if d.get("refresh", True) is not True:
        raise BadInput("attempts.json refresh must be true when present")
    items = d["attempts"]
    if not isinstance(items, list):
        raise BadInput("attempts.json attempts must be a list")
    attempts = tuple(_attempt(a, f"attempts.json attempts[{i}]") for i, a in enumerate(items))
    if [a.n for a in attempts] != list(range(1, len(attempts) + 1)):
        raise BadInput("attempts.json attempts must be numbered 1, 2, 3, ... in order")
    return Attempts(
        check_int(d["epoch"], "attempts.json epoch"),
        JobState(check_choice(d["state"], "attempts.json state", JOB_STATES)),
        attempts,
        "refresh" in d,
    )


# -- meta.json -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainEntry:
    commit: str
    event: str
    state: str

    def to_dict(self) -> dict[str, str]:
        return {"commit": self.commit, "event": self.event, "state": self.state}


@dataclass(frozen=True)
class Final:
    """How an archived job ended: applied (commit, branch, receipt), dropped (why, by, was) or
    superseded (by, was, and `superseded_by`: the key of the job `resubmit` minted for it)."""

    state: JobState
    at: str | None = None
    commit: str | None = None
    branch: str | None = None
    receipt: str | None = None
    why: str | None = None
    by: str | None = None
    was: JobState | None = None
    superseded_by: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: str(v) if isinstance(v, JobState) else v for k, v in self.__dict__.items() if v is not None}


_FINAL_FIELDS = {"at", "commit", "branch", "receipt", "why", "by", "was", "superseded_by"}


def _final(doc: object) -> Final:
    d = _object(doc, "meta.json final", {"state"}, _FINAL_FIELDS)
    w = "meta.json final"
    return Final(
        state=JobState(check_choice(d["state"], f"{w}.state", FINAL_STATES)),
        at=_opt(d, "at", check_time, w),
        commit=_opt(d, "commit", check_oid, w),
        branch=_opt(d, "branch", lambda v, n: check_label(v, n, 1024), w),
        receipt=_opt(d, "receipt", lambda v, n: check_label(v, n, 80), w),
        why=_opt(d, "why", check_text, w),
        by=_opt(d, "by", lambda v, n: check_label(v, n, 512), w),
        was=_opt(d, "was", lambda v, n: JobState(check_choice(v, n, JOB_STATES)), w),
        superseded_by=_opt(d, "superseded_by", check_label, w),
    )


@dataclass(frozen=True)
class Meta:
    """meta.json: operational facts beside the job, outside its digest (never a safety decision)."""

    job_id: str
    key: str
    created_at: str
    submitter: str
    base: str | None
    rev: str | None
    allow_secrets: bool
    final: Final | None = None
    chain: tuple[ChainEntry, ...] = ()
    supersedes: str | None = None  # the key of the job this one was resubmitted for (SPEC §11)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "job_id": self.job_id,
            "key": self.key,
            "created_at": self.created_at,
            "submitter": self.submitter,
            "base": self.base,
            "rev": self.rev,
            "allow_secrets": self.allow_secrets,
        }
        if self.final is not None:
            out["final"] = self.final.to_dict()
        if self.chain:
            out["chain"] = [c.to_dict() for c in self.chain]
        if self.supersedes is not None:
            out["supersedes"] = self.supersedes
        return out


_META_REQUIRED = {"job_id", "key", "created_at", "submitter", "base", "rev", "allow_secrets"}


def _chain(chain: object) -> tuple[ChainEntry, ...]:
    """meta.json's chain: the commit, event and state of each move, checked."""
    if not isinstance(chain, list):
        raise BadInput("meta.json chain must be a list")
    entries = []
    for i, c in enumerate(chain):
        e = _object(c, f"meta.json chain[{i}]", {"commit", "event", "state"})
        entries.append(
            ChainEntry(
                check_oid(e["commit"], f"meta.json chain[{i}].commit"),
                check_label(e["event"], f"meta.json chain[{i}].event", 32),
                check_label(e["state"], f"meta.json chain[{i}].state", 32),
            )
        )
    return tuple(entries)


def parse_meta(data: bytes) -> Meta:
    d = _object(parse_strict(data, "meta.json"), "meta.json", _META_REQUIRED, {"final", "chain", "supersedes"})
    if not isinstance(d["allow_secrets"], bool):
        raise BadInput("meta.json allow_secrets must be true or false")
    chain = _chain(d.get("chain", []))
    return Meta(
        job_id=check_label(d["job_id"], "meta.json job_id"),
        key=check_label(d["key"], "meta.json key"),
        created_at=check_time(d["created_at"], "meta.json created_at"),
        submitter=check_label(d["submitter"], "meta.json submitter", 512),
        base=None if d["base"] is None else check_oid(d["base"], "meta.json base"),
        rev=None if d["rev"] is None else check_label(d["rev"], "meta.json rev", 1024),
        allow_secrets=d["allow_secrets"],
        final=_final(d["final"]) if d.get("final") is not None else None,
        chain=chain,
        supersedes=None if d.get("supersedes") is None else check_label(d["supersedes"], "meta.json supersedes"),
    )
