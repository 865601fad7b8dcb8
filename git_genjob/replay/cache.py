"""The replay cache (SPEC §7): normalize, fingerprint, events in refs/genjob/replays, drift, accept."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pygit2

from git_genjob.documents.canonical import canonical_bytes, parse_strict, sha256_hex, utc_now
from git_genjob.documents.config import Config
from git_genjob.documents.errors import BadInput, GenjobError, Refused, Unavailable
from git_genjob.documents.keys import NS_REPLAY, NS_REVIEW, SigningKey, TrustedKey
from git_genjob.documents.secretscan import find_secret
from git_genjob.documents.signing import REPLAY_TYPE, seal, signer_of, unseal
from git_genjob.documents.signing import Sealed as Envelope
from git_genjob.replay.prompt import normalize_text
from git_genjob.replay.request import fingerprint, log_hit, request_doc
from git_genjob.storage.faults import crash_point
from git_genjob.storage.layout import REPLAYS_REF, asking_path, replay_local_path
from git_genjob.storage.store import CONTENT_MAX, TREE_MODE, RefUpdate, Store, lookup, retry_cas
from git_genjob.storage.truststore import trust_at_head

SENTINEL = "model_unavailable"
MODES = ("replay", "offline", "refresh")


@dataclass
class Normalized:
    text: str
    rewrites: list[str] = field(default_factory=list)


def normalize(prompt: str, cfg: Config | None = None) -> Normalized:
    """Strip what varies between machines and runs but not in meaning; record every rewrite."""
    return Normalized(*normalize_text(prompt, cfg.normalize_rules if cfg else ()))


_FP = re.compile(r"[0-9a-f]{64}")


def check_fp(fp: str) -> str:
    if not _FP.fullmatch(fp):
        raise BadInput(f"{fp!r} is not a fingerprint (64 lowercase hex)", "list them with: git genjob cache ls")
    return fp


def _base(fp: str) -> str:
    return f"{fp[:2]}/{fp}"


@dataclass
class Entry:
    fp: str
    request: dict[str, Any] | None
    events: list[dict[str, Any]]  # only the events that count here (SPEC §11): signed by a trusted key, or ours
    answers: dict[str, pygit2.Oid]
    ignored: list[dict[str, str]] = field(default_factory=list)  # {"id", "type", "why"} of events that do not

    def head_events(self) -> list[dict[str, Any]]:
        """Recorded and accepted events no accepted event supersedes.

        An accepted event names the hash it replaces (SPEC §7) and the ids of the events it
        supersedes; ids are content digests, so the events form a DAG whatever the order in
        which machines wrote them, and timestamps never decide.
        """
        answering = [e for e in self.events if e["type"] in ("recorded", "accepted")]
        superseded: set[str] = set()
        for e in answering:
            if e["type"] == "accepted":
                superseded |= _superseded_by(e, answering)
        return [e for e in answering if e["_id"] not in superseded]

    def heads(self) -> list[str]:
        return sorted({e["answer"] for e in self.head_events()})

    def served(self) -> str | None:
        heads = self.heads()
        return heads[0] if heads else None

    def pending(self) -> list[str]:
        """Drift candidates awaiting review, plus competing heads."""
        decided = {e["answer"] for e in self.events if e["type"] in ("accepted", "rejected")}
        heads = self.heads()
        served = heads[0] if heads else None
        out = {e["answer"] for e in self.events if e["type"] == "drift"} - decided - {served}
        if len(heads) > 1:
            out |= set(heads[1:])
        return sorted(out)


def _superseded_by(accepted: dict[str, Any], answering: list[dict[str, Any]]) -> set[str]:
    """The ids an accepted event supersedes: those it names, or, when it names none, those of
    the events with the answer it replaces."""
    if "supersedes" in accepted:
        return set(accepted["supersedes"])
    if accepted.get("replaces"):  # an accepted event without ids: it replaces that answer
        return {x["_id"] for x in answering if x["answer"] == accepted["replaces"] and x is not accepted}
    return set()


def _open_event(raw: bytes) -> tuple[Any, Envelope | None]:
    """(the event document, its envelope when signed); GenjobError when it does not parse."""
    doc = parse_strict(raw, "replay event")
    if not (isinstance(doc, dict) and "payloadType" in doc):
        return doc, None
    sealed = unseal(raw, REPLAY_TYPE, "replay event")
    return parse_strict(sealed.payload, "replay event"), sealed


SIGNED_BY = {
    "recorded": NS_REPLAY,
    "refresh": NS_REPLAY,
    "drift": NS_REPLAY,
    "accepted": NS_REVIEW,
    "rejected": NS_REVIEW,
}


class Cache:
    """Reads and writes refs/genjob/replays; every write is a CAS retried as a union.

    The ref is shared through a remote that anyone with push access can write, so an event
    counts only if a key trusted for its namespace in the trust store committed on HEAD signed
    it (`genjob-replay` for recorded/refresh/drift, `genjob-review` for accepted/rejected), or
    if this clone wrote it itself (its id is in `.git/genjob/replay-local`, which is never
    shared). What counts nowhere is listed in `Entry.ignored` and never served (SPEC §11).
    """

    def __init__(
        self, store: Store, sign: SigningKey | None = None, trust: tuple[list[TrustedKey], set[bytes]] | None = None
    ):
        self.store = store
        self.sign = sign  # the key this clone signs its events with (a worker's), or None: unsigned, local only
        self._trust = trust
        self._local: set[str] | None = None

    def trust(self) -> tuple[list[TrustedKey], set[bytes]]:
        """The signers and revoked keys of the trust store committed on HEAD (read once)."""
        if self._trust is None:
            try:
                trust = trust_at_head(self.store)
                self._trust = (trust.signers, trust.revoked)
            except BadInput:  # an unreadable store trusts nobody
                self._trust = ([], set())
        return self._trust

    def _local_path(self) -> str:
        return replay_local_path(self.store.common_dir)

    def local_ids(self) -> set[str]:
        """`<fingerprint> <event id>` of every event this clone wrote."""
        if self._local is None:
            try:
                with open(self._local_path(), encoding="ascii", errors="replace") as fh:
                    self._local = {line.strip() for line in fh if line.strip()}
            except OSError:
                self._local = set()
        return self._local

    def _remember_local(self, pairs: list[tuple[str, str]]) -> None:
        """Durably note that this clone wrote each `event_id` under its `fp` (before the ref
        names them): one fsync for them all."""
        path = self._local_path()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "a", encoding="ascii") as fh:
            fh.write("".join(f"{fp} {event_id}\n" for fp, event_id in pairs))
            fh.flush()
            os.fsync(fh.fileno())
        self.local_ids().update(f"{fp} {event_id}" for fp, event_id in pairs)

    def _event(self, fp: str, event_id: str, raw: bytes) -> tuple[dict[str, Any] | None, str]:
        """(the event, "") if it counts here under `fp`, else (None, why).

        An event names its fingerprint inside what is signed (and this clone remembers the pair
        it wrote), so an answer recorded for one prompt can never be copied under another."""
        if sha256_hex(raw) != event_id:  # the name is what replay-local remembers: it must be the content's
            return None, "its name is not the digest of its content"
        try:  # whatever a remote sent: a malformed event counts for nothing and blocks nothing
            doc, sealed = _open_event(raw)
        except GenjobError as exc:
            return None, f"malformed: {exc.message}"
        if not isinstance(doc, dict) or not isinstance(doc.get("type"), str) or "answer" not in doc:
            return None, "malformed: not a replay event"
        if doc.get("fp") != fp:
            return None, "it names another fingerprint (or none)"
        if f"{fp} {event_id}" in self.local_ids():
            return doc, ""
        why = self._not_trusted(doc, sealed)
        if why is not None:
            return None, why
        return doc, ""

    def _not_trusted(self, doc: dict[str, Any], sealed: Envelope | None) -> str | None:
        """Why an event another clone wrote does not count, or None when a key trusted for its
        type's namespace signed it."""
        if sealed is None:
            return "unsigned, and not written in this clone"
        namespace = SIGNED_BY.get(doc["type"])
        if namespace is None:
            return f"unknown event type {doc['type']!r}"
        signers, revoked = self.trust()
        try:
            signer_of(sealed, signers, revoked, time.time(), namespace, "replay event")
        except GenjobError as exc:
            return exc.message
        return None

    def _tree(self) -> pygit2.Tree | None:
        tip = self.store.ref_target(REPLAYS_REF)
        return self.store.get_commit(tip).tree if tip is not None else None

    def entry(self, fp: str, tree: pygit2.Tree | None = None) -> Entry | None:
        tree = tree if tree is not None else self._tree()
        if tree is None:
            return None
        try:
            node = self.store.get(tree[_base(fp)].id)
        except KeyError:
            return None
        if not isinstance(node, pygit2.Tree):  # the ref came from a remote: anything can sit here
            raise BadInput(f"replay cache entry {fp} is not a tree", "fetch again, or ask its writer to push it again")
        files = self.store.tree_files(node)
        events, ignored = self._events(fp, files)
        answers = {p[len("answers/") :]: o for p, o in files.items() if p.startswith("answers/")}
        return Entry(fp, self._request(fp, files.get("request.json")), events, answers, ignored)

    def _events(self, fp: str, files: dict[str, pygit2.Oid]) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
        """(the entry's events that count here, oldest first; {"id", "why"} of those that do not)."""
        events, ignored = [], []
        for path, oid in files.items():
            if path.startswith("events/"):
                event_id = path[len("events/") :].removesuffix(".json")
                event, why = self._event(fp, event_id, self.store.read(oid))
                if event is None:
                    ignored.append({"id": event_id, "why": why})
                else:
                    events.append(dict(event, _id=event_id))
        events.sort(key=lambda e: (str(e.get("time", "")), str(e.get("type", "")), str(e.get("answer", ""))))
        return events, ignored

    def _request(self, fp: str, oid: pygit2.Oid | None) -> dict[str, Any] | None:
        """The entry's request document, only when it is the one `fp` is the digest of: it sits
        unsigned beside the signed events, so one a remote swapped in is never shown as the
        request an answer was recorded for (SPEC §12.2)."""
        if oid is None:
            return None
        try:
            request = parse_strict(self.store.read(oid), "request")
        except GenjobError:
            return None
        return request if isinstance(request, dict) and fingerprint(request) == fp else None

    def resolve(self, text: str) -> str:
        """A fingerprint named in full or by a unique prefix of 4 or more hex digits (`cache ls`)."""
        if len(text) == 64 or not re.fullmatch(r"[0-9a-f]{4,63}", text):
            return check_fp(text)
        matches = self._starting_with(text)
        if len(matches) != 1:
            found = f"the prefix of {len(matches)} fingerprints" if matches else "no fingerprint's prefix"
            raise BadInput(f"{text!r} is {found}", "list them with: git genjob cache ls")
        return matches[0]

    def _starting_with(self, prefix: str) -> list[str]:
        """The names under the shard of `prefix` (2 or more hex digits) that start with it."""
        tree = self._tree()
        shard = self.store.get(tree[prefix[:2]].id) if tree is not None and prefix[:2] in tree else None
        return [str(e.name) for e in shard if str(e.name).startswith(prefix)] if isinstance(shard, pygit2.Tree) else []

    def resolve_answer(self, entry: Entry, text: str) -> str:
        """An answer hash named in full or by a unique prefix (with or without `sha256:`)."""
        if text in entry.answers:
            return text
        bare = text.removeprefix("sha256:")
        matches = [a for a in entry.answers if len(bare) >= 4 and a.removeprefix("sha256:").startswith(bare)]
        return matches[0] if len(matches) == 1 else text  # else `answer` names what is missing

    def answer(self, entry: Entry, sha: str) -> str:
        if sha not in entry.answers:
            raise BadInput(f"fingerprint {entry.fp} has no answer {sha}", f"see: git genjob cache show {entry.fp}")
        data = self.store.read(entry.answers[sha], limit=CONTENT_MAX)
        if sha256_hex(data) != sha.removeprefix("sha256:"):  # a blob swapped under a trusted name never serves
            raise BadInput(f"answer {sha} of {entry.fp} does not hash to its name", "fetch again, or ask afresh")
        return data.decode("utf-8")

    def fingerprints(self) -> list[str]:
        tree = self._tree()
        if tree is None:
            return []
        out = []
        for shard in tree:
            sub = self.store.get(shard.id)
            if isinstance(sub, pygit2.Tree):  # only `<2 hex>/<64 hex starting with them>` is an entry
                out += [str(e.name) for e in sub if _FP.fullmatch(str(e.name)) and str(e.name)[:2] == shard.name]
        return sorted(out)

    def add(
        self,
        fp: str,
        event: dict[str, Any],
        answer: str | None = None,
        request: dict[str, Any] | None = None,
        answer_blob: tuple[str, pygit2.Oid] | None = None,
    ) -> None:
        """Add one event (and its answer blob) with compare-and-swap, retrying as a union.
        `answer_blob`: (sha256, blob) of an answer already scanned and written (the gateway's
        spooled answers, never held in memory whole)."""
        if answer is not None:
            _refuse_secret(answer)
        sealed = self.seal(fp, event, request)
        answers = {}
        if answer is not None:
            answers[sha256_hex(answer.encode("utf-8"))] = self.store.blob(answer.encode("utf-8"))
        if answer_blob is not None:
            answers[answer_blob[0]] = answer_blob[1]
        self.add_sealed([(sealed, answers)])

    def seal(self, fp: str, event: dict[str, Any], request: dict[str, Any] | None = None) -> Sealed:
        """One event's bytes (signed by this writer's key when it has one) and its request
        document, ready for `add_sealed`: nothing written yet. A request whose prompt or model
        looks like a credential is refused here (BadInput); the model is checked on its own, since
        the gateway's prompt has ids such as `call_…` replaced and the model keeps them."""
        if request is not None:
            _refuse_secret(request["prompt"])
            _refuse_secret(str(request.get("model") or ""))
        event = dict(event, fp=fp, time=event.get("time") or utc_now(), host=socket.gethostname())
        ev_bytes = canonical_bytes(event)
        if self.sign is not None:
            ev_bytes = seal(REPLAY_TYPE, ev_bytes, self.sign)
        raw_request = canonical_bytes(request) if request is not None else None
        return Sealed(fp, sha256_hex(ev_bytes), ev_bytes, raw_request, str(event["type"]))

    def add_sealed(self, items: list[tuple[Sealed, dict[str, pygit2.Oid]]]) -> None:
        """Sealed events, each with its answers (sha256 -> blob), in one commit of the cache,
        compare-and-swap, retried as a union: the gateway folds an attempt's answers at once."""
        if not items:
            return
        self._remember_local([(sealed.fp, sealed.event_id) for sealed, _ in items])
        per_fp: dict[str, dict[str, pygit2.Oid]] = {}
        for sealed, answers in items:
            additions = per_fp.setdefault(sealed.fp, {})
            additions[f"events/{sealed.event_id}.json"] = self.store.blob(sealed.event)
            for sha, blob in answers.items():
                additions[f"answers/{sha}"] = blob
            if sealed.request is not None:
                additions["request.json"] = self.store.blob(sealed.request)
        if len(items) == 1:
            message = f"genjob replay: {items[0][0].kind} {items[0][0].fp}\n"
        else:
            message = f"genjob replay: {len(items)} events\n"

        def attempt() -> None:
            tip = self.store.ref_target(REPLAYS_REF)
            tree = self.store.get_commit(tip).tree if tip is not None else None
            new_tree: pygit2.Oid | None = None
            for fp, additions in per_fp.items():
                new_tree = self._with(tree, fp, additions)
                got = self.store.get(new_tree)
                assert isinstance(got, pygit2.Tree)
                tree = got
            assert new_tree is not None
            commit = self.store.commit(new_tree, [tip] if tip else [], message)
            crash_point("replay-recorded")
            self.store.update_refs([RefUpdate(REPLAYS_REF, tip, commit)], message="genjob: replay")

        retry_cas(REPLAYS_REF, attempt)

    def _with(self, tree: pygit2.Tree | None, fp: str, additions: dict[str, pygit2.Oid]) -> pygit2.Oid:
        existing: dict[str, pygit2.Oid] = {}
        node = lookup(tree, _base(fp))
        if isinstance(node, pygit2.Tree):
            existing = self.store.tree_files(node)
        existing.update(additions)
        return self.store.tree_with(tree, _base(fp), self.store.build_tree(existing), TREE_MODE)

    def log_hit(self, fp: str, request_hash: str) -> None:
        log_hit(self.store.gitdir, fp, request_hash)


