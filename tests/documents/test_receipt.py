"""Receipts: DSSE + in-toto, verified by securesystemslib (independent) and by us (SPEC §2.3)."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey

from git_genjob.documents.canonical import canonical_bytes
from git_genjob.documents.errors import BadInput, Refused
from git_genjob.documents.keys import (
    TrustedKey,
    generate,
    parse_private_key,
    parse_public_key,
    public_line,
    read_signing_key,
)
from git_genjob.documents.receipt import build_statement, check_signature, parse_envelope, sign_statement
from tests.helpers.common import REPO_ROOT, refs, run_genjob

PRED = {
    "job_digest": "sha256:" + "a" * 64,
    "key": "k1",
    "claim": "c" * 40,
    "status": "ok",
    "reason": "",
    "outputs": {"src/a.py": "sha256:" + "b" * 64, "gone.py": None},
    "ignored": [],
    "worker_id": "w1",
    "attempt": 1,
    "generator": {"kind": "exec", "endpoint": None, "model": None, "command": "true"},
    "replays": [],
    "started_at": "2026-12-02T14:27:23.000Z",
    "finished_at": "2026-12-02T14:27:24.000Z",
}


def _sslib_verify(raw: bytes, pk: bytes) -> None:
    from git_genjob.documents.keys import fingerprint

    env = SslibEnvelope.from_dict(json.loads(raw))
    key = SSlibKey(keyid=fingerprint(pk), keytype="ed25519", scheme="ed25519", keyval={"public": pk.hex()})
    env.verify([key], 1)


def _trusted(pk: bytes) -> list[TrustedKey]:
    return [TrustedKey("w1", pk, ("genjob-receipt",), None, None, 1)]


def test_receipt_verifies_with_securesystemslib_and_ours() -> None:
    key = generate("w1")
    raw = sign_statement(build_statement(PRED), key)
    _sslib_verify(raw, key.public)
    env = parse_envelope(raw)
    assert check_signature(env, _trusted(key.public), set(), 0).principal == "w1"
    st = env.statement
    assert st["_type"] == "https://in-toto.io/Statement/v1"
    assert st["subject"] == [{"name": "src/a.py", "digest": {"sha256": "b" * 64}}]
    assert env.signatures[0][0] == key.keyid


@pytest.mark.parametrize("where", ["payload", "sig"])
def test_one_byte_change_fails_both_verifiers(where: str) -> None:
    key = generate("w1")
    doc = json.loads(sign_statement(build_statement(PRED), key))
    if where == "payload":
        payload = bytearray(base64.b64decode(doc["payload"]))
        payload[payload.index(b'"w1"') + 1] ^= 0x01
        doc["payload"] = base64.b64encode(bytes(payload)).decode()
    else:
        sig = bytearray(base64.b64decode(doc["signatures"][0]["sig"]))
        sig[5] ^= 0x01
        doc["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()
    raw = json.dumps(doc).encode()
    with pytest.raises(VerificationError):
        _sslib_verify(raw, key.public)
    with pytest.raises((Refused, BadInput)):
        check_signature(parse_envelope(raw), _trusted(key.public), set(), 0)


def test_non_ok_receipt_names_the_job_as_subject() -> None:
    raw = sign_statement(build_statement(dict(PRED, status="rejected", outputs={})), generate("w"))
    assert parse_envelope(raw).statement["subject"][0]["name"] == "genjob-job:k1"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.update(payloadType="text/plain"), "payloadType"),
        (lambda d: d.update(payload="!!notbase64"), "base64"),
        (lambda d: d.update(signatures=[]), "no signatures"),
        (lambda d: d.update(extra=1), "exactly"),
    ],
)
def test_malformed_envelopes_are_refused(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    doc = json.loads(sign_statement(build_statement(PRED), generate("w")))
    mutate(doc)
    with pytest.raises(BadInput, match=message):
        parse_envelope(canonical_bytes(doc))


def test_a_re_encoded_envelope_is_refused() -> None:
    """Re-encoding keeps the signature valid but changes the Genjob-Receipt digest (issue 9.13)."""
    raw = sign_statement(build_statement(PRED), generate("w"))
    parse_envelope(raw)
    with pytest.raises(BadInput, match="not canonical"):
        parse_envelope(json.dumps(json.loads(raw), indent=1).encode())


def test_duplicate_keys_and_wrong_predicate_type_are_refused() -> None:
    good = sign_statement(build_statement(PRED), generate("w")).decode()
    with pytest.raises(BadInput, match="duplicate"):
        parse_envelope(good.replace('{"payload"', '{"payload":"x","payload"', 1).encode())
    st = build_statement(PRED)
    st["predicateType"] = "urn:other"
    with pytest.raises(BadInput, match="predicateType"):
        parse_envelope(sign_statement(st, generate("w")))


def test_keys_interoperate_with_openssh(tmp_path: Path) -> None:
    key = generate("w1")
    path = tmp_path / "k"
    path.write_text(key.private_pem())
    os.chmod(path, 0o600)
    (tmp_path / "k.pub").write_text(public_line(key.public, "w1") + "\n")
    out = subprocess.run(["ssh-keygen", "-lf", str(tmp_path / "k.pub")], capture_output=True, text=True, check=True)
    assert out.stdout.split()[1] == key.keyid
    derived = subprocess.run(["ssh-keygen", "-y", "-f", str(path)], capture_output=True, text=True, check=True)
    assert parse_public_key(derived.stdout)[0] == key.public
    assert read_signing_key(str(path)) == key
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "o")], check=True)
    theirs = parse_private_key((tmp_path / "o").read_text())
    assert public_line(theirs.public, "").split()[1] == (tmp_path / "o.pub").read_text().split()[1]


def test_readable_key_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_text(generate("w").private_pem())
    os.chmod(path, 0o644)
    with pytest.raises(BadInput, match="readable by others"):
        read_signing_key(str(path))


# From tests/test_first_messages.py: a first-time mistake gets a message naming its real cause (issue 22 item 15).
def test_receipts_md_verification_snippet_runs_after_apply(repo: Path, tmp_path: Path) -> None:
    from tests.helpers.common import setup_worker, submit_key, work

    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Fix", "src/user.py")
    assert work(repo, key, "echo '# x' >> src/user.py", "--once").code == 0
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert "refs/genjob/jobs/" + k not in refs(repo)  # archived: the snippet must not read the live ref
    text = (REPO_ROOT / "docs" / "receipts.md").read_text()
    m = re.search(r"<!-- receipt-verify -->\s*\n```python\n(.*?)```", text, re.S)
    assert m is not None
    (tmp_path / "verify_receipt.py").write_text(m.group(1))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    proc = subprocess.run(
        [sys.executable, str(tmp_path / "verify_receipt.py"), k, str(key) + ".pub"],
        cwd=repo, env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0 and "receipt verifies" in proc.stdout, proc.stderr
