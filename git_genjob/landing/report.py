"""`audit --format md` and `log --format md`: the Markdown report a reviewer reads in a CI job
summary or a merge-request comment (issue 25).

Every cell is text a commit, a note or a receipt put there, so none of it may become markup: a
hostile instruction must not open a link, load an image, inject HTML or break the table. Each
cell is therefore one line (whitespace runs folded, anything unprintable shown escaped) with
every ASCII punctuation character that Markdown could read as syntax backslash-escaped, which
CommonMark and GFM render as the character itself; the report's own markup is added around it.

A forge also links references in the rendered text, after Markdown (GitHub: `@user` mentions,
which notify, and `#123`; GitLab also `!123`, `~label`, `%milestone`, `$snippet`, `&epic`): each
such sigil before a letter, digit, `_` or `"` is followed by a WORD JOINER (U+2060), invisible,
so no reference filter matches.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass

from git_genjob.documents.display import one_line
from git_genjob.landing.audit import CommitAudit
from git_genjob.landing.walk import SHALLOW_HINT

COLUMNS = ("commit", "job", "instruction", "model", "planner", "signer", "sandbox", "verdict", "merged", "next step")
# Left alone: they mean nothing to CommonMark or GFM anywhere inside a table cell.
_PLAIN_PUNCTUATION = set(",;'\"/?%+")
_ESCAPE = {c: "\\" + c for c in string.punctuation if c not in _PLAIN_PUNCTUATION}
INSTRUCTION_CHARS = 80
REFERENCE_SIGILS = "@#!~%$&"
WORD_JOINER = "\u2060"


def md_text(text: str, limit: int | None = None) -> str:
    """`text` as Markdown inline text that renders as exactly that text, on one line.

    `limit` shortens it (to `limit` characters and an ellipsis) before escaping, so an escape
    is never cut in half."""
    line = one_line(text)
    if limit is not None and len(line) > limit:
        line = line[: limit - 1].rstrip() + "…"
    out = []
    for c, after in zip(line, (line + " ")[1:], strict=True):
        out.append(_ESCAPE.get(c, c))
        if c in REFERENCE_SIGILS and (after.isalnum() or after in '_"'):
            out.append(WORD_JOINER)  # `@user`, `#1`, `~"label"`: a reference; `!=` is none
    return "".join(out)


@dataclass(frozen=True)
class ReportRow:
    """One genjob commit as the report shows it; every field is raw text, escaped when rendered."""

    commit: str
    job: str
    instruction: str
    model: str
    planner: str
    signer: str
    sandbox: str
    verdict: str  # FAIL, cannot check, ok
    detail: str  # the provenance word and every problem
    merged: str
    fix: str

    @property
    def rank(self) -> int:
        return {"FAIL": 0, "cannot check": 1}.get(self.verdict, 2)

    def cells(self) -> list[str]:
        verdict = f"**{self.verdict}**" if self.verdict != "ok" else "ok"
        detail = md_text(self.detail)
        return [
            md_text(self.commit),
            md_text(self.job),
            md_text(self.instruction, INSTRUCTION_CHARS),
            md_text(self.model),
            md_text(self.planner),
            md_text(self.signer),
            md_text(self.sandbox),
            f"{verdict}: {detail}" if detail else verdict,
            md_text(self.merged),
            md_text(self.fix),
        ]


def row_of(a: CommitAudit) -> ReportRow:
    """The report row of one audited commit."""
    return ReportRow(
        commit=a.commit[:12],
        job=", ".join(a.jobs) if a.squashed else a.trailers.get("Genjob-Key", ""),
        instruction=a.instruction if a.instruction is not None else a.subject.removeprefix("genjob: "),
        model=a.model or "",
        planner=a.planner or "",
        signer=_signer_cell(a),
        sandbox=a.sandbox or "",
        verdict=_verdict_word(a),
        detail=_detail(a),
        merged=_merged_cell(a),
        fix=next_step(a),
    )


def _verdict_word(a: CommitAudit) -> str:
    return "FAIL" if a.problems else "cannot check" if a.unchecked else "ok"


def _detail(a: CommitAudit) -> str:
    """The provenance word and every problem (and, for a squash, what each job's receipt still proves)."""
    return "; ".join([a.provenance, *a.problems, *a.unchecked, *(a.facts if a.squashed else [])])


def _signer_cell(a: CommitAudit) -> str:
    """The Genjob-Signer key, with the principal it verified as when it did."""
    signer = a.trailers.get("Genjob-Signer", "")
    return f"{a.signer_name} ({signer})" if a.signer_name else signer


def _merged_cell(a: CommitAudit) -> str:
    """Squashed, merged onto which commit (a merged apply), or no."""
    return "squashed" if a.squashed else f"merged onto {a.merged_onto[:12]}" if a.merged_onto else "no"


def next_step(a: CommitAudit) -> str:
    """What to run next for a commit that fails or cannot be checked ("" for one that passes)."""
    if not a.problems:
        return SHALLOW_HINT if a.unchecked else ""
    copy = _copy_notes_step(a.problems)
    if copy is not None:
        return copy
    fix = next((fix for applies, fix in FIXES if applies(a.problems)), VERIFY_FIX)
    return fix.format(key=a.trailers.get("Genjob-Key", "KEY"))


_COPY_MARKERS = ("copy the notes: ", "copy the note: ")


def _copy_notes_step(problems: list[str]) -> str | None:
    """The `git notes copy` commands a problem names (a cherry-pick of an applied job), if any."""
    for problem in problems:
        for marker in _COPY_MARKERS:
            if marker in problem:
                return problem.split(marker, 1)[1]
    return None


def _first_starts(prefix: str) -> Callable[[list[str]], bool]:
    return lambda problems: problems[0].startswith(prefix)


def _any_starts(prefix: str) -> Callable[[list[str]], bool]:
    return lambda problems: any(p.startswith(prefix) for p in problems)


def _any_contains(*needles: str) -> Callable[[list[str]], bool]:
    return lambda problems: any(n in p for p in problems for n in needles)


# (does it apply to the commit's problems, the fix; `{key}`: its Genjob-Key), the first that applies wins.
FIXES: tuple[tuple[Callable[[list[str]], bool], str], ...] = (
    (
        _first_starts("missing trailers"),
        "land jobs with git genjob apply; never write Genjob-* trailers by hand (amend the message)",
    ),
    (_first_starts("no genjob note"), "git genjob fetch origin (brings the notes and the archive), then audit again"),
    (
        _any_starts("check 2:"),
        "trust the worker's key in .genjob/allowed_signers (git genjob trust add NAME KEY), "
        "or check against a later trust store: git genjob audit --trust-from REV",
    ),
    (
        _any_starts("check 9:"),
        "trust the planner's key for genjob-job (git genjob trust add NAME KEY), then audit again",
    ),
    (
        _any_contains("commit diff != receipt outputs", "!= recomputed merge"),
        "keep hand edits in their own commit, or run the job again: git genjob resubmit {key}",
    ),
)
VERIFY_FIX = "git genjob verify {key} (every check, with its hint)"


def render_table(rows: list[ReportRow]) -> list[str]:
    """The table: failures first, then commits that cannot be checked, then passing ones."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in sorted(rows, key=lambda r: r.rank):
        lines.append("| " + " | ".join(row.cells()) + " |")
    return lines


def markdown_report(title: str, results: list[CommitAudit], quiet: bool = False) -> str:
    """The whole report: a heading naming the command, the counts, and the table."""
    out = [f"### {md_text(title)}", "", f"**{_counts_line(results)}**", ""]
    shown = [row_of(a) for a in results if not (quiet and a.ok)]
    if shown:
        out += [*render_table(shown), ""]
    return "\n".join(out)


def _counts_line(results: list[CommitAudit]) -> str:
    """How many genjob commits, how many fail, and how many cannot be checked in this clone."""
    failing = sum(1 for a in results if a.problems)
    unchecked = sum(1 for a in results if not a.problems and a.unchecked)
    counts = f"{len(results)} genjob commit(s), {failing} failing"
    if unchecked:
        counts += f", {unchecked} cannot be checked in this clone"
    return counts
