"""Patterns that look like credentials (SPEC §7, §8). Reports the pattern, never the match."""

from __future__ import annotations

import re

PATTERNS: list[tuple[str, re.Pattern[bytes]]] = [
    ("private key block", re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("AWS access key id", re.compile(rb"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(rb"\bgh[pousr]_[A-Za-z0-9]{36,}\b")),
    ("GitHub fine-grained token", re.compile(rb"\bgithub_pat_[A-Za-z0-9_]{40,}\b")),
    ("GitLab token", re.compile(rb"\bglpat-[A-Za-z0-9_-]{20,}\b")),
    ("Slack token", re.compile(rb"\bxox[baprs]-[A-Za-z0-9-]{10,}\b")),
    ("Anthropic API key", re.compile(rb"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("OpenAI API key", re.compile(rb"\bsk-(?:proj-|svcacct-)?[A-Za-z0-9_-]{32,}")),
    ("Google API key", re.compile(rb"\bAIza[0-9A-Za-z_-]{35}\b")),
    ("Stripe secret key", re.compile(rb"\b[sr]k_live_[0-9A-Za-z]{20,}\b")),
]


def find_secret(data: bytes) -> str | None:
    """The name of the first credential pattern found in `data`, or None."""
    for name, pattern in PATTERNS:
        if pattern.search(data):
            return name
    return None
