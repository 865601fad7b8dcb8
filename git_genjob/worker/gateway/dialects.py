"""What each upstream speaks: its paths, where its key goes, where its usage is reported."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from git_genjob.documents.errors import BadInput

DIALECTS = ("openai", "anthropic")
PATHS = {
    "openai": ("/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/embeddings", "/v1/models"),
    "anthropic": ("/v1/messages", "/v1/messages/count_tokens", "/v1/models"),
}
KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


@dataclass(frozen=True)
class Upstream:
    name: str
    url: str  # the provider's base, without /v1
    dialect: str
    key_env: str

    def key_headers(self, key: str) -> dict[str, str]:
        if not key:  # a local model server that wants none (llama.cpp)
            return {}
        if self.dialect == "anthropic":
            return {"x-api-key": key}
        return {"authorization": f"Bearer {key}"}


def parse_gateway(text: str, dialect: str | None = None, key_env: str | None = None) -> Upstream:
    """`NAME=URL` (`work --gateway`); BadInput when NAME's dialect is unknown."""
    name, sep, url = text.partition("=")
    name = name.strip()
    if not sep or not name.isidentifier() or not url.startswith(("http://", "https://")):
        raise BadInput(f"--gateway {text!r} is not NAME=URL", "e.g. --gateway openai=https://api.openai.com")
    dialect = _dialect_of(name, dialect)
    return Upstream(name, _base_url(name, url), dialect, key_env or KEY_ENV[dialect])


def _dialect_of(name: str, dialect: str | None) -> str:
    """The dialect given, else the one `name` names; BadInput when neither is known."""
    dialect = dialect or (name if name in DIALECTS else None)
    if dialect not in DIALECTS:
        raise BadInput(
            f"gateway {name!r} needs a dialect",
            f"name it openai or anthropic, or set dialect = in [gateway.{name}] of .genjob/config.toml",
        )
    return dialect


def _base_url(name: str, url: str) -> str:
    """Gateway `name`'s URL checked and cut to the provider's base (no trailing / or /v1)."""
    if not url.isascii() or not url.isprintable():
        raise BadInput(f"gateway {name!r}: its URL holds a control or non-ASCII character", "give a plain URL")
    try:
        import httpx

        httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as exc:
        raise BadInput(f"gateway {name!r}: {url!r} is not a URL ({exc})", "e.g. https://api.openai.com") from None
    url = url.rstrip("/")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


def offered(up: Upstream, path: str) -> bool:
    return path.partition("?")[0] in PATHS[up.dialect]


def usage_of(dialect: str, body: bytes, streamed: bool) -> tuple[int | None, int | None]:
    """(input_tokens, output_tokens) as the provider reported them, plain or streamed."""
    tokens_in: int | None = None
    tokens_out: int | None = None
    for doc in _streamed_docs(body) if streamed else _plain_doc(body):
        if not isinstance(doc, dict):
            continue
        for usage in _usages(doc):
            i = usage.get("prompt_tokens", usage.get("input_tokens"))
            o = usage.get("completion_tokens", usage.get("output_tokens"))
            if isinstance(i, int):
                tokens_in = i
            if isinstance(o, int):
                tokens_out = o
    return tokens_in, tokens_out


def _streamed_docs(body: bytes) -> list[Any]:
    """The JSON documents of a streamed answer's `data:` lines, a line that is none left out."""
    docs: list[Any] = []
    for line in body.split(b"\n"):
        if line.startswith(b"data:"):
            try:
                docs.append(json.loads(line[5:].strip()))
            except ValueError:
                pass
    return docs


def _plain_doc(body: bytes) -> list[Any]:
    """A plain answer's JSON document, alone in a list; none when it is not JSON."""
    try:
        return [json.loads(body)]
    except ValueError:
        return []


def _usages(doc: dict[str, Any]) -> list[dict[str, Any]]:
    # OpenAI: usage at the top (a chunk with stream_options.include_usage too); /responses:
    # response.usage; Anthropic: message_start's message.usage, then message_delta's usage.
    out = []
    for holder in (doc, doc.get("message"), doc.get("response")):
        if isinstance(holder, dict) and isinstance(holder.get("usage"), dict):
            out.append(holder["usage"])
    return out
