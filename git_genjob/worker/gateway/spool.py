"""An answer on its way from the upstream, spooled to disk as it arrives (SPEC §12.1).

The gateway never holds an answer whole: each chunk goes to the agent (streamed answers), to
the replay record (the canonical answer document, its body JSON-escaped as it comes, hashed as
it is written), through the secret scan (in blocks that overlap), and through the usage reader
(the SSE lines that carry `usage`). An answer over the limit is cut where it crosses it, so an
endless one costs the limit in disk and a chunk in memory. A small answer (its document at most
INLINE_MAX bytes, most of a chat's) stays in memory: its row in the journal carries it, one
write and one fsync where a file would cost three (SPEC §12.1's order holds: the row is the
record)."""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import IO

from git_genjob.documents.canonical import canonical_bytes
from git_genjob.documents.errors import BadInput
from git_genjob.documents.secretscan import find_secret
from git_genjob.storage.locks import running
from git_genjob.worker.gateway.dialects import usage_of

SCAN_BLOCK = 1024 * 1024  # scanned at once; OVERLAP of each block is scanned again with the next
OVERLAP = 64 * 1024  # longer than any credential pattern the scan knows
LINE_MAX = 1024 * 1024  # an SSE line longer than this carries no usage worth reading
PLAIN_USAGE_MAX = 16 * 1024 * 1024  # a plain answer's usage is read from a JSON document this size at most
HEAD = b'{"body":"'  # "body" sorts first of the answer document's keys (canonical JSON)
INLINE_MAX = 16 * 1024  # an answer document up to this size is kept in memory, then in its journal row


class _Sink:
    """Bytes kept in memory up to `spill` bytes, then in a file of `folder` (`path`) made the
    moment they pass it: a small answer never touches the disk until it is recorded."""

    def __init__(self, folder: str, prefix: str, spill: int):
        self.folder, self.prefix, self.spill = folder, prefix, spill
        self.buf: bytearray | None = bytearray()
        self.fh: IO[bytes] | None = None
        self.path: str | None = None

    def write(self, data: bytes) -> None:
        if self.buf is not None and len(self.buf) + len(data) <= self.spill:
            self.buf += data
            return
        if self.fh is None:
            os.makedirs(self.folder, exist_ok=True)
            fd, self.path = tempfile.mkstemp(dir=self.folder, prefix=self.prefix)
            self.fh = os.fdopen(fd, "w+b")
            self.fh.write(self.buf or b"")
            self.buf = None
        self.fh.write(data)

    def held(self) -> bytes | None:
        """The bytes, when they are all still in memory."""
        return bytes(self.buf) if self.buf is not None else None

    def chunks(self, size: int = 64 * 1024) -> Iterator[bytes]:
        """The bytes written, from the start."""
        if self.fh is None:
            yield bytes(self.buf or b"")
            return
        self.fh.flush()
        self.fh.seek(0)
        while chunk := self.fh.read(size):
            yield chunk

    def close(self) -> None:
        if self.fh is not None and not self.fh.closed:
            self.fh.close()


class TooBig(Exception):
    pass


