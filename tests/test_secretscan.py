"""The literal prefilter finds exactly what the plain patterns find (SPEC §8), at memory speed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from git_genjob.documents.secretscan import PATTERNS, _views, find_secret

PIECES = [
    b"ghp_", b"gho_", b"github_pat_", b"glpat-", b"xoxb-", b"hooks.slack.com/services/", b"sk-ant-", b"sk-",
    b"sk-proj-", b"AIza", b"sk_live_", b"rk_live_", b"npm_", b"pypi-AgEIcHlwaS5vcmc", b"hf_", b"AKIA", b"A3TX",
    b"aws_secret_access_key = '", b"AwS PRIVATE key: ", b"-----BEGIN RSA PRIVATE KEY-----",
    b"-----BEGIN PRIVATE KEY BLOCK-----", b"A" * 40, b"a1" * 20, b"_", b"-", b"x", b" ", b"\n", b"'", b"\x00",
]  # fmt: skip


def plain(data: bytes) -> str | None:
    """The scan as it was before the prefilter: every pattern over every view."""
    for view in _views(data):
        for name, pattern in PATTERNS:
            if pattern.search(view):
                return name
    return None


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.binary(max_size=40)), max_size=30))
def test_prefiltered_scan_equals_the_plain_patterns(parts: list[bytes]) -> None:
    data = b"".join(parts)
    assert find_secret(data) == plain(data)


def test_binary_output_is_not_read_as_utf16() -> None:
    import os

    data = os.urandom(1 << 16)
    assert len(_views(data)) == 1
    assert len(_views("hello".encode("utf-16"))) == 5  # a BOM: both byte orders, both offsets
    assert len(_views("hello there".encode("utf-16-le"))) == 5  # NUL in every other byte
