"""Files a user names on the command line: read them (or stdin) with a clear error, write atomically."""

from __future__ import annotations

import os
import sys

from git_genjob.documents.errors import BadInput


def read_text(path: str, what: str) -> str:
    """The UTF-8 text of `path` (`-` is stdin); unreadable input is exit 2 naming `what`."""
    try:
        if path == "-":
            return sys.stdin.read()
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read {what} {path}: {exc}") from None


def write_atomic(path: str, data: bytes | str) -> None:
    """Write through a temporary file and a rename: never a half-written file."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data.encode("utf-8") if isinstance(data, str) else data)
    os.replace(tmp, path)
