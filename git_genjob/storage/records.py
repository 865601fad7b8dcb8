"""Reading a job's event chain: the stored job, its meta, attempts, receipt and outputs."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import pygit2

from git_genjob.documents.attempts import Attempt, Attempts, Meta, parse_attempts, parse_meta
from git_genjob.documents.canonical import canonical_bytes, digest
from git_genjob.documents.errors import BadInput, NoSuchJob
from git_genjob.documents.job import Job
from git_genjob.storage.gitdir import parse_trailers
from git_genjob.storage.store import CONTENT_MAX, Store, job_ref, lookup

__all__ = ["NoSuchJob", "parse_trailers"]


@dataclass
class Event:
    commit: pygit2.Oid
    event: str
    state: str
    epoch: int
    time: int
    trailers: dict[str, str]


@dataclass
class JobRecord:
    """One job as stored: live (tip of its ref) or archived (final tree)."""

    key: str
    job: Job
    job_bytes: bytes
    meta: Meta
    tree: pygit2.Tree
    store: Store
    tip: pygit2.Oid | None
    archived: bool = False
    attempts_doc: Attempts = field(default_factory=Attempts)
    receipt_bytes: bytes | None = None

    @property
    def state(self) -> str:
        if self.archived:
            return self.meta.final.state if self.meta.final is not None else "applied"
        if self.receipt_bytes is not None:
            return "done"
        return self.attempts_doc.state

    @property
    def epoch(self) -> int:
        return self.attempts_doc.epoch

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        return self.attempts_doc.attempts

    @functools.cached_property
    def files(self) -> dict[str, pygit2.Oid]:
        """{path: blob oid} of the whole stored tree (read on first use)."""
        return self.store.tree_files(self.tree)

    @property
    def digest(self) -> str:
        return self.job.digest

    def output_oids(self) -> dict[str, pygit2.Oid]:
        return {p[len("outputs/") :]: o for p, o in self.files.items() if p.startswith("outputs/")}


TOP_LEVEL = {"job.json", "meta.json", "attempts.json", "receipt.json", "inputs", "outputs"}


def bundle_inputs(store: Store, record: JobRecord) -> dict[str, bytes]:
    """The job's input bytes, rebuilt from job.json alone (SPEC §3: this is the bundle).

    Each non-null input is read from inputs/<path> and re-hashed against its digest in job.json;
    a missing, mismatched or extra file (a planted CLAUDE.md, say) refuses the whole job, since
    the stored tree lies outside the digest and may come from a hostile remote.
    """
    where = f"job {record.key}"
    extra = sorted(str(e.name) for e in record.tree if str(e.name) not in TOP_LEVEL)
    if extra:
        raise BadInput(f"{where}: its tree holds {', '.join(map(repr, extra))} beside the job's documents")
    inputs_entry = lookup(record.tree, "inputs")
    stored: dict[str, pygit2.Oid] = {}
    if inputs_entry is not None:
        sub = store.get(inputs_entry.id)
        if not isinstance(sub, pygit2.Tree):
            raise BadInput(f"{where}: inputs is not a directory")
        stored = store.tree_files(sub)
    wanted = {p: d for p, d in record.job.input_map.items() if d is not None}
    planted = sorted(set(stored) - set(wanted))
    if planted:
        raise BadInput(
            f"{where}: inputs/ holds files that are not inputs of job.json: {', '.join(planted)}",
            "the ref was tampered with; drop the job and submit it again",
        )
    out: dict[str, bytes] = {}
    for path, want in sorted(wanted.items()):
        if path not in stored:
            raise BadInput(f"{where}: inputs/{path} is missing")
        data = store.read(stored[path], limit=CONTENT_MAX)
        have = digest(data)
        if have != want:
            raise BadInput(
                f"{where}: inputs/{path} hashes to {have}, job.json says {want}",
                "the ref was tampered with; drop the job and submit it again",
            )
        out[path] = data
    return out


def event_message(event: str, key: str, state: str, epoch: int, extra: dict[str, str] | None = None) -> str:
    lines = [f"genjob: {event} {key}", ""]
    trailers = {"Genjob-Event": event, "Genjob-State": state, "Genjob-Epoch": str(epoch)}
    trailers.update(extra or {})
    lines += [f"{k}: {v}" for k, v in trailers.items()]
    return "\n".join(lines) + "\n"


_PARSED_JOBS: dict[pygit2.Oid, tuple[Job, bytes]] = {}  # job.json by blob id: a blob never changes meaning
_PARSED_JOBS_MAX = 20_000


def _job_at(store: Store, tree: pygit2.Tree) -> tuple[Job, bytes] | None:
    """job.json of a stored tree, parsed and validated once per blob (every event repeats it)."""
    try:
        entry = tree["job.json"]
    except KeyError:
        return None
    if entry.type_str != "blob":
        return None
    hit = _PARSED_JOBS.get(entry.id)
    if hit is None:
        data = store.read(entry.id)
        hit = (Job.from_bytes(data), data)
        if len(_PARSED_JOBS) >= _PARSED_JOBS_MAX:
            _PARSED_JOBS.clear()
        _PARSED_JOBS[entry.id] = hit
    return hit


def load_tree(store: Store, key: str, tree: pygit2.Tree, tip: pygit2.Oid | None, archived: bool) -> JobRecord:
    parsed = _job_at(store, tree)
    meta_bytes = store.file_at(tree, "meta.json")
    if parsed is None or meta_bytes is None:
        raise BadInput(
            f"job {key}: stored tree lacks job.json or meta.json", "the ref is damaged; inspect it with git show"
        )
    job, job_bytes = parsed
    if job.key != key:
        raise BadInput(f"job ref {key} holds a job whose key is {job.key}", "the ref is damaged or was renamed")
    try:
        meta = parse_meta(meta_bytes)
        attempts = parse_attempts(store.file_at(tree, "attempts.json"))
    except BadInput as exc:
        raise BadInput(f"job {key}: {exc.message}", "the ref is damaged; inspect it with git show") from None
    if meta.key != key:
        raise BadInput(f"job {key}: meta.json names key {meta.key}", "the ref is damaged or was renamed")
    receipt = store.file_at(tree, "receipt.json")
    return JobRecord(key, job, job_bytes, meta, tree, store, tip, archived, attempts, receipt)


def load_live(store: Store, key: str) -> JobRecord | None:
    tip = store.ref_target(job_ref(key))
    if tip is None:
        return None
    return load_tree(store, key, store.get_commit(tip).tree, tip, archived=False)


def load_archived(store: Store, key: str) -> JobRecord | None:
    tree = store.archive_entry(key)
    if tree is None:
        return None
    return load_tree(store, key, tree, None, archived=True)


def find_job(store: Store, key: str) -> JobRecord:
    """An archived job, else a live one; exit 2 if neither exists.

    The archive is the final word: a live ref beside an archive entry is the leftover of a move
    that was interrupted between its two steps.
    """
    record = load_archived(store, key) or load_live(store, key)
    if record is None:
        raise NoSuchJob(f"no job with key {key!r}", "list jobs with: git genjob status --all")
    return record


MIN_PREFIX = 4


def resolve_key(store: Store, text: str) -> str:
    """The full key of a job named by its key or a unique prefix of it (as `status` prints keys).

    An exact key always wins. A prefix is looked up in the live refs, then in the archive (a
    scan of its shards, paid only when the text is no job's key). Text that matches nothing is
    returned as it is, for the command's own lookup (possibly through a remote) to report.
    """
    if len(text) < MIN_PREFIX or store.ref_target(job_ref(text)) is not None or store.archive_entry(text):
        return text
    matches = sorted(k for k in store.live_keys() if k.startswith(text))
    if not matches:
        matches = sorted(k for k, _ in store.archive_entries() if k.startswith(text))
    if len(matches) > 1:
        raise NoSuchJob(
            f"{text!r} is the prefix of {len(matches)} jobs' keys: " + ", ".join(matches[:5]), "give more characters"
        )
    return matches[0] if matches else text


def events(store: Store, tip: pygit2.Oid) -> list[Event]:
    """A live chain's events, oldest first (first parents only)."""
    out: list[Event] = []
    oid: pygit2.Oid | None = tip
    while oid is not None:
        commit = store.get_commit(oid)
        t = parse_trailers(commit.message)
        out.append(
            Event(
                oid,
                t.get("Genjob-Event", "?"),
                t.get("Genjob-State", "?"),
                _int(t.get("Genjob-Epoch", "0")),
                commit.commit_time,
                t,
            )
        )
        oid = commit.parent_ids[0] if commit.parent_ids else None
    return out[::-1]


def _int(text: str) -> int:
    return int(text) if text.isdigit() and len(text) < 19 else 0


def write_event(
    store: Store,
    record: JobRecord,
    event: str,
    files: dict[str, pygit2.Oid],
    attempts_doc: dict[str, Any] | None,
    state: str,
    extra: dict[str, str] | None = None,
) -> pygit2.Oid:
    """A new event commit on top of record.tip (no ref move)."""
    if attempts_doc is not None:
        files = dict(files)
        files["attempts.json"] = store.blob(canonical_bytes(attempts_doc))
    tree = store.build_tree(files)
    epoch = int(attempts_doc["epoch"]) if attempts_doc is not None else record.epoch
    parents = [record.tip] if record.tip is not None else []
    trailers = {"Genjob-Created": record.meta.created_at, **(extra or {})}
    return store.commit(tree, parents, event_message(event, record.key, state, epoch, trailers))
