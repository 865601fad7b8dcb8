"""The path grammar of SPEC §8, in one place."""

from __future__ import annotations

import os
import posixpath

from git_genjob.errors import BadInput

MAX_PATH = 4096


def check_path(path: str, *, what: str = "path") -> str:
    """Return `path` if it is a safe repo-relative POSIX path, else raise BadInput (exit 2)."""
    if not isinstance(path, str) or not path:
        raise BadInput(f"{what} is empty", "name a file inside the repository")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH:
        raise BadInput(f"{what} is longer than {MAX_PATH} bytes")
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise BadInput(f"{what} {path!r} contains a control character")
    if "\\" in path:
        raise BadInput(f"{what} {path!r} contains a backslash", "use POSIX '/' separators")
    if path.startswith("/"):
        raise BadInput(f"{what} {path!r} is absolute", "give a path relative to the repository")
    parts = path.split("/")
    for part in parts:
        if part in ("", "."):
            raise BadInput(f"{what} {path!r} is not normalized", f"use {posixpath.normpath(path)!r}")
        if part == "..":
            raise BadInput(f"{what} {path!r} leaves the repository ('..')")
        if part.casefold() == ".git":
            raise BadInput(f"{what} {path!r} has a .git component")
    if parts[0] == ".genjob":
        raise BadInput(
            f"{what} {path!r} lies under .genjob/",
            "repository settings are changed by hand and reviewed, never by a job",
        )
    return path


def from_cli(arg: str, cwd: str, root: str) -> str:
    """A path as typed on the command line (relative to cwd, as in git) -> repo-relative."""
    if any(ord(c) < 0x20 for c in arg):
        raise BadInput(f"path {arg!r} contains a control character")
    absolute = os.path.normpath(os.path.join(os.path.realpath(cwd), arg))
    rel = os.path.relpath(absolute, os.path.realpath(root))
    if rel == "." or rel == ".." or rel.startswith(".." + os.sep):
        raise BadInput(f"path {arg!r} is outside the repository {root}")
    return check_path(rel.replace(os.sep, "/"))
