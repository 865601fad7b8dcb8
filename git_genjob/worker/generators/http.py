"""`http:URL`: POST {"prompt","format":"text"}; the answer is the file (or {"files":{…}})."""

from __future__ import annotations

import json

from git_genjob.worker.gateway.direct import Budget, Direct, http_upstream
from git_genjob.worker.generators.base import GenContext, GenResult, build_prompt
from git_genjob.worker.generators.files import write_answer


class HttpGenerator:
    kind = "http"
    model: str | None = None
    command: str | None = None

    def __init__(self, url: str, timeout: float):
        if not url.startswith(("http://", "https://")):
            url = "http:" + url if url.startswith("//") else url
        self.endpoint: str | None = url
        self.timeout = timeout

    def describe(self) -> dict[str, str | None]:
        return {"kind": self.kind, "endpoint": self.endpoint, "model": None, "command": None}

    def generate(self, ctx: GenContext) -> GenResult:
        """One call, through the gateway's session (`ctx.gateway`): journaled before it is sent,
        metered in the receipt, within the job's budget; replayed by §7's cache."""
        assert self.endpoint is not None and ctx.cache is not None and ctx.gateway is not None
        url = self.endpoint
        prompt = build_prompt(ctx.job, ctx.inputs)
        timeout = min(self.timeout, ctx.timeout)
        params = {"format": "text"}
        fp = ctx.cache.fingerprint(url, "", params, prompt)
        door = Direct(ctx.gateway, http_upstream(url), timeout)

        def send(text: str) -> str:
            return door.post("", {"prompt": text, **params}, fp, timeout)

        try:
            result = ctx.cache.call(url, "", params, prompt, send, door.usage)
        except Budget as exc:
            return GenResult("aborted", f"the job's budget {exc.name} = {exc.limit} is spent; the call was never sent")
        finally:
            door.close()
        door.settled(result.fp, "", result.source, result.answer, result.tokens)
        ctx.replays.append(result.fp)
        paths = ctx.job.allowed_paths
        if len(paths) == 1:
            return write_answer(ctx.scratch, {paths[0]: result.answer})
        try:
            doc = json.loads(result.answer)
            files = doc["files"]
            assert isinstance(files, dict)
        except (ValueError, KeyError, TypeError, AssertionError):
            return GenResult("rejected", 'the answer for a multi-file job is not JSON {"files":{path:content}}')
        return write_answer(ctx.scratch, files)
