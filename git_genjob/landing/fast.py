"""`git genjob verify KEY` and `git genjob log` without libgit2 or click (issue 24).

The slow path (cli/landing.py: click, libgit2, every check of SPEC §6) decides every answer. A
verdict is a function of objects, which never change (the job's documents, its receipt, its
outputs, the commits and trees of HEAD's history), and of what can change, which is stamped:

- the refs read, from their files as git keeps them: HEAD's value (the target tree of check 8,
  the committed trust store, `[policy]` of .genjob/config.toml, the history `log` walks), the
  archive ref, both notes refs, and the live ref of each job named (`verify KEY`'s; every job a
  `log` row names);
- the work tree's trust store (`.genjob/allowed_signers` and `.genjob/revoked_keys`, their
  digests; the index's identity when one is missing, as a sparse checkout reads it there), for
  `verify`; `log` reads trust from each commit's own tree and from HEAD's;
- git config: `.git/config`'s digest and the user's and the system's config files' digests
  (trailer.* decides which trailers git reads); any `include` in one, and any variable that moves
  discovery or config (GIT_DIR, GIT_CONFIG_*, ...), sends every call the slow way;
- any replace ref (`refs/replace/`, loose or packed) sends every call the slow way: genjob reads
  objects by id (libgit2, and every git it runs has GIT_NO_REPLACE_OBJECTS), so a replace ref
  changes no verdict today, but a kept answer should not rest on that alone;
- a repository that borrows objects (`objects/info/alternates`, as `clone --shared` or
  `--reference` leave it) sends every call the slow way: the lender may prune them;
- `.git/shallow` and `.git/info/grafts` (which parents exist), the environment that names the
  config and the time zone (HOME, XDG_CONFIG_HOME, TZ, every GIT_* variable) and
  `/etc/localtime` (a validity time without `Z` is local time);
- time, for `verify`: the verdict holds until the next time a key of either trust store it read
  (the work tree's, HEAD's) starts or stops being valid (and not before the last such time,
  should the clock go back). `log` checks each signature at its
  commit's time, so its answer does not age.

What is kept: only a `verify` that exits 0 (applyable), whose check 8 found the inputs unchanged
(no 3-way merge computed: a merge reads attributes no stamp covers) and whose job is not both
live and archived (the archive's word then depends on branches); a failed verify is recomputed
every time. Only a `log` whose every row verifies and none is a merged apply (its merge is
recomputed), or that finds no genjob commit; its exit is 0 either way. Output with anything but
printable ASCII is not kept (click rewrites some of it on the way out). The stamp is taken here,
before the slow path opens the repository (`PENDING`), and compared again before the file is
written, so a decision that raced a change is not kept.

The memo, its stamp parts, its window and the handshake are storage/memo.py's. Imports os, sys
and json only (tests/landing/test_verify_fast.py checks that a served verdict loads neither libgit2 nor
click).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from git_genjob.documents.errors import plain
from git_genjob.storage.fastrefs import Refs, repo_dirs
from git_genjob.storage.gitdir import live_tips
from git_genjob.storage.layout import ARCHIVE_REF, NOTES_REF, RECEIPTS_REF, job_ref, log_memo_path, verify_memo_path
from git_genjob.storage.memo import (
    Handshake,
    Memo,
    digest,
    file_stamp,
    key_args,
    listing_digest,
    safe_name,
    served,
    sha,
    window,
)

if TYPE_CHECKING:
    from git_genjob.landing.audit import CommitAudit
    from git_genjob.landing.verify import Verdict
    from git_genjob.storage.store import Store

MEMO_MAX = 4 << 20  # a larger answer is left to the slow path
# Variables that move where git finds the repository, its objects or its config: never decided here.
_DISCOVERY = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_COMMON_DIR",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_GRAFT_FILE",
    "GIT_SHALLOW_FILE",
    "GIT_REPLACE_REF_BASE",
)

# What the last `try_*` of this process saw when it could not serve. The slow path's
# `remember_*` takes it.
PENDING: Handshake | None = None


def _config(path: str) -> str | None:
    """A git config file's digest ("-": absent), None when it includes another file."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        return "-"
    except OSError:
        return None
    return None if b"include" in data.lower() else sha(data)


