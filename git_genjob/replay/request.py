"""The fingerprinted request of a model call and the hits log line, libgit2-free: the replay
cache (`cache`), `ask` (`commands`) and `ask`'s fast path (`fast`) compute them here, once."""

from __future__ import annotations

import os
from typing import Any

from git_genjob.documents.canonical import canonical_bytes, sha256_hex, utc_now
from git_genjob.documents.errors import BadInput
from git_genjob.storage.layout import hits_log_path

_CREDENTIAL_PARAMS = {
    "api_key",
    "apikey",
    "authorization",
    "headers",
    "timeout",
    "base_url",
    "organization",
    "extra_headers",
    "proxy",
    "proxies",
    "verify",
    "stream",
}


def clean_params(params: dict[str, Any]) -> dict[str, Any]:
    """Every request parameter except credentials and transport settings (a deny-list)."""
    return {k: v for k, v in params.items() if k.lower() not in _CREDENTIAL_PARAMS}


def request_doc(endpoint: str, model: str, params: dict[str, Any], prompt: str, key: str | None) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "v": 1,
        "endpoint": endpoint,
        "model": model,
        "params": clean_params(params),
        "prompt": prompt,
    }
    if key:
        doc["key"] = key
    return doc


def fingerprint(doc: dict[str, Any]) -> str:
    return sha256_hex(canonical_bytes(doc))


def parse_endpoint(endpoint: str, model: str | None) -> tuple[str, str, str]:
    """(dialect, url, model) of `ask --endpoint`, named as the generators name them.

    `openai:BASE_URL` speaks chat completions (`--model` required); `http:URL` and a bare URL
    speak the plain dialect of the `http:` generator: POST {"prompt","format":"text"}, the
    body is the answer.
    """
    kind, sep, rest = endpoint.partition(":")
    if sep and kind in ("openai", "http") and not rest.startswith("//"):
        dialect, url = kind, rest
    else:
        dialect, url = "http", endpoint
    if not url.startswith(("http://", "https://")):
        raise BadInput(f"--endpoint {endpoint!r} is not a URL", "give http:URL, openai:BASE_URL or a bare http(s) URL")
    if dialect == "openai" and not model:
        raise BadInput("--endpoint openai:… needs --model", "e.g. --endpoint openai:http://127.0.0.1:8080/v1 --model m")
    return dialect, url.rstrip("/"), model or ""


def ask_request(dialect: str, base: str, model: str, prompt: str, key: str | None) -> dict[str, Any]:
    """The fingerprinted request: the plain dialect's is the same as the http: generator's."""
    return request_doc(base, model, {"format": "text"} if dialect == "http" else {}, prompt, key)


def log_hit(gitdir: str, fp: str, request_hash: str) -> None:
    """One line of `.git/genjob/hits.log`: a replay hit served."""
    path = hits_log_path(gitdir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(f"{fp} {request_hash} {utc_now()}\n")
