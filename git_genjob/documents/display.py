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


# Characters that change what a reader sees without being seen (SPEC §12.2): bidi controls that
# reorder text, zero-width characters and invisible fillers that hide or fake a difference, and
# line and paragraph separators that break a line where no newline shows. Python calls the
# fillers (U+115F, U+1160, U+3164, U+FFA0: Hangul letters) printable; a reader sees nothing.
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_INVISIBLE = "\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u115f\u1160\u3164\uffa0\u180e\u034f"
_SEPARATORS = "\u2028\u2029"
DECEPTIVE = frozenset(_BIDI + _INVISIBLE + _SEPARATORS)


def deceptive(c: str) -> str | None:
    """What kind of deceptive character `c` is ("a bidi control", …), or None."""
    if c in _BIDI:
        return "a bidi control, which reorders what is shown"
    if c in _INVISIBLE:
        return "a zero-width or invisible character"
    if c in _SEPARATORS:
        return "a line or paragraph separator"
    return None


def printable(text: str, keep: str = "") -> str:
    """`text` with every unprintable or deceptive character but those in `keep` shown escaped."""
    if text.isprintable() and DECEPTIVE.isdisjoint(text):
        return text
    return "".join(
        c if (c.isprintable() and c not in DECEPTIVE) or c in keep else c.encode("unicode_escape").decode("ascii")
        for c in text
    )


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


def usage_text(usage: dict[str, object]) -> str:
    """A receipt's gateway totals in one phrase: `3 calls (1 sent, 2 replayed), 41 in / 21 out tokens`."""
    return (
        f"{usage.get('calls')} call{'s' if usage.get('calls') != 1 else ''} ({usage.get('sent')} sent, "
        f"{usage.get('replayed')} replayed), {usage.get('input_tokens')} in / {usage.get('output_tokens')} out tokens"
    )
