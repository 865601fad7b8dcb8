"""Generators turn a bundle into output files: exec, http, openai, one small module each; what
they share (`GenContext`, `GenResult`, the `Generator` protocol, the model prompt) is in `base`."""

from __future__ import annotations

from typing import Any

from git_genjob.documents.errors import BadInput
from git_genjob.worker.generators.base import Generator
from git_genjob.worker.generators.exec import ExecGenerator


def describe(gen: Generator) -> dict[str, str | None]:
    return {"kind": gen.kind, "endpoint": gen.endpoint, "model": gen.model, "command": gen.command}


def parse_spec(spec: str, timeout: float, sandbox: Any = None) -> Generator:
    """`exec:COMMAND`, `http:URL` or `openai:BASE_URL#MODEL`; `sandbox`
    (worker.generators.sandbox.options.SandboxOptions) confines an exec generator."""
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise BadInput(f"generator spec {spec!r} is malformed", "use exec:COMMAND, http:URL or openai:BASE_URL#MODEL")
    if kind == "exec":
        return ExecGenerator(rest, timeout, sandbox)
    if kind == "http":
        from git_genjob.worker.generators.http import HttpGenerator

        return HttpGenerator(rest, timeout)
    if kind == "openai":
        from git_genjob.worker.generators.openai import OpenAIGenerator

        base, hashmark, model = rest.partition("#")
        if not hashmark or not model:
            raise BadInput(f"openai generator {spec!r} needs a model", "use openai:BASE_URL#MODEL")
        return OpenAIGenerator(base, model, timeout)
    raise BadInput(f"unknown generator kind {kind!r}", "use exec:, http: or openai:")


def sandbox_record(kind: str, recorded: dict[str, Any] | None) -> dict[str, Any]:
    """The receipt's `sandbox`: what the exec generator recorded, else `no-process` for a model
    generator (nothing of it ran on the worker) or `none` (out of band, or never started)."""
    if recorded is not None:
        return recorded
    mechanism = "no-process" if kind in ("http", "openai") else "none"
    network = "none" if mechanism == "no-process" else "all"
    return {"mechanism": mechanism, "network": network, "hosts": [], "ro": [], "rw": [], "limits": None}
