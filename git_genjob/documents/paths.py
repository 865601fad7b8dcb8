"""The path grammar of SPEC §8, in one place.

Besides the plain rules (relative, POSIX, normalized, no `..`, no control characters), a path must
stay safe on every file system a clone may land on, as git's own `verify_path` does with
`core.protectNTFS` and `core.protectHFS`: a component that NTFS or HFS+ would open as `.git`
(`.git.`, `.git::$INDEX_ALLOCATION`, `git~1`, `.g\u200cit`) or as `.genjob` is refused, and so
are two paths of one job that the same file systems would fold into one file.
"""

from __future__ import annotations

import os
import posixpath
import re
import unicodedata
from collections.abc import Callable

from git_genjob.documents.display import DECEPTIVE, deceptive, printable
from git_genjob.documents.errors import BadInput

MAX_PATH = 4096

# Code points HFS+ ignores when it compares names (git's utf8.c `next_hfs_char`).
_HFS_IGNORABLE = {
    0x200C, 0x200D, 0x200E, 0x200F,
    0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
    0x206A, 0x206B, 0x206C, 0x206D, 0x206E, 0x206F,
    0xFEFF,
}  # fmt: skip
_SHORT_NAME = re.compile(r"^(git|genjob)~[0-9]+$")
_NTFS_STREAM_OR_TRAIL = re.compile(r"^([^:]*?)[. ]*(?::.*)?$")


def _control(c: str) -> bool:
    o = ord(c)
    return o < 0x20 or 0x7F <= o <= 0x9F


def fold(component: str) -> str:
    """How NTFS and HFS+ see a name: ignorables dropped, trailing dots/spaces and streams cut, case folded."""
    name = "".join(c for c in component if ord(c) not in _HFS_IGNORABLE)
    m = _NTFS_STREAM_OR_TRAIL.match(name)
    name = m.group(1) if m else name
    return unicodedata.normalize("NFC", name).casefold()


def _aliases(component: str, name: str) -> bool:
    """Whether `component` would open as the dot-directory `name` (".git", ".genjob")."""
    folded = fold(component)
    return folded == name or bool(_SHORT_NAME.match(folded) and folded.startswith(name[1:]))


# The plain-text rules of SPEC §8, checked in this order: (breaks the rule, message, hint).
_TEXT_RULES: tuple[tuple[Callable[[str], bool], str, str | None], ...] = (
    (lambda p: len(p.encode("utf-8", "surrogatepass")) > MAX_PATH, f"{{what}} is longer than {MAX_PATH} bytes", None),
    (lambda p: any(_control(c) for c in p), "{what} {path!r} contains a control character", None),
    (lambda p: any(0xD800 <= ord(c) <= 0xDFFF for c in p), "{what} {path!r} is not valid UTF-8", None),
    (lambda p: "\\" in p, "{what} {path!r} contains a backslash", "use POSIX '/' separators"),
    (lambda p: p.startswith("/"), "{what} {path!r} is absolute", "give a path relative to the repository"),
)


def check_path(path: str, *, what: str = "path") -> str:
    """Return `path` if it is a safe repo-relative POSIX path, else raise BadInput (exit 2)."""
    if not isinstance(path, str) or not path:
        raise BadInput(f"{what} is empty", "name a file inside the repository")
    for broken, message, hint in _TEXT_RULES:
        if broken(path):
            raise BadInput(message.format(what=what, path=path), hint)
    parts = path.split("/")
    for part in parts:
        _check_component(path, part, what)
    if _aliases(parts[0], ".genjob"):
        raise BadInput(
            f"{what} {path!r} lies under .genjob/",
            "repository settings are changed by hand and reviewed, never by a job",
        )
    _check_shown(path, what)
    return path


def _check_shown(path: str, what: str) -> None:
    """SPEC §12.2: refuse a path a reviewer would read as another path than the one written."""
    shown = next((c for c in path if c in DECEPTIVE), None)
    if shown is not None:
        raise BadInput(
            f"{what} {printable(path)!r} contains U+{ord(shown):04X} ({deceptive(shown)})",
            "rename it: a reviewer would read another path than the one written",
        )


def _check_component(path: str, part: str, what: str) -> None:
    """Refuse a component of `path` that is empty, `.`, `..` or opens as .git."""
    if part in ("", "."):
        raise BadInput(f"{what} {path!r} is not normalized", f"use {posixpath.normpath(path)!r}")
    if part == "..":
        raise BadInput(f"{what} {path!r} leaves the repository ('..')")
    if _aliases(part, ".git"):
        alias = "" if part == ".git" else f" ({part!r} opens as .git on NTFS or HFS+)"
        raise BadInput(f"{what} {path!r} has a .git component{alias}")


def check_distinct(paths: list[str], *, what: str = "allowed paths") -> None:
    """Refuse two paths that one file would hold on a case-insensitive or normalizing file system."""
    seen: dict[str, str] = {}
    for path in paths:
        folded = "/".join(fold(p) for p in path.split("/"))
        if folded in seen and seen[folded] != path:
            raise BadInput(
                f"{what} {seen[folded]!r} and {path!r} name the same file on macOS and Windows",
                "keep one of them",
            )
        seen[folded] = path


def check_entry_name(name: str, where: str) -> str:
    """A tree entry name read from a ref: one path component, as git fsck requires."""
    if not name or name in (".", "..") or "/" in name or "\x00" in name or _aliases(name, ".git"):
        raise BadInput(f"{where} holds a tree entry named {name!r}", "the ref is damaged or hostile; drop it")
    if any(c in DECEPTIVE for c in name):  # what check_path refuses to write is refused when read
        raise BadInput(
            f"{where} holds a tree entry named {printable(name)!r}, which shows as another name",
            "the ref is damaged or hostile; drop it",
        )
    return name


def from_cli(arg: str, cwd: str, root: str) -> str:
    """A path as typed on the command line (relative to cwd, as in git) -> repo-relative."""
    if any(_control(c) for c in arg):
        raise BadInput(f"path {arg!r} contains a control character")
    absolute = os.path.normpath(os.path.join(os.path.realpath(cwd), arg))
    rel = os.path.relpath(absolute, os.path.realpath(root))
    if rel == "." or rel == ".." or rel.startswith(".." + os.sep):
        raise BadInput(f"path {arg!r} is outside the repository {root}")
    return check_path(rel.replace(os.sep, "/"))
