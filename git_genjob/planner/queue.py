"""The planner's and owner's operations: submit, list, show, bundle (and later claim/recover)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import pygit2

from git_genjob.documents.canonical import canonical_bytes, digest, parse_strict, utc_now
from git_genjob.documents.config import read_config
from git_genjob.documents.display import one_line, printable
from git_genjob.documents.errors import BadInput, Conflict, GenjobError
from git_genjob.documents.job import Job, describe_difference, seal_job
from git_genjob.documents.keys import SigningKey
from git_genjob.documents.receipt import check_signature, parse_envelope
from git_genjob.documents.states import ARCHIVED_STATES, JobState
from git_genjob.planner.ledger import record_submit
from git_genjob.planner.live import archived_leftover, archived_lookup
from git_genjob.planner.rows import StatusRow, summarize
from git_genjob.planner.submitchecks import check_allowed, check_creates, check_instruction, read_inputs, resolve_base
from git_genjob.planner.trust import job_trust, planner_key, planner_key_path, trust_from_worktree, worker_trust
from git_genjob.storage.archive import Archive, parse_rows, rows_header
from git_genjob.storage.layout import job_ref, rows_checked_path, status_rows_path
from git_genjob.storage.publish import Publisher, publisher
from git_genjob.storage.records import (
    JOB_ENVELOPE,
    JobRecord,
    attempt_logs,
    bundle_inputs,
    events,
    find_job,
    load_archived,
    load_live,
    load_tree,
    parse_trailers,
)
from git_genjob.storage.store import Store
from git_genjob.storage.truststore import TrustStore


@dataclass
class SubmitResult:
    key: str
    digest: str
    state: str
    created: bool
    archived: bool = False
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "digest": self.digest,
            "state": self.state,
            "created": self.created,
            "archived": self.archived,
            "warnings": self.warnings,
        }


def submit(
    store: Store,
    instruction: str,
    paths: list[str],
    creates: list[str] | None = None,
    key: str | None = None,
    rev: str | None = None,
    allow_secrets: bool = False,
    signing_key: SigningKey | None = None,
    supersedes: str | None = None,
    pub: Publisher | None = None,
) -> SubmitResult:
    """Mint a job from the work tree (or `rev`) and store it, idempotently by key.

    The submit commit also holds the planner's DSSE signature over job.json (SPEC §11), made
    with `signing_key`, else the user's planner key (`trust.planner_key`); with neither, submit
    refuses (exit 2) before it writes anything, since no worker would claim an unsigned job.
    `supersedes` names the job `resubmit` mints this one for (kept in meta.json); `pub` publishes
    the submit event elsewhere than the local refs (resubmit's one push)."""
    creates = creates or []
    cfg = read_config(store)
    check_instruction(instruction, cfg, allow_secrets)
    check_allowed(paths + creates, cfg)
    base = resolve_base(store, rev)
    oids = read_inputs(store, base, paths, rev, cfg, allow_secrets)
    check_creates(store, base, creates, rev)
    job = _mint_job(store, instruction, oids, creates, key)
    existing = _existing(store, job)
    if existing is not None:
        return existing
    meta = _meta(store, job, base, rev, allow_secrets, supersedes)
    if signing_key is None:
        signing_key = _planner_signing_key(store, job.key)
    files = {"job.json": store.blob(job.canonical()), "meta.json": store.blob(canonical_bytes(meta))}
    files[JOB_ENVELOPE] = store.blob(seal_job(job.canonical(), signing_key))
    files.update({f"inputs/{p}": o for p, o in oids.items()})
    try:
        record_submit(pub or publisher(store), job.key, files, str(meta["created_at"]))
    except Conflict:
        again = _existing(store, job)  # lost a create race: same digest collapses
        if again is None:
            raise
        return again
    warnings = _path_warnings(store, job)
    return SubmitResult(job.key, job.digest, JobState.QUEUED, True, warnings=warnings)


def _meta(
    store: Store, job: Job, base: pygit2.Commit | None, rev: str | None, allow_secrets: bool, supersedes: str | None
) -> dict[str, Any]:
    """The job's meta.json: a fresh job id, when and by whom it was submitted, from which commit."""
    return {
        "job_id": "j-" + uuid.uuid4().hex,
        "key": job.key,
        "created_at": utc_now(),
        "submitter": _submitter(store),
        "base": str(base.id) if base is not None else None,
        "rev": rev,
        "allow_secrets": allow_secrets,
        **({"supersedes": supersedes} if supersedes is not None else {}),
    }


def _mint_job(store: Store, instruction: str, oids: dict[str, pygit2.Oid], creates: list[str], key: str | None) -> Job:
    """The job: the instruction and each input's content digest (a path to create has none)."""
    inputs: dict[str, str | None] = {p: digest(store.read(o, limit=None)) for p, o in oids.items()}
    inputs.update({p: None for p in creates})
    return Job.mint(instruction, inputs, key)


def _planner_signing_key(store: Store, key: str) -> SigningKey:
    """The user's planner key to sign job `key` with; none refuses (exit 2) before anything is written."""
    signing_key: SigningKey | None = planner_key(store)
    if signing_key is None:  # a job no worker would ever claim: queue nothing (SPEC §12.4)
        raise BadInput(
            f"no planner key to sign job {key} with (looked for {planner_key_path(store)[0]}); "
            "workers claim only jobs a trusted planner signed, so nothing was queued",
            "create yours with git genjob keygen --planner (then commit .genjob/allowed_signers), "
            "or pass --signing-key FILE; git genjob doctor",
        )
    return signing_key


def _submitter(store: Store) -> str:
    sig = store.signature()
    return f"{sig.name} <{sig.email}>"


def _existing(store: Store, job: Job) -> SubmitResult | None:
    record = load_live(store, job.key) or load_archived(store, job.key)
    if record is None:
        return None
    if record.job.digest != job.digest:
        raise Conflict(
            f"key {job.key} is taken by a job with another digest ({record.job.digest}, this one {job.digest})",
            "use another --key for a different operation, or drop the old job first",
            details=describe_difference(record.job, job),
        )
    return SubmitResult(job.key, job.digest, record.state, False, archived=record.archived)


def _path_warnings(store: Store, job: Job) -> list[str]:
    mine = set(job.allowed_paths)
    out = []
    for key in store.live_keys():
        if key == job.key:
            continue
        shared = sorted(mine & set(allowed_paths_of(store, key)))
        if shared:
            out.append(
                f"live job {key} also holds {', '.join(shared)}; "
                "whichever applies second merges onto the first, or refuses on a conflict"
            )
    return out


def allowed_paths_of(store: Store, key: str) -> list[str]:
    """A live job's allowed paths; a key never changes meaning, so it is cached per store."""
    cache: dict[str, list[str]] = store.__dict__.setdefault("_paths_cache", {})
    if key not in cache:
        tip = store.ref_target(job_ref(key))
        try:
            data = store.file_at(store.get_commit(tip).tree, "job.json") if tip is not None else None
            if data is None:
                return []
            cache[key] = Job.from_bytes(data).allowed_paths
        except GenjobError:
            return []  # a damaged job holds no paths; status reports it
    return cache[key]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_ROW_DECODER = json.JSONDecoder(parse_constant=_no_constant)  # strict: no NaN, no raw control characters


def _vetted(doc: object, cols: list[str]) -> StatusRow | None:
    """The row of one archive rows line (its six columns), given what its last column decoded
    to, if the line is an archived job's row that agrees with itself: its JSON is an object
    naming the line's key and saying the line's submit time, archived state and one-line
    instruction, with no attempt result (an archived job has none). Else None."""
    sort_key, key, _, state, instruction, text = cols
    if (
        type(doc) is not dict
        or doc.get("key") != key
        or doc.get("state") != state
        or doc.get("created_at") != sort_key
        or doc.get("result") is not None
        or state not in ARCHIVED_STATES
    ):
        return None
    raw = doc.get("instruction")
    if not isinstance(raw, str) or one_line(raw) != instruction:
        return None
    return StatusRow(sort_key, key, state, instruction, text)


def _decode_one(text: str) -> object | None:
    """`text` decoded, if it is exactly one strict JSON value (nothing before or after it)."""
    try:
        doc, end = _ROW_DECODER.raw_decode(text)
    except ValueError:
        return None
    return doc if end == len(text) else None


def _vouched_rows(data: bytes | None, shard_tree: pygit2.Tree, known: bool) -> list[StatusRow] | None:
    """A shard's rows, if the blob was written for exactly this shard tree (its `#tree` line)
    and holds one line per entry, each naming that entry and its tree and ending in that job's
    row as exactly one JSON object that agrees with the line (`_vetted`); else None (each entry
    is then checked on its own). `known`: this very blob passed before (its id is remembered,
    and a blob never changes), so its lines are only cut into columns."""
    header = rows_header(shard_tree.id)
    if data is None or not data.startswith(header):
        return None
    text = data[len(header) :].decode("utf-8", "replace")
    if known:  # six tab-separated columns per line (JSON escapes tabs and newlines): one split
        c = text.replace("\n", "\t").split("\t")
        return list(map(StatusRow, c[0:-1:6], c[1:-1:6], c[3:-1:6], c[4:-1:6], c[5:-1:6]))
    fields = _row_fields(text, len(shard_tree))
    return _decoded_rows(fields, shard_tree) if fields is not None else None


def _row_fields(text: str, count: int) -> list[list[str]] | None:
    """The columns of each of a rows blob's lines, if it holds `count` lines of six columns each."""
    lines = text.split("\n")  # not splitlines: a row's JSON may hold U+2028
    if lines.pop() != "" or len(lines) != count:
        return None
    fields = [line.split("\t") for line in lines]
    return None if any(len(cols) != 6 for cols in fields) else fields


def _decoded_rows(fields: list[list[str]], shard_tree: pygit2.Tree) -> list[StatusRow] | None:
    """Each line's row, if each names a distinct entry of the shard with its tree and ends in
    exactly one JSON object that agrees with the line (`_vetted`); else None."""
    entries = {str(e.name): str(e.id) for e in shard_tree}
    body = "".join(cols[5] for cols in fields)  # one string, each column decoded in place
    decode, rows, at = _ROW_DECODER.raw_decode, [], 0
    for cols in fields:
        try:
            doc, end = decode(body, at)
        except ValueError:
            return None
        at += len(cols[5])
        row = _vetted(doc, cols) if end == at and entries.pop(cols[1], None) == cols[2] else None
        if row is None:
            return None
        rows.append(row)
    return rows


def _archived_rows(store: Store, damaged: dict[str, str]) -> list[StatusRow]:
    """Every archived job's row: from its shard's `_rows` line when that line names the entry's
    current tree and holds that job's row, else (a merge kept the other side's rows, an older
    archive, a forged line) from the job's documents.

    A rows blob that passed every check once is remembered by id in `.git/genjob/rows-checked`
    (a blob never changes meaning), so its JSON is decoded once, not on every `status --all`."""
    path = rows_checked_path(store.common_dir)
    checked = {line for line in _read_lines(path) if line}
    passed: list[str] = []
    out = []
    for _, shard_tree, data, rows_id in Archive(store).shards():
        fast = _vouched_rows(data, shard_tree, rows_id in checked)
        if fast is not None:
            out += fast
            passed.append(str(rows_id))
            continue
        out += _entry_rows(store, shard_tree, parse_rows(data)[1], damaged)
    if set(passed) != checked:
        _write_cache_file(path, "".join(f"{i}\n" for i in passed))
    return out


def _entry_rows(
    store: Store, shard_tree: pygit2.Tree, lines: dict[str, tuple[str, str]], damaged: dict[str, str]
) -> list[StatusRow]:
    """A shard's rows entry by entry: from the entry's own `_rows` line when it vouches for the
    entry's tree, else from the job's documents (one that does not load goes to `damaged`)."""
    out = []
    for entry in shard_tree:
        key, oid = str(entry.name), entry.id
        hint = lines.get(key)
        cols = hint[1].split("\t") if hint is not None and hint[0] == str(oid) else []
        row = _vetted(_decode_one(cols[5]), cols) if len(cols) == 6 and cols[1] == key else None
        if row is not None:
            out.append(row)
            continue
        sub = store.get(oid)
        try:
            if not isinstance(sub, pygit2.Tree):
                raise BadInput(f"archive entry {key} is not a tree")
            out.append(StatusRow.of(summarize(load_tree(store, key, sub, None, archived=True))))
        except GenjobError as exc:
            damaged[key] = exc.message
    return out


ROWS_CACHE_MAX = 64 * 1024 * 1024


def _read_lines(path: str) -> list[str]:
    """A local cache file's lines ([] when it is missing, unreadable or implausibly large)."""
    try:
        if os.path.getsize(path) > ROWS_CACHE_MAX:
            return []
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().split("\n")
    except OSError:
        return []


def _live_rows(store: Store, damaged: dict[str, str]) -> list[StatusRow]:
    """Every live job's row. A row is a function of the tip commit and the trust store alone
    (its tree holds every document it shows; the store says whether a trusted planner signed
    it), so rows are kept in a local cache keyed by tip id under the store's fingerprint
    (`.git/genjob/status-rows`, never shared, rewritten only when a tip changed): a job is read
    whole only once per event, not on every `status`."""
    path = status_rows_path(store.common_dir)
    trust = worker_trust(store)
    stamp = f"#trust\t{trust.fingerprint()}"
    fresh, cache = _row_cache(path, stamp)
    archived = archived_lookup(store)
    rows, seen = [], {}
    for key in store.live_keys():
        head_tip = _live_tip(store, key, archived)
        if head_tip is None:
            continue
        tip = str(head_tip)
        doc = _cached_doc(cache.get(tip), key)
        if doc is None:
            doc = _read_live_doc(store, key, head_tip, trust, damaged)
        if doc is None:
            continue
        row = StatusRow.of(doc)
        rows.append(row)
        seen[tip] = row.json
    if not fresh or seen != cache:
        _write_cache_file(path, stamp + "\n" + "".join(f"{tip}\t{text}\n" for tip, text in seen.items()))
    return rows


def _live_tip(store: Store, key: str, archived: Callable[[str], bool]) -> pygit2.Oid | None:
    """A live job's tip; None when its ref is gone or is the leftover of an interrupted archive move."""
    head_tip = store.ref_target(job_ref(key))
    if head_tip is None:
        return None
    if archived(key) and archived_leftover(store, key):
        return None  # archived; the live ref is the leftover of an interrupted move
    return head_tip


def _row_cache(path: str, stamp: str) -> tuple[bool, dict[str, str]]:
    """Whether the row cache was written under this trust `stamp`, and then its {tip: row JSON}."""
    lines = _read_lines(path)
    fresh = bool(lines) and lines[0] == stamp
    return fresh, dict(line.split("\t", 1) for line in lines[1:] if "\t" in line) if fresh else {}


def _cached_doc(text: str | None, key: str) -> dict[str, Any] | None:
    """A cached row's document, if it decodes to an object naming `key`."""
    try:
        doc = json.loads(text) if text is not None else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) and doc.get("key") == key else None