@dataclass(frozen=True)
class Sealed:
    """An event sealed for the cache, not yet in it (Cache.seal, Cache.add_sealed)."""

    fp: str
    event_id: str
    event: bytes
    request: bytes | None
    kind: str  # the event's type: recorded, refresh, drift, ...


def _refuse_secret(text: str) -> None:
    found = find_secret(text.encode("utf-8"))
    if found:
        raise BadInput(
            f"refusing to store a prompt or answer that looks like a {found}",
            "remove the credential from the prompt; the cache is shared through git",
        )


@dataclass
class CallResult:
    answer: str
    fp: str
    source: str  # replay | fresh | drift
    candidate: str | None = None  # drift: the fresh answer, recorded for review, not served
    tokens: tuple[int | None, int | None] = (None, None)  # replay: the usage recorded with the answer


Sender = Callable[[str], str]
Usage = Callable[[], dict[str, int]]  # after a send: the provider's token counts, recorded in its event
USAGE_FIELDS = ("input_tokens", "output_tokens")


def recorded_tokens(entry: Entry, sha: str) -> tuple[int | None, int | None]:
    """The token counts an event of `entry` that counts here recorded with answer `sha` (the
    gateway's direct door records them; older events and `ask`'s have none)."""
    for e in entry.events:
        if e.get("answer") == sha and e["type"] in ("recorded", "refresh", "drift"):
            found = tuple(e.get(k) if type(e.get(k)) is int and e[k] >= 0 else None for k in USAGE_FIELDS)
            if found != (None, None):
                return found[0], found[1]
    return None, None


