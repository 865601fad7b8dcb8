"""A job as one row of `status` and of the archive's `_rows/<shard>` lines (SPEC §5)."""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from git_genjob.documents.display import one_line, printable
from git_genjob.documents.errors import GenjobError, Painter, plain
from git_genjob.documents.states import STATE_COLOURS
from git_genjob.storage.records import JobRecord


def summarize(record: JobRecord) -> dict[str, Any]:
    first = record.job.instruction.strip().splitlines()[0] if record.job.instruction.strip() else ""
    return {
        "key": record.key,
        "state": record.state,
        "digest": record.digest,
        "epoch": record.epoch,
        "attempts": len(record.attempts),
        "created_at": record.meta.created_at,
        "allowed_paths": record.job.allowed_paths,
        "instruction": first,
        "archived": record.archived,
        "result": receipt_result(record),
    }


def receipt_result(record: JobRecord) -> str | None:
    """What a live job's stored receipt says it is (ok, rejected, aborted), for display only.

    Read from the unverified envelope: `verify` is the check; this only keeps a failed run
    from looking like a finished one in `status`. None without a receipt or once archived.
    """
    if record.archived or record.receipt_bytes is None:
        return None
    from git_genjob.documents.receipt import parse_envelope

    try:
        return parse_envelope(record.receipt_bytes).predicate.status
    except GenjobError:
        return "damaged"


class StatusRow(NamedTuple):
    """One line of `status`: what the human line needs, and the row as one JSON document.

    A tuple, ordered as `status` sorts (submit time, then key): 100,000 archived rows are
    made, sorted and printed in well under a second."""

    sort_key: str
    key: str
    state: str
    instruction: str
    json: str
    result: str | None = None

    @property
    def label(self) -> str:
        """The state column: the state, or the attempt's result when it is not ok."""
        return self.state if self.result in (None, "ok") else str(self.result)

    def text(self, paint: Painter = plain, widths: tuple[int, int] = (34, 8)) -> str:
        """The human line: key, state (or the attempt's result when it is not ok), instruction,
        in columns `widths` wide (`status_lines` sizes them to the listing)."""
        label = self.label
        shown = f"{label:<{widths[1]}}"
        if paint is not plain:  # 100,000 rows: no call per row when nothing is coloured
            shown = paint(shown, "red" if label != self.state else STATE_COLOURS.get(self.state, "white"))
        return (
            f"{printable(self.key):<{widths[0]}} {shown} {self.instruction[:60]}\n"  # a damaged entry's name: any bytes
        )

    @classmethod
    def of(cls, doc: dict[str, Any]) -> StatusRow:
        text = json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        flat = one_line(doc["instruction"])  # the human line and a rows column: one line, printable
        result = doc.get("result")
        if doc.get("planner") in ("unsigned", "untrusted") and not result:
            result = doc["planner"]  # SPEC §11: listed as such, never claimed
        return cls(str(doc.get("created_at", "")), doc["key"], doc["state"], flat, text, result)


def status_lines(rows: list[StatusRow], paint: Painter = plain) -> list[str]:
    """The listing's human lines, each column as wide as its widest entry (a 10-character
    `superseded` never runs into the instruction)."""
    if not rows:
        return []
    widths = (max(len(printable(r.key)) for r in rows), max(len(r.label) for r in rows))
    return [r.text(paint, widths) for r in rows]


def archive_row(record: JobRecord) -> str:
    """The `_rows/<shard>` line of an archived job (the store adds its key and tree id)."""
    row = StatusRow.of(summarize(record))
    return f"{row.sort_key}\t{row.state}\t{row.instruction}\t{row.json}"
