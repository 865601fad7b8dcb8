"""What every generator is given and returns: one attempt's context (`GenContext`), its result
(`GenResult`), the `Generator` protocol the worker calls, and the prompt a model generator sends."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

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


def build_prompt(job: Job, inputs: dict[str, bytes]) -> str:
    """The text a model generator sends: the instruction, then every allowed file."""
    parts = [job.instruction.strip(), "", "Files (return the complete new content of each):"]
    for path in job.allowed_paths:
        data = inputs.get(path)
        body = "(does not exist yet; create it)" if data is None else data.decode("utf-8", "replace")
        parts += ["", f"=== {path} ===", body.rstrip("\n")]
    return "\n".join(parts) + "\n"
