"""The replay cache commands' work (ask, ls, show, explain), kept out of cli.py."""

from __future__ import annotations

from typing import Any

from git_genjob.errors import BadInput, GenjobError, Unavailable
from git_genjob.generators import GeneratorUnavailable
from git_genjob.queue import read_config
from git_genjob.replay import SENTINEL, Cache, call, check_fp, fingerprint, normalize, request_doc
from git_genjob.store import Store
from git_genjob.userfiles import read_text, write_atomic


def ask(
    store: Store, endpoint: str, model: str, prompt_file: str, out_file: str, mode: str, key: str | None, timeout: float
) -> dict[str, Any]:
    from git_genjob.generators.web import post_json

    norm = normalize(read_text(prompt_file, "prompt file"), read_config(store))
    doc = request_doc(endpoint.rstrip("/"), model, {}, norm.text, key)
    url = f"{endpoint.rstrip('/')}/chat/completions"

    def send(prompt: str) -> str:
        import json

        raw = post_json(url, {"model": model, "messages": [{"role": "user", "content": prompt}]}, timeout)
        try:
            choice = json.loads(raw)["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            raise GeneratorUnavailable(f"{url}: the answer is not a chat completion", sent=True) from None
        if choice.get("finish_reason") != "stop" or not isinstance(choice["message"].get("content"), str):
            raise GeneratorUnavailable(
                f"{url}: partial answer (finish_reason={choice.get('finish_reason')})", sent=True
            )
        return str(choice["message"]["content"])

    try:
        result = call(Cache(store), doc, send, mode)
    except (GeneratorUnavailable, Unavailable) as exc:
        write_atomic(out_file, SENTINEL + "\n")
        raise Unavailable(exc.message, exc.hint or "nothing was recorded; try again later") from None
    except GenjobError:
        raise
    write_atomic(out_file, result.answer)
    return {"fingerprint": result.fp, "source": result.source, "out_file": out_file}


def ls(store: Store) -> list[dict[str, Any]]:
    cache = Cache(store)
    rows = []
    for fp in cache.fingerprints():
        entry = cache.entry(fp)
        assert entry is not None
        rows.append(
            {"fingerprint": fp, "served": entry.served(), "pending": entry.pending(), "events": len(entry.events)}
        )
    return rows


def show(store: Store, fp: str) -> dict[str, Any]:
    cache = Cache(store)
    entry = cache.entry(check_fp(fp))
    if entry is None:
        raise BadInput(f"no cache entry {fp}", "list them with: git genjob cache ls")
    return {
        "fingerprint": fp,
        "request": entry.request,
        "events": entry.events,
        "answers": sorted(entry.answers),
        "served": entry.served(),
        "heads": entry.heads(),
        "pending": entry.pending(),
    }


def explain(store: Store, prompt_file: str, endpoint: str, model: str, key: str | None) -> dict[str, Any]:
    norm = normalize(read_text(prompt_file, "prompt file"), read_config(store))
    doc = request_doc(endpoint.rstrip("/"), model, {}, norm.text, key)
    return {"fingerprint": fingerprint(doc), "request": doc, "rewrites": norm.rewrites}
