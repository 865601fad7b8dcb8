"""Clones that lack something libgit2 cannot fill in, and git can: a partial clone's missing
objects (git clone --filter), fetched in one batch from its promisor remote the way git's own lazy
fetch does, and a sparse checkout's files left out of the work tree (the skip-worktree bit), read
from the index as git reads them. `Store` calls these; it stays the one reader of the repository."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable, Iterator
from typing import Protocol

import pygit2

from git_genjob.documents.errors import RemoteUnavailable
from git_genjob.storage.gitdir import clean_env
from git_genjob.storage.layout import ARCHIVE_REF, JOBS_PREFIX, ROWS_DIR

TRUE = ("true", "yes", "on", "1")


class Clone(Protocol):
    """What these read of a store (`storage.store.Store` is one)."""

    @property
    def gitdir(self) -> str: ...
    @property
    def workdir(self) -> str | None: ...
    def config_get(self, name: str) -> str | None: ...
    def remote_names(self) -> list[str]: ...
    def has(self, oid: pygit2.Oid | str) -> bool: ...
    def local(self, oid: pygit2.Oid | str) -> pygit2.Object | None: ...
    def iter_refs(self, prefix: str) -> Iterator[tuple[str, pygit2.Oid]]: ...
    def ref_target(self, name: str) -> pygit2.Oid | None: ...
    def get_commit(self, oid: pygit2.Oid | str) -> pygit2.Commit: ...
    def index(self) -> pygit2.Index: ...
    def read(self, oid: pygit2.Oid | str) -> bytes: ...


def promisor_remote(clone: Clone) -> str | None:
    """The remote this partial clone fetches the objects it lacks from, or None (a full clone)."""
    name = clone.config_get("extensions.partialClone")
    if name:
        return name
    for remote in clone.remote_names():
        if (clone.config_get(f"remote.{remote}.promisor") or "").lower() in TRUE:
            return remote
    return None


def fetch_missing(clone: Clone, remote: str | None, oids: Iterable[pygit2.Oid | str]) -> None:
    """Fetch the objects of `oids` this partial clone lacks, in one batch, the way git's own
    lazy fetch does (promisor-remote.c: a `fetch --stdin` of object ids with the noop
    negotiator); nothing to do in a full clone (`remote` None) or when none is missing."""
    if remote is None:
        return
    want = sorted({str(o) for o in oids if not clone.has(o)})
    if not want:
        return
    proc = subprocess.run(
        ["git", "--git-dir", clone.gitdir, "-c", "fetch.negotiationAlgorithm=noop", "fetch", remote]
        + ["--no-tags", "--no-write-fetch-head", "--recurse-submodules=no", "--filter=blob:none", "--stdin"],
        input="".join(f"{oid}\n" for oid in want),
        capture_output=True,
        text=True,
        env=clean_env(),
    )
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["git fetch failed"])[-1]
        raise RemoteUnavailable(
            f"this is a partial clone: {len(want)} object(s) it needs are not fetched, and fetching them "
            f"from {remote} failed: {why}",
            f"reach {remote} and run the command again, or fetch them: git fetch {remote} (a full clone has them)",
        )


def document_blobs(clone: Clone) -> list[pygit2.Oid]:
    """The blobs of every live job's documents and of the archive's rows: small, and what status,
    show and a worker read next, so the first miss fetches them all in its batch."""
    trees: list[pygit2.Tree] = []
    for _, tip in clone.iter_refs(JOBS_PREFIX):
        commit = clone.local(tip)
        trees += [commit.tree] if isinstance(commit, pygit2.Commit) else []
    rows = _archive_rows(clone)
    trees += [rows] if rows is not None else []
    return [e.id for tree in trees for e in tree if e.type_str == "blob"]


def _archive_rows(clone: Clone) -> pygit2.Tree | None:
    """The archive's rows tree, or None (no archive, or no rows in it)."""
    archive = clone.ref_target(ARCHIVE_REF)
    if archive is None:
        return None
    try:
        rows = clone.get_commit(archive).tree[ROWS_DIR]
    except KeyError:
        return None
    return rows if isinstance(rows, pygit2.Tree) else None


def skip_worktree(clone: Clone, paths: Iterable[str]) -> set[str]:
    """The paths of `paths` a sparse checkout leaves out of the work tree (git's skip-worktree
    bit, which libgit2 neither exposes nor honours in its status)."""
    paths = list(paths)
    sparse = (clone.config_get("core.sparseCheckout") or "").lower() in TRUE
    if not paths or not sparse or clone.workdir is None:
        return set()
    proc = subprocess.run(
        ["git", "--literal-pathspecs", "ls-files", "-t", "-z", "--", *paths],
        cwd=clone.workdir,
        capture_output=True,
        env=clean_env(),
    )
    records = proc.stdout.decode("utf-8", "surrogateescape").split("\0")
    return {r[2:] for r in records if r.startswith("S ")}


def worktree_file(clone: Clone, path: str) -> bytes | None:
    """A file of the work tree as git sees it: its bytes on disk, or, for a path a sparse
    checkout leaves out, the index's blob (as git reads it there); None when neither has it."""
    if clone.workdir is None:
        return None
    try:
        with open(os.path.join(clone.workdir, path), "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        pass
    if path not in skip_worktree(clone, [path]):
        return None
    entry = clone.index()[path]
    return clone.read(entry.id)
