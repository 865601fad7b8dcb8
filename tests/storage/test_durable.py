"""Durable ref updates (storage/durable.py), traced with strace: each ref write is followed by a flush of the
file system holding the refs (from the red team of the fast paths, tests/test_redteam_fast.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.helpers.common import git, run_genjob, setup_worker
from tests.landing.test_verify_fast import GOOD

# -- durable ref updates (storage/durable.py): what each ref write is followed by ----------------
REF_WRITE = re.compile(r'^(\d+) +(?:link|rename|renameat2?)\(.*"([^"]+)"(?:, \w+)?\) = 0$')


SYNCFS = re.compile(r"^(\d+) +syncfs\(\d+<([^>]+)>\) = 0$")


FSYNC = re.compile(r"^(\d+) +f(?:data)?sync\(\d+<([^>]+)>\) = 0$")


def traced(repo: Path, env: dict[str, str], *args: str) -> list[str]:
    """`git genjob ARGS` under strace: its ref writes (link/rename into refs/, logs/, packed-refs)
    and its syncfs/fsync calls, each with the path of what it names, in order."""
    strace = shutil.which("strace")
    if strace is None:
        if os.environ.get("CI"):
            raise AssertionError("CI must install strace (.ci/run)")
        pytest.skip("no strace on PATH")
    log = repo.parent / f"strace-{len(list(repo.parent.glob('strace-*')))}.txt"
    proc = subprocess.run(
        [strace, "-f", "-y", "-qq", "-e", "trace=link,rename,renameat,renameat2,syncfs,fsync,fdatasync", "-o", str(log)]
        + [sys.executable, "-m", "git_genjob", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0 and "ptrace" in proc.stderr and not os.environ.get("CI"):
        pytest.skip("strace cannot trace here")
    assert proc.returncode == 0, proc.stderr
    return log.read_text(errors="replace").splitlines()


def ref_writes(lines: list[str], gitdir: Path) -> list[int]:
    """The indexes of the lines that move a ref, its reflog or packed-refs into place."""
    root = str(gitdir.resolve())
    out = []
    for n, line in enumerate(lines):
        m = REF_WRITE.match(line)
        if m and not m.group(2).endswith(".lock"):
            dest = m.group(2)
            if dest.startswith((f"{root}/refs/", f"{root}/logs/")) or dest == f"{root}/packed-refs":
                out.append(n)
    return out


# From tests/test_redteam_fast.py: the red team of the fast paths (landing/fast.py).
def test_every_ref_write_is_followed_by_a_flush_of_the_file_system_holding_the_refs(repo: Path) -> None:
    """.git/objects on another file system (a symlink, as a shared object store is kept): the
    flush after the ref transaction must reach the refs, not only the objects."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == repo.stat().st_dev:
        if os.environ.get("CI"):
            raise AssertionError("CI needs /dev/shm on a file system of its own (a tmpfs)")
        pytest.skip("no second file system at /dev/shm")
    elsewhere = Path(tempfile.mkdtemp(dir=shm, prefix="genjob-redteam-"))
    try:
        shutil.move(str(repo / ".git/objects"), elsewhere / "objects")
        (repo / ".git/objects").symlink_to(elsewhere / "objects")
        setup_worker(repo)
        lines = traced(repo, {}, "submit", "-m", "Add a timeout", "src/user.py")
        refs_dev = (repo / ".git/refs").stat().st_dev
        writes = ref_writes(lines, repo / ".git")
        assert writes, lines
        flushed = [
            n for n, line in enumerate(lines) if (m := SYNCFS.match(line)) and os.stat(m.group(2)).st_dev == refs_dev
        ]
        assert flushed and max(flushed) > max(writes), "no syncfs of the refs' file system after the last ref write"
    finally:
        shutil.rmtree(elsewhere, ignore_errors=True)


# From tests/test_redteam_fast.py: the red team of the fast paths (landing/fast.py).
def test_genjob_fsync_each_fsyncs_every_ref_lock_and_never_calls_syncfs(repo: Path) -> None:
    key = setup_worker(repo)
    lines = traced(repo, {"GENJOB_FSYNC": "each"}, "submit", "-m", "Add a timeout", "src/user.py")
    assert not any(SYNCFS.match(line) for line in lines)
    fsynced = {m.group(2) for line in lines if (m := FSYNC.match(line))}
    locks = [line.split('"')[1] for line in (lines[n] for n in ref_writes(lines, repo / ".git")) if '"' in line]
    assert locks and all(lock in fsynced for lock in locks), (locks, fsynced)  # each ref's lock file, before it moves
    k = next(p.name for p in (repo / ".git/refs/genjob/jobs").iterdir())
    lines = traced(repo, {"GENJOB_FSYNC": "each"}, "work", "--generator", f"exec:{GOOD}", "--signing-key", str(key),
                   "--worker-id", "w1", "--once")  # fmt: skip
    assert not any(SYNCFS.match(line) for line in lines)
    assert run_genjob("verify", k, cwd=repo).code == 0
    git(repo, "fsck", "--strict", "--no-progress", "--no-dangling")  # exits non-zero on a broken ref or object
