"""Durable writes with one flush per ref update instead of two fsyncs per object (issue 24).

A ref may point only at objects that are on disk, and a ref update that returns must itself be
on disk (a `sending` event is durable before the first byte goes to a generator). libgit2's one
switch, `enable_fsync_gitdir`, fsyncs every loose object file and its directory when it is on:
an event of five objects costs ten fsyncs before its ref moves, and a round trip about 64.

Where the kernel offers `syncfs(2)` (Linux), objects are written without fsync and each ref
update first flushes the file system that holds them, once, then commits the ref with libgit2's
fsync on (lock file and directory, as before). This is the order git's own
`core.fsyncMethod=batch` keeps: every object a ref names is durable before the ref is. libgit2
reads the switch for refs once per repository and for objects at each write, which is what
`open_repository` uses. Elsewhere (no `syncfs`) libgit2 fsyncs everything, as before.

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
    """`path` opened so that its refs are fsynced and, in batch mode, its objects are not.

    libgit2 decides a repository's ref fsync when it first reads a ref (the refs backend keeps
    the switch's value then) and an object's at each write (the switch's value now). So the
    switch is on while the refs backend is made, and off again after, under the process's lock."""
    with _LOCK:
        pygit2.settings.enable_fsync_gitdir(True)
        try:
            repo = pygit2.Repository(path)
            repo.references.get("HEAD")  # makes the refs backend now, with fsync on
        finally:
            pygit2.settings.enable_fsync_gitdir(not batched())
    return repo


def flush(objects_dir: str) -> None:
    """Everything written to the file system holding `objects_dir` reaches the disk (syncfs)."""
    fn = _syncfs()
    if fn is None:
        return
    fd = os.open(objects_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if fn(fd) != 0:  # type: ignore[operator]
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs {objects_dir}: {os.strerror(err)}")
    finally:
        os.close(fd)


def before_ref_commit(objects_dir: str) -> None:
    """The last step before a ref transaction commits: every object it may name is on disk."""
    if batched():
        flush(objects_dir)
