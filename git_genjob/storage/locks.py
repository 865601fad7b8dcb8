"""Who holds a ref lock: stale `*.lock` files left by a killed writer, detected and cleared.

libgit2 owns a lock file's contents (the new ref value), so the holder cannot be written into
it. Instead each git-genjob process that is about to lock refs records itself first in
`<git common dir>/genjob/writers/<pid>`: its pid, the boot id and its start time (so a reused pid
or a reboot never passes for the holder), then the refs it is locking, as git's gc.pid names its
holder. A lock is *stale* when the writer that named it is no longer running; a lock that no
record names (a `git` command's, say) counts as stale only once it is older than
UNKNOWN_STALE_S, since git holds a ref lock for milliseconds.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass

from git_genjob.documents.errors import Conflict, LockHeld, StaleLock
from git_genjob.storage.layout import GENJOB_PREFIX, NOTES_REFS, writers_dir

UNKNOWN_STALE_S = 600.0
_made: set[str] = set()


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return "-"


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "-"


def running(pid: int) -> bool:
    """Whether a process with this pid exists (on this machine, now)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _alive(pid: int, boot: str, start: str) -> bool:
    """Whether the process a record names is still that process: same boot, same start time."""
    if boot != _boot_id() or not running(pid):
        return False
    return start == "-" or _start_time(pid) in ("-", start)


# The refs each thread of this process is about to lock, per repository: the record on disk is
# their union (the gateway records answers from a thread per connection, SPEC §12.1), written
# and dropped under one lock so two threads never race on the one file.
_held: dict[str, dict[int, list[str]]] = {}
_held_lock = threading.Lock()


def announce(common: str, refs: list[str]) -> None:
    """Record this process as the writer about to lock `refs` (no fsync: only a crash reads it)."""
    with _held_lock:
        _held.setdefault(common, {})[threading.get_ident()] = list(refs)
        _write_record(common)


def release(common: str) -> None:
    """This thread holds no ref locks any more: drop its refs from the record (the record
    itself when no other thread of the process holds any)."""
    with _held_lock:
        held = _held.get(common, {})
        held.pop(threading.get_ident(), None)
        if held:
            _write_record(common)
        else:
            _held.pop(common, None)
            _forget(os.path.join(writers_dir(common), str(os.getpid())))


def _write_record(common: str) -> None:
    folder = writers_dir(common)
    path = os.path.join(folder, str(os.getpid()))
    if folder not in _made:
        os.makedirs(folder, exist_ok=True)
        _made.add(folder)
    refs = sorted({r for held in _held[common].values() for r in held})
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(f"{os.getpid()} {_boot_id()} {_start_time(os.getpid())}\n" + "".join(f"{r}\n" for r in refs))
    os.replace(tmp, path)


