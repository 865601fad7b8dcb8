"""The gateway's door for the worker's own model generators (`http:`, `openai:`; SPEC §12.1):
the same upstream client (httpx, the system CA bundle, no proxy for loopback), the same key
handling, the same journal of each call's identity before it is sent, the same usage in the
receipt and the same budgets as an agent's call through the HTTP server, without the loopback
hop. Replay stays the replay cache's (§7): those generators fingerprint what they mean (system
text, schema, sampling, the prompt), not the wire form, so the json_object fallback and a
server's request ids never change a fingerprint.

`timeout` bounds the whole call, as in replay.web: a watchdog shuts the call's socket at the
deadline, so an upstream that drips its headers or its body a byte at a time is cut there.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

import httpx

from git_genjob.documents.canonical import sha256_hex
from git_genjob.documents.errors import BadInput, GeneratorUnavailable, HttpStatusError
from git_genjob.documents.secretscan import redact
from git_genjob.replay.web import ANSWER_MAX, ERROR_BODY_MAX, Watchdog, redirect_refused, timed_out
from git_genjob.worker.gateway.calls import Budget, Session
from git_genjob.worker.gateway.dialects import Upstream, usage_of
from git_genjob.worker.gateway.upstream import NOT_SENT, Client

# The openai: generator's key, as `ask` sends it (replay.web.KEY_VARIABLES): the first one set.
OPENAI_KEYS = ("GENJOB_API_KEY", "OPENAI_API_KEY")


def openai_upstream(base_url: str) -> Upstream:
    """`openai:BASE_URL#MODEL`'s upstream: BASE_URL as given (it holds its /v1), the key from
    GENJOB_API_KEY else OPENAI_API_KEY (a local server needs neither)."""
    key_env = next((name for name in OPENAI_KEYS if os.environ.get(name)), OPENAI_KEYS[-1])
    return Upstream("openai", base_url.rstrip("/"), "openai", key_env)


def http_upstream(url: str) -> Upstream:
    """`http:URL`'s upstream: the URL itself, no key."""
    return Upstream("http", url, "http", "")


class Direct:
    """One generator's calls of one attempt through the gateway's session."""

    def __init__(self, session: Session, upstream: Upstream, timeout: float, answer_max: int = ANSWER_MAX):
        self.session, self.upstream, self.answer_max = session, upstream, answer_max
        # a connection per call, so the watchdog holds each call's socket; no read outlives the call
        self.client = Client(connect_s=min(10.0, timeout), read_s=timeout, reuse=False)
        self.last: dict[str, Any] | None = None

    def post(self, path: str, doc: dict[str, Any], fp: str, timeout: float) -> str:
        """POST `doc` to the upstream's `path`; the body text. Journaled (`sending`) before it
        goes out; a budget spent is Budget, nothing sent. Errors as replay.web.post_json sorts
        them: before an answer sent=False, a timeout or a cut answer sent=True."""
        up = self.upstream
        url = up.url + path
        call = self.session.open_call(up.name, str(doc.get("model") or ""), fp)
        key = os.environ.get(up.key_env, "") if up.key_env else ""
        body = json.dumps(doc, ensure_ascii=False).encode("utf-8")
        dog = Watchdog(timeout)
        dog.timer.start()
        try:
            return self._send(call, url, path, key, body, dog)
        except HttpStatusError:  # a GeneratorUnavailable: its call says `error N` already
            raise
        except GeneratorUnavailable as exc:
            self.session.end(call, "unknown" if exc.sent else "failed")
            raise
        except BadInput:
            self.session.end(call, "unknown")  # answered, never recorded
            raise
        except NOT_SENT as exc:
            raise self._not_sent(call, url, exc, dog) from None
        except (httpx.HTTPError, OSError) as exc:
            raise self._lost(call, url, exc, dog, timeout) from None
        finally:
            dog.timer.cancel()

    def _not_sent(self, call: dict[str, Any], url: str, exc: Exception, dog: Watchdog) -> GeneratorUnavailable:
        """A call that never reached the upstream ended `failed`, and the error to raise for it."""
        self.session.end(call, "failed")  # never reached the upstream: nothing was sent
        if dog.fired:
            return GeneratorUnavailable(f"{url}: timed out connecting; nothing was sent", sent=False)
        hint = "start the model server, or fix the URL or the proxy (HTTPS_PROXY, NO_PROXY)"
        return GeneratorUnavailable(f"{url}: {exc}; nothing was sent", sent=False, hint=hint)

    def _lost(
        self, call: dict[str, Any], url: str, exc: Exception, dog: Watchdog, timeout: float
    ) -> GeneratorUnavailable:
        """A call cut after it was sent ended `unknown`, and the error to raise for it."""
        self.session.end(call, "unknown")
        if dog.fired:
            return timed_out(url, timeout)
        return GeneratorUnavailable(f"{url}: {exc}", sent=True)

    def _send(self, call: dict[str, Any], url: str, path: str, key: str, body: bytes, dog: Watchdog) -> str:
        headers = {"content-type": "application/json"}
        with self.client.send(self.upstream, key, "POST", path, headers, body, on_socket=_register(dog)) as resp:
            ok = 200 <= resp.status_code < 300
            limit = self.answer_max if ok else ERROR_BODY_MAX
            raw = _read_capped(resp, url, limit, ok)
            if dog.fired:
                raise timed_out(url, dog.timeout)
            if not ok:
                self.session.end(call, f"error {resp.status_code}")
                raise _status_error(resp, raw[:limit].decode("utf-8", "replace"), key, url)
        text = _stored_text(raw, key, url)
        self.session.answered(call, None, usage_of(self.upstream.dialect, raw, False))
        self.last = call
        return text

    def usage(self) -> dict[str, int]:
        """The token counts of the call that fetched the answer: recorded in §7's event with it,
        so a replay of it carries them (SPEC §12.1)."""
        last = self.last or {}
        return {k: last[k] for k in ("input_tokens", "output_tokens") if isinstance(last.get(k), int)}

    def settled(
        self, fp: str, model: str, source: str, answer: str, tokens: tuple[int | None, int | None] = (None, None)
    ) -> None:
        """After §7's cache answered: a replay is counted as a call never sent, with `tokens`,
        the counts recorded with its answer; a fresh answer gets its §7 hash (the text handed to
        the generator) on the call that fetched it."""
        sha = sha256_hex(answer.encode("utf-8"))
        if source == "replay":
            self.session.replayed_call(self.upstream.name, model, fp, sha, tokens)
            return
        last = self.last
        if last is not None and last["fingerprint"] == fp:
            self.session.answered(last, sha, (last["input_tokens"], last["output_tokens"]))

    def close(self) -> None:
        self.client.close()