def _read_live_doc(
    store: Store, key: str, head_tip: pygit2.Oid, trust: TrustStore, damaged: dict[str, str]
) -> dict[str, Any] | None:
    """A live job's row read from its documents at `head_tip`, with whether a trusted planner
    signed it; None when it does not load (noted in `damaged`) or moved while it was read."""
    try:
        record = load_live(store, key)
    except GenjobError as exc:
        damaged[key] = exc.message
        return None
    if record is None or record.tip != head_tip:
        return None  # moved or removed while we read: the next status shows it
    doc = summarize(record)
    doc["planner"] = job_trust(record.job_bytes, record.job_envelope, trust).label
    return doc


def _write_cache_file(path: str, text: str) -> None:
    """A cache: written atomically, never fsynced, and a failure to write it is no failure."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def status(store: Store, state: str | None = None, include_archived: bool = False) -> list[StatusRow]:
    """The queue, oldest first: live jobs from their tips' cached rows, archived ones from the
    per-shard rows; anything a row cannot vouch for is read from its documents."""
    damaged: dict[str, str] = {}
    rows = _live_rows(store, damaged)
    if include_archived:
        rows += _archived_rows(store, damaged)
    rows.sort(key=itemgetter(1))  # by submit time, then key: two stable sorts on one string each
    rows.sort(key=itemgetter(0))
    for k, why in damaged.items():
        doc = {"key": k, "state": "damaged", "error": why, "instruction": f"damaged: {why}"}
        rows.append(StatusRow.of(doc))
    return [r for r in rows if state is None or r.state == state]


def show_logs(store: Store, key: str) -> dict[str, Any]:
    """`show KEY --log`: each attempt's kept generator stdout and stderr (SPEC §12.4), as text."""
    record = find_job(store, key)
    kept = attempt_logs(record)
    return {
        "key": record.key,
        "attempts": [
            {"n": n, **{name: data.decode("utf-8", "replace") for name, data in logs.items()}}
            for n, logs in kept.items()
        ],
    }


