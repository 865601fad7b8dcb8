"""Fuzzed receipts (issue 12): a signed envelope with any predicate parses or is check 1, never a crash."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from git_genjob.documents.canonical import digest
from git_genjob.documents.errors import BadInput
from git_genjob.documents.keys import generate
from git_genjob.documents.receipt import PREDICATE_TYPE, STATEMENT_TYPE, parse_envelope, sign_statement, subjects_for
from tests.helpers.common import git, refs, run_genjob, submit_key, work

KEY = generate("fuzz")
GOOD: dict[str, Any] = {
    "job_digest": digest(b"job"),
    "key": "k-1",
    "claim": "a" * 40,
    "status": "ok",
    "reason": "",
    "outputs": {"src/a.py": digest(b"a")},
    "ignored": [],
    "worker_id": "w1",
    "attempt": 1,
    "generator": {"kind": "exec", "endpoint": None, "model": None, "command": "true"},
    "replays": [],
    "started_at": "2026-12-03T00:00:00.000Z",
    "finished_at": "2026-12-03T00:00:01.000Z",
}
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


HONEST = object()


def _signed(predicate: Any, subject: Any = HONEST) -> bytes:
    statement = {
        "_type": STATEMENT_TYPE,
        "subject": _subjects(predicate) if subject is HONEST else subject,
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }
    return sign_statement(statement, KEY)


def _subjects(predicate: Any) -> Any:
    try:
        return subjects_for(predicate)
    except Exception:  # noqa: BLE001 - a malformed predicate has no honest subject: any will do
        return []


def test_the_good_predicate_parses() -> None:
    assert parse_envelope(_signed(GOOD)).predicate.to_dict() == GOOD


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(GOOD) + ["generator.kind", "outputs.path", "extra"]),
    JSON,
    st.booleans(),
)
def test_any_mutated_predicate_parses_or_is_check_1(field: str, value: Any, drop: bool) -> None:
    pred = copy.deepcopy(GOOD)
    if field == "generator.kind":
        pred["generator"]["kind"] = value
    elif field == "outputs.path":
        pred["outputs"] = {value if isinstance(value, str) else "x": digest(b"a")}
    elif field == "extra":
        pred[str(value)[:20] or "x"] = value
    elif drop:
        del pred[field]
    else:
        pred[field] = value
    try:
        raw = _signed(pred)
    except BadInput:
        assume(False)  # not even canonical JSON (e.g. an integer over 2**53): nothing to sign
    try:
        env = parse_envelope(raw)
    except BadInput:
        return  # check 1, with a message
    assert env.predicate.to_dict() == pred  # what parses is exactly what was signed


@settings(max_examples=200, deadline=None)
@given(JSON)
def test_any_subject_that_disagrees_with_the_predicate_is_check_1(subject: Any) -> None:
    raw = _signed(GOOD, subject=subject)
    if subject == subjects_for(GOOD):
        assert parse_envelope(raw).predicate.to_dict() == GOOD
        return
    try:
        parse_envelope(raw)
    except BadInput as exc:
        assert exc.message.startswith("receipt statement"), exc.message
        return
    raise AssertionError(f"a subject {subject!r} that is not the predicate's parsed")


def _uncommitted_worker(repo: Path, name: str = "w1") -> Path:
    """The walkthrough as a newcomer types it: init, keygen, trust add, and no commit of .genjob/."""
    assert run_genjob("init", cwd=repo).code == 0
    key = repo.parent / "keys" / name
    assert run_genjob("keygen", "--name", name, "--out", str(key), cwd=repo).code == 0
    res = run_genjob("trust", "add", name, f"{key}.pub", cwd=repo)
    assert res.code == 0 and 'git add .genjob && git commit -m "genjob: trust w1"' in res.out
    return key


# From tests/test_newcomer.py: a newcomer's first day (issue 11).
def test_an_uncommitted_trust_store_is_refused_with_the_fix(repo: Path) -> None:
    """verify/apply and audit/pre-push read one rule: the committed store of the branch."""
    key = _uncommitted_worker(repo)
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, key, "echo new > src/user.py", "--once").code == 0
    before = (refs(repo), git(repo, "status", "--porcelain"))
    res = run_genjob("verify", k, cwd=repo)
    assert res.code == 1 and "is trusted only by the uncommitted .genjob/" in res.out
    assert "hint: commit the trust store first: git add .genjob && git commit" in res.err
    res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1 and "git add .genjob && git commit" in res.err
    assert (refs(repo), git(repo, "status", "--porcelain")) == before  # nothing written
    git(repo, "add", ".genjob")
    git(repo, "commit", "-q", "-m", "genjob: trust w1")
    assert run_genjob("apply", k, cwd=repo).code == 0
    assert run_genjob("audit", cwd=repo).code == 0


# From tests/test_newcomer.py: a newcomer's first day (issue 11).
def test_an_unknown_signer_gets_the_exact_trust_add_command(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_genjob("init", cwd=repo).code == 0
    keydir = repo.parent / "xdg" / "git-genjob" / "keys"
    env_key = keydir / "w9"
    assert run_genjob("keygen", "--name", "w9", "--out", str(env_key), cwd=repo).code == 0
    k = submit_key(repo, "-m", "x", "src/user.py")
    assert work(repo, env_key, "echo new > src/user.py", "--once").code == 0
    with monkeypatch.context() as env:
        env.setenv("XDG_CONFIG_HOME", str(repo.parent / "xdg"))  # where keygen puts keys by default
        res = run_genjob("apply", k, cwd=repo)
    assert res.code == 1
    assert f"git genjob trust add w9 {env_key}.pub, then commit .genjob/" in res.err
    res = run_genjob("verify", k, cwd=repo)  # without the key on this machine: the unverified id, quoted
    assert res.code == 1 and "(unverified)" in res.err and "git genjob trust add NAME KEY.pub" in res.err
