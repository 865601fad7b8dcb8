"""Applied commits are signed as the user's own `git commit` signs them (issue 32 item 8, SPEC §12.2):
`commit.gpgsign` with `gpg.format` ssh (a throwaway key file) and openpgp (a throwaway gpg key in
a temporary GNUPGHOME); a signing failure applies nothing; the ledger's own commits stay unsigned."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.common import git, make_repo, refs, run_genjob, setup_worker, submit_key, work

A_PY = "def f():\n    return 1\n\n\ndef h():\n    return 'middle'\n\n\ndef g():\n    return 2\n"
B_PY = "b = 1\n"
C_PY = "c = 1\n"


@pytest.fixture
def ready(tmp_path: Path) -> tuple[Path, Path]:
    repo = make_repo(tmp_path / "repo", {"src/a.py": A_PY, "src/b.py": B_PY, "src/c.py": C_PY, "README.md": "x\n"})
    return repo, setup_worker(repo)


def ssh_signing(repo: Path, tmp_path: Path) -> None:
    """gpg.format ssh with a key file (no agent), and the allowed-signers file verify-commit reads."""
    key = tmp_path / "signing_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ada@example.com", "-f", str(key)], check=True)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text("ada@example.com " + (tmp_path / "signing_ed25519.pub").read_text())
    git(repo, "config", "gpg.format", "ssh")
    git(repo, "config", "user.signingkey", str(key))
    git(repo, "config", "gpg.ssh.allowedSignersFile", str(allowed))
    git(repo, "config", "commit.gpgsign", "true")


def logging_program(tmp_path: Path, real: str) -> Path:
    """A `gpg.program` / `gpg.ssh.program` that notes each call in tmp_path/signer.log, then runs `real`."""
    wrapper = tmp_path / f"logging-{real}"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path}/signer.log\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture
def gnupg(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A throwaway GNUPGHOME (short path: gpg-agent's socket name has a length limit) with an
    ed25519 key for ada@example.com and no passphrase; its agent is stopped afterwards."""
    if shutil.which("gpg") is None:
        pytest.skip("gpg is not installed")
    home = tempfile.mkdtemp(prefix="gnupg-", dir="/tmp")
    monkeypatch.setenv("GNUPGHOME", home)
    subprocess.run(
        ["gpg", "--batch", "--passphrase", "", "--quick-gen-key", "Ada Author <ada@example.com>"]
        + ["ed25519", "sign", "never"],
        check=True,
        capture_output=True,
    )
    listing = subprocess.run(
        ["gpg", "--batch", "--with-colons", "--list-secret-keys"], check=True, capture_output=True, text=True
    ).stdout
    fpr = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
    yield fpr
    subprocess.run(["gpgconf", "--kill", "gpg-agent"], capture_output=True)
    shutil.rmtree(home, ignore_errors=True)


def openpgp_signing(repo: Path, fpr: str) -> None:
    git(repo, "config", "gpg.format", "openpgp")
    git(repo, "config", "user.signingkey", fpr)
    git(repo, "config", "commit.gpgsign", "true")


def job(repo: Path, key: Path, path: str, command: str) -> str:
    k = submit_key(repo, "-m", f"Change {path}", path)
    res = work(repo, key, command, "--once")
    assert res.code == 0, res.err
    return k


