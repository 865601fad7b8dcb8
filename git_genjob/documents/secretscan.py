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


# Every match of a pattern contains one of its literals, found with bytes.find (memchr-fast);
# the regex then runs only in a window around each occurrence. A pattern that starts with a
# lookbehind gets no literal-prefix speedup from `re`, so a plain search of 256 MiB of output
# took minutes; with literals, text and binary alike are scanned at memory speed.
LITERALS: dict[str, tuple[bytes, ...]] = {
    "private key block": (b"PRIVATE KEY",),
    "AWS access key id": (b"A3T", b"AKIA", b"ASIA", b"ABIA", b"ACCA"),
    "AWS secret access key": tuple(
        "".join(c.upper() if m & (1 << n) else c for n, c in enumerate("aws")).encode() for m in range(8)
    ),
    "GitHub token": (b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_"),
    "GitHub fine-grained token": (b"github_pat_",),
    "GitLab token": (b"glpat-", b"gldt-", b"glptt-", b"glrt-"),
    "Slack token": (b"xox",),
    "Slack webhook": (b"hooks.slack.com/",),
    "Anthropic API key": (b"sk-ant-",),
    "OpenAI API key": (b"sk-",),
    "Google API key": (b"AIza",),
    "Stripe secret key": (b"k_live_",),
    "npm token": (b"npm_",),
    "PyPI token": (b"pypi-AgEIcHlwaS5vcmc",),
    "Hugging Face token": (b"hf_",),
}
# Where a match starts relative to its literal: most patterns begin with it (a match is tried
# right there, which costs the token's length), Stripe's one byte before; None: anywhere in
# the BEFORE bytes before it ("-----BEGIN … PRIVATE KEY"), searched in a window.
STARTS: dict[str, int | None] = {name: 0 for name in LITERALS}
STARTS.update({"Stripe secret key": 1, "private key block": None})
BEFORE, AFTER = 128, 1024


def _views(data: bytes) -> list[bytes]:
    """The bytes as stored, plus UTF-8 transcodings when they look like UTF-16 text (a BOM, or
    NUL in a quarter of the even or odd bytes; binary data has about one in 256)."""
    views = [data]
    head = data[:4096]
    bom = head[:2] in (b"\xff\xfe", b"\xfe\xff")
    if bom or (len(head) >= 4 and max(head[0::2].count(0), head[1::2].count(0)) * 4 >= len(head) // 2):
        start = 2 if bom else 0
        for codec in ("utf-16-le", "utf-16-be"):
            for offset in (start, start + 1):
                views.append(data[offset:].decode(codec, "ignore").encode("utf-8", "ignore"))
    return views


def _search(pattern: re.Pattern[bytes], literals: tuple[bytes, ...], start: int | None, view: bytes) -> bool:
    for literal in literals:
        at = view.find(literal)
        while at != -1:
            if start is None:
                if pattern.search(view, max(0, at - BEFORE), at + AFTER):
                    return True
            elif at >= start and pattern.match(view, at - start):  # a lookbehind still sees before it
                return True
            at = view.find(literal, at + 1)
    return False


def find_secret(data: bytes) -> str | None:
    """The name of the first credential pattern found in `data`, or None."""
    for view in _views(data):
        for name, pattern in PATTERNS:
            if _search(pattern, LITERALS[name], STARTS[name], view):
                return name
    return None


# A whole private key block: BEGIN line, body (headers, base64) and END line; one cut short (a
# truncated stderr) runs to the end of the text. The BEGIN pattern alone would leave the body.
KEY_BLOCK = re.compile(
    rb"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[ A-Z0-9_-]{0,100}-----|\Z)", re.S
)


def redact(text: str) -> str:
    """`text` with every credential-looking match replaced by its pattern's name (a private key
    by its whole block)."""
    data = text.encode("utf-8", "surrogatepass")
    data = KEY_BLOCK.sub(b"[redacted private key block]", data)
    for name, pattern in PATTERNS:
        data = pattern.sub(f"[redacted {name}]".encode(), data)
    out = data.decode("utf-8", "replace")
    if find_secret(out.encode("utf-8")):
        return "[redacted: the text looked like a credential]"
    return out
