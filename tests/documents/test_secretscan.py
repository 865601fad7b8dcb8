"""The literal prefilter finds exactly what the plain patterns find (SPEC §8), at memory speed."""

from __future__ import annotations

from pathlib import Path

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


def test_a_failing_generator_that_prints_a_private_key_leaves_none_of_it_in_the_receipt(tmp_path: Path) -> None:
    from git_genjob.documents.receipt import parse_envelope
    from tests.helpers.common import live, make_repo, run_genjob, setup_worker, submit_key, work

    repo = make_repo(tmp_path / "repo")
    key = setup_worker(repo)
    leaked = tmp_path / "leaked"  # a real OpenSSH private key, as ssh-keygen would write one
    assert run_genjob("keygen", "--name", "leaked", "--out", str(leaked), cwd=repo).code == 0
    text = leaked.read_text()
    body = [line for line in text.splitlines() if line and "-----" not in line]
    assert text.startswith("-----BEGIN OPENSSH PRIVATE KEY-----") and body
    k = submit_key(repo, "-m", "Fix", "src/user.py")
    shown = tmp_path / "shown" / "key.txt"  # a readable copy the sandbox shows (the 0600 file it would not)
    shown.parent.mkdir()
    shown.write_text(text)
    command = f"echo 'loading key'; cat {shown} >&2; echo 'then it failed' >&2; exit 1"
    res = work(repo, key, command, "--once", "--sandbox-ro", str(shown.parent))
    assert res.code == 0, res.err
    _, record = live(repo, k)
    assert record.receipt_bytes is not None
    reason = parse_envelope(record.receipt_bytes).predicate.reason
    assert "[redacted private key block]" in reason and "then it failed" in reason, reason
    assert "PRIVATE KEY" not in reason.replace("[redacted private key block]", "")
    assert not any(line in reason for line in body)
    assert "END OPENSSH" not in reason
    shown = run_genjob("show", k, "--json", cwd=repo).out + run_genjob("show", k, cwd=repo).out
    assert not any(line in shown for line in body)


def test_a_key_block_cut_short_is_redacted_to_the_end() -> None:
    from git_genjob.documents.secretscan import redact

    text = "boom: -----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nMIIEowIBAAKCAQEA0Z3\nMIIEo"
    assert redact(text) == "boom: [redacted private key block]"
    two = "-----BEGIN EC PRIVATE KEY-----\nAAA\n-----END EC PRIVATE KEY-----\nmid\n" * 2
    assert redact(two) == "[redacted private key block]\nmid\n" * 2
