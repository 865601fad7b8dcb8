"""The work tree and index for a job's output paths, written as git writes them (SPEC §10).

libgit2 runs no clean/smudge filter drivers and cannot keep an index entry's skip-worktree
bit, so the index and work tree of output paths go through the git CLI: `update-index` from
the verified blob ids, `checkout-index` (filters, eol, stat data as git records them), and the
sparse bit restored. The commit itself never goes through here: it holds the verified blobs.
"""

from __future__ import annotations

import os
import subprocess

import pygit2

from git_genjob.documents.errors import LockHeld, Refused
from git_genjob.storage import locks
from git_genjob.storage.faults import crash_point
from git_genjob.storage.gitdir import clean_env
from git_genjob.storage.store import Store

_ZERO = "0" * 40


def _git(store: Store, *args: str, data: bytes | None = None) -> bytes:
    root = store.workdir or store.gitdir
    proc = subprocess.run(["git", *args], cwd=root, input=data, capture_output=True, env=clean_env())
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        lock = os.path.join(store.gitdir, "index.lock")
        if "index.lock" in err and os.path.exists(lock):
            found = locks.held(store.common_dir, store.gitdir, [], True)
            who, todo = (found[0][1], found[0][2]) if found else ("held by a git command", f"rm {lock}")
            raise LockHeld(f"git {args[0]} could not lock {lock}: {who}", todo)
        raise Refused(f"git {args[0]} failed: {err}", "fix the work tree and retry")
    return proc.stdout


def _z(paths: list[str]) -> bytes:
    return b"".join(p.encode("utf-8") + b"\0" for p in paths)


def dirty_paths(store: Store, paths: list[str]) -> list[str]:
    """Paths whose index or work tree differs from HEAD, as `git status` sees them (filters, sparse)."""
    if not paths:
        return []
    out = _git(
        store, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all", "--", *paths
    )
    found = _status_paths(out)
    return sorted(p for p in paths if p in found or any(f.startswith(p + "/") for f in found))


def _status_paths(out: bytes) -> set[str]:
    """The paths `git status --porcelain=v1 -z` names (a rename's source path skipped)."""
    found = set()
    records = out.split(b"\0")
    i = 0
    while i < len(records):
        rec = records[i]
        if len(rec) > 3:
            found.add(rec[3:].decode("utf-8", "surrogateescape"))
            if rec[:1] in (b"R", b"C"):
                i += 1  # a rename's source path follows
        i += 1
    return found


def blocked_paths(store: Store, paths: list[str]) -> list[str]:
    """Output paths that the work tree cannot take: a leading directory is a file, or the path is a directory."""
    root = store.workdir or ""
    problems = [_blocked(root, path) for path in paths]
    return [p for p in problems if p is not None]


def _blocked(root: str, path: str) -> str | None:
    """Why the work tree at `root` cannot take a file at `path` (None: it can)."""
    parts = path.split("/")
    for i in range(1, len(parts)):
        prefix = os.path.join(root, *parts[:i])
        if os.path.lexists(prefix) and (os.path.islink(prefix) or not os.path.isdir(prefix)):
            return f"{'/'.join(parts[:i])} is a file in the work tree (the job writes {path})"
    full = os.path.join(root, path)
    if os.path.isdir(full) and not os.path.islink(full):
        return f"{path} is a directory in the work tree"
    return None


def _no_skip_worktree_bits(store: Store) -> bool:
    """Whether no index entry can carry the skip-worktree bit, from the index header alone.

    The bit is an extended flag, and git writes an index that holds one as version 3 or later:
    a version 2 index (git's default) holds none. A split index keeps entries in another file,
    so any `sharedindex.*` means: ask git.
    """
    try:
        with open(os.path.join(store.gitdir, "index"), "rb") as fh:
            header = fh.read(8)
        if any(name.startswith("sharedindex.") for name in os.listdir(store.gitdir)):
            return False
    except FileNotFoundError:
        return True  # no index yet: no entries, no bits
    except OSError:
        return False
    return header == b"DIRC\0\0\0\x02"


