"""Which queued job a worker tries to claim next (SPEC §12.3): its shard first, then stealing.

A job's shard of N is `shard_of(key, N) = int(sha256(key)[:8], 16) % N` (the first 8 hex
digits of the SHA-256 of its key, as an integer, modulo N), so every runner of a fleet agrees
on it without talking. The pick is only a hint: the claim is a push leased on the job's tip,
and the remote decides who gets it (exactly once stays exactly once whatever is picked).
"""

from __future__ import annotations

import hashlib
import os
import random
import time
from collections.abc import Callable

from git_genjob.documents.errors import BadInput
from git_genjob.documents.states import JobState
from git_genjob.planner.live import Head, heads
from git_genjob.storage.store import Store

PICK_WINDOW = 16  # without a shard: a random start among this many oldest jobs
SPREAD_SHARE = 4  # ... and at most this share of the queue: a short queue stays first in, first out
RESERVE = 4  # a shard's oldest jobs left to its owner by stealers (what it claims while a stealer's view ages)
STEAL_GRACE_S = 3.0  # a shard whose oldest job stays the same this long is stalled: all of it is stolen
SHARD_ENV = "GENJOB_SHARD"


def shard_of(key: str, n: int) -> int:
    """The shard (0 ≤ shard < n) a job key falls in."""
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n


def _ascii_digits(text: str) -> bool:
    """0-9 only: str.isdigit takes '²' (which int() refuses) and '١' (which it reads as 1)."""
    return text.isascii() and text.isdigit()


def parse_shard(spec: str | None, source: str = "--shard") -> tuple[int, int] | None:
    """`I/N` with 0 ≤ I < N as (I, N); None for no spec. Anything else is bad input (exit 2)."""
    if spec is None or spec == "":
        return None
    index, slash, count = spec.strip().partition("/")
    if slash and _ascii_digits(index) and _ascii_digits(count) and 0 <= int(index) < int(count):
        return int(index), int(count)
    raise BadInput(
        f"{source} {spec!r} is not a shard I/N with 0 <= I < N",
        "give this runner's index and the fleet's size, e.g. --shard 0/8 for the first of 8 runners",
    )


def shard_from_env() -> tuple[int, int] | None:
    return parse_shard(os.environ.get(SHARD_ENV), SHARD_ENV)