def _with_usage(event: dict[str, Any], usage: Usage | None) -> dict[str, Any]:
    if usage is None:
        return event
    counts = usage()
    return dict(event, **{k: counts[k] for k in USAGE_FIELDS if type(counts.get(k)) is int})


def call(
    cache: Cache, doc: dict[str, Any], send: Sender, mode: str = "replay", usage: Usage | None = None
) -> CallResult:
    """Serve from the cache or call `send(prompt)` and record (with `usage()`'s token counts in
    the event, when given); see SPEC §7 for the modes."""
    if mode not in MODES:
        raise BadInput(f"mode {mode!r} is not one of {', '.join(MODES)}")
    fp = fingerprint(doc)
    entry = cache.entry(fp)
    served = entry.served() if entry else None
    if served is not None and mode != "refresh":
        return _replay(cache, doc, fp, entry)
    if mode == "offline":
        raise Unavailable(f"replay miss for {fp} in offline mode", "run once online (--mode replay) to record it")
    if mode == "replay":
        return _replay_or_record_once(cache, doc, fp, send, usage)
    return _record(cache, doc, fp, send, entry, served, usage)


def _replay_or_record_once(cache: Cache, doc: dict[str, Any], fp: str, send: Sender, usage: Usage | None) -> CallResult:
    """A replay miss. Two processes of this repository missing the same fingerprint at once
    would both pay for the answer: the second waits for the first here, then replays what it
    recorded."""
    with _asking(cache.store, fp):
        entry = cache.entry(fp)
        if entry is not None and entry.served() is not None:
            return _replay(cache, doc, fp, entry)
        return _record(cache, doc, fp, send, entry, None, usage)