def _env() -> str | None:
    """The environment that names the config and the time zone, as a digest; None when a
    variable moves discovery or config."""
    if any(os.environ.get(name) for name in _DISCOVERY) or any(k.startswith("GIT_CONFIG_KEY_") for k in os.environ):
        return None
    names = sorted(k for k in os.environ if k.startswith("GIT_") or k in ("HOME", "XDG_CONFIG_HOME", "TZ"))
    return sha("\0".join(f"{k}={os.environ[k]}" for k in names).encode("utf-8", "surrogateescape"))


def _global_configs() -> list[str]:
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    return [os.path.join(home, ".gitconfig"), os.path.join(xdg, "git", "config"), "/etc/gitconfig"]


def _no_replace(gitdir: str, refs: Refs) -> str | None:
    """The stamp "-" when the repository has no replace ref, else None (never decided here: a
    belt to GIT_NO_REPLACE_OBJECTS, which keeps the git the slow path runs off replacements)."""
    for _, _, files in os.walk(os.path.join(gitdir, "refs", "replace")):
        if files:
            return None
    return None if any(name.startswith("refs/replace/") for name in refs.packed()) else "-"


def stamp(workdir: str, gitdir: str, trust: bool) -> dict[str, str] | None:
    """What `verify` (with `trust`: the work tree's trust store) or `log` reads besides objects
    and the job refs: None when it cannot be read from files."""
    refs = Refs(gitdir)
    out: dict[str, str | None] = {
        "head": refs.head(),
        "archive": refs.get(ARCHIVE_REF),
        "notes": refs.get(NOTES_REF),
        "receipts": refs.get(RECEIPTS_REF),
        "config": _config(os.path.join(gitdir, "config")),
        "shallow": file_stamp(os.path.join(gitdir, "shallow")),
        "grafts": file_stamp(os.path.join(gitdir, "info", "grafts")),
        "env": _env(),
        "zone": file_stamp("/etc/localtime"),
        "replace": _no_replace(gitdir, refs),
        # objects borrowed from another repository can be pruned there: never decided here
        "alternates": "-" if file_stamp(os.path.join(gitdir, "objects", "info", "alternates")) == "-" else None,
    }
    for n, path in enumerate(_global_configs()):
        out[f"config{n}"] = _config(path)
    if trust:
        out["allowed"] = digest(os.path.join(workdir, ".genjob", "allowed_signers"))
        out["revoked"] = digest(os.path.join(workdir, ".genjob", "revoked_keys"))
        if "-" in (out["allowed"], out["revoked"]):
            out["index"] = file_stamp(os.path.join(gitdir, "index"))
    if any(v is None for v in out.values()):
        return None
    return {k: str(v) for k, v in out.items()}


def _tips_digest(gitdir: str) -> str | None:
    tips = live_tips(gitdir)
    return None if tips is None else listing_digest(tips)


def _job_refs(gitdir: str, keys: list[str]) -> dict[str, str] | None:
    """{key: its live ref's value, "" when there is none}, None when one cannot be read as a file."""
    refs = Refs(gitdir)
    out = {}
    for key in keys:
        value = refs.get(job_ref(key))
        if value is None:
            return None
        out[key] = value
    return out


def _pend(command: str, dirs: tuple[str, str], st: dict[str, str] | None) -> None:
    """Keep what this call saw for the slow path's `remember_*` (taken before it reads anything)."""
    global PENDING
    import time

    tips = _tips_digest(dirs[1])
    if st is not None and tips is not None:
        PENDING = Handshake(command, dirs[0], dirs[1], st, tips, time.time())


