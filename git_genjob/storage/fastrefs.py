"""The repository read from its files, for the fast paths that answer without libgit2 (issue
24: `ask`'s replay hit, `status`): where the work tree and git directory are and ref values as git
keeps them (the memo itself, its stamp parts and window: storage/memo.py). Imports only os.

Each reader returns None where git's own rules would need more than a file read (a gitfile, an
`[extensions]` or `core.worktree` config, a symbolic ref, another owner): the caller then takes
the slow path, which opens the repository through libgit2 and decides.
"""

from __future__ import annotations

import os

_HEX = frozenset("0123456789abcdef")


def repo_dirs(start: str | None = None) -> tuple[str, str] | None:
    """(work tree, git directory) around `start` as libgit2's discovery finds them, when that
    is a plain `.git` directory owned by this user on the same file system; else None."""
    path = _work_tree_above(os.path.abspath(start or os.getcwd()))
    if path is None:
        return None
    dotgit = os.path.join(path, ".git")
    return (path, dotgit) if _plain_git_dir(path, dotgit) else None


def _plain_git_dir(path: str, dotgit: str) -> bool:
    """Whether `dotgit`, the git directory of work tree `path`, is one a file read may follow:
    both owned by this user, with HEAD, objects and a plain config."""
    uid = os.geteuid()
    if os.stat(path).st_uid != uid or os.stat(dotgit).st_uid != uid:
        return False  # safe.directory territory: let libgit2 decide
    if not (os.path.isfile(os.path.join(dotgit, "HEAD")) and os.path.isdir(os.path.join(dotgit, "objects"))):
        return False
    return _plain_config(dotgit)


def _work_tree_above(path: str) -> str | None:
    """The nearest directory at or above `path`, on its file system, that holds a `.git`
    directory; None at a gitfile, a git directory itself, or the file system's top."""
    dev = os.stat(path).st_dev
    while True:
        dotgit = os.path.join(path, ".git")
        if os.path.isdir(dotgit):
            return path
        if os.path.lexists(dotgit) or os.path.isfile(os.path.join(path, "HEAD")):
            return None  # a gitfile (linked worktree, submodule) or a git directory itself
        parent = os.path.dirname(path)
        if parent == path or os.stat(parent).st_dev != dev:
            return None
        path = parent


def _plain_config(dotgit: str) -> bool:
    """Whether the repository's config is readable and sets nothing a file read cannot follow:
    no `[extensions]`, no `core.worktree`, not bare."""
    try:
        with open(os.path.join(dotgit, "config"), "rb") as fh:
            config = fh.read().lower()
    except OSError:
        return False
    if b"extensions" in config or b"worktree" in config:
        return False
    return not (b"bare" in config and b"\tbare = false\n" not in config)


class Refs:
    """Ref values as git keeps them: a loose file over its line in packed-refs."""

    def __init__(self, gitdir: str):
        self.gitdir = gitdir
        self._packed: dict[str, str] | None = None

    def _oid(self, text: str) -> str | None:
        return text if len(text) in (40, 64) and set(text) <= _HEX else None

    def get(self, name: str) -> str | None:
        """The object id `name` holds, "" when it does not exist, None when a file must not be
        read this way (symbolic, malformed)."""
        try:
            with open(os.path.join(self.gitdir, name), "rb") as fh:
                text = fh.read().decode("ascii").strip()
        except FileNotFoundError:
            return self.packed().get(name, "")
        except (OSError, UnicodeDecodeError):
            return None
        return self._oid(text)

    def packed(self) -> dict[str, str]:
        if self._packed is None:
            self._packed = {}
            try:
                with open(os.path.join(self.gitdir, "packed-refs"), encoding="utf-8", errors="replace") as fh:
                    for line in fh:
                        oid, _, name = line.rstrip("\n").partition(" ")
                        if name and self._oid(oid):
                            self._packed[name] = oid
            except FileNotFoundError:
                pass
        return self._packed

    def head(self) -> str | None:
        try:
            with open(os.path.join(self.gitdir, "HEAD"), "rb") as fh:
                text = fh.read().decode("ascii").strip()
        except (OSError, UnicodeDecodeError):
            return None
        if text.startswith("ref: refs/"):
            name = text[len("ref: ") :]
            return None if ".." in name else self.get(name)
        return self._oid(text)