def _forget(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


@dataclass(frozen=True)
class LockState:
    path: str
    stale: bool
    holder: str  # who held it, for the message


def _records(common: str) -> list[tuple[int, bool, set[str]]]:
    """(pid, alive, refs) for every writer record."""
    out = []
    folder = writers_dir(common)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as fh:
                head, *refs = fh.read().splitlines()
            pid_s, boot, start = head.split()
            pid = int(pid_s)
        except (OSError, ValueError):
            continue
        out.append((pid, pid == os.getpid() or _alive(pid, boot, start), set(refs)))
    return out


def lock_state(common: str, ref: str, records: list[tuple[int, bool, set[str]]] | None = None) -> LockState | None:
    """The state of `ref`'s lock file, or None when it is not locked."""
    path = os.path.join(common, ref + ".lock")
    try:
        age = time.time() - os.stat(path).st_mtime
    except FileNotFoundError:
        return None
    records = records if records is not None else _records(common)
    # Our own record names the ref we are failing to lock; another thread of ours holds a lock
    # for milliseconds, so our own pid counts as the holder only for a fresh lock.
    holders = [(p, alive) for p, alive, refs in records if ref in refs and (p != os.getpid() or age < 2.0)]
    return _judged(path, age, holders)


def _judged(path: str, age: float, holders: list[tuple[int, bool]]) -> LockState:
    """The lock file at `path`, `age` seconds old, judged by the (pid, alive) records naming it."""
    live = [p for p, alive in holders if alive]
    if live:
        return LockState(path, False, f"a running git-genjob process ({live[0]})")
    if holders:
        return LockState(path, True, f"git-genjob process {holders[0][0]}, which is no longer running")
    return LockState(path, age > UNKNOWN_STALE_S, f"an unknown writer ({age:.0f}s ago)")


def held_by_another_writer(common: str, ref: str) -> bool:
    """Whether a running git-genjob process other than this one recorded that it is locking `ref`."""
    return any(alive and pid != os.getpid() and ref in refs for pid, alive, refs in _records(common))


def refuse_stale(common: str, refs: list[str]) -> None:
    """Raise StaleLock when a lock on one of `refs` is stale: no waiting clears it."""
    for ref in refs:
        state = lock_state(common, ref)
        if state is not None and state.stale:
            raise StaleLock(
                f"{ref} is locked by a stale lock file {state.path}, left by {state.holder}",
                f"git genjob recover clears git-genjob's stale locks (or, if no git runs: rm {state.path})",
            )


def refuse_claimed(common: str, refs: list[str], exc: Exception) -> None:
    """Raise Conflict when another running git-genjob process is locking one of `refs`."""
    if any(held_by_another_writer(common, ref) for ref in refs):
        raise Conflict(
            f"{', '.join(refs)} is locked by another writer ({exc})",
            "another writer is updating it; pick another",
        ) from None


def lock_timeout(common: str, gitdir: str, refs: list[str], exc: Exception) -> LockHeld:
    """The error for a lock on `refs` still held after the wait: its file and holder when known."""
    found = held(common, gitdir, refs, False)
    if found:
        path, who, todo = found[0]
        return LockHeld(f"could not lock {path}: {who}", todo)
    return LockHeld(
        f"could not lock {', '.join(refs)}: {exc}",
        "another writer has held the lock for a while; try again",
    )


def clear_stale(common: str) -> list[str]:
    """Remove stale ref locks; returns their paths.

    Cleared: any lock a dead git-genjob writer recorded (its pending write never happened, as
    if it had died a moment earlier), and a lock under refs/genjob/ or on refs/notes/genjob(-receipts) that
    no record names once it is older than UNKNOWN_STALE_S.
    """
    records = _records(common)
    cleared = []
    for ref in sorted(_maybe_stale(common, records)):
        state = lock_state(common, ref, records)
        if state is not None and state.stale:
            try:
                os.unlink(state.path)
                cleared.append(state.path)
            except FileNotFoundError:
                pass
    for pid, alive, _names in records:
        if not alive:
            _forget(os.path.join(writers_dir(common), str(pid)))
    return cleared


def _maybe_stale(common: str, records: list[tuple[int, bool, set[str]]]) -> set[str]:
    """The refs whose lock clear_stale judges: the notes refs, every ref a dead writer recorded,
    and each ref under refs/genjob/ with a lock file now."""
    refs = set(NOTES_REFS) | {r for _pid, alive, names in records if not alive for r in names}
    for dirpath, _dirs, files in os.walk(os.path.join(common, GENJOB_PREFIX)):
        rel = os.path.relpath(dirpath, common).replace(os.sep, "/")
        refs |= {f"{rel}/{f[: -len('.lock')]}" for f in files if f.endswith(".lock")}
    return refs


def _since(path: str) -> str | None:
    """When the lock file at `path` was taken, for a message; None once it is gone."""
    try:
        mtime = os.stat(path).st_mtime
    except FileNotFoundError:
        return None
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(mtime))
    return f"since {when} ({max(0.0, time.time() - mtime):.0f}s ago)"


def held(common: str, gitdir: str, refs: list[str], index: bool) -> list[tuple[str, str, str]]:
    """The locks among those a writer will take that exist now: (path, who and since when, the
    one way to clear it). `refs` are ref names (their locks live in the common dir); `index` adds
    this work tree's `index.lock` (in its own git dir), which git holds while `git commit` waits
    for its editor and leaves behind when a git command is killed."""
    found = _index_held(gitdir) if index else []
    records = _records(common)
    for ref in refs:
        state = lock_state(common, ref, records)
        since = _since(state.path) if state is not None else None
        if state is None or since is None:
            continue
        found.append(_ref_held(state, since))
    return found


def _index_held(gitdir: str) -> list[tuple[str, str, str]]:
    """`held`'s line for this work tree's `index.lock`, if it exists."""
    path = os.path.join(gitdir, "index.lock")
    since = _since(path)
    if since is None:
        return []
    return [
        (
            path,
            f"held by a git command (no git-genjob process) {since}",
            "finish the git command that holds it (a `git commit` waiting for its editor, say) and "
            f"run this again; if no git command is running here, a killed git left it: rm {path}",
        )
    ]


def _ref_held(state: LockState, since: str) -> tuple[str, str, str]:
    """`held`'s line for a ref lock: its path, who holds it since when, and how to clear it."""
    if not state.stale and "git-genjob" in state.holder:
        todo = "wait for it to finish, then run this again"
    elif "git-genjob" in state.holder:
        todo = f"git genjob recover clears it (or: rm {state.path})"
    else:
        state = LockState(state.path, state.stale, "a git command (no git-genjob process)")
        todo = f"if no git command is running here, a killed git left it: rm {state.path}"
    return (state.path, f"held by {state.holder} {since}", todo)


def wait_unlocked(common: str, gitdir: str, refs: list[str], index: bool, wait_s: float) -> None:
    """Wait up to `wait_s` for every lock a writer is about to need to be free, as git waits
    briefly for a ref lock (core.filesRefLockTimeout); still held, raise LockHeld naming each
    file, its holder, since when, and how to clear it. Nothing has been written when it raises."""
    deadline = time.monotonic() + wait_s
    while True:
        found = held(common, gitdir, refs, index)
        if not found:
            return
        if time.monotonic() > deadline:
            path, who, todo = found[0]
            raise LockHeld(
                f"{path} is locked: {who}; nothing was written",
                todo,
                details=[f"{p}: {w}; {t}" for p, w, t in found[1:]],
            )
        time.sleep(0.05)