def _serve(text: str) -> int:
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def _plain_on_terminal() -> bool:
    return not os.environ.get("NO_COLOR") and sys.stdout.isatty()


# -- `verify KEY` -----------------------------------------------------------------------------
def try_verify(args: list[str]) -> int | None:
    """Print `verify KEY` (or with --json) as the slow path last printed it: exit 0, or None
    for the slow path."""
    global PENDING
    PENDING = None
    parsed = key_args(args, "verify")
    if parsed is None or not safe_name(parsed[0]):
        return None
    key, as_json = parsed
    try:
        if not as_json and _plain_on_terminal():
            return None  # coloured: the slow path paints
        dirs = repo_dirs()
        if dirs is None:
            return None
        st = stamp(dirs[0], dirs[1], trust=True)
        text = _verify_memo(dirs[1], key, st, as_json)
        if text is None:
            _pend("verify", dirs, st)
            return None
    except Exception:  # noqa: BLE001 - no memo, a damaged one, an unreadable file: the slow path decides
        return None
    return _serve(text)


def _verify_memo(gitdir: str, key: str, st: dict[str, str] | None, as_json: bool) -> str | None:
    # the window holds too: an edge passed, or the clock went back over one, and it is decided again
    memo = Memo(verify_memo_path(gitdir, key)).read(st, key=key) if st is not None else None
    if memo is None or memo.get("jobs") != _job_refs(gitdir, [key]):
        return None
    return served(memo, as_json)


def _taken(command: str, store: Store) -> tuple[str, str, dict[str, str], float] | None:
    """PENDING, once, when this process's `try_*` took it for `command` in the repository the
    slow path opened and nothing it stamped has moved since (the job refs included)."""
    global PENDING
    pending, PENDING = PENDING, None
    if pending is None or pending.command != command or not pending.opened(store.workdir, store.gitdir):
        return None
    workdir, gitdir = pending.workdir, pending.gitdir
    st = stamp(workdir, gitdir, trust=command == "verify")
    if st is None or st != pending.stamp or _tips_digest(gitdir) != pending.tips:
        return None
    return workdir, gitdir, st, pending.t0


def _printable(text: str) -> bool:
    """Printable ASCII and newlines only: what click writes to a file or pipe unchanged."""
    return len(text) <= MEMO_MAX and all(c == "\n" or " " <= c < "\x7f" for c in text)


def remember_verify(store: Store, key: str, verdict: Verdict) -> None:
    """After the slow path's plain `verify KEY` (no --branch) found `verdict`: keep both
    renderings, unless the verdict is a refusal, needed a merge, came from a job both live and
    archived, or anything stamped moved while it was decided."""
    from git_genjob.storage.archive import Archive  # loads libgit2: only the slow path, which has it

    taken = _taken("verify", store)
    if taken is None or not _verdict_memoable(key, verdict):
        return
    _, gitdir, st, t0 = taken
    jobs = _job_refs(gitdir, [key])
    if jobs is None or (jobs[key] and Archive(store).entry(key) is not None):
        return
    edges = _trust_edges(store)
    shown = _verify_renderings(verdict)
    if shown is None or _moved_since(taken, key, jobs):
        return
    Memo(verify_memo_path(gitdir, key)).write(st, key=key, jobs=jobs, **window(edges, t0), text=shown[0], json=shown[1])


def _verdict_memoable(key: str, verdict: Verdict) -> bool:
    """A passing verdict, of a key that can name a memo file, that needed no merge."""
    return verdict.ok and safe_name(key) and _merge_free(verdict)


def _moved_since(taken: tuple[str, str, dict[str, str], float], key: str, jobs: dict[str, str]) -> bool:
    """Whether what `verify KEY` stamped, or the job's refs, moved since it was taken."""
    workdir, gitdir, st, _ = taken
    return stamp(workdir, gitdir, trust=True) != st or _job_refs(gitdir, [key]) != jobs


