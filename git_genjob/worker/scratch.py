"""Scratch directories named by their process, so the next run cleans up after a SIGKILL."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from dataclasses import dataclass

from git_genjob.storage.locks import running

SCRATCH_PREFIX = "genjob-scratch-"


def scratch_dir() -> str:
    """A private scratch directory named by this process, so a later worker can clean up after a kill."""
    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-")


def clean_stale_scratch() -> list[str]:
    """Remove scratch directories of workers that are no longer running (a SIGKILL skips `finally`)."""
    root = tempfile.gettempdir()
    removed = []
    for name in os.listdir(root):
        if not _left_by_a_dead_worker(name):
            continue
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path) and os.stat(path).st_uid == os.getuid():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _left_by_a_dead_worker(name: str) -> bool:
    """Whether `name` is a scratch directory's, named by a process that is no longer running."""
    if not name.startswith(SCRATCH_PREFIX):
        return False
    pid = name[len(SCRATCH_PREFIX) :].split("-", 1)[0]
    return pid.isdigit() and int(pid) != os.getpid() and not running(int(pid))


def scratch_entries(root: str) -> list[str]:
    """Every entry of the scratch tree that is not a directory (symlinks to directories
    included), relative, walked through directory descriptors: a directory swapped for a
    symlink while the walk runs is never followed (os.fwalk checks each one it enters)."""
    out = []
    for dirpath, dirnames, filenames, dirfd in os.fwalk(root, follow_symlinks=False):
        links = []
        for name in dirnames:
            try:
                if stat.S_ISLNK(os.stat(name, dir_fd=dirfd, follow_symlinks=False).st_mode):
                    links.append(name)
            except OSError:
                continue
        for name in sorted(filenames + links):
            out.append(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/"))
    return out


@dataclass
class ReadBack:
    """One allowed path as the worker read it: `data` is None when it is not a regular file
    (`regular` False) or is over the limit (`size` says how big it was when looked at)."""

    regular: bool
    size: int
    data: bytes | None


def read_back(root: str, rel: str, limit: int) -> ReadBack | None:
    """An allowed path read through descriptors: each directory opened with O_NOFOLLOW from the
    one before, the file with O_NOFOLLOW|O_NONBLOCK and judged by fstat of that descriptor. A
    symlink swapped in after the walk fails to open, a FIFO opens without blocking and is not a
    regular file: an escaped child racing the worker can neither get a host file signed nor hang
    it. None: the path is gone."""
    parts = rel.split("/")
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(root, flags | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            except OSError:
                return ReadBack(False, 0, None)  # a leading directory became a symlink or a file
            os.close(fd)
            fd = nxt
        try:
            file_fd = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
        except FileNotFoundError:
            return None
        except OSError:
            return ReadBack(False, 0, None)  # ELOOP: a symlink; or something that cannot be opened
        try:
            return _read_open_file(file_fd, limit)
        finally:
            os.close(file_fd)
    finally:
        os.close(fd)


def _read_open_file(fd: int, limit: int) -> ReadBack:
    """The open file judged by fstat of its descriptor: a regular file's bytes, unless it is (or
    grows, while read) over `limit`."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        return ReadBack(False, st.st_size, None)
    if st.st_size > limit:
        return ReadBack(True, st.st_size, None)
    data = _read_at_most(fd, limit + 1)
    if len(data) > limit:
        return ReadBack(True, len(data), None)
    return ReadBack(True, len(data), data)


def _read_at_most(fd: int, n: int) -> bytes:
    """Up to `n` bytes from `fd`, less when it ends first."""
    chunks, size = [], 0
    while size < n:
        chunk = os.read(fd, min(1 << 20, n - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
