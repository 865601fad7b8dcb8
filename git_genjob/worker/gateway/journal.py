"""The gateway's journal and its answer files: one fsynced JSON row per call state under
`.git/genjob/gateway/<key>.jsonl`, the answer documents (and their requests) its rows name in
`answers/` until a Session folds them into the replay cache, and the sweep of the ones no
Session ever will."""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import re
from typing import Any

from git_genjob.documents.canonical import sha256_hex
from git_genjob.storage.layout import gateway_answers_dir, gateway_journal_path, job_ref
from git_genjob.storage.store import Store

REQUEST_SUFFIX = ".request"  # answers/<event id>.request: the request document of that row's event
UNFOLDED_SHOWN_MAX = 16 * 1024 * 1024  # an answer file not yet folded is read for show --calls up to this
SWEEP_AGE_S = 24 * 3600  # an answer file this old is no live session's: a row names it within the call


def drop_answer(path: str) -> None:
    for name in (path, path + REQUEST_SUFFIX):
        with contextlib.suppress(OSError):
            os.unlink(name)


def sweep_answers(store: Store, now: float) -> int:
    """Remove the answer files in answers/ that no Session will ever fold: older than
    SWEEP_AGE_S (no live session still writes or names them) and named by no journal row of a
    job still live here (a worker killed between the file's move and its row; the leftovers of
    a job dropped or finished since, whose live ref is gone). The journals are read only when
    such an old file exists. How many went."""
    folder = gateway_answers_dir(store.common_dir)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return 0
    old = {}
    for name in names:
        event_id = name.removesuffix(REQUEST_SUFFIX)
        path = os.path.join(folder, name)
        try:
            if re.fullmatch(r"[0-9a-f]{64}", event_id) and now - os.lstat(path).st_mtime > SWEEP_AGE_S:
                old[name] = event_id
        except OSError:
            continue
    if not old:
        return 0
    named = _named_by_live_jobs(store)
    gone = 0
    for name, event_id in old.items():
        if event_id not in named:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name))
                gone += 1
    return gone


def _named_by_live_jobs(store: Store) -> set[str]:
    """The event ids journal rows name, of every job whose live ref this clone still holds."""
    journals = os.path.dirname(gateway_answers_dir(store.common_dir))
    named: set[str] = set()
    for name in os.listdir(journals):
        key = name.removesuffix(".jsonl")
        if not name.endswith(".jsonl") or store.ref_target(job_ref(key)) is None:
            continue
        for row in journal_rows(os.path.join(journals, name)):
            wal = row.get("wal")
            if isinstance(wal, dict) and isinstance(wal.get("event_id"), str):
                named.add(wal["event_id"])
    return named


def write_synced(path: str, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def fsync_dir(folder: str) -> None:
    """The names in `folder` made durable (a file created or moved there)."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def held(wal: dict[str, Any], field: str) -> bytes | None:
    """A small answer (`answer`) or request (`request`) document the row carries itself
    (base64), or None: it is in its file in answers/, or the row is damaged."""
    value = wal.get(field)
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None


def request_of(answer_path: str, wal: dict[str, Any]) -> bytes | None:
    """The request document a row's `wal` names: carried in the row, or its file beside the
    answer, when it hashes to the row's `request_sha256`; else None (the event folds without it)."""
    want = wal.get("request_sha256")
    if not isinstance(want, str):
        return None
    inline = held(wal, "request")
    if inline is not None:
        return inline if sha256_hex(inline) == want else None
    try:
        if os.path.getsize(answer_path + REQUEST_SUFFIX) > UNFOLDED_SHOWN_MAX * 8:
            return None
        with open(answer_path + REQUEST_SUFFIX, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    return data if sha256_hex(data) == want else None


def journal_rows(path: str) -> list[dict[str, Any]]:
    """The journal's rows, a line cut by a crash left out."""
    rows: list[dict[str, Any]] = []
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    except FileNotFoundError:
        pass
    return rows


def journal_calls(store: Store, job_key: str) -> tuple[list[dict[str, Any]], int]:
    """The last attempt's calls in the gateway's journal, each at its last recorded state, and
    that attempt's number (0: no journal)."""
    rows = journal_rows(gateway_journal_path(store.common_dir, job_key))
    if not rows:
        return [], 0
    last = max((r.get("attempt", 0) for r in rows if isinstance(r.get("attempt"), int)), default=0)
    calls: dict[int, dict[str, Any]] = {}
    for r in rows:
        if r.get("attempt") == last and isinstance(r.get("n"), int):
            calls[r["n"]] = r
    for c in calls.values():
        if c.get("status") == "sending":
            c["status"] = "unknown"  # no answer was recorded: the worker stopped while it was out
    return [calls[n] for n in sorted(calls)], last
