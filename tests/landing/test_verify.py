"""Fuzzed receipts (issue 12): a signed envelope with any predicate parses or is check 1, never a crash."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from git_genjob.documents.canonical import digest
from git_genjob.documents.errors import BadInput
from git_genjob.documents.keys import generate
from git_genjob.documents.receipt import PREDICATE_TYPE, STATEMENT_TYPE, parse_envelope, sign_statement, subjects_for

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
