"""`git genjob status` and `status --json` without libgit2 or click (issue 24).

`status` (planner/queue.py) lists the live jobs from their tips, the archive (to skip a live ref
an interrupted archive move left behind) and the trust store (whether a trusted planner signed
each job). After the slow path lists them, `remember` keeps its output in `.git/genjob/status-out`,
stamped with what it read: every live job ref's value, the archive ref's value, the digests of
the work tree's `.genjob/allowed_signers` and `.genjob/revoked_keys` (plus the index's identity
when one is missing, as a sparse checkout reads it from there, and HEAD's value when the work
tree trusts nobody, as status then reads HEAD's), and the next time a trusted key's validity
window opens or closes. `try_status` prints that output while every stamp holds, read from the
files as git keeps them; anything else (colour on a terminal, another option, a damaged or
moving job, a ref git must resolve) runs the slow path.

The memo, its stamp parts and its window are storage/memo.py's. Imports os, sys and json only
(tests/planner/test_status_fast.py checks that a served listing loads neither libgit2 nor click).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from git_genjob.documents.errors import plain
from git_genjob.storage.fastrefs import Refs, repo_dirs
from git_genjob.storage.gitdir import live_tips
from git_genjob.storage.layout import ARCHIVE_REF, job_ref, show_memo_path, status_memo_path
from git_genjob.storage.memo import Memo, digest, file_stamp, key_args, listing_digest, safe_name, served, window

if TYPE_CHECKING:
    from typing import Any

    from git_genjob.planner.rows import StatusRow
    from git_genjob.storage.store import Store

    # (work tree, git directory, HEAD needed, stamp) as `before` took them
    Taken = tuple[str, str, bool, dict[str, str], float]


def stamp(workdir: str, gitdir: str, with_head: bool) -> dict[str, str] | None:
    """What plain `status` reads besides the objects (which never change): None when it cannot
    be read from files."""
    tips = live_tips(gitdir)
    if tips is None:
        return None
    refs = Refs(gitdir)
    out: dict[str, str | None] = {
        "tips": listing_digest(tips),
        "archive": refs.get(ARCHIVE_REF),
        "allowed": digest(os.path.join(workdir, ".genjob", "allowed_signers")),
        "revoked": digest(os.path.join(workdir, ".genjob", "revoked_keys")),
        "config": _config_stamp(gitdir),  # color.ui: the memo's text was painted, or not, by it
    }
    if "-" in (out["allowed"], out["revoked"]):
        out["index"] = file_stamp(os.path.join(gitdir, "index"))
    if with_head:
        out["head"] = refs.head()
    if any(v is None for v in out.values()):
        return None
    return {k: str(v) for k, v in out.items()}


def _config_stamp(gitdir: str) -> str | None:
    """The git config files colour is read from: the repository's, the user's, XDG's."""
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    paths = [os.path.join(gitdir, "config"), os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config")]
    stamps = [file_stamp(p) for p in paths]
    return None if None in stamps else "|".join(str(s) for s in stamps)


def try_status(args: list[str]) -> int | None:
    """Print plain `status` (or `status --json`) from the memo: exit 0, or None for the slow path."""
    if args not in (["status"], ["status", "--json"]):
        return None
    as_json = len(args) == 2
    try:
        # maybe coloured (`git -c color.ui=always`): the slow path decides and paints
        text = None if _maybe_coloured(as_json) else _memo_status(as_json)
    except Exception:  # noqa: BLE001 - a missing or damaged memo, an unreadable file: the slow path decides
        return None
    if text is None:
        return None
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def _maybe_coloured(as_json: bool) -> bool:
    """Whether plain `status` may be painted: text to a terminal, or colour set on the command line."""
    return (
        not as_json
        and not os.environ.get("NO_COLOR")
        and (sys.stdout.isatty() or "color" in os.environ.get("GIT_CONFIG_PARAMETERS", ""))
    )


def _memo_status(as_json: bool) -> str | None:
    """The memo's text (or JSON) of this repository's `status`, if every stamp it took still holds."""
    dirs = repo_dirs()
    if dirs is None:
        return None
    workdir, gitdir = dirs
    memo = Memo(status_memo_path(gitdir)).load()
    if memo is None or not Memo.holds(memo, stamp(workdir, gitdir, bool(memo.get("with_head")))):
        return None
    if not as_json and memo.get("coloured"):
        return None  # color.ui = always: the slow path paints
    return served(memo, as_json)


def before(store: Store) -> Taken | None:
    """The stamp to take before a slow-path `status` reads anything, when `try_status` can serve
    this repository at all, and the time it was taken."""
    import time

    from git_genjob.planner.trust import trust_from_worktree

    try:
        dirs = repo_dirs()
    except OSError:
        return None
    if dirs is None or not _same_repository(dirs, store):
        return None
    try:
        with_head = not trust_from_worktree(store).signers  # worker_trust then reads HEAD's
    except Exception:  # noqa: BLE001 - the slow path reports it
        return None
    st = stamp(dirs[0], dirs[1], with_head)
    return None if st is None else (dirs[0], dirs[1], with_head, st, time.time())


def _same_repository(dirs: tuple[str, str], store: Store) -> bool:
    """Whether the fast path's (work tree, git directory) are the store's: not bare, no other."""
    if store.workdir is None:
        return False
    ours = (os.path.realpath(store.workdir), os.path.realpath(store.gitdir))
    return (os.path.realpath(dirs[0]), os.path.realpath(dirs[1])) == ours


def remember(store: Store, taken: Taken, rows: list[StatusRow], coloured: bool = False) -> None:
    """After the slow path listed `rows` for plain `status`: keep its output, unless a job was
    damaged, skipped or moved, or anything stamped moved while it read."""
    from git_genjob.planner.trust import worker_trust

    workdir, gitdir, with_head, st, t0 = taken
    if not _listing_holds(workdir, gitdir, with_head, st, rows):
        return
    signers = worker_trust(store).signers
    edges = [t for k in signers for t in (k.valid_after, k.valid_before) if t is not None]
    text, as_json = _renderings(rows)
    Memo(status_memo_path(gitdir)).write(
        st,
        with_head=with_head,
        **window(edges, t0),  # from when the listing started: an edge passed since is not in it
        text=text,
        coloured=coloured and not sys.stdout.isatty(),  # painted into a pipe (color.ui = always)
        json=as_json,
    )


def _listing_holds(workdir: str, gitdir: str, with_head: bool, st: dict[str, str], rows: list[StatusRow]) -> bool:
    """Whether `rows` are every live job, none damaged, and nothing stamped `st` moved since."""
    tips = live_tips(gitdir)
    if tips is None or len(rows) != len(tips) or any(r.state == "damaged" for r in rows):
        return False
    return stamp(workdir, gitdir, with_head) == st


def _renderings(rows: list[StatusRow]) -> tuple[str, str]:
    """The listing as plain `status` prints it (uncoloured) and as `status --json` does."""
    from git_genjob.documents.display import terminal_json
    from git_genjob.planner.rows import status_lines

    if not rows:
        return "no jobs\n", "[]\n"
    return "".join(status_lines(rows, plain)), "[\n" + terminal_json(",\n".join(r.json for r in rows)) + "\n]\n"


# -- `show KEY`: one job, named by its full key ----------------------------------------------
def show_stamp(gitdir: str) -> dict[str, str] | None:
    """What `show KEY` reads besides the objects: which jobs exist (every live ref, the archive).
    An exact key resolves to itself, so the same stamp decides what a key names."""
    tips = live_tips(gitdir)
    archive = Refs(gitdir).get(ARCHIVE_REF)
    if tips is None or archive is None:
        return None
    return {"tips": listing_digest(tips), "archive": archive}


def try_show(args: list[str]) -> int | None:
    """Print `show KEY` (or with --json) from its memo: exit 0, or None for the slow path."""
    parsed = key_args(args, "show")
    if parsed is None or not safe_name(parsed[0]):
        return None
    name, as_json = parsed
    try:
        text = _served_show(name, as_json)
    except Exception:  # noqa: BLE001 - no memo, a damaged one, an unreadable file: the slow path decides
        return None
    if text is None:
        return None
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def _served_show(name: str, as_json: bool) -> str | None:
    """The memo's rendering of job `name` in this repository, while its stamp holds."""
    dirs = repo_dirs()
    if dirs is None:
        return None
    memo = Memo(show_memo_path(dirs[1], name)).load()
    if memo is None or memo.get("key") != name or not Memo.holds(memo, show_stamp(dirs[1])):
        return None
    return served(memo, as_json)


def before_show(store: Store) -> tuple[str, dict[str, str]] | None:
    try:
        dirs = repo_dirs()
    except OSError:
        return None
    if dirs is None or os.path.realpath(dirs[1]) != os.path.realpath(store.gitdir):
        return None
    st = show_stamp(dirs[1])
    return None if st is None else (dirs[1], st)


def remember_show(
    store: Store, taken: tuple[str, dict[str, str]], key: str, doc: dict[str, Any], lines: list[str]
) -> None:
    """After the slow path showed job `key`: keep both renderings, unless a live ref and an
    archive entry both name it (whether the archive's word holds depends on more than refs) or
    anything stamped moved while it read."""
    from git_genjob.documents.display import terminal_json
    from git_genjob.storage.archive import Archive  # loads libgit2: only the slow path, which has it

    gitdir, st = taken
    if not safe_name(key) or show_stamp(gitdir) != st:
        return
    if store.ref_target(job_ref(key)) is not None and Archive(store).entry(key) is not None:
        return
    Memo(show_memo_path(gitdir, key)).write(
        st,
        key=key,
        text="".join(f"{line}\n" for line in lines),
        json=terminal_json(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)) + "\n",
    )
