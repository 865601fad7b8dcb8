"""Reading the live queue: the jobs under refs/genjob/jobs/, oldest first, as the ledger, the
worker's pick and `apply --all` see them (SPEC §4). Read only: the ledger writes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pygit2

from git_genjob.documents.attempts import parse_meta
from git_genjob.documents.errors import GenjobError
from git_genjob.storage.archive import Archive
from git_genjob.storage.layout import ARCHIVE_REF, job_ref, shard
from git_genjob.storage.records import JobRecord, load_live, parse_trailers, vouch_problem
from git_genjob.storage.store import Store, lookup


@dataclass(frozen=True)
class Head:
    """What a live job's tip commit says about it: enough to order and filter the queue.

    Read from the tip's trailers (a hint: the job's documents stay authoritative and are read
    before anything acts on it) and memoized by commit id, which never changes meaning.
    """

    key: str
    tip: pygit2.Oid
    state: str | None
    created: str


def heads(store: Store, states: tuple[str, ...] | None = None) -> list[Head]:
    """The live jobs (only those whose tip is in `states`, when given), oldest first.

    One ref read per live job and, for a tip not seen before, one commit read: no tree or
    document is read here, so a worker's pick costs about what `git for-each-ref` does.
    """
    memo: dict[pygit2.Oid, tuple[str | None, str]] = store.__dict__.setdefault("_head_memo", {})
    out = []
    for key in store.live_keys():
        tip = store.ref_target(job_ref(key))
        if tip is None:
            continue
        info = memo.get(tip)
        if info is None:
            info = memo[tip] = _head_info(store, tip)
        if states is None or info[0] in states:
            out.append(Head(key, tip, info[0], info[1]))
    out.sort(key=lambda h: (h.created, h.key))
    return out


def _head_info(store: Store, tip: pygit2.Oid) -> tuple[str | None, str]:
    try:
        commit = store.get_commit(tip)
    except (GenjobError, ValueError):
        return None, ""  # not a commit: load_live names the damage when the job is read
    t = parse_trailers(commit.message)
    created = t.get("Genjob-Created")
    if created is None:  # chains written before the trailer existed: meta.json says it
        try:
            data = store.file_at(commit.tree, "meta.json")
            created = parse_meta(data).created_at if data is not None else ""
        except GenjobError:
            created = ""
    return t.get("Genjob-State"), created


def archived_leftover(store: Store, key: str) -> bool:
    """Whether the archive already holds `key` (its live ref is the leftover of an interrupted
    move), in an entry this clone can vouch for: one that came from a remote and cannot be
    vouched for never ends a live job (SPEC §11)."""
    entry = Archive(store).entry(key)
    return entry is not None and vouch_problem(store, key, entry) is None


def archived_lookup(store: Store) -> Callable[[str], bool]:
    """`is key in the archive?` for many keys: each shard tree is read once, not once per key."""
    tip = store.ref_target(ARCHIVE_REF)
    root = store.get_commit(tip).tree if tip is not None else None
    shards: dict[str, pygit2.Tree | None] = {}

    def archived(key: str) -> bool:
        name = shard(key)
        if name not in shards:
            sub = lookup(root, name)
            shards[name] = sub if isinstance(sub, pygit2.Tree) else None
        tree = shards[name]
        return tree is not None and key in tree

    return archived


def live_jobs(
    store: Store, damaged: dict[str, str] | None = None, states: tuple[str, ...] | None = None
) -> list[JobRecord]:
    """Every readable live job, oldest first (by submit time, then key).

    With `states`, only jobs whose tip says they are in one of them are read at all (the
    state trailer of the tip commit is enough): a worker's loop touches the queued jobs, not
    every job waiting for its apply. A damaged job ref is skipped, never fatal for the others;
    its key and the reason go into `damaged` when given.
    """
    out = []
    archived = archived_lookup(store)
    for head in heads(store, states):
        record = _live_record(store, head.key, archived, damaged)
        if record is not None:
            out.append(record)
    out.sort(key=lambda r: (r.meta.created_at, r.key))
    return out


def _live_record(
    store: Store, key: str, archived: Callable[[str], bool], damaged: dict[str, str] | None
) -> JobRecord | None:
    """The job its live ref holds; None for a damaged one (named in `damaged`) or one archived."""
    if archived(key) and archived_leftover(store, key):
        return None  # archived; the live ref is the leftover of an interrupted move (recover deletes it)
    try:
        return load_live(store, key)
    except GenjobError as exc:
        if damaged is not None:
            damaged[key] = exc.message
        return None