def _replay(cache: Cache, doc: dict[str, Any], fp: str, entry: Entry | None) -> CallResult:
    assert entry is not None
    served = entry.served()
    assert served is not None
    cache.log_hit(fp, sha256_hex(canonical_bytes(doc)))
    return CallResult(cache.answer(entry, served), fp, "replay", tokens=recorded_tokens(entry, served))


@contextlib.contextmanager
def _asking(store: Store, fp: str) -> Iterator[None]:
    """An flock on .git/genjob/asking/<fp> (released by the kernel if we die), removed when done.

    A waiter may wake on a file the holder has just unlinked; it then takes the lock again on
    whatever the path names now, so two holders never overlap and no lock file outlives its ask.
    """
    import fcntl

    path = asking_path(store.common_dir, fp)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            now = os.stat(path)
        except FileNotFoundError:
            now = None
        held = os.fstat(fd)
        if now is not None and (now.st_ino, now.st_dev) == (held.st_ino, held.st_dev):
            break
        os.close(fd)
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        os.close(fd)


def _record(
    cache: Cache,
    doc: dict[str, Any],
    fp: str,
    send: Sender,
    entry: Entry | None,
    served: str | None,
    usage: Usage | None = None,
) -> CallResult:
    answer = send(doc["prompt"])
    sha = sha256_hex(answer.encode("utf-8"))
    if served is None:
        cache.add(fp, _with_usage({"type": "recorded", "answer": sha}, usage), answer, doc)
        return CallResult(answer, fp, "fresh")
    assert entry is not None
    if sha == served:
        cache.add(fp, _with_usage({"type": "refresh", "answer": sha}, usage))
        return CallResult(answer, fp, "fresh")
    cache.add(fp, _with_usage({"type": "drift", "answer": sha, "against": served}, usage), answer)
    return CallResult(cache.answer(entry, served), fp, "drift", answer)


