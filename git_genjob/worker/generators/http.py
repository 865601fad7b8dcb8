"""`http:URL`: POST {"prompt","format":"text"}; the answer is the file (or {"files":{…}})."""

from __future__ import annotations

import json

from git_genjob.replay.web import post_json
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
        assert self.endpoint is not None and ctx.cache is not None
        url = self.endpoint
        prompt = build_prompt(ctx.job, ctx.inputs)

        def send(text: str) -> str:
            return post_json(url, {"prompt": text, "format": "text"}, min(self.timeout, ctx.timeout))

        result = ctx.cache.call(url, "", {"format": "text"}, prompt, send)
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
