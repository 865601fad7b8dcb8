"""Patterns that look like credentials (SPEC §7, §8). Reports the pattern, never the match.

The rules follow the published token formats that gitleaks' default rule set documents (fixed
prefixes and lengths), not an entropy heuristic: genjob stores sha256 digests, base64 signatures
and commit ids everywhere, which entropy detectors such as detect-secrets flag by the dozen.
Every byte that is stored passes `find_secret`: UTF-16 text is transcoded first, and a token
glued to an identifier (`TOKEN_ghp_…`) still matches, since the boundary is any non-alphanumeric.
"""

from __future__ import annotations

import re

_L = rb"(?<![A-Za-z0-9])"  # start: not inside a longer alphanumeric run ('_' may precede)
_R = rb"(?![A-Za-z0-9])"

PATTERNS: list[tuple[str, re.Pattern[bytes]]] = [
    ("private key block", re.compile(rb"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----")),
    ("AWS access key id", re.compile(_L + rb"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}" + _R)),
    (
        "AWS secret access key",
        re.compile(
            rb"(?i)aws[a-z0-9_. -]{0,30}(?:secret|private)[a-z0-9_. -]{0,20}[\"'`]?\s*[:=]+>?\s*[\"'`]?"
            rb"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
        ),
    ),
    ("GitHub token", re.compile(_L + rb"gh[pousr]_[A-Za-z0-9]{36,255}" + _R)),
    ("GitHub fine-grained token", re.compile(_L + rb"github_pat_[A-Za-z0-9_]{40,255}" + _R)),
    ("GitLab token", re.compile(_L + rb"gl(?:pat|dt|ptt|rt)-[A-Za-z0-9_-]{20,}")),
    ("Slack token", re.compile(_L + rb"xox[abeoprs]-[A-Za-z0-9-]{10,}")),
    ("Slack webhook", re.compile(rb"hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9+/]{20,}")),
    ("Anthropic API key", re.compile(_L + rb"sk-ant-[A-Za-z0-9_-]{20,}")),
    ("OpenAI API key", re.compile(_L + rb"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{32,}")),
    ("Google API key", re.compile(_L + rb"AIza[0-9A-Za-z_-]{35}" + _R)),
    ("Stripe secret key", re.compile(_L + rb"[sr]k_live_[0-9A-Za-z]{20,}" + _R)),
    ("npm token", re.compile(_L + rb"npm_[A-Za-z0-9]{36}" + _R)),
    ("PyPI token", re.compile(_L + rb"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}")),
    ("Hugging Face token", re.compile(_L + rb"hf_[A-Za-z]{34}" + _R)),
]


def _views(data: bytes) -> list[bytes]:
    """The bytes as stored, plus a UTF-8 transcoding when they look like UTF-16 text."""
    views = [data]
    if b"\x00" in data[:4096] or data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        for codec in ("utf-16-le", "utf-16-be"):
            start = 2 if data[:2] in (b"\xff\xfe", b"\xfe\xff") else 0
            for offset in (start, start + 1):
                views.append(data[offset:].decode(codec, "ignore").encode("utf-8", "ignore"))
    return views


def find_secret(data: bytes) -> str | None:
    """The name of the first credential pattern found in `data`, or None."""
    for view in _views(data):
        for name, pattern in PATTERNS:
            if pattern.search(view):
                return name
    return None


def redact(text: str) -> str:
    """`text` with every credential-looking match replaced by its pattern's name."""
    data = text.encode("utf-8", "surrogatepass")
    for name, pattern in PATTERNS:
        data = pattern.sub(f"[redacted {name}]".encode(), data)
    out = data.decode("utf-8", "replace")
    if find_secret(out.encode("utf-8")):
        return "[redacted: the text looked like a credential]"
    return out