def sparse_paths(store: Store, paths: list[str]) -> set[str]:
    """Index entries with the skip-worktree bit (outside a sparse checkout's cone)."""
    if not paths or _no_skip_worktree_bits(store):
        return set()
    out = _git(store, "ls-files", "-t", "-z", "--", *paths)
    return {rec[2:].decode("utf-8", "surrogateescape") for rec in out.split(b"\0") if rec.startswith(b"S ")}


def worktree_oids(store: Store, paths: list[str]) -> dict[str, pygit2.Oid | None]:
    """Each path's work-tree content as the blob id git would store (clean filters applied); None if absent."""
    present = _regular_files(store.workdir or "", paths)
    out: dict[str, pygit2.Oid | None] = {p: None for p in paths}
    if present:
        lines = _git(store, "hash-object", "--stdin-paths", data="".join(p + "\n" for p in present).encode())
        for path, line in zip(present, lines.decode().split(), strict=True):
            out[path] = pygit2.Oid(hex=line)
    return out


def _regular_files(root: str, paths: list[str]) -> list[str]:
    """The paths of `paths` that are files in the work tree at `root` (not symbolic links)."""
    return [p for p in paths if os.path.isfile(os.path.join(root, p)) and not os.path.islink(os.path.join(root, p))]


def index_oids(store: Store, paths: list[str]) -> dict[str, pygit2.Oid | None]:
    index = store.index()
    return {p: (index[p].id if p in index else None) for p in paths}


class IndexUntouched(LockHeld):
    """git's index lock was held when checkout_outputs began: neither the index nor the work
    tree was written."""


def checkout_outputs(store: Store, outputs: dict[str, pygit2.Oid | None], modes: dict[str, int]) -> None:
    """Index entries from the verified blob ids, then the work tree from the index, as git checks out.
    IndexUntouched when the index lock was held at the start: nothing was written."""
    if not outputs:
        return
    sparse = sparse_paths(store, list(outputs))
    try:
        _git(store, "update-index", "--index-info", data=_index_info(outputs, modes))
    except LockHeld as exc:
        raise IndexUntouched(exc.message, exc.hint, details=exc.details) from None
    crash_point("mid-checkout")
    _remove_deleted(store, outputs, sparse)
    _write_outputs(store, outputs, sparse)
    _keep_sparse(store, outputs, sparse)


def _index_info(outputs: dict[str, pygit2.Oid | None], modes: dict[str, int]) -> bytes:
    """`git update-index --index-info` input: each output's blob and mode, a zero id where it is deleted."""
    info = "".join(
        f"{modes.get(p, 0o100644):o} {oid} 0\t{p}\n" if oid is not None else f"0 {_ZERO}\t{p}\n"
        for p, oid in sorted(outputs.items())
    )
    return info.encode("utf-8")


def _remove_deleted(store: Store, outputs: dict[str, pygit2.Oid | None], sparse: set[str]) -> None:
    """Unlink the work-tree files of deleted outputs (a sparse path has none to unlink)."""
    root = store.workdir or ""
    for path, oid in outputs.items():
        full = os.path.join(root, path)
        if oid is None and path not in sparse and os.path.lexists(full):
            os.unlink(full)


def _write_outputs(store: Store, outputs: dict[str, pygit2.Oid | None], sparse: set[str]) -> None:
    """Check out the written outputs from the index (filters, eol, stat data), but the sparse ones."""
    write = [p for p, oid in sorted(outputs.items()) if oid is not None and p not in sparse]
    if write:
        _git(store, "checkout-index", "-f", "-q", "-z", "--stdin", data=_z(write))


def _keep_sparse(store: Store, outputs: dict[str, pygit2.Oid | None], sparse: set[str]) -> None:
    """Set again the skip-worktree bit that `update-index --index-info` cleared on the sparse outputs."""
    keep_sparse = [p for p, oid in outputs.items() if oid is not None and p in sparse]
    if keep_sparse:
        _git(store, "update-index", "--skip-worktree", "-z", "--stdin", data=_z(keep_sparse))
