"""The trust store (storage/truststore.py): allowed_signers lines trusted exactly as OpenSSH trusts them."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

SIGNER_LINES = [
    'namespaces="genjob-receipt"',
    'namespaces="genjob-receipt",valid-before="20300101",valid-before="20200101"',
    'namespaces="genjob-receipt",namespaces="other"',
    'NAMESPACES="genjob-receipt"',
    'namespaces="genjob-receipt",foo="x"',
    'namespaces="genjob-receipt",valid-before="2030"',
    'namespaces="genjob-receipt" ,valid-before="20200101"',
    'namespaces="genjob-receipt",cert-authority',
    'namespaces="genjob-receipt",valid-after="20200101Z",valid-before="20991231Z"',
    'namespaces="genjob-receipt",valid-before="20200101Z"',
]


# From tests/test_hostile.py: a hole the hostile review of issue 9 found.
@pytest.mark.parametrize("options", SIGNER_LINES)
def test_allowed_signers_lines_trust_what_openssh_trusts(tmp_path: Path, options: str) -> None:
    """Each line is read as `ssh-keygen -Y find-principals` reads it: a bad line trusts nothing."""
    import time

    from git_genjob.documents.keys import parse_public_key, read_allowed_signers

    sk = tmp_path / "k"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(sk), "-C", "w1"], check=True)
    pub = " ".join(sk.with_suffix(".pub").read_text().split()[:2])
    signers = tmp_path / "allowed_signers"
    signers.write_text(f"w1 {options} {pub}\n")
    msg = tmp_path / "msg"
    msg.write_text("hello\n")
    subprocess.run(
        ["ssh-keygen", "-Y", "sign", "-n", "genjob-receipt", "-f", str(sk), str(msg)], capture_output=True, check=True
    )
    proc = subprocess.run(
        ["ssh-keygen", "-Y", "find-principals", "-s", f"{msg}.sig", "-f", str(signers)], capture_output=True, text=True
    )
    openssh_trusts = proc.returncode == 0 and proc.stdout.strip() == "w1"
    keys, problems = read_allowed_signers(signers.read_text())
    ours = [k for k in keys if k.public == parse_public_key(pub)[0] and not k.problems_at(time.time())]
    assert bool(ours) == openssh_trusts, (options, proc.stderr, problems)
    assert bool(problems) == ("bad options" in proc.stderr or "invalid" in proc.stderr), (problems, proc.stderr)
