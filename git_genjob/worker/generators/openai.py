"""`openai:BASE_URL#MODEL`: chat completions constrained to a JSON schema of the allowed files."""

from __future__ import annotations

import json
import time
from typing import Any

from git_genjob.documents.errors import HttpStatusError
from git_genjob.replay.web import Post, chat_completion
from git_genjob.worker.gateway.direct import Budget, Direct, openai_upstream
from git_genjob.worker.generators.base import GenContext, GenResult, build_prompt
from git_genjob.worker.generators.files import write_answer

SYSTEM = (
    "You are a code generator. Follow the instruction. Answer with one JSON object whose keys are "
    "exactly the file paths listed and whose values are the complete new content of each file."
)
TEXT_SYSTEM = (
    "You are a code generator. Follow the instruction. Answer with the complete new content of the "
    "one file listed, and nothing else: no explanation, no code fence."
)
SAMPLING = {"temperature": 0, "max_tokens": 1024}


def strip_fence(answer: str) -> str:
    """A text answer without the one Markdown code fence small models wrap a file in."""
    lines = answer.strip("\n").split("\n")
    if len(lines) >= 2 and lines[0].startswith("```") and lines[-1].strip() == "```":
        return "\n".join(lines[1:-1]) + "\n"
    return answer


def files_schema(paths: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {p: {"type": "string"} for p in paths},
        "required": list(paths),
        "additionalProperties": False,
    }


class OpenAIGenerator:
    kind = "openai"
    command: str | None = None

    def __init__(self, base_url: str, model: str, timeout: float):
        self.endpoint: str | None = base_url.rstrip("/")
        self.model: str | None = model
        self.timeout = timeout

    def describe(self) -> dict[str, str | None]:
        return {"kind": self.kind, "endpoint": self.endpoint, "model": self.model, "command": None}

    def complete(self, user: str, schema: dict[str, Any] | None, timeout: float, post: Post | None = None) -> str:
        """One answer's message content: JSON files with the json_object fallback SPEC §5
        describes, or (`schema` None, a one-file job) the file's text. Through the one chat
        client (replay.web.chat_completion), which sends the API key as `ask` does."""
        system = SYSTEM if schema is not None else TEXT_SYSTEM
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            **SAMPLING,
        }
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "genjob_files", "strict": True, "schema": schema},
            }
        assert self.endpoint is not None
        hint = "raise max_tokens or shorten the files; nothing was recorded"
        deadline = time.monotonic() + timeout  # one deadline for both requests of the fallback
        try:
            return chat_completion(self.endpoint, body, timeout, hint, post)
        except HttpStatusError as exc:
            if schema is None or not _refused_the_schema(exc):
                raise
        body["response_format"] = {"type": "json_object", "schema": schema}
        return chat_completion(self.endpoint, body, max(0.001, deadline - time.monotonic()), hint, post)

    def generate(self, ctx: GenContext) -> GenResult:
        """A one-file job asks for the file's text (as `http:` does); several files, for one
        JSON object constrained by a schema. Structured output is where local servers differ
        most: llama.cpp's grammar fallback lets a small model break out of the JSON string, so
        plain text is what every server and model can answer for a single file."""
        assert ctx.cache is not None and ctx.gateway is not None
        assert self.endpoint is not None and self.model is not None
        paths = ctx.job.allowed_paths
        schema = files_schema(paths) if len(paths) > 1 else None
        prompt = build_prompt(ctx.job, ctx.inputs)
        params = {"system": SYSTEM, "schema": schema, **SAMPLING} if schema else {"system": TEXT_SYSTEM, **SAMPLING}
        timeout = min(self.timeout, ctx.timeout)
        fp = ctx.cache.fingerprint(self.endpoint, self.model, params, prompt)
        door = Direct(ctx.gateway, openai_upstream(self.endpoint), timeout)

        def post(body: dict[str, Any], left: float) -> str:  # each request of the fallback is a call
            return door.post("/chat/completions", body, fp, left)

        try:
            result = ctx.cache.call(
                self.endpoint,
                self.model,
                params,
                prompt,
                lambda text: self.complete(text, schema, timeout, post),
                door.usage,
            )
        except Budget as exc:
            return GenResult("aborted", f"the job's budget {exc.name} = {exc.limit} is spent; the call was never sent")
        finally:
            door.close()
        door.settled(result.fp, self.model, result.source, result.answer, result.tokens)
        ctx.replays.append(result.fp)
        return _write_files(ctx.scratch, paths, schema is None, result.answer)


def _refused_the_schema(exc: HttpStatusError) -> bool:
    """Whether a server's error answer to a json_schema request calls for the json_object fallback."""
    return 400 <= exc.status < 500 or "response_format" in exc.body


def _write_files(scratch: str, paths: list[str], text: bool, answer: str) -> GenResult:
    """The answer written into the scratch tree: with `text`, as the one file's text; else the
    files of its JSON object (rejected when it is none)."""
    if text:
        return write_answer(scratch, {paths[0]: strip_fence(answer)})
    try:
        files = json.loads(answer)
    except ValueError:
        return GenResult("rejected", "the model's answer is not JSON")
    if not isinstance(files, dict):
        return GenResult("rejected", "the model's answer is not a JSON object")
    return write_answer(scratch, files)
