"""One memo for the fast paths that answer without libgit2 (issue 24, issue 36 step 3).

A fast path serves what the slow path last printed while nothing it read has moved. Each keeps
one memo file under `.git/genjob/` (storage/layout.py names it): a JSON record `{"v": 1,
"stamp": {...}, ...}` whose stamp lists what the slow path read besides objects (ref values,
file digests and identities). `Memo.read` returns the record while its stamp, the fields the
caller names and its validity window (`until`, `since`) all still hold; `Memo.write` keeps one.
A `Handshake` is what a fast path saw before the slow path read anything: the slow path keeps
its answer only when the same repository is open and nothing stamped moved while it decided.

Imports os, hashlib and json only: served answers load neither libgit2 nor click.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Any

VERSION = 1


# -- stamp parts ------------------------------------------------------------------------------
def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digest(path: str) -> str | None:
    """sha256 of a file's bytes, "-" when it is absent, None when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            return sha(fh.read())
    except FileNotFoundError:
        return "-"
    except OSError:
        return None


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


def listing_digest(tips: dict[str, str]) -> str:
    """One digest of a {name: value} listing (the live job tips)."""
    return sha("".join(f"{k} {v}\n" for k, v in sorted(tips.items())).encode("utf-8", "surrogateescape"))


def safe_name(text: str) -> bool:
    """Whether `text` can name a memo file and a ref file (a job key is one safe path segment)."""
    return (
        0 < len(text) <= 200 and text[0] not in ".-" and all(c.isascii() and (c.isalnum() or c in "._-") for c in text)
    )


def key_args(args: list[str], command: str) -> tuple[str, bool] | None:
    """(KEY, --json given) for `COMMAND KEY [--json]` in any order, else None (the slow path)."""
    if len(args) not in (2, 3) or args[0] != command:
        return None
    rest = args[1:]
    as_json = "--json" in rest
    if as_json:
        rest.remove("--json")
    return (rest[0], as_json) if len(rest) == 1 else None


# -- the validity window ----------------------------------------------------------------------
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


# -- the memo file ----------------------------------------------------------------------------
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


class Memo:
    """One memo file: what the slow path printed, stamped with what it read."""

    def __init__(self, path: str):
        self.path = path

    def load(self) -> dict[str, Any] | None:
        """The record of this version, None when there is none (a damaged file raises)."""
        try:
            with open(self.path, "rb") as fh:
                record = json.loads(fh.read())
        except FileNotFoundError:
            return None
        return record if isinstance(record, dict) and record.get("v") == VERSION else None

    @staticmethod
    def holds(record: dict[str, Any], stamp: dict[str, str] | None, **fields: object) -> bool:
        """Whether `record` was stamped with `stamp`, has `fields` and is inside its window."""
        if stamp is None or record.get("stamp") != stamp or any(record.get(k) != v for k, v in fields.items()):
            return False
        if record.get("until") is None and record.get("since") is None:
            return True
        import time  # only a record with a window asks the time

        return within(record, time.time())

    def read(self, stamp: dict[str, str] | None, **fields: object) -> dict[str, Any] | None:
        """The record while `stamp`, `fields` and its window hold, else None (the slow path)."""
        if stamp is None:
            return None
        record = self.load()
        return record if record is not None and self.holds(record, stamp, **fields) else None

    def write(self, stamp: dict[str, str], **fields: object) -> None:
        write_derived(self.path, json.dumps({"v": VERSION, "stamp": stamp, **fields}).encode("utf-8"))


def served(record: dict[str, Any], as_json: bool) -> str | None:
    """The rendering a record keeps for `--json` or for plain output, None when it is not text
    (KeyError when it has none: a damaged record, for the caller's catch-all)."""
    text = record["json" if as_json else "text"]
    return text if isinstance(text, str) else None


class Handshake:
    """What a fast path saw before the slow path read anything: the command, the repository's
    directories, the stamp, the live tips' digest and the time it was taken."""

    __slots__ = ("command", "workdir", "gitdir", "stamp", "tips", "t0")

    def __init__(self, command: str, workdir: str, gitdir: str, stamp: dict[str, str], tips: str, t0: float):
        self.command, self.workdir, self.gitdir = command, workdir, gitdir
        self.stamp, self.tips, self.t0 = stamp, tips, t0

    def opened(self, workdir: str | None, gitdir: str) -> bool:
        """Whether the slow path opened the repository this handshake was taken in."""
        if workdir is None:
            return False
        same = os.path.realpath
        return same(self.workdir) == same(workdir) and same(self.gitdir) == same(gitdir)
