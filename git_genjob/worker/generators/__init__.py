"""Generators turn a bundle into output files: exec, http, openai, one small module each."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from git_genjob.documents.errors import BadInput
from git_genjob.documents.job import Job


@dataclass
class GenContext:
    job: Job
    scratch: str
    instruction_file: str
    job_file: str
    inputs: dict[str, bytes]
    timeout: float
    stop: threading.Event
    pass_env: tuple[str, ...] = ()
    cache: Any = None  # replay.CacheClient for model generators
    replays: list[str] = field(default_factory=list)
    sandbox: dict[str, Any] | None = None  # the receipt's record of the confinement (worker.generators.sandbox)
    gateway: Any = None  # worker.gateway.calls.Session: this attempt's model calls (SPEC §12.1)
    upstreams: tuple[Any, ...] = ()  # worker.gateway.dialects.Upstream, from work --gateway
    logs: dict[str, bytes] = field(default_factory=dict)  # an exec generator's stdout/stderr, the last LOG_TAIL bytes


LOG_TAIL = 64 * 1024  # how much of a generator's stdout and of its stderr is kept with its attempt


@dataclass
class GenResult:
    """`ok`: the scratch tree holds the answer; `aborted`: the generator failed (reason says how)."""

    status: str
    reason: str = ""


class Generator(Protocol):
    kind: str
    endpoint: str | None
    model: str | None
    command: str | None

    def generate(self, ctx: GenContext) -> GenResult: ...

    def describe(self) -> dict[str, str | None]: ...


def describe(gen: Generator) -> dict[str, str | None]:
    return {"kind": gen.kind, "endpoint": gen.endpoint, "model": gen.model, "command": gen.command}


def parse_spec(spec: str, timeout: float, sandbox: Any = None) -> Generator:
    """`exec:COMMAND`, `http:URL` or `openai:BASE_URL#MODEL`; `sandbox`
    (worker.generators.sandbox.options.SandboxOptions) confines an exec generator."""
    kind, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise BadInput(f"generator spec {spec!r} is malformed", "use exec:COMMAND, http:URL or openai:BASE_URL#MODEL")
    if kind == "exec":
        from git_genjob.worker.generators.exec import ExecGenerator

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


def build_prompt(job: Job, inputs: dict[str, bytes]) -> str:
    """The text a model generator sends: the instruction, then every allowed file."""
    parts = [job.instruction.strip(), "", "Files (return the complete new content of each):"]
    for path in job.allowed_paths:
        data = inputs.get(path)
        body = "(does not exist yet; create it)" if data is None else data.decode("utf-8", "replace")
        parts += ["", f"=== {path} ===", body.rstrip("\n")]
    return "\n".join(parts) + "\n"
