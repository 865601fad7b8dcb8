"""The hostile corpus as data (issue 36): every row of hostile_corpus.toml is one hostile input,
run through the real CLI in its own process, refused with SPEC's exit code and a message naming
the cause, and leaving the refs, the index, the work tree and the user's key folder as they were.
The file's header describes a row; a case that needs logic of its own stays with its module's tests."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from git_genjob.documents.canonical import canonical_bytes, digest
from git_genjob.documents.keys import generate, read_signing_key
from git_genjob.documents.receipt import sign_statement, subjects_for
from git_genjob.storage.layout import job_ref
from tests.helpers.common import (
    git,
    make_repo,
    refs,
    replace_tip,
    run_genjob,
    run_genjob_process,
    setup_worker,
    submit_key,
    work,
)

CORPUS = tomllib.loads((Path(__file__).parent / "hostile_corpus.toml").read_text())["case"]
GOOD = "echo 'def fetch_user(uid, timeout=1):\n    return uid' > src/user.py"
GHP = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # split: no scanner takes the test for a leak
AWS_SECRET = "aws_secret_access_key = " + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


class Case:
    """One row's repository: where it is, its job and its worker key, and the words a row may name."""

    def __init__(self, tmp_path: Path, home: Path) -> None:
        self.tmp, self.home = tmp_path, home
        self.repo = make_repo(tmp_path / "repo")
        self.key = ""
        self.worker_key: Path | None = None
        self.env: dict[str, str] = {}

    def words(self) -> dict[str, str]:
        return {
            "key": self.key,
            "tmp": str(self.tmp),
            "home": str(self.home),
            "worker_key": str(self.worker_key),
            "GHP": GHP,
            "AWS_SECRET": AWS_SECRET,
            "OUT": digest(b"x\n"),
            "BAD": "sha256:" + "0" * 64,
        }

    def fill(self, value: Any) -> Any:
        """The row's value with its {words} named: strings, and the strings inside lists and tables."""
        if isinstance(value, str):
            for word, text in self.words().items():
                value = value.replace("{" + word + "}", text)
            return value
        if isinstance(value, list):
            return [self.fill(v) for v in value]
        if isinstance(value, dict):
            return {self.fill(k): self.fill(v) for k, v in value.items()}
        return value


def _worker(case: Case) -> None:
    case.worker_key = setup_worker(case.repo)


def _queued(case: Case) -> None:
    _worker(case)
    case.key = submit_key(case.repo, "-m", "Add a timeout", "src/user.py")


def _done(case: Case) -> None:
    _queued(case)
    assert work(case.repo, case.worker_key, GOOD, "--once").code == 0  # type: ignore[arg-type]


def _done_create(case: Case) -> None:
    _worker(case)
    case.key = submit_key(case.repo, "-m", "Create a module", "--create", "src/new/x.py")
    assert work(case.repo, case.worker_key, "echo 'x = 1' > src/new/x.py", "--once").code == 0  # type: ignore[arg-type]


SETUPS: dict[str, Callable[[Case], None]] = {
    "repo": lambda case: None,
    "initialized": lambda case: None if run_genjob("init", cwd=case.repo).code == 0 else pytest.fail("init"),
    "worker": _worker,
    "queued": _queued,
    "done": _done,
    "done_create": _done_create,
}


def _replace_tip(case: Case, files: dict[str, bytes | None]) -> None:
    """Rewrite the job tip's tree in place (same parent, same message): a tampered ref."""
    replace_tip(case.repo, case.key, files)


def _receipt(case: Case) -> bytes:
    return git(case.repo, "show", f"{job_ref(case.key)}:receipt.json").encode()


def _resign(case: Case, op: dict[str, Any], mutate: Callable[[dict[str, Any]], None]) -> None:
    statement = json.loads(base64.b64decode(json.loads(_receipt(case))["payload"]))
    mutate(statement)
    signer = read_signing_key(str(case.worker_key)) if op["signer"] == "worker" else generate("intruder")
    _replace_tip(case, {"receipt.json": sign_statement(statement, signer)})