class Picker:
    """A worker's view of the queue, oldest first, re-read when used up or older than `ttl` s.

    The list is a hint: each pick reads the job itself and claims it only if it is still
    queued, so a long-running worker pays the scan of every live ref once per `ttl`, not once
    per claim. With a shard I/N the worker takes its own shard's jobs oldest first. When that
    is empty it steals a random job among the other shards' queued jobs past their RESERVE
    oldest (which their owners are about to take): a random shard, weighted by what it has
    left, at a random place in it, so idle runners neither herd onto one job nor onto an
    owner's next one, and only from a view just fetched. After a lost race (`lost_on`) it
    steals from another shard. A shard whose
    oldest queued job has not changed for STEAL_GRACE_S in this worker's view is stalled (its
    owner is gone or was never started) and all of it may be stolen; until then a pick that
    finds only reserved jobs returns None with `held` set, and the worker looks again shortly
    instead of calling the queue empty. Without a shard a worker through a remote (`spread`)
    picks at random among the PICK_WINDOW oldest (at most a quarter of the queue, so a queue of
    a few jobs is taken oldest first), so workers started together spread out; a
    worker on local refs takes the oldest first until it loses a race, then spreads too.
    """

    def __init__(
        self,
        store: Store,
        ttl: float = 1.0,
        shard: tuple[int, int] | None = None,
        rng: random.Random | None = None,
        read: Callable[[Store], list[Head]] = lambda s: heads(s, (JobState.QUEUED,)),
        spread: bool = True,
    ):
        self.store, self.ttl, self.shard = store, ttl, shard
        self.spread = spread  # without a shard: random among the oldest few (else oldest first until a lost race)
        self.rng = rng or random.Random()
        self.read = read
        self.candidates: list[Head] = []
        self.read_at = float("-inf")
        self.scanned = False  # whether the queue was read during the current pick
        self.avoid: int | None = None  # the shard of the last lost race: steal elsewhere next
        self.oldest: dict[int, tuple[str, float]] = {}  # shard -> (its oldest queued key, seen since)
        self.held = False  # the last pick found only jobs reserved for their shards' owners
        self.skip: set[str] = set()  # jobs this worker no longer tries (the remote refused their claim)
        self.fresh = True  # whether the view was just fetched (the worker says so): a steal needs a fresh one

    @property
    def lost(self) -> bool:  # kept for callers that only say "a race was lost"
        return self.avoid is not None

    @lost.setter
    def lost(self, value: bool) -> None:
        if not value:
            self.avoid = None

    def lost_on(self, key: str) -> None:
        """A race for `key` was lost: the next pick comes from another shard than its."""
        self.avoid = shard_of(key, self.shard[1]) if self.shard else -1
        self.spread = True

    def refreshed(self, fresh: bool) -> None:
        """The worker's view was just fetched (fresh) or may be up to its refresh age old: after a
        fetch the queue is read again, and a steal waits for a fresh view (the owners moved on)."""
        self.fresh = fresh
        if fresh:
            self.read_at = float("-inf")

    def next(self) -> Head | None:
        self.held = False
        if self._read_due():
            self.candidates = [h for h in self.read(self.store) if h.key not in self.skip]
            self.read_at, self.scanned = time.monotonic(), True
        if not self.candidates:
            return None
        index = self._choose()
        if index is None:
            self.held = True
            return None
        return self.candidates.pop(index)

    def _read_due(self) -> bool:
        """The queue is read again when the list is used up, or older than `ttl` and not yet read this pick."""
        return not self.candidates or (not self.scanned and time.monotonic() - self.read_at > self.ttl)

    def _choose(self) -> int | None:
        """The index in `candidates` (oldest first) to try next; None: only reserved jobs are left."""
        if self.shard is None:
            return self._unsharded()
        mine, n = self.shard
        by_shard = self._by_shard(n)
        if mine in by_shard:
            return by_shard[mine][0]
        if not self.fresh:
            return None  # steal only from a view just fetched: the worker fetches, then picks again
        return self._steal(self._stealable(by_shard))

    def _unsharded(self) -> int:
        """Without a shard: the oldest, or with `spread` a random one among the oldest few."""
        window = min(PICK_WINDOW, max(1, len(self.candidates) // SPREAD_SHARE))
        return self.rng.randrange(window) if self.spread else 0

    def _steal(self, stealable: dict[int, list[int]]) -> int | None:
        """A random stealable index, from another shard than the last lost race's when another has
        one; None when none is stealable."""
        if self.avoid in stealable and len(stealable) > 1:
            del stealable[self.avoid]
        pool = [i for indices in stealable.values() for i in indices]
        return self.rng.choice(pool) if pool else None

    def _by_shard(self, n: int) -> dict[int, list[int]]:
        """The indices in `candidates` (oldest first) of each shard of n that has a queued job."""
        by_shard: dict[int, list[int]] = {}
        for i, head in enumerate(self.candidates):
            by_shard.setdefault(shard_of(head.key, n), []).append(i)
        return by_shard

    def _stealable(self, by_shard: dict[int, list[int]]) -> dict[int, list[int]]:
        """Of each other shard, the indices a stealer may take: all of a stalled shard's (its oldest
        job unchanged for STEAL_GRACE_S), else those past its RESERVE oldest."""
        now = time.monotonic()
        stealable: dict[int, list[int]] = {}
        for shard, indices in by_shard.items():
            first = self.candidates[indices[0]].key
            if self.oldest.get(shard, ("",))[0] != first:
                self.oldest[shard] = (first, now)
            stalled = now - self.oldest[shard][1] >= STEAL_GRACE_S
            if stalled or len(indices) > RESERVE:
                stealable[shard] = indices if stalled else indices[RESERVE:]
        return stealable
