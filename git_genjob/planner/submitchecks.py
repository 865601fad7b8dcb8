"""What submit checks before it mints a job (SPEC §5 submit): the instruction, the allowed paths,
the base commit, each input at that commit (a regular file, under the size limit, no secret, clean
in the work tree) and each path to create. Each check returns or raises `BadInput`/`Refused`."""

from __future__ import annotations

import os

import pygit2

from git_genjob.documents.config import Config
from git_genjob.documents.errors import BadInput, Refused
from git_genjob.documents.paths import check_path
from git_genjob.documents.secretscan import find_secret
from git_genjob.storage.store import Store, blocking_prefix, lookup

_DIRTY = (
    pygit2.enums.FileStatus.INDEX_NEW
    | pygit2.enums.FileStatus.INDEX_MODIFIED
    | pygit2.enums.FileStatus.INDEX_DELETED
    | pygit2.enums.FileStatus.INDEX_TYPECHANGE
    | pygit2.enums.FileStatus.INDEX_RENAMED
    | pygit2.enums.FileStatus.WT_NEW
    | pygit2.enums.FileStatus.WT_MODIFIED
    | pygit2.enums.FileStatus.WT_DELETED
    | pygit2.enums.FileStatus.WT_TYPECHANGE
    | pygit2.enums.FileStatus.WT_RENAMED
)


def resolve_base(store: Store, rev: str | None) -> pygit2.Commit | None:
    if rev is None:
        if store.is_bare:
            raise BadInput("a bare repository has no work tree to read", "pass --rev REV")
        return store.head_commit()
    try:
        return store.revparse_commit(rev)
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        raise BadInput(f"--rev {rev!r} does not name a commit", "give a branch, tag or commit id") from None


def read_inputs(
    store: Store, base: pygit2.Commit | None, paths: list[str], rev: str | None, cfg: Config, allow_secrets: bool
) -> dict[str, pygit2.Oid]:
    tree = base.tree if base is not None else None
    oids: dict[str, pygit2.Oid] = {}
    for path in paths:
        entry = input_entry(tree, base, path, rev or "HEAD")
        blob = store.get(entry.id)
        assert isinstance(blob, pygit2.Blob)
        check_input_blob(path, blob, cfg, allow_secrets)
        oids[path] = entry.id
    if rev is None and store.workdir is not None:
        refuse_dirty(store, paths)
    return oids


_NOT_A_FILE = {  # an input's tree entry type: why a job cannot start from it
    "tree": ("is a directory", "list the files inside it"),
    "commit": ("is a submodule", "a job may only change regular files"),
}


def input_entry(tree: pygit2.Tree | None, base: pygit2.Commit | None, path: str, where: str) -> pygit2.Object:
    """The tree entry an input path names at `where`, refused unless it is a regular file there."""
    prefix = blocking_prefix(tree, path)
    if prefix is not None:
        if getattr(lookup(tree, prefix), "type_str", None) == "commit":  # a gitlink
            raise BadInput(
                f"{path} is inside the submodule {prefix}, a repository of its own",
                f"submit it from inside the submodule: cd {prefix} && git genjob submit ...",
            )
        raise BadInput(f"{path}: {prefix} is not a directory at {where}")
    entry = lookup(tree, path)
    if entry is None and base is None:
        raise BadInput(
            f"this repository has no commits yet, so {path} has no committed content for a job to start from",
            f"commit it first: git add {path} && git commit (or, for a new file, let the job create it: --create)",
        )
    if entry is None:
        raise BadInput(f"{path} does not exist at {where}", f"to let the job create it, pass --create {path}")
    if entry.type_str in _NOT_A_FILE:
        what, hint = _NOT_A_FILE[entry.type_str]
        raise BadInput(f"{path} {what}", hint)
    if getattr(entry, "filemode", None) == pygit2.enums.FileMode.LINK:
        raise BadInput(f"{path} is a symlink", "a job may only change regular files")
    return entry


