"""Untrusted text made safe to print on a terminal.

Human output shows strings that come from a job, a receipt, a remote or a model (an
instruction, a submitter, a reason, an answer). A control character in one (ESC and the rest of
C0 and C1, DEL, a bidi override) could move the cursor, rewrite or hide earlier lines, or set the
terminal's title or clipboard. `--json` keeps every string exact (JSON escapes them); human
output shows them escaped, as Python does (`\\x1b`, `\\u202e`)."""

from __future__ import annotations

import re

# What json.dumps(ensure_ascii=False) leaves raw but a terminal acts on or reorders: DEL, C1
# controls, bidi marks and overrides, zero-width characters, line and paragraph separators.
_RAW_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2069\ufeff]")


def printable(text: str, keep: str = "") -> str:
    """`text` with every unprintable character but those in `keep` shown escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c in keep else c.encode("unicode_escape").decode("ascii") for c in text)


def terminal_json(text: str) -> str:
    """JSON text with those characters written as `\\uXXXX` escapes: the same JSON value,
    safe to land on a terminal (JSON itself escapes only C0)."""
    if text.isascii() and "\x7f" not in text:
        return text
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def one_line(text: str) -> str:
    """`text` as one printable line: each run of whitespace one space, nothing unprintable."""
    if text.isprintable() and "  " not in text and text == text.strip():
        return text
    return printable(" ".join(text.split()))