def accept(cache: Cache, fp: str, sha: str) -> str:
    """Serve `sha` from now on: it supersedes every current head (a drift's or a merge's)."""
    entry = _need(cache, fp)
    sha = cache.resolve_answer(entry, sha)
    cache.answer(entry, sha)
    heads = entry.head_events()
    if {e["answer"] for e in heads} == {sha}:
        return sha  # already the only answer served
    served = entry.served()
    cache.add(
        entry.fp,
        {"type": "accepted", "answer": sha, "replaces": served, "supersedes": sorted(e["_id"] for e in heads)},
    )
    return sha


def reject(cache: Cache, fp: str, sha: str) -> str:
    entry = _need(cache, fp)
    sha = cache.resolve_answer(entry, sha)
    cache.answer(entry, sha)
    if sha == entry.served() and len(entry.heads()) == 1:
        raise Refused(f"{sha} is the served answer of {fp}", "accept another answer instead of rejecting this one")
    cache.add(entry.fp, {"type": "rejected", "answer": sha})
    return sha


def _need(cache: Cache, fp: str) -> Entry:
    entry = cache.entry(cache.resolve(fp))
    if entry is None:
        raise BadInput(f"no cache entry {fp}", "list them with: git genjob cache ls")
    return entry


class CacheClient:
    """What a model generator calls: the cache scoped by a job's key (SPEC §5, §7)."""

    def __init__(self, store: Store, scope_key: str | None, mode: str = "replay", sign: SigningKey | None = None):
        self.cache, self.scope_key, self.mode = Cache(store, sign), scope_key, mode
        self.sources: list[tuple[str, str]] = []  # (fingerprint, replay | fresh | drift) per call

    def fingerprint(self, endpoint: str, model: str, params: dict[str, Any], prompt: str) -> str:
        """The fingerprint `call` files these under (what the gateway journals before a send)."""
        return fingerprint(request_doc(endpoint, model, params, prompt, self.scope_key))

    def call(
        self, endpoint: str, model: str, params: dict[str, Any], prompt: str, send: Sender, usage: Usage | None = None
    ) -> CallResult:
        """One model call of a job's attempt. A job's `retry --refresh` is the owner asking for a
        new answer, so this attempt gets it even when it drifts; replays keep serving the
        accepted answer until `cache accept` (SPEC §7)."""
        doc = request_doc(endpoint, model, params, prompt, self.scope_key)
        result = call(self.cache, doc, send, self.mode, usage)
        self.sources.append((result.fp, result.source))
        if result.source == "drift" and result.candidate is not None:
            return CallResult(result.candidate, result.fp, "drift", result.candidate)
        return result


