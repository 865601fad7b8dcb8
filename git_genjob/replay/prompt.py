"""Prompt normalization (SPEC §7), shared by the replay cache and `ask`'s fast path: imports only re."""

from __future__ import annotations

import re
from collections.abc import Iterable

from git_genjob.documents.errors import BadInput

HOME = re.compile(r"/(?:home|Users)/[^/\s]+")
TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
TMP = re.compile(r"/tmp/[^/\s]+")


def normalize_text(prompt: str, rules: Iterable[tuple[str, str]] = ()) -> tuple[str, list[str]]:
    """(normalized prompt, every rewrite made): what varies between machines and runs but not in
    meaning is stripped; `rules` are config.toml's extra (pattern, replacement) pairs, in order."""
    rewrites: list[str] = []

    def sub(pattern: re.Pattern[str], repl: str, text: str, label: str) -> str:
        def one(m: re.Match[str]) -> str:
            rewrites.append(f"{label}: {m.group(0)!r} -> {repl!r}")
            return repl

        return pattern.sub(one, text)

    text = prompt.replace("\r\n", "\n")
    text = sub(HOME, "/build", text, "home directory")
    text = sub(TIMESTAMP, "", text, "timestamp")
    text = sub(TMP, "/tmp/X", text, "temp path")
    for pattern, repl in rules:
        try:
            text = sub(re.compile(pattern), repl, text, f"rule {pattern}")
        except re.error as exc:
            raise BadInput(f".genjob/config.toml normalize rule {pattern!r} is not a valid regex: {exc}") from None
    text, stripped = _strip_whitespace(text)
    if stripped:
        rewrites.append("trailing whitespace stripped")
    return text, rewrites


def _strip_whitespace(text: str) -> tuple[str, bool]:
    """`text` without whitespace at the ends of its lines or blank lines at either end, and
    whether a line ended in whitespace."""
    raw = text.split("\n")
    lines = [line.rstrip() for line in raw]
    stripped = any(a != b for a, b in zip(lines, raw, strict=True))
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines), stripped