def check_input_blob(path: str, blob: pygit2.Blob, cfg: Config, allow_secrets: bool) -> None:
    """Refuse an input file over the size limit or holding what looks like a secret."""
    if blob.size > cfg.limits.file_bytes:
        raise BadInput(
            f"{path} is {blob.size} bytes, over the limit of {cfg.limits.file_bytes}",
            "raise limits.file_bytes in .genjob/config.toml or leave the file out",
        )
    found = None if allow_secrets else find_secret(bytes(blob.data))
    if found:
        raise BadInput(
            f"{path} contains what looks like a {found}",
            "remove it, or pass --allow-secrets (jobs are stored and replayable)",
        )


def _dirty_paths(store: Store, paths: list[str]) -> list[str]:
    """The paths whose work tree or index differs from HEAD, or that are symlinks in the work tree."""
    dirty = []
    for path in paths:
        try:
            flags = store.status_file(path)
        except (KeyError, pygit2.GitError):
            flags = 0
        if flags & _DIRTY or os.path.islink(os.path.join(store.workdir or "", path)):
            dirty.append(path)
    return dirty


def refuse_dirty(store: Store, paths: list[str]) -> None:
    dirty = _dirty_paths(store, paths)
    sparse = sorted(store.skip_worktree(dirty))
    if sparse:  # libgit2 sees a path a sparse checkout leaves out as deleted
        raise BadInput(
            "outside this sparse checkout (not in the work tree): " + ", ".join(sparse),
            f"add it to the checkout first: git sparse-checkout add {os.path.dirname(sparse[0]) or sparse[0]}",
        )
    if dirty:
        raise Refused(
            "the work tree differs from HEAD at " + ", ".join(dirty),
            "commit or stash these changes first, or pass --rev REV to mint from a commit",
        )


def check_creates(store: Store, base: pygit2.Commit | None, creates: list[str], rev: str | None) -> None:
    tree = base.tree if base is not None else None
    for path in creates:
        _check_create_at(tree, path, rev or "HEAD")
        if rev is None and store.workdir is not None:
            _check_create_in_work_tree(store.workdir, path)


def _check_create_at(tree: pygit2.Tree | None, path: str, where: str) -> None:
    """Refuse a path to create that exists at `where`, or under a non-directory there."""
    prefix = blocking_prefix(tree, path)
    if lookup(tree, path) is not None:
        raise BadInput(f"--create {path}: the path exists at {where}", f"list {path} as a PATH instead")
    if prefix is not None:
        raise BadInput(f"--create {path}: {prefix} is not a directory at {where}")


def _check_create_in_work_tree(workdir: str, path: str) -> None:
    """Refuse a path to create that already exists in the work tree."""
    if os.path.lexists(os.path.join(workdir, path)):
        raise BadInput(
            f"--create {path}: the path exists in the work tree", "commit it and list it as a PATH, or remove it"
        )


def check_allowed(allowed: list[str], cfg: Config) -> None:
    """Refuse a job's allowed paths (inputs and creates) unless each is a clean, distinct path
    and there is at least one and no more than the limit."""
    for p in allowed:
        check_path(p, what="allowed path")
    dupes = sorted({p for p in allowed if allowed.count(p) > 1})
    if dupes:
        raise BadInput("path given twice: " + ", ".join(dupes))
    if not allowed:
        raise BadInput("a job needs at least one allowed path", "name the files the job may change")
    if len(allowed) > cfg.limits.allowed_paths:
        raise BadInput(f"{len(allowed)} allowed paths, over the limit of {cfg.limits.allowed_paths}")


def check_instruction(instruction: str, cfg: Config, allow_secrets: bool) -> None:
    if not instruction.strip():
        raise BadInput("the instruction is empty", "pass -m TEXT or -F FILE")
    size = len(instruction.encode("utf-8", "surrogatepass"))
    if size > cfg.limits.instruction_bytes:
        raise BadInput(f"the instruction is {size} bytes, over the limit of {cfg.limits.instruction_bytes}")
    if "\x00" in instruction:
        raise BadInput("the instruction contains a NUL byte")
    if not allow_secrets:
        found = find_secret(instruction.encode("utf-8", "surrogatepass"))
        if found:
            raise BadInput(
                f"the instruction contains what looks like a {found}",
                "remove it, or pass --allow-secrets (jobs are stored and replayable)",
            )