def _read_capped(resp: httpx.Response, url: str, limit: int, ok: bool) -> bytes:
    """The answer's bytes: an error answer cut once past `limit`, a good one longer than it
    refused (GeneratorUnavailable, sent)."""
    chunks: list[bytes] = []
    size = 0
    for data in resp.iter_bytes():
        chunks.append(data)
        size += len(data)
        if size > limit:
            if not ok:
                break
            raise GeneratorUnavailable(
                f"{url}: the answer is longer than {limit} bytes (SPEC §8's limit); nothing was recorded",
                sent=True,
                hint="the outcome is unknown; the owner decides: git genjob retry KEY",
            )
    return b"".join(chunks)


def _status_error(resp: httpx.Response, text: str, key: str, url: str) -> HttpStatusError:
    """The error for an upstream's answer that is not 2xx: a redirect refused, else its status."""
    if 300 <= resp.status_code < 400:  # never followed: the key goes only where the job says
        return redirect_refused(resp.status_code, _scrubbed(resp.headers.get("location", ""), key), url)
    return HttpStatusError(resp.status_code, _scrubbed(text, key), url)


def _stored_text(raw: bytes, key: str, url: str) -> str:
    """A good answer's text, refused when it holds the worker's key or is not UTF-8."""
    if len(key) >= 8 and key.encode("utf-8") in raw:  # as the gateway's HTTP door refuses it (spool.Spool)
        raise BadInput(
            "refusing to store an answer that holds the worker's upstream key",
            "the replay cache is shared through git; nothing was recorded",
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise GeneratorUnavailable(f"{url}: answer is not UTF-8", sent=True) from None


def _scrubbed(text: str, key: str) -> str:
    """An upstream's error text as the attempt's reason (pushed with the job): a key it echoes
    (the worker's, or one that looks like a credential) replaced."""
    if len(key) >= 8:
        text = text.replace(key, "<the worker's key>")
    return redact(text)


def _register(dog: Watchdog) -> Any:
    def on_socket(sock: socket.socket) -> None:
        dog.register(sock)

    return on_socket


__all__ = ["Budget", "Direct", "http_upstream", "openai_upstream"]
