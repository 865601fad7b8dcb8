"""Untrusted text made safe to print on a terminal.

Human output shows strings that come from a job, a receipt, a remote or a model (an
instruction, a submitter, a reason, an answer). A control character in one (ESC and the rest of
C0 and C1, DEL, a bidi override) could move the cursor, rewrite or hide earlier lines, or set the
terminal's title or clipboard. `--json` keeps every string exact (JSON escapes them); human
output shows them escaped, as Python does (`\\x1b`, `\\u202e`)."""

from __future__ import annotations


def printable(text: str, keep: str = "") -> str:
    """`text` with every unprintable character but those in `keep` shown escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else c.encode("unicode_escape").decode("ascii") for c in text)


def one_line(text: str) -> str:
    """`text` as one printable line: each run of whitespace one space, nothing unprintable."""
    if text.isprintable() and "  " not in text and text == text.strip():
        return text
    return printable(" ".join(text.split()))
