"""Durable writes with one flush per ref update instead of two fsyncs per object (issue 24).

A ref may point only at objects that are on disk, and a ref update that returns must itself be
on disk (a `sending` event is durable before the first byte goes to a generator). libgit2's one
switch, `enable_fsync_gitdir`, fsyncs every loose object file and its directory when it is on:
an event of five objects costs ten fsyncs before its ref moves, and a round trip about 64.

Where the kernel offers `syncfs(2)` (Linux), libgit2 writes objects, refs and reflogs without
fsync, and each ref update flushes the file system that holds them twice: once before the ref
transaction commits (every object the new value names is on disk before the ref is: the order
git's own `core.fsyncMethod=batch` keeps) and once after (the ref, its reflog and the directory
entries are on disk before the update returns). Two flushes per update instead of one flush and
the lock file, directory and reflog fsyncs libgit2 makes for each ref. Elsewhere (no `syncfs`)
libgit2 fsyncs everything, as before.

`GENJOB_FSYNC=each` keeps libgit2's per-object fsync everywhere (to compare, or on a file system
where a flush of the whole file system is worse than many small ones).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading

import pygit2

_LOCK = threading.Lock()
_state: dict[str, object] = {}


def _syncfs() -> object | None:
    if "fn" not in _state:
        fn = None
        if os.environ.get("GENJOB_FSYNC") != "each" and os.uname().sysname == "Linux":
            with contextlib.suppress(OSError, AttributeError):
                fn = ctypes.CDLL(None, use_errno=True).syncfs
        _state["fn"] = fn
    return _state["fn"]


def batched() -> bool:
    """Whether objects are written without fsync and flushed once per ref update."""
    return _syncfs() is not None


def open_repository(path: str) -> pygit2.Repository:
    """`path` opened so that libgit2 fsyncs everything it writes, or, in batch mode, nothing
    (`before_ref_commit` and `after_ref_commit` flush instead).

    libgit2 decides a repository's ref fsync when it first reads a ref (the refs backend keeps
    the switch's value then) and an object's at each write, so the switch is set while the refs
    backend is made, under the process's lock."""
    with _LOCK:
        pygit2.settings.enable_fsync_gitdir(not batched())
        repo = pygit2.Repository(path)
        repo.references.get("HEAD")  # makes the refs backend now, with the switch as set
    return repo


def flush(directory: str) -> None:
    """Everything written to the file system holding `directory` reaches the disk (syncfs)."""
    fn = _syncfs()
    if fn is None:
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if fn(fd) != 0:  # type: ignore[operator]
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs {directory}: {os.strerror(err)}")
    finally:
        os.close(fd)


def before_ref_commit(objects_dir: str) -> None:
    """The last step before a ref transaction commits: every object it may name is on disk."""
    if batched():
        flush(objects_dir)


def after_ref_commit(common_dir: str) -> None:
    """The first step after a ref transaction committed: the refs, their reflogs and the
    directory entries are on disk before the update returns (libgit2 did not fsync them).
    `common_dir` holds them; the objects may live on another file system (a symlinked
    `objects/`), which `before_ref_commit` flushed."""
    if batched():
        flush(common_dir)