def assert_signed(repo: Path, rev: str) -> None:
    proc = subprocess.run(["git", "verify-commit", rev], cwd=repo, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert git(repo, "log", "-1", "--format=%G?", rev).strip() == "G"


def assert_ledger_unsigned(repo: Path) -> None:
    """The ledger's commits (refs/genjob/*, the notes refs) are internal records: never signed by git."""
    ledger = [r for r in refs(repo) if r.startswith(("refs/genjob/", "refs/notes/"))]
    assert ledger
    for ref in ledger:
        assert git(repo, "log", "-1", "--format=%G?", ref).strip() == "N", ref


def applied_signed_everywhere(repo: Path, key: Path) -> None:
    """Plain, merged onto a moved branch, `apply --all` and `--branch genjob/KEY`: each verifies."""
    plain = job(repo, key, "src/b.py", "echo 'b = 2' > src/b.py")
    res = run_genjob("apply", plain, cwd=repo)
    assert res.code == 0, res.err
    assert_signed(repo, "HEAD")
    merged = job(repo, key, "src/a.py", "sed -i 's/return 1/return 42/' src/a.py")
    (repo / "src/a.py").write_text(A_PY.replace("return 2", "return 3"))  # a teammate's change to g()
    git(repo, "commit", "-q", "--no-verify", "-am", "teammate")  # signed too, by git itself
    res = run_genjob("apply", merged, cwd=repo)
    assert res.code == 0 and "merged onto" in res.out, res.err
    assert_signed(repo, "HEAD")
    assert "Genjob-Merged-Onto:" in git(repo, "log", "-1", "--format=%B")
    one = job(repo, key, "src/b.py", "echo 'b = 3' > src/b.py")
    two = job(repo, key, "src/c.py", "echo 'c = 2' > src/c.py")
    res = run_genjob("apply", "--all", "--json", cwd=repo)
    assert res.code == 0, res.err
    landed = json.loads(res.out)["landed"]
    assert [a["key"] for a in landed] == [one, two]
    for a in landed:
        assert_signed(repo, a["commit"])
    side = job(repo, key, "src/b.py", "echo 'b = 4' > src/b.py")
    res = run_genjob("apply", side, "--branch", f"genjob/{side}", cwd=repo)
    assert res.code == 0, res.err
    assert_signed(repo, f"genjob/{side}")
    assert git(repo, "status", "--porcelain") == ""
    audit = run_genjob("audit", "--json", cwd=repo)
    provenance = [r["provenance"] for r in json.loads(audit.out)["commits"]]
    assert audit.code == 0 and provenance == ["verified", "verified", "verified (merged)", "verified"], audit.out
    assert_ledger_unsigned(repo)


def test_ssh_signing_signs_plain_merged_all_and_side_branch_applies(
    ready: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, key = ready
    ssh_signing(repo, tmp_path)
    git(repo, "config", "gpg.ssh.program", str(logging_program(tmp_path, "ssh-keygen")))
    monkeypatch.setenv("GIT_COMMITTER_DATE", "1700000100 -0930")  # the identity libgit2 would have used
    applied_signed_everywhere(repo, key)
    assert "-Y sign" in (tmp_path / "signer.log").read_text()  # through the user's gpg.ssh.program
    who = git(repo, "log", "-1", "--date=raw", "--format=%an <%ae> %ad|%cn <%ce> %cd", "main").strip()
    assert who == "Ada Author <ada@example.com> 1700000000 +0000|Ada Author <ada@example.com> 1700000100 -0930"


def test_openpgp_signing_signs_plain_merged_all_and_side_branch_applies(
    ready: tuple[Path, Path], gnupg: str, tmp_path: Path
) -> None:
    repo, key = ready
    openpgp_signing(repo, gnupg)
    git(repo, "config", "gpg.program", str(logging_program(tmp_path, "gpg")))
    applied_signed_everywhere(repo, key)
    assert f"-bsau {gnupg}" in (tmp_path / "signer.log").read_text()  # through the user's gpg.program


def test_without_commit_gpgsign_the_applied_commit_is_unsigned_as_git_commit_s_would_be(
    ready: tuple[Path, Path], tmp_path: Path
) -> None:
    repo, key = ready
    ssh_signing(repo, tmp_path)
    git(repo, "config", "commit.gpgsign", "false")  # a key configured, signing off: git commit signs nothing
    k = job(repo, key, "src/b.py", "echo 'b = 2' > src/b.py")
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert git(repo, "log", "-1", "--format=%G?").strip() == "N"


def snapshot(repo: Path) -> tuple[str, str, str, dict[str, str]]:
    return git(repo, "rev-parse", "HEAD"), git(repo, "ls-files", "-s"), git(repo, "status", "--porcelain"), refs(repo)


def test_a_signing_failure_applies_nothing_and_says_how_to_fix_it(
    ready: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, key = ready
    k = job(repo, key, "src/b.py", "echo 'b = 2' > src/b.py")
    ssh_signing(repo, tmp_path)
    missing = tmp_path / "no-such-key"
    git(repo, "config", "user.signingkey", str(missing))
    before, state = snapshot(repo), run_genjob("show", k, "--json", cwd=repo).out
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 2, res.err
    assert "git could not sign the commit (commit.gpgsign is true); nothing was applied" in res.err
    assert str(missing) in res.err  # git's own words name the key file it could not use
    assert "git config user.signingkey" in res.err and f"git -c commit.gpgsign=false genjob apply {k}" in res.err
    assert snapshot(repo) == before  # no ref (branch, notes, archive, job), index or work-tree change
    assert run_genjob("show", k, "--json", cwd=repo).out == state  # still done, not applied
    res = run_genjob("apply", "--all", "--json", cwd=repo)
    doc = json.loads(res.out)
    assert res.code == 2 and doc["landed"] == [] and doc["stopped"]["key"] == k, res.out
    assert snapshot(repo) == before
    # the hint's way out: `git -c commit.gpgsign=false` (GIT_CONFIG_* is how git passes -c on)
    off = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "commit.gpgsign", "GIT_CONFIG_VALUE_0": "false"}
    for name, value in off.items():
        monkeypatch.setenv(name, value)
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 0, res.err
    assert git(repo, "log", "-1", "--format=%G?").strip() == "N"


SIGNING = ("gpg.format", "user.signingkey", "gpg.ssh.allowedSignersFile", "commit.gpgsign")


def test_signing_set_by_a_conditional_include_is_honoured_as_git_reads_it(
    ready: tuple[Path, Path], tmp_path: Path, hermetic_seal: Path
) -> None:
    """`includeIf "hasconfig:remote.*.url:…"` (a work identity for work remotes), which libgit2
    does not read: the signing config is read by git itself."""
    repo, key = ready
    ssh_signing(repo, tmp_path)
    settings = {n: git(repo, "config", "--local", n).strip() for n in SIGNING}
    for name in SIGNING:
        git(repo, "config", "--local", "--unset", name)
    included = tmp_path / "work.gitconfig"
    for name, value in settings.items():
        git(tmp_path, "config", "--file", str(included), name, value)
    with open(hermetic_seal / ".gitconfig", "a") as fh:
        fh.write(f'[includeIf "hasconfig:remote.*.url:https://work.example/**"]\n\tpath = {included}\n')
    k = job(repo, key, "src/b.py", "echo 'b = 2' > src/b.py")
    git(repo, "remote", "add", "origin", "https://work.example/project.git")
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert_signed(repo, "HEAD")
