"""`show KEY --calls` (SPEC §12.1): the calls of a job's last attempt read back from its
receipt or the gateway's journal, each with its request and answer as the replay cache (or an
answer file not yet folded) holds them, and their human form."""

from __future__ import annotations

import json
import os
import re
from typing import Any

from git_genjob.documents.canonical import sha256_hex
from git_genjob.documents.display import printable
from git_genjob.documents.errors import GenjobError
from git_genjob.documents.secretscan import redact
from git_genjob.replay.cache import Cache, Entry
from git_genjob.storage.layout import gateway_answers_dir
from git_genjob.storage.store import Store
from git_genjob.worker.gateway.journal import UNFOLDED_SHOWN_MAX, held, journal_calls, request_of

CALL_FIELDS = ("n", "upstream", "model", "status", "replayed", "input_tokens", "output_tokens")
TRANSCRIPT_CUT = 4096  # characters of each request and answer `show --calls` prints


def transcript(
    store: Store, job_key: str, receipt_model: dict[str, Any] | None, receipt_attempt: int = 0
) -> dict[str, Any]:
    """`show KEY --calls` (SPEC §12.1): the calls of the job's last attempt that reached the
    gateway, each with its request and answer as the replay cache recorded them (the attempt's
    token already a placeholder there; anything credential-looking redacted). The calls come from
    the receipt's `model` when there is one, else from the journal (a worker that died mid-call)."""
    source = "receipt"
    calls = list((receipt_model or {}).get("calls") or [])
    journal, attempt = journal_calls(store, job_key)
    if receipt_model is None or attempt > receipt_attempt:  # a later attempt left no receipt
        source, calls = "journal", journal
    cache = Cache(store)
    return {"key": job_key, "source": source, "calls": [_shown(store, cache, call) for call in calls]}


def _shown(store: Store, cache: Cache, call: dict[str, Any]) -> dict[str, Any]:
    """One call of `transcript`: its fields, with its request and answer (redacted) from the
    replay cache, or from its answer file when the journal recorded it and no fold took it yet."""
    row = {k: call.get(k) for k in CALL_FIELDS}
    row["fingerprint"] = fp = str(call.get("fingerprint") or "")
    row["request"] = row["answer"] = None
    entry = _entry_of(cache, fp)
    if entry is not None and entry.request is not None:
        row["request"] = redact(str(entry.request.get("prompt", "")))
    sha = call.get("answer_sha256")
    if entry is not None and isinstance(sha, str) and sha in entry.answers:
        row["answer"] = _cached_answer(cache, entry, sha)
    elif isinstance(sha, str):  # recorded in the journal, not yet folded into the cache
        row["request"], row["answer"] = _unfolded(store, call, sha)
    return row


def _entry_of(cache: Cache, fp: str) -> Entry | None:
    """The cache's entry for `fp`; None when `fp` is no fingerprint or the cache holds no readable one."""
    try:
        return cache.entry(fp) if re.fullmatch(r"[0-9a-f]{64}", fp) else None
    except GenjobError:
        return None


def _cached_answer(cache: Cache, entry: Entry, sha: str) -> str | None:
    """The answer `sha` of `entry` as the caller got it, redacted; None when the cache cannot give it."""
    try:
        return redact(_body(cache.answer(entry, sha)))
    except GenjobError:
        return None


def _body(answer: str) -> str:
    """What the caller was answered: the gateway's answer document's body, or (a direct call of
    the http: and openai: generators, §7) the answer text itself."""
    try:
        doc = json.loads(answer)
    except ValueError:
        return answer
    if isinstance(doc, dict) and isinstance(doc.get("body"), str) and "content_type" in doc:
        return str(doc["body"])
    return answer


def _unfolded(store: Store, call: dict[str, Any], sha: str) -> tuple[str | None, str | None]:
    """(request, answer) of a call the journal's row records whose answer file is still in
    `answers/` (a worker that died before its gateway folded it), each redacted."""
    wal = call.get("wal")
    if not isinstance(wal, dict) or not re.fullmatch(r"[0-9a-f]{64}", str(wal.get("event_id"))):
        return None, None
    path = os.path.join(gateway_answers_dir(store.common_dir), str(wal["event_id"]))
    data = held(wal, "answer")  # a small answer: the row carries it
    try:
        if data is None:
            if os.path.getsize(path) > UNFOLDED_SHOWN_MAX:
                return None, None
            with open(path, "rb") as fh:
                data = fh.read()
    except OSError:
        return None, None
    request = None
    raw = request_of(path, wal)
    try:
        doc = json.loads(raw) if raw is not None else None
        request = redact(str(doc.get("prompt", ""))) if isinstance(doc, dict) else None
    except ValueError:
        pass
    if sha256_hex(data) != sha:
        return request, None
    return request, redact(_body(data.decode("utf-8", "replace")))


def transcript_lines(doc: dict[str, Any]) -> list[str]:
    """The human form of `transcript`: escaped (a model's and an agent's text is untrusted), each
    request and answer cut at TRANSCRIPT_CUT characters."""
    if not doc["calls"]:
        return [f"job {doc['key']}: no model calls went through the gateway"]
    out = [f"calls of job {doc['key']} (from the {doc['source']}):"]
    for c in doc["calls"]:
        tokens = f"{c['input_tokens'] if c['input_tokens'] is not None else '?'} in / "
        tokens += f"{c['output_tokens'] if c['output_tokens'] is not None else '?'} out"
        how = "replayed" if c["replayed"] else "sent"
        out.append(printable(f"call {c['n']}  {c['upstream']} {c['model'] or '-'}  {c['status']}, {how}, {tokens}"))
        for name in ("request", "answer"):
            text = c[name]
            if text is None:
                out.append(f"  {name}: (not in this clone's replay cache)")
                continue
            cut = f" … ({len(text) - TRANSCRIPT_CUT} more characters)" if len(text) > TRANSCRIPT_CUT else ""
            out.append(f"  {name}: " + printable(text[:TRANSCRIPT_CUT]) + cut)
    return out
