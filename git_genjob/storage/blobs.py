"""A blob's bytes in bounded memory, and the sha256 digests of many blobs (what verify hashes
and apply copies out): libgit2 inflates a whole object into memory, so a blob larger than
STREAM_ABOVE is read through `git cat-file blob`, a chunk at a time.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Callable, Iterable, Iterator

import pygit2

from git_genjob.documents.errors import BadInput
from git_genjob.storage.gitdir import clean_env
from git_genjob.storage.store import Store

STREAM_ABOVE = 4 * 1024 * 1024  # bytes: a larger blob is read through git, a chunk at a time


def _widen_pipe(fd: int, size: int) -> None:
    """Let a pipe hold `size` bytes (Linux F_SETPIPE_SZ), so a writer is not woken every 64 KiB."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (ImportError, OSError):
        pass  # another system, or above /proc/sys/fs/pipe-max-size: the default size works too


def _digest(chunks: Iterable[bytes | memoryview]) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    for data in chunks:
        h.update(data)
        size += len(data)
    return "sha256:" + h.hexdigest(), size


def blob_chunks(store: Store, oid: pygit2.Oid, chunk: int = 1 << 20) -> Iterator[bytes | memoryview]:
    """A blob's bytes in chunks, in bounded memory.

    libgit2 inflates a whole object into memory, so a blob larger than STREAM_ABOVE is read
    from `git cat-file blob` (see _streamed). A chunk is valid until the next is asked for.
    """
    size = store.blob_size(oid)
    if size <= STREAM_ABOVE:
        yield store.read(oid)
    else:
        yield from _streamed(store.gitdir, oid, size, chunk)


def _streamed(gitdir: str, oid: pygit2.Oid, size: int, chunk: int = 1 << 20) -> Iterator[memoryview]:
    """A blob's stored bytes (no filters) from `git cat-file blob`, a view of one reused buffer
    at a time: git inflates while this process hashes or writes the chunk before. Uses no
    libgit2 object, so it may run in another thread.
    """
    rfd, wfd = os.pipe()
    _widen_pipe(wfd, chunk)
    try:
        proc = subprocess.Popen(
            ["git", "--git-dir", gitdir, "cat-file", "blob", str(oid)],
            stdout=wfd,
            stderr=subprocess.DEVNULL,
            env=clean_env(),
        )
    except BaseException:
        os.close(rfd)
        raise
    finally:
        os.close(wfd)
    buf = bytearray(chunk)
    view = memoryview(buf)
    got = 0
    try:
        while n := os.readv(rfd, [buf]):
            got += n
            yield view[:n]
    finally:
        os.close(rfd)
        proc.kill()
        proc.wait()
    if got != size:
        raise BadInput(f"object {oid}: read {got} of its {size} bytes")


def blob_digests(
    store: Store, oids: Iterable[pygit2.Oid], done: Callable[[int], None] = lambda size: None
) -> dict[pygit2.Oid, tuple[str, int]]:
    """{oid: (sha256:…, size)} of blobs, each hashed while it is read; `done(size)` after each.

    Blobs above STREAM_ABOVE are streamed two at a time: one stream keeps a core busy (git
    inflating on one side of the pipe, sha256 on the other), so a second uses the other core.
    Memory stays bounded: a chunk buffer and a pipe per stream.
    """
    oids = list(oids)
    store.fetch_missing(oids)
    sizes = {oid: store.blob_size(oid) for oid in oids}
    out: dict[pygit2.Oid, tuple[str, int]] = {}
    big = [oid for oid, size in sizes.items() if size > STREAM_ABOVE]
    for oid in sizes.keys() - set(big):
        out[oid] = _digest([store.read(oid)])
        done(sizes[oid])
    if not big:
        return out
    out.update(_streamed_digests(store, big, sizes, done))
    return out


def _streamed_digests(
    store: Store, big: list[pygit2.Oid], sizes: dict[pygit2.Oid, int], done: Callable[[int], None]
) -> dict[pygit2.Oid, tuple[str, int]]:
    """blob_digests' big blobs, streamed two at a time; `done(size)` after each, as it ends."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    out: dict[pygit2.Oid, tuple[str, int]] = {}
    with ThreadPoolExecutor(max_workers=min(2, len(big))) as pool:
        running = {pool.submit(_digest, _streamed(store.gitdir, oid, sizes[oid])): oid for oid in big}
        for fut in as_completed(running):
            out[running[fut]] = fut.result()
            done(sizes[running[fut]])
    return out
