"""Properties over hostile documents (issue 9): random mutations never verify and never raise
anything but git-genjob's own errors. 1,000 examples per property (GENJOB_HYPOTHESIS_EXAMPLES)."""

from __future__ import annotations

import base64
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import pygit2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from git_genjob.documents.attempts import parse_attempts, parse_meta
from git_genjob.documents.canonical import canonical_bytes
from git_genjob.documents.errors import GenjobError
from git_genjob.documents.job import Job
from git_genjob.documents.keys import read_signing_key
from git_genjob.documents.receipt import PAYLOAD_TYPE, parse_envelope
from git_genjob.documents.signing import pae
from git_genjob.landing.verify import check_receipt, trust_from_worktree
from git_genjob.storage.records import JobRecord, load_live
from git_genjob.storage.store import Store
from tests.helpers.common import make_repo, raw_repo, run_genjob, setup_worker, submit_key, work

EXAMPLES = int(os.environ.get("GENJOB_HYPOTHESIS_EXAMPLES", "1000"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**64), 2**64) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@pytest.fixture
def done_job(tmp_path: Path) -> tuple[Store, JobRecord, Path]:
    """A real repository with one job holding a valid, trusted receipt (made once per property)."""
    repo = make_repo(tmp_path / "repo")
    key = setup_worker(repo)
    k = submit_key(repo, "-m", "Add a timeout", "src/user.py")
    assert work(repo, key, "echo 'def f(): pass' > src/user.py", "--once").code == 0
    assert run_genjob("verify", k, cwd=repo).code == 0
    store = Store.open(str(repo))
    record = load_live(store, k)
    assert record is not None and record.receipt_bytes is not None
    return store, record, key


def _verdict(store: Store, record: JobRecord, receipt: bytes) -> bool:
    """Whether a receipt with these bytes verifies for the job; only our errors may escape."""
    mutated = dataclasses.replace(record, receipt_bytes=receipt)
    mutated.__dict__.pop("files", None)
    return check_receipt(store, mutated, trust_from_worktree(store)).ok


def _mutate_bytes(data: bytes, edits: list[tuple[int, int, int]]) -> bytes:
    buf = bytearray(data)
    for kind, pos, value in edits:
        if not buf:
            break
        i = pos % len(buf)
        if kind == 0:
            buf[i] ^= (value % 255) + 1  # flip: never a no-op
        elif kind == 1:
            buf.insert(i, value % 256)
        else:
            del buf[i]
    return bytes(buf)


EDITS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4)


@PROPERTY
@given(edits=EDITS)
def test_mutated_envelope_bytes_never_verify(done_job: tuple[Store, JobRecord, Path], edits: Any) -> None:
    store, record, _ = done_job
    assert record.receipt_bytes is not None
    mutated = _mutate_bytes(record.receipt_bytes, edits)
    if mutated == record.receipt_bytes:
        return
    assert not _verdict(store, record, mutated)


def _resigned(record: JobRecord, key_path: Path, mutate: Any) -> bytes:
    assert record.receipt_bytes is not None
    statement = json.loads(base64.b64decode(json.loads(record.receipt_bytes)["payload"]))
    mutate(statement)
    payload = canonical_bytes(statement)
    signer = read_signing_key(str(key_path))
    sig = base64.b64encode(signer.sign(pae(PAYLOAD_TYPE, payload))).decode()
    signatures = [{"keyid": signer.keyid, "sig": sig}]
    envelope = {"payloadType": PAYLOAD_TYPE, "payload": base64.b64encode(payload).decode(), "signatures": signatures}
    return canonical_bytes(envelope)


PRED_FIELDS = sorted(
    ["job_digest", "key", "claim", "status", "reason", "outputs", "ignored", "worker_id", "attempt", "generator"]
    + ["replays", "started_at", "finished_at"]
)


@PROPERTY
@given(field=st.sampled_from(PRED_FIELDS), value=JSON)
def test_resigned_predicate_with_any_field_value_never_raises(
    done_job: tuple[Store, JobRecord, Path], field: str, value: Any
) -> None:
    """Signed by the trusted key, a predicate field set to any JSON value is parsed or refused, never a crash."""
    store, record, key = done_job
    try:
        receipt = _resigned(record, key, lambda s: s["predicate"].__setitem__(field, value))
    except GenjobError:
        return  # not even encodable as canonical JSON
    try:
        parse_envelope(receipt)
    except GenjobError:
        pass
    original = json.loads(base64.b64decode(json.loads(record.receipt_bytes or b"{}")["payload"]))["predicate"][field]
    if _verdict(store, record, receipt):
        assert value == original and receipt == record.receipt_bytes


@PROPERTY
@given(edits=EDITS)
def test_mutated_job_json_parses_or_refuses(done_job: tuple[Store, JobRecord, Path], edits: Any) -> None:
    _, record, _ = done_job
    mutated = _mutate_bytes(record.job_bytes, edits)
    try:
        job = Job.from_bytes(mutated)
    except GenjobError:
        return
    assert job.canonical() == mutated or job.digest != record.job.digest or mutated != record.job_bytes


@PROPERTY
@given(doc=JSON)
def test_any_attempts_or_meta_document_parses_or_refuses(doc: Any) -> None:
    try:
        data = canonical_bytes(doc)
    except GenjobError:
        return
    for parse in (parse_attempts, parse_meta):
        try:
            parse(data)
        except GenjobError:
            pass


ATTEMPT_FIELDS = ["n", "worker", "epoch", "lease_until", "state", "started_at", "claim", "reason", "replays"]


@PROPERTY
@given(attempt=st.dictionaries(st.sampled_from(ATTEMPT_FIELDS), JSON))
def test_attempt_records_with_any_values_parse_or_refuse(attempt: dict[str, Any]) -> None:
    doc = {"epoch": 1, "state": "claimed", "attempts": [attempt]}
    try:
        parsed = parse_attempts(canonical_bytes(doc))
    except GenjobError:
        return
    a = parsed.attempts[0]
    assert isinstance(a.n, int) and isinstance(a.worker, str) and "\n" not in a.worker


# NUL cannot appear inside a tree entry name: it ends the name in the object format itself.
NAMES = st.text(alphabet=st.sampled_from(list("ab.g/it~ ") + ["\u200c", "G", "I", "T"]), min_size=1, max_size=8)


@PROPERTY
@given(names=st.lists(NAMES, min_size=1, max_size=4, unique=True))
def test_tree_entry_names_are_checked_when_read(done_job: tuple[Store, JobRecord, Path], names: list[str]) -> None:
    """A hostile tree's entry names either are refused or yield paths that are safe to write."""
    from git_genjob.documents.paths import check_path

    store, _, _ = done_job
    blob = store.blob(b"x")
    entries = sorted((n.encode("utf-8", "surrogatepass"), blob) for n in names)
    body = b"".join(b"100644 " + n + b"\0" + oid.raw for n, oid in entries)
    tree = store.get(raw_repo(store).odb.write(pygit2.enums.ObjectType.TREE, body))
    assert isinstance(tree, pygit2.Tree)
    try:
        files = store.tree_files(tree)
    except GenjobError:
        return
    except (UnicodeDecodeError, ValueError):
        pytest.fail("a hostile name escaped as a non-genjob error")
    for path in files:
        check_path(path)  # every name that passed is a safe path component
