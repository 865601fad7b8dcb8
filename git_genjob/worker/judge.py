"""Judging what a generator left in its scratch tree (SPEC §5, §8): the outputs are the allowed
paths whose bytes changed, each read back through descriptors only; anything else written is
named (or listed as ignored by the scratch ignore patterns), and an ok becomes a receipt's ok
only when nothing is amiss."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field

from git_genjob.documents.config import Config
from git_genjob.documents.secretscan import find_secret, redact
from git_genjob.storage.records import JobRecord
from git_genjob.worker.generators.base import GenContext, GenResult
from git_genjob.worker.scratch import ReadBack, read_back, scratch_entries


def _ignored(path: str, patterns: tuple[str, ...]) -> bool:
    parts = path.split("/")
    for pat in patterns:
        if pat.endswith("/"):
            if pat.rstrip("/") in parts[:-1]:
                return True
        elif fnmatch.fnmatchcase(parts[-1], pat) or fnmatch.fnmatchcase(path, pat):
            return True
    return False


@dataclass
class Diff:
    outputs: dict[str, bytes | None] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def name_outside(self, rel: str, patterns: tuple[str, ...]) -> None:
        """A path written outside the allowed ones: ignored when a scratch ignore pattern says so, else a problem."""
        if _ignored(rel, patterns):
            self.ignored.append(rel)
        else:
            self.problems.append(f"wrote {rel} outside the allowed paths")


def _unreadable(rel: str, got: ReadBack, limit: int) -> str | None:
    """Why an allowed path's bytes are not taken as an output (not a regular file, over the limit); None: they are."""
    if not got.regular:
        return f"{rel} is not a regular file (a symlink or special file is never read)"
    if got.data is None:
        return f"{rel} is {got.size} bytes, over the limit of {limit}"
    return None


def diff_scratch(scratch: str, record: JobRecord, inputs: dict[str, bytes], cfg: Config) -> Diff:
    """Outputs = allowed paths whose bytes changed, were created or deleted; anything else is named."""
    allowed = set(record.job.allowed_paths)
    result = Diff()
    seen: set[str] = set()
    total = 0
    for rel in scratch_entries(scratch):
        if rel not in allowed:
            result.name_outside(rel, cfg.scratch_ignore)
            continue
        got = read_back(scratch, rel, cfg.limits.file_bytes)  # descriptors only: never a host file
        if got is None:
            continue  # gone since the walk: read as deleted
        seen.add(rel)
        problem = _unreadable(rel, got, cfg.limits.file_bytes)
        if problem is not None:
            result.problems.append(problem)
            continue
        total += got.size
        if inputs.get(rel) != got.data:
            result.outputs[rel] = got.data
    for path in allowed - seen:
        if path in inputs:
            result.outputs[path] = None
    if total > cfg.limits.receipt_bytes:
        result.problems.append(f"outputs total {total} bytes, over the limit of {cfg.limits.receipt_bytes}")
    return result


@dataclass
class Verdict:
    """What the worker signs: the status, why, the outputs it read back and what it ignored."""

    status: str
    reason: str
    outputs: dict[str, bytes | None] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)


UNCHANGED = "unchanged: the generator changed none of the allowed paths"


def judge(
    result: GenResult, scratch: str, record: JobRecord, ctx: GenContext, cfg: Config, allow_secrets: bool = False
) -> Verdict:
    """A generator's ok becomes a receipt's ok only if the scratch tree holds nothing amiss.

    Whether secrets may pass is the worker's own decision (`work --allow-secrets`), never
    meta.json's: meta lies outside the job's digest, so anyone who can push a ref could set it.
    """
    if result.status != "ok":
        return Verdict(result.status, redact(result.reason))
    diff = diff_scratch(scratch, record, ctx.inputs, cfg)
    ignored = sorted(diff.ignored)
    if diff.problems:
        return Verdict("rejected", "; ".join(diff.problems), ignored=ignored)
    if not diff.outputs:  # an ok receipt with nothing in it would make an empty commit
        return Verdict("rejected", UNCHANGED, ignored=ignored)
    leaks = [] if allow_secrets else _leaks(diff.outputs)
    if leaks:
        return Verdict("rejected", "; ".join(leaks), ignored=ignored)
    return Verdict("ok", "", diff.outputs, ignored)


def _leaks(outputs: dict[str, bytes | None]) -> list[str]:
    """One line for each output that holds what looks like a credential."""
    return [
        f"{p} contains what looks like a {name}"
        for p, data in outputs.items()
        if data is not None and (name := find_secret(data))
    ]