def log_lines(doc: dict[str, Any]) -> list[str]:
    """The human form of show_logs: a header per stream, then its text escaped (it is a
    generator's: untrusted), tabs and newlines kept."""
    out: list[str] = []
    for attempt in doc["attempts"]:
        for name in ("stdout", "stderr"):
            if name in attempt:
                out.append(f"--- attempt {attempt['n']} {name} (last 64 KiB) ---")
                out += [printable(line, keep="\t") for line in attempt[name].splitlines()]
    return out or [f"job {doc['key']}: no generator output kept (no attempt ran an exec generator that printed)"]


def show(store: Store, key: str) -> dict[str, Any]:
    record = find_job(store, key)
    doc = summarize(record)
    doc["job"] = record.job.to_dict()
    doc["meta"] = record.meta.to_dict()
    doc["attempt_records"] = [a.to_dict() for a in record.attempts]
    doc["outputs"] = sorted(record.output_oids())
    doc["receipt"] = parse_strict(record.receipt_bytes, "receipt.json") if record.receipt_bytes else None
    # An archived job's chain is still in the object store: the archive commit's second parent.
    tip = chain_tip(record)
    doc["events"] = [
        {"commit": str(e.commit), "event": e.event, "state": e.state, "epoch": e.epoch, "time": e.time}
        for e in (events(store, tip) if tip is not None else [])
    ]
    doc.update(_answers(store, record))
    return doc