class Spool:
    def __init__(
        self, folder: str, limit: int, dialect: str, stream: bool, keys: tuple[bytes, ...] = (), recording: bool = True
    ):
        self.limit, self.dialect, self.stream = limit, dialect, stream
        self.recording = recording  # an error answer is passed through as it is, never recorded
        self.keys = tuple(k for k in keys if len(k) >= 8)  # the worker's own keys: never recorded, whatever their form
        self.folder = folder
        self.record = _Sink(folder, f"answer-{os.getpid()}-", INLINE_MAX)
        # a plain answer's bytes, replayed to the agent once recorded: in memory up to a chunk
        self.raw = None if stream else _Sink(folder, f"answer-{os.getpid()}-raw-", 1024 * 1024)
        self.path: str | None = None  # the answer document's file, once `move` put it in place
        self.record.write(HEAD)
        self.hash = hashlib.sha256(HEAD)
        self.decoder = codecs.getincrementaldecoder("utf-8")()
        self.size = 0
        self.scan = bytearray()
        self.secret: str | None = None
        self.line = bytearray()
        self.skipping = False  # inside an SSE line past LINE_MAX
        self.tokens: tuple[int | None, int | None] = (None, None)
        self.kept = False  # moved out by keep(): no longer the spool's to remove

    def add(self, data: bytes) -> None:
        """One chunk; TooBig past the limit, UnicodeDecodeError when it is not UTF-8 text."""
        self.size += len(data)
        if self.size > self.limit:
            raise TooBig
        if self.raw is not None:
            self.raw.write(data)
        if not self.recording:
            return
        self._write(self.decoder.decode(data))
        self._scan(data)
        if self.stream:
            self._lines(data)

    def _write(self, text: str) -> None:
        if text:
            escaped = json.dumps(text, ensure_ascii=False)[1:-1].encode("utf-8")
            self.record.write(escaped)
            self.hash.update(escaped)

    def _scan(self, data: bytes, final: bool = False) -> None:
        self.scan += data
        if self.secret is None and (len(self.scan) >= SCAN_BLOCK or final):
            block = bytes(self.scan)
            self.secret = "worker's upstream key" if any(k in block for k in self.keys) else find_secret(block)
            del self.scan[: max(0, len(self.scan) - OVERLAP)]

    def _lines(self, data: bytes) -> None:
        """The SSE lines `data` completes, read for usage (only when one of them names it: a
        real stream is thousands of short lines a MiB); the line it leaves open carried on."""
        cut = data.rfind(b"\n")
        if cut != -1:
            head, data = data[:cut], data[cut + 1 :]
            if self.skipping:  # the first line it completes is past LINE_MAX: not read
                first = head.find(b"\n")
                lines = head[first + 1 :] if first != -1 else b""
            else:
                lines = bytes(self.line) + head
            self.line.clear()
            self.skipping = False
            if b"usage" in lines:
                for part in lines.split(b"\n"):
                    self._usage_line(part)
        if self.skipping:
            return
        self.line += data
        if len(self.line) > LINE_MAX:
            self.line.clear()
            self.skipping = True

    def _usage_line(self, line: bytes) -> None:
        if line.startswith(b"data:") and b"usage" in line:
            found = usage_of(self.dialect, line, True)
            self.tokens = (found[0] if found[0] is not None else self.tokens[0],
                           found[1] if found[1] is not None else self.tokens[1])  # fmt: skip

    def finish(self, status: int, content_type: str, paths: list[str] | None = None) -> str:
        """The answer document's sha256, once its last byte is on disk (at `self.path`); BadInput
        when the answer looks like it holds a credential (SPEC §7: never stored)."""
        self._write(self.decoder.decode(b"", final=True))
        self._scan(b"", final=True)
        if self.stream and self.line and not self.skipping:
            self._usage_line(bytes(self.line))
        if self.raw is not None and self.size <= PLAIN_USAGE_MAX:
            self.tokens = usage_of(self.dialect, b"".join(self.raw.chunks()), False)
        if self.secret:
            raise BadInput(
                f"refusing to store an answer that looks like a {self.secret}",
                "the replay cache is shared through git; the agent got a 502 and nothing was recorded",
            )
        doc: dict[str, object] = {
            "content_type": content_type,
            "input_tokens": self.tokens[0],
            "output_tokens": self.tokens[1],
            "status": status,
            "stream": self.stream,
        }
        if paths:  # the attempt's own paths the answer may name: a replay puts its own in their place
            doc["volatile_paths"] = paths
        tail = canonical_bytes(doc)
        end = b'",' + tail[1:]
        self.record.write(end)
        self.hash.update(end)
        return self.hash.hexdigest()

    def inline(self) -> bytes | None:
        """The finished answer document when it is small enough to be held (INLINE_MAX): its
        journal row carries it, and no file is made."""
        return self.record.held()

    def file(self) -> str:
        """The finished answer document in a file of its own (written out now when it was held),
        not yet durable: `sync` makes it so."""
        if self.record.path is None:
            os.makedirs(self.folder, exist_ok=True)
            fd, path = tempfile.mkstemp(dir=self.folder, prefix=f"answer-{os.getpid()}-")
            with os.fdopen(fd, "wb") as fh:
                fh.write(self.record.held() or b"")
            self.record.path = path
        elif self.record.fh is not None:
            self.record.fh.flush()
        return self.record.path

    def sync(self) -> None:
        """The finished answer document's file on disk, closed."""
        fh = self.record.fh
        if fh is not None and not fh.closed:
            fh.flush()
            os.fsync(fh.fileno())
        else:  # written out whole by `file`
            assert self.path is not None
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.record.close()

    def move(self, folder: str, name: str) -> str:
        """The finished answer document's file renamed to `folder/name` (not yet durable: the
        caller fsyncs `folder` and `sync`s the file before a journal row names it)."""
        os.makedirs(folder, exist_ok=True)
        dest = os.path.join(folder, name)
        os.replace(self.file(), dest)
        self.path = self.record.path = dest
        self.kept = True
        return dest

    def replay_to(self, write: Callable[[bytes], object]) -> None:
        """The raw bytes of a plain answer, in chunks, to `write` (the agent's connection)."""
        assert self.raw is not None
        for chunk in self.raw.chunks():
            write(chunk)

    def close(self) -> None:
        for sink in (self.record, self.raw):
            if sink is not None:
                sink.close()
                if sink.path is not None and not (sink is self.record and self.kept):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(sink.path)


def sweep_spools(folder: str) -> None:
    """Drop the spools of workers that died mid-answer (partial, never served): a name carries
    the pid of the process that made it."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return
    for name in names:
        pid = name.split("-")[1] if name.startswith("answer-") and name.count("-") >= 2 else ""
        if pid.isdigit() and pid.isascii() and int(pid) != os.getpid() and not running(int(pid)):
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
