"""The one chat-completions client: `work --generator openai:…` and `ask --endpoint openai:…`
both call it, so both send the same API key and read answers the same way.

The key comes from the environment, by name, and never enters a job, a receipt, the replay
cache or a fingerprint: `GENJOB_API_KEY` if set, else `OPENAI_API_KEY`, sent as
`Authorization: Bearer KEY`. A local server (llama.cpp) needs neither.
"""

from __future__ import annotations

import json
import os
from typing import Any

from git_genjob.documents.errors import GeneratorUnavailable

KEY_VARIABLES = ("GENJOB_API_KEY", "OPENAI_API_KEY")


def api_headers() -> dict[str, str]:
    """The Authorization header of the first key variable that is set, or none."""
    for name in KEY_VARIABLES:
        key = os.environ.get(name)
        if key:
            return {"Authorization": f"Bearer {key}"}
    return {}


def chat_completion(base_url: str, body: dict[str, Any], timeout: float, hint: str | None = None) -> str:
    """POST `body` to BASE_URL/chat/completions with the API key; the answer's message content.
    A malformed answer, or a `finish_reason` other than `stop` (a partial answer), is exit 3."""
    from git_genjob.replay.web import post_json

    url = f"{base_url.rstrip('/')}/chat/completions"
    raw = post_json(url, body, timeout, api_headers())
    try:
        choice = json.loads(raw)["choices"][0]
        content = choice["message"]["content"]
        finish = choice.get("finish_reason")
    except (ValueError, KeyError, IndexError, TypeError):
        raise GeneratorUnavailable(f"{url}: the answer is not a chat completion", sent=True) from None
    if finish != "stop" or not isinstance(content, str):
        raise GeneratorUnavailable(f"{url}: partial answer (finish_reason={finish})", sent=True, hint=hint)
    return content
