"""Each call of an attempt: its identity journaled before the send, its answer recorded in the
replay cache (signed `genjob-replay` by the worker) before its last byte reaches the generator,
replayed into a later attempt of the same job, counted against the budget and in the receipt."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pygit2

from git_genjob.documents.canonical import canonical_bytes, parse_strict, sha256_hex, utc_now
from git_genjob.documents.display import printable
from git_genjob.documents.errors import GenjobError
from git_genjob.documents.keys import NS_REPLAY, SigningKey, verify_signature
from git_genjob.documents.secretscan import find_secret, redact
from git_genjob.documents.signing import REPLAY_TYPE, pae, signer_of, unseal
from git_genjob.documents.signing import Sealed as SealedEnvelope
from git_genjob.replay.cache import Cache, Sealed, accept
from git_genjob.replay.prompt import normalize_text
from git_genjob.replay.request import fingerprint, request_doc
from git_genjob.storage.layout import REPLAYS_REF, gateway_answers_dir, gateway_journal_path
from git_genjob.storage.store import Store
from git_genjob.worker.gateway.dialects import Upstream
from git_genjob.worker.gateway.journal import (
    REQUEST_SUFFIX,
    drop_answer,
    fsync_dir,
    held,
    journal_rows,
    request_of,
    sweep_answers,
    write_synced,
)
from git_genjob.worker.gateway.spool import INLINE_MAX, Spool, sweep_spools

# What a fold may raise when the cache cannot be written or an answer read: genjob's own refusal
# (a held lock), the OS's, and libgit2's (an answer file gone, objects it cannot write: a full disk).
FOLD_ERRORS = (GenjobError, OSError, pygit2.GitError)

# Fields an SDK or agent fills with what differs per run: replaced by placeholders. Codex sends
# `client_metadata` (its session, thread and turn ids, the turn's start time) and a
# `prompt_cache_key` (its session id) with every Responses call: routing, not model input.
VOLATILE = ("user_id", "request_id", "session_id", "idempotency_key", "client_metadata", "prompt_cache_key")
MODEL_MAX = 200  # characters of a call's model name kept in the journal and the receipt
_HEX_ID = re.compile(r"\b(?:req|msg|chatcmpl|resp|call|toolu)_[A-Za-z0-9]{8,}\b")
# A UUID anywhere, also inside an id (Codex names each input item `msg_<uuid>`, `at_<uuid>`, new
# every run); before _HEX_ID, which would take only its first group.
_UUID = re.compile(r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{8}-(?:[0-9A-Fa-f]{4}-){3}[0-9A-Fa-f]{12}(?![0-9A-Fa-f])")
# fsyncs issued beside a call's own path: its request while the call is out, answers/' names while
# its answer is synced (SPEC §12.1's order kept: each is waited for before the row that names it)
_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="genjob-gateway-sync")


@dataclass
class Replayed:
    status: int
    content_type: str
    body: bytes
    stream: bool


class Budget(Exception):
    def __init__(self, name: str, limit: int):
        super().__init__(f"{name} {limit}")
        self.name, self.limit = name, limit


class Session:
    """The calls of one attempt of one job."""

    def __init__(
        self,
        store: Store,
        job_key: str,
        attempt: int,
        refresh: bool,
        sign: SigningKey | None,
        max_calls: int | None = None,
        max_tokens: int | None = None,
    ):
        self.store, self.job_key, self.attempt = store, job_key, attempt
        self.cache = Cache(store, sign)
        self.journal = gateway_journal_path(store.common_dir, job_key)
        self._journal_fd: int | None = None  # append-only, open while the Session writes rows
        os.makedirs(os.path.dirname(self.journal), exist_ok=True)
        self.calls: list[dict[str, Any]] = []
        self.diverged = refresh  # retry --refresh: every call is sent
        self.lock = threading.Lock()
        self.max_calls, self.max_tokens = max_calls, max_tokens
        self.budget: dict[str, Any] | None = None
        self.volatile: list[str] = []  # the scratch path, the attempt's token: placeholders in fingerprints
        self.answers = gateway_answers_dir(store.common_dir)  # answer documents the journal names, not yet folded
        # (event, answer sha256, its file or, held in its row, its bytes) to fold
        self.pending: list[tuple[Sealed, str, str | bytes]] = []
        self.spools = os.path.join(os.path.dirname(self.journal), "spool")
        for folder in (self.spools, self.answers):
            os.makedirs(folder, exist_ok=True)
        sweep_spools(self.spools)  # once a Session, not once a call
        self._fold_leftovers()  # answers an attempt that died (or whose fold failed) left in the journal
        with contextlib.suppress(OSError):
            sweep_answers(store, time.time())

    def _fold_leftovers(self) -> None:
        """The leftovers folded now; when that fails (a stale lock, a file it cannot write), they
        wait in `pending` for this attempt's own fold, still in the journal, and stderr says so:
        a worker never stops for it."""
        try:
            items = self._leftovers()
        except FOLD_ERRORS as exc:
            self._say_unfolded(None, exc)
            return
        if not items:
            return
        try:
            self.fold(items)
        except FOLD_ERRORS as exc:
            self.pending.extend(items)
            self._say_unfolded(len(items), exc)

    def normalized(self, body: bytes) -> str:
        text = body.decode("utf-8")
        for i, value in enumerate(self.volatile):
            text = text.replace(value, f"<volatile-{i}>")
            if "/" in value:  # the path as agents slug it into names (Claude Code's project memory dir)
                text = text.replace(_slug(value), f"<volatile-{i}-slug>")
        try:
            doc = json.loads(text) if text.strip() else None
        except ValueError:
            doc = None
        if isinstance(doc, dict):
            _scrub(doc)
            text = json.dumps(doc, sort_keys=True, ensure_ascii=False)
        text = _HEX_ID.sub("<id>", _UUID.sub("<uuid>", text))
        return normalize_text(text)[0]

    def _recorded(self, fp: str) -> tuple[dict[str, Any] | None, str | None]:
        """The answer a later attempt replays for `fp`, or (None, None): none recorded, or one that
        is damaged (a blob that does not hash to its name, not the answer document): a miss, sent
        afresh, never a dropped connection."""
        try:
            entry = self.cache.entry(fp)
            served = entry.served() if entry is not None else None
            if entry is None or served is None:
                return None, None
            rec = json.loads(self.cache.answer(entry, served))
            ok = isinstance(rec, dict) and isinstance(rec.get("body"), str) and isinstance(rec.get("status"), int)
            ok = ok and isinstance(rec.get("content_type"), str) and isinstance(rec.get("stream"), bool)
            return (rec, served) if ok else (None, None)
        except (GenjobError, ValueError, TypeError, UnicodeDecodeError):
            return None, None

    def paths(self) -> list[str]:
        """The attempt's own paths (its scratch tree and HOME, under the attempt's directory)."""
        return [v for v in self.volatile if "/" in v]

    def localized(self, body: str, recorded: list[str]) -> str:
        """A recorded answer as this attempt sees it: the recording attempt's paths (an agent's
        tool call names files by absolute path) replaced by this attempt's, raw and slugged."""
        for old, new in zip(recorded, self.paths(), strict=False):
            if isinstance(old, str) and old and old != new:
                body = body.replace(old, new).replace(_slug(old), _slug(new))
        return body

    def begin(self, up: Upstream, path: str, body: bytes, model: str) -> tuple[dict[str, Any], Replayed | None]:
        """Call n's identity, journaled before any send; its recorded answer when it replays."""
        with self.lock:
            self._spend()
            n = len(self.calls) + 1
            prompt = self.normalized(body)
            doc = request_doc(f"gateway:{up.name}{path.partition('?')[0]}", model, {"n": n}, prompt, self.job_key)
            call = self._new(up.name, model, fingerprint(doc))
            fp = call["fingerprint"]
            replay = None
            if not self.diverged:
                rec, served = self._recorded(fp)
                if rec is not None:
                    answer = self.localized(rec["body"], rec.get("volatile_paths") or [])
                    replay = Replayed(rec["status"], rec["content_type"], answer.encode("utf-8"), rec["stream"])
                    call.update(replayed=True, status="ok", answer_sha256=served)
                    call.update(input_tokens=rec.get("input_tokens"), output_tokens=rec.get("output_tokens"))
                else:
                    self.diverged = True  # from the first call that differs on, everything is sent
            call["_doc"] = doc
            self._journal(call)
            if replay is None and len(body) > INLINE_MAX:  # a small one goes in the answer's row
                # written and fsynced beside the send, off the answer's path
                call["_request"] = _POOL.submit(self._write_request, doc, self._early_path(self.attempt, n))
            return call, replay

    def _early_path(self, attempt: int, n: int) -> str:
        """Where call n of `attempt` has its request written while it is out (`_write_request`)."""
        name = sha256_hex(f"genjob early request\0{self.job_key}\0{attempt}\0{n}".encode())
        return os.path.join(self.answers, name + REQUEST_SUFFIX)

    def _write_request(self, doc: dict[str, Any], path: str) -> tuple[str, bytes] | None:
        """Call n's request document at `path` in answers/ (`record` renames it beside its
        answer), fsynced; None when its prompt or model looks like a credential (`seal` refuses
        it: never on disk). One a worker killed mid-call left goes when the job's next Session
        opens (`_leftovers`), or with SWEEP_AGE_S."""
        if any(find_secret(str(doc[field]).encode("utf-8")) for field in ("prompt", "model")):
            return None
        raw = canonical_bytes(doc)
        os.makedirs(self.answers, exist_ok=True)
        write_synced(path, raw)
        return path, raw

    def _early_request(self, call: dict[str, Any]) -> tuple[str, bytes] | None:
        """What `_write_request` wrote for `call` (waited for), taken from it; None when
        nothing was (its error raised: the answer is not recorded)."""
        future = call.pop("_request", None)
        return future.result() if future is not None else None

    def _spend(self) -> None:
        """Budget: raised before call n is journaled or sent (SPEC §12.1); hold `lock`."""
        used = sum((c["input_tokens"] or 0) + (c["output_tokens"] or 0) for c in self.calls)
        if self.max_calls is not None and len(self.calls) >= self.max_calls:
            self.budget = {"exceeded": "max_calls", "limit": self.max_calls}
            raise Budget("max_calls", self.max_calls)
        if self.max_tokens is not None and used >= self.max_tokens:
            self.budget = {"exceeded": "max_tokens", "limit": self.max_tokens}
            raise Budget("max_tokens", self.max_tokens)

    def _new(self, upstream: str, model: str, fp: str) -> dict[str, Any]:
        """Call n, `sending`, appended (not yet journaled); hold `lock`. The model is the
        generator's word: cut at MODEL_MAX, so no request makes the receipt or a line huge, and
        what in it looks like a credential redacted (the receipt is shared through git)."""
        model = redact(model)
        call: dict[str, Any] = {
            "n": len(self.calls) + 1,
            "upstream": upstream,
            "model": model if len(model) <= MODEL_MAX else model[: MODEL_MAX - 1] + "…",
            "fingerprint": fp,
            "answer_sha256": None,
            "replayed": False,
            "status": "sending",
            "input_tokens": None,
            "output_tokens": None,
        }
        self.calls.append(call)
        return call

    def open_call(self, upstream: str, model: str, fp: str) -> dict[str, Any]:
        """Call n of a caller that replays through §7's cache itself (the `http:` and `openai:`
        generators, gateway.direct): budget checked and identity journaled before it sends."""
        with self.lock:
            self._spend()
            call = self._new(upstream, model, fp)
            self._journal(call)
            return call

    def replayed_call(
        self, upstream: str, model: str, fp: str, answer_sha: str, tokens: tuple[int | None, int | None] = (None, None)
    ) -> None:
        """A call §7's cache answered: counted in the receipt with the tokens recorded with its
        answer, never sent."""
        with self.lock:
            call = self._new(upstream, model, fp)
            call.update(replayed=True, status="ok", answer_sha256=answer_sha)
            call.update(input_tokens=tokens[0], output_tokens=tokens[1])
            self._journal(call)

    def answered(self, call: dict[str, Any], answer_sha: str | None, tokens: tuple[int | None, int | None]) -> None:
        """A direct call's answer, as §7's cache hashes it, and its usage."""
        with self.lock:
            call.update(status="ok", answer_sha256=answer_sha, input_tokens=tokens[0], output_tokens=tokens[1])
            self._journal(call)

    def spool(
        self, up: Upstream, stream: bool, limit: int, keys: tuple[str, ...] = (), recording: bool = True
    ) -> Spool:
        """Where call's answer goes as it arrives (`record` takes it from there); an answer that
        holds one of `keys` (the worker's, echoed by an upstream) is never recorded."""
        return Spool(self.spools, limit, up.dialect, stream, tuple(k.encode("utf-8") for k in keys if k), recording)

    def record(self, call: dict[str, Any], spool: Spool, status: int, content_type: str) -> None:
        """The spooled answer recorded, signed, before the caller sends its last byte: its
        sealed event in the journal's fsynced row (a write-ahead log), and its document in that
        row when it is small (INLINE_MAX: one write, one fsync), else fsynced into `answers/`
        before the row; `fold` puts the attempt's answers into the replay cache in one commit
        (at the gateway's close, or when the next Session of the job opens after a crash).
        GenjobError when it may not be stored (not UTF-8 is the caller's UnicodeDecodeError)."""
        sha = spool.finish(status, content_type, self.paths())
        fp = call["fingerprint"]
        with self.lock:
            entry = self.cache.entry(fp)
        served = entry.served() if entry is not None else None
        if served is not None:  # retry --refresh of a recorded call: straight into the cache
            self._record_again(call, spool, sha, served)
            return
        sealed = self.cache.seal(fp, {"type": "recorded", "answer": sha}, request=call["_doc"])
        wal = {"event": base64.b64encode(sealed.event).decode("ascii"), "event_id": sealed.event_id}
        named = self._keep_request(call, sealed, wal)
        answer = spool.inline()
        kept: str | bytes
        if answer is not None:  # small: the row carries it, durable with the row
            wal["answer"] = base64.b64encode(answer).decode("ascii")
            kept = answer
            names = _POOL.submit(fsync_dir, self.answers) if named else None
        else:
            kept = spool.move(self.answers, sealed.event_id)
            names = _POOL.submit(fsync_dir, self.answers)
            spool.sync()
        # The answer's bytes and the names in answers/ made durable at once (fsyncs issued together
        # share the file system's journal commit), both before the row that names them.
        if names is not None:
            names.result()
        with self.lock:
            call.update(answer_sha256=sha, input_tokens=spool.tokens[0], output_tokens=spool.tokens[1], status="ok")
            call["_logged"] = True
            self.pending.append((sealed, sha, kept))
            self._journal(call, wal)

    def _keep_request(self, call: dict[str, Any], sealed: Sealed, wal: dict[str, str]) -> bool:
        """Call's request document kept for the row `wal` will be: carried in the row when small
        and none was written while the call was out, else in answers/ beside the answer (the early
        file renamed, fsynced already). Whether a name in answers/ was made (its folder to sync)."""
        early = self._early_request(call)
        if sealed.request is None:  # §7 stores none (it looked like a credential)
            _discard(early)
            return False
        wal["request_sha256"] = sha256_hex(sealed.request)
        if early is None and len(sealed.request) <= INLINE_MAX:
            wal["request"] = base64.b64encode(sealed.request).decode("ascii")
            return False
        os.makedirs(self.answers, exist_ok=True)
        request = os.path.join(self.answers, sealed.event_id + REQUEST_SUFFIX)
        # the early file fsynced while the call was out; its new name synced by the caller
        if not (early is not None and early[1] == sealed.request and _renamed(early[0], request)):
            _discard(early)
            write_synced(request, sealed.request)
        return True

    def _record_again(self, call: dict[str, Any], spool: Spool, sha: str, served: str) -> None:
        answer = spool.inline()
        blob = self.store.blob(answer) if answer is not None else self.store.blob_from_file(spool.file())
        fp = call["fingerprint"]
        with self.lock:
            if served == sha:
                self.cache.add(fp, {"type": "refresh", "answer": sha})
            else:  # what this attempt saw is what a later one replays
                self.cache.add(fp, {"type": "drift", "answer": sha, "against": served}, answer_blob=(sha, blob))
                accept(self.cache, fp, sha)
            call.update(answer_sha256=sha, input_tokens=spool.tokens[0], output_tokens=spool.tokens[1])

    def fold(self, items: list[tuple[Sealed, str, str | bytes]] | None = None) -> None:
        """The answers recorded in the journal into the replay cache, in one commit (a CAS on
        refs/genjob/replays, re-read and retried while another writer moves it); their files go
        once the cache holds them. Of several answers for one fingerprint (an earlier attempt's
        leftover and this attempt's record) the last is folded: two `recorded` events would be
        competing heads, a drift (SPEC §7). One of FOLD_ERRORS when it cannot be written:
        `pending` keeps them, the journal and answers/ too, for the next Session of the job."""
        if items is None:
            with self.lock:
                items, self.pending = self.pending, []
            try:
                self.fold(items)
            except FOLD_ERRORS:
                with self.lock:
                    self.pending[:0] = items
                raise
            return
        if not items:
            return
        last = {sealed.fp: sealed.event_id for sealed, _, _ in items}
        current = [item for item in items if last[item[0].fp] == item[0].event_id]
        batch = [(sealed, {sha: self._blob(kept)}) for sealed, sha, kept in current]
        self.cache.add_sealed(batch)
        self._done(items)

    def _done(self, items: list[tuple[Sealed, str, str | bytes]]) -> None:
        """Items the cache holds (or needs no more): their files gone, and a row saying so, so no
        later Session folds an answer its row carries again (a replay cache the owner cleared
        would fill again)."""
        for sealed, _, kept in items:
            drop_answer(self._file_of(sealed, kept))
        with self.lock:
            self._write_row({"folded": sorted({sealed.event_id for sealed, _, _ in items})})

    def _file_of(self, sealed: Sealed, kept: str | bytes) -> str:
        """Where an item's answer file is, or would be when its row carries it (its request's
        file is beside it either way)."""
        return kept if isinstance(kept, str) else os.path.join(self.answers, sealed.event_id)

    def _blob(self, kept: str | bytes) -> pygit2.Oid:
        return self.store.blob(kept) if isinstance(kept, bytes) else self.store.blob_from_file(kept)

    def fold_or_say(self) -> bool:
        """`fold` of this attempt's answers at the gateway's close; a failure is said on stderr
        (what failed, where the answers wait, what to do), never raised: the worker goes on to
        sign its receipt, and the job's next attempt in this clone folds them."""
        count = len(self.pending)
        try:
            self.fold()
        except FOLD_ERRORS as exc:
            self._say_unfolded(count, exc)
            return False
        return True

    def _say_unfolded(self, count: int | None, exc: Exception) -> None:
        if isinstance(exc, GenjobError):
            reason, hint = exc.message, exc.hint
        else:
            reason = f"{getattr(exc, 'strerror', None) or exc}" + (
                f": {getattr(exc, 'filename', None)}" if getattr(exc, "filename", None) else ""
            )
            hint = None
        what = f"{count} recorded model answer(s)" if count is not None else "the recorded model answers"
        lines = [
            f"warning: job {self.job_key}: {what} could not be folded into the replay cache ({REPLAYS_REF}): {reason}",
            f"  nothing is lost: they are kept in the gateway's journal ({self.journal}) and in {self.answers}, "
            "and the job's next attempt in this clone folds them",
            "hint: " + (hint or "fix what is named above; a lock a process that died left can be removed"),
        ]
        sys.stderr.write("\n".join(printable(line) for line in lines) + "\n")
        sys.stderr.flush()

    def _leftovers(self) -> list[tuple[Sealed, str, str | bytes]]:
        """Answers the journal names whose files are still in `answers/` (a worker that died
        before its gateway folded them): each checked against the row (the file must hash to the
        answer's sha256, the event to its id)."""
        out = []
        rows = [row for row in journal_rows(self.journal) if row.get("key") == self.job_key]
        folded = _folded_ids(rows)
        for row in rows:
            self._drop_earlier_attempts_early(row)
            leftover = self._leftover_of(row, folded)
            if leftover is not None:
                out.append(leftover)
        return self._unanswered(out)

    def _drop_earlier_attempts_early(self, row: dict[str, Any]) -> None:
        """The early request file of an earlier attempt's call `row` names, removed (a call
        that recorded no answer leaves one)."""
        if isinstance(row.get("attempt"), int) and row["attempt"] < self.attempt and isinstance(row.get("n"), int):
            with contextlib.suppress(OSError):
                os.unlink(self._early_path(row["attempt"], row["n"]))

    def _leftover_of(self, row: dict[str, Any], folded: set[Any]) -> tuple[Sealed, str, str | bytes] | None:
        """The answer `row` recorded, when it is unfolded, its event hashes to its id and is this
        clone's own, and its bytes still hash to the row's sha256; None otherwise."""
        wal = row.get("wal")
        if not isinstance(wal, dict):
            return None
        try:
            event, event_id = base64.b64decode(wal["event"], validate=True), str(wal["event_id"])
            fp, sha = str(row["fingerprint"]), str(row["answer_sha256"])
        except (KeyError, TypeError, ValueError):
            return None
        path = os.path.join(self.answers, event_id)
        if event_id in folded or not re.fullmatch(r"[0-9a-f]{64}", event_id) or sha256_hex(event) != event_id:
            return None
        request = request_of(path, wal)
        if not self._own(event, fp, sha):
            return None  # folded, it would count as this clone's own: only what this worker sealed
        kept = self._answer_of(wal, path, sha)
        if kept is None:
            return None
        return Sealed(fp, event_id, event, request, "recorded"), sha, kept

    def _answer_of(self, wal: dict[str, Any], path: str, sha: str) -> str | bytes | None:
        """A row's answer when it hashes to the row's sha256: the bytes the row carries, or its
        file in answers/; None when neither (a file folded already goes once the cache holds it)."""
        answer = held(wal, "answer")
        if answer is not None:
            return answer if sha256_hex(answer) == sha else None
        try:
            with open(path, "rb") as fh:
                return path if hashlib.file_digest(fh, "sha256").hexdigest() == sha else None
        except OSError:
            return None

    def _unanswered(self, items: list[tuple[Sealed, str, str | bytes]]) -> list[tuple[Sealed, str, str | bytes]]:
        """The leftovers whose fingerprint the cache answers no other way yet. One it already
        serves (a later attempt sent the call afresh while these waited, and folded its answer)
        is superseded: folded, it would be a competing head (SPEC §7's drift) for a call that
        replays fine. Its files go; its row stays, as history."""
        out, superseded = [], []
        for item in items:
            try:
                entry = self.cache.entry(item[0].fp)
            except GenjobError:
                entry = None
            served = entry.served() if entry is not None else None
            if served is None:
                out.append(item)
            else:
                superseded.append(item)
        if superseded:
            self._done(superseded)
        return out

    def _own(self, event: bytes, fp: str, sha: str) -> bool:
        """Whether `event` is what a worker's `record` sealed for `fp` and `sha`: a `recorded`
        event naming them, signed by this session's key or one the trust store allows for
        replay events (another worker of this clone that died), unsigned only when this session
        signs nothing either. A folded event is remembered in replay-local, which this clone
        trusts without a signature check: a row anyone wrote must not get there."""
        try:
            doc = parse_strict(event, "replay event")
            if isinstance(doc, dict) and "payloadType" in doc:
                doc = parse_strict(self._trusted_payload(event), "replay event")
            elif self.cache.sign is not None:
                return False
        except GenjobError:
            return False
        return _records(doc, fp, sha)

    def _trusted_payload(self, event: bytes) -> bytes:
        """The payload of a replay-event envelope signed by this session's key or by one the
        trust store allows for replay events; GenjobError otherwise."""
        sealed = unseal(event, REPLAY_TYPE, "replay event")
        if not self._signed_here(sealed):
            signers, revoked = self.cache.trust()
            signer_of(sealed, signers, revoked, time.time(), NS_REPLAY, "replay event")
        return sealed.payload

    def _signed_here(self, sealed: SealedEnvelope) -> bool:
        """Whether this session's key signed `sealed`."""
        message = pae(sealed.payload_type, sealed.payload)
        return self.cache.sign is not None and any(
            verify_signature(self.cache.sign.public, message, sig) for _, sig in sealed.signatures
        )

    def _drop_early(self, call: dict[str, Any]) -> None:
        """The early request file of a call no answer was recorded beside, removed."""
        with contextlib.suppress(OSError):
            _discard(self._early_request(call))

    def end(self, call: dict[str, Any], status: str) -> None:
        self._drop_early(call)
        with self.lock:
            if status == "ok" and call.get("_logged"):
                return  # record's row said it, fsynced
            call["status"] = status
            self._journal(call)

    def _journal(self, call: dict[str, Any], wal: dict[str, str] | None = None) -> None:
        row = {k: v for k, v in call.items() if not k.startswith("_")}
        if wal is not None:
            row["wal"] = wal
        self._write_row(row)

    def _write_row(self, row: dict[str, Any]) -> None:
        """One row appended to the journal, fdatasynced; hold `lock`."""
        row.update(key=self.job_key, attempt=self.attempt, time=utc_now())
        line = json.dumps(row, sort_keys=True).encode("utf-8") + b"\n"
        if self._journal_fd is None:  # opened once a Session: its name made durable then, not per row
            self._journal_fd = os.open(self.journal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            fsync_dir(os.path.dirname(self.journal))
        os.write(self._journal_fd, line)
        os.fdatasync(self._journal_fd)  # append-only: the data and the size that reaches it

    def close_journal(self) -> None:
        """The journal's descriptor closed (the gateway's close; a later row opens it again)."""
        with self.lock:
            if self._journal_fd is not None:
                os.close(self._journal_fd)
                self._journal_fd = None

    def __del__(self) -> None:  # a Session no gateway closed (a direct generator's): its descriptor too
        fd, self._journal_fd = getattr(self, "_journal_fd", None), None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def model_record(self) -> dict[str, Any]:
        """The receipt's `model`."""
        with self.lock:
            calls = [{k: v for k, v in c.items() if not k.startswith("_")} for c in self.calls]
        for c in calls:
            if c["status"] == "sending":
                c["status"] = "unknown"
        out: dict[str, Any] = {"calls": calls, "usage": _usage(calls)}
        if self.budget is not None:
            out["budget"] = self.budget
        return out


def _records(doc: Any, fp: str, sha: str) -> bool:
    """Whether `doc` is a `recorded` replay event naming `fp` and answer `sha`."""
    return isinstance(doc, dict) and doc.get("type") == "recorded" and doc.get("fp") == fp and doc.get("answer") == sha


def _folded_ids(rows: list[dict[str, Any]]) -> set[Any]:
    """The event ids the journal's `folded` rows name."""
    return {i for row in rows if isinstance(row.get("folded"), list) for i in row["folded"]}


def _usage(calls: list[dict[str, Any]]) -> dict[str, int]:
    """The receipt's `model.usage`: the calls counted, sent and replayed, and their tokens."""
    return {
        "calls": len(calls),
        "sent": sum(1 for c in calls if not c["replayed"]),
        "replayed": sum(1 for c in calls if c["replayed"]),
        "input_tokens": sum(c["input_tokens"] or 0 for c in calls),
        "output_tokens": sum(c["output_tokens"] or 0 for c in calls),
    }


def _discard(early: tuple[str, bytes] | None) -> None:
    """An early request file that no row will name, removed (gone already is fine)."""
    if early is not None:
        with contextlib.suppress(OSError):
            os.unlink(early[0])


def _renamed(src: str, dest: str) -> bool:
    """`src` renamed to `dest`; False when it is gone (a later attempt's Session, opened while
    this call was out, took it for a killed worker's and removed it)."""
    try:
        os.replace(src, dest)
    except FileNotFoundError:
        return False
    return True


def _slug(path: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "-", path)


def _scrub(doc: Any) -> None:
    if isinstance(doc, dict):
        for k in list(doc):
            if k in VOLATILE:
                doc[k] = "<volatile>"
            else:
                _scrub(doc[k])
    elif isinstance(doc, list):
        for x in doc:
            _scrub(x)