def _answers(store: Store, record: JobRecord) -> dict[str, Any]:
    """What a reviewer asks `show` (SPEC §12.4): how the receipt ended and why, who signed it (as
    the trust store names the key, once its signature verified), and the commit it became."""
    out: dict[str, Any] = {"ended": None, "signer": None, "landed": None}
    if record.receipt_bytes is not None:
        out["ended"], out["signer"] = _receipt_answers(store, record.receipt_bytes)
    final = record.meta.final
    if final is not None and final.state == JobState.APPLIED and final.commit:
        out["landed"] = _landed(store, final.commit, final.branch)
    return out


def _receipt_answers(store: Store, receipt: bytes) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(how the receipt ended and why, who signed it: None when it does not parse)."""
    try:
        env = parse_envelope(receipt)
    except GenjobError as exc:
        return {"status": None, "reason": f"the receipt does not parse: {exc.message}"}, None
    pred = env.predicate
    ended = {"status": pred.status, "reason": pred.reason or None, "worker_id": pred.worker_id}
    if pred.model is not None:  # the gateway's totals (SPEC §12.1), as the receipt states them
        ended["usage"] = pred.model.get("usage")
        ended["budget"] = pred.model.get("budget")
    try:
        trust = trust_from_worktree(store)
        key = check_signature(env, trust.signers, trust.revoked, time.time())
        return ended, {"name": key.principal, "keyid": key.keyid, "verified": True}
    except GenjobError as exc:
        return ended, {"name": None, "keyid": None, "verified": False, "why": exc.message}


def _landed(store: Store, commit: str, branch: str | None) -> dict[str, Any]:
    """The commit an applied job became: its branch, what it merged onto, whether this clone has it."""
    merged = None
    if store.has(commit):
        merged = parse_trailers(store.get_commit(commit).message).get("Genjob-Merged-Onto")
    return {"commit": commit, "branch": branch, "merged_onto": merged, "here": store.has(commit)}


def chain_tip(record: JobRecord) -> pygit2.Oid | None:
    """The last event commit of a job's chain: the live tip, or the one the archive names."""
    if record.tip is not None:
        return record.tip
    return pygit2.Oid(hex=record.meta.chain[-1].commit) if record.meta.chain else None


def bundle_bytes(store: Store, key: str) -> bytes:
    """The job's bundle as a byte-identical tar: job.json and inputs/<path>."""
    import tarfile  # only `bundle` needs it (with its compression modules): not every command's start-up

    record = find_job(store, key)
    members: list[tuple[str, bytes]] = [("job.json", record.job_bytes)]
    # Member names come from job.json's checked paths, never from tree entry names.
    members += [(f"inputs/{path}", data) for path, data in bundle_inputs(store, record).items()]
    members.sort(key=lambda m: m[0].encode("utf-8"))
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
