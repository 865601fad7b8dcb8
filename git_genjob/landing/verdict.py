"""CommitAudit, `audit`'s verdict on one commit, and what a list of them reports: the human
lines, the counts and the exit code (SPEC §6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from git_genjob.documents.display import printable
from git_genjob.documents.errors import EXIT_OK, EXIT_REFUSED, EXIT_UNAVAILABLE, Painter, plain


@dataclass
class CommitAudit:
    commit: str
    subject: str
    trailers: dict[str, str]
    problems: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)  # what audit could still prove, failing or not
    # What this clone lacks to check (a shallow clone's boundary commit has no parent to diff
    # against): never a pass, never a failure verdict either.
    unchecked: list[str] = field(default_factory=list)
    jobs: list[str] = field(default_factory=list)
    squashed: bool = False
    merged: bool = False  # a merged apply (`Genjob-Merged-Onto`, SPEC §11)
    note: list[str] = field(default_factory=list)  # the verified summary (what git log shows), rendered
    forged_note: str | None = None  # a note in refs/notes/genjob that is not the rendering, quoted escaped
    envelope_ref: str | None = None  # the notes ref its envelope was read from (SPEC §11)
    # What the Markdown report shows beside the verdict (read from the receipt and the stored job).
    merged_onto: str | None = None
    instruction: str | None = None
    model: str | None = None
    sandbox: str | None = None
    planner: str | None = None
    signer_name: str | None = None

    @property
    def ok(self) -> bool:
        return not self.problems and not self.unchecked

    @property
    def provenance(self) -> str:
        """One word for what holds: verified, squashed (N jobs), modified, unproven."""
        if self.squashed:
            return f"squashed with {len(self.jobs)} job{'s' if len(self.jobs) != 1 else ''}"
        if self.ok:
            return "verified (merged)" if self.merged else "verified"
        if any("commit diff != receipt outputs" in p or "!= recomputed merge" in p for p in self.problems):
            return "outputs since modified"
        if not self.problems:
            return "cannot check"
        return "unproven"

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "subject": self.subject,
            "key": self.trailers.get("Genjob-Key"),
            "receipt": self.trailers.get("Genjob-Receipt"),
            "signer": self.trailers.get("Genjob-Signer"),
            "signer_name": self.signer_name,
            "worker": self.trailers.get("Genjob-Worker"),
            "ok": self.ok,
            "problems": self.problems,
            "unchecked": self.unchecked,
            "provenance": self.provenance,
            "facts": self.facts,
            "note": self.note,
            "forged_note": self.forged_note,
            "envelope_ref": self.envelope_ref,
            "jobs": self.jobs or ([self.trailers["Genjob-Key"]] if "Genjob-Key" in self.trailers else []),
        }


def audit_lines(results: list[CommitAudit], quiet: bool = False, paint: Painter = plain) -> list[str]:
    """The human report of `audit`: each commit (failing ones only with `quiet`), then a count."""
    out = []
    for a in results:
        if quiet and a.ok:
            continue
        mark = paint("ok  ", "green") if a.ok else paint("FAIL", "red") if a.problems else paint("??  ", "yellow")
        out.append(f"{mark} {a.commit[:12]} {a.provenance:<22} {printable(a.subject)}")
        lines = a.facts + a.problems + a.unchecked
        out += [f"       {printable(line)}" for line in lines]  # they quote trailers and notes
    failing, unchecked = audit_counts(results)
    total = f"{len(results)} genjob commit(s), {failing} failing"
    return [*out, total + (f", {unchecked} cannot be checked in this clone" if unchecked else "")]


def audit_counts(results: list[CommitAudit]) -> tuple[int, int]:
    """(failing, cannot be checked): a commit with a problem fails whatever else it lacks."""
    failing = sum(1 for a in results if a.problems)
    return failing, sum(1 for a in results if not a.problems and a.unchecked)


def audit_exit(results: list[CommitAudit]) -> int:
    """1 when any commit fails; else 3 when any cannot be checked here (its parent was not
    fetched: a shallow clone), which is not a pass; else 0."""
    failing, unchecked = audit_counts(results)
    return EXIT_REFUSED if failing else EXIT_UNAVAILABLE if unchecked else EXIT_OK
