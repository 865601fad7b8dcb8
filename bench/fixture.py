"""A fast fixture builder for scale runs: `git fast-import` writes what years of use would leave.

It writes, in one pack: N applied commits on the branch (with genjob trailers), a note on each
in refs/notes/genjob (fast-import fans the notes tree out as git does), N archived jobs in
refs/genjob/archive (valid job.json and meta.json under <shard>/<key>/), and Q queued live jobs
(each a one-commit chain on refs/genjob/jobs/<key> with its input). Only the fixture is built
this way; every measured operation runs git-genjob's normal code path on top of it.
"""

from __future__ import annotations

import hashlib
import subprocess
from typing import BinaryIO

from git_genjob.documents.canonical import canonical_bytes, digest
from git_genjob.documents.job import Job, seal_job
from git_genjob.storage.layout import shard
from git_genjob.storage.records import JOB_ENVELOPE, event_message

WHO = "bench <bench@example.com> 1767225600 +0000"


def _data(out: BinaryIO, payload: bytes) -> None:
    out.write(b"data %d\n" % len(payload))
    out.write(payload)
    out.write(b"\n")


def _meta(key: str, final: dict[str, str] | None) -> bytes:
    doc: dict[str, object] = {
        "job_id": "j-" + hashlib.sha256(key.encode()).hexdigest()[:32],
        "key": key,
        "created_at": "2026-01-01T00:00:00.000Z",
        "submitter": "bench <bench@example.com>",
        "base": None,
        "rev": "HEAD",
        "allow_secrets": False,
    }
    if final is not None:
        doc["final"] = final
    return canonical_bytes(doc)


def build(repo: str, archived: int, queued: int, branch: str = "main", input_files: int = 20) -> None:
    """Add `archived` applied jobs and `queued` live jobs to `repo` (which has f0..f19.py on main);
    the queued jobs are signed with the planner key its git config names, when it names one."""
    from git_genjob.planner.trust import planner_key
    from git_genjob.storage.store import Store

    planner = planner_key(Store.open(repo))
    proc = subprocess.Popen(
        ["git", "-C", repo, "fast-import", "--quiet", "--done", f"--active-branches={10}"],
        stdin=subprocess.PIPE,
    )
    assert proc.stdin is not None
    out = proc.stdin
    mark = 0

    def next_mark() -> int:
        nonlocal mark
        mark += 1
        return mark

    keys = [f"arch-{i:06d}" for i in range(archived)]
    commit_marks = []
    for i, key in enumerate(keys):
        m = next_mark()
        commit_marks.append(m)
        out.write(f"commit refs/heads/{branch}\nmark :{m}\ncommitter {WHO}\n".encode())
        msg = f"genjob: archived fixture {i}\n\nGenjob-Key: {key}\nGenjob-Receipt: sha256:{'0' * 64}\n"
        _data(out, msg.encode())
        if i == 0:
            out.write(f"from refs/heads/{branch}^0\n".encode())
        out.write(b"\n")
    if archived:
        note = next_mark()
        out.write(f"blob\nmark :{note}\n".encode())
        _data(out, b"genjob fixture ok: signed by SHA256:fixture (worker bench), receipt sha256:fixture\n")
        out.write(f"commit refs/notes/genjob\ncommitter {WHO}\n".encode())
        _data(out, b"genjob: fixture notes\n")
        for m in commit_marks:
            out.write(f"N :{note} :{m}\n".encode())
        out.write(b"\n")
        out.write(f"commit refs/genjob/archive\ncommitter {WHO}\n".encode())
        _data(out, b"genjob archive (fixture)\n")
        for i, key in enumerate(keys):
            job = Job.mint(
                f"fixture job {i}", {f"f{i % input_files}.py": digest(f"x = {i % input_files}\n".encode())}, key
            )
            final = {
                "state": "applied",
                "commit": "1" * 40,
                "branch": f"refs/heads/{branch}",
                "receipt": "sha256:" + "0" * 64,
            }
            for name, payload in (("job.json", job.canonical()), ("meta.json", _meta(key, final))):
                out.write(f"M 100644 inline {shard(key)}/{key}/{name}\n".encode())
                _data(out, payload)
        out.write(b"\n")
    inputs = []
    for n in range(input_files):
        m = next_mark()
        inputs.append(m)
        out.write(f"blob\nmark :{m}\n".encode())
        _data(out, f"x = {n}\n".encode())
    for i in range(queued):
        key = f"queued-{i:06d}"
        path = f"f{i % input_files}.py"
        job = Job.mint(f"fixture queued job {i}", {path: digest(f"x = {i % input_files}\n".encode())}, key)
        out.write(
            f"commit refs/genjob/jobs/{key}\ncommitter bench <bench@example.com> {1767225600 + i} +0000\n".encode()
        )
        _data(out, event_message("submitted", key, "queued", 0).encode())
        documents = [("job.json", job.canonical()), ("meta.json", _meta(key, None))]
        if planner is not None:  # signed as `submit` signs: the workers benched claim only such jobs
            documents.append((JOB_ENVELOPE, seal_job(job.canonical(), planner)))
        for name, payload in documents:
            out.write(f"M 100644 inline {name}\n".encode())
            _data(out, payload)
        out.write(f"M 100644 :{inputs[i % input_files]} inputs/{path}\n\n".encode())
    out.write(b"done\n")
    out.close()
    if proc.wait() != 0:
        raise RuntimeError("git fast-import failed")
    if archived:
        add_rows(repo)


def add_rows(repo: str) -> None:
    """The archive's `_rows/<shard>` blobs, as apply writes them one job at a time (fast-import
    cannot: a row names its entry's tree id, known only once the entry is written)."""
    import pygit2

    from git_genjob.planner.rows import archive_row
    from git_genjob.storage.archive import Archive, rows_blob
    from git_genjob.storage.layout import ARCHIVE_REF, ROWS_DIR
    from git_genjob.storage.records import load_tree
    from git_genjob.storage.store import RefUpdate, Store

    store = Store.open(repo)
    tip = store.ref_target(ARCHIVE_REF)
    assert tip is not None
    raw = pygit2.Repository(store.gitdir)
    rows = raw.TreeBuilder()
    for name, shard_tree, _, _ in Archive(store).shards():
        lines = {}
        for entry in shard_tree:
            sub = store.get(entry.id)
            assert isinstance(sub, pygit2.Tree)
            sort_key, rest = archive_row(load_tree(store, entry.name, sub, None, archived=True)).split("\t", 1)
            lines[entry.name] = (str(entry.id), f"{sort_key}\t{entry.name}\t{entry.id}\t{rest}")
        rows.insert(name, store.blob(rows_blob(lines, shard_tree.id)), pygit2.enums.FileMode.BLOB)
    root = raw.TreeBuilder(raw[tip].peel(pygit2.Commit).tree)  # a builder takes its own repository's tree
    root.insert(ROWS_DIR, rows.write(), pygit2.enums.FileMode.TREE)
    new = store.commit(root.write(), [tip], "genjob archive rows (fixture)\n")
    store.update_refs([RefUpdate(ARCHIVE_REF, tip, new)], message="fixture rows")