def _predicate(changes: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    def mutate(statement: dict[str, Any]) -> None:
        statement["predicate"].update(changes)
        statement["subject"] = subjects_for(statement["predicate"])

    return mutate


def _envelope(case: Case, mutate: Callable[[dict[str, Any]], None]) -> None:
    envelope = json.loads(_receipt(case))
    mutate(envelope)
    _replace_tip(case, {"receipt.json": canonical_bytes(envelope)})


def _flip(envelope: dict[str, Any]) -> None:
    sig = bytearray(base64.b64decode(envelope["signatures"][0]["sig"]))
    sig[0] ^= 1
    envelope["signatures"][0]["sig"] = base64.b64encode(bytes(sig)).decode()


def _edit(case: Case, op: dict[str, Any]) -> None:
    path = case.repo / op["edit"]
    text = path.read_text()
    assert op["old"] in text, op
    path.write_text(text.replace(op["old"], op["new"]))


def _make_hostile(case: Case, op: dict[str, Any]) -> None:
    """One op of a row's `hostile` list (the file's header names them)."""
    if "write" in op:
        target = case.repo / op["write"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(op["text"].encode(op.get("encoding", "utf-8")))
    elif "edit" in op:
        _edit(case, op)
    elif "git" in op:
        git(case.repo, *op["git"])
    elif "genjob" in op:
        res = run_genjob(*op["genjob"], cwd=case.repo)
        assert res.code == 0, res.err
    elif "tip" in op or "untip" in op:
        files: dict[str, bytes | None] = {p: t.encode() for p, t in op.get("tip", {}).items()}
        _replace_tip(case, {**files, **dict.fromkeys(op.get("untip", []))})
    elif "flip_signature" in op:
        _envelope(case, _flip)
    elif "envelope" in op:
        _envelope(case, lambda envelope: envelope.update(op["envelope"]))
    elif "statement" in op:
        _resign(case, op, lambda statement: statement.update(op["statement"]))
    elif "predicate" in op:
        _resign(case, op, _predicate(op["predicate"]))
    elif "receipt_truncate" in op:
        _replace_tip(case, {"receipt.json": _receipt(case)[: -op["receipt_truncate"]]})
    elif "receipt_replace" in op:
        old, new = (s.encode() for s in op["receipt_replace"])
        assert old in _receipt(case), op
        _replace_tip(case, {"receipt.json": _receipt(case).replace(old, new, 1)})
    elif "env" in op:
        case.env.update(op["env"])
    else:
        raise AssertionError(f"an op the corpus does not know: {op}")


def _files(root: Path) -> dict[str, str]:
    """Every file under root (the .git folder aside), by the digest of its bytes."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
        if ".git" not in p.relative_to(root).parts[:1]
    }


def state(case: Case) -> dict[str, Any]:
    """What a refusal must leave as it was: every ref, HEAD, the index, the work tree's status
    and bytes, and the user's git-genjob folder (its keys)."""
    return {
        "refs": refs(case.repo),
        "HEAD": git(case.repo, "rev-parse", "HEAD"),
        "index": git(case.repo, "ls-files", "-s"),
        "status": git(case.repo, "status", "--porcelain", "--untracked-files=all"),
        "files": _files(case.repo),
        "config": _files(case.home / ".config" / "git-genjob"),
    }


def _at(doc: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        doc = doc[int(part)] if isinstance(doc, list) else doc[part]
    return doc


def check_run(run: dict[str, Any], code: int, out: str, err: str) -> None:
    """One command's outcome against its row."""
    shown = f"exit {code}\nstdout: {out}\nstderr: {err}"
    assert code == run["exit"], shown
    fragments = run.get("message", [])
    for fragment in [fragments] if isinstance(fragments, str) else fragments:
        assert fragment in err, (fragment, shown)
    for secret in run.get("hidden", []):
        assert secret not in out and secret not in err, (secret, shown)
    if "failed_checks" in run or "details" in run:
        checks = json.loads(out)["checks"]
        if "failed_checks" in run:
            assert [c["check"] for c in checks if not c["ok"]] == run["failed_checks"], shown
        for number, fragment in run.get("details", {}).items():
            assert fragment in next(c["detail"] for c in checks if c["check"] == int(number)), shown
    for path, value in run.get("json", {}).items():
        assert _at(json.loads(out), path) == value, (path, shown)
    for path, fragment in run.get("json_has", {}).items():
        assert fragment in _at(json.loads(out), path), (path, shown)


@pytest.mark.parametrize("row", CORPUS, ids=[row["name"].encode("unicode_escape").decode() for row in CORPUS])
def test_a_hostile_input_is_refused_and_changes_nothing(
    row: dict[str, Any], tmp_path: Path, hermetic_seal: Path
) -> None:
    assert row["origin"] and row["run"], row["name"]
    case = Case(tmp_path, hermetic_seal)
    SETUPS[row["setup"]](case)
    for op in row.get("hostile", []):
        _make_hostile(case, case.fill(op))
    before = state(case)
    for run in row["run"]:
        run = case.fill(run)
        res = run_genjob_process(*run["argv"], cwd=case.repo, env=case.env)
        check_run(run, res.code, res.out, res.err)
        assert state(case) == before, run["argv"]
    for path in case.fill(row.get("absent", [])):
        assert not os.path.lexists(path), path


def test_the_corpus_rows_are_whole() -> None:
    """Each row names a known set-up, its origin and at least one command; names are unique."""
    names = [row["name"] for row in CORPUS]
    assert len(names) == len(set(names)) and len(CORPUS) >= 25
    for row in CORPUS:
        assert row["setup"] in SETUPS and row["origin"] and row["run"], row["name"]
        assert set(row) <= {"name", "origin", "why", "setup", "hostile", "run", "absent"}, row["name"]
        for run in row["run"]:
            assert isinstance(run["argv"], list) and isinstance(run["exit"], int), row["name"]