def _merge_free(verdict: Verdict) -> bool:
    """Every check ran once, and check 8 needed no merge (a merge reads attributes no stamp covers)."""
    from git_genjob.landing.verify import CHECKS

    if [c.n for c in sorted(verdict.checks, key=lambda c: c.n)] != sorted(CHECKS):
        return False
    fresh = [c for c in verdict.checks if c.n == 8]
    archived = verdict.record is not None and verdict.record.archived
    return len(fresh) == 1 and (fresh[0].detail == "inputs unchanged in the target" or archived)


def _trust_edges(store: Store) -> list[float]:
    """When any key of the work tree's or HEAD's trust store becomes valid or stops being valid."""
    from git_genjob.planner.trust import trust_at_head, trust_from_worktree

    signers = [*trust_from_worktree(store).signers, *trust_at_head(store).signers]
    return [t for k in signers for t in (k.valid_after, k.valid_before) if t is not None]


def _verify_renderings(verdict: Verdict) -> tuple[str, str] | None:
    """(the plain text, the JSON) `verify KEY` prints for `verdict`; None when either is not
    what click writes unchanged."""
    from git_genjob.documents.display import terminal_json

    text = "".join(f"{line}\n" for line in verdict.lines(plain))
    as_json = terminal_json(json.dumps(verdict.to_json(), indent=2, sort_keys=True, ensure_ascii=False)) + "\n"
    return (text, as_json) if _printable(text) and _printable(as_json) else None


# -- `log` ----------------------------------------------------------------------------------
def try_log(args: list[str]) -> int | None:
    """Print `log` (or `log --json`, HEAD's history) as the slow path last printed it: exit 0,
    or None for the slow path."""
    global PENDING
    PENDING = None
    if args not in (["log"], ["log", "--json"]):
        return None
    as_json = len(args) == 2
    try:
        if not as_json and _plain_on_terminal():
            return None
        dirs = repo_dirs()
        if dirs is None:
            return None
        st = stamp(dirs[0], dirs[1], trust=False)
        text = _log_memo(dirs[1], st, as_json)
        if text is None:
            _pend("log", dirs, st)
            return None
    except Exception:  # noqa: BLE001 - the slow path decides
        return None
    return _serve(text)


def _log_memo(gitdir: str, st: dict[str, str] | None, as_json: bool) -> str | None:
    memo = Memo(log_memo_path(gitdir)).read(st)
    jobs = None if memo is None else memo.get("jobs")
    if memo is None or not isinstance(jobs, dict) or not all(safe_name(k) for k in jobs):
        return None
    return served(memo, as_json) if _job_refs(gitdir, list(jobs)) == jobs else None


def remember_log(store: Store, results: list[CommitAudit], text: str, as_json: str) -> None:
    """After the slow path's plain `log` listed `results` (rendered as `text` and `as_json`):
    keep both, unless a row fails or cannot be checked, a row is a merged apply, a row names a
    key that cannot name a ref file, or anything stamped moved while it read."""
    taken = _taken("log", store)
    if taken is None or any(not r.ok or r.merged for r in results):
        return
    keys = _log_keys(results)
    if keys is None or not (_printable(text) and _printable(as_json)):
        return
    workdir, gitdir, st, _ = taken
    jobs = _job_refs(gitdir, keys)
    if jobs is None or stamp(workdir, gitdir, trust=False) != st:
        return
    Memo(log_memo_path(gitdir)).write(st, jobs=jobs, text=text, json=as_json)


def _log_keys(results: list[CommitAudit]) -> list[str] | None:
    """The job keys `log`'s rows name, sorted; None when one cannot name a ref file."""
    keys = sorted({k for r in results for k in r.to_json()["jobs"]})
    return keys if all(isinstance(k, str) and safe_name(k) for k in keys) else None
