"""The repository read from its files, for the fast paths that answer without libgit2 (issue
24: `ask`'s replay hit, `status`): where the work tree and git directory are, ref values as git
keeps them, a file's identity, and derived files under `.git/genjob/`. Imports only os.

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
    path = os.path.abspath(start or os.getcwd())
    dev = os.stat(path).st_dev
    while True:
        dotgit = os.path.join(path, ".git")
        if os.path.isdir(dotgit):
            break
        if os.path.lexists(dotgit) or os.path.isfile(os.path.join(path, "HEAD")):
            return None  # a gitfile (linked worktree, submodule) or a git directory itself
        parent = os.path.dirname(path)
        if parent == path or os.stat(parent).st_dev != dev:
            return None
        path = parent
    uid = os.geteuid()
    if os.stat(path).st_uid != uid or os.stat(dotgit).st_uid != uid:
        return None  # safe.directory territory: let libgit2 decide
    if not (os.path.isfile(os.path.join(dotgit, "HEAD")) and os.path.isdir(os.path.join(dotgit, "objects"))):
        return None
    try:
        with open(os.path.join(dotgit, "config"), "rb") as fh:
            config = fh.read().lower()
    except OSError:
        return None
    if b"extensions" in config or b"worktree" in config:
        return None
    if b"bare" in config and b"\tbare = false\n" not in config:
        return None
    return path, dotgit


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


def file_stamp(path: str) -> str | None:
    """A file's identity (inode, mtime, size; "-" when absent): git and genjob replace or
    append, so a change moves it."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "-"
    except OSError:
        return None
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def write_derived(path: str, data: bytes) -> None:
    """A derived file: atomic, never fsynced; failing to write it costs only time."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def window(edges: list[float], t0: float) -> dict[str, float | None]:
    """The span around `t0` (when the slow path started deciding) in which no trusted key's
    validity window opens or closes: {"until": the first edge after t0, "since": the last edge
    at or before it}. A kept answer holds only inside it (`within`)."""
    after, passed = [t for t in edges if t > t0], [t for t in edges if t <= t0]
    return {"until": min(after, default=None), "since": max(passed, default=None)}


def within(memo: dict[str, object], now: float) -> bool:
    """Whether `now` lies in a kept answer's span (a clock set back past "since" leaves it)."""
    until, since = memo.get("until"), memo.get("since")
    if until is not None and (not isinstance(until, (int, float)) or now >= until):
        return False
    return since is None or (isinstance(since, (int, float)) and now >= since)


def key_args(args: list[str], command: str) -> tuple[str, bool] | None:
    """(KEY, --json given) for `COMMAND KEY [--json]` in any order, else None (the slow path)."""
    if len(args) not in (2, 3) or args[0] != command:
        return None
    rest = args[1:]
    as_json = "--json" in rest
    if as_json:
        rest.remove("--json")
    return (rest[0], as_json) if len(rest) == 1 else None
