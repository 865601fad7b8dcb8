"""The replay cache commands' work (ask, ls, show, explain): one call per command, no click."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from git_genjob.documents.config import parse_config, read_config
from git_genjob.documents.errors import BadInput, GeneratorUnavailable, GenjobError, Unavailable
from git_genjob.documents.keys import SigningKey
from git_genjob.planner.userfiles import read_text, write_atomic
from git_genjob.replay import fast
from git_genjob.replay.cache import SENTINEL, Cache, call, normalize
from git_genjob.replay.request import ask_request, fingerprint, parse_endpoint
from git_genjob.replay.web import chat_completion, post_json
from git_genjob.storage.memo import window
from git_genjob.storage.store import Store

CONFIG_PATH = ".genjob/config.toml"


def ask(
    store: Store,
    endpoint: str,
    model: str | None,
    prompt_file: str,
    out_file: str,
    mode: str,
    key: str | None,
    timeout: float,
    sign: SigningKey | None = None,
) -> dict[str, Any]:
    """One cached model call. With `sign` (a key trusted for genjob-replay) what is recorded
    counts in every clone that trusts it; without, only in this one (SPEC §11)."""
    dialect, base, model = parse_endpoint(endpoint, model)
    started = time.time()
    taken = fast.before(store.workdir, store.gitdir) if mode != "refresh" else None  # before anything is read
    config = store.worktree_file(CONFIG_PATH)
    cfg = parse_config(config)
    norm = normalize(read_text(prompt_file, "prompt file"), cfg)
    doc = ask_request(dialect, base, model, norm.text, key)
    send = _sender(dialect, base, model, timeout)
    cache = Cache(store, sign)
    try:
        result = call(cache, doc, send, mode)
    except (GeneratorUnavailable, Unavailable) as exc:
        write_atomic(out_file, SENTINEL + "\n")
        raise Unavailable(exc.message, exc.hint or "nothing was recorded; try again later") from None
    except GenjobError:
        raise
    write_atomic(out_file, result.answer)
    if result.source == "replay" and taken is not None:  # what `ask` serves from here on without libgit2
        fast.remember(taken, config, list(cfg.normalize_rules), result.fp, result.answer, _trust_span(cache, started))
    return {"fingerprint": result.fp, "source": result.source, "out_file": out_file}


def _trust_span(cache: Cache, started: float) -> dict[str, float | None]:
    """The span around `started` in which no trusted key's validity window opens or closes:
    which events count may change at its edges, so a remembered answer holds only inside it."""
    signers, _ = cache.trust()
    return window([t for k in signers for t in (k.valid_after, k.valid_before) if t is not None], started)


def _sender(dialect: str, base: str, model: str, timeout: float) -> Callable[[str], str]:
    """How `ask` sends a prompt: the plain dialect's POST (the body is the answer), or a chat completion."""
    if dialect == "http":
        return lambda prompt: post_json(base, {"prompt": prompt, "format": "text"}, timeout)
    return _chat_sender(base, model, timeout)


def _chat_sender(base: str, model: str, timeout: float) -> Callable[[str], str]:
    """The chat call of `ask`: the same client as the openai: generator (API key included)."""

    def send(prompt: str) -> str:
        return chat_completion(base, {"model": model, "messages": [{"role": "user", "content": prompt}]}, timeout)

    return send


def ls(store: Store) -> list[dict[str, Any]]:
    cache = Cache(store)
    rows: list[dict[str, Any]] = []
    for fp in cache.fingerprints():
        try:
            entry = cache.entry(fp)
        except GenjobError as exc:  # one damaged entry (a hostile push) is one row, not the listing's end
            rows.append(
                {"fingerprint": fp, "served": None, "pending": [], "events": 0, "ignored": 0, "damaged": exc.message}
            )
            continue
        if entry is not None:
            rows.append(
                {
                    "fingerprint": fp,
                    "served": entry.served(),
                    "pending": entry.pending(),
                    "events": len(entry.events),
                    "ignored": len(entry.ignored),
                    "damaged": None,
                }
            )
    return rows


def show(store: Store, fp: str) -> dict[str, Any]:
    cache = Cache(store)
    fp = cache.resolve(fp)
    entry = cache.entry(fp)
    if entry is None:
        raise BadInput(f"no cache entry {fp}", "list them with: git genjob cache ls")
    return {
        "fingerprint": fp,
        "request": entry.request,
        "events": entry.events,
        "ignored": entry.ignored,
        "answers": sorted(entry.answers),
        "served": entry.served(),
        "heads": entry.heads(),
        "pending": entry.pending(),
    }


def explain(store: Store, prompt_file: str, endpoint: str, model: str | None, key: str | None) -> dict[str, Any]:
    dialect, base, model = parse_endpoint(endpoint, model)
    norm = normalize(read_text(prompt_file, "prompt file"), read_config(store))
    doc = ask_request(dialect, base, model, norm.text, key)
    return {"fingerprint": fingerprint(doc), "request": doc, "rewrites": norm.rewrites}