def import_dir(cache: Cache, directory: str) -> list[str]:
    """Import `<fingerprint>.jsonl` replay logs: one JSON event per line."""
    imported = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".jsonl"):
            continue
        with open(os.path.join(directory, name), encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        if rows:
            fp = check_fp(str(rows[0].get("fingerprint", name[: -len(".jsonl")])))
            _import_log(cache, fp, name, rows)
            imported.append(fp)
    return imported


def _import_log(cache: Cache, fp: str, name: str, rows: list[Any]) -> None:
    """One log's rows, oldest first: the first as recorded, with its request; the others as drift."""
    for n, row in enumerate(sorted(rows, key=lambda r: str(r.get("created_at_utc", "")))):
        answer = str(row["response"])
        sha = sha256_hex(answer.encode("utf-8"))
        if row.get("response_sha256") and row["response_sha256"] != sha:
            raise BadInput(f"{name}: response_sha256 does not match the response text")
        event = {"type": "drift" if n else "recorded", "answer": sha, "time": row.get("created_at_utc")}
        cache.add(fp, event, answer, None if n else _imported_request(row, name))


def _imported_request(row: dict[str, Any], name: str) -> dict[str, Any]:
    """The request document an imported log's first row stands for (no prompt is known)."""
    return {
        "v": 1,
        "endpoint": row.get("endpoint", ""),
        "model": str(row.get("version", "")),
        "params": {},
        "prompt": "",
        "imported": name,
    }
